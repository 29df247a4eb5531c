#!/usr/bin/env python3
"""Where the cached share of scripts/bench-feedback.sh runs goes, per arm (issue #17 session 13):
over the seeds every listed arm ran, the mean count of requests and their uncached tokens (as a
share of all prompt tokens) by kind: a root session's first turn that copied its system prompt
(over 1,500 uncached tokens) or found it (root-new); a sub-agent's first turn on its parent's
latest worker or off it; a continuing turn on its session's worker or moved, that kept its
history or lost it (cached less than 90% of the session's previous prompt). With the gateway's
`berth::feedback=debug` log in the artifact dir (LOG_LEVEL="warn,berth::feedback=debug"), also
the index-predicted shortfalls per run, the corrections among them, the chunks they dropped and
the corrections that dropped 100 chunks or more.

Usage: bench-feedback-kinds.py OUT_DIR SETTING POLICY ARM[,ARM...]
  (artifact dirs OUT_DIR/SETTING-POLICY-ARM-SEED, ARM with ':' written as '-')"""
import collections
import glob
import json
import re
import sys

out, setting, policy, arms = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
ansi = re.compile(r"\x1b\[[0-9;]*m")


def kinds(d):
    recs = sorted((json.loads(x) for x in open(d + "/records.jsonl")), key=lambda r: r["start_ms"])
    recs = [r for r in recs if r["ok"]]
    w = lambda r: r.get("sim_worker") or r.get("routed_worker")
    last_w, prev_p, agg, total, unc_all = {}, {}, collections.defaultdict(lambda: [0, 0]), 0, 0
    for r in recs:
        unc = r["prompt_tokens"] - (r.get("cached_tokens") or 0)
        total += r["prompt_tokens"]
        unc_all += unc
        sid = r["session_id"]
        if r["turn_index"] == 0:
            if r["depth"] == 0:
                k = "root-copy" if unc > 1500 else "root-new"
            else:
                k = "sub-on-parent" if last_w.get(r["parent_id"]) == w(r) else "sub-off-parent"
        else:
            p = prev_p.get(sid, 0)
            lost = p - (r["prompt_tokens"] - unc) > 0.1 * p
            k = ("turn-moved" if last_w.get(sid) != w(r) else "turn-stay") + ("-lost" if lost else "-kept")
        last_w[sid], prev_p[sid] = w(r), r["prompt_tokens"]
        agg[k][0] += 1
        agg[k][1] += unc
    return 1 - unc_all / total, total, agg


def corrections(d):
    c = collections.Counter()
    try:
        lines = open(d + "/gateway.log")
    except OSError:
        return None
    for line in lines:
        line = ansi.sub("", line)
        if "cached tokens compared" not in line or "session=false" not in line:
            continue
        if '"shortfall"' not in line:
            continue
        dropped = int(re.search(r"dropped=(\d+)", line).group(1))
        c["shortfalls"] += 1
        c["corrections"] += dropped > 0
        c["dropped chunks"] += dropped
        c["drops >= 100"] += dropped >= 100
    return c


runs = {}
for arm in arms:
    for d in glob.glob(f"{out}/{setting}-{policy}-{arm.replace(':', '-')}-*"):
        runs[(arm, int(d.rsplit("-", 1)[1]))] = d
seeds = sorted({s for (_, s) in runs if all((a, s) in runs for a in arms)})
res = {k: kinds(d) for k, d in runs.items() if k[1] in seeds}
names = sorted({k for v in res.values() for k in v[2]})
print(f"{setting} {policy}: {len(seeds)} seeds ({', '.join(map(str, seeds))})")
print("| kind | " + " | ".join(f"{a}: requests, uncached / prompt" for a in arms) + " |")
print("|---|" + "---:|" * len(arms))
print("| cached share | " + " | ".join(f"{sum(res[(a, s)][0] for s in seeds) / len(seeds):.3f}" for a in arms) + " |")
for k in names:
    cells = []
    for a in arms:
        n = sum(res[(a, s)][2][k][0] for s in seeds) / len(seeds)
        u = sum(res[(a, s)][2][k][1] / res[(a, s)][1] for s in seeds) / len(seeds)
        cells.append(f"{n:.1f}, {u:.4f}")
    print(f"| {k} | " + " | ".join(cells) + " |")
for a in arms:
    cs = [corrections(runs[(a, s)]) for s in seeds]
    if any(c is None or not c for c in cs):
        continue
    tot = sum(cs, collections.Counter())
    print(f"{a}: per run " + ", ".join(f"{k} {v / len(seeds):.1f}" for k, v in tot.items()))
