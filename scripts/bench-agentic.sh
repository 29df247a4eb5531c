#!/usr/bin/env bash
# Agentic coding traces replayed through routers in front of FLEET (4) `berth sim-worker`s whose
# KV is tight (issue #21). For each trace, each load level and each row, RUNS runs; prints one
# markdown table per (trace, load) with mean (min-max) over the runs, the trace's ideal cached
# ratio and the pooled ceiling (one sim worker with the fleet's whole KV and no queueing).
#
# Usage: scripts/bench-agentic.sh TRACE.jsonl [TRACE2.jsonl ...]
#   env: BIN (target/release/berth)   SMG (/work/venv-smg/bin/smg; rows smg:* skipped if absent)
#        RUNS (3)  BASE_PORT (24000; uses BASE_PORT..+FLEET and +FLEET+10, +FLEET+11)
#        OUT (/tmp/berth-bench-agentic)  FLEET (4) sim workers behind the router; the pooled
#              ceiling is one worker with FLEET times the KV
#        LOADS ("light:8000:32768 burst:2000:20480 saturated:1100:20480 overkv:1100:8192"):
#              load levels as name:prefill-tokens-per-sec:kv-tokens-per-worker[:sessions-per-sec].
#              Without a rate the trace's own schedule (aiperf's --fixed-schedule: the
#              agentic-code traces' first turns all have timestamp 0, then each turn follows its
#              recorded delay after the previous answer); with one, sessions start open-loop at
#              that rate (aiperf's --request-rate with --arrival-pattern poisson, seeded) and each
#              replays its turns after their recorded delays. Each table prints the level's
#              offered prefill utilization (what an ideal router's fleet would be busy) and each
#              row's busy share; issue #21's targets are judged on the levels near prefill
#              saturation with the KV holding the live working set (docs/benchmarks.md, session 4
#              of issue #21: how the levels were chosen)
#        LOG_LEVEL (warn) berth rows' --log-level; the gateway log is kept with each run's artifacts
#        SPEEDUP (20) --replay-speedup (think times / 20); TSCALE (0.2) sim time scale
#        BLOCK (16) tokens per trace hash id (1/32 of the trace's 512); OUTTOK (32)
#        SAMPLE (1.0) --trace-session-sample; SESSIONS (all) --num-sessions
#        ROWS (below): space-separated router:policy:routing[:flag,flag] rows; router berth,
#              smg or nginx (nginx-style hashing: berth consistent_hashing on the session
#              header stands in for nginx's `hash $http_x_smg_routing_key consistent`), or
#              berth@LABEL: berth from the binary in env BIN_LABEL (an A/B against an
#              earlier build in the same run, e.g. BIN_s7=/work/berth-s7 and berth@s7:agentic:header);
#              routing header (the bench's x-smg-routing-key per session) or none; the
#              nginx rows run with --disable-worker-overload-protection (nginx has none)
#        HASH_LAYOUTS (6): the hashing baseline's ring hashes the workers' URLs, ports included,
#              so how evenly it spreads a trace's sessions depends on the ports (issue #21
#              session 14: 1.48x the mean of seed 11's requests on one worker on 24001-24004,
#              1.05x on 24101-24104). Before a trace's runs, the nginx rows' ring is probed on
#              this many port layouts (layout k: the workers on BASE+20k+1..; FLEET <= 8) with
#              one tiny request per session (scripts/bench-agentic-ring.py), and the nginx rows
#              run their workers on the layout whose busiest worker is least over the mean (the
#              larger of its share of the trace's requests and of its prompt tokens): the
#              fairest ring of those tried, whatever BASE_PORT is. Each table is followed by
#              the layouts' figures and the ring's per-worker session share. 1: BASE's ports
#              only, as before session 15
#   e.g. RUNS=1 LOADS=saturated:1100:20480 scripts/bench-agentic.sh /tmp/t/dataset.jsonl
#        SPEEDUP=80 LOADS=saturated-open:3200:32768:9 scripts/bench-agentic.sh /tmp/t96/dataset.jsonl
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/target/release/berth}
SMG=${SMG:-/work/venv-smg/bin/smg}
RUNS=${RUNS:-3}
BASE=${BASE_PORT:-24000}
FLEET=${FLEET:-4}
OUT=${OUT:-/tmp/berth-bench-agentic}
LOADS=${LOADS:-"light:8000:32768 burst:2000:20480 saturated:1100:20480 overkv:1100:8192"}
SPEEDUP=${SPEEDUP:-20}
TSCALE=${TSCALE:-0.2}
BLOCK=${BLOCK:-16}
OUTTOK=${OUTTOK:-32}
SAMPLE=${SAMPLE:-1.0}
ROWS=${ROWS:-"berth:agentic:header berth:ttft_aware:header berth:cache_aware:none \
smg:cache_aware:none smg:cache_aware:header:--routing-key-override \
nginx:consistent_hashing:header"}
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
trap kill_pids EXIT
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "no berth binary at $BIN (cargo build --release -p berth)" >&2; exit 1; }

start_sims() { # n kv tscale prefill: starts n sim workers on SIM_BASE+1.. (BASE+1..), sets URLS
    URLS=()
    local at=${SIM_BASE:-$BASE}
    for i in $(seq 1 "$1"); do
        "$BIN" sim-worker --host 127.0.0.1 --port $((at + i)) --model sim-model \
            --kv-capacity-tokens "$2" --prefill-tokens-per-sec "$4" --time-scale "$3" \
            >"$OUT/sim-$i.log" 2>&1 &
        PIDS+=($!)
        URLS+=("http://127.0.0.1:$((at + i))")
    done
    for u in "${URLS[@]}"; do wait_http "$u/health"; done
}

stop_all() { kill_pids; PIDS=(); }

start_router() { # router policy [extra router flags]
    local gw=$((BASE + FLEET + 10)) r=$1 p=$2
    shift 2
    case $r in
    berth | berth@* | nginx)
        # nginx has no overload protection: its stand-in routes on the hash alone
        [ "$r" = nginx ] && set -- "$@" --disable-worker-overload-protection
        local bin=$BIN
        if [[ $r == berth@* ]]; then
            local var="BIN_${r#berth@}"
            bin=${!var:?"row $r needs $var"}
        fi
        "$bin" serve --host 127.0.0.1 --port "$gw" --worker-urls "${URLS[@]}" --policy "$p" \
            --prometheus-host 127.0.0.1 --prometheus-port $((BASE + FLEET + 11)) --log-level "${LOG_LEVEL:-warn}" "$@" \
            >"$OUT/gateway.log" 2>&1 &
        PIDS+=($!)
        wait_http "http://127.0.0.1:$gw/readiness" ;;
    smg)
        "$SMG" launch --host 127.0.0.1 --port "$gw" --worker-urls "${URLS[@]}" --policy "$p" \
            --prometheus-host 127.0.0.1 --prometheus-port $((BASE + FLEET + 11)) --log-level warn "$@" \
            >"$OUT/gateway.log" 2>&1 &
        PIDS+=($!)
        wait_http "http://127.0.0.1:$gw/health"
        # SMG answers /health before it has listed the workers' models (a bench started then
        # gets 404 model_not_found): wait until /v1/models names the model, at most 30 s
        for _ in $(seq 1 300); do
            curl -fsS "http://127.0.0.1:$gw/v1/models" 2>/dev/null | grep -q sim-model && break
            sleep 0.1
        done ;;
    esac
    GW="http://127.0.0.1:$gw"
}

bench() { # url routing dir
    local sessions=()
    [ -n "${SESSIONS:-}" ] && sessions=(--num-sessions "$SESSIONS")
    local schedule=(--fixed-schedule)
    [ -n "$rate" ] && schedule=(--request-rate "$rate" --arrival-pattern poisson --concurrency 100000)
    "$BIN" bench --url "$1" --session-routing "$2" --input-file "$TRACE" \
        --custom-dataset-type mooncake_trace --prompt-input-tokens-block-size "$BLOCK" \
        --trace-max-output-tokens "$OUTTOK" "${schedule[@]}" --replay-speedup "$SPEEDUP" \
        --trace-session-sample "$SAMPLE" "${sessions[@]}" --random-seed 1 \
        --expected-workers "${EXPECTED:-$FLEET}" --endpoint-type chat --streaming --quiet \
        --allow-failed-requests --artifact-dir "$3" >/dev/null
}

row_line() { # label dir: one TSV line of the figures of summary.json (+ the records' path)
    jq -r --arg l "$1" --arg d "$2" '.summary | [$l, .cached_ratio, .ideal_cached_ratio,
        .ttft_ms.p50, .ttft_ms.p90, .ttft_ms.p99, .load_max_over_mean, .uncached_max_over_mean,
        .stickiness.ratio, .failed, $d] | @tsv' "$2/summary.json"
}

HASH_LAYOUTS=${HASH_LAYOUTS:-6}
[ "$FLEET" -le 8 ] || HASH_LAYOUTS=1
ring_layout() { # before a trace's runs: sets HASH_BASE (the nginx rows' SIM_BASE) and RING (text)
    HASH_BASE=$BASE
    RING=""
    [[ " $ROWS " == *" nginx:"* ]] || return 0
    local files=() k
    for k in $(seq 0 $((HASH_LAYOUTS - 1))); do
        SIM_BASE=$((BASE + 20 * k)) start_sims "$FLEET" 32768 0 1000000
        start_router nginx consistent_hashing
        python3 "$ROOT/scripts/bench-agentic-ring.py" probe "$TRACE" "$GW" "$OUT/ring-$name-$k.tsv"
        files+=("$OUT/ring-$name-$k.tsv")
        stop_all
    done
    RING=$(python3 "$ROOT/scripts/bench-agentic-ring.py" choose "$TRACE" "$FLEET" "${files[@]}")
    k=$(tail -n 1 <<<"$RING")
    HASH_BASE=$((BASE + 20 * k))
    RING="hashing ring (nginx rows), $HASH_LAYOUTS port layouts probed, the rows ran on layout $k:
$(head -n -1 <<<"$RING" | sed 's/^/- /')"
}

for TRACE in "$@"; do
    name=$(basename "$(dirname "$TRACE")")
    ring_layout
    for load in $LOADS; do
        IFS=: read -r lname prefill kv rate <<<"$load"
        tsv="$OUT/$name-$lname-f$FLEET.tsv"
        : >"$tsv"
        for run in $(seq 1 "$RUNS"); do
            # the pooled ceiling: one worker with the fleet's KV, no queueing
            start_sims 1 $((kv * FLEET)) 0 "$prefill"
            pooled="$OUT/art/$name-$lname-f$FLEET-pooled-$run"
            EXPECTED=1 bench "${URLS[0]}" none "$pooled" && row_line pooled "$pooled" >>"$tsv"
            stop_all
            for row in $ROWS; do
                IFS=: read -r router policy routing extra <<<"$row"
                [ "$router" = smg ] && [ ! -x "$SMG" ] && continue
                case $routing in header) mode=smg_routing_key ;; *) mode=none ;; esac
                sims_at=$BASE
                [ "$router" = nginx ] && sims_at=$HASH_BASE
                SIM_BASE=$sims_at start_sims "$FLEET" "$kv" "$TSCALE" "$prefill"
                start_router "$router" "$policy" ${extra//,/ }
                art="$OUT/art/$name-$lname-f$FLEET-${row//[:,@]/_}-$run"
                bench "$GW" "$mode" "$art" && row_line "$row" "$art" >>"$tsv"
                [ "${LOG_LEVEL:-warn}" = warn ] || cp "$OUT/gateway.log" "$art/gateway.log"
                # the router's own counters (moves, placements) next to the bench's artifacts
                curl -fsS "http://127.0.0.1:$((BASE + FLEET + 11))/metrics" >"$art/router-metrics.txt" 2>/dev/null || true
                stop_all
            done
        done
        echo
        arrivals=${rate:+, sessions arriving at $rate/s}
        echo "### $name, $lname: $FLEET workers, prefill $prefill tokens/s, KV $kv tokens per worker$arrivals, $RUNS run(s)"
        python3 "$ROOT/scripts/bench-agentic-table.py" "$tsv" "$prefill" "$TSCALE" "$FLEET" "${rate:-}"
        [ -z "$RING" ] || printf '\n%s\n' "$RING"
    done
done
