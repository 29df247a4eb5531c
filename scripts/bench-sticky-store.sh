#!/usr/bin/env bash
# The cost and the worth of the shared pin store (`--sticky-store`, issue #9), in one run, on
# loopback: redis-server, two simulated workers (time scale 0), berth gateways with and without
# the store (`--policy manual`, keys in `X-SMG-Routing-Key`).
#
#   1. sticky-hit CPU per request, store off vs on (same warm keys, closed loop, wrk);
#   2. new-key (vacant) latency, store off vs on, one connection (wrk --latency, every request a
#      new key), against the Redis round trip (redis-benchmark PING, one client);
#   3. two replicas behind nginx round robin, `berth bench` sessions: stickiness without and
#      with the store;
#   4. Redis memory per pin at 1M pins of the store's format (written with redis-cli --pipe).
#
# Needs: wrk, nginx, redis-server, redis-benchmark, redis-cli (apt-get install wrk nginx
# redis-server). Usage: scripts/bench-sticky-store.sh [DURATION] [CONNS]   (results in $OUT)
#   PARTS=2 runs only part 2 (any of 1234); BERTH=/path/to/berth measures another build.
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-16}
BASE=${BASE_PORT:-23700}
OUT=${OUT:-/tmp/berth-store-bench}
KEYS=${KEYS:-1000}
PINS=${PINS:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=${BERTH:-$ROOT/target/release/berth}
PARTS=${PARTS:-1234}
HZ=$(getconf CLK_TCK)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

mkdir -p "$OUT/redis"
trap kill_pids EXIT

(cd "$ROOT" && cargo build --release -q -p berth)


RP=$((BASE + 1)); W1=$((BASE + 2)); W2=$((BASE + 3))
OFF1=$((BASE + 10)); OFF2=$((BASE + 12)); ON1=$((BASE + 20)); ON2=$((BASE + 22))
NP_OFF=$((BASE + 30)); NP_ON=$((BASE + 31))
STORE=redis://127.0.0.1:$RP
for p in $RP $W1 $W2 $OFF1 $((OFF1 + 1)) $OFF2 $((OFF2 + 1)) $ON1 $((ON1 + 1)) $ON2 $((ON2 + 1)) $NP_OFF $NP_ON; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        echo "port $p is in use: pick another BASE_PORT" >&2
        exit 1
    fi
done

redis-server --bind 127.0.0.1 --port "$RP" --save '' --appendonly no --dir "$OUT/redis" \
    >"$OUT/redis.log" 2>&1 &
PIDS+=($!)
for p in $W1 $W2; do
    "$BERTH" sim-worker --port "$p" --time-scale 0 --default-max-tokens 1 --record-capacity 0 \
        >"$OUT/sim-$p.log" 2>&1 &
    PIDS+=($!)
done
wait_http "http://127.0.0.1:$W1/health"; wait_http "http://127.0.0.1:$W2/health"
until redis-cli -p "$RP" ping >/dev/null 2>&1; do sleep 0.1; done

declare -A PID
serve() { # name port [store args...]
    local name=$1 port=$2
    shift 2
    "$BERTH" serve --host 127.0.0.1 --port "$port" --worker-urls "http://127.0.0.1:$W1" \
        "http://127.0.0.1:$W2" --policy manual --prometheus-host 127.0.0.1 \
        --prometheus-port $((port + 1)) --log-level warn "$@" >"$OUT/$name.log" 2>&1 &
    PID[$name]=$!; PIDS+=($!)
}
serve off1 "$OFF1"; serve off2 "$OFF2"
serve on1 "$ON1" --sticky-store "$STORE"; serve on2 "$ON2" --sticky-store "$STORE"
for p in $OFF1 $OFF2 $ON1 $ON2; do wait_http "http://127.0.0.1:$p/readiness"; done

cat >"$OUT/hit.lua" <<LUA
local n = 0
local body = '{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
request = function()
    n = n + 1
    local hdr = { ["Content-Type"] = "application/json", ["X-SMG-Routing-Key"] = "hit-" .. (n % $KEYS) }
    return wrk.format("POST", "/v1/chat/completions", hdr, body)
end
LUA
cat >"$OUT/vacant.lua" <<'LUA'
local n = 0
local run = tostring(os.time()) .. "-" .. tostring(math.random(1, 1e9))
local body = '{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
request = function()
    n = n + 1
    local hdr = { ["Content-Type"] = "application/json", ["X-SMG-Routing-Key"] = "new-" .. run .. "-" .. n }
    return wrk.format("POST", "/v1/chat/completions", hdr, body)
end
LUA

run() { # name script conns -> "rps p50_ms p99_ms cpu_us_per_req non2xx"
    local name=$1 script=$2 conns=$3 port c0 c1 f
    case $name in off1) port=$OFF1 ;; on1) port=$ON1 ;; esac
    f="$OUT/wrk-$name-$(basename "$script" .lua)-$conns.txt"
    c0=$(cpu_ticks "${PID[$name]}")
    wrk -t1 -c"$conns" -d"${DURATION}s" --latency -s "$script" "http://127.0.0.1:$port" >"$f"
    c1=$(cpu_ticks "${PID[$name]}")
    awk -v c0="$c0" -v c1="$c1" -v hz="$HZ" \
        -v p50="$(ms "$(awk '$1 == "50%" {print $2}' "$f")")" \
        -v p99="$(ms "$(awk '$1 == "99%" {print $2}' "$f")")" '
        /requests in/ { r = $1 } /Requests\/sec/ { rps = $2 } /Non-2xx/ { e = $NF }
        END { printf "%.0f %s %s %.2f %d\n", rps, p50, p99, (c1 - c0) * 1e6 / hz / r, e }' "$f"
}

if [[ $PARTS == *1* ]]; then
echo "== 1. sticky hit: $KEYS warm keys, wrk -t1 -c$CONNS -d${DURATION}s, off and on alternated twice"
for g in off1 on1; do
    port=$([ $g = off1 ] && echo $OFF1 || echo $ON1)
    wrk -t1 -c"$CONNS" -d3s -s "$OUT/hit.lua" "http://127.0.0.1:$port" >/dev/null
done
printf "%-6s %9s %8s %8s %12s %7s\n" store req/s p50_ms p99_ms cpu_us/req non2xx
declare -A CPU
for round in 1 2; do
    for g in off1 on1; do
        read -r rps p50 p99 cpu errs <<<"$(run $g "$OUT/hit.lua" "$CONNS")"
        CPU[$g]="${CPU[$g]:-} $cpu"
        printf "%-6s %9s %8s %8s %12s %7s\n" "${g%1}" "$rps" "$p50" "$p99" "$cpu" "$errs"
    done
done
awk -v off="${CPU[off1]}" -v on="${CPU[on1]}" 'BEGIN {
    n = split(off, a, " "); split(on, b, " "); for (i = 1; i <= n; i++) { so += a[i]; sn += b[i] }
    printf "sticky-hit CPU per request, on/off: %.3f\n", sn / so }'
fi

if [[ $PARTS == *2* ]]; then
echo
echo "== 2. new keys: every request a new key, one connection, ${DURATION}s each"
redis-benchmark -p "$RP" -t ping_inline -n 20000 -c 1 2>/dev/null | grep -A2 "latency summary" | tail -2 \
    | sed 's/^/redis PING round trip (ms): /'
printf "%-6s %9s %8s %8s %12s %7s\n" store req/s p50_ms p99_ms cpu_us/req non2xx
declare -A LAT
for g in off1 on1; do
    read -r rps p50 p99 cpu errs <<<"$(run $g "$OUT/vacant.lua" 1)"
    LAT[$g]="$p50 $p99"
    printf "%-6s %9s %8s %8s %12s %7s\n" "${g%1}" "$rps" "$p50" "$p99" "$cpu" "$errs"
done
read -r a50 a99 <<<"${LAT[off1]}"; read -r b50 b99 <<<"${LAT[on1]}"
awk -v a="$a50" -v b="$b50" -v c="$a99" -v d="$b99" \
    'BEGIN { printf "added by the store: p50 %.0f us, p99 %.0f us\n", (b - a) * 1000, (d - c) * 1000 }'
curl -s "http://127.0.0.1:$((ON1 + 1))/metrics" | grep 'berth_sticky_store_latency_seconds_\(sum\|count\){op="place"}' || true
fi

if [[ $PARTS == *3* ]]; then
echo
echo "== 3. two replicas behind nginx round robin, berth bench (smg_routing_key)"
cat >"$OUT/nginx.conf" <<NGINX
worker_processes 1;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    upstream off { server 127.0.0.1:$OFF1; server 127.0.0.1:$OFF2; keepalive 64; }
    upstream on { server 127.0.0.1:$ON1; server 127.0.0.1:$ON2; keepalive 64; }
    server { listen 127.0.0.1:$NP_OFF; location / { proxy_pass http://off; proxy_http_version 1.1; proxy_set_header Connection ""; } }
    server { listen 127.0.0.1:$NP_ON; location / { proxy_pass http://on; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
NGINX
"$NGINX" -c "$OUT/nginx.conf" -p "$OUT" -g 'daemon off;' >"$OUT/nginx.log" 2>&1 &
PIDS+=($!)
for p in $NP_OFF $NP_ON; do wait_http "http://127.0.0.1:$p/health"; done
for pair in "off:$NP_OFF" "on:$NP_ON"; do
    IFS=: read -r name port <<<"$pair"
    "$BERTH" bench --url "http://127.0.0.1:$port" --endpoint-type chat --num-sessions 200 \
        --concurrency 16 --session-turns-mean 6 --output-tokens-mean 4 --random-seed 1 \
        --session-routing smg_routing_key --expected-workers 2 \
        --artifact-dir "$OUT/bench-$name" >"$OUT/bench-$name.txt" 2>&1
    printf "store %-3s " "$name"; grep -i "stickiness" "$OUT/bench-$name.txt" | head -1
done
fi

if [[ $PARTS == *4* ]]; then
echo
echo "== 4. Redis memory at $PINS pins of the store's format (TTL set, two worker URLs each)"
redis-cli -p "$RP" flushall >/dev/null
before=$(redis-cli -p "$RP" info memory | awk -F: '/^used_memory:/ {print $2+0}')
awk -v n="$PINS" 'BEGIN {
    v = "v1 http://10.0.0.1:8000 http://10.0.0.2:8000"
    for (i = 0; i < n; i++) {
        k = sprintf("berth:pin:%016x%016x", i * 2654435761 % 4294967296, i)
        printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nPX\r\n$8\r\n14400000\r\n", length(k), k, length(v), v
    }
}' | redis-cli -p "$RP" --pipe >/dev/null
after=$(redis-cli -p "$RP" info memory | awk -F: '/^used_memory:/ {print $2+0}')
keys=$(redis-cli -p "$RP" dbsize)
awk -v b="$before" -v a="$after" -v k="$keys" 'BEGIN {
    per = (a - b) / k; printf "%d keys, %.1f bytes per pin, %.2f M pins per GiB\n", k, per, 1073741824 / per / 1e6 }'
fi
