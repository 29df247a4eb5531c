#!/usr/bin/env python3
"""Where a run's TTFT tail comes from, on open arrivals (issue #21). For each artifact dir of
scripts/bench-agentic.sh, its requests (their arrival times) are replayed through the sim's cost
(uncached tokens plus 0.05 per cached one, at PREFILL / TIME_SCALE per second, prefill FIFO per
worker; the sim's base and decode steps not counted), four ways:

- pooled: one FIFO server as fast as the whole fleet, every request at the ideal cache hits
  (each shared prefix prefilled once in the whole fleet): no router does better;
- least-work: WORKERS FIFO servers, each request sent to the one with the least work left, at
  the ideal cache hits (perfect balance, no cache lost);
- the run's assignment at the ideal cache hits (its balance, none of its cache lost);
- the run's assignment and the cache hits it got (checks the replay against the measured
  figures, printed last).

Prints TTFT p50 / p90 / p99 in wall ms for each. The arrival times are the run's own (each
session's next turn comes its recorded delay after the previous answer).

Usage: bench-agentic-floor.py PREFILL_TOKENS_PER_SEC WORKERS ARTIFACT_DIR [...]
  env TIME_SCALE (0.2)"""
import json
import os
import sys

prefill, n = float(sys.argv[1]), int(sys.argv[2])
speed = prefill / float(os.environ.get("TIME_SCALE", "0.2")) / 1000  # tokens per wall ms


def ms(prompt, cached):
    return (prompt - cached + 0.05 * cached) / speed


def ideal(r):
    return ms(r.get("ideal_prompt_tokens") or r["prompt_tokens"], r.get("ideal_cached_tokens") or 0)


def got(r):
    return ms(r["prompt_tokens"], r.get("cached_tokens") or 0)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def fmt(xs):
    return f"{pct(xs, 0.5):.0f} / {pct(xs, 0.9):.0f} / {pct(xs, 0.99):.0f}"


def assigned(recs, cost):
    free, out = {}, []
    for r in recs:
        w = r.get("sim_worker") or r.get("routed_worker") or "?"
        free[w] = max(free.get(w, 0.0), r["start_ms"]) + cost(r)
        out.append(free[w] - r["start_ms"])
    return out


for d in sys.argv[3:]:
    recs = sorted((json.loads(line) for line in open(d + "/records.jsonl")),
                  key=lambda r: r["start_ms"])
    recs = [r for r in recs if r["ok"]]
    free, pooled = 0.0, []
    for r in recs:
        free = max(free, r["start_ms"]) + ideal(r) / n
        pooled.append(free - r["start_ms"])
    free_at, least = [0.0] * n, []
    for r in recs:
        i = min(range(n), key=lambda k: free_at[k])
        free_at[i] = max(free_at[i], r["start_ms"]) + ideal(r)
        least.append(free_at[i] - r["start_ms"])
    print(f"{d}: TTFT p50 / p90 / p99 ms: pooled {fmt(pooled)}; least-work {fmt(least)}; "
          f"its assignment at ideal cache {fmt(assigned(recs, ideal))}; its assignment and "
          f"cache {fmt(assigned(recs, got))}; measured {fmt([r['ttft_ms'] for r in recs])}")
