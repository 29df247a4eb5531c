#!/usr/bin/env python3
"""Per-request evidence for scripts/bench-agentic.sh runs (issue #21): for each artifact dir,
the session moves (a session's turn on another worker than its previous turn), the later turns
that found less than half their prompt cached, requests per worker, the first turns per worker
(with their aiperf group when TRACE is given) and the slowest 1% of requests with their start
time, turn, prompt and cached tokens, worker and whether the session had just moved; and the
uncached tokens beyond the ideal's (one unbounded cache) of first turns, of turns that moved and
of turns that stayed (evictions).

Then (issue #21 session 13) the slowest 2% labelled by kind (`new`: a first turn; `moved`: a
turn on another worker than its session's previous one; `lost`: a continuing turn that found
less than 90% of its session's previous prompt cached; `turn`: another continuing turn), what
they waited behind on their worker (the uncached tokens of the earlier requests there not yet
at their first token when it arrived, by the same kinds) and the least such backlog on another
worker with what the request would have cost there (its whole prompt less the prefix every
worker holds: the most common cached tokens of the first turns after the first second), in ms of the
sim's prefill (uncached + 0.05 x cached tokens at PREFILL / TIME_SCALE tokens per second, the
queue's head counted whole), and the sum over them: how many would have had their first token
sooner elsewhere ("elsewhere faster").

Usage: bench-agentic-tail.py [--trace TRACE.jsonl] ARTIFACT_DIR [...]
  env PREFILL (3200) TIME_SCALE (0.2) SLOWEST (0.02)"""
import collections
import json
import os
import sys

speed = float(os.environ.get("PREFILL", "3200")) / float(os.environ.get("TIME_SCALE", "0.2")) / 1000
slowest = float(os.environ.get("SLOWEST", "0.02"))

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

    # the slowest requests, labelled, and what they waited behind (session 13)
    prev_prompt, prev_worker = {}, {}
    for r in recs:
        s = r["session_id"]
        r["unc"] = r["prompt_tokens"] - (r["cached_tokens"] or 0)
        r["ft"] = r["start_ms"] + r["ttft_ms"]
        p = prev_prompt.get(s)
        cached = r["cached_tokens"] or 0
        if r["turn_index"] == 0:
            r["kind"] = "new"
        elif prev_worker.get(s) not in (None, worker(r)):
            r["kind"] = "moved"
        elif p is not None and cached < 0.9 * p:
            r["kind"] = "lost"
        else:
            r["kind"] = "turn"
        prev_prompt[s], prev_worker[s] = r["prompt_tokens"], worker(r)
    firsts = [r["cached_tokens"] or 0 for r in recs
              if r["turn_index"] == 0 and r["start_ms"] - t0 > 1000]
    shared = collections.Counter(firsts).most_common(1)[0][0] if firsts else 0
    workers = sorted({worker(r) for r in recs})
    kinds = ("new", "moved", "lost", "turn")
    cost = lambda unc, prompt: (unc + 0.05 * (prompt - unc)) / speed
    top = sorted(recs, key=lambda r: -r["ttft_ms"])[: max(1, round(len(recs) * slowest))]
    print(f"   the slowest {len(top)}: kinds {dict(collections.Counter(r['kind'] for r in top))}; "
          f"prefix every worker holds {shared} tokens; ms at {speed:.1f} tokens/ms")
    print("     t_s ttft kind   w turn prompt  unc | ahead_ms here: " + " ".join(kinds)
          + " | best other: w ahead_ms own_ms")
    behind, faster, kinds_all = collections.Counter(), 0, collections.Counter(r["kind"] for r in recs)
    for r in sorted(top, key=lambda r: r["start_ms"]):
        def ahead(w):
            return [x for x in recs if worker(x) == w and x is not r
                    and x["start_ms"] <= r["start_ms"] < x["ft"]]
        here = ahead(worker(r))
        by = collections.Counter()
        for x in here:
            by[x["kind"]] += cost(x["unc"], x["prompt_tokens"])
        behind.update(by)
        behind["own"] += cost(r["unc"], r["prompt_tokens"])
        other = min((w for w in workers if w != worker(r)),
                    key=lambda w: sum(cost(x["unc"], x["prompt_tokens"]) for x in ahead(w)))
        o_ahead = sum(cost(x["unc"], x["prompt_tokens"]) for x in ahead(other))
        o_own = cost(r["prompt_tokens"] - shared, r["prompt_tokens"])
        there = o_ahead + o_own
        mine = sum(by.values()) + cost(r["unc"], r["prompt_tokens"])
        faster += there < mine
        print(f"   {(r['start_ms'] - t0) / 1000:5.1f} {r['ttft_ms']:4.0f} {r['kind']:>5} {worker(r):>2} "
              f"{r['turn_index']:4d} {r['prompt_tokens']:6d} {r['unc']:4d} | {sum(by.values()):5.0f}: "
              + " ".join(f"{by[k]:4.0f}" for k in kinds)
              + f" | {other} {o_ahead:5.0f} {o_own:5.0f}{'  elsewhere faster' if there < mine else ''}")
    total = sum(behind.values()) or 1
    print("   their prefill ms, own and ahead by kind: "
          + ", ".join(f"{k} {behind[k]:.0f} ({behind[k] / total:.0%})" for k in ("own",) + kinds)
          + f"; elsewhere faster {faster} of {len(top)}; all requests by kind {dict(kinds_all)}")
