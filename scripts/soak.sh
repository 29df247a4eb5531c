#!/usr/bin/env bash
# A rerunnable soak of `berth serve` under faults (issue #11 part 7). Loopback only, bounded.
#
# Four sim workers behind one gateway (cache_aware + routing-key override):
#   w1, w2  --close-after-stream (llama-server's habit: a connection is dead after a stream)
#   w3      killed (SIGKILL) and restarted every KILL_EVERY s
#   w4      frozen (SIGSTOP) for FREEZE_FOR s every FREEZE_EVERY s, then SIGCONT
# Load for DURATION s:
#   - bench A: well-behaved non-streamed chat sessions (rid routing). Every request must succeed:
#     a killed or frozen worker costs time (retries, resends), never a failed request.
#   - bench B: well-behaved streamed chat sessions. A stream that was running on w3 when it was
#     SIGKILLed cannot be saved by any gateway; it must end with the gateway's
#     `upstream_stream_error` event (counted as such). Any other failure is a failure.
#   - slow clients: SLOW at a time upload a 2 KiB body at 64 B/s (longer than
#     --request-body-timeout-secs); each must get 408 request_body_timeout.
# The gateway's state is bounded (--max-tree-size, --max-sticky-keys) so that RSS growth past the
# warm-up means a leak, not more sessions remembered.
# Prints requests, failures by cause, breaker transitions, the gateway's RSS at the start and
# the end; exits non-zero on a failed well-behaved request, a slow client answered otherwise than
# 408, or RSS growth over RSS_GROWTH_MAX_KIB.
#
# Usage: scripts/soak.sh [DURATION_SECS]     (default 600; results in $OUT, default /tmp/berth-soak)
# Not part of the test suite.
set -euo pipefail

DURATION=${1:-600}
OUT=${OUT:-/tmp/berth-soak}
KILL_EVERY=${KILL_EVERY:-45}
FREEZE_EVERY=${FREEZE_EVERY:-60}
FREEZE_FOR=${FREEZE_FOR:-8}
SLOW=${SLOW:-4}
RSS_GROWTH_MAX_KIB=${RSS_GROWTH_MAX_KIB:-65536}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth

mkdir -p "$OUT"
rm -rf "$OUT"/*.log "$OUT"/slow-*.txt "$OUT"/bench-*
PIDS=()
SLOW_PIDS=()
W3_PID=""
cleanup() {
    [ -n "${W4_PID:-}" ] && kill -CONT "$W4_PID" 2>/dev/null || true
    for p in "${SLOW_PIDS[@]}" "${PIDS[@]}" $W3_PID; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

(cd "$ROOT" && nice -n 10 cargo build --release -q --locked -p berth)

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

plain_log() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }
wait_log() { # file pattern: prints the first match (bounded wait)
    for _ in $(seq 1 300); do
        local m; m=$(plain_log "$1" 2>/dev/null | grep -o -m1 "$2" || true)
        [ -n "$m" ] && { echo "$m"; return 0; }
        sleep 0.1
    done
    echo "no '$2' in $1" >&2
    return 1
}

# Every process binds port 0 (ephemeral; other people's runs may hold fixed ports) and the
# script reads the address from its log. A restarted worker reuses its first port.
SIM_FLAGS=(--host 127.0.0.1 --time-scale 0.05 --record-capacity 0)
LAST_PID=""
sim() { # name port extra...   (port 0: any)
    local name=$1 port=$2; shift 2
    "$BERTH" sim-worker "${SIM_FLAGS[@]}" --port "$port" --worker-id "$name" "$@" \
        >>"$OUT/sim-$name.log" 2>&1 &
    LAST_PID=$!
}
url_of() { wait_log "$OUT/sim-$1.log" 'http://127\.0\.0\.1:[0-9]*' | tail -1; }
sim w1 0 --close-after-stream; PIDS+=($LAST_PID)
sim w2 0 --close-after-stream; PIDS+=($LAST_PID)
sim w3 0; W3_PID=$LAST_PID
sim w4 0; W4_PID=$LAST_PID; PIDS+=($W4_PID)
U1=$(url_of w1); U2=$(url_of w2); U3=$(url_of w3); U4=$(url_of w4)
P3=${U3##*:}
for u in $U1 $U2 $U3 $U4; do wait_http "$u/health"; done

"$BERTH" serve --host 127.0.0.1 --port 0 --prometheus-host 127.0.0.1 --prometheus-port 0 \
    --worker-urls "$U1" "$U2" "$U3" "$U4" \
    --policy cache_aware --routing-key-override --request-timeout-secs 5 \
    --max-tree-size 200000 --max-sticky-keys 20000 \
    --request-body-timeout-secs 10 --request-body-idle-timeout-secs 5 \
    --health-check-interval-secs 5 --health-check-timeout-secs 2 --cb-timeout-duration-secs 10 \
    >"$OUT/gateway.log" 2>&1 &
GW_PID=$!; PIDS+=($GW_PID)
GP=$(wait_log "$OUT/gateway.log" ' addr=127\.0\.0\.1:[0-9]*' | grep -o '[0-9]*$')
MP=$(wait_log "$OUT/gateway.log" 'metrics_addr=Some(127\.0\.0\.1:[0-9]*' | grep -o '[0-9]*$')
wait_http "http://127.0.0.1:$GP/readiness"

# Warm up, then take the starting RSS.
"$BERTH" bench --url "http://127.0.0.1:$GP" --num-sessions 50 --concurrency 8 --quiet \
    --session-routing rid >"$OUT/warmup.log" 2>&1
RSS_START=$(rss_kib "$GW_PID")

bench() { # name extra...
    local name=$1; shift
    "$BERTH" bench --url "http://127.0.0.1:$GP" --benchmark-duration "$DURATION" --concurrency 8 \
        --session-turns-mean 4 --synthetic-input-tokens-mean 200 --output-tokens-mean 16 \
        --session-routing rid --request-timeout-seconds 120 --quiet --allow-failed-requests \
        --artifact-dir "$OUT/bench-$name" "$@" >"$OUT/bench-$name.log" 2>&1
}
bench plain & BA=$!
bench stream --streaming & BB=$!

slow_client() { # index
    local i=$1 n=0
    local body; body=$(printf '{"model":"sim-model","messages":[{"role":"user","content":"%s"}]}' "$(head -c 2000 /dev/zero | tr '\0' x)")
    while [ "$(date +%s)" -lt "$END" ]; do
        local code
        code=$(curl -s -o /dev/null -w '%{http_code}' --limit-rate 64 --max-time 60 \
            -H 'content-type: application/json' --data-binary "$body" \
            "http://127.0.0.1:$GP/v1/chat/completions") || true
        echo "${code:-000}" >>"$OUT/slow-$i.txt"
        n=$((n + 1))
    done
}
END=$(( $(date +%s) + DURATION ))
for i in $(seq 1 "$SLOW"); do slow_client "$i" & SLOW_PIDS+=($!); done

# Chaos until the end.
START=$(date +%s); KILLS=0; FREEZES=0
next_kill=$((START + KILL_EVERY)); next_freeze=$((START + FREEZE_EVERY / 2))
while [ "$(date +%s)" -lt "$END" ]; do
    now=$(date +%s)
    if [ "$now" -ge "$next_kill" ]; then
        kill -9 "$W3_PID" 2>/dev/null || true; wait "$W3_PID" 2>/dev/null || true
        sleep 3
        sim w3 "$P3"; W3_PID=$LAST_PID
        KILLS=$((KILLS + 1)); next_kill=$((now + KILL_EVERY))
    fi
    if [ "$now" -ge "$next_freeze" ]; then
        kill -STOP "$W4_PID" || true; sleep "$FREEZE_FOR"; kill -CONT "$W4_PID" || true
        FREEZES=$((FREEZES + 1)); next_freeze=$(( $(date +%s) + FREEZE_EVERY ))
    fi
    sleep 1
done
wait "$BA" "$BB" || true
for p in "${SLOW_PIDS[@]}"; do wait "$p" || true; done
RSS_END=$(rss_kib "$GW_PID")
METRICS=$(curl -s "http://127.0.0.1:$MP/metrics")

summary() { # name field
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s.get(sys.argv[2], s.get("summary", {}).get(sys.argv[2])))' \
        "$OUT/bench-$1/summary.json" "$2"
}
errors_of() { # name
    python3 - "$OUT/bench-$1/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "errors" in o and isinstance(o["errors"], dict):
            return o["errors"]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    return None
print(json.dumps(find(s) or {}))
PY
}
A_REQ=$(summary plain requests); A_FAIL=$(summary plain failed)
B_REQ=$(summary stream requests); B_FAIL=$(summary stream failed)
A_ERR=$(errors_of plain); B_ERR=$(errors_of stream)
B_CUT=$(python3 -c 'import json,sys; e=json.loads(sys.argv[1]); print(sum(v for k,v in e.items() if "upstream_stream_error" in k))' "$B_ERR")
SLOW_TOTAL=$(cat "$OUT"/slow-*.txt 2>/dev/null | wc -l)
SLOW_408=$(cat "$OUT"/slow-*.txt 2>/dev/null | grep -c '^408$' || true)
TRANSITIONS=$(grep -c 'circuit breaker transition' "$OUT/gateway.log" || true)
metric() { echo "$METRICS" | awk -v m="$1" '$1 == m {print $2}'; }

echo "soak: ${DURATION}s, worker kills ${KILLS}, freezes ${FREEZES} (${FREEZE_FOR}s each), slow clients ${SLOW}"
echo "bench plain  (non-streamed): requests ${A_REQ}, failed ${A_FAIL}, by cause ${A_ERR}"
echo "bench stream (streamed):     requests ${B_REQ}, failed ${B_FAIL}, by cause ${B_ERR} (cut by SIGKILL: ${B_CUT})"
echo "slow clients: ${SLOW_TOTAL} uploads, ${SLOW_408} answered 408"
echo "gateway: retries $(metric smg_router_retries_total), stale-connection resends $(metric smg_router_stale_connection_resends_total), stream errors $(metric smg_router_upstream_stream_errors_total), breaker transitions ${TRANSITIONS}"
echo "gateway RSS: start ${RSS_START} KiB, end ${RSS_END} KiB, growth $((RSS_END - RSS_START)) KiB (bound ${RSS_GROWTH_MAX_KIB})"

status=0
[ "$A_FAIL" = "0" ] || { echo "FAIL: well-behaved non-streamed requests failed"; status=1; }
[ "$B_FAIL" = "$B_CUT" ] || { echo "FAIL: well-behaved streams failed other than by the worker kill"; status=1; }
[ "$SLOW_TOTAL" = "$SLOW_408" ] || { echo "FAIL: a slow client was answered otherwise than 408"; status=1; }
[ $((RSS_END - RSS_START)) -le "$RSS_GROWTH_MAX_KIB" ] || { echo "FAIL: gateway RSS grew too much"; status=1; }
[ "$status" = 0 ] && echo "soak passed"
exit "$status"
