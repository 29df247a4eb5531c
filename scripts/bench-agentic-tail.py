#!/usr/bin/env python3
"""Per-request evidence for scripts/bench-agentic.sh runs (issue #21): for each artifact dir,
the session moves (a session's turn on another worker than its previous turn), the later turns
that found less than half their prompt cached, requests per worker, the first turns per worker
(with their aiperf group when TRACE is given) and the slowest 1% of requests with their start
time, turn, prompt and cached tokens, worker and whether the session had just moved; and the
uncached tokens beyond the ideal's (one unbounded cache) of first turns, of turns that moved and
of turns that stayed (evictions).

Usage: bench-agentic-tail.py [--trace TRACE.jsonl] ARTIFACT_DIR [...]"""
import collections
import json
import sys

args = sys.argv[1:]
groups = {}
if args[:1] == ["--trace"]:
    for line in open(args[1]):
        r = json.loads(line)
        if "group_id" in r:
            groups.setdefault(r["session_id"], r["group_id"])
    args = args[2:]

for d in args:
    recs = [json.loads(line) for line in open(d + "/records.jsonl")]
    recs = sorted((r for r in recs if r["ok"]), key=lambda r: r["start_ms"])
    t0 = recs[0]["start_ms"]
    worker = lambda r: (r.get("sim_worker") or r.get("routed_worker") or "?")[-1]
    last, moved = {}, set()
    # uncached tokens beyond the ideal's (what one unbounded cache would have missed), by kind
    excess = collections.Counter()
    for r in recs:
        s = r["session_id"]
        if s in last and last[s] != worker(r):
            moved.add(r["seq"])
        kind = ("first turns" if r["turn_index"] == 0 else
                "turns that moved" if r["seq"] in moved else "turns that stayed")
        excess[kind] += ((r["prompt_tokens"] - (r["cached_tokens"] or 0))
                         - (r.get("ideal_prompt_tokens", r["prompt_tokens"])
                            - r.get("ideal_cached_tokens", 0)))
        last[s] = worker(r)
    miss = sum(1 for r in recs
               if r["turn_index"] > 0 and (r["cached_tokens"] or 0) < 0.5 * r["prompt_tokens"])
    per = collections.Counter(worker(r) for r in recs)
    first = collections.defaultdict(str)
    for r in recs:
        if r["turn_index"] == 0:
            first[worker(r)] += str(groups.get(r["session_id"], "."))
    print(f"{d}: {len(moved)} moves of {len(recs)} requests; {miss} later turns under half "
          f"cached; requests per worker {dict(sorted(per.items()))}; first turns per worker "
          f"{dict(sorted(first.items()))}")
    ideal = sum(r.get("ideal_prompt_tokens", r["prompt_tokens"]) - r.get("ideal_cached_tokens", 0)
                for r in recs)
    print(f"   uncached tokens {ideal} at the ideal; beyond it: "
          + ", ".join(f"{k} {v}" for k, v in sorted(excess.items())))
    for r in sorted(recs, key=lambda r: -r["ttft_ms"])[: max(1, len(recs) // 100)]:
        print(f"   ttft {r['ttft_ms']:5.0f} ms  t={(r['start_ms'] - t0) / 1000:5.1f} s  turn "
              f"{r['turn_index']:2d}  prompt {r['prompt_tokens']:5d}  cached "
              f"{r['cached_tokens'] or 0:5d}  worker {worker(r)}"
              f"{'  MOVED' if r['seq'] in moved else ''}")
