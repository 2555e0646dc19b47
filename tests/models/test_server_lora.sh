#!/usr/bin/env bash
# LoRA adapters in `candle serve` (tools/server/lora.c) on stories260K with
# the random GGUF LoRA of tests/data/lora (scripts/gen_lora_goldens.py):
# GET/POST /lora-adapters, a request's "lora" applied to it alone, greedy
# text equal to `candle run` with the same --lora-scaled adapter, and eight
# concurrent requests of three different adapter sets (scheduled as one
# forward per set in a step) each equal to its own set's text; with
# --lora-admin an adapter loaded while serving (POST /lora-adapters/load)
# and one unloaded while a stream uses it (POST /lora-adapters/unload: the
# stream finishes with it, new requests cannot name it), without it 403s.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL=${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf
LORA=$SRC/tests/data/lora/stories260k.lora.gguf
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp -d)
trap 'kill $S 2>/dev/null; rm -rf "$LOG"' EXIT
PROMPT="Once upon a time"
N=30
fail=0
# the CLI's greedy texts: no adapter, the adapter at 1, at 0.5
"$BIN" run -m "$MODEL" -p "$PROMPT" -n $N --temp 0 2>/dev/null >"$LOG/cli_none"
"$BIN" run -m "$MODEL" -p "$PROMPT" -n $N --temp 0 --lora "$LORA" 2>/dev/null >"$LOG/cli_1"
"$BIN" run -m "$MODEL" -p "$PROMPT" -n $N --temp 0 --lora-scaled "$LORA" 0.5 2>/dev/null >"$LOG/cli_05"
cmp -s "$LOG/cli_none" "$LOG/cli_1" && { echo "FAIL: --lora changes nothing in candle run"; fail=1; }
# a malformed adapter is refused at start
"$BIN" serve -m "$MODEL" --port 0 --lora "$SRC/tests/data/lora/llama-peft" 2>"$LOG/bad"; rc=$?
[ $rc = 1 ] && grep -q "do not fit" "$LOG/bad" || { echo "FAIL: a llama adapter on stories260K: rc $rc"; cat "$LOG/bad"; fail=1; }
# adapter 0 at global scale 1, adapter 1 (the same file) at 0
"$BIN" serve -m "$MODEL" --port "$PORT" -c 256 --parallel 8 --lora "$LORA" --lora-scaled "$LORA" 0 \
    --lora-admin 2>"$LOG/s" & S=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    python3 -c 'import time; time.sleep(0.1)'
done
python3 - "$PORT" "$LOG" "$PROMPT" $N "$LORA" <<'PY' || fail=1
import json, sys, threading, urllib.error, urllib.request
port, log, prompt, n, lora = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
base = f"http://127.0.0.1:{port}"
cli = {k: open(f"{log}/cli_{k}").read().rstrip("\n") for k in ("none", "1", "05")}
bad = 0

def call(path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def complete(lora_field=None):
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0}
    if lora_field is not None:
        body["lora"] = lora_field
    st, r = call("/v1/completions", body)
    assert st == 200, (st, r)
    return r["choices"][0]["text"]

def check(what, got, want):
    global bad
    ok = got == want
    print(("ok  " if ok else "FAIL"), what, repr(got[:60]))
    if not ok:
        print("     want", repr(want[:60]))
        bad = 1

st, lst = call("/lora-adapters")
check("GET /lora-adapters", json.dumps(lst), json.dumps([{"id": 0, "path": lora, "scale": 1.0},
                                                        {"id": 1, "path": lora, "scale": 0.0}]))
check("global scales (adapter 0 at 1) = candle run --lora", complete(), cli["1"])
check("request lora [] = no adapter = candle run", complete([]), cli["none"])
check("request lora id 0 scale 0.5 = --lora-scaled 0.5", complete([{"id": 0, "scale": 0.5}]), cli["05"])
check("ids 0 and 1 at 0.25 each = 0.5", complete([{"id": 0, "scale": 0.25}, {"id": 1, "scale": 0.25}]), cli["05"])
check("request lora, the global set unchanged after", complete(), cli["1"])
st, r = call("/v1/completions", {"prompt": prompt, "max_tokens": 4, "lora": [{"id": 2, "scale": 1}]})
check("unknown adapter id: 400", str(st), "400")
st, r = call("/v1/completions", {"prompt": prompt, "max_tokens": 4, "lora": {"id": 0}})
check("lora not a list: 400", str(st), "400")
st, r = call("/lora-adapters", [{"id": 1, "scale": 0.5}])
check("POST /lora-adapters", json.dumps(r), json.dumps({"success": True}))
st, lst = call("/lora-adapters")
check("scales after POST (unlisted ids 0)", json.dumps([e["scale"] for e in lst]), "[0.0, 0.5]")
check("global adapter 1 at 0.5 = --lora-scaled 0.5", complete(), cli["05"])
st, r = call("/lora-adapters", [{"id": 0, "scale": 1}])

# eight at once, three sets: every step mixes them
sets = [None, [], [{"id": 0, "scale": 0.5}], [], None, [{"id": 0, "scale": 0.5}], [], None]
want = {None: cli["1"], "[]": cli["none"], "half": cli["05"]}
out = [None] * len(sets)
def run(i):
    out[i] = complete(sets[i])
th = [threading.Thread(target=run, args=(i,)) for i in range(len(sets))]
for t in th: t.start()
for t in th: t.join()
for i, s in enumerate(sets):
    key = None if s is None else ("[]" if s == [] else "half")
    check(f"concurrent {i} ({json.dumps(s)})", out[i] or "", want[key])

# loading while serving: the next id, scale 0 by default
st, r = call("/lora-adapters/load", {"path": lora})
check("POST /lora-adapters/load", json.dumps(r), json.dumps({"id": 2, "path": lora, "scale": 0.0}))
check("a loaded adapter at 0 changes nothing", complete(), cli["1"])
check("the loaded adapter at 0.5 alone", complete([{"id": 2, "scale": 0.5}]), cli["05"])
st, r = call("/lora-adapters/load", {"path": "/nonexistent/adapter.gguf"})
check("loading a missing file: 400", str(st), "400")
st, r = call("/lora-adapters/load", {"path": log + "/cli_1"})
check("loading a text file: 400 invalid_adapter", f"{st} {r['error']['code']}", "400 invalid_adapter")
st, lst = call("/lora-adapters")
check("3 adapters listed", str(len(lst)), "3")

# unloading while a request uses the adapter: the request holds it (its
# stream is open, so its reference is certain) and finishes with it; new
# requests cannot name it; it is freed when that request is
import http.client
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
conn.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0,
             "stream": True, "lora": [{"id": 2, "scale": 0.5}]}), {"Content-Type": "application/json"})
resp = conn.getresponse()
first = resp.readline()
st, r = call("/lora-adapters/unload", {"id": 2})
# in_use is 1 while the request generates; a loaded machine may have it
# finish generating before the unload arrives (its text is checked below)
check("unload adapter 2 while a stream uses it", json.dumps({**r, "in_use": min(r.get("in_use", -1), 1)}),
      json.dumps({"id": 2, "unloaded": True, "in_use": 1 if r.get("in_use") == 1 else 0}))
st, r = call("/v1/completions", {"prompt": prompt, "max_tokens": 4, "lora": [{"id": 2, "scale": 1}]})
check("a request naming the unloaded adapter: 400", f"{st} {'was unloaded' in r['error']['message']}", "400 True")
st, r = call("/lora-adapters", [{"id": 2, "scale": 1}])
check("global scales naming it: 400", str(st), "400")
st, lst = call("/lora-adapters")
check("the unloaded adapter is not listed", json.dumps([e["id"] for e in lst]), "[0, 1]")
text = ""
for line in [first] + resp.read().splitlines():
    line = line.decode().strip()
    if line.startswith("data: {"):
        text += json.loads(line[6:])["choices"][0]["text"]
conn.close()
check("the stream in flight finished with the adapter at 0.5", text, cli["05"])
check("after it: a request without adapters", complete([]), cli["none"])
st, r = call("/lora-adapters/unload", {"id": 2})
check("unload it again: 404", str(st), "404")
st, r = call("/lora-adapters/unload", {"id": 9})
check("unload an unknown id: 404", str(st), "404")
st, r = call("/lora-adapters/unload", {"id": "0"})
check("unload with a string id: 400", str(st), "400")
st, r = call("/lora-adapters/unload", {"id": 1})
check("unload an idle adapter", json.dumps(r), json.dumps({"id": 1, "unloaded": True, "in_use": 0}))
st, r = call("/lora-adapters/load", {"path": lora, "scale": 0})
check("a load after unloads takes the next id", str(r.get("id")), "3")
check("adapter 0 still applies", complete([{"id": 0, "scale": 0.5}]), cli["05"])
sys.exit(bad)
PY
# without --lora-admin nothing is loaded at run time
P2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve -m "$MODEL" --port "$P2" -c 64 --parallel 1 --quiet 2>"$LOG/s2" & S2=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$P2/health" >/dev/null 2>&1 && break
    python3 -c 'import time; time.sleep(0.1)'
done
code=$(curl -s -o "$LOG/r2" -w '%{http_code}' "http://127.0.0.1:$P2/lora-adapters/load" -d "{\"path\": \"$LORA\"}")
list=$(curl -s "http://127.0.0.1:$P2/lora-adapters")
ucode=$(curl -s -o "$LOG/r3" -w '%{http_code}' "http://127.0.0.1:$P2/lora-adapters/unload" -d '{"id": 0}')
kill $S2 2>/dev/null
wait $S2 2>/dev/null
[ "$code" = 403 ] && [ "$ucode" = 403 ] && [ "$list" = "[]" ] ||
    { echo "FAIL: no --lora-admin: load $code, unload $ucode, list $list"; fail=1; }
kill $S 2>/dev/null
wait $S 2>/dev/null
[ $fail = 0 ] || { cat "$LOG/s"; exit 1; }
echo "test_server_lora: ok"
