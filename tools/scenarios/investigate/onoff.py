#!/usr/bin/env python3
"""Time-scale burstiness of each flow's arrivals at the bottleneck, from a
TOLLGATE_TRACE file (tools/src/sim/trace.rs): arrivals per BIN ms (default 5),
the fraction of bins in which the flow sent nothing, the coefficient of
variation of the per-bin counts, and the flow's share of all arrivals overall
versus in the WIN ms (default 2) before each drop. A flow whose share near
drops exceeds its overall share is the one whose arrivals make the queue
overflow: drop-tail drops whoever arrives while it is full.

usage: onoff.py TRACE [BIN_MS] [WIN_MS]"""
import bisect
import statistics
import sys
from collections import defaultdict

path = sys.argv[1]
bin_ns = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 5_000_000
win_ns = int(float(sys.argv[3]) * 1e6) if len(sys.argv) > 3 else 2_000_000

arr = defaultdict(list)   # flow -> arrival times
drops = []                # (t, flow)
with open(path) as f:
    for line in f:
        if line.startswith('A,'):
            p = line.split(',')
            t, fl = int(p[1]), int(p[2])
            arr[fl].append(t)
            if p[4] == '1':
                drops.append((t, fl))
if not arr:
    sys.exit('no arrivals in trace')
t0 = min(v[0] for v in arr.values())
t1 = max(v[-1] for v in arr.values())
nb = (t1 - t0) // bin_ns + 1
total = sum(len(v) for v in arr.values())
print(f"bins of {bin_ns/1e6:g} ms, window before drops {win_ns/1e6:g} ms, {len(drops)} drops")
print("| flow | arrivals | share | empty bins | CV of bin counts | share in windows before drops | drops | drops/1000 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for fl in sorted(arr):
    counts = [0] * nb
    for t in arr[fl]:
        counts[(t - t0) // bin_ns] += 1
    empty = sum(1 for c in counts if c == 0) / nb
    mean = statistics.fmean(counts)
    cv = statistics.pstdev(counts) / mean if mean else 0
    # share of arrivals in [t_drop - win, t_drop] over all drops (each window counted once per drop)
    mine = other = 0
    for td, _ in drops:
        for g, ts in arr.items():
            n = bisect.bisect_right(ts, td) - bisect.bisect_left(ts, td - win_ns)
            if g == fl:
                mine += n
            else:
                other += n
    near = mine / (mine + other) if mine + other else float('nan')
    nd = sum(1 for _, g in drops if g == fl)
    print(f"| {fl} | {len(arr[fl])} | {len(arr[fl])/total:.3f} | {empty:.3f} | {cv:.2f} | {near:.3f} | {nd} | {nd/len(arr[fl])*1e3:.3f} |")
