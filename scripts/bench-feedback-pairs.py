#!/usr/bin/env python3
"""Summarises the rows of scripts/bench-feedback.sh (issue #17): for each setting, policy and
arm, the mean and [min, max] over runs of cached share, TTFT p99 and the index's mean absolute
error of predicted cached tokens; then, per setting and policy, each arm's paired differences
against REF (the run of the same seed), as mean and [min, max] over seeds, a 95% interval of the
mean difference (Student's t over the pairs: mean +- t(0.975, n-1) * sd / sqrt(n); an interval
that excludes 0 separates the arms from each other at that level, one that contains it does not),
and how many seeds the arm was ahead on cached share.

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


# t(0.975, df) for df = 1..30; above 30 the normal quantile's 1.96 is close enough
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def interval(xs, fmt):
    """95% t interval of the mean of paired differences xs, as [lo, hi]"""
    n = len(xs)
    if n < 2:
        return "-"
    mean = sum(xs) / n
    sd = (sum((x - mean) ** 2 for x in xs) / (n - 1)) ** 0.5
    t = T975[n - 2] if n - 1 <= len(T975) else 1.96
    half = t * sd / n**0.5
    return f"[{fmt(mean - half)}, {fmt(mean + half)}]"


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
print("| setting | policy | arm | pairs | cached share diff | 95% interval | ahead | "
      "TTFT p99 diff ms | 95% interval |")
print("|---|---|---|---|---|---|---|---|---|")
for setting, policy, arm in order:
    arms = rows[(setting, policy)]
    if arm == ref or ref not in arms:
        continue
    seeds = sorted(set(arms[arm]) & set(arms[ref]))
    dc = [arms[arm][s][0] - arms[ref][s][0] for s in seeds]
    dp = [arms[arm][s][1] - arms[ref][s][1] for s in seeds]
    ahead = sum(1 for d in dc if d > 0)
    print(f"| {setting} | {policy} | {arm} | {len(seeds)} | {stat(dc, sf3)} | {interval(dc, sf3)} | "
          f"{ahead}/{len(seeds)} | {stat(dp, sf0)} | {interval(dp, sf0)} |")
