#!/usr/bin/env python3
"""Summarise libra-runs.sh output: one Markdown row per CCA and buffer with
the short/long goodput ratio of each run, their mean and 95 % Student-t
interval, and the mean goodputs, drops and (Libra) recoveries per flow."""
import glob
import os
import re
import statistics
import sys

# Two-sided 95 % Student-t quantiles, by degrees of freedom.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
       8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145}
BDP = {167: "0.2", 417: "0.5", 834: "1", 1667: "2"}


def parse(path):
    flows = {}
    for line in open(path):
        m = re.match(r"flow=(\d+) rtt_ms=\S+ cca=\S+ goodput_mbps=([0-9.]+) drops=(\d+)(.*)", line)
        if m:
            rec = re.search(r"libra_recoveries=(\d+) libra_rtos=(\d+)", m.group(4))
            flows[int(m.group(1))] = (float(m.group(2)), int(m.group(3)),
                                      (int(rec.group(1)), int(rec.group(2))) if rec else None)
    return flows


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "libra-out"
    rows = {}
    for f in glob.glob(os.path.join(outdir, "*-b*-r*.txt")):
        m = re.match(r"(\w+)-b(\d+)-r(\d+)\.txt$", os.path.basename(f))
        fl = parse(f)
        if m and 0 in fl and 1 in fl:
            rows.setdefault((m.group(1), int(m.group(2))), []).append((int(m.group(3)), fl))
    print("| CCA | buffer | runs | short/long ratio, per run | mean | 95 % CI | goodput s/l Mbit/s | drops s/l | recoveries s/l (timeouts) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (cca, buf), runs in sorted(rows.items(), key=lambda kv: (kv[0][0] != "libra", kv[0][1])):
        runs.sort()
        ratios = [fl[0][0] / fl[1][0] if fl[1][0] > 0 else float("inf") for _, fl in runs]
        n = len(ratios)
        mean = statistics.mean(ratios)
        ci = "-" if n < 2 else "%.2f-%.2f" % (
            mean - T95[n - 1] * statistics.stdev(ratios) / n ** 0.5,
            mean + T95[n - 1] * statistics.stdev(ratios) / n ** 0.5)
        gs = statistics.mean(fl[0][0] for _, fl in runs)
        gl = statistics.mean(fl[1][0] for _, fl in runs)
        ds = statistics.mean(fl[0][1] for _, fl in runs)
        dl = statistics.mean(fl[1][1] for _, fl in runs)
        rec = "-"
        if runs[0][1][0][2]:
            rs = statistics.mean(fl[0][2][0] for _, fl in runs)
            rl = statistics.mean(fl[1][2][0] for _, fl in runs)
            ts = sum(fl[0][2][1] + fl[1][2][1] for _, fl in runs)
            rec = "%.0f/%.0f (%d)" % (rs, rl, ts)
        per = ", ".join("%.2f" % r for r in ratios)
        print("| %s | %s BDP (%d) | %s | %s | %.2f | %s | %.1f/%.1f | %.0f/%.0f | %s |" % (
            cca, BDP.get(buf, "?"), buf, ",".join(str(r) for r, _ in runs), per, mean, ci, gs, gl, ds, dl, rec))


main()
