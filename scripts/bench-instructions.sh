#!/usr/bin/env bash
# Instructions per proxied request, counted under callgrind: a figure of the request path that
# does not move with the machine's load (CPU time per request moves by 10-25% between runs of the
# same binary on a shared machine; this count by under 1%). The set-up of bench-vs-nginx.sh: 4
# static nginx "workers", in front of them nginx (bench-vs-nginx.sh's proxy config, with
# `master_process off` so that one process does all the work), then `berth serve --policy manual
# --io-threads 1` (this build as `after`, BIN_<label> builds to compare, in that order), wrk
# sending keyed chat requests (KEYS keys, WORDS-word bodies) over 8 connections. Each proxy runs
# under `valgrind --tool=callgrind`; after a 3 s warm-up its counters are zeroed, wrk runs
# DURATION s, the counters are dumped: instructions (Ir) per request = the dump's total / wrk's
# requests. vs_after is the ratio to this build, vs_nginx to nginx in the same run.
# Instructions are not time (cache misses, syscalls and the kernel's share are not in them):
# use it next to bench-vs-nginx.sh, not instead of it. `callgrind_annotate $OUT/cg-<label>.out.*`
# shows where they go. NGINX=0 leaves nginx out. CALLGRIND_ARGS adds callgrind options, e.g.
# "--cache-sim=yes --branch-sim=yes" (simulated cache and branch misses, per request with
# `callgrind_annotate`; the VM has no hardware counters for `perf stat`).
#
# Needs: valgrind, nginx, wrk (apt-get install valgrind nginx wrk).
# Usage: scripts/bench-instructions.sh [DURATION]
#   BIN_before=/path/to/old/berth KEYS=1000 WORDS=10 BASE_PORT=18400 NGINX=1 POLICY=manual
set -euo pipefail

DURATION=${1:-6}
KEYS=${KEYS:-1000}
WORDS=${WORDS:-10}
BASE=${BASE_PORT:-18400}
# the berth proxies' policy and its flags, word-split (e.g. "cache_aware --routing-key-override")
POLICY=${POLICY:-manual}
OUT=${OUT:-/tmp/berth-instructions}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=$ROOT/target/release/berth
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

for tool in valgrind callgrind_control callgrind_annotate nginx wrk; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install valgrind nginx wrk)"; exit 1; }
done
mkdir -p "$OUT"
rm -f "$OUT"/cg-*.out*
trap kill_pids EXIT
(cd "$ROOT" && cargo build --release -q -p berth)

W=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
static_workers "$OUT/up" "${W[@]}"
words=$(printf 'lorem %.0s' $(seq 1 "$WORDS"))
keyed_chat_lua "$OUT/req.lua" "$KEYS" "$words"
urls=$(for p in "${W[@]}"; do printf 'http://127.0.0.1:%s ' "$p"; done)

printf "\n== instructions per request: 4 static nginx workers, wrk -t1 -c8, %s s, %s keys, %s-word bodies ==\n" \
    "$DURATION" "$KEYS" "$WORDS"
printf "%-12s %10s %16s %10s %10s\n" build requests instructions/req vs_after vs_nginx
mkdir -p "$OUT/px"
NGINX_EXTRA="master_process off;" nginx_proxy_conf "$OUT/px/nginx.conf" "$OUT/px" "$((BASE + 10))" "${W[@]}"
declare -A PER
i=0
labels=
[ "${NGINX:-1}" = 0 ] || labels=nginx
for var in after $(compgen -v BIN_ || true); do labels="$labels $var"; done
for var in $labels; do
    case $var in
        nginx) label=nginx; port=$((BASE + 10)); cmd=(nginx -c "$OUT/px/nginx.conf" -p "$OUT/px");
            ready=http://127.0.0.1:$port/health ;;
        *) if [ "$var" = after ]; then label=after; bin=$BERTH; else label=${var#BIN_}; bin=${!var}; fi
            port=$((BASE + 20 + i)); i=$((i + 1))
            # shellcheck disable=SC2206
            cmd=("$bin" serve --host 127.0.0.1 --port "$port" --worker-urls $urls --policy $POLICY
                --io-threads 1 --log-level warn)
            ready=http://127.0.0.1:$port/readiness ;;
    esac
    # shellcheck disable=SC2086
    valgrind --tool=callgrind ${CALLGRIND_ARGS:-} --callgrind-out-file="$OUT/cg-$label.out" "${cmd[@]}" \
        >"$OUT/proxy-$label.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_http "$ready"
    wrk -t1 -c8 -d3s -s "$OUT/req.lua" "http://127.0.0.1:$port" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    wrk -t1 -c8 -d"${DURATION}s" -s "$OUT/req.lua" "http://127.0.0.1:$port" >"$OUT/wrk-$label.txt"
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    if grep -q Non-2xx "$OUT/wrk-$label.txt"; then
        echo "non-2xx answers from $label: see $OUT/wrk-$label.txt" >&2; exit 1
    fi
    reqs=$(awk '/requests in/ {print $1}' "$OUT/wrk-$label.txt")
    # the dump after zeroing is the one with a part number (.1); the final one at exit is not used
    dump=$(ls "$OUT/cg-$label.out".* | head -1)
    ir=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    PER[$label]=$((ir / reqs))
    ratio() { # label: its count over the base's, or - without one
        if [ -n "${PER[$1]:-}" ]; then awk -v a="${PER[$label]}" -v b="${PER[$1]}" 'BEGIN { printf "%.3f", a / b }'
        else echo -; fi
    }
    if [ "$label" = nginx ]; then
        printf "%-12s %10s %16s %10s %10s\n" "$label" "$reqs" "${PER[$label]}" - 1.000
    else
        printf "%-12s %10s %16s %10s %10s\n" "$label" "$reqs" "${PER[$label]}" "$(ratio after)" "$(ratio nginx)"
    fi
done
