#!/bin/sh
# The ns-3 TCP Libra table of LIBRA.md: two flows (10 and 100 ms RTT) on the
# 100 Mbit/s drop-tail dumbbell, Libra with the capacity configured
# (100 Mbit/s) on both, buffers 0.2 / 0.5 / 1 / 2 BDP of the 100 ms flow
# (167 / 417 / 834 / 1667 packets, Tollgate's counts: 1.25 MB per BDP in
# 1,500-byte packets), 120 µs of timing noise per access link, an ACK per
# segment, no TCP timestamps (exact RTT samples), each flow starting at a
# random time in [0, 1) s as Tollgate's scenario does, 300 s measured from
# 60 s, runs 1-5; and NewReno at 1 BDP with the same settings for reference.
#
# Usage: libra-runs.sh [OUTDIR]   (default: ./libra-out)
# ROWS="cca:buf ..." and RUNS="1 2 ..." choose a subset; a run whose output
# file exists is skipped, so an interrupted table resumes. One run at a time
# (about 5-10 minutes of one core for 300 simulated seconds).
# The table is printed at the end by libra-table.py.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${1:-libra-out}
mkdir -p "$OUTDIR"
BIN=${BIN:-$OUTDIR/dumbbell}
[ -x "$BIN" ] || OUT="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" "$HERE/build.sh"
ROWS=${ROWS:-"libra:834 libra:167 newreno:834 libra:417 libra:1667"}
RUNS=${RUNS:-"1 2 3 4 5"}
for row in $ROWS; do
    cca=${row%%:*}
    buf=${row#*:}
    for run in $RUNS; do
        f="$OUTDIR/$cca-b$buf-r$run.txt"
        [ -s "$f" ] && continue
        cmd="--rtts=10,100 --cca=$cca --libraCapMbps=100 --buf=$buf --duration=300 --from=60 --delack=1 --jitterUs=120 --timestamps=0 --startJitter=1 --run=$run"
        echo "./dumbbell $cmd" >&2
        { echo "# ./dumbbell $cmd"; "$BIN" $cmd; } > "$f.part"
        mv "$f.part" "$f"
    done
done
python3 "$HERE/libra-table.py" "$OUTDIR"
