#!/usr/bin/env python3
"""Run one 2-flow drop-tail experiment (10 ms vs RTT_LONG NewReno/Libra) and
print one table row: drops of each flow after --from (from TOLLGATE_TRACE),
goodput and the short/long ratio.

usage: exp.py BUFFER SEED [--cca newreno] [--rtt-short 10ms] [--rtt-long 100ms]
              [--topo 'key = value' ...] [--flow 'key = value' ...]
              [--short 'key = value' ...] [--label L] [--duration 300s]
              [--from 60] [--keep]
Runs $TOLLGATE (default /tmp/tg-drop/tollgate) in a fresh directory next to
it; --from sets the measurement and trace start (s), --keep keeps the trace
and prints its path. One run at a time."""
import argparse, json, os, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument('buffer')
ap.add_argument('seed', type=int)
ap.add_argument('--cca', default='newreno')
ap.add_argument('--rtt-short', default='10ms')
ap.add_argument('--rtt-long', default='100ms')
ap.add_argument('--topo', action='append', default=[])
ap.add_argument('--flow', action='append', default=[])
ap.add_argument('--short', action='append', default=[], help='extra keys for the short flow only')
ap.add_argument('--duration', default='300s')
ap.add_argument('--label', default='')
ap.add_argument('--from', dest='from_s', default='60', help='measure (and trace) from, seconds')
ap.add_argument('--keep', action='store_true', help='keep the trace (printed path)')
a = ap.parse_args()

tg = os.environ.get('TOLLGATE', '/tmp/tg-drop/tollgate')
work = tempfile.mkdtemp(prefix='exp-', dir=os.path.dirname(os.path.abspath(tg)))
flow_extra = '\n'.join(a.flow)
toml = f'''name = "exp"
duration = "{a.duration}"
seed = {a.seed}
[topology]
kind = "dumbbell"
bottleneck = {{ rate = "100Mbit", delay = "2ms", buffer = "{a.buffer}" }}
{chr(10).join(a.topo)}
[router]
discipline = "droptail"
[[flows]]
name = "short"
cca = "{a.cca}"
rtt = "{a.rtt_short}"
{flow_extra}
{chr(10).join(a.short)}
[[flows]]
name = "long"
cca = "{a.cca}"
rtt = "{a.rtt_long}"
{flow_extra}
[metrics]
measure_from = "{a.from_s}s"
'''
open(f'{work}/s.toml', 'w').write(toml)
env = dict(os.environ, TOLLGATE_TRACE=f'{work}/trace.csv', TOLLGATE_TRACE_FROM=a.from_s)
subprocess.run([tg, 'sim', f'{work}/s.toml', '--out', work, '--no-plots', '-q'], check=True, env=env)
drops = [0, 0]
arrivals = [0, 0]
with open(f'{work}/trace.csv') as f:
    for line in f:
        if line.startswith('A,'):
            p = line.split(',')
            fl = int(p[2])
            arrivals[fl] += 1
            if p[4] == '1':
                drops[fl] += 1
r = json.load(open(f'{work}/exp/results.json'))
g = [fl['goodput_mbps'] for fl in r['flows']]
fl_end = [l for l in open(f'{work}/trace.csv') if l.startswith('F,')]
if a.keep:
    print(f'trace: {work}/trace.csv', flush=True)
else:
    os.remove(f'{work}/trace.csv')
# F,flow,ack_frequency frames sent,received,...: did each receiver get the ACK policy request?
af = '/'.join(l.split(',')[3] for l in fl_end)
print(f"| {a.label} | {a.buffer} | {a.seed} | {a.rtt_long} | {drops[0]}/{drops[1]} | "
      f"{drops[0]/arrivals[0]*1e3:.3f}/{drops[1]/max(arrivals[1],1)*1e3:.3f} | "
      f"{g[0]:.1f}/{g[1]:.1f} | {g[0]/max(g[1],1e-9):.2f} | {af} |", flush=True)
