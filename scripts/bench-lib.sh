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

nginx_main() { # dir extra: what both nginx configs below start with, up to inside `http {`
    # (one worker process in the foreground, files under dir, no access log, keep-alive for the
    # whole run); extra: more main-context directives
    cat <<CONF
worker_processes 1;
daemon off;
$2
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $1;
    keepalive_requests 1000000;
CONF
}

static_workers() { # dir port...: one nginx answering a fixed chat JSON on each port (trivial "workers")
    local dir=$1 p listen
    shift
    mkdir -p "$dir"
    listen=$(for p in "$@"; do printf 'listen 127.0.0.1:%s;\n' "$p"; done)
    cat >"$dir/nginx.conf" <<CONF
$(nginx_main "$dir" "")
    server {
        $listen
        default_type application/json;
        location = /health { return 200 'ok'; }
        location = /v1/models { return 200 '{"object":"list","data":[{"id":"sim-model","object":"model"}]}'; }
        location / { return 200 '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}'; }
    }
}
CONF
    nginx -c "$dir/nginx.conf" -p "$dir" >"$dir/stdout.log" 2>&1 &
    PIDS+=($!)
    for p in "$@"; do wait_http "http://127.0.0.1:$p/health"; done
}

nginx_proxy_conf() { # file dir port worker_port...: the nginx proxy bench-vs-nginx.sh and bench-instructions.sh compare
    # berth with (`hash $http_x_smg_routing_key consistent`, keep-alive to the workers, one worker
    # process); NGINX_EXTRA adds main-context directives (bench-instructions.sh: `master_process off;`)
    local file=$1 dir=$2 port=$3 servers p
    shift 3
    servers=$(for p in "$@"; do printf 'server 127.0.0.1:%s;\n' "$p"; done)
    cat >"$file" <<CONF
$(nginx_main "$dir" "${NGINX_EXTRA:-}")
    proxy_temp_path $dir;
    upstream workers {
        hash \$http_x_smg_routing_key consistent;
        $servers
        keepalive 256;
    }
    server {
        listen 127.0.0.1:$port;
        location = /health { return 200 'ok'; }
        location / {
            proxy_pass http://workers;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
CONF
}
