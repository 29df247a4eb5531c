#!/usr/bin/env python3
"""What the TTFT tail of a scripts/bench-agentic.sh run is made of (issue #21 session 17), by
an offline replay of each worker's prefill queue under counterfactuals.

For each artifact dir (its records.jsonl), every successful request becomes a job on the worker
that served it, arriving at its send time and costing the sim's prefill (uncached + 0.05 x
cached tokens at PREFILL / TIME_SCALE tokens per second; the lane is serialized per worker,
non-preemptive). Kinds, as scripts/bench-agentic-tail.py counts them: `new` (a session's first
turn), `moved` (on another worker than the session's previous turn), `lost` (a continuing turn
that found less than 90% of its previous prompt cached), `turn` (the rest). The replay prints
each discipline's time to first token (queue wait + own prefill) p50 / p90 / p99:

- `fifo`: the runs' own order (FIFO, as the sim and SGLang's default schedule serve): checks
  the replay against the measured figures printed beside it;
- `sjf-true` / `sjf-pred`: shortest prefill first by the true cost / by what the gateway could
  know (a continuing turn as if its worker held its previous prompt; new and moved turns by
  their cost): what reordering prefills could buy;
- `fifo-nolost` / `fifo-nomove` / `fifo-nolost-nomove`: FIFO with the lost (and/or moved) turns
  costing what they would have with their history held on their worker: what the re-prefills
  cost the tail.

Then, for the lost turns, the live context of their worker when they arrived: the live
sessions' latest prompt plus output (a session is live from its first request to its last
answer), each less the prefix every session shares counted once, and the histories of sessions
that had ended there more recently than the lost session's previous answer (an LRU cache keeps
those ahead of it): how many losses came with the live context alone over KV.

The replay ignores that later turns wait for earlier answers (closed loop): read it against
its own `fifo` line. Usage: bench-agentic-replay.py ARTIFACT_DIR [...]
  env PREFILL (3200) TIME_SCALE (0.2) KV (32768: tokens per worker) SHARED (the prefix every
      session shares, tokens; default: the most common cached tokens of first turns)"""
import collections
import heapq
import json
import os
import sys

SPEED = float(os.environ.get("PREFILL", "3200")) / float(os.environ.get("TIME_SCALE", "0.2")) / 1000
KV = int(os.environ.get("KV", "32768"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def worker(r):
    return r.get("routed_worker") or r.get("sim_worker") or "?"


def jobs_of(recs):
    last, jobs = {}, []
    for r in recs:
        s, w = r["session_id"], worker(r)
        p, c = r["prompt_tokens"] or 0, r["cached_tokens"] or 0
        cost = ((p - c) + 0.05 * c) / SPEED
        prev = last.get(s)
        kind = "new" if prev is None else ("moved" if prev[0] != w else "turn")
        if kind == "turn" and c < 0.9 * prev[1]:
            kind = "lost"
        # what it would have cost with its previous prompt held on its worker
        held = min(prev[1], p) if prev else 0
        stay = ((p - held) + 0.05 * held) / SPEED if prev else cost
        jobs.append(dict(t=r["start_ms"], w=w, cost=cost, stay=stay, kind=kind))
        last[s] = (w, p)
    return jobs


def replay(jobs, key, cost):
    by = collections.defaultdict(list)
    for j in jobs:
        by[j["w"]].append(j)
    out = []
    for js in by.values():
        js.sort(key=lambda j: j["t"])
        t, i, heap = 0.0, 0, []
        while i < len(js) or heap:
            if not heap:
                t = max(t, js[i]["t"])
            while i < len(js) and js[i]["t"] <= t:
                heapq.heappush(heap, (key(js[i]), js[i]["t"], i, js[i]))
                i += 1
            _, _, _, j = heapq.heappop(heap)
            t += cost(j)
            out.append(t - j["t"])
    return out


def losses(recs, jobs, shared):
    """Of the turns `jobs_of` labelled lost, how many came with their worker's live context
    over KV, and how many under it but over with the ended sessions' histories."""
    end = {}
    for r in recs:
        end[r["session_id"]] = r["start_ms"] + r["e2e_ms"]
    state, over, behind, n = {}, 0, 0, 0
    for r, j in zip(recs, jobs):
        s, w, t = r["session_id"], worker(r), r["start_ms"]
        prev = state.get(s)
        if j["kind"] == "lost":
            n += 1
            live = [v for k, v in state.items() if v[0] == w and end[k] > t]
            ctx = sum(max(0, v[1] - shared) for v in live) + shared
            ended = sum(max(0, v[1] - shared) for k, v in state.items()
                        if v[0] == w and end[k] <= t and v[2] > prev[2])
            if ctx > KV:
                over += 1
            elif ctx + ended > KV:
                behind += 1
        state[s] = (w, (r["prompt_tokens"] or 0) + (r["output_tokens"] or 0), t + r["e2e_ms"])
    return n, over, behind


for d in sys.argv[1:]:
    recs = [json.loads(line) for line in open(os.path.join(d, "records.jsonl"))]
    recs = sorted((r for r in recs if r["ok"] and not r.get("warmup")), key=lambda r: r["start_ms"])
    jobs = jobs_of(recs)
    firsts = collections.Counter(r["cached_tokens"] or 0 for r in recs if r["turn_index"] == 0)
    shared = int(os.environ.get("SHARED", firsts.most_common(1)[0][0] if firsts else 0))
    kinds = collections.Counter(j["kind"] for j in jobs)
    meas = [r["ttft_ms"] for r in recs if r["ttft_ms"] is not None]
    print("%s: %s; measured TTFT p50 / p90 / p99 %.0f / %.0f / %.0f ms" % (
        os.path.basename(d.rstrip("/")), ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
        pct(meas, .5), pct(meas, .9), pct(meas, .99)))
    held = lambda kinds: (lambda j: j["stay"] if j["kind"] in kinds else j["cost"])
    for name, key, cost in [
        ("fifo", lambda j: j["t"], held(())),
        ("sjf-true", lambda j: j["cost"], held(())),
        ("sjf-pred", lambda j: j["cost"] if j["kind"] in ("new", "moved") else j["stay"], held(())),
        ("fifo-nolost", lambda j: j["t"], held(("lost",))),
        ("fifo-nomove", lambda j: j["t"], held(("moved",))),
        ("fifo-nolost-nomove", lambda j: j["t"], held(("lost", "moved"))),
    ]:
        ts = replay(jobs, key, cost)
        print("  %-19s p50 %5.0f  p90 %5.0f  p99 %5.0f ms" % (name, pct(ts, .5), pct(ts, .9), pct(ts, .99)))
    n, over, behind = losses(recs, jobs, shared)
    print("  lost turns %d: the worker's live context over KV (%d) at %d of them, under it but over with "
          "the histories of sessions that ended there since at %d (shared prefix %d counted once)" % (
              n, KV, over, behind, shared))
