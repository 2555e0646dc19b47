#!/usr/bin/env bash
# Streamed tool calls through `candle serve` and the official openai client
# (test_tool_stream in tests/server/test_openai.py) in every tool-call format:
# the deltas, assembled as openai's docs show and by the client's stream
# helper, equal the non-streamed calls, and arguments come in fragments as
# they are generated. On the tiny random decoders of tests/data/hf, copied
# with a 4096-position context (room for the tools' prompt; the weights do
# not care) and a real model's chat template from tests/data/jinja: Qwen2.5
# (Hermes <tool_call>), Llama 3.1 (bare JSON), Mistral Nemo ([TOOL_CALLS]
# array) and none (Candle's generic prompt). tool_choice required/named put
# the calls under the grammar, so a random model writes them too.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
. "$SRC/tests/common/openai.sh"
need_openai
LOG=$(mktemp -d)
S=
trap '[ -n "$S" ] && kill $S 2>/dev/null; rm -rf "$LOG"' EXIT
fail=0
# folder:template:format[:serve flag] (no template: the family's formatter, and
# the tools described in a system message, calls asked for in <tool_call>)
for spec in qwen2:qwen2.5-coder:hermes llama:llama-3.1:llama3 mistral-nemo:mistral-nemo:mistral \
    qwen3::generic:--chat-template=chatml; do
    IFS=: read -r hf tmpl want flag <<<"$spec"
    M=$LOG/$hf
    mkdir -p "$M"
    cp "$SRC/tests/data/hf/$hf/"{config.json,model.safetensors,tokenizer.json,tokenizer_config.json} "$M/"
    python3 - "$M" "${tmpl:+$SRC/tests/data/jinja/$tmpl.jinja}" <<'PY' || { echo "FAIL: cannot prepare $hf"; fail=1; continue; }
import json, sys
d, tmpl = sys.argv[1], sys.argv[2]
c = json.load(open(d + "/config.json"))
c["max_position_embeddings"] = 4096
json.dump(c, open(d + "/config.json", "w"))
t = json.load(open(d + "/tokenizer_config.json"))
if tmpl:
    t["chat_template"] = open(tmpl).read()
json.dump(t, open(d + "/tokenizer_config.json", "w"))
PY
    P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$BIN" serve -m "$M" --port "$P" -c 4096 --parallel 2 --api-key k ${flag:+${flag%%=*} ${flag#*=}} 2>"$LOG/s" & S=$!
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$P/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
    echo "== $hf ${tmpl:-(no template)}: $want"
    TOOL_FORMAT=$want SERVER_TESTS=test_tool_stream,test_tool_stream_text,test_tool_stream_n timeout 600 python3 "$SRC/tests/server/test_openai.py" "http://127.0.0.1:$P" k ||
        { fail=1; tail -5 "$LOG/s"; }
    kill -TERM $S; wait $S || { echo "FAIL: $hf server exit status"; tail -20 "$LOG/s"; fail=1; }; S=
done
[ $fail = 0 ] && echo "test_server_tool_stream: OK"
exit $fail
