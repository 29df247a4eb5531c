#!/usr/bin/env bash
# Gateway CPU per request of each routing policy on the sticky-hit path, in one run, on
# loopback: one `berth serve` per policy in front of the same two simulated workers (time scale
# 0), wrk sending keyed chat requests (X-SMG-Routing-Key cycling over KEYS keys, a body of
# WORDS words) closed-loop for DURATION s per gateway, ROUNDS rounds interleaved so drift hits
# every policy alike. Prints req/s and CPU us/request (utime+stime of the gateway process from
# /proc) per policy, and the CPU ratio against the first policy (the baseline).
#
# Gateway flags can vary instead of (or with) the policy: CONFIGS lists LABEL=POLICY[,FLAG...]
# entries (commas become spaces), e.g. admission control off vs on, same run:
#   CONFIGS="off=manual limiter=manual,--max-concurrent-requests,1024" scripts/bench-policy-cpu.sh
# The first entry is the baseline. Without CONFIGS, each of POLICIES is its own entry.
# BIN_<LABEL> runs that entry with another berth binary (e.g. an older build), so two versions
# are compared in one run: BIN_before=/path/to/old/berth CONFIGS="before=manual after=manual".
# BIN replaces target/release/berth for every other entry (nothing is built then).
#
# Needs: wrk (apt-get install wrk).
# Usage: scripts/bench-policy-cpu.sh [DURATION] [CONNS]
#   POLICIES="manual ttft_aware consistent_hashing" KEYS=1000 WORDS=300 ROUNDS=3
#   KEYS=0 sends keyless requests (no X-SMG-Routing-Key).
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-32}
POLICIES=${POLICIES:-"manual ttft_aware consistent_hashing"}
CONFIGS=${CONFIGS:-$(for p in $POLICIES; do printf '%s=%s ' "$p" "$p"; done)}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-300}
ROUNDS=${ROUNDS:-3}
BASE=${BASE_PORT:-18100}
OUT=${OUT:-/tmp/berth-policy-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=${BIN:-$ROOT/target/release/berth}
HZ=$(getconf CLK_TCK)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

mkdir -p "$OUT"
trap kill_pids EXIT
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
[ -n "${BIN:-}" ] || (cd "$ROOT" && cargo build --release -q -p berth)

W1=$((BASE + 1)); W2=$((BASE + 2))
for p in $W1 $W2; do
    "$BERTH" sim-worker --port "$p" --time-scale 0 --default-max-tokens 1 --record-capacity 0 \
        >"$OUT/sim-$p.log" 2>&1 &
    PIDS+=($!)
done
wait_http "http://127.0.0.1:$W1/health"; wait_http "http://127.0.0.1:$W2/health"

declare -A PORT PID
i=0
LABELS=
for entry in $CONFIGS; do
    pol=${entry%%=*}; spec=${entry#*=}; policy=${spec%%,*}
    extra=$([ "$spec" = "$policy" ] || echo "${spec#*,}" | tr ',' ' ')
    LABELS="$LABELS $pol"
    port=$((BASE + 10 + 2 * i)); i=$((i + 1))
    bin_var="BIN_${pol//[^A-Za-z0-9_]/_}"; bin=${!bin_var:-$BERTH}
    # shellcheck disable=SC2086
    "$bin" serve --host 127.0.0.1 --port "$port" --worker-urls "http://127.0.0.1:$W1" \
        "http://127.0.0.1:$W2" --policy "$policy" --io-threads 1 --prometheus-host 127.0.0.1 \
        --prometheus-port $((port + 1)) --log-level warn $extra >"$OUT/berth-$pol.log" 2>&1 &
    PID[$pol]=$!; PORT[$pol]=$port; PIDS+=($!)
    wait_http "http://127.0.0.1:$port/readiness"
done
POLICIES=$LABELS

words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"

declare -A REQS TICKS RPS
for pol in $POLICIES; do
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$pol]}" >/dev/null
    REQS[$pol]=0; TICKS[$pol]=0; RPS[$pol]=0
done
for r in $(seq 1 "$ROUNDS"); do
    for pol in $POLICIES; do
        c0=$(cpu_ticks "${PID[$pol]}")
        wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$pol]}" \
            >"$OUT/wrk-$pol-$r.txt"
        c1=$(cpu_ticks "${PID[$pol]}")
        REQS[$pol]=$((REQS[$pol] + $(awk '/requests in/ {print $1}' "$OUT/wrk-$pol-$r.txt")))
        TICKS[$pol]=$((TICKS[$pol] + c1 - c0))
        RPS[$pol]=$(awk -v a="${RPS[$pol]}" -v b="$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-$pol-$r.txt")" \
            'BEGIN { print a + b }')
        if grep -q Non-2xx "$OUT/wrk-$pol-$r.txt"; then
            echo "non-2xx answers from $pol: see $OUT/wrk-$pol-$r.txt" >&2; exit 1
        fi
    done
done

printf "\n== sticky hits: wrk -t1 -c%s, %s s x %s rounds, %s keys, %s-word bodies ==\n" \
    "$CONNS" "$DURATION" "$ROUNDS" "$KEYS" "$WORDS"
printf "%-20s %10s %12s %10s\n" config req/s cpu_us/req vs_first
base=
for pol in $POLICIES; do
    cpu=$(awk -v t="${TICKS[$pol]}" -v r="${REQS[$pol]}" -v hz="$HZ" 'BEGIN { printf "%.2f", t * 1e6 / hz / r }')
    [ -z "$base" ] && base=$cpu
    printf "%-20s %10.0f %12s %10s\n" "$pol" "$(awk -v a="${RPS[$pol]}" -v n="$ROUNDS" 'BEGIN { print a / n }')" \
        "$cpu" "$(awk -v a="$cpu" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
done
for pol in $POLICIES; do
    curl -s "http://127.0.0.1:$((PORT[$pol] + 1))/metrics" \
        | grep -E '^(smg_router_request_body_path_total|smg_http_rate_limit_total)' \
        | sed "s/^/$pol: /" || true
done
