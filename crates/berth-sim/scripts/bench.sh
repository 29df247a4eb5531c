#!/usr/bin/env bash
# Throughput and open-stream memory of one simulated worker (docs/benchmarks.md, "sim-worker").
# Loopback only. Usage: crates/berth-sim/scripts/bench.sh   (from the workspace root)
set -euo pipefail
cargo build --release -p berth-sim --examples
BIN=target/release/examples
PORT=${PORT:-31500}

echo "== throughput: small non-streamed chat requests, time scale 0"
"$BIN/sim_worker" --port "$PORT" --time-scale 0 > /dev/null 2>&1 &
W=$!
trap 'kill $W 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -sf "127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
for _ in 1 2 3; do
  "$BIN/load" --addr "127.0.0.1:$PORT" --connections 64 --requests 200000
done
if command -v wrk > /dev/null; then
  lua=$(mktemp)
  cat > "$lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
wrk.headers["Content-Type"] = "application/json"
LUA
  wrk -t2 -c64 -d10s -s "$lua" "http://127.0.0.1:$PORT/v1/chat/completions"
  rm -f "$lua"
fi
grep -E "VmHWM" "/proc/$W/status"
kill $W; wait $W 2>/dev/null || true

echo "== memory: 10k open streams (1 token/s each, all running)"
"$BIN/sim_worker" --port "$PORT" --time-scale 1 --decode-step-ms 1000 \
  --decode-step-per-running-ms 0 --max-running 20000 > /dev/null 2>&1 &
W=$!
for _ in $(seq 1 50); do curl -sf "127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
echo "idle: $(grep VmRSS "/proc/$W/status")"
out=$(mktemp)
"$BIN/streams" --addr "127.0.0.1:$PORT" --streams 10000 --hold-secs 10 > "$out" 2>&1 &
S=$!
for _ in $(seq 1 240); do grep -q open_streams "$out" && break; sleep 0.5; done
head -1 "$out"
echo "with streams: $(grep VmRSS "/proc/$W/status") fds=$(ls "/proc/$W/fd" | wc -l)"
curl -s "127.0.0.1:$PORT/sim/stats"; echo
wait $S
rm -f "$out"
