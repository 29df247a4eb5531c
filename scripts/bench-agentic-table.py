#!/usr/bin/env python3
"""Aggregates scripts/bench-agentic.sh's TSV (one line per run and row) into a markdown table:
mean (min-max) over the runs of each row, cached share over the ideal, TTFT percentiles, the
busiest worker over the mean (requests, uncached prompt tokens and prefill work), the fleet's
prefill busy share, stickiness, failures.

Usage: bench-agentic-table.py TSV PREFILL_TOKENS_PER_SEC TIME_SCALE WORKERS [SESSIONS_PER_SEC]

Prefill work is what the sim worker's prefill lane spends: uncached prompt tokens plus
CACHED_COST (its --cached-token-cost default) of every cached one, at PREFILL / TIME_SCALE
tokens per wall second per worker. *prefill busy* (per row) is the fleet's prefill busy share
while the middle 80% of the row's prefill work was done (from the first token at which 10% of
the run's work was done to the one at which 90% was: the run's ramp-up and drain left out).
*offered* (above the table) is the same for the pooled row's requests (no queueing: they come
as the trace's schedule and the sessions' own pace say) at the ideal cache hits, on this
fleet: the utilization an ideal router would run at. SESSIONS_PER_SEC is only printed."""
import json
import os
import sys
from collections import OrderedDict, defaultdict

CACHED_COST = 0.05
tsv = sys.argv[1]
prefill = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
tscale = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
workers = int(sys.argv[4]) if len(sys.argv) > 4 else 4
wall_rate = prefill / tscale if prefill and tscale else 0.0


def records(d):
    path = os.path.join(d, "records.jsonl")
    if not d or not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("ok") and not r.get("warmup") and r.get("prompt_tokens") is not None:
            out.append(r)
    return out


def work(p, c):
    return (p - c) + CACHED_COST * c


def middle_busy(events):
    """Prefill busy share of the fleet while the middle 80% of the work was done: `events` are
    (time ms, work tokens) at each request's first token (its prefill's end)."""
    events = sorted(events)
    total = sum(w for _, w in events)
    if total <= 0 or not wall_rate:
        return float("nan")
    t10 = t90 = None
    acc = 0.0
    for t, w in events:
        acc += w
        if t10 is None and acc >= 0.1 * total:
            t10 = t
        if t90 is None and acc >= 0.9 * total:
            t90 = t
    if t90 is None or t10 is None or t90 <= t10:
        return float("nan")
    return 0.8 * total / ((t90 - t10) / 1000 * workers * wall_rate)


def at_first_token(r):
    return r["start_ms"] + (r.get("ttft_ms") or 0)


def offered(recs):
    """The pooled row's requests (no queueing: they come when the trace's schedule and the
    sessions' own pace say) at the ideal cache hits, as prefill work of this fleet."""
    return middle_busy(
        (at_first_token(r), work(r.get("ideal_prompt_tokens") or r["prompt_tokens"],
                                 r.get("ideal_cached_tokens") or 0))
        for r in recs)


def busy(recs):
    """(fleet busy share over the middle 80% of the work, busiest worker's prefill work over
    the mean)."""
    if not recs:
        return float("nan"), float("nan")
    per = defaultdict(float)
    events = []
    for r in recs:
        w = work(r["prompt_tokens"], r.get("cached_tokens") or 0)
        per[r.get("sim_worker") or r.get("routed_worker") or "?"] += w
        events.append((at_first_token(r), w))
    total = sum(per.values())
    return middle_busy(events), max(per.values()) / (total / workers) if total else float("nan")


rows = OrderedDict()
ideal, offers = [], []
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    if len(f) < 10:
        continue
    num = lambda x: float(x) if x not in ("", "null") else float("nan")
    label, cached, ide, p50, p90, p99, req, ubusy, sticky, failed = f[0], *map(num, f[1:10])
    recs = records(f[10] if len(f) > 10 else "")
    ideal.append(ide)
    if label == "pooled":
        offers.append(offered(recs))
    b, wbusy = busy(recs) if label != "pooled" else (float("nan"), float("nan"))
    rows.setdefault(label, []).append(
        (cached / ide if ide else float("nan"), p50, p90, p99, req, ubusy, wbusy, b, sticky,
         failed))


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


print(f"ideal cached ratio {fmt(ideal, '.3f')}; offered prefill utilization "
      f"{fmt(offers, '.2f')}; cached / ideal of the pooled row = the ceiling\n")
print("| row | cached / ideal | TTFT p50 | TTFT p90 | TTFT p99 | busiest / mean (req) "
      "| busiest / mean (uncached) | busiest / mean (prefill work) | prefill busy | sticky "
      "| failed |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for label, runs in rows.items():
    c = list(zip(*runs))
    name = f"pooled ceiling (1 worker, {workers}x KV, no queueing)" if label == "pooled" else label
    print(f"| {name} | {fmt(c[0], '.3f')} | {ms(c[1])} | {ms(c[2])} | {ms(c[3])} | "
          f"{fmt(c[4], '.2f')} | {fmt(c[5], '.2f')} | {fmt(c[6], '.2f')} | {fmt(c[7], '.2f')} | "
          f"{fmt(c[8], '.2f')} | {fmt(c[9], '.0f')} |")

# run by run (issue #21's targets are read from the same run's rows): each berth row's cached
# share of the ideal, its TTFT p99 over the better of the smg and nginx rows' in that run, and
# its busiest worker over the mean (requests)
base = [lab for lab in rows if lab.startswith(("smg:", "nginx:"))]
if base:
    print("\nrun by run: cached / ideal, p99 / the better of " + " and ".join(base)
          + ", busiest / mean (req)\n")
    for label, runs in rows.items():
        if label == "pooled" or label in base:
            continue
        cells = []
        for i, r in enumerate(runs):
            ref = [rows[b][i][3] for b in base if i < len(rows[b]) and rows[b][i][3] == rows[b][i][3]]
            ratio = f"{r[3] / min(ref):.2f}x" if ref else "-"
            cells.append(f"{r[0]:.3f} / {ratio} / {r[4]:.3f}")
        print(f"- {label}: " + "; ".join(cells))
