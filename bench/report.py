#!/usr/bin/env python3
"""Turn the JSON results of bench/run into bench/RESULTS.md and PNG charts.

usage: report.py OUTDIR RESULTS.md MODE COMMAND
"""
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

outdir, results_md, mode, command = sys.argv[1:5]
bench_dir = os.path.dirname(results_md) or "."
here = os.path.dirname(os.path.abspath(__file__))


def load(name):
    p = os.path.join(outdir, name + ".json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def sh(cmd):
    try:
        return subprocess.check_output(cmd, shell=True, text=True, stderr=subprocess.DEVNULL).strip()
    except Exception:
        return "?"


def mem_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                return int(line.split()[1]) / 1024 / 1024
    return 0


# Targets from the benchmark issue: (result name prefix, minimum ratio or value, kind)
TARGETS = {
    "put rep 1": ("ratio", 0.80), "put rep 2": ("ratio", 0.40),
    "get rep 1": ("ratio", 0.80), "get rep 2": ("ratio", 0.80),
    "cat rep 1": ("ratio", 0.80), "cat rep 2": ("ratio", 0.80),
    "random block reads warm": ("ratio", 0.80), "random block reads cold": ("ratio", 0.80),
    "4 parallel cats, total": ("ratio", 0.80),
    "stat, 1 clients": ("ratio", 0.50),
    "create+commit durable, 1 clients": ("value", 5000), "create+commit durable, 8 clients": ("value", 30000),
    "stat round trips at privacy": ("ratio", 0.85), "1 MiB block reads over TCP at auth": ("ratio", 0.85),
    "WebHDFS CREATE (two-step, one stream)": ("ratio", 0.70), "WebHDFS OPEN": ("ratio", 0.70),
    "LISTSTATUS of 10000 entries": ("max_ratio", 0.20),
}


def verdict(r):
    t = TARGETS.get(r["name"])
    if not t:
        return ""
    kind, want = t
    if kind == "max_ratio":  # a time ratio: lower is better
        ok, shown = r.get("ratio", 0) < want, f"ratio < {want:.2f}"
        return ("met" if ok else "**missed**") + f" ({shown})"
    got = r.get("ratio", 0) if kind == "ratio" else r["ours"]
    ok = got >= want
    shown = f"ratio ≥ {want:.2f}" if kind == "ratio" else f"≥ {want:,.0f}"
    return ("met" if ok else "**missed**") + f" ({shown})"


def fmt(v, zero=False):
    if v is None or (v == 0 and not zero):
        return ""
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}"


lines = []
lines.append("# Benchmark results\n")
lines.append("Produced by `" + command.strip() + "` (" + mode + " mode); every reference ran in the same run on the same machine and disk.\n")
lines.append("| | |\n| --- | --- |")
lines.append(f"| date | {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} |")
lines.append(f"| commit | {sh('git rev-parse --short HEAD')} |")
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")
lines.append(f"| machine | {os.cpu_count()} cores ({cpu}), {mem_gib():.0f} GiB RAM, {platform.system()} {platform.release()} |")
lines.append(f"| disk | {sh('df -h /tmp | tail -1')} ({sh('findmnt -no FSTYPE,OPTIONS -T /tmp')}) |")
lines.append("")
lines.append("Ratios are ours ÷ reference (higher is better). Absolute seed figures come from 2011 hardware (gigabit LAN, 7,200 rpm disks), so only the ratios compare.\n")

sections = [
    ("seq", "Sequential put/get/cat (seed 000, test 1)"),
    ("nfs", "A large file through the NFSv3 bridge with libnfs's nfs-cp, beside plasma put/get (issue 10: ≥ 0.60)"),
    ("webhdfs", "WebHDFS gateway: CREATE and OPEN beside plasma put/get, LISTSTATUS beside GETFILESTATUS of each entry (issue 26: ≥ 0.70; < 0.20)"),
    ("rereplicate", "Re-replication of a killed datanode's data beside cp on the same disk, user reads during it beside before (issue 23: ≥ 0.5; ≥ 0.7)"),
    ("parallel-cat", "Parallel cats of one file (seed 000, test 2)"),
    ("random", "Random block reads without the namenode (seed 000, test 3)"),
    ("lookup", "Namenode lookups (seed 000, test 4)"),
    ("create-durable", "Commits: create one file per transaction, durable (seed 000 test 5, seed 001)"),
    ("lookup-none", "Namenode lookups with security level none (comparison)"),
    ("create-none", "Commits with security level none (comparison)"),
    ("create-relaxed", "Commits, relaxed mode (acknowledged before fsync, as the original's PostgreSQL ran)"),
    ("security", "Cost of security: privacy vs none on metadata round trips, auth vs none on 1 MiB block reads (issue 3)"),
    ("metarates-native", "metarates via the native API, durable (seed 004)"),
    ("metarates-native-relaxed", "metarates via the native API, relaxed commit mode (seed 004)"),
    ("metarates-local", "metarates on the local filesystem (reference for seed 004)"),
    ("fdtree-wide-native", "fdtree, shallow and wide, native API"),
    ("fdtree-wide-local", "fdtree, shallow and wide, local filesystem"),
    ("fdtree-deep-native", "fdtree, deep, native API"),
    ("fdtree-deep-local", "fdtree, deep, local filesystem"),
    ("kv", "Plasma KV: HTTP lookups of ≈30 KB values (seed 002, scaled down), Go API lookups and inserts, 64 KiB blocks"),
]
for name, title in sections:
    rep = load(name)
    if not rep:
        continue
    lines.append(f"## {title}\n")
    lines.append(f"`plasma-bench {rep['bench']}` — {rep['params']}\n")
    lines.append("| measurement | seed | ours | reference | ref value | ratio | target |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rep["results"]:
        unit = r.get("unit", "")
        ours = fmt(r["ours"], zero=True) + (" " + unit if unit else "")
        ref = fmt(r.get("reference")) + (" " + unit if r.get("reference") else "")
        note = r.get("note", "")
        lines.append(f"| {r['name']}{(' — ' + note) if note else ''} | {r.get('seed', '')} | {ours} | {r.get('reference_name', '')} | {ref} | {fmt(r.get('ratio'))} | {verdict(r)} |")
    lines.append("")

# Charts like the article's figures: per-process and total ops/s by NP.
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name in ["metarates-native", "metarates-native-relaxed", "metarates-local"]:
        rep = load(name)
        if not rep:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, kind in zip(axes, ["per process", "total"]):
            for op in ["create/close", "stat", "utime", "unlink"]:
                pts = []
                for r in rep["results"]:
                    n = r["name"]
                    if n.startswith(op + " NP=") and n.endswith(kind):
                        pts.append((int(n.split("NP=")[1].split()[0]), r["ours"]))
                pts.sort()
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=op)
            ax.set_title(f"{name}: {kind}")
            ax.set_xlabel("processes (NP)")
            ax.set_ylabel("ops/s")
            ax.set_yscale("log")
            ax.legend()
        fig.tight_layout()
        png = os.path.join(bench_dir, name + ".png")
        fig.savefig(png, dpi=80)
        lines.append(f"![{name}]({os.path.basename(png)})\n")
except ImportError:
    lines.append("(charts skipped: matplotlib is not installed; `pip install matplotlib`)\n")

analysis = os.path.join(here, "ANALYSIS.md")
if os.path.exists(analysis):
    with open(analysis) as f:
        lines.append(f.read())

with open(results_md, "w") as f:
    f.write("\n".join(lines) + "\n")
