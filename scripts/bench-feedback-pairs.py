#!/usr/bin/env python3
"""Summarises the rows of scripts/bench-feedback.sh (issue #17): for each setting, policy and
arm, the mean and [min, max] over runs of cached share, TTFT p99 and the index's mean absolute
error of predicted cached tokens; then, per setting and policy, each arm's paired differences
against REF (the run of the same seed), as mean and [min, max] over seeds, and how many seeds the
arm was ahead on cached share.

Usage: bench-feedback-pairs.py ROWS_FILE [REF_ARM (off)]"""
import sys
from collections import defaultdict

rows = defaultdict(dict)  # (setting, policy) -> arm -> run -> (cached, p99, mae)
order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 12 or f[0] == "setting":
        continue
    setting, policy, arm, run = f[0], f[1], f[2], int(f[3])
    mae = float(f[8]) if f[8] != "-" else None
    rows[(setting, policy)].setdefault(arm, {})[run] = (float(f[5]), float(f[7]), mae)
    if (setting, policy, arm) not in order:
        order.append((setting, policy, arm))
ref = sys.argv[2] if len(sys.argv) > 2 else "off"


def stat(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{fmt(sum(xs) / len(xs))} [{fmt(min(xs))}, {fmt(max(xs))}]"


f3 = lambda x: f"{x:.3f}"
f0 = lambda x: f"{x:.0f}"
sf3 = lambda x: f"{x:+.3f}"
sf0 = lambda x: f"{x:+.0f}"
print("| setting | policy | arm | runs | cached share | TTFT p99 ms | index MAE tokens |")
print("|---|---|---|---|---|---|---|")
for setting, policy, arm in order:
    runs = rows[(setting, policy)][arm]
    v = list(runs.values())
    print(f"| {setting} | {policy} | {arm} | {len(v)} | {stat([x[0] for x in v], f3)} | "
          f"{stat([x[1] for x in v], f0)} | {stat([x[2] for x in v], f0)} |")
print()
print(f"Paired by seed against `{ref}` (arm minus {ref}):")
print()
print("| setting | policy | arm | pairs | cached share diff | ahead | TTFT p99 diff ms |")
print("|---|---|---|---|---|---|---|")
for setting, policy, arm in order:
    arms = rows[(setting, policy)]
    if arm == ref or ref not in arms:
        continue
    seeds = sorted(set(arms[arm]) & set(arms[ref]))
    dc = [arms[arm][s][0] - arms[ref][s][0] for s in seeds]
    dp = [arms[arm][s][1] - arms[ref][s][1] for s in seeds]
    ahead = sum(1 for d in dc if d > 0)
    print(f"| {setting} | {policy} | {arm} | {len(seeds)} | {stat(dc, sf3)} | "
          f"{ahead}/{len(seeds)} | {stat(dp, sf0)} |")
