#!/usr/bin/env python3
"""Summarise a TOLLGATE_TRACE file (see tools/src/sim/trace.rs and
tools/docs/droptail-drops.md): per-flow drops, what the queue looked like at
each drop, how bursty each flow's arrivals are at the bottleneck."""
import sys
from collections import Counter, defaultdict, deque

path = sys.argv[1]
window_ns = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 1_000_000

arr = defaultdict(int)          # arrivals per flow
drops = defaultdict(int)
full_seen = defaultdict(int)    # arrivals that saw qlen >= max_q - 2
burst_sizes = defaultdict(Counter)  # packets emitted at the same instant, per flow
cur_burst = {}                  # flow -> (sent_ns, count)
recent = deque()                # (t, flow) arrivals within window
drop_ctx = defaultdict(list)    # flow -> list of (same-flow arrivals in window, other-flow arrivals)
drop_burstpos = defaultdict(Counter)  # position of the dropped packet within its emission burst
gaps = defaultdict(Counter)     # inter-arrival gap at the port, µs bucket
last_arr = {}
max_q = 0
acks = defaultdict(int)
ack_gap = defaultdict(Counter)
last_ack = {}
lines = []
with open(path) as f:
    for line in f:
        p = line.rstrip().split(',')
        if p[0] == 'A':
            t, fl, q, d, s = int(p[1]), int(p[2]), int(p[3]), p[4] == '1', int(p[5])
            max_q = max(max_q, q)
            lines.append((t, fl, q, d, s))
        elif p[0] == 'K':
            t, fl = int(p[1]), int(p[2])
            acks[fl] += 1
            if fl in last_ack:
                g = (t - last_ack[fl]) // 1000
                ack_gap[fl][min(g, 1000)] += 1
            last_ack[fl] = t

for t, fl, q, d, s in lines:
    arr[fl] += 1
    if q >= max_q - 2:
        full_seen[fl] += 1
    b = cur_burst.get(fl)
    if b and b[0] == s:
        pos = b[1]
        cur_burst[fl] = (s, b[1] + 1)
    else:
        if b:
            burst_sizes[fl][b[1]] += 1
        pos = 0
        cur_burst[fl] = (s, 1)
    if fl in last_arr:
        g = (t - last_arr[fl]) // 1000
        gaps[fl][min(g, 1000)] += 1
    last_arr[fl] = t
    while recent and recent[0][0] < t - window_ns:
        recent.popleft()
    if d:
        drops[fl] += 1
        same = sum(1 for _, f2 in recent if f2 == fl)
        other = len(recent) - same
        drop_ctx[fl].append((same, other))
        drop_burstpos[fl][pos] += 1
    recent.append((t, fl))
for fl, b in cur_burst.items():
    burst_sizes[fl][b[1]] += 1

print(f"queue limit seen: {max_q} packets (max qlen at an arrival)")
for fl in sorted(arr):
    n = arr[fl]
    bs = burst_sizes[fl]
    nb = sum(bs.values())
    mean_b = sum(k * v for k, v in bs.items()) / max(nb, 1)
    top = ', '.join(f"{k}:{v}" for k, v in sorted(bs.items())[:12])
    print(f"flow {fl}: arrivals {n}, drops {drops[fl]} ({drops[fl]/n*1e3:.3f}/1000), "
          f"arrivals seeing q>=limit-2: {full_seen[fl]} ({full_seen[fl]/n*100:.2f}%)")
    print(f"   emission bursts (packets sent at one instant): mean {mean_b:.2f}; size:count {top}")
    g = gaps[fl]
    tot = sum(g.values())
    cdf = []
    acc = 0
    for k in sorted(g):
        acc += g[k]
        cdf.append((k, acc / tot))
    def q_at(x):
        for k, c in cdf:
            if c >= x:
                return k
        return cdf[-1][0]
    print(f"   inter-arrival at port (µs): p10 {q_at(.1)} p50 {q_at(.5)} p90 {q_at(.9)} p99 {q_at(.99)}; "
          f"<20µs {sum(v for k, v in g.items() if k < 20)/tot*100:.1f}%")
    if drop_ctx[fl]:
        ctx = drop_ctx[fl]
        print(f"   at its drops: mean own arrivals in prior {window_ns/1e6:g} ms {sum(a for a,_ in ctx)/len(ctx):.1f}, "
              f"other flow's {sum(b for _,b in ctx)/len(ctx):.1f}; position in emission burst {dict(sorted(drop_burstpos[fl].items()))}")
    if acks[fl]:
        ag = ack_gap[fl]
        tot = sum(ag.values())
        print(f"   datagrams to sender: {acks[fl]} ({n/acks[fl]:.2f} data packets per ACK datagram)")
