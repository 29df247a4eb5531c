#!/usr/bin/env python3
"""The OpenAI Python SDK's own session names through `berth serve` (issue #19).

Starts three simulated workers and a gateway under `--policy manual` on 127.0.0.1 (ephemeral
ports), then drives it with the official `openai` package, as an application would:

- chat.completions.create(prompt_cache_key=...): every turn of a conversation reaches one worker;
- responses.create(prompt_cache_key=..., previous_response_id=...): a Responses chain stays on
  the worker that produced the previous response;
- responses.create(previous_response_id=...) alone after a first turn keyed by prompt_cache_key:
  the gateway remembers each response id's key, so the chain stays on its worker;
- a request naming no session is refused 400 missing_routing_key (so the keys above are real).

Requires the `openai` package (`python3 -m venv V && V/bin/pip install openai`) and a built
`berth` binary (`cargo build -p berth`; `--berth PATH` to pick another). Optional in CI.
`BASE_PORT=N` takes ports N.. N+4 instead of ephemeral ones.
Exit status 0 when every check passed. Every process it starts is stopped on exit.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import openai
from openai import OpenAI

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# BASE_PORT=N: take ports N, N+1, ... (a range reserved for this run) instead of ephemeral ones.
_NEXT_PORT = [int(os.environ["BASE_PORT"])] if os.environ.get("BASE_PORT") else []


def free_port():
    if _NEXT_PORT:
        _NEXT_PORT[0] += 1
        return _NEXT_PORT[0] - 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--berth", default=os.path.join(ROOT, "target", "debug", "berth"))
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--turns", type=int, default=4)
    args = ap.parse_args()

    logs = tempfile.mkdtemp(prefix="berth-openai-sdk-")
    procs = []

    def spawn(name, argv):
        out = open(os.path.join(logs, name + ".log"), "w")
        procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        workers = [free_port() for _ in range(3)]
        for p in workers:
            spawn(f"sim-{p}", [args.berth, "sim-worker", "--host", "127.0.0.1", "--port", str(p),
                               "--time-scale", "0", "--default-max-tokens", "2"])
        for p in workers:
            wait_http(f"http://127.0.0.1:{p}/health")
        gw, prom = free_port(), free_port()
        spawn("serve", [args.berth, "serve", "--host", "127.0.0.1", "--port", str(gw),
                        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(prom),
                        "--policy", "manual", "--log-level", "warn", "--worker-urls",
                        *[f"http://127.0.0.1:{p}" for p in workers]])
        wait_http(f"http://127.0.0.1:{gw}/readiness")
        client = OpenAI(base_url=f"http://127.0.0.1:{gw}/v1", api_key="unused", max_retries=0)
        print(f"openai {openai.__version__}; gateway 127.0.0.1:{gw}; logs in {logs}")

        # Chat Completions with prompt_cache_key.
        chat_workers = set()
        for s in range(args.sessions):
            key = f"sdk-chat-{s}"
            seen = set()
            messages = [{"role": "user", "content": f"hello {s}"}]
            for t in range(args.turns):
                raw = client.chat.completions.with_raw_response.create(
                    model="sim-model", messages=messages, max_tokens=2, prompt_cache_key=key)
                seen.add(raw.headers["x-smg-routed-worker-id"])
                reply = raw.parse().choices[0].message.content or ""
                messages += [{"role": "assistant", "content": reply},
                             {"role": "user", "content": f"turn {t + 1}"}]
            check(len(seen) == 1, f"chat session {key}: {args.turns} turns on one worker {sorted(seen)}")
            chat_workers |= seen
        check(len(chat_workers) > 1, f"chat sessions spread over {len(chat_workers)} workers")

        # Responses chains: previous_response_id with the chain's prompt_cache_key.
        for s in range(args.sessions):
            key = f"sdk-resp-{s}"
            raw = client.responses.with_raw_response.create(
                model="sim-model", input=f"start {s}", max_output_tokens=2, prompt_cache_key=key)
            first = raw.headers["x-smg-routed-worker-id"]
            prev = raw.parse().id
            same = True
            for t in range(args.turns - 1):
                raw = client.responses.with_raw_response.create(
                    model="sim-model", input=f"turn {t}", max_output_tokens=2,
                    previous_response_id=prev, prompt_cache_key=key)
                same &= raw.headers["x-smg-routed-worker-id"] == first
                prev = raw.parse().id
            check(same and bool(prev), f"responses chain {key}: every turn on {first}")

        # Responses chains naming only the previous response after the first turn.
        for s in range(args.sessions):
            key = f"sdk-chain-{s}"
            raw = client.responses.with_raw_response.create(
                model="sim-model", input=f"start {s}", max_output_tokens=2, prompt_cache_key=key)
            first = raw.headers["x-smg-routed-worker-id"]
            prev = raw.parse().id
            same = True
            for t in range(args.turns - 1):
                raw = client.responses.with_raw_response.create(
                    model="sim-model", input=f"turn {t}", max_output_tokens=2,
                    previous_response_id=prev)
                same &= raw.headers["x-smg-routed-worker-id"] == first
                prev = raw.parse().id
            check(same and bool(prev),
                  f"previous_response_id-only chain {key}: every turn on {first}")

        # No session name at all: refused, naming the code.
        try:
            client.chat.completions.create(
                model="sim-model", messages=[{"role": "user", "content": "x"}], max_tokens=2)
            check(False, "a keyless request is refused")
        except openai.BadRequestError as e:
            check(e.response.headers.get("x-smg-error-code") == "missing_routing_key",
                  "a keyless request is refused 400 missing_routing_key")

        with urllib.request.urlopen(f"http://127.0.0.1:{prom}/metrics") as r:
            metrics = r.read().decode()
        def source(name):
            return next((l for l in metrics.splitlines()
                         if l.startswith(f'smg_routing_key_source_total{{source="{name}"}}')), "")
        # chat turns, and the first turn of each Responses chain (later turns name the previous
        # response, which comes before prompt_cache_key in the default source list)
        want = args.sessions * args.turns + 2 * args.sessions
        line = source("prompt_cache_key")
        check(line.endswith(f" {want}"), f"{want} requests keyed by prompt_cache_key: {line!r}")
        want = 2 * args.sessions * (args.turns - 1)
        line = source("previous_response_id")
        check(line.endswith(f" {want}"), f"{want} requests keyed by previous_response_id: {line!r}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    print(json.dumps({"failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
