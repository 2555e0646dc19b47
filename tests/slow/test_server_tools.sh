#!/usr/bin/env bash
# Tool calling through `candle serve` and the official openai client
# (test_tools in tests/server/test_openai.py): tool_choice required and
# named give calls whose arguments follow their schemas, streamed deltas
# reassemble to the same calls, and the calls and their results go back into
# the conversation. On SmolLM2-135M (its template teaches no tool format:
# Candle's generic <tool_call> prompt) and Qwen2.5-Coder-0.5B (Hermes
# format, rendered by its own template) where models/ holds them
# (scripts/fetch-model.sh, target qwen-coder-0.5b); skips when neither is.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
SMOL=${SERVER_SMOLLM2_MODEL:-$SRC/models/SmolLM2-135M-Instruct.Q4_1.gguf}
QWEN=${SERVER_QWEN_MODEL:-$SRC/models/qwen2.5-coder-0.5b-instruct.gguf}
[ -f "$SMOL" ] || [ -f "$QWEN" ] || { echo "SKIP: neither $SMOL nor $QWEN present"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
. "$SRC/tests/common/openai.sh"
need_openai
# under the sanitizers a few of the sampled requests (the validity figure)
sanitized=$(sed -n 's/^CANDLE_SANITIZE:[A-Z]*=//p' "${CANDLE_BINARY_DIR:-$SRC/build}/CMakeCache.txt" 2>/dev/null)
[ "$sanitized" = ON ] && export TOOL_REQUESTS=${TOOL_REQUESTS:-2}
LOG=$(mktemp -d)
S=
trap '[ -n "$S" ] && kill $S 2>/dev/null; rm -rf "$LOG"' EXIT
fail=0 ran=0
for MODEL in "$SMOL" "$QWEN"; do
    [ -f "$MODEL" ] || { echo "($(basename "$MODEL") absent: not tested)"; continue; }
    P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$BIN" serve -m "$MODEL" --port "$P" -c 2048 --parallel 2 --api-key k 2>"$LOG/s" & S=$!
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$P/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
    echo "== $(basename "$MODEL")"
    SERVER_TESTS=test_tools timeout 1200 python3 "$SRC/tests/server/test_openai.py" "http://127.0.0.1:$P" k ||
        { fail=1; tail -5 "$LOG/s"; }
    # a clean stop (under the sanitizers: no error or leak at exit)
    kill -TERM $S; wait $S || { echo "FAIL: $(basename "$MODEL") server exit status"; tail -20 "$LOG/s"; fail=1; }; S=
    ran=1
done
[ $fail = 0 ] && [ $ran = 1 ] && echo "test_server_tools: OK"
exit $fail
