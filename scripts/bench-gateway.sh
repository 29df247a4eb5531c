#!/usr/bin/env bash
# Compares the gateway overhead of `berth serve` with nginx and SMG, against the same simulated
# workers, in one run, on loopback. Small keyed chat requests (max_tokens 1, time scale 0).
#
# For each target (direct to the workers, berth, nginx, SMG) it measures:
#   1. peak: closed loop, CONNS connections for DURATION s: requests/s, p50/p99, and the
#      target process's CPU time per request (utime+stime from /proc, threads and children);
#   2. paced: the same fixed offered rate (half of berth's peak) for every target: p50/p99,
#      and the p99 added over going straight to the worker.
#
# Needs: wrk and nginx (apt-get install wrk nginx), optionally SMG: a virtualenv with
# `pip install smg` whose `smg` is at $SMG (default /tmp/smg-venv/bin/smg); skipped if absent.
# Usage: scripts/bench-gateway.sh [DURATION] [CONNS]      (results: $OUT, default /tmp/berth-bench)
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-32}
BASE=${BASE_PORT:-18000}
SMG=${SMG:-/tmp/smg-venv/bin/smg}
OUT=${OUT:-/tmp/berth-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
HZ=$(getconf CLK_TCK)
KEYS=${KEYS:-1000}

mkdir -p "$OUT"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$OUT/nginx.pid" ] && kill "$(cat "$OUT/nginx.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 1; }
command -v nginx >/dev/null || command -v /usr/sbin/nginx >/dev/null || { echo "nginx not found"; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

(cd "$ROOT" && cargo build --release -q -p berth)

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

W1=$((BASE + 1)); W2=$((BASE + 2)); BP=$((BASE + 10)); NP=$((BASE + 20)); SP=$((BASE + 30))
for p in $W1 $W2; do
    "$BERTH" sim-worker --port "$p" --time-scale 0 --default-max-tokens 1 --record-capacity 0 \
        >"$OUT/sim-$p.log" 2>&1 &
    PIDS+=($!)
done
wait_http "http://127.0.0.1:$W1/health"; wait_http "http://127.0.0.1:$W2/health"
WORKERS="http://127.0.0.1:$W1 http://127.0.0.1:$W2"

# shellcheck disable=SC2086
"$BERTH" serve --host 127.0.0.1 --port "$BP" --worker-urls $WORKERS --policy consistent_hashing \
    --prometheus-host 127.0.0.1 --prometheus-port $((BP + 1)) --log-level warn >"$OUT/berth.log" 2>&1 &
BERTH_PID=$!; PIDS+=($BERTH_PID)

cat >"$OUT/nginx.conf" <<NGINX
worker_processes auto;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    upstream workers {
        hash \$http_x_smg_routing_key consistent;
        server 127.0.0.1:$W1;
        server 127.0.0.1:$W2;
        keepalive 256;
    }
    server {
        listen 127.0.0.1:$NP;
        location / {
            proxy_pass http://workers;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
NGINX
"$NGINX" -c "$OUT/nginx.conf" -p "$OUT" -g 'daemon off;' >"$OUT/nginx.log" 2>&1 &
NGINX_PID=$!; PIDS+=($NGINX_PID)

SMG_PID=
if [ -x "$SMG" ]; then
    # shellcheck disable=SC2086
    "$SMG" launch --host 127.0.0.1 --port "$SP" --worker-urls $WORKERS --policy consistent_hashing \
        --prometheus-host 127.0.0.1 --prometheus-port $((SP + 1)) --log-level warn >"$OUT/smg.log" 2>&1 &
    SMG_PID=$!; PIDS+=($SMG_PID)
fi

wait_http "http://127.0.0.1:$BP/readiness"
wait_http "http://127.0.0.1:$NP/health"
if [ -n "$SMG_PID" ]; then wait_http "http://127.0.0.1:$SP/health" || SMG_PID=; fi

keyed_chat_lua "$OUT/req.lua" "$KEYS" hi

wrk_one() { # port conns pace_ms outfile
    PACE_MS=$([ "$3" = 0 ] || echo "$3") \
        wrk -t1 -c"$2" -d"${DURATION}s" --latency -s "$OUT/req.lua" "http://127.0.0.1:$1" >"$4"
}

run() { # name port pid conns pace_ms -> "rps p50 p99 cpu_us_per_req non2xx"
    # `direct` splits the connections over both workers (two wrk processes) and sums them;
    # its p50/p99 are the larger of the two.
    local name=$1 port=$2 pid=$3 conns=$4 pace=$5 c0 c1 f files
    f="$OUT/wrk-$name-$pace"
    c0=$([ -n "$pid" ] && cpu_ticks "$pid" || echo 0)
    if [ "$name" = direct ]; then
        local half=$(( (conns + 1) / 2 ))
        wrk_one "$W1" "$half" "$pace" "$f-1.txt" & local a=$!
        wrk_one "$W2" "$half" "$pace" "$f-2.txt"
        wait "$a"
        files="$f-1.txt $f-2.txt"
    else
        wrk_one "$port" "$conns" "$pace" "$f.txt"
        files="$f.txt"
    fi
    c1=$([ -n "$pid" ] && cpu_ticks "$pid" || echo 0)
    local reqs=0 rps=0 p50=0 p99=0 errs=0 x
    for x in $files; do
        reqs=$((reqs + $(awk '/requests in/ {print $1}' "$x")))
        rps=$(awk -v a="$rps" -v b="$(awk '/Requests\/sec/ {print $2}' "$x")" 'BEGIN { print a + b }')
        p50=$(awk -v a="$p50" -v b="$(ms "$(awk '$1 == "50%" {print $2}' "$x")")" 'BEGIN { print (b > a ? b : a) }')
        p99=$(awk -v a="$p99" -v b="$(ms "$(awk '$1 == "99%" {print $2}' "$x")")" 'BEGIN { print (b > a ? b : a) }')
        errs=$((errs + $(awk '/Non-2xx/ {n = $NF} END {print n + 0}' "$x")))
    done
    awk -v r="$reqs" -v rps="$rps" -v a="$p50" -v b="$p99" -v c0="$c0" -v c1="$c1" -v hz="$HZ" -v e="$errs" \
        'BEGIN { printf "%.0f %s %s %.1f %s\n", rps, a, b, (r > 0 ? (c1 - c0) * 1e6 / hz / r : 0), e }'
}

TARGETS="direct:$W1: berth:$BP:$BERTH_PID nginx:$NP:$NGINX_PID"
[ -n "$SMG_PID" ] && TARGETS="$TARGETS smg:$SP:$SMG_PID"

echo "warm-up..."
for t in $TARGETS; do
    IFS=: read -r n p _ <<<"$t"
    [ "$n" = direct ] && p=$W2
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "http://127.0.0.1:$p" >/dev/null
done

declare -A PEAK
printf "\n== peak: wrk -t1 -c%s -d%ss, %s keys ==\n" "$CONNS" "$DURATION" "$KEYS"
printf "%-8s %10s %9s %9s %14s %8s\n" target req/s p50_ms p99_ms cpu_us/req non2xx
for t in $TARGETS; do
    IFS=: read -r n p pid <<<"$t"
    read -r rps p50 p99 cpu errs <<<"$(run "$n" "$p" "$pid" "$CONNS" 0)"
    PEAK[$n]="$rps $p50 $p99 $cpu"
    printf "%-8s %10s %9s %9s %14s %8s\n" "$n" "$rps" "$p50" "$p99" "$([ -n "$pid" ] && echo "$cpu" || echo -)" "$errs"
done

# Paced: half of berth's peak, as PACED_CONNS connections each waiting PACE_MS between requests.
half=$(awk -v r="${PEAK[berth]%% *}" 'BEGIN { printf "%d", r / 2 }')
PACE_MS=${PACE_MS:-1}
# Each connection sends one request every PACE_MS plus its latency (~0.5 ms): scale up.
pconns=$(awk -v h="$half" -v d="$PACE_MS" 'BEGIN { c = int(h * (d + 0.5) / 1000 + 0.5); if (c < 1) c = 1; print c }')
printf "\n== paced: aiming at %s req/s (%s connections, each waiting %s ms between requests) ==\n" "$half" "$pconns" "$PACE_MS"
printf "%-8s %10s %9s %9s %14s\n" target req/s p50_ms p99_ms added_p99_ms
direct_p99=
for t in $TARGETS; do
    IFS=: read -r n p pid <<<"$t"
    read -r rps p50 p99 _ _ <<<"$(run "$n" "$p" "$pid" "$pconns" "$PACE_MS")"
    [ "$n" = direct ] && direct_p99=$p99
    printf "%-8s %10s %9s %9s %14s\n" "$n" "$rps" "$p50" "$p99" \
        "$(awk -v a="$p99" -v b="$direct_p99" 'BEGIN { printf "%.3f", a - b }')"
done

printf "\n== ratios (same run) ==\n"
b_rps=$(echo "${PEAK[berth]}" | cut -d' ' -f1); b_cpu=$(echo "${PEAK[berth]}" | cut -d' ' -f4)
for other in nginx smg; do
    [ -n "${PEAK[$other]:-}" ] || continue
    o_rps=$(echo "${PEAK[$other]}" | cut -d' ' -f1); o_cpu=$(echo "${PEAK[$other]}" | cut -d' ' -f4)
    awk -v a="$b_rps" -v b="$o_rps" -v c="$b_cpu" -v d="$o_cpu" -v n="$other" \
        'BEGIN { printf "berth/%s throughput %.2fx, CPU per request %.2fx\n", n, a / b, c / d }'
done
