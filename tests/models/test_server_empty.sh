#!/usr/bin/env bash
# Empty completions in every mode (issue 22, finding 1): completions and chat,
# streamed and not, where the first greedy token completes a stop sequence, so
# nothing is generated. The streamed case once made stream_read memcpy from a
# NULL buffer (the sanitizer build died and cut the stream). The stop string
# is the first character the model emits for each prompt, found greedily first,
# so the test holds for whichever tiny model is at hand.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL=${SERVER_TEST_MODEL:-${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf}
[ -f "$MODEL" ] || MODEL=$SRC/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server"; exit 77; fi
. "$SRC/tests/common/openai.sh"
need_openai
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp -d)
S=
trap '[ -n "$S" ] && kill $S 2>/dev/null; rm -rf "$LOG"' EXIT
"$BIN" serve -m "$MODEL" --port "$PORT" -c 256 --parallel 2 --chat-template chatml 2>"$LOG/s" & S=$!
for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    python3 -c 'import time; time.sleep(0.1)'
done
fail=0
timeout 120 python3 - "$PORT" <<'PY' || fail=1
import sys
import openai
client = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="none",
                       timeout=60, max_retries=0)
M = "m"
bad = 0
def check(cond, what):
    global bad
    if not cond:
        print("FAIL:", what)
        bad = 1
def first_char(chat):
    if chat:
        r = client.chat.completions.create(model=M, messages=[{"role": "user", "content": "Hello"}],
                                           max_tokens=4, temperature=0)
        t = r.choices[0].message.content
    else:
        r = client.completions.create(model=M, prompt="Once upon a time", max_tokens=4, temperature=0)
        t = r.choices[0].text
    check(len(t) > 0, f"{'chat' if chat else 'completion'}: greedy text to take a stop from")
    return t[:1] or "x"
for chat in (False, True):
    stop = first_char(chat)
    kind = "chat" if chat else "completion"
    if chat:
        args = dict(model=M, messages=[{"role": "user", "content": "Hello"}], max_tokens=8,
                    temperature=0, stop=[stop])
        r = client.chat.completions.create(**args)
        text, finish = r.choices[0].message.content, r.choices[0].finish_reason
    else:
        args = dict(model=M, prompt="Once upon a time", max_tokens=8, temperature=0, stop=[stop])
        r = client.completions.create(**args)
        text, finish = r.choices[0].text, r.choices[0].finish_reason
    check(text == "" and finish == "stop", f"{kind}: {text!r} {finish!r}, want '' 'stop'")
    parts, finish, n = [], None, 0
    create = client.chat.completions.create if chat else client.completions.create
    for ch in create(stream=True, stream_options={"include_usage": True}, **args):
        n += 1
        if ch.choices:
            c = ch.choices[0]
            parts.append((c.delta.content if chat else c.text) or "")
            finish = c.finish_reason or finish
        elif ch.usage:
            check(ch.usage.prompt_tokens > 0, f"{kind} stream: usage")
    check("".join(parts) == "" and finish == "stop",
          f"{kind} stream: {''.join(parts)!r} {finish!r} after {n} chunks, want '' 'stop'")
print("empty completions:", "FAIL" if bad else "OK")
sys.exit(bad)
PY
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "FAIL: server gone after empty completions"; fail=1; }
if [ $fail != 0 ]; then tail -20 "$LOG/s"; fi
kill -TERM $S; wait $S || { echo "FAIL: server exit status"; tail -20 "$LOG/s"; fail=1; }
S=
[ $fail = 0 ] && echo "test_server_empty: OK"
exit $fail
