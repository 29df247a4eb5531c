#!/usr/bin/env python3
"""Where the TTFT tail of a scripts/bench-agentic-set.sh run comes from (issue #21, session 7):
for each artifact dir, per worker its requests, uncached tokens, sessions placed there (first
turns) and root sessions, and mean TTFT; the slowest 2% of requests with their start, TTFT,
worker, depth (0 root, 1 sub-agent), turn, prompt / cached / uncached tokens and the uncached
tokens (and requests) ahead of them on their worker (earlier requests there not yet at their
first token); the continuing turns that found less than 90% of their session's previous
prompt cached (history evicted) per worker; the first turns that copied a shared system prompt
(over 1,500 uncached tokens) per worker; the sub-agents whose first turn went to another worker
than their parent's latest request before it (issue #21 session 12). Then a replay through the sim's prefill cost
(uncached + 0.05 x cached tokens at PREFILL / TIME_SCALE tokens per second, FIFO per worker,
the run's own arrival times and each request's measured cached tokens; the sim's base and
decode steps not counted, and the evictions a different assignment would add or spare not
modelled) of the run's own assignment and of a counterfactual: every other root family (a
root and its sub-agents, by arrival) of the busiest worker (uncached tokens) sent to the least
busy one, the first of them paying a cold copy of its whole prompt there. Prints TTFT p50 /
p90 / p99, wall ms.

Usage: bench-agentic-set-tail.py ARTIFACT_DIR [...]   env PREFILL (2000) TIME_SCALE (0.2)"""
import collections
import json
import os
import sys

speed = float(os.environ.get("PREFILL", "2000")) / float(os.environ.get("TIME_SCALE", "0.2")) / 1000


def ms(prompt, cached):
    return (prompt - cached + 0.05 * cached) / speed


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def replay(recs, worker_of, cost):
    free, out = {}, []
    for r in recs:
        w = worker_of(r)
        t = max(r["start_ms"], free.get(w, 0.0))
        free[w] = t + cost(r)
        out.append(free[w] - r["start_ms"])
    return tuple(pct(out, p) for p in (0.5, 0.9, 0.99))


for d in sys.argv[1:]:
    recs = [json.loads(line) for line in open(d + "/records.jsonl")]
    recs = sorted((r for r in recs if r["ok"]), key=lambda r: r["start_ms"])
    w = lambda r: (r.get("sim_worker") or r.get("routed_worker") or "?")[-1]
    for r in recs:
        r["unc"] = r["prompt_tokens"] - (r.get("cached_tokens") or 0)
        r["ft"] = r["start_ms"] + r["ttft_ms"]
    print(f"== {d}: {len(recs)} requests")
    by = collections.defaultdict(lambda: [0, 0, 0, 0, 0.0])
    for r in recs:
        b = by[w(r)]
        b[0] += 1
        b[1] += r["unc"]
        b[2] += r["turn_index"] == 0
        b[3] += r["turn_index"] == 0 and r["depth"] == 0
        b[4] += r["ttft_ms"]
    for k in sorted(by):
        b = by[k]
        print(f"  worker {k}: {b[0]} requests, {b[1]} uncached, {b[2]} sessions ({b[3]} roots), mean TTFT {b[4] / b[0]:.0f} ms")
    # each request's kind: a first turn copying a system prompt (over 1,500 uncached), another
    # first turn, a continuing turn that lost its history (cached < 90% of its session's
    # previous prompt), another continuing turn
    prev_prompt = {}
    for r in recs:
        p = prev_prompt.get(r["session_id"])
        cached = r["prompt_tokens"] - r["unc"]
        # (the tokens a lost history re-prefilled: its previous prompt that is not cached)
        r["lost"] = p - cached if p is not None and p - cached > 0.1 * p else 0
        if r["turn_index"] == 0:
            r["kind"] = "copy" if r["unc"] > 1500 else "new"
        else:
            r["kind"] = "lost" if r["lost"] else "turn"
        prev_prompt[r["session_id"]] = r["prompt_tokens"]
    top = sorted(recs, key=lambda r: -r["ttft_ms"])[: max(1, round(len(recs) * 0.02))]
    print("   start_ms ttft_ms worker depth turn prompt cached uncached  kind | ahead_tokens ahead_requests | ahead uncached by kind: copy new lost turn")
    kinds = ("copy", "new", "lost", "turn")
    behind = collections.Counter()
    for r in sorted(top, key=lambda r: r["start_ms"]):
        ahead = [x for x in recs if w(x) == w(r) and x["start_ms"] < r["start_ms"] < x["ft"]]
        by_kind = collections.Counter()
        for x in ahead:
            by_kind[x["kind"]] += x["unc"]
        behind.update(by_kind)
        behind["own"] += r["unc"]
        print(f"   {r['start_ms']:8.0f} {r['ttft_ms']:7.0f} {w(r):>6} {r['depth']:5d} {r['turn_index']:4d} {r['prompt_tokens']:6d} {r['prompt_tokens'] - r['unc']:6d} {r['unc']:8d} {r['kind']:>5} | {sum(x['unc'] for x in ahead):12d} {len(ahead):14d} | " + " ".join(f"{by_kind[k]:5d}" for k in kinds))
    total = sum(behind.values()) or 1
    print("  the slowest 2%'s uncached tokens, their own and ahead of them by kind: " + ", ".join(f"{k} {behind[k]} ({behind[k] / total:.0%})" for k in ("own",) + kinds))
    # continuing turns that found less than 90% of their session's previous prompt cached
    # (their history evicted), per worker, and the tokens that lost
    # (as classified above, `r["lost"]`)
    lost, lost_tokens, slow = collections.Counter(), collections.Counter(), set(map(id, top))
    lost_slow = 0
    for r in recs:
        if r["lost"]:
            lost[w(r)] += 1
            lost_tokens[w(r)] += r["lost"]
            lost_slow += id(r) in slow
    print(f"  continuing turns that lost history (cached < 90% of the previous prompt), per worker: {dict(sorted(lost.items()))}, tokens {dict(sorted(lost_tokens.items()))}; among the slowest 2%: {lost_slow}")
    copies = collections.Counter(w(r) for r in recs if r["kind"] == "copy")
    print(f"  first turns copying a system prompt, per worker: {dict(sorted(copies.items()))}")
    # sub-agents whose first turn went to another worker than their parent's latest request
    # before it (`parent_id` in the records)
    latest, subs, off = {}, 0, []
    for r in recs:
        if r["depth"] > 0 and r["turn_index"] == 0:
            subs += 1
            if latest.get(r["parent_id"]) != w(r):
                off.append(r)
        latest[r["session_id"]] = w(r)
    print(f"  sub-agents off their parent's worker: {len(off)} of {subs}, uncached tokens {sum(r['unc'] for r in off)}")
    unc = {k: b[1] for k, b in by.items()}
    busy, calm = max(unc, key=unc.get), min(unc, key=unc.get)
    start = {}
    for r in recs:
        start.setdefault(r["root_id"], r["start_ms"])
    fams = sorted({r["root_id"] for r in recs if w(r) == busy}, key=start.get)
    moved = set(fams[1::2])
    first = next(r for r in recs if r["root_id"] in moved)
    measured = tuple(pct([r["ttft_ms"] for r in recs], p) for p in (0.5, 0.9, 0.99))
    own = replay(recs, w, lambda r: ms(r["prompt_tokens"], r["prompt_tokens"] - r["unc"]))
    cf = replay(
        recs,
        lambda r: calm if r["root_id"] in moved else w(r),
        lambda r: ms(r["prompt_tokens"], 0 if r is first else r["prompt_tokens"] - r["unc"]),
    )
    print("  TTFT p50 / p90 / p99 ms: measured %.0f / %.0f / %.0f" % measured)
    print("    replay, the run's assignment %.0f / %.0f / %.0f" % own)
    print(f"    replay, {len(moved)} of worker {busy}'s {len(fams)} root families to worker {calm}, one copy: %.0f / %.0f / %.0f" % cf)
