#!/usr/bin/env python3
"""Per-second timeline of one scripts/bench-feedback.sh run (issue #17 session 15: why
`kvpressure` runs tip). From the run's records.jsonl (and, when the gateway log in the artifact
dir has LOG_LEVEL="warn,berth::feedback=debug" lines, the answers it compared), per second of
the run (by request start):

- requests started, their cached share and mean TTFT;
- per system-prompt group (the bench's `--num-system-prompts` choice of each root session,
  recomputed here from the seed as `berth bench` draws it: SplitMix64, `system_prompt_choice`
  in crates/berth-bench/src/workload/prompts.rs), the workers its root sessions' first turns
  went to, as letters A-D (worker order by URL), lowercase when the turn copied the system
  prompt (over 1,500 uncached tokens);
- continuing turns, how many moved off their session's previous worker, how many lost their
  history on their own worker (cached less than 90% of the session's previous prompt), and how
  many lost the system prompt too (under 1,500 cached tokens);
- per worker, the uncached tokens of the requests started (thousands) and the uncached tokens
  of the requests waiting for their first byte at the second's end (thousands);
- with the gateway's feedback log: per worker, the answers that fell short of the prediction
  out of those compared.

Usage: bench-feedback-timeline.py ARTIFACT_DIR SEED"""
import collections
import datetime
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prompts import prompt_choice  # noqa: E402


d, seed = sys.argv[1], int(sys.argv[2])
recs = sorted((json.loads(x) for x in open(d + "/records.jsonl")), key=lambda r: r["start_ms"])
recs = [r for r in recs if r["ok"]]
workers = sorted({r["routed_worker"] for r in recs})
wi = {w: i for i, w in enumerate(workers)}
n = len(workers)
roots = [r for r in recs if r["depth"] == 0 and r["turn_index"] == 0]
group = {r["session_id"]: prompt_choice(seed, i, 4) for i, r in enumerate(roots)}
ngroups = max(group.values(), default=0) + 1

B = collections.defaultdict(collections.Counter)
G = collections.defaultdict(lambda: [[] for _ in range(ngroups)])
last_w, prev_p = {}, {}
for r in recs:
    b = int(r["start_ms"] // 1000)
    c = B[b]
    cached = r.get("cached_tokens") or 0
    unc = r["prompt_tokens"] - cached
    w = wi[r["routed_worker"]]
    c["n"] += 1
    c["prompt"] += r["prompt_tokens"]
    c["uncached"] += unc
    c["ttft"] += r["ttft_ms"]
    c[f"u{w}"] += unc
    sid = r["session_id"]
    if r["turn_index"] == 0 and r["depth"] == 0:
        letter = "ABCDEFGH"[w]
        G[b][group[sid]].append(letter.lower() if unc > 1500 else letter)
    elif r["turn_index"] > 0:
        c["cont"] += 1
        p = prev_p.get(sid, 0)
        if last_w.get(sid) != r["routed_worker"]:
            c["moved"] += 1
        elif p - cached > 0.1 * p:
            c["lost"] += 1
            c["lost_sys"] += cached < 1500
    last_w[sid], prev_p[sid] = r["routed_worker"], r["prompt_tokens"]

queued = {}
for b in B:
    t = (b + 1) * 1000.0
    q = [0] * n
    for r in recs:
        if r["start_ms"] <= t < r["start_ms"] + r["ttft_ms"]:
            q[wi[r["routed_worker"]]] += r["prompt_tokens"] - (r.get("cached_tokens") or 0)
    queued[b] = q

# the gateway's compared answers (berth::feedback=debug), aligned on the first one
ansi = re.compile(r"\x1b\[[0-9;]*m")
F = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
try:
    lines = [ansi.sub("", x) for x in open(d + "/gateway.log") if "cached tokens compared" in x]
except OSError:
    lines = []
t0 = None
for line in lines:
    ts = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
    t0 = ts if t0 is None else t0
    url = re.search(r"worker=(\S+)", line).group(1)
    if url not in wi:
        continue
    c = F[int(ts - t0)][wi[url]]
    c[0] += 1
    c[1] += '"shortfall"' in line

total_p = sum(r["prompt_tokens"] for r in recs)
total_u = sum(r["prompt_tokens"] - (r.get("cached_tokens") or 0) for r in recs)
print(f"{d}: {len(recs)} answered, cached share {1 - total_u / total_p:.3f}, {len(roots)} roots")
head = "  s   n cached ttft | " + " | ".join(f"g{g} roots" for g in range(ngroups))
head += " | cont moved lost (sys) | uncached started k | queued at end k"
print(head + (" | short/compared" if F else ""))
for b in sorted(B):
    c = B[b]
    gs = " | ".join(f"{''.join(G[b][g]):8s}" for g in range(ngroups))
    us = " ".join(f"{c[f'u{i}'] / 1000:4.1f}" for i in range(n))
    qs = " ".join(f"{x / 1000:4.1f}" for x in queued[b])
    line = (f"{b:3d} {c['n']:3d} {1 - c['uncached'] / max(c['prompt'], 1):.2f} "
            f"{c['ttft'] / c['n']:5.0f} | {gs} | {c['cont']:4d} {c['moved']:5d} {c['lost']:4d} "
            f"({c['lost_sys']:3d}) | {us} | {qs}")
    if F:
        line += " | " + " ".join(f"{F[b][i][1]:2d}/{F[b][i][0]:2d}" for i in range(n))
    print(line)
