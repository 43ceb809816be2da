#!/usr/bin/env python3
"""Phase of each flow's arrivals at the bottleneck port relative to the
port's transmissions (TOLLGATE_TRACE file): for every arrival, the time since
the latest transmission start, in µs, as a histogram per flow, for all
arrivals and for the dropped ones. A deterministic network (fixed delays,
no jitter) locks each flow's ACK-clocked arrivals to a fixed phase of the
departure grid (Floyd & Jacobson's phase effect)."""
import sys
from collections import Counter, defaultdict

path = sys.argv[1]
bucket = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0  # µs
last_d = None
hist = defaultdict(Counter)
dhist = defaultdict(Counter)
with open(path) as f:
    for line in f:
        p = line.split(',')
        if p[0] == 'D':
            last_d = int(p[1])
        elif p[0] == 'A' and last_d is not None:
            t, fl, d = int(p[1]), int(p[2]), p[4] == '1'
            off = (t - last_d) / 1000
            b = round(int(off // bucket) * bucket, 3)
            if off > 130:
                b = 130  # port idle before this arrival
            hist[fl][b] += 1
            if d:
                dhist[fl][b] += 1
keys = sorted({k for h in hist.values() for k in h})
print("µs since last TX start | " + " | ".join(f"flow {fl} arrivals (drops)" for fl in sorted(hist)))
for k in keys:
    label = f">=130 (idle)" if k == 130 else f"{k}-{k+bucket}"
    print(f"{label:>22} | " + " | ".join(
        f"{hist[fl][k]/sum(hist[fl].values())*100:6.2f}% ({dhist[fl][k]})" for fl in sorted(hist)))
