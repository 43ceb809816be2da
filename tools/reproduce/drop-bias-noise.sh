#!/bin/sh
# The drop-bias grid under the default timing noise scaled 0.5x, 1x and 2x
# (topology.noise_scale and path_noise_scale together): NewReno 10 vs 100 ms,
# 100 Mbit/s drop-tail at 0.2/0.5/1/2 BDP, one row per (scale, buffer, seed).
# usage: drop-bias-noise.sh DURATION FROM "SEEDS" "SCALES"
#   e.g. drop-bias-noise.sh 300s 60 "1 2 3" "0.5 1 2"
# Needs TOLLGATE=/path/to/tollgate (a copy of target/release/tollgate in a
# scratch directory: exp.py writes its runs next to it). One run at a time;
# run several invocations (one per scale) to use more cores.
set -e
here=$(cd "$(dirname "$0")" && pwd)
E="$here/../scenarios/investigate/exp.py"
dur=${1:-300s}; from=${2:-60}; seeds=${3:-"1 2 3"}; scales=${4:-"0.5 1 2"}
echo "| noise scale | buffer | seed | long RTT | drops s/l | drops per 1000 pkts s/l | goodput s/l Mbit/s | ratio | AF rx s/l |"
echo "|---|---|---|---|---|---|---|---|---|"
for x in $scales; do for b in 0.2bdp 0.5bdp 1bdp 2bdp; do for s in $seeds; do
  python3 "$E" "$b" "$s" --duration "$dur" --from "$from" \
    --topo "noise_scale = $x" --topo "path_noise_scale = $x" --label "$x"
done; done; done
