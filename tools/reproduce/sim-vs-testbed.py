#!/usr/bin/env python3
"""Compare a two-flow scenario's runs in `tollgate sim` and on `tollgate testbed`.

Each argument group is a list of results.json files (one per seed or run):

    sim-vs-testbed.py --sim results/sim/NAME/default/seed-*/results.json \
                      --testbed results/tb-*/NAME/results.json

Prints, per run, the first/second flow goodput ratio and each flow's CapProbe
estimate (`capacity_mbps` in cca_stats, where the CCA has one), then per side
the median and range, and an exact two-sided permutation test of the
difference of the two sides' mean ratios (every split of the pooled runs into
groups of the two sizes; with more than 200,000 splits, 200,000 random ones,
seeded). "Agree" below means the test does not reject at the 5 % level: the
two sets of runs could come from one distribution of outcomes.
"""

import argparse
import itertools
import json
import random
import statistics
import sys


def run_row(path):
    with open(path) as f:
        r = json.load(f)
    flows = r["flows"]
    if len(flows) < 2:
        sys.exit(f"{path}: needs two flows, has {len(flows)}")
    g0, g1 = flows[0]["goodput_mbps"], flows[1]["goodput_mbps"]
    caps = []
    for fl in flows[:2]:
        stats = dict(fl.get("cca_stats") or [])
        c = stats.get("capacity_mbps")
        caps.append(float(c) if c is not None else None)
    return {"path": path, "seed": r.get("seed"), "ratio": g0 / g1 if g1 > 0 else float("inf"),
            "goodput": (g0, g1), "capacity": caps}


def permutation_p(a, b, limit=200_000):
    pooled = a + b
    observed = abs(statistics.mean(a) - statistics.mean(b))
    n, k = len(pooled), len(a)
    total = sum(pooled)
    combos = 1
    for i in range(k):
        combos = combos * (n - i) // (i + 1)
    hits = 0
    count = 0
    if combos <= limit:
        splits = itertools.combinations(range(n), k)
    else:
        rng = random.Random(1)
        splits = (rng.sample(range(n), k) for _ in range(limit))
    for idx in splits:
        s = sum(pooled[i] for i in idx)
        diff = abs(s / k - (total - s) / (n - k))
        hits += diff >= observed - 1e-12
        count += 1
    return hits / count


def fmt_cap(c):
    return "-" if c is None else f"{c:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", nargs="+", required=True, help="the sim runs' results.json files")
    ap.add_argument("--testbed", nargs="+", required=True, help="the testbed runs' results.json files")
    args = ap.parse_args()
    sides = {"sim": [run_row(p) for p in args.sim], "testbed": [run_row(p) for p in args.testbed]}
    for name, rows in sides.items():
        rows.sort(key=lambda r: (r["seed"] is None, r["seed"]))
        print(f"{name}:")
        for r in rows:
            print(f"  seed {r['seed']}: ratio {r['ratio']:.2f}  goodput {r['goodput'][0]:.1f} / "
                  f"{r['goodput'][1]:.1f} Mbit/s  capacity estimates {fmt_cap(r['capacity'][0])} / "
                  f"{fmt_cap(r['capacity'][1])} Mbit/s")
        ratios = [r["ratio"] for r in rows]
        caps = [c for r in rows for c in r["capacity"] if c is not None]
        line = (f"  ratio median {statistics.median(ratios):.2f}, mean {statistics.mean(ratios):.2f}, "
                f"range {min(ratios):.2f}-{max(ratios):.2f} (n={len(ratios)})")
        if caps:
            line += f"; capacity estimates {min(caps):.0f}-{max(caps):.0f} Mbit/s"
        print(line)
    a = [r["ratio"] for r in sides["sim"]]
    b = [r["ratio"] for r in sides["testbed"]]
    if len(a) >= 2 and len(b) >= 2:
        p = permutation_p(a, b)
        verdict = "agree" if p >= 0.05 else "differ"
        print(f"mean ratio sim {statistics.mean(a):.2f} vs testbed {statistics.mean(b):.2f}: "
              f"permutation p = {p:.3f} -> {verdict} at the 5 % level")


if __name__ == "__main__":
    main()
