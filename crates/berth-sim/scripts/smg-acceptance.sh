#!/usr/bin/env bash
# Acceptance of the simulated worker by a real SMG (the SGLang Model Gateway), version 1.13.
# Needs `smg` on PATH or SMG=/path/to/smg (e.g. `python3 -m venv /tmp/smgvenv &&
# /tmp/smgvenv/bin/pip install 'smg==1.13.*'`, then SMG=/tmp/smgvenv/bin/smg). Loopback only.
set -uo pipefail
SMG=${SMG:-smg}
cargo build -p berth-sim --example sim_worker
BIN=target/debug/examples/sim_worker
"$BIN" --port 31001 --worker-id w1 --model m1 --time-scale 0.01 > /dev/null 2>&1 & W1=$!
"$BIN" --port 31002 --worker-id w2 --model m1 --time-scale 0.01 > /dev/null 2>&1 & W2=$!
LOG=$(mktemp)
"$SMG" launch --worker-urls http://127.0.0.1:31001 http://127.0.0.1:31002 \
  --host 127.0.0.1 --port 31100 --prometheus-host 127.0.0.1 --prometheus-port 31199 \
  --policy manual --log-level debug > "$LOG" 2>&1 & G=$!
trap 'kill $G $W1 $W2 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf localhost:31100/readiness > /dev/null && break; sleep 0.2; done
echo "== readiness: $(curl -s localhost:31100/readiness)"
H='content-type: application/json'
echo "== a three-turn conversation pinned by x-smg-routing-key (each turn repeats the last answer)"
python3 - <<'PY'
import json, urllib.request
msgs = [{"role": "user", "content": "Plan a three-day trip to Kyoto with temples and food please"}]
prev = None
for turn in (1, 2, 3):
    req = urllib.request.Request("http://127.0.0.1:31100/v1/chat/completions",
        data=json.dumps({"model": "m1", "messages": msgs, "max_tokens": 20}).encode(),
        headers={"content-type": "application/json", "x-smg-routing-key": "conv-42"})
    with urllib.request.urlopen(req) as r:
        body = json.load(r)
        worker, routed = r.headers["x-sim-worker-id"], r.headers["x-smg-routed-worker-id"]
    u = body["usage"]
    expect = 0 if prev is None else (prev[0] + prev[1]) // 16 * 16
    print(f"turn {turn}: worker={worker} routed={routed} prompt={u['prompt_tokens']} "
          f"cached={u['prompt_tokens_details']['cached_tokens']} expected={expect}")
    prev = (u["prompt_tokens"], u["completion_tokens"])
    msgs += [{"role": "assistant", "content": body["choices"][0]["message"]["content"]},
             {"role": "user", "content": "and then?"}]
PY
echo "== chat stream through smg (tail)"
curl -s -N localhost:31100/v1/chat/completions -H "$H" -H 'x-smg-routing-key: conv-42' \
  -d '{"model":"m1","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}' | tail -4
for p in generate messages completions; do
  case $p in
    generate) d='{"text":"hello world ","sampling_params":{"max_new_tokens":3}}'; u=/generate ;;
    messages) d='{"model":"m1","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}'; u=/v1/messages ;;
    completions) d='{"model":"m1","prompt":"hi there ","max_tokens":3}'; u=/v1/completions ;;
  esac
  echo "== $u through smg: $(curl -s -o /dev/null -w '%{http_code}' "localhost:31100$u" -H "$H" -d "$d")"
done
sleep 11
echo "== workers as SMG sees them (runtime, health, polled engine load)"
curl -s localhost:31100/workers | python3 -c "import json,sys;d=json.load(sys.stdin);[print(w['url'],w['runtime_type'],w['is_healthy'],w.get('engine_load',{}).get('loads')) for w in d['workers']]"
echo "== SMG warnings and errors (besides its security-posture banner)"
sed 's/\x1b\[[0-9;]*m//g' "$LOG" | grep -a -E " (WARN|ERROR) " | grep -v posture | head -10
rm -f "$LOG"
