#!/usr/bin/env bash
# One routing set-up on the agentic workload of `berth demo`'s second set, with the knobs the
# demo fixes left open: 4 `berth sim-worker` processes (KV capacity KV tokens each, prefill 2,000
# tokens/s serialized, time scale 0.2) behind one `berth serve --policy POLICY [gateway flags]`,
# driven by `berth bench` (ROOTS root sessions, Poisson arrivals at RATE/s, NPROMPTS shared system
# prompts of SYSW words, 3±2 turns, 2 sub-agents extending their parent, streaming chat), all on
# loopback. Prints the bench's summary and the gateway's routing metrics; bounded by ROOTS.
#
# Usage: scripts/bench-agentic-set.sh POLICY SESSION_ROUTING [gateway flags...]
#   e.g. scripts/bench-agentic-set.sh ttft_aware smg_routing_key
#        ROOTS=100 RATE=8 scripts/bench-agentic-set.sh cache_aware none
#   env: ROOTS (60) RATE (6) NPROMPTS (4) SYSW (1500) KV (6144) SEED (1)
#        BASE_PORT (24600: the gateway; workers BASE_PORT+1..+4, metrics BASE_PORT+9)
#        BIN (a berth binary; default: target/release/berth, built first)  OUT (/tmp/berth-agentic)
set -euo pipefail
POLICY=$1; ROUTING=$2; shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=${BIN:-$ROOT/target/release/berth}
BASE=${BASE_PORT:-24600}
OUT=${OUT:-/tmp/berth-agentic}
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
mkdir -p "$OUT"
trap kill_pids EXIT
[ -n "${BIN:-}" ] || (cd "$ROOT" && cargo build --release -q -p berth)

URLS=()
for i in 1 2 3 4; do
    "$BERTH" sim-worker --host 127.0.0.1 --port $((BASE + i)) --model sim-model \
        --kv-capacity-tokens "${KV:-6144}" --prefill-tokens-per-sec 2000 --time-scale 0.2 \
        >"$OUT/sim-$i.log" 2>&1 &
    PIDS+=($!)
    URLS+=("http://127.0.0.1:$((BASE + i))")
done
for u in "${URLS[@]}"; do wait_http "$u/health"; done
"$BERTH" serve --host 127.0.0.1 --port "$BASE" --worker-urls "${URLS[@]}" --policy "$POLICY" \
    --prometheus-host 127.0.0.1 --prometheus-port $((BASE + 9)) --log-level warn "$@" \
    >"$OUT/gateway.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$BASE/readiness"

"$BERTH" bench --url "http://127.0.0.1:$BASE" --session-routing "$ROUTING" \
    --num-sessions "${ROOTS:-60}" --concurrency 1000 --request-rate "${RATE:-6}" \
    --arrival-pattern poisson --num-system-prompts "${NPROMPTS:-4}" \
    --shared-system-prompt-length "${SYSW:-1500}" --session-turns-mean 3 --session-turns-stddev 2 \
    --session-turn-delay-mean 200 --session-turn-delay-stddev 100 \
    --synthetic-input-tokens-mean 120 --synthetic-input-tokens-stddev 60 \
    --output-tokens-mean 40 --output-tokens-stddev 13 --agent-fanout 2 --agent-depth 1 \
    --agent-context parent --random-seed "${SEED:-1}" --expected-workers 4 \
    --endpoint-type chat --streaming --quiet --artifact-dir "$OUT/artifacts"
curl -s "http://127.0.0.1:$((BASE + 9))/metrics" \
    | grep -E '^(smg_manual_policy_branch_total|berth_worker_ttft|berth_worker_overload_total)' || true
