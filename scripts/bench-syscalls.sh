#!/usr/bin/env bash
# System calls per proxied request, berth against nginx, in one run: the set-up of
# bench-vs-nginx.sh (4 static nginx "workers"; nginx `hash ... consistent` with keep-alive to
# them, one worker process; `berth serve --policy manual --io-threads 1`, this build as `after`
# and BIN_<label> builds to compare). For each proxy, after a 2 s warm-up, `perf stat` counts
# every `syscalls:sys_enter_*` tracepoint of its processes (nginx: master and worker) while wrk
# sends keyed chat requests (CONNS connections) for DURATION s; each count is divided by wrk's
# requests. `EAGAIN` lines count the reads that found nothing (`sys_exit_*` with ret -11).
# The counts include what the proxy does besides the requests in that window (berth's health
# checks, nginx's timers), spread over them.
#
# Needs: perf (with tracepoints: run as root or perf_event_paranoid <= -1), nginx, wrk.
# Usage: scripts/bench-syscalls.sh [DURATION] [CONNS]
#   KEYS=1000 WORDS=10 BASE_PORT=18500 BIN_before=/path/to/old/berth
set -euo pipefail

DURATION=${1:-5}
CONNS=${2:-64}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-10}
BASE=${BASE_PORT:-18500}
OUT=${OUT:-/tmp/berth-syscalls}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

for tool in perf nginx wrk; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install linux-perf nginx wrk)"; exit 1; }
done
mkdir -p "$OUT/px"
trap kill_pids EXIT
(cd "$ROOT" && cargo build --release -q -p berth)

W=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
static_workers "$OUT/up" "${W[@]}"
nginx_proxy_conf "$OUT/px/nginx.conf" "$OUT/px" "$((BASE + 10))" "${W[@]}"
nginx -c "$OUT/px/nginx.conf" -p "$OUT/px" >"$OUT/px/stdout.log" 2>&1 &
declare -A PORT PIDOF
PIDS+=($!); PORT[nginx]=$((BASE + 10)); PIDOF[nginx]=$!
wait_http "http://127.0.0.1:${PORT[nginx]}/health"

labels=nginx
urls=$(for p in "${W[@]}"; do printf 'http://127.0.0.1:%s ' "$p"; done)
i=0
for var in after $(compgen -v BIN_ || true); do
    if [ "$var" = after ]; then label=after; bin=$BERTH; else label=${var#BIN_}; bin=${!var}; fi
    port=$((BASE + 20 + 2 * i)); i=$((i + 1))
    # shellcheck disable=SC2086
    "$bin" serve --host 127.0.0.1 --port "$port" --worker-urls $urls --policy manual \
        --io-threads 1 --prometheus-host 127.0.0.1 --prometheus-port $((port + 1)) \
        --log-level warn >"$OUT/berth-$label.log" 2>&1 &
    PIDS+=($!); PORT[$label]=$port; PIDOF[$label]=$!
    wait_http "http://127.0.0.1:$port/readiness"
    labels="$labels $label"
done
words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"

declare -A REQS
for l in $labels; do
    pids=$(echo "${PIDOF[$l]}" $(pgrep -P "${PIDOF[$l]}" || true) | tr ' ' ,)
    wrk -t1 -c"$CONNS" -d2s -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$l]}" >/dev/null
    eagain=()
    for s in read recvfrom readv recvmsg; do
        eagain+=(-e "syscalls:sys_exit_$s" --filter 'ret == -11')
    done
    perf stat -x, -o "$OUT/perf-$l.txt" -e 'syscalls:sys_enter_*' "${eagain[@]}" -p "$pids" \
        -- sleep "$((DURATION + 1))" 2>/dev/null &
    stat=$!
    sleep 0.5
    wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/req.lua" "http://127.0.0.1:${PORT[$l]}" >"$OUT/wrk-$l.txt"
    wait "$stat"
    if grep -q Non-2xx "$OUT/wrk-$l.txt"; then
        echo "non-2xx answers from $l: see $OUT/wrk-$l.txt" >&2; exit 1
    fi
    REQS[$l]=$(awk '/requests in/ {print $1}' "$OUT/wrk-$l.txt")
done

printf "\n== system calls per request: 4 static nginx workers, wrk -t1 -c%s, %s s, %s keys, %s-word bodies ==\n" \
    "$CONNS" "$DURATION" "$KEYS" "$WORDS"
# one row per system call any proxy made at least once per 1,000 requests; EAGAIN rows after
awk -F, -v labels="$labels" -v reqs="$(for l in $labels; do printf '%s ' "${REQS[$l]}"; done)" -v out="$OUT" '
BEGIN {
    n = split(labels, L, " "); split(reqs, R, " ")
    for (i = 1; i <= n; i++) {
        f = out "/perf-" L[i] ".txt"
        while ((getline line < f) > 0) {
            split(line, c, ",")
            if (c[3] !~ /^syscalls:/ || c[1] !~ /^[0-9]+$/) continue
            name = c[3]; sub(/^syscalls:sys_enter_/, "", name)
            if (name ~ /^syscalls:sys_exit_/) { sub(/^syscalls:sys_exit_/, "", name); name = name " EAGAIN" }
            v[name, i] += c[1] / R[i]
            if (!(name in seen)) { seen[name] = 1; names[++m] = name }
        }
        close(f)
    }
    printf "%-22s", "per request"
    for (i = 1; i <= n; i++) printf " %10s", L[i]
    printf "\n"
    for (j = 1; j <= m; j++) {
        keep = 0
        for (i = 1; i <= n; i++) if (v[names[j], i] >= 0.001) keep = 1
        if (!keep) continue
        printf "%-22s", names[j]
        for (i = 1; i <= n; i++) {
            printf " %10.3f", v[names[j], i]
            if (names[j] !~ / EAGAIN$/) total[i] += v[names[j], i]
        }
        printf "\n"
    }
    printf "%-22s", "total"
    for (i = 1; i <= n; i++) printf " %10.3f", total[i]
    printf "\n%-22s", "requests"
    for (i = 1; i <= n; i++) printf " %10d", R[i]
    printf "\n"
}'
