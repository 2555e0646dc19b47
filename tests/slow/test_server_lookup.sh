#!/usr/bin/env bash
# `candle serve --lookup` (prompt-lookup speculative decoding inside the
# continuous batch) on SmolLM2-135M-Instruct Q4_1 (label slow: a real
# model). Greedy completions, one at a time and 8 at once, are byte for byte
# those of a server without --lookup: a verification step's rows get the
# bits of one-token steps, and candle_sampler_verify keeps exactly greedy's
# tokens. The prompts repeat text, so drafts are made and kept: /metrics
# counts drafted and accepted tokens. So with --draft-no-timing (greedy
# requests' lengths from the acceptance schedule, not the cost model). A sampled request, one with logprobs
# and one with a JSON response format (those two decode without drafts)
# complete. Skips without the model (scripts/fetch-model.sh).
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL=${SERVER_SMOLLM2_MODEL:-$SRC/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$MODEL" ]; then bash "$SRC/scripts/fetch-model.sh" >/dev/null 2>&1 || true; fi
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
# bad values are refused before anything loads
for bad in "--lookup 0" "--lookup x" "--draft-max 65" "--draft-no-timing"; do
    # shellcheck disable=SC2086
    "$BIN" serve -m "$MODEL" $bad >/dev/null 2>&1
    [ $? = 2 ] || { echo "FAIL: serve $bad accepted"; exit 1; }
done
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PA=$(port)
PB=$(port)
PC=$(port)
LA=$(mktemp)
LB=$(mktemp)
LC=$(mktemp)
trap 'kill $SA $SB $SC 2>/dev/null; rm -f "$LA" "$LB" "$LC"' EXIT
"$BIN" serve -m "$MODEL" --port "$PA" -c 1024 --parallel 8 --quiet 2>"$LA" & SA=$!
"$BIN" serve -m "$MODEL" --port "$PB" -c 1024 --parallel 8 --quiet --lookup 2 --draft-max 8 2>"$LB" & SB=$!
"$BIN" serve -m "$MODEL" --port "$PC" -c 1024 --parallel 8 --quiet --lookup 2 --draft-max 8 --draft-no-timing 2>"$LC" & SC=$!
for p in "$PA" "$PB" "$PC"; do
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
done
PYTHONPATH="$SRC/tests/common" timeout 600 python3 - "$PA" "$PB" "$PC" <<'EOF' || { tail -5 "$LA" "$LB" "$LC"; exit 1; }
import json, sys, threading, urllib.request

from srv_client import metric, post

pa, pb, pc = sys.argv[1], sys.argv[2], sys.argv[3]

code = ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
        "def volume(w, h, d):\n    return w * h * d\n")
prompts = [
    f"Rewrite this code, renaming w to width and h to height:\n\n{code}\nAnswer:\n",
    f"Copy this text exactly.\n\n{code}\nCopy:\n",
    "List the numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3,",
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat",
    f"Explain what this code does:\n\n{code}\n",
    "Once upon a time, in a small village, there lived a girl named Lily. Once upon a time,",
    "Repeat after me: the quick brown fox jumps over the lazy dog. Repeat after me:",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n\ndef fib2(n):\n",
]

def complete(port, p, n=64, **kw):
    r = post(port, "/v1/completions", {"prompt": p, "max_tokens": n, "temperature": 0, **kw})
    return r["choices"][0]["text"], r["choices"][0]["finish_reason"]

want = [complete(pa, p) for p in prompts]
fail = 0
for i, p in enumerate(prompts):
    got = complete(pb, p)
    if got != want[i]:
        fail = 1
        print(f"FAIL: prompt {i} one at a time: {got!r} != {want[i]!r}")
res = [None] * len(prompts)
def run(i):
    res[i] = complete(pb, prompts[i])
ts = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
for t in ts: t.start()
for t in ts: t.join()
for i in range(len(prompts)):
    if res[i] != want[i]:
        fail = 1
        print(f"FAIL: prompt {i} concurrent: {res[i]!r} != {want[i]!r}")
# --draft-no-timing: greedy requests on the acceptance schedule (the default
# server's choose their lengths by the cost model) give the same texts
for i in range(len(prompts)):
    res[i] = None
ts = [threading.Thread(target=lambda i=i: res.__setitem__(i, complete(pc, prompts[i]))) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(4):
    if res[i] != want[i]:
        fail = 1
        print(f"FAIL: prompt {i} with --draft-no-timing: {res[i]!r} != {want[i]!r}")
if metric(pc, "candle_spec_drafted_tokens_total") <= 0:
    fail = 1
    print("FAIL: no drafts with --draft-no-timing")
drafted = metric(pb, "candle_spec_drafted_tokens_total")
accepted = metric(pb, "candle_spec_accepted_tokens_total")
print(f"drafted {drafted:.0f}, accepted {accepted:.0f} ({100 * accepted / max(drafted, 1):.0f}%)")
if not (drafted > 0 and 0 < accepted <= drafted):
    fail = 1
    print("FAIL: no drafts kept")
if metric(pa, "candle_spec_drafted_tokens_total") != 0:
    fail = 1
    print("FAIL: drafts without --lookup")
# the paths that decode without drafts, and sampling through the verifier
t, f = complete(pb, prompts[3], 48, temperature=0.8, seed=7)
if not t or f not in ("stop", "length"):
    fail = 1
    print(f"FAIL: sampled: {t!r} {f}")
r = post(pb, "/v1/completions", {"prompt": prompts[2], "max_tokens": 16, "temperature": 0, "logprobs": 2})
lp = r["choices"][0]["logprobs"]
if r["choices"][0]["text"] != want[2][0][:len(r["choices"][0]["text"])] or len(lp["tokens"]) == 0:
    fail = 1
    print(f"FAIL: logprobs: {r['choices'][0]}")
r = post(pb, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Give a JSON object with a name."}],
                                      "max_tokens": 64, "temperature": 0,
                                      "response_format": {"type": "json_object"}})
try:
    json.loads(r["choices"][0]["message"]["content"])
except Exception as e:
    if r["choices"][0]["finish_reason"] != "length":
        fail = 1
        print(f"FAIL: json_object: {r['choices'][0]} ({e})")
sys.exit(fail)
EOF
echo "test_server_lookup: OK"
