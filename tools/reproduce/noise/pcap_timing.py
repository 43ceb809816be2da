#!/usr/bin/env python3
"""Timing statistics of a run's packet captures: the distributions that the
emulator's noise model (tools/src/sim/noise.rs) must reproduce.

Each DIR holds `sender.pcap` (captured on the data senders' interface) and
`receiver.pcap` (on the receivers'), from `tollgate sim --pcap DIR` or from
capture-testbed.sh. Data packets are the large datagrams (UDP payload of
1000 bytes or more), ACKs the small ones from receiver to sender.

Statistics, over all flows:
  wake_us        receiver: time from the first data arrival on an idle
                 receiver to its next departure (the ACK it sends): the
                 host's wake-up latency
  batch_merged   receiver: fraction of those batches holding two or more
                 data packets (answered by one ACK)
  pair_us        receiver: arrival gap of two data packets that left the
                 sender back to back (< 20 us apart): packet-pair dispersion
  ack_gap_us     sender: arrival gap of two consecutive ACKs that left the
                 receiver less than 1 ms apart
  ack_change_us  the same ACK pairs: gap at the sender minus gap at the
                 receiver (negative: compressed on the way)

usage: pcap_timing.py DIR [DIR ...] [--labels A,B] [--from SECONDS]
                      [--json OUT.json] [--plot OUT.png]
Only the Python standard library is needed, and matplotlib for --plot.
"""

import argparse
import json
import struct
import sys
from collections import defaultdict
from pathlib import Path

DATA_MIN = 1000
PAIR_SEND_GAP = 20e-6
ACK_PAIR_GAP = 1e-3
QUANTILES = [0.05, 0.25, 0.5, 0.75, 0.95]


def read_pcap(path):
    """Yield (t_seconds, src, dst, udp_payload_len, key) per UDP/IPv4 packet."""
    data = Path(path).read_bytes()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        sys.exit(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    skip = {1: 14, 101: 0, 113: 16, 276: 20}.get(linktype)
    if skip is None:
        sys.exit(f"{path}: link type {linktype} not supported (Ethernet, RAW, Linux SLL)")
    off = 24
    div = 1e9 if nano else 1e6
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        ip = pkt[skip:]
        if len(ip) < 28 or ip[0] >> 4 != 4 or ip[9] != 17:
            continue
        ihl = (ip[0] & 15) * 4
        udp = ip[ihl:]
        if len(udp) < 8:
            continue
        sport, dport, ulen = struct.unpack(">HHH", udp[:6])
        src = (ip[12:16], sport)
        dst = (ip[16:20], dport)
        yield sec + frac / div, src, dst, ulen - 8, bytes(udp[8:48])


def packets(path, t_from):
    out = [p for p in read_pcap(path) if p[0] >= t_from]
    out.sort(key=lambda p: p[0])
    return out


def analyse(run_dir, t_from):
    d = Path(run_dir)
    snd = packets(d / "sender.pcap", 0.0)
    rcv = packets(d / "receiver.pcap", 0.0)
    if not snd or not rcv:
        sys.exit(f"{run_dir}: empty capture")
    t0 = min(snd[0][0], rcv[0][0])
    t_from += t0
    # Data senders: sources of mostly large datagrams (a server's handshake
    # datagrams are large too, but few).
    large, small = defaultdict(int), defaultdict(int)
    for p in snd:
        (large if p[3] >= DATA_MIN else small)[p[1]] += 1
    senders = {src for src, n in large.items() if n > small[src]}
    flow = lambda p: (p[1], p[2]) if p[1] in senders else (p[2], p[1])
    sent_at = {}  # data key -> departure time at the sender
    for t, src, dst, n, key in snd:
        if n >= DATA_MIN and src in senders:
            sent_at[key] = t
    ack_left = {}  # ACK key -> departure time at the receiver
    wake, merged, pair = [], [], []
    batch = {}  # flow -> [start, count]
    prev_data = {}  # flow -> (arrival, departure at the sender)
    for t, src, dst, n, key in rcv:
        f = flow((t, src, dst, n, key))
        if src in senders and n >= DATA_MIN:
            b = batch.get(f)
            if b is None:
                batch[f] = [t, 1]
            else:
                b[1] += 1
            s = sent_at.get(key)
            if s is not None and t >= t_from:
                p = prev_data.get(f)
                if p is not None and 0 <= s - p[1] < PAIR_SEND_GAP:
                    pair.append((t - p[0]) * 1e6)
                prev_data[f] = (t, s)
        elif dst in senders:
            ack_left[key] = t
            b = batch.pop(f, None)
            if b is not None and t >= t_from:
                wake.append((t - b[0]) * 1e6)
                merged.append(1.0 if b[1] >= 2 else 0.0)
    ack_gap, ack_change = [], []
    prev_ack = {}
    for t, src, dst, n, key in snd:
        if dst not in senders or n >= DATA_MIN:
            continue
        left = ack_left.get(key)
        if left is None:
            continue
        f = (dst, src)
        p = prev_ack.get(f)
        prev_ack[f] = (t, left)
        if p is None or t < t_from:
            continue
        at_receiver = left - p[1]
        if 0 < at_receiver < ACK_PAIR_GAP:
            ack_gap.append((t - p[0]) * 1e6)
            ack_change.append(((t - p[0]) - at_receiver) * 1e6)
    return {
        "wake_us": wake,
        "batch_merged": merged,
        "pair_us": pair,
        "ack_gap_us": ack_gap,
        "ack_change_us": ack_change,
    }


def quantiles(xs):
    if not xs:
        return {}
    s = sorted(xs)
    return {f"p{int(q * 100)}": s[min(len(s) - 1, int(q * len(s)))] for q in QUANTILES}


def summary(stats):
    out = {}
    for k, v in stats.items():
        if k == "batch_merged":
            out[k] = sum(v) / len(v) if v else None
        else:
            out[k] = {"n": len(v), **quantiles(v)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--labels")
    ap.add_argument("--from", dest="t_from", type=float, default=5.0,
                    help="skip this many seconds from the first packet (default 5)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    a = ap.parse_args()
    labels = a.labels.split(",") if a.labels else a.dirs
    runs = {lab: analyse(d, a.t_from) for lab, d in zip(labels, a.dirs)}
    sums = {lab: summary(st) for lab, st in runs.items()}
    keys = ["wake_us", "pair_us", "ack_gap_us", "ack_change_us"]
    print("| statistic | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for k in keys:
        cells = []
        for lab in labels:
            q = sums[lab][k]
            cells.append("-" if not q.get("n") else
                         " / ".join(f"{q[p]:.1f}" for p in ["p5", "p25", "p50", "p75", "p95"]))
        print(f"| {k} p5/p25/p50/p75/p95 | " + " | ".join(cells) + " |")
    print("| batch_merged (fraction) | " + " | ".join(
        "-" if sums[lab]["batch_merged"] is None else f"{sums[lab]['batch_merged']:.3f}"
        for lab in labels) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(sums, indent=1) + "\n")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        titles = {"wake_us": "receiver wake-up latency (us)",
                  "pair_us": "data pair dispersion at the receiver (us)",
                  "ack_gap_us": "ACK gap at the sender (us)",
                  "ack_change_us": "ACK gap change, sender - receiver (us)"}
        fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
        for ax, k in zip(axes.flat, keys):
            for lab in labels:
                xs = sorted(runs[lab][k])
                if xs:
                    ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=lab)
            ax.set_title(titles[k])
            ax.set_ylabel("CDF")
            ax.grid(alpha=0.3)
            lo = min((sorted(runs[lab][k])[int(0.01 * len(runs[lab][k]))]
                      for lab in labels if runs[lab][k]), default=0)
            hi = max((sorted(runs[lab][k])[int(0.99 * len(runs[lab][k])) - 1]
                      for lab in labels if runs[lab][k]), default=1)
            ax.set_xlim(lo, hi)
            ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=90)


if __name__ == "__main__":
    main()
