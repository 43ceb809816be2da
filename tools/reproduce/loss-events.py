#!/usr/bin/env python3
"""Loss episodes and windows per flow, from a Tollgate or an ns-3 trace.

Reads Tollgate's emulator trace (TOLLGATE_TRACE; tools/src/sim/trace.rs:
`A,t_ns,flow,qlen,dropped,sent_ns` and `K,t_ns,flow,cwnd,in_flight` lines)
or the ns-3 dumbbell's (`tools/reproduce/ns3/dumbbell.cc --trace`: `X,t_ns,flow`
and `C,t_ns,flow,cwnd_bytes` lines), both written from the measurement start
on, and prints per flow:

- drops at the bottleneck;
- loss episodes: the bottleneck's drops grouped into episodes (a drop more
  than --gap seconds after the previous one starts a new episode); how many
  episodes hit the flow (it lost at least one packet), and its drops per
  episode hit;
- the flow's window (1,448-byte packets): mean, and mean of the samples just
  before and just after each episode that hit it (the reduction the CCA made);
- its growth between two hits: from the sample after one to the sample
  before the next, packets per second (the CCA's increase rule at work).

Windows are read every 100 ms (ns-3's samples; Tollgate's last value at
or before each 100-ms grid time).

Usage: loss-events.py TRACE [--names newreno,highspeed,cubic] [--gap 0.5]
"""
import argparse
import bisect
import sys

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('trace')
ap.add_argument('--names', default='newreno,highspeed,cubic', help='flow names, in flow order')
ap.add_argument('--gap', type=float, default=0.5, help='seconds without a drop that end an episode')
a = ap.parse_args()
names = a.names.split(',')
n = len(names)
PKT = 1448
GRID = 100_000_000  # ns

drops = []  # (t_ns, flow)
cwnd = [[] for _ in range(n)]  # (t_ns, bytes) on the 100-ms grid
last = [None] * n  # Tollgate: last window seen per flow
next_grid = [None] * n


def flow_of(field):
    """A flow index from the trace, which --names must cover."""
    fl = int(field)
    if not 0 <= fl < n:
        sys.exit(f'{a.trace}: the trace has flow {fl}, but --names names {n} flows (0-{n - 1}); '
                 'give one name per flow')
    return fl


def parse(line):
    """Take one trace line into `drops` and `cwnd`."""
    p = line.split(',')
    k = p[0]
    if k == 'A':
        if p[4] == '1':
            drops.append((int(p[1]), flow_of(p[2])))
    elif k == 'X':
        drops.append((int(p[1]), flow_of(p[2])))
    elif k == 'C':
        cwnd[flow_of(p[2])].append((int(p[1]), int(p[3])))
    elif k == 'K':
        t, fl, w = int(p[1]), flow_of(p[2]), int(p[3])
        if next_grid[fl] is None:
            next_grid[fl] = (t // GRID + 1) * GRID
        while t >= next_grid[fl]:
            if last[fl] is not None:
                cwnd[fl].append((next_grid[fl], last[fl]))
            next_grid[fl] += GRID
        last[fl] = w


skipped = 0  # lines that are not whole records (e.g. the last one of a trace still being written)
with open(a.trace) as f:
    for line in f:
        try:
            parse(line)
        except (ValueError, IndexError):
            skipped += 1

drops.sort()
episodes = []  # list of (start, end, per-flow drop counts)
for t, fl in drops:
    if not episodes or t - episodes[-1][1] > a.gap * 1e9:
        episodes.append([t, t, [0] * n])
    episodes[-1][1] = t
    episodes[-1][2][fl] += 1

span = (max(t for c in cwnd for t, _ in c) - min(t for c in cwnd for t, _ in c)) / 1e9 if any(cwnd) else 0
print(f'# {a.trace}: {len(drops)} drops in {len(episodes)} episodes over {span:.0f} s'
      + (f' ({skipped} malformed lines skipped)' if skipped else ''))
print('| flow | drops | episodes hit | of all | drops per hit | mean window (pkts) | window before / after a hit | after / before | growth between hits (pkts/s) |')
print('|---|---:|---:|---:|---:|---:|---|---:|---:|')
for fl in range(n):
    hits = [e for e in episodes if e[2][fl] > 0]
    d = sum(e[2][fl] for e in hits)
    ts = [t for t, _ in cwnd[fl]]
    ws = [w / PKT for _, w in cwnd[fl]]
    mean_w = sum(ws) / len(ws) if ws else float('nan')
    before, after = [], []
    grown, took = 0.0, 0.0  # packets, seconds from one hit's after to the next hit's before
    prev = None  # (time, window) after the previous hit
    for s, e, _ in hits:
        i = bisect.bisect_left(ts, s) - 1  # the last sample before the episode
        j = bisect.bisect_right(ts, e + 4 * GRID)  # 400 ms on: past the recovery (an RTT is 120-240 ms)
        if i >= 0 and j < len(ws):
            before.append(ws[i])
            after.append(ws[j])
            if prev and ts[i] > prev[0]:
                grown += ws[i] - prev[1]
                took += (ts[i] - prev[0]) / 1e9
            prev = (ts[j], ws[j])
    b = sum(before) / len(before) if before else float('nan')
    af = sum(after) / len(after) if after else float('nan')
    print(f'| {names[fl]} | {d} | {len(hits)} | {len(episodes)} | '
          f'{d / len(hits) if hits else 0:.1f} | {mean_w:.0f} | {b:.0f} / {af:.0f} | '
          f'{af / b if b == b and b else float("nan"):.2f} | {grown / took if took else float("nan"):.1f} |')
