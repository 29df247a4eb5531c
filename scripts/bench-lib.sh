# Shared helpers of the benchmark scripts (sourced, not run).

wait_http() { # url
    for _ in $(seq 1 300); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "not up: $1" >&2
    return 1
}

cpu_ticks() { # pid: utime+stime of the process and its descendants
    local total=0 p
    for p in $1 $(pgrep -P "$1" || true); do
        if [ -r "/proc/$p/stat" ]; then
            total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
        fi
    done
    echo "$total"
}

ms() { # wrk latency like 1.23ms / 450.00us / 1.2s -> ms
    awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/, "", v); print v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); print v + 0 }
        else if (v ~ /s$/) { sub(/s$/, "", v); print v * 1000 } }'
}

