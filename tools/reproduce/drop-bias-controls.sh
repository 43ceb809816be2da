#!/bin/sh
# Controls for tools/reproduce/DROP-BIAS.md (Tollgate, NewReno, 0.2 BDP,
# 300 s measured from 60 s, default jitter). Needs TOLLGATE as for
# drop-bias-grid.sh. One run at a time.
set -e
here=$(cd "$(dirname "$0")" && pwd)
E="$here/../scenarios/investigate/exp.py"
echo "| variant | buffer | seed | long RTT | drops s/l | drops per 1000 pkts s/l | goodput s/l Mbit/s | ratio | AF rx s/l |"
echo "|---|---|---|---|---|---|---|---|---|"
# 1. the sub-slot RTT shifts that flip ns-3's outcome
for r in 100030us 100060us 100090us; do
  python3 "$E" 0.2bdp 1 --rtt-long "$r" --label "long RTT shifted"
done
# 2. equal RTTs: no flow should be singled out
python3 "$E" 0.2bdp 1 --rtt-short 100ms --rtt-long 100ms --label "equal RTT 100/100 ms"
python3 "$E" 0.2bdp 1 --rtt-short 10ms --rtt-long 10ms --label "equal RTT 10/10 ms"
# 3. one ACK per packet (short flow starts at 2 s so both ACK_FREQUENCY requests arrive)
for s in 1 2 3; do
  python3 "$E" 0.2bdp "$s" --flow 'prompt_acks = "always"' --short 'start = "2s"' --label "ACK every packet"
done
