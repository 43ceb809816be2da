#!/bin/sh
# Jitter-magnitude sweep for tools/reproduce/DROP-BIAS.md (Tollgate, NewReno
# 10 vs 100 ms, 300 s measured from 60 s). Needs TOLLGATE as for
# drop-bias-grid.sh. One run at a time.
set -e
here=$(cd "$(dirname "$0")" && pwd)
E="$here/../scenarios/investigate/exp.py"
echo "| jitter | buffer | seed | long RTT | drops s/l | drops per 1000 pkts s/l | goodput s/l Mbit/s | ratio | AF rx s/l |"
echo "|---|---|---|---|---|---|---|---|---|"
for j in 60us 120us 240us 500us 1ms 2ms; do
  python3 "$E" 0.2bdp 1 --topo "jitter = \"$j\"" --label "$j"
done
for s in 2 3; do for j in 240us 1ms; do
  python3 "$E" 0.2bdp "$s" --topo "jitter = \"$j\"" --label "$j"
done; done
for b in 0.5bdp 1bdp 2bdp; do
  python3 "$E" "$b" 1 --topo 'jitter = "1ms"' --label 1ms
done
