#!/usr/bin/env bash
# Gateway CPU per request in PD mode vs regular mode, in one run, on loopback (issue #10).
#
# Regular: one `berth serve --policy manual` in front of two simulated workers. PD: one
# `berth serve --pd-disaggregation --policy manual` in front of two prefill-mode and two
# decode-mode simulated workers (each request is two worker requests, the body is read and
# rewritten with the bootstrap fields, and the prefill response is drained). All workers at time
# scale 0; wrk sends keyed chat requests (X-SMG-Routing-Key cycling over KEYS keys, a body of
# WORDS words) closed-loop for DURATION s per gateway, ROUNDS rounds alternating the two so
# drift hits both alike. Prints req/s and CPU us/request (utime+stime of the gateway process
# from /proc) per mode, and PD's ratio against regular (the baseline).
#
# Needs: wrk (apt-get install wrk).
# Usage: scripts/bench-pd-cpu.sh [DURATION] [CONNS]
#   KEYS=1000 WORDS=300 ROUNDS=3
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-32}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-300}
ROUNDS=${ROUNDS:-3}
BASE=${BASE_PORT:-18300}
OUT=${OUT:-/tmp/berth-pd-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

mkdir -p "$OUT"
trap kill_pids EXIT
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
(cd "$ROOT" && cargo build --release -q -p berth)

sim() { # port [flags...]
    local port=$1; shift
    "$BERTH" sim-worker --host 127.0.0.1 --port "$port" --time-scale 0 --default-max-tokens 1 \
        --record-capacity 0 "$@" >"$OUT/sim-$port.log" 2>&1 &
    PIDS+=($!)
    wait_http "http://127.0.0.1:$port/health"
}
R1=$((BASE + 1)); R2=$((BASE + 2))
P1=$((BASE + 3)); P2=$((BASE + 4)); D1=$((BASE + 5)); D2=$((BASE + 6))
B1=$((BASE + 7)); B2=$((BASE + 8))
sim "$R1"; sim "$R2"
sim "$P1" --mode prefill --bootstrap-port "$B1"; sim "$P2" --mode prefill --bootstrap-port "$B2"
sim "$D1" --mode decode; sim "$D2" --mode decode

common=(--host 127.0.0.1 --policy manual --io-threads 1 --prometheus-host 127.0.0.1 --log-level warn)
"$BERTH" serve "${common[@]}" --port $((BASE + 10)) --prometheus-port $((BASE + 11)) \
    --worker-urls "http://127.0.0.1:$R1" "http://127.0.0.1:$R2" >"$OUT/berth-regular.log" 2>&1 &
PID_regular=$!; PIDS+=($!)
"$BERTH" serve "${common[@]}" --port $((BASE + 12)) --prometheus-port $((BASE + 13)) \
    --pd-disaggregation --prefill "http://127.0.0.1:$P1" "$B1" --prefill "http://127.0.0.1:$P2" "$B2" \
    --decode "http://127.0.0.1:$D1" --decode "http://127.0.0.1:$D2" >"$OUT/berth-pd.log" 2>&1 &
PID_pd=$!; PIDS+=($!)
declare -A PORT=([regular]=$((BASE + 10)) [pd]=$((BASE + 12)))
declare -A PID=([regular]=$PID_regular [pd]=$PID_pd)
wait_http "http://127.0.0.1:${PORT[regular]}/readiness"
wait_http "http://127.0.0.1:${PORT[pd]}/readiness"

words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"

MODES="regular pd"
declare -A REQS TICKS RPS
for m in $MODES; do
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$m]}" >/dev/null
    REQS[$m]=0; TICKS[$m]=0; RPS[$m]=0
done
for r in $(seq 1 "$ROUNDS"); do
    for m in $MODES; do
        c0=$(cpu_ticks "${PID[$m]}")
        wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$m]}" \
            >"$OUT/wrk-$m-$r.txt"
        c1=$(cpu_ticks "${PID[$m]}")
        REQS[$m]=$((REQS[$m] + $(awk '/requests in/ {print $1}' "$OUT/wrk-$m-$r.txt")))
        TICKS[$m]=$((TICKS[$m] + c1 - c0))
        RPS[$m]=$(awk -v a="${RPS[$m]}" -v b="$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-$m-$r.txt")" \
            'BEGIN { print a + b }')
        if grep -q Non-2xx "$OUT/wrk-$m-$r.txt"; then
            echo "non-2xx answers from $m: see $OUT/wrk-$m-$r.txt" >&2; exit 1
        fi
    done
done

HZ=$(getconf CLK_TCK)
printf "\n== keyed chat: wrk -t1 -c%s, %s s x %s rounds, %s keys, %s-word bodies ==\n" \
    "$CONNS" "$DURATION" "$ROUNDS" "$KEYS" "$WORDS"
printf "%-10s %10s %12s %10s\n" mode req/s cpu_us/req vs_regular
base=
for m in $MODES; do
    us=$(awk -v t="${TICKS[$m]}" -v n="${REQS[$m]}" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
    rps=$(awk -v s="${RPS[$m]}" -v r="$ROUNDS" 'BEGIN { printf "%.0f", s / r }')
    [ -z "$base" ] && base=$us
    ratio=$(awk -v a="$us" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
    printf "%-10s %10s %12s %9sx\n" "$m" "$rps" "$us" "$ratio"
done
