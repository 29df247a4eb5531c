#!/usr/bin/env bash
# Gateway CPU and memory at long contexts (issue #18), every row in one run on loopback: 4
# `berth sim-worker` processes at time scale 0 behind one gateway at a time, driven by
# `berth bench`: SESSIONS sessions x TURNS turns of WORDS synthetic words each (each turn resends
# the whole history, so with the defaults prompts average about 71k tokens), X-SMG-Routing-Key
# header keys, CONCURRENCY live sessions. Per row: gateway CPU per request (utime+stime from
# /proc over the whole bench, divided by the requests sent), peak RSS (VmHWM) and RSS after the
# bench (VmRSS), and the bench's failed requests. Rows: berth manual, consistent_hashing,
# cache_aware, ttft_aware; berth-before (BIN_BEFORE=/path/to/old/berth) with the same policies
# (or BEFORE_POLICIES) when set; SMG's cache_aware --routing-key-override when `smg` is at $SMG or on PATH.
# Then UPLOADS concurrent UPLOAD_MB MB chat bodies under `berth serve --policy cache_aware`
# (default flags): their statuses, the gateway's peak RSS, and whether it serves afterwards.
#
# Usage: scripts/bench-long-context.sh
#   env: SESSIONS (200) TURNS (4) WORDS (20000) CONCURRENCY (8) POLICIES (manual
#        consistent_hashing cache_aware ttft_aware) UPLOADS (16) UPLOAD_MB (64) BASE_PORT (19400)
#        SMG (smg on PATH, else /work/venv-smg/bin/smg) BIN_BEFORE (unset)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
BASE=${BASE_PORT:-19400}
OUT=${OUT:-/tmp/berth-long-context}
SESSIONS=${SESSIONS:-200}
TURNS=${TURNS:-4}
WORDS=${WORDS:-20000}
CONCURRENCY=${CONCURRENCY:-8}
POLICIES=${POLICIES:-"manual consistent_hashing cache_aware ttft_aware"}
UPLOADS=${UPLOADS:-16}
UPLOAD_MB=${UPLOAD_MB:-64}
SMG=${SMG:-$(command -v smg || echo /work/venv-smg/bin/smg)}
HZ=$(getconf CLK_TCK)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
mkdir -p "$OUT"
trap kill_pids EXIT
(cd "$ROOT" && cargo build --release -q -p berth)

URLS=()
for i in 1 2 3 4; do
    "$BERTH" sim-worker --host 127.0.0.1 --port $((BASE + i)) --time-scale 0 \
        --record-capacity 0 >"$OUT/sim-$i.log" 2>&1 &
    PIDS+=($!)
    URLS+=("http://127.0.0.1:$((BASE + i))")
done
for u in "${URLS[@]}"; do wait_http "$u/health"; done

GW=$((BASE + 10))
mem_kb() { # pid field: sum of a /proc status field (VmHWM, VmRSS) over the process and children
    local total=0 p v
    for p in $1 $(pgrep -P "$1" || true); do
        v=$(awk -v f="$2:" '$1 == f {print $2}' "/proc/$p/status" 2>/dev/null || true)
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

start_gateway() { # label command...
    local label=$1; shift
    "$@" >"$OUT/gw-$label.log" 2>&1 &
    GW_PID=$!; PIDS+=("$GW_PID")
    wait_http "http://127.0.0.1:$GW/health"
    # let the health checker see the workers
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:$GW/readiness" 2>/dev/null && break
        sleep 0.1
    done
}

stop_gateway() {
    kill "$GW_PID" 2>/dev/null || true
    wait "$GW_PID" 2>/dev/null || true
}

berth_gateway() { # label binary policy [flags...]
    local label=$1 bin=$2 policy=$3; shift 3
    start_gateway "$label" "$bin" serve --host 127.0.0.1 --port "$GW" --worker-urls "${URLS[@]}" \
        --policy "$policy" --prometheus-host 127.0.0.1 --prometheus-port $((GW + 1)) \
        --log-level warn "$@"
}

printf '%-34s %10s %10s %12s %10s %8s\n' row requests "cpu_us/req" peak_rss_mb rss_after_mb failed
row() { # label (gateway running)
    local label=$1 file c0 c1 reqs failed
    file=${label// /_}
    c0=$(cpu_ticks "$GW_PID")
    "$BERTH" bench --url "http://127.0.0.1:$GW" --session-routing smg_routing_key \
        --num-sessions "$SESSIONS" --concurrency "$CONCURRENCY" --session-turns-mean "$TURNS" \
        --session-turns-stddev 0 --synthetic-input-tokens-mean "$WORDS" \
        --synthetic-input-tokens-stddev 0 --output-tokens-mean 8 --output-tokens-stddev 0 \
        --random-seed 1 --expected-workers 4 --endpoint-type chat --allow-failed-requests \
        --artifact-dir "$OUT/bench-$file" >"$OUT/bench-$file.txt" 2>&1
    c1=$(cpu_ticks "$GW_PID")
    reqs=$((SESSIONS * TURNS))
    failed=$(grep -oE 'failed [0-9]+' "$OUT/bench-$file.txt" | head -1 | grep -oE '[0-9]+$' || echo '?')
    printf '%-34s %10d %10.0f %12.0f %10.0f %8s\n' "$label" "$reqs" \
        "$(echo "($c1 - $c0) * 1000000 / $HZ / $reqs" | bc -l)" \
        "$(echo "$(mem_kb "$GW_PID" VmHWM) / 1024" | bc -l)" \
        "$(echo "$(mem_kb "$GW_PID" VmRSS) / 1024" | bc -l)" "$failed"
}

for policy in $POLICIES; do
    berth_gateway "$policy" "$BERTH" "$policy"
    row "berth $policy"
    stop_gateway
done
if [ -n "${BIN_BEFORE:-}" ]; then
    for policy in ${BEFORE_POLICIES:-$POLICIES}; do
        berth_gateway "before-$policy" "$BIN_BEFORE" "$policy"
        row "berth-before $policy"
        stop_gateway
    done
fi
if [ -x "$SMG" ]; then
    start_gateway smg "$SMG" launch --host 127.0.0.1 --port "$GW" --worker-urls "${URLS[@]}" \
        --policy cache_aware --routing-key-override --prometheus-host 127.0.0.1 \
        --prometheus-port $((GW + 1)) --log-level warn
    row "smg cache_aware --routing-key-override"
    stop_gateway
else
    echo "(smg not found: SMG row skipped)"
fi

# Concurrent large uploads under cache_aware with default flags (UPLOADS=0 skips them).
if [ "$UPLOADS" -eq 0 ]; then
    exit 0
fi
rm -f "$OUT"/upload-*.txt
BODY=$OUT/upload.json
python3 - "$BODY" "$UPLOAD_MB" <<'PY'
import sys
path, mb = sys.argv[1], int(sys.argv[2])
word = "lorem ipsum dolor sit amet "
text = (word * (mb * 1024 * 1024 // len(word) + 1))[: mb * 1024 * 1024 - 200]
with open(path, "w") as f:
    f.write('{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"')
    f.write(text)
    f.write('"}]}')
PY
berth_gateway uploads "$BERTH" cache_aware
UP=()
for i in $(seq 1 "$UPLOADS"); do
    curl -s -o /dev/null -w '%{http_code}%header{x-smg-error-code}\n' -H 'content-type: application/json' \
        --data-binary "@$BODY" "http://127.0.0.1:$GW/v1/chat/completions" >"$OUT/upload-$i.txt" &
    UP+=($!)
done
for p in "${UP[@]}"; do wait "$p" || true; done
statuses=$(sort "$OUT"/upload-*.txt | uniq -c | awk '{printf "%s x %s, ", $1, $2}')
after=$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' \
    -d '{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}' \
    "http://127.0.0.1:$GW/v1/chat/completions" || echo down)
# a status with a gateway error code reads e.g. 503body_budget_exhausted; a bare 400 is the
# worker's own answer (the simulated model's context is shorter than the upload)
echo "uploads: $UPLOADS x ${UPLOAD_MB} MB under cache_aware (default flags): statuses ${statuses%, };" \
    "peak RSS $(( $(mem_kb "$GW_PID" VmHWM) / 1024 )) MB; RSS after $(( $(mem_kb "$GW_PID" VmRSS) / 1024 )) MB;" \
    "a small request afterwards: $after"
stop_gateway
