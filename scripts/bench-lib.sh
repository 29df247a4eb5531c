# Shared helpers of the benchmark scripts (sourced, not run).

# Processes the script started; `trap kill_pids EXIT` stops them however the script ends.
PIDS=()
kill_pids() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

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


keyed_chat_lua() { # file keys content: a wrk script POSTing keyed chat requests (keys 0: keyless; PACE_MS paces)
    cat >"$1" <<LUA
local n = 0
local body = '{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"$3"}]}'
request = function()
    n = n + 1
    local hdr = { ["Content-Type"] = "application/json" }
    if $2 > 0 then hdr["X-SMG-Routing-Key"] = "session-" .. (n % $2) end
    return wrk.format("POST", "/v1/chat/completions", hdr, body)
end
if os.getenv("PACE_MS") then
    local d = tonumber(os.getenv("PACE_MS"))
    delay = function() return d end
end
LUA
}
