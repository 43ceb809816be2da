#!/bin/sh
# Tollgate side of tools/reproduce/DROP-BIAS.md: NewReno 10 vs 100 ms,
# 100 Mbit/s drop-tail at 0.2/0.5/1/2 BDP, one row per (jitter, buffer, seed).
# usage: drop-bias-grid.sh DURATION FROM "SEEDS" "JITTERS"
#   e.g. drop-bias-grid.sh 300s 60 "1 2 3" "auto 0s"
# Needs TOLLGATE=/path/to/tollgate (a copy of target/release/tollgate in a
# scratch directory: exp.py writes its runs next to it). One run at a time.
set -e
here=$(cd "$(dirname "$0")" && pwd)
E="$here/../scenarios/investigate/exp.py"
dur=${1:-300s}; from=${2:-60}; seeds=${3:-"1 2 3"}; jitters=${4:-"auto"}
echo "| jitter | buffer | seed | long RTT | drops s/l | drops per 1000 pkts s/l | goodput s/l Mbit/s | ratio | AF rx s/l |"
echo "|---|---|---|---|---|---|---|---|---|"
for j in $jitters; do for b in 0.2bdp 0.5bdp 1bdp 2bdp; do for s in $seeds; do
  python3 "$E" "$b" "$s" --duration "$dur" --from "$from" --topo "jitter = \"$j\"" --label "$j"
done; done; done
