#!/usr/bin/env bash
# Gateway CPU per request over HTTPS (client -> gateway) against plain HTTP, in one run, on
# loopback: two `berth serve --io-threads 1` in front of the same two simulated workers (time
# scale 0, plain HTTP), one serving plain HTTP and one HTTPS (--tls-cert-path/--tls-key-path,
# a throw-away CA and certificate made with openssl for this run). wrk sends keyed chat requests
# (X-SMG-Routing-Key cycling over KEYS keys, a body of WORDS words) closed-loop for DURATION s
# per gateway, ROUNDS rounds alternating plain and HTTPS so drift hits both alike. Prints req/s
# and CPU us/request (utime+stime of the gateway process from /proc) and the HTTPS/plain ratio.
#
# wrk keeps its connections open, so this is the steady-state cost of TLS (record encryption),
# with each connection's handshake amortized; CONN_CLOSE=1 sends `Connection: close` on every
# request instead, so every request pays a full TCP and TLS handshake (the worst case).
#
# Needs: wrk (apt-get install wrk), openssl.
# Usage: scripts/bench-tls-cpu.sh [DURATION] [CONNS]
#   KEYS=1000 WORDS=300 ROUNDS=3 CONN_CLOSE=0
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-32}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-300}
ROUNDS=${ROUNDS:-3}
CONN_CLOSE=${CONN_CLOSE:-0}
BASE=${BASE_PORT:-18300}
OUT=${OUT:-/tmp/berth-tls-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
HZ=$(getconf CLK_TCK)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

mkdir -p "$OUT"
trap kill_pids EXIT
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
command -v openssl >/dev/null || { echo "openssl not found"; exit 1; }
(cd "$ROOT" && cargo build --release -q -p berth)

# A throw-away CA and a server certificate for 127.0.0.1 (ECDSA P-256, what most deployments use).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=berth bench CA" \
    -keyout "$OUT/ca.key" -out "$OUT/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$OUT/gw.key" -out "$OUT/gw.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$OUT/gw.ext"
openssl x509 -req -in "$OUT/gw.csr" -CA "$OUT/ca.pem" -CAkey "$OUT/ca.key" -CAcreateserial \
    -days 2 -extfile "$OUT/gw.ext" -out "$OUT/gw.pem" 2>/dev/null

W1=$((BASE + 1)); W2=$((BASE + 2))
for p in $W1 $W2; do
    "$BERTH" sim-worker --port "$p" --time-scale 0 --default-max-tokens 1 --record-capacity 0 \
        >"$OUT/sim-$p.log" 2>&1 &
    PIDS+=($!)
done
wait_http "http://127.0.0.1:$W1/health"; wait_http "http://127.0.0.1:$W2/health"

MODES="plain https"
declare -A PORT PID URL
PORT[plain]=$((BASE + 10)); PORT[https]=$((BASE + 12))
URL[plain]="http://127.0.0.1:${PORT[plain]}"; URL[https]="https://127.0.0.1:${PORT[https]}"
for m in $MODES; do
    extra=()
    [ "$m" = https ] && extra=(--tls-cert-path "$OUT/gw.pem" --tls-key-path "$OUT/gw.key")
    "$BERTH" serve --host 127.0.0.1 --port "${PORT[$m]}" --worker-urls "http://127.0.0.1:$W1" \
        "http://127.0.0.1:$W2" --policy manual --io-threads 1 --prometheus-host 127.0.0.1 \
        --prometheus-port $((PORT[$m] + 1)) --log-level warn "${extra[@]}" >"$OUT/berth-$m.log" 2>&1 &
    PID[$m]=$!; PIDS+=($!)
done
wait_http "${URL[plain]}/readiness"
for _ in $(seq 1 300); do
    curl -fsS --cacert "$OUT/ca.pem" -o /dev/null "${URL[https]}/readiness" 2>/dev/null && break
    sleep 0.1
done
curl -fsS --cacert "$OUT/ca.pem" -o /dev/null "${URL[https]}/readiness"

words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"
if [ "$CONN_CLOSE" = 1 ]; then
    sed -i 's/\["Content-Type"\] = "application\/json",/["Content-Type"] = "application\/json", ["Connection"] = "close",/' "$OUT/req.lua"
fi

declare -A REQS TICKS RPS
for m in $MODES; do
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "${URL[$m]}" >/dev/null
    REQS[$m]=0; TICKS[$m]=0; RPS[$m]=0
done
for r in $(seq 1 "$ROUNDS"); do
    for m in $MODES; do
        c0=$(cpu_ticks "${PID[$m]}")
        wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/req.lua" "${URL[$m]}" >"$OUT/wrk-$m-$r.txt"
        c1=$(cpu_ticks "${PID[$m]}")
        REQS[$m]=$((REQS[$m] + $(awk '/requests in/ {print $1}' "$OUT/wrk-$m-$r.txt")))
        TICKS[$m]=$((TICKS[$m] + c1 - c0))
        RPS[$m]=$(awk -v a="${RPS[$m]}" -v b="$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-$m-$r.txt")" \
            'BEGIN { print a + b }')
        if grep -q -e Non-2xx -e "Socket errors" "$OUT/wrk-$m-$r.txt"; then
            echo "errors from $m (see $OUT/wrk-$m-$r.txt):" >&2
            grep -e Non-2xx -e "Socket errors" "$OUT/wrk-$m-$r.txt" >&2
            [ "$CONN_CLOSE" = 1 ] || exit 1
        fi
    done
done

printf "\n== client -> gateway: wrk -t1 -c%s, %s s x %s rounds, %s keys, %s-word bodies, conn_close=%s ==\n" \
    "$CONNS" "$DURATION" "$ROUNDS" "$KEYS" "$WORDS" "$CONN_CLOSE"
printf "%-8s %10s %12s %10s\n" mode req/s cpu_us/req vs_plain
base=
for m in $MODES; do
    cpu=$(awk -v t="${TICKS[$m]}" -v r="${REQS[$m]}" -v hz="$HZ" 'BEGIN { printf "%.2f", t * 1e6 / hz / r }')
    [ -z "$base" ] && base=$cpu
    printf "%-8s %10.0f %12s %10s\n" "$m" "$(awk -v a="${RPS[$m]}" -v n="$ROUNDS" 'BEGIN { print a / n }')" \
        "$cpu" "$(awk -v a="$cpu" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
