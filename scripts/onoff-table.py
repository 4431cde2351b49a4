#!/usr/bin/env python3
"""The table of an on/off A/B (bench-changelog.sh, bench-quota.sh).

    onoff-table.py OUT FIGURE...

Reads OUT/NAME-STATE-ROUND.json (`loom bench compare --json`, STATE off
or on) and prints, for each figure whose name holds one of FIGURE, the
medians of both states, their ratio, the noise (the largest distance of
any round from its own state's median, as perf-gate.sh measures it) and
every round.
"""
import collections, glob, json, statistics as st, sys

out, keep = sys.argv[1], sys.argv[2:]
v = collections.defaultdict(list)
for f in glob.glob(f"{out}/*-*-*.json"):
    name, s, _ = f.rsplit("/", 1)[1][:-5].rsplit("-", 2)
    for x in json.load(open(f))["summaries"]:
        v[(f"{name} {x['phase']} [{x['target']}]", s)].append(x["summary"]["median"])
print(f"{'figure':28} {'off':>10} {'on':>10} {'on/off':>7} {'noise':>6}  rounds (off | on)")
for fig in sorted({k for k, _ in v if any(p in k for p in keep)}):
    off, on = v[(fig, "off")], v[(fig, "on")]
    mo, mn = st.median(off), st.median(on)
    noise = max(abs(x - m) / m for xs, m in [(off, mo), (on, mn)] for x in xs)
    r = lambda xs: " ".join(f"{x:.0f}" for x in xs)
    print(f"{fig:28} {mo:10.1f} {mn:10.1f} {mn / mo:7.2f} {noise * 100:5.0f}%  {r(off)} | {r(on)}")
