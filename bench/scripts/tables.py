#!/usr/bin/env python3
"""Markdown tables from compare-openmpi.sh's outputs: per collective and rank
count, time (us) and bus bandwidth (GB/s) of ferrocoll (default), ferrocoll
p2p only, and Open MPI, keyed by the per-rank block size in bytes."""
import csv
import glob
import os
import sys

out = sys.argv[1]


def ferro(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            key = int(r["block_count"] or 0) * 4 if r["block_count"] not in ("", "N/A") else 0
            bw = r["busbw_avg_gbs"]
            rows[key] = (float(r["time_avg_us"]), float(bw) if bw not in ("", "N/A") else None, r["algorithm"])
    return rows


def ompi(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0].isdigit():
            bw = None if p[4] == "N/A" else float(p[4])
            rows[int(p[0])] = (float(p[1]), bw, "")
    return rows


def fmt_size(b):
    for unit, s in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s} {unit}"
    return f"{b} B"


for path in sorted(glob.glob(os.path.join(out, "ferrocoll-*.csv"))):
    name = os.path.basename(path)[len("ferrocoll-"):-4]
    coll, np = name.rsplit("-", 1)
    f, p, o = ferro(path), ferro(os.path.join(out, f"p2p-{name}.csv")), ompi(os.path.join(out, f"openmpi-{name}.txt"))
    print(f"\n### {coll}, {np} ranks\n")
    print("| block | ferrocoll µs | GB/s | algorithm | p2p µs | p2p GB/s | Open MPI µs | GB/s | time ratio OMPI/ferrocoll |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(f):
        ft, fb, alg = f[key]
        pt, pb, _ = p.get(key, (None, None, ""))
        ot, ob, _ = o.get(key if coll != "barrier" else 0, (None, None, ""))
        cell = lambda v, d=2: "—" if v is None else f"{v:.{d}f}"
        ratio = "—" if ot is None or ft == 0 else f"{ot / ft:.2f}"
        print(f"| {fmt_size(key) if coll != 'barrier' else '—'} | {cell(ft)} | {cell(fb)} | {alg} | {cell(pt)} | {cell(pb)} | {cell(ot)} | {cell(ob)} | {ratio} |")
