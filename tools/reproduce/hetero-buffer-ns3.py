#!/usr/bin/env python3
"""Cross-check of the hetero-buffer experiment in ns-3 3.37.

Runs the same NewReno + HighSpeed + CUBIC dumbbell (120 ms, 300 s measured
from 100 s) in Tollgate and in ns-3 (tools/reproduce/ns3/dumbbell.cc, TCP
with SACK, delayed ACKs every 2 segments, no pacing unless --ns3-args
--pacing=1) for drop-tail and RED
at the given buffers, and prints one row per run and a summary per cell:
Jain's index, each CCA's goodput and the mean backlog, mean and 95 %
interval over the seeds, and RED over drop-tail.

The Tollgate runs use the shipped scenario files with the rate replaced
and RED's thresholds scaled with it (min_th = limit/4, max_th = 3 min_th
as shipped). ns-3 runs at 100 Mbit/s by default: at 1 Gbit/s its TCP send
buffer scans the whole window on every ACK (TcpTxBuffer::NextSeg, half the
profile), and a 20-s run takes over 10 minutes.

usage: hetero-buffer-ns3.py [--rate-mbps 100] [--buffers 0.1,1]
           [--disciplines droptail,red] [--seeds 1,2,3,4,5] [-j 2]
           [--tollgate PATH] [--ns3 PATH] [--ns3-args ARGS] [--only SIM]
           [--out DIR] [--trace] [--jitter-us J] [--ns3-reno linuxreno]
By default each simulator keeps its own timing: Tollgate's host jitter
(`topology.jitter = "auto"`, eight packet times: 960 us at 100 Mbit/s) and
ns-3's exact timing. --jitter-us J gives both the same: Tollgate's
`topology.jitter` and ns-3's --jitterUs (a random delay uniform in [0, J] us
per packet on each access link), 0 for exact timing in both.
With --trace each run also writes its loss and window trace (Tollgate's
TOLLGATE_TRACE, ns-3's --trace) beside its output, and the script prints
tools/reproduce/loss-events.py's table for each run.
Build ns-3's program first: OUT=/tmp/dumbbell tools/reproduce/ns3/build.sh
(needs libns3-dev). Each run's output is kept in DIR (default
/tmp/hetero-buffer-ns3), and a run whose output is there is not repeated."""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SCEN = os.path.join(HERE, '..', 'scenarios', 'reproduce', 'hetero-buffer')
CCAS = ['newreno', 'highspeed', 'cubic']
RTT_MS, BOTTLENECK_DELAY_MS, PKT = 120, 10, 1500
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('--rate-mbps', type=float, default=100)
ap.add_argument('--buffers', default='0.1,1', help='fractions of the BDP, among 0.05,0.1,0.2,0.5,1')
ap.add_argument('--disciplines', default='droptail,red')
ap.add_argument('--seeds', default='1,2,3,4,5')
ap.add_argument('-j', type=int, default=2)
ap.add_argument('--tollgate', default='tollgate')
ap.add_argument('--ns3', default='/tmp/dumbbell')
ap.add_argument('--ns3-args', default='', help="extra dumbbell arguments, e.g. '--pacing=1'")
ap.add_argument('--only', choices=['tollgate', 'ns-3'], help='run one simulator')
ap.add_argument('--out', default='/tmp/hetero-buffer-ns3')
ap.add_argument('--ns3-reno', choices=['newreno', 'linuxreno'], default='newreno',
                help="ns-3's class for the NewReno flow: TcpNewReno (grows half as fast with "
                     "delayed ACKs) or TcpLinuxReno (counts the segments an ACK covers, as Tollgate)")
ap.add_argument('--jitter-us', type=float,
                help="the same timing noise in both simulators (default: each simulator's own)")
ap.add_argument('--trace', action='store_true',
                help='also trace drops and windows from 100 s on, and print loss-events.py for each run')
a = ap.parse_args()
seeds = [int(s) for s in a.seeds.split(',')]
buffers = a.buffers.split(',')
discs = a.disciplines.split(',')
for d in discs:
    if d not in ('droptail', 'red'):
        sys.exit(f'--disciplines: {d} is not droptail or red (ns-3 has no CHOKe)')
for b in buffers:
    if not os.path.exists(os.path.join(SCEN, f'droptail-{b}bdp.toml')):
        sys.exit(f'--buffers: {b} is not a shipped buffer (0.05, 0.1, 0.2, 0.5 or 1)')
os.makedirs(a.out, exist_ok=True)
bdp_pkts = a.rate_mbps * 1e6 * RTT_MS / 1e3 / 8 / PKT


def limit(buf):
    return round(float(buf) * bdp_pkts)


def red_thresholds(buf):
    """RED's (min_th, max_th) in packets, scaled with the buffer as shipped."""
    lo = limit(buf) / 4
    return lo, 3 * lo


def loss_events(trace):
    """Print loss-events.py's table for a trace."""
    text = subprocess.run([sys.executable, os.path.join(HERE, 'loss-events.py'), trace,
                           '--names', ','.join(CCAS)], check=True, capture_output=True, text=True).stdout
    print(text, file=sys.stderr, flush=True)


def tollgate_run(disc, buf, seed):
    """Goodputs (CCA order), Jain's index, mean backlog in packets."""
    jtag = '' if a.jitter_us is None else f'-jitter{a.jitter_us:g}us'
    out = os.path.join(a.out, f'tg{jtag}-{disc}-{buf}-{seed}')
    res = os.path.join(out, 'results.json')
    trace = os.path.join(out, 'trace.csv')
    if not os.path.exists(res) or (a.trace and not os.path.exists(trace)):
        src = open(os.path.join(SCEN, f'{disc}-{buf}bdp.toml')).read()
        s = src.replace('rate = "1Gbit"', f'rate = "{a.rate_mbps:g}Mbit"')
        if disc == 'red':
            lo, hi = red_thresholds(buf)
            s = re.sub(r'min_th = [0-9.]+', f'min_th = {lo:.1f}', s)
            s = re.sub(r'max_th = [0-9.]+', f'max_th = {hi:.1f}', s)
        if a.jitter_us is not None:
            if '[topology]\n' not in s:
                sys.exit(f'--jitter-us: {disc}-{buf}bdp.toml has no [topology] line to set the jitter under')
            s = s.replace('[topology]\n', f'[topology]\njitter = "{a.jitter_us:g}us"\n')
        assert s != src
        os.makedirs(out, exist_ok=True)
        toml = os.path.join(out, 'scenario.toml')
        open(toml, 'w').write(s)
        env = dict(os.environ, TOLLGATE_TRACE=trace, TOLLGATE_TRACE_FROM='100') if a.trace else None
        subprocess.run([a.tollgate, 'sim', toml, '--seed', str(seed), '--out', out + '/run',
                        '--no-plots', '-q'], check=True, env=env)
        found = [os.path.join(d, f) for d, _, fs in os.walk(out + '/run') for f in fs if f == 'results.json']
        os.replace(found[0], res)
    if a.trace:
        loss_events(trace)
    r = json.load(open(res))
    g = {f['cca'].split('(')[0]: f['goodput_mbps'] for f in r['flows']}
    q_ms = r['ports'][0]['queue_delay_ms']['mean']
    return [g[c] for c in CCAS], r['summary']['jain'], q_ms * a.rate_mbps * 1e3 / (PKT * 8)


def ns3_run(disc, buf, seed):
    extra = a.ns3_args.split()
    if a.jitter_us is not None:
        extra.append(f'--jitterUs={a.jitter_us:g}')
    tag = ''.join('-' + re.sub(r'[^A-Za-z0-9=.]', '', x) for x in extra)
    if a.ns3_reno != 'newreno':
        tag += '-' + a.ns3_reno
    ccas = [a.ns3_reno if c == 'newreno' else c for c in CCAS]
    out = os.path.join(a.out, f'ns3{tag}-{disc}-{buf}-{seed}.txt')
    trace = out + '.trace'
    if not os.path.exists(out) or (a.trace and not os.path.exists(trace)):
        rng = random.Random(seed)
        starts = ','.join(f'{rng.random():.3f}' for _ in CCAS)  # Tollgate's "0s..1s"
        cmd = [a.ns3, f'--rtts={RTT_MS},{RTT_MS},{RTT_MS}', f'--ccas={",".join(ccas)}',
               f'--bottleneckDelay={BOTTLENECK_DELAY_MS}', f'--bottleneckMbps={a.rate_mbps:g}',
               f'--buf={limit(buf)}', '--duration=300', '--from=100', '--hystart=0', '--delack=2',
               '--backlog=1', f'--run={seed}', f'--starts={starts}'] + extra
        if disc == 'red':
            lo, hi = red_thresholds(buf)
            cmd.append(f'--red={lo},{hi}')
        if a.trace:
            cmd.append(f'--trace={trace}')
        text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        open(out + '.tmp', 'w').write(text)
        os.replace(out + '.tmp', out)
    if a.trace:
        loss_events(trace)
    text = open(out).read()
    g = {m[0]: float(m[1]) for m in re.findall(r'cca=(\w+) goodput_mbps=([0-9.]+)', text)}
    g['newreno'] = g.get(a.ns3_reno, g.get('newreno'))
    jfi = float(re.search(r'jfi=([0-9.]+)', text)[1])
    q = float(re.search(r'qlen_mean_pkts=([0-9.]+)', text)[1])
    return [g[c] for c in CCAS], jfi, q


def ci(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float('nan')
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, T95.get(len(xs) - 1, 1.96) * sd / math.sqrt(len(xs))


sims = [a.only] if a.only else ['tollgate', 'ns-3']
jobs = [(sim, d, b, s) for b in buffers for d in discs for sim in sims for s in seeds]
print(f'# {a.rate_mbps:g} Mbit/s, 120 ms, BDP {bdp_pkts:.0f} packets; {len(jobs)} runs, -j {a.j}',
      file=sys.stderr)
with ThreadPoolExecutor(a.j) as ex:
    futs = {j: ex.submit(tollgate_run if j[0] == 'tollgate' else ns3_run, *j[1:]) for j in jobs}
    results = {}
    print('| simulator | discipline | buffer | seed | NewReno | HighSpeed | CUBIC (Mbit/s) | Jain | backlog (pkts) |')
    print('|---|---|---|---:|---:|---:|---:|---:|---:|')
    for j in jobs:
        g, jfi, q = futs[j].result()
        results[j] = (g, jfi, q)
        print(f'| {j[0]} | {j[1]} | {j[2]} | {j[3]} | {g[0]:.1f} | {g[1]:.1f} | {g[2]:.1f} | {jfi:.3f} | {q:.0f} |',
              flush=True)

print()
print('| simulator | buffer | discipline | Jain | NewReno | HighSpeed | CUBIC | backlog (pkts) | Jain over drop-tail |')
print('|---|---|---|---|---:|---:|---:|---:|---|')
for sim in sims:
    for b in buffers:
        for d in discs:
            rs = [results[(sim, d, b, s)] for s in seeds]
            jm, jh = ci([r[1] for r in rs])
            gm = [ci([r[0][k] for r in rs])[0] for k in range(3)]
            qm = ci([r[2] for r in rs])[0]
            rel = ''
            if d != 'droptail' and 'droptail' in discs:
                rm, rh = ci([r[1] / results[(sim, 'droptail', b, s)][1] for r, s in zip(rs, seeds)])
                rel = f'{rm:.2f} ± {rh:.2f}'
            print(f'| {sim} | {float(b):.0%} | {d} | {jm:.3f} ± {jh:.3f} | {gm[0]:.1f} | {gm[1]:.1f} | '
                  f'{gm[2]:.1f} | {qm:.0f} | {rel} |')
