#!/usr/bin/env bash
# Several models in one `candle serve` (issue 21, part 6): routing by the
# request's model (completions from each decoder, embeddings to the encoder,
# 404 model_not_found for an unknown name, 400 for an endpoint a model does
# not serve), /v1/models and /v1/models/{id} with each model's status before
# and after its first use, a failed load (500, status.failed), concurrent
# first requests sharing one load, LRU unloading with --models-max 1 (use a,
# use b: a shows unloaded; a again works) and 503 while the only loaded model
# is in use, POST /models/load and /models/unload, --mem-budget, --models-dir, /metrics' model gauges,
# its encoder batch histograms (summed over the models, kept across an
# unload), and one -m still answering whatever a request names. Two names for the tiny
# stories260K are the two decoders (SmolLM2-135M joins, chatting, where
# models/ holds it); bert-tiny (tests/data/encoders) is the encoder.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
STORIES=${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf
SMOL=$SRC/models/SmolLM2-135M-Instruct.Q4_1.gguf
ENC=$SRC/tests/data/encoders/bert-tiny
# a speech model joins server 1 where the data cache holds one
WHISPER="${CANDLE_DATA_CACHE:-$SRC/build-data}/models/whisper-tiny-en"
WAV="$SRC/tests/data/audio/jfk.wav"
[ -r "$WAV" ] || WAV="${CANDLE_SHARED_DIR:-$SRC/../shared}/data/audio/jfk.wav"
[ -f "$STORIES" ] || { echo "SKIP: $STORIES absent"; exit 77; }
[ -d "$ENC" ] || { echo "FAIL: $ENC absent"; exit 1; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
TMPD=$(mktemp -d)
S1= S2= S3= S4=
trap 'kill $S1 $S2 $S3 $S4 2>/dev/null; wait 2>/dev/null; rm -rf "$TMPD"' EXIT
# a folder of models: two names for stories260K, the encoder, and a file
# that is no model (left out of the dir server: its load would fail)
mkdir "$TMPD/dir"
ln -s "$STORIES" "$TMPD/dir/a.gguf"
ln -s "$STORIES" "$TMPD/dir/b.gguf"
ln -s "$ENC" "$TMPD/dir/bert-tiny"
touch "$TMPD/dir/notes.txt"
printf 'GGUF-but-not-really' >"$TMPD/bogus.gguf"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(free_port) P2=$(free_port) P3=$(free_port) P4=$(free_port)
EXTRA=()
[ -f "$SMOL" ] && EXTRA=(-m "$SMOL:smol")
HAVE_WHISPER=
[ -r "$WHISPER/model.bin" ] && [ -r "$WAV" ] && HAVE_WHISPER=1 && EXTRA+=(-m "$WHISPER")
# 1: decoder + decoder (+ SmolLM2) + encoder + a bad file, no limits
"$BIN" serve -m "$TMPD/dir/a.gguf" -m "$TMPD/dir/b.gguf:story-b" "${EXTRA[@]}" -m "$ENC" -m "$TMPD/bogus.gguf" \
    --port "$P1" -c 512 2>"$TMPD/s1.log" & S1=$!
# 2: --models-dir with at most one model loaded
# (its full 2048 context: the stream that holds a model below lasts)
"$BIN" serve --models-dir "$TMPD/dir" --models-max 1 --port "$P2" 2>"$TMPD/s2.log" & S2=$!
# 4: one -m, as before: any model name is this one
"$BIN" serve -m "$STORIES" --port "$P4" -c 512 2>"$TMPD/s4.log" & S4=$!
for p in "$P1" "$P2" "$P4"; do
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
done
PYTHONPATH="$SRC/tests/common" python3 - "$P1" "$P2" "$P4" "$BIN" "$TMPD" "$([ -f "$SMOL" ] && echo 1)" "$HAVE_WHISPER" "$WAV" <<'PY'
import json, os, socket, subprocess, sys, threading, time, urllib.error, urllib.request
from srv_client import encoder_batch_delta

p1, p2, p4, binary, tmpd, have_smol = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6] == "1"
have_whisper, wav = sys.argv[7] == "1", sys.argv[8]
fails = []
checks = 0

def check(cond, what):
    global checks
    checks += 1
    if not cond:
        fails.append(what)
        print("FAIL:", what, flush=True)

def call(port, path, body=None, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if path != "/metrics" else raw.decode())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode()

def states(port):
    st, j = call(port, "/v1/models")
    check(st == 200 and j.get("object") == "list", f"{port}: /v1/models {st} {j}")
    for m in j.get("data", []):
        check(m.get("object") == "model" and m.get("owned_by") == "candle" and isinstance(m.get("created"), int),
              f"{port}: model entry shape {m}")
    return {m["id"]: m["status"]["value"] for m in j.get("data", [])}

def complete(port, model, prompt="Once upon a time", n=8, **kw):
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0, **kw}
    if model is not None:
        body["model"] = model
    return call(port, "/v1/completions", body)

def embed_batches(port, inputs, requests):
    """/metrics' embed batches since the start, summed over the models
    (those unloaded too): as many as requests, each one batch, and inputs
    in them."""
    _, d, bad = encoder_batch_delta(port, None, "embed")
    check(not bad and d["tokens"]["count"] == requests and d["requests"]["sum"] == requests and
          d["inputs"]["sum"] == inputs, f"embed batches on {port}, want {requests} of {inputs} inputs: {bad or d}")

def metric(port, name):
    st, text = call(port, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None

# --- server 1: routing ------------------------------------------------------
want_ids = (["a", "story-b"] + (["smol"] if have_smol else []) + (["whisper-tiny-en"] if have_whisper else [])
            + ["bert-tiny", "bogus"])
s = states(p1)
check(list(s) == want_ids, f"ids {list(s)} != {want_ids}")
check(all(v == "unloaded" for v in s.values()), f"before any request, all unloaded: {s}")
st, j = call(p1, "/v1/models/story-b")
check(st == 200 and j["id"] == "story-b" and j["status"]["value"] == "unloaded" and "meta" not in j,
      f"/v1/models/story-b before use: {st} {j}")

# no model: the first -m; each named model answers as itself (same weights: same text)
st, ja = complete(p1, None)
check(st == 200 and ja["model"] == "a", f"default model: {st} {ja}")
st, jb = complete(p1, "story-b")
check(st == 200 and jb["model"] == "story-b", f"story-b: {st} {jb}")
check(st == 200 and ja["choices"][0]["text"] == jb["choices"][0]["text"], "a and story-b (one file) agree")
st, j = complete(p1, "a.gguf")
check(st == 200 and j["model"] == "a", f"the file's name also names it: {st} {j}")
if have_smol:
    st, j = call(p1, "/v1/chat/completions", {"model": "smol", "max_tokens": 8, "temperature": 0,
                                              "messages": [{"role": "user", "content": "Say hi"}]})
    check(st == 200 and j["model"] == "smol" and j["choices"][0]["message"]["content"], f"smol chat: {st} {j}")
# a stream names its model in every chunk
req = urllib.request.Request(f"http://127.0.0.1:{p1}/v1/completions", headers={"Content-Type": "application/json"},
                             data=json.dumps({"model": "story-b", "prompt": "Once", "max_tokens": 6,
                                              "stream": True}).encode())
chunks = [json.loads(l[6:]) for l in urllib.request.urlopen(req, timeout=60).read().decode().splitlines()
          if l.startswith("data: {")]
check(chunks and all(c["model"] == "story-b" for c in chunks), f"stream chunks' model: {chunks[:2]}")

# the encoder: embeddings routed to it; each kind refuses the other's endpoint
st, j = call(p1, "/v1/embeddings", {"model": "bert-tiny", "input": ["hello world", "two"]})
dim = call(p1, "/v1/models/bert-tiny")[1].get("meta", {}).get("dimensions")
embed_batches(p1, 2, 1)
check(st == 200 and j["model"] == "bert-tiny" and len(j["data"]) == 2 and dim and len(j["data"][0]["embedding"]) == dim,
      f"embeddings on bert-tiny ({dim} dimensions): {st} {str(j)[:200]}")
st, j = call(p1, "/v1/embeddings", {"model": "a", "input": "hello"})
check(st == 400 and j["error"]["code"] == "model_not_supported", f"embeddings on a decoder: {st} {j}")
st, j = complete(p1, "bert-tiny")
check(st == 400 and j["error"]["code"] == "model_not_supported", f"completion on the encoder: {st} {j}")

# speech: the form's model picks the Whisper model
def transcribe(model):
    b = "----candle-test-boundary"
    parts = [f'--{b}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{model}\r\n'.encode(),
             f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="jfk.wav"\r\n'
             f'Content-Type: audio/wav\r\n\r\n'.encode() + open(wav, "rb").read() + b"\r\n",
             f"--{b}--\r\n".encode()]
    req = urllib.request.Request(f"http://127.0.0.1:{p1}/v1/audio/transcriptions", data=b"".join(parts),
                                 headers={"Content-Type": f"multipart/form-data; boundary={b}"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
if have_whisper:
    st, j = transcribe("whisper-tiny-en")
    check(st == 200 and "country" in j.get("text", ""), f"transcription on whisper-tiny-en: {st} {j}")
    st, j = transcribe("a")
    check(st == 400 and j["error"]["code"] == "model_not_supported", f"transcription on a decoder: {st} {j}")
    st, j = transcribe("gpt-17")
    check(st == 404 and j["error"]["code"] == "model_not_found", f"transcription, unknown model: {st} {j}")
    st, j = complete(p1, "whisper-tiny-en")
    check(st == 400 and j["error"]["code"] == "model_not_supported", f"completion on whisper: {st} {j}")

# unknown: 404 in OpenAI's shape
for path, body in (("/v1/completions", {"model": "gpt-17", "prompt": "x"}),
                   ("/v1/embeddings", {"model": "gpt-17", "input": "x"}),
                   ("/v1/chat/completions", {"model": "gpt-17", "messages": [{"role": "user", "content": "x"}]})):
    st, j = call(p1, path, body)
    check(st == 404 and j == {"error": {"message": "The model 'gpt-17' does not exist", "type": "invalid_request_error",
                                        "param": "model", "code": "model_not_found"}}, f"{path} unknown model: {st} {j}")
st, j = call(p1, "/v1/models/gpt-17")
check(st == 404 and j["error"]["code"] == "model_not_found", f"/v1/models/gpt-17: {st} {j}")
st, j = complete(p1, 42)
check(st == 400 and j["error"]["param"] == "model", f"a non-string model: {st} {j}")

# a file that is no model: 500 with the reason, recorded in its status
st, j = complete(p1, "bogus")
check(st == 500 and j["error"]["code"] == "model_load_failed" and "bogus" in j["error"]["message"],
      f"bogus load: {st} {j}")
st, j = call(p1, "/v1/models/bogus")
check(st == 200 and j["status"]["value"] == "unloaded" and j["status"].get("failed") is True and j["status"].get("error"),
      f"bogus status: {j}")

s = states(p1)
loaded = [i for i in want_ids if i != "bogus"]
check(all(s[i] == "loaded" for i in loaded), f"after use, loaded: {s}")
st, j = call(p1, "/v1/models/a")
check(j["status"]["value"] == "loaded" and j["meta"]["n_vocab"] == 512 and j["meta"]["n_ctx"] == 512
      and j["meta"]["bytes"] > 0, f"/v1/models/a after use: {j}")
bytes_a = j["meta"]["bytes"]
check(metric(p1, "candle_models_loaded") == len(loaded), "candle_models_loaded")
check(metric(p1, "candle_model_loads_total") == len(loaded), "candle_model_loads_total")
check(metric(p1, "candle_model_load_failures_total") == 1, "candle_model_load_failures_total")
check(metric(p1, "candle_model_unloads_total") == 0, "no unloads without limits")
check(metric(p1, 'candle_model_loaded{model="bert-tiny"}') == 1, "per-model gauge")
check(metric(p1, "candle_generated_tokens_total") >= 8 * 3, "the schedulers' counters are summed")

# --- server 2: --models-dir and --models-max 1 -------------------------------
s = states(p2)
check(list(s) == ["a", "b", "bert-tiny"] and all(v == "unloaded" for v in s.values()),
      f"--models-dir: {s} (notes.txt left out, name order)")
st, j = complete(p2, "a")
check(st == 200, f"dir a: {st} {j}")
check(states(p2) == {"a": "loaded", "b": "unloaded", "bert-tiny": "unloaded"}, f"after a: {states(p2)}")
st, j = complete(p2, "b")
check(st == 200 and j["model"] == "b", f"dir b: {st} {j}")
check(states(p2) == {"a": "unloaded", "b": "loaded", "bert-tiny": "unloaded"}, f"after b, a unloaded: {states(p2)}")
st, j2 = complete(p2, "a")
check(st == 200 and j2["choices"][0]["text"] == ja["choices"][0]["text"], f"a again: {st} {j2}")
check(states(p2)["a"] == "loaded" and states(p2)["b"] == "unloaded", f"after a again: {states(p2)}")
st, j = call(p2, "/v1/embeddings", {"model": "bert-tiny", "input": "hello"})
check(st == 200 and states(p2) == {"a": "unloaded", "b": "unloaded", "bert-tiny": "loaded"}, f"encoder in: {states(p2)}")
embed_batches(p2, 1, 1)
check(metric(p2, "candle_model_loads_total") == 4 and metric(p2, "candle_model_unloads_total") == 3
      and metric(p2, "candle_models_loaded") == 1, "dir server's load/unload counters")

# while a stream holds a, b cannot load (the only place is in use): 503.
# The stream is long (4 choices of 2000 tokens with logprobs, megabytes of
# events) and its client reads one piece of it, so it lasts.
st, j = complete(p2, "a", n=1)
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
sock.connect(("127.0.0.1", int(p2)))
body = json.dumps({"model": "a", "prompt": "Once", "max_tokens": 2000, "stream": True, "ignore_eos": True,
                   "temperature": 1.0, "n": 4, "logprobs": 5}).encode()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
             + str(len(body)).encode() + b"\r\n\r\n" + body)
sock.recv(64)  # the stream has begun
st, j = complete(p2, "b", n=1)
check(st == 503 and j["error"]["code"] == "model_busy" and "--models-max 1" in j["error"]["message"],
      f"b while a streams: {st} {j}")
sock.close()
ok = False
for _ in range(100):  # the stream's end lets go of a
    st, j = complete(p2, "b", n=1)
    if st == 200:
        ok = True
        break
    time.sleep(0.1)
check(ok, f"b once a's stream is gone: {st} {j}")

# concurrent first requests for an unloaded model share one load
res = []
def hit():
    res.append(complete(p2, "a", n=4)[0])
ts = [threading.Thread(target=hit) for _ in range(4)]
loads = metric(p2, "candle_model_loads_total")
for t in ts: t.start()
for t in ts: t.join()
check(res == [200] * 4, f"4 concurrent first requests: {res}")
check(metric(p2, "candle_model_loads_total") == loads + 1, "they shared one load")

# llama-server's POST /models/load and /models/unload
st, j = call(p2, "/models/load", {"model": "b"})
check(st == 200 and j == {"success": True} and states(p2) == {"a": "unloaded", "b": "loaded", "bert-tiny": "unloaded"},
      f"/models/load b: {st} {j} {states(p2)}")
st, j = call(p2, "/models/unload", {"model": "b"})
check(st == 200 and j == {"success": True} and set(states(p2).values()) == {"unloaded"},
      f"/models/unload b: {st} {j} {states(p2)}")
st, j = call(p2, "/models/unload", {"model": "b"})
check(st == 400 and j["error"]["code"] == "model_not_loaded", f"/models/unload of an unloaded model: {st} {j}")
st, j = call(p2, "/models/unload", {"model": "gpt-17"})
check(st == 404 and j["error"]["code"] == "model_not_found", f"/models/unload unknown: {st} {j}")
st, j = call(p2, "/models/load", {})
check(st == 400 and j["error"]["param"] == "model", f"/models/load without a model: {st} {j}")
check(complete(p2, "b")[0] == 200, "b after its unload")
# the encoder's batches outlive its unload, counted once when it loads again
check(states(p2)["bert-tiny"] == "unloaded", f"bert-tiny unloaded: {states(p2)}")
embed_batches(p2, 1, 1)
st, j = call(p2, "/v1/embeddings", {"model": "bert-tiny", "input": ["x", "y"]})
check(st == 200 and states(p2)["bert-tiny"] == "loaded", f"encoder in again: {st} {states(p2)}")
embed_batches(p2, 3, 2)

# --- server 3: --mem-budget room for one of a, b ----------------------------
with socket.socket() as so:
    so.bind(("127.0.0.1", 0))
    p3 = str(so.getsockname()[1])
log3 = open(os.path.join(tmpd, "s3.log"), "w")
s3 = subprocess.Popen([binary, "serve", "--models-dir", os.path.join(tmpd, "dir"), "--port", p3, "-c", "512",
                       "--mem-budget", str(int(bytes_a * 1.5))], stderr=log3)
try:
    for _ in range(100):
        try:
            if call(p3, "/health")[0] == 200: break
        except OSError:
            pass
        time.sleep(0.1)
    check(complete(p3, "a")[0] == 200 and complete(p3, "b")[0] == 200, "budget server a, b")
    s = states(p3)
    check(s["a"] == "unloaded" and s["b"] == "loaded", f"--mem-budget for one: {s}")
    st, j = call(p3, "/v1/embeddings", {"model": "bert-tiny", "input": "x"})
    check(st == 200 and states(p3)["b"] == "loaded", f"the small encoder fits beside b: {st} {states(p3)}")
finally:
    s3.terminate()
    s3.wait(timeout=30)

# tiny budget: nothing fits, 503 with the reason; a -m model inside
# --models-dir keeps its -m name and place (first: the default)
with socket.socket() as so:
    so.bind(("127.0.0.1", 0))
    p5 = str(so.getsockname()[1])
s5 = subprocess.Popen([binary, "serve", "-m", os.path.join(tmpd, "dir", "b.gguf") + ":bee", "--models-dir",
                       os.path.join(tmpd, "dir") + "/", "--port", p5, "--mem-budget", "1K"], stderr=log3)
try:
    for _ in range(100):
        try:
            if call(p5, "/health")[0] == 200: break
        except OSError:
            pass
        time.sleep(0.1)
    check(list(states(p5)) == ["bee", "a", "bert-tiny"], f"-m inside --models-dir: {list(states(p5))}")
    st, j = complete(p5, None)
    check(st == 503 and "--mem-budget" in j["error"]["message"] and "'bee'" in j["error"]["message"],
          f"over the budget: {st} {j}")
finally:
    s5.terminate()
    s5.wait(timeout=30)

# --- server 4: one -m answers whatever a request names ------------------------
s = states(p4)
check(s == {"stories260K": "loaded"}, f"one -m is loaded at startup: {s}")
st, j = complete(p4, "gpt-4o")
check(st == 200 and j["model"] == "stories260K", f"one -m, another name: {st} {j}")
st, j = call(p4, "/v1/models/stories260K")
check(st == 200 and j["status"]["value"] == "loaded", f"one -m: /v1/models/stories260K {j}")

print(f"{checks} checks, {len(fails)} failed")
sys.exit(1 if fails or checks < 40 else 0)
PY
rc=$?
for s in $S1 $S2 $S4; do kill -TERM "$s" 2>/dev/null; done
wait $S1 $S2 $S4 2>/dev/null
for l in s1 s2 s4; do
    grep -q "candle serve: stopped" "$TMPD/$l.log" || { echo "FAIL: $l: no clean stop: $(tail -5 "$TMPD/$l.log")"; rc=1; }
done
grep -q "unloaded a (least recently used)" "$TMPD/s2.log" || { echo "FAIL: no unload logged"; rc=1; }
[ $rc = 0 ] || { echo "--- s1"; tail -20 "$TMPD/s1.log"; echo "--- s2"; tail -20 "$TMPD/s2.log"; }
S1= S2= S4=
exit $rc
