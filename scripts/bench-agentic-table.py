#!/usr/bin/env python3
"""Aggregates scripts/bench-agentic.sh's TSV (one line per run and row) into a markdown table:
mean (min-max) over the runs of each row, cached share over the ideal, TTFT percentiles, the
busiest worker over the mean (requests and uncached prompt tokens), stickiness, failures."""
import sys
from collections import OrderedDict

rows = OrderedDict()
ideal = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 10:
        continue
    num = lambda x: float(x) if x not in ("", "null") else float("nan")
    label, cached, ide, p50, p90, p99, busy, ubusy, sticky, failed = f[0], *map(num, f[1:10])
    ideal.append(ide)
    rows.setdefault(label, []).append(
        (cached / ide if ide else float("nan"), p50, p90, p99, busy, ubusy, sticky, failed))


def fmt(vals, spec, unit=""):
    vals = [v for v in vals if v == v]
    if not vals:
        return "-"
    m = sum(vals) / len(vals)
    if len(vals) == 1:
        return f"{m:{spec}}{unit}"
    return f"{m:{spec}}{unit} ({min(vals):{spec}}-{max(vals):{spec}})"


def ms(vals):
    vals = [v for v in vals if v == v]
    if not vals:
        return "-"
    m = sum(vals) / len(vals)
    if m >= 1000:
        return fmt([v / 1000 for v in vals], ".2f", " s")
    return fmt(vals, ".0f", " ms")


print(f"ideal cached ratio {fmt(ideal, '.3f')}; cached / ideal of the pooled row = the ceiling\n")
print("| row | cached / ideal | TTFT p50 | TTFT p90 | TTFT p99 | busiest / mean (req) "
      "| busiest / mean (uncached) | sticky | failed |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for label, runs in rows.items():
    c = list(zip(*runs))
    print(f"| {label} | {fmt(c[0], '.3f')} | {ms(c[1])} | {ms(c[2])} | {ms(c[3])} | "
          f"{fmt(c[4], '.2f')} | {fmt(c[5], '.2f')} | {fmt(c[6], '.2f')} | {fmt(c[7], '.0f')} |")
