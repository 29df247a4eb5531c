#!/usr/bin/env python3
"""A floor under the TTFT tail of a trace replayed on its own schedule (issue #21): the prefill
of the first turns that arrive at t = 0, at the ideal cache hits (every shared prefix prefilled
once in the whole fleet; the pooled row's records carry them), split perfectly over the fleet,
in wall milliseconds. No router finishes that burst sooner, so its last first turns take at
least about this long.

Usage: bench-agentic-burst.py POOLED_ARTIFACT_DIR PREFILL_TOKENS_PER_SEC WORKERS [TIME_SCALE]
(the sim's cost: uncached tokens plus 0.05 per cached one, at PREFILL / TIME_SCALE per second)"""
import json
import sys

d, prefill, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
tscale = float(sys.argv[4]) if len(sys.argv) > 4 else 0.2
recs = [json.loads(line) for line in open(d + "/records.jsonl")]
burst = [r for r in recs if r["ok"] and r["turn_index"] == 0 and r["start_ms"] < 50]
work = sum((r["ideal_prompt_tokens"] - r["ideal_cached_tokens"]) + 0.05 * r["ideal_cached_tokens"]
           for r in burst)
print(f"{len(burst)} first turns at t = 0, {work:.0f} token-equivalents of prefill: "
      f"{work / (n * prefill / tscale) * 1000:.0f} ms on {n} workers at {prefill:g} tokens/s")
