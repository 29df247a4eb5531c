#!/usr/bin/env python3
"""Offline replay of scripts/bench-agentic-set.sh runs (the demo's agentic set) with an LRU KV
per worker (issue #21, session 10): what an assignment of root families to workers would cost
in cached share and TTFT, evictions included.

Each request's prompt is modelled as a chain of segments: its root's shared system prompt
(which of NPROMPTS, by berth bench's own choice for the root's index and SEED; its size, SYS
tokens), then per earlier turn of the session its new tokens and its answer (output tokens),
then this turn's new tokens (its prompt less what the chain before holds); a sub-agent's chain
continues its parent's as it was at the parent's latest turn started before the sub-agent's
first (with that turn's answer if it had ended; agent context `parent`). A worker holds
segments up to KV tokens, least recently used first out, a chain touched deepest segment first
(so eviction eats conversations from their tails, as the sim does) and a segment evicted in
16-token blocks; a request finds cached the leading run of its chain its worker holds, then
holds and touches all of it, and its answer joins its worker's cache after it. Prefill is FIFO
per worker: uncached + 0.05 x cached tokens at PREFILL / TIME_SCALE tokens per second, plus
BASE ms (the sim's base and decode steps otherwise not counted), at the run's own arrival
times (a different assignment would also move later turns' arrivals; not modelled).

Calibration (issue #21 session 10, seed 1, `agentic`): the run's own assignment replays to 0.888
cached against 0.902 measured; the replayed TTFTs are 2-3x the measured ones at the tail (later
turns do not wait for earlier answers here): compare assignments with each other, not with runs.

Prints, per artifact dir, the measured figures, then for each assignment: cached share, TTFT
p50 / p90 / p99, prefill max/mean, turns that lost history, prompt copies (root first turns
on a worker not yet holding their prompt):
  run       the run's own workers
  groups    each prompt group on its own worker (the demo's agentic policy, mostly)
  split     the groups as in `groups`, and every other root family of the largest group sent to
            the worker whose queue is shortest at its arrival (another worker each time, maybe)
  split1/K:small  `groups`, and every K-th root family of the largest group on the smallest
            group's worker
  spill:X   `groups`, and a new root family goes to the least loaded worker (queued prefill
            ms at its arrival, the model's) when its holder's queue is more than X ms longer
            (its first turn then copies the prompt there)
Usage: bench-agentic-set-lru.py ARTIFACT_DIR [...]
  env SEED (1) NPROMPTS (4) KV (6144) SYS (2112) PREFILL (2000) TIME_SCALE (0.2) BASE (0)
      SPILL (ms thresholds, comma-separated: 100,200,400)"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prompts import prompt_choice  # noqa: E402

SEED = int(os.environ.get("SEED", "1"))
NPROMPTS = int(os.environ.get("NPROMPTS", "4"))
KV = int(os.environ.get("KV", "6144"))
SYS = int(os.environ.get("SYS", "2112"))
SPEED = float(os.environ.get("PREFILL", "2000")) / float(os.environ.get("TIME_SCALE", "0.2")) / 1000
BASE = float(os.environ.get("BASE", "0"))
SPILL = [float(x) for x in os.environ.get("SPILL", "100,200,400").split(",") if x]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def chains(recs):
    """Each request's chain: a list of (segment, tokens)."""
    by_session = collections.defaultdict(list)
    for r in recs:
        by_session[r["session_id"]].append(r)
    roots = sorted({r["root_id"] for r in recs}, key=lambda k: min(x["start_ms"] for x in by_session[k]))
    group = {k: prompt_choice(SEED, i, NPROMPTS) for i, k in enumerate(roots)}
    chain = {}
    turns_of = lambda p: by_session[p["session_id"]].index(p)
    for r in sorted(recs, key=lambda r: (r["depth"], r["start_ms"])):
        turns = by_session[r["session_id"]]
        i = turns.index(r)
        if i > 0:
            prev = turns[i - 1]
            prev = chain[id(prev)] + [((prev["session_id"], i - 1, "out"), prev["output_tokens"])]
            used = sum(t for _, t in prev)
            chain[id(r)] = prev + [((r["session_id"], i), max(0, r["prompt_tokens"] - used))]
            continue
        if r["parent_id"] is None:
            base = [(("sys", group[r["root_id"]]), SYS)]
        else:
            parent = [p for p in by_session[r["parent_id"]] if p["start_ms"] <= r["start_ms"]]
            if parent:
                p = parent[-1]
                base = chain[id(p)]
                if p["start_ms"] + p["e2e_ms"] <= r["start_ms"]:
                    base = base + [((p["session_id"], turns_of(p), "out"), p["output_tokens"])]
            else:
                base = [(("sys", group[r["root_id"]]), SYS)]
        used = sum(t for _, t in base)
        chain[id(r)] = base + [((r["session_id"], 0), max(0, r["prompt_tokens"] - used))]
    return chain, group


class Kv:
    """Segments held (tokens of each, leading part), least recently used first; a chain is
    touched deepest segment first, so eviction eats conversations from their tails (the sim's
    order), a segment partly (16-token blocks)."""

    def __init__(self):
        self.held = collections.OrderedDict()
        self.total = 0

    def serve(self, chain):
        cached = 0
        for seg, t in chain:
            h = self.held.get(seg, 0)
            cached += min(h, t)
            if h < t:
                break
        for seg, t in reversed(chain):
            self.total += t - self.held.get(seg, 0)
            self.held[seg] = t
            self.held.move_to_end(seg)
        mine = {seg for seg, _ in chain}
        for seg in list(self.held):
            if self.total <= KV:
                break
            if seg in mine:
                continue
            over = self.total - KV
            h = self.held[seg]
            cut = min(h, -(-over // 16) * 16)
            self.total -= cut
            if cut >= h:
                del self.held[seg]
            else:
                self.held[seg] = h - cut
        return cached


def replay(recs, chain, worker_of):
    """worker_of(r, queue_ms_by_worker) -> worker; returns the figures."""
    kv = collections.defaultdict(Kv)
    free = collections.defaultdict(float)
    work = collections.Counter()
    ttft, cached_sum, prompt_sum, lost, copies = [], 0, 0, 0, 0
    last_prompt = {}
    holders = collections.defaultdict(set)
    for r in recs:
        t0 = r["start_ms"]
        queue = {w: max(0.0, free[w] - t0) for w in WORKERS}
        w = worker_of(r, queue)
        c = chain[id(r)]
        p = sum(t for _, t in c)
        cached = kv[w].serve(c)
        kv[w].serve(c + [((r["session_id"], r["turn_index"], "out"), r["output_tokens"])])
        if c[0][0][0] == "sys" and r["turn_index"] == 0 and r["depth"] == 0 and w not in holders[c[0][0]]:
            copies += 1
            holders[c[0][0]].add(w)
        prev = last_prompt.get(r["session_id"])
        if prev is not None and prev - cached > 0.1 * prev:
            lost += 1
        last_prompt[r["session_id"]] = p
        cost = BASE + (p - cached + 0.05 * cached) / SPEED
        start = max(t0, free[w])
        free[w] = start + cost
        work[w] += p - cached
        ttft.append(free[w] - t0)
        cached_sum += cached
        prompt_sum += p
    mean = sum(work.values()) / len(WORKERS)
    return (cached_sum / prompt_sum, pct(ttft, 0.5), pct(ttft, 0.9), pct(ttft, 0.99),
            max(work.values()) / mean, lost, copies)


def show(name, f):
    print(f"  {name:<14} cached {f[0]:.3f}  TTFT p50/p90/p99 {f[1]:4.0f} / {f[2]:4.0f} / {f[3]:4.0f} ms  "
          f"prefill max/mean {f[4]:.2f}  lost history {f[5]:3d}  prompt copies {f[6]}")


for d in sys.argv[1:]:
    recs = [json.loads(line) for line in open(d + "/records.jsonl")]
    recs = sorted((r for r in recs if r["ok"]), key=lambda r: r["start_ms"])
    wk = lambda r: (r.get("sim_worker") or r.get("routed_worker") or "?")[-1]
    WORKERS = sorted({wk(r) for r in recs})
    chain, group = chains(recs)
    meas_cached = sum(r.get("cached_tokens") or 0 for r in recs) / sum(r["prompt_tokens"] for r in recs)
    print(f"== {d}: {len(recs)} requests, roots per prompt {dict(sorted(collections.Counter(group.values()).items()))}")
    print(f"  {'measured':<14} cached {meas_cached:.3f}  TTFT p50/p90/p99 "
          + " / ".join(f"{pct([r['ttft_ms'] for r in recs], p):4.0f}" for p in (0.5, 0.9, 0.99)) + " ms")
    show("run", replay(recs, chain, lambda r, q: wk(r)))
    # each group on its own worker, in order of first use
    gw = {}
    for r in recs:
        g = group[r["root_id"]]
        if g not in gw:
            gw[g] = WORKERS[len(gw) % len(WORKERS)]
    show("groups", replay(recs, chain, lambda r, q: gw[group[r["root_id"]]]))
    big = collections.Counter(group.values()).most_common(1)[0][0]
    fam, seen = {}, collections.Counter()

    def split(r, q):
        g = group[r["root_id"]]
        if r["root_id"] not in fam:
            w = gw[g]
            if g == big:
                seen[g] += 1
                if seen[g] % 2 == 0:
                    w = min((x for x in WORKERS if x != gw[g]), key=lambda x: q[x])
            fam[r["root_id"]] = w
        return fam[r["root_id"]]
    show("split", replay(recs, chain, split))
    # the largest group's every k-th root family to the smallest group's worker
    small = collections.Counter(group.values()).most_common()[-1][0]
    for k in (2, 3, 4):
        fam3, seen3 = {}, collections.Counter()

        def every(r, q, k=k, fam3=fam3, seen3=seen3):
            g = group[r["root_id"]]
            if r["root_id"] not in fam3:
                w = gw[g]
                if g == big:
                    seen3[g] += 1
                    if seen3[g] % k == 0:
                        w = gw[small]
                fam3[r["root_id"]] = w
            return fam3[r["root_id"]]
        show(f"split1/{k}:small", replay(recs, chain, every))
    for x in SPILL:
        fam2 = {}

        def spill(r, q, x=x, fam2=fam2):
            if r["root_id"] not in fam2:
                w = gw[group[r["root_id"]]]
                least = min(WORKERS, key=lambda v: q[v])
                fam2[r["root_id"]] = least if q[w] > q[least] + x else w
            return fam2[r["root_id"]]
        show(f"spill:{x:.0f}", replay(recs, chain, spill))
