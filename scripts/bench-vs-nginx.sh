#!/usr/bin/env bash
# Proxy overhead against nginx, in one run, on loopback: the same trivial upstream (one nginx
# process answering a fixed JSON body on 4 ports: 4 static "workers"), in front of it
# `berth serve --policy manual --io-threads 1` (this build, and BIN_<label> builds to compare)
# and nginx (`worker_processes 1`, `hash $http_x_smg_routing_key consistent`, keep-alive to the
# upstream). wrk sends keyed chat requests (KEYS keys, WORDS-word bodies) closed-loop, CONNS
# connections, DURATION s per proxy, ROUNDS rounds interleaved. Prints req/s and the proxy's
# CPU us per request (utime+stime from /proc, the nginx proxy's master and worker summed), its
# user and kernel parts, and the ratios against nginx. The kernel part is the same loopback
# socket work for every proxy; the user part is where proxies differ, and it moves less with
# the machine's load than the total.
#
# Needs: nginx, wrk (apt-get install nginx wrk).
# Usage: scripts/bench-vs-nginx.sh [DURATION] [CONNS]
#   KEYS=1000 WORDS=10 ROUNDS=2 BIN_before=/path/to/old/berth
#   ARGS_<label>="--flag value" adds serve flags to one build (e.g. ARGS_after=...)
set -euo pipefail

DURATION=${1:-8}
CONNS=${2:-64}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-10}
ROUNDS=${ROUNDS:-2}
BASE=${BASE_PORT:-18300}
OUT=${OUT:-/tmp/berth-vs-nginx}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
HZ=$(getconf CLK_TCK)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

mkdir -p "$OUT"
trap kill_pids EXIT
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
command -v nginx >/dev/null || { echo "nginx not found (apt-get install nginx)"; exit 1; }
(cd "$ROOT" && cargo build --release -q -p berth)

W=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
mkdir -p "$OUT/px"
static_workers "$OUT/up" "${W[@]}"

NGINX_PORT=$((BASE + 10))
nginx_proxy_conf "$OUT/px/nginx.conf" "$OUT/px" "$NGINX_PORT" "${W[@]}"
nginx -c "$OUT/px/nginx.conf" -p "$OUT/px" >"$OUT/px/stdout.log" 2>&1 &
declare -A PORT PID
PID[nginx]=$!; PORT[nginx]=$NGINX_PORT; PIDS+=($!)
wait_http "http://127.0.0.1:$NGINX_PORT/health"

LABELS="nginx"
i=0
for var in $(compgen -v BIN_ || true) after; do
    if [ "$var" = after ]; then label=after; bin=$BERTH; else label=${var#BIN_}; bin=${!var}; fi
    port=$((BASE + 20 + 2 * i)); i=$((i + 1))
    extra=ARGS_$label
    urls=$(for p in "${W[@]}"; do printf 'http://127.0.0.1:%s ' "$p"; done)
    # shellcheck disable=SC2086
    "$bin" serve --host 127.0.0.1 --port "$port" --worker-urls $urls --policy manual \
        --io-threads 1 --prometheus-host 127.0.0.1 --prometheus-port $((port + 1)) \
        --log-level warn ${!extra:-} >"$OUT/berth-$label.log" 2>&1 &
    PID[$label]=$!; PORT[$label]=$port; PIDS+=($!)
    wait_http "http://127.0.0.1:$port/readiness"
    LABELS="$LABELS $label"
done

words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"

user_sys_ticks() { # pid: "utime stime" of the process and its children
    local u=0 k=0 p a b
    for p in $1 $(pgrep -P "$1" || true); do
        if [ -r "/proc/$p/stat" ]; then
            read -r a b < <(awk '{print $14, $15}' "/proc/$p/stat")
            u=$((u + a)); k=$((k + b))
        fi
    done
    echo "$u $k"
}

declare -A REQS TICKS UTICKS RPS
for l in $LABELS; do
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$l]}" >/dev/null
    REQS[$l]=0; TICKS[$l]=0; UTICKS[$l]=0; RPS[$l]=0
done
for r in $(seq 1 "$ROUNDS"); do
    for l in $LABELS; do
        read -r u0 k0 < <(user_sys_ticks "${PID[$l]}")
        wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$l]}" \
            >"$OUT/wrk-$l-$r.txt"
        read -r u1 k1 < <(user_sys_ticks "${PID[$l]}")
        REQS[$l]=$((REQS[$l] + $(awk '/requests in/ {print $1}' "$OUT/wrk-$l-$r.txt")))
        TICKS[$l]=$((TICKS[$l] + u1 + k1 - u0 - k0))
        UTICKS[$l]=$((UTICKS[$l] + u1 - u0))
        RPS[$l]=$(awk -v a="${RPS[$l]}" -v b="$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-$l-$r.txt")" \
            'BEGIN { print a + b }')
        if grep -q Non-2xx "$OUT/wrk-$l-$r.txt"; then
            echo "non-2xx answers from $l: see $OUT/wrk-$l-$r.txt" >&2; exit 1
        fi
    done
done

printf "\n== proxy overhead: 4 static nginx workers, wrk -t1 -c%s, %s s x %s rounds, %s keys, %s-word bodies ==\n" \
    "$CONNS" "$DURATION" "$ROUNDS" "$KEYS" "$WORDS"
printf "%-12s %10s %12s %12s %12s %10s %14s\n" proxy req/s cpu_us/req user_us/req sys_us/req vs_nginx user_vs_nginx
us() { # ticks requests -> us per request
    awk -v t="$1" -v r="$2" -v hz="$HZ" 'BEGIN { printf "%.2f", t * 1e6 / hz / r }'
}
base=
ubase=
for l in $LABELS; do
    cpu=$(us "${TICKS[$l]}" "${REQS[$l]}"); user=$(us "${UTICKS[$l]}" "${REQS[$l]}")
    sys=$(us $((TICKS[$l] - UTICKS[$l])) "${REQS[$l]}")
    [ -z "$base" ] && base=$cpu && ubase=$user
    printf "%-12s %10.0f %12s %12s %12s %10s %14s\n" "$l" "$(awk -v a="${RPS[$l]}" -v n="$ROUNDS" 'BEGIN { print a / n }')" \
        "$cpu" "$user" "$sys" "$(awk -v a="$cpu" -v b="$base" 'BEGIN { printf "%.3f", a / b }')" \
        "$(awk -v a="$user" -v b="$ubase" 'BEGIN { printf "%.3f", a / b }')"
done
