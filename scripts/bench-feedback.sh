#!/usr/bin/env bash
# Cached-token feedback (issue #17) on the agentic workload of `berth demo`'s second set: each
# SETTING x MODE x run gets 4 fresh `berth sim-worker` processes (KV capacity and prefill
# speed per setting, time scale 0.2) behind a fresh `berth serve --policy POLICY
# --cache-feedback MODE`, driven by `berth bench` (Poisson arrivals, NPROMPTS shared system
# prompts of SYSW words, 3±2 turns, 2 sub-agents extending their parent, streaming chat), all on
# loopback. `measure` routes exactly as `off` but counts the index's prediction error, so
# measure vs on is feedback off vs on with the index's accuracy known for both.
# Prints one row per run: the policy and arm, cached share, TTFT p50/p99, and from the gateway's
# metrics the index's mean absolute error of predicted cached tokens (source="index"), answers
# compared, shortfalls, corrections. Bounded by ROOTS per run. Within one setting and seed every
# policy and arm runs back to back (interleaved), so arms are paired by seed
# (scripts/bench-feedback-pairs.py summarises the rows: mean, min-max, paired differences).
#
# Usage: scripts/bench-feedback.sh
#   env: POLICY (ttft_aware; POLICIES, space-separated, runs several) ROUTING (smg_routing_key)
#        MODES ("measure on"; "off" too) RUNS (3)
#        ARMS (MODES when unset): space-separated arms, each MODE or LABEL:MODE, where LABEL
#        names another binary in BIN_<LABEL> (e.g. ARMS="off on s9:on" BIN_s9=/work/berth-s9)
#        FIRST_SEED (1: run n uses bench seed FIRST_SEED + n - 1)
#        ARM_ORDER (fixed: every seed runs ARMS in the order given; alternate: odd seeds run
#        them in reverse, so with ARMS="off on" `on` runs first on odd seeds and `off` first
#        on even ones, and a position effect (the machine's load drifting within a seed)
#        falls on each arm alike; issue #17 session 13)
#        SETTINGS ("demo pressure"): demo = KV 6144, 30 roots at 4/s (the demo's agentic set);
#        pressure = KV 3072, 60 roots at 6/s (prefill near saturation: a run that loses cache
#        queues up, so runs of one seed differ by up to 0.26 cached share); kvpressure = the same
#        KV and arrivals, prefill 4,000 tokens/s (KVP_PREFILL) and KVP_ROOTS (120) roots: the same
#        KV pressure without the prefill cliff (docs/benchmarks.md, session 6); kvslow = kvpressure
#        at 2.5 times the sim's time scale (0.5: every delay 2.5 times longer in real time),
#        arrivals and turn pauses scaled with it (2.4 roots/s, 500 ms pauses) and KVS_ROOTS (120)
#        roots: the same load in the sim's time, less sensitive to the shared machine's CPU
#        (docs/benchmarks.md, issue #17 session 8); kvroom = kvpressure with KVR_KV (4,608) tokens
#        of KV: room for a system prompt and its sessions' recent turns but not for two system
#        prompts, so sessions' histories are still evicted (session 8). BASE_PORT (25000)
#        BIN (target/release/berth, built first when unset)
#        LOG_LEVEL (warn; e.g. "warn,berth::feedback=debug" logs every compared answer to
#        $OUT/SETTING-MODE-RUN/gateway.log)
#        GATEWAY_ARGS (extra `berth serve` flags, space-separated)
#        ROUTING_SEED (the run's bench seed: the gateway's --routing-seed, so its tie breaks
#        repeat from run to run; "clock" leaves the flag out, for binaries without it)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=${BIN:-$ROOT/target/release/berth}
BASE=${BASE_PORT:-25000}
OUT=${OUT:-/tmp/berth-feedback}
POLICY=${POLICY:-ttft_aware}
POLICIES=${POLICIES:-$POLICY}
ROUTING=${ROUTING:-smg_routing_key}
MODES=${MODES:-"measure on"}
ARMS=${ARMS:-$MODES}
RUNS=${RUNS:-3}
SETTINGS=${SETTINGS:-"demo pressure"}
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
mkdir -p "$OUT"
trap kill_pids EXIT
[ -n "${BIN:-}" ] || (cd "$ROOT" && cargo build --release -q -p berth)

metric_sum() { # metrics-file name-prefix: sum of the samples whose line starts with it
    awk -v p="$2" 'index($0, p) == 1 { s += $NF } END { printf "%.0f", s }' "$1"
}

printf '%-9s %-12s %-10s %3s %6s %7s %9s %9s %9s %8s %10s %11s\n' setting policy arm run ok \
    cached ttft_p50 ttft_p99 mae_tok compared shortfall corrections
for setting in $SETTINGS; do
    PREFILL=2000 TS=0.2 DELAY=200
    case $setting in
        demo) KV=6144 ROOTS=30 RATE=4 ;;
        pressure) KV=3072 ROOTS=60 RATE=6 ;;
        kvpressure) KV=3072 ROOTS=${KVP_ROOTS:-120} RATE=6 PREFILL=${KVP_PREFILL:-4000} ;;
        kvroom) KV=${KVR_KV:-4608} ROOTS=${KVP_ROOTS:-120} RATE=6 PREFILL=${KVP_PREFILL:-4000} ;;
        kvslow) KV=3072 ROOTS=${KVS_ROOTS:-120} RATE=2.4 PREFILL=${KVP_PREFILL:-4000} TS=0.5 DELAY=500 ;;
        *) echo "unknown setting $setting" >&2; exit 1 ;;
    esac
    for run in $(seq "${FIRST_SEED:-1}" $((${FIRST_SEED:-1} + RUNS - 1))); do
        arms=$ARMS
        if [ "${ARM_ORDER:-fixed}" = alternate ] && [ $((run % 2)) -eq 1 ]; then
            arms=$(printf '%s\n' $ARMS | tac | tr '\n' ' ')
        fi
        for policy in $POLICIES; do
        for arm in $arms; do
            mode=${arm##*:}
            bin=$BERTH
            if [ "$arm" != "$mode" ]; then
                var="BIN_${arm%%:*}"
                bin=${!var:?"$var unset (arm $arm)"}
            fi
            PIDS=()
            URLS=()
            for i in 1 2 3 4; do
                "$bin" sim-worker --host 127.0.0.1 --port $((BASE + i)) --model sim-model \
                    --kv-capacity-tokens "$KV" --prefill-tokens-per-sec "$PREFILL" --time-scale "$TS" \
                    >"$OUT/sim-$i.log" 2>&1 &
                PIDS+=($!)
                URLS+=("http://127.0.0.1:$((BASE + i))")
            done
            for u in "${URLS[@]}"; do wait_http "$u/health"; done
            seed_args=(--routing-seed "${ROUTING_SEED:-$run}")
            [ "${ROUTING_SEED:-}" != clock ] || seed_args=()
            "$bin" serve --host 127.0.0.1 --port "$BASE" --worker-urls "${URLS[@]}" \
                --policy "$policy" --cache-feedback "$mode" --prometheus-host 127.0.0.1 \
                --prometheus-port $((BASE + 9)) --log-level "${LOG_LEVEL:-warn}" "${seed_args[@]}" \
                ${GATEWAY_ARGS:-} \
                >"$OUT/gateway.log" 2>&1 &
            PIDS+=($!)
            wait_http "http://127.0.0.1:$BASE/readiness"
            art="$OUT/$setting-$policy-${arm/:/-}-$run"
            rm -rf "$art"
            "$bin" bench --url "http://127.0.0.1:$BASE" --session-routing "$ROUTING" \
                --num-sessions "$ROOTS" --concurrency 1000 --request-rate "$RATE" \
                --arrival-pattern poisson --num-system-prompts "${NPROMPTS:-4}" \
                --shared-system-prompt-length "${SYSW:-1500}" --session-turns-mean 3 \
                --session-turns-stddev 2 --session-turn-delay-mean "$DELAY" \
                --session-turn-delay-stddev $((DELAY / 2)) --synthetic-input-tokens-mean 120 \
                --synthetic-input-tokens-stddev 60 --output-tokens-mean 40 \
                --output-tokens-stddev 13 --agent-fanout 2 --agent-depth 1 \
                --agent-context parent --random-seed "$run" --expected-workers 4 --allow-failed-requests \
                --endpoint-type chat --streaming --quiet --artifact-dir "$art" >/dev/null
            curl -s "http://127.0.0.1:$((BASE + 9))/metrics" >"$art/gateway-metrics.txt"
            kill_pids
            cp "$OUT/gateway.log" "$art/gateway.log"
            csv=$(ls "$art"/*.csv | head -1)
            get() { awk -F, -v m="$1" '$2 == m { print $3 }' "$csv" | head -1; }
            m="$art/gateway-metrics.txt"
            # the index's error only (source="index"); `off` has no such samples
            esum=$(awk '/^berth_cached_tokens_prediction_error_sum\{/ && /source="index"/ { s += $NF } END { printf "%.0f", s }' "$m")
            ecount=$(awk '/^berth_cached_tokens_prediction_error_count\{/ && /source="index"/ { s += $NF } END { printf "%.0f", s }' "$m")
            mae=$(awk -v s="$esum" -v c="$ecount" 'BEGIN { if (c > 0) printf "%.0f", s / c; else print "-" }')
            short=$(awk '/^berth_cached_tokens_reports_total\{/ && /verdict="shortfall"/ { s += $NF } END { printf "%.0f", s }' "$m")
            corr=$(metric_sum "$m" 'berth_prefix_index_corrections_total{')
            printf '%-9s %-12s %-10s %3s %6s %7.3f %9.1f %9.1f %9s %8s %10s %11s\n' "$setting" \
                "$policy" "$arm" "$run" "$(get ok)" "$(get cached_ratio)" "$(get ttft_ms_p50)" \
                "$(get ttft_ms_p99)" "$mae" "$ecount" "$short" "$corr"
        done
        done
    done
done
