#!/usr/bin/env python3
"""The hashing baseline's ring in scripts/bench-agentic.sh (issue #21 session 15).

berth's `consistent_hashing` (the stand-in for nginx's `hash $http_x_smg_routing_key
consistent`) hashes the workers' URLs, ports included, so which worker each session lands on,
and how even the ring is on a trace of 96 sessions, depends on the port range the bench runs
on (session 14: 1.48x the mean of seed 11's requests on one worker on ports 24001-24004,
1.05x on 24101-24104). bench-agentic.sh therefore tries a few port layouts for the hashing
row's workers and runs it on the most even one: the fairest hashing baseline, whatever
BASE_PORT is.

  probe TRACE GATEWAY_URL OUT   one tiny request per trace session through a gateway running
                                `consistent_hashing`, keyed as the bench keys it (the session id,
                                `x-smg-routing-key`); writes "session<TAB>worker URL" lines
  choose TRACE FLEET FILE...    per probe file (one per layout): each worker's share of the
                                trace's sessions, requests (turns) and prompt tokens (the tokens
                                each turn adds, what a worker that keeps every history
                                prefills); prints one line per layout and, last, the index of
                                the layout whose busiest worker is least over the mean (the
                                larger of the request and token ratios)

The shares count every session of the trace (SAMPLE / SESSIONS subsets are not applied)."""
import json
import sys
import urllib.request
from collections import OrderedDict, defaultdict


def sessions(trace):
    """session id -> (turns, tokens), in first-seen order."""
    out = OrderedDict()
    for line in open(trace):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        turns, tokens = out.get(r["session_id"], (0, 0))
        out[r["session_id"]] = (turns + 1, tokens + int(r.get("input_length", 0)))
    return out


def valid_key(k):
    # berth_client::RoutingKey::new: the bench sends the id itself when it is one
    return 0 < len(k.encode()) <= 128 and all(0x21 <= b <= 0x7E for b in k.encode())


def probe(trace, gw, out):
    with open(out, "w") as f:
        for sid in sessions(trace):
            if not valid_key(sid):
                print(f"skipped {sid!r}: the bench derives another key for it", file=sys.stderr)
                continue
            body = json.dumps({
                "model": "sim-model",
                "messages": [{"role": "user", "content": "ring probe"}],
                "max_tokens": 1,
                "stream": False,
            }).encode()
            req = urllib.request.Request(
                gw.rstrip("/") + "/v1/chat/completions",
                data=body,
                headers={"content-type": "application/json", "x-smg-routing-key": sid},
            )
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
                f.write(f"{sid}\t{resp.headers.get('x-smg-routed-worker-id', '?')}\n")


def shares(trace_sessions, path):
    per = defaultdict(lambda: [0, 0, 0])  # worker -> sessions, turns, tokens
    for line in open(path):
        sid, worker = line.rstrip("\n").split("\t")
        turns, tokens = trace_sessions.get(sid, (0, 0))
        w = per[worker]
        w[0] += 1
        w[1] += turns
        w[2] += tokens
    return per


def over_mean(values, fleet):
    total = sum(values)
    return max(values) / (total / fleet) if total else float("nan")


def choose(trace, fleet, files):
    s = sessions(trace)
    best = None
    for i, path in enumerate(files):
        per = shares(s, path)
        workers = sorted(per)
        cols = [[per[w][j] for w in workers] + [0] * (fleet - len(workers)) for j in range(3)]
        req, tok = over_mean(cols[1], fleet), over_mean(cols[2], fleet)
        score = max(req, tok)
        ports = ",".join(w.rsplit(":", 1)[-1] for w in workers)
        print(
            f"layout {i} (ports {ports}): sessions per worker {'/'.join(map(str, cols[0]))}, "
            f"busiest / mean: requests {req:.2f}, prompt tokens {tok:.2f}"
        )
        if best is None or score < best[0]:
            best = (score, i)
    print(best[1] if best else 0)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "probe" and len(sys.argv) == 5:
        probe(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "choose" and len(sys.argv) >= 5:
        choose(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(__doc__)
