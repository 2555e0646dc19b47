#!/usr/bin/env bash
# `candle serve -m WHISPER_DIR` answers /v1/audio/transcriptions and
# /v1/audio/translations as OpenAI's API does, on Whisper tiny.en
# (scripts/fetch-whisper.sh) and jfk.wav: every response_format against
# `candle transcribe` on the same file (json/text: its text; srt, vtt: its
# bytes; verbose_json: its segments), the 413s (Content-Length over the limit
# before any body is sent; a file over --max-audio-bytes before decoding),
# malformed multipart bodies and bad fields (400 in OpenAI's error shape), uploads at once
# over --parallel + --queue (429),
# the API key, concurrent requests, the generation endpoints refused (and
# the audio ones on a language model), metrics; and the official openai
# client's audio.transcriptions/translations.create when it is installed.
# The prompt field and timestamp_granularities[]=word against faster-whisper's
# beam-5 runs (whisper_words_goldens.json, gen_whisper_words_goldens.py):
# the prompted tokens identical, verbose_json's top-level words with the same
# texts and times within 0.02 s (as test_whisper_words); word granularity
# outside verbose_json is a 400, as OpenAI's.
# The sanitizer run (CANDLE_TEST_SANITIZED=1) transcribes once per code path:
# no text/vtt against the CLI, two uploads at once, one call of the client.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL="${CANDLE_DATA_CACHE:-$SRC/build-data}/models/whisper-tiny-en"
WAV="$SRC/tests/data/audio/jfk.wav"
[ -r "$WAV" ] || WAV="${CANDLE_SHARED_DIR:-$SRC/../shared}/data/audio/jfk.wav"
[ -r "$MODEL/model.bin" ] || { echo "SKIP: $MODEL absent (scripts/fetch-whisper.sh)"; exit 77; }
[ -r "$WAV" ] || { echo "SKIP: jfk.wav absent"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
# the official client's part: installed when pip can, else that part is skipped
. "$SRC/tests/common/openai.sh"
(need_openai) >/dev/null
TMPD=$(mktemp -d)
LOG=$TMPD/log
S= SL=
trap 'kill $S $SL 2>/dev/null; rm -rf "$TMPD"' EXIT
# The CLI's output on the same file, the reference of every format.
SAN=${CANDLE_TEST_SANITIZED:-0}
fmts="json srt vtt"
[ "$SAN" = 1 ] && { fmts="json srt"; echo "sanitizer run: a subset of the transcriptions"; }
for f in $fmts; do
    if ! "$BIN" transcribe -m "$MODEL" -f "$WAV" -t 1 -o $f >"$TMPD/cli.$f" 2>"$TMPD/cli.err"; then
        if grep -qi "libsndfile\|libsoxr" "$TMPD/cli.err"; then echo "SKIP: $(cat "$TMPD/cli.err")"; exit 77; fi
        echo "FAIL: candle transcribe -o $f: $(cat "$TMPD/cli.err")"
        exit 1
    fi
done
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(port)
"$BIN" serve -m "$MODEL" --port "$PORT" -t 1 --parallel 2 --queue 4 --api-key sekret --max-audio-bytes 400000 \
    2>"$LOG" & S=$!
# a language model, whose audio endpoints are a 400
LPORT=$(port)
LM="$SRC/tests/data/tiny/qwen2.gguf"
"$BIN" serve -m "$LM" --port "$LPORT" 2>>"$LOG" & SL=$!
for p in "$PORT" "$LPORT"; do
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
done
SAN=$SAN python3 - "$PORT" "$LPORT" "$WAV" "$TMPD" "$SRC/tests/data/whisper/whisper_words_goldens.json" <<'PY'
import concurrent.futures, json, os, socket, sys, urllib.error, urllib.request

port, lport, wav, tmpd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
wgold = json.load(open(sys.argv[5]))
san = os.environ.get("SAN") == "1"
audio = open(wav, "rb").read()
cli = json.load(open(f"{tmpd}/cli.json"))
cli_srt = open(f"{tmpd}/cli.srt").read()
cli_vtt = None if san else open(f"{tmpd}/cli.vtt").read()
fails = []
KEY = {"Authorization": "Bearer sekret"}

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)

def form(fields, boundary="b0undary"):
    """fields: [(name, value bytes/str, filename or None)] as RFC 7578 writes them."""
    out = b""
    for name, value, fn in fields:
        value = value.encode() if isinstance(value, str) else value
        disp = f'form-data; name="{name}"' + (f'; filename="{fn}"' if fn else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode()
        if fn:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()

def post(body, ctype="multipart/form-data; boundary=b0undary", url="/v1/audio/transcriptions", p=None,
         headers=KEY, method="POST"):
    h = dict(headers)
    if ctype:
        h["Content-Type"] = ctype
    req = urllib.request.Request(f"http://127.0.0.1:{p or port}{url}", data=body, headers=h, method=method)
    try:
        r = urllib.request.urlopen(req, timeout=600 if san else 120)
        return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()

def error_shape(status, body, want_status, code=None, what=""):
    ok = status == want_status
    try:
        e = json.loads(body)["error"]
        ok = ok and isinstance(e["message"], str) and e["type"] and (code is None or e.get("code") == code)
    except Exception:
        ok = False
    check(ok, f"{what}: want {want_status} {code}, got {status} {body[:200]}")

def fields(fmt=None, extra=()):
    f = [("file", audio, "jfk.wav"), ("model", "whisper-1", None)]
    if fmt:
        f.append(("response_format", fmt, None))
    return f + list(extra)

text = cli["text"]
# every response_format against the CLI
st, ct, body = post(form(fields()))
check(st == 200 and ct.startswith("application/json") and json.loads(body)["text"] == text, f"json: {st} {body[:200]}")
if not san:  # the text reply is checked after the held uploads
    st, ct, body = post(form(fields("text")))
    check(st == 200 and ct.startswith("text/plain") and body == text + "\n", f"text: {st} {body!r}")
st, ct, body = post(form(fields("srt")))
check(st == 200 and body == cli_srt, f"srt: {st} {body!r} vs {cli_srt!r}")
st, ct, body = post(form(fields("vtt")))
check(st == 200 and ct.startswith("text/vtt") and (body == cli_vtt if cli_vtt else body.startswith("WEBVTT\n")),
      f"vtt: {st} {body!r} vs {cli_vtt!r}")
st, ct, body = post(form(fields("verbose_json", [("timestamp_granularities[]", "segment", None)])))
v = json.loads(body) if st == 200 else {}
check(st == 200 and v.get("task") == "transcribe" and v.get("language") == "english" and v.get("text") == text
      and abs(v.get("duration", 0) - 11.0) < 0.01, f"verbose_json: {st} {body[:300]}")
segs = v.get("segments", [])
check(len(segs) == len(cli["segments"]) and all(
    a["id"] == b["id"] and a["seek"] == b["seek"] and abs(a["start"] - b["start"]) < 1e-6 and
    abs(a["end"] - b["end"]) < 1e-6 and a["text"] == b["text"] and a["tokens"] == b["tokens"] and
    a["temperature"] == b["temperature"] and abs(a["avg_logprob"] - b["avg_logprob"]) < 1e-5 and
    abs(a["compression_ratio"] - b["compression_ratio"]) < 1e-5 and
    abs(a["no_speech_prob"] - b["no_speech_prob"]) < 1e-5 for a, b in zip(segs, cli["segments"])),
      f"verbose_json segments {segs} vs {cli['segments']}")
st, ct, body = post(form(fields("verbose_json")), url="/v1/audio/translations")
check(st == 200 and json.loads(body).get("task") == "translate" and json.loads(body)["text"] == text,
      f"translations: {st} {body[:200]}")
if not san:
    st, ct, body = post(form(fields(extra=[("language", "en", None), ("temperature", "0", None), ("prompt", "", None)])))
    check(st == 200 and json.loads(body)["text"] == text, f"language en, temperature 0: {st} {body[:200]}")

# the prompt and word timestamps, against faster-whisper's beam-5 runs on tiny.en
PROMPT = wgold["prompt"]
def golden(prompt, words):
    for g in wgold["runs"]:
        if (g["model"], g["clip"], g["beam_size"], g["condition_on_previous_text"]) == ("tiny.en", "jfk", 5, True) \
                and g["initial_prompt"] == prompt and g["word_timestamps"] == words:
            return g
    raise KeyError((prompt, words))

def same_words(got, g, what):
    want = [w for s in g["segments"] for w in s["words"]]
    check(len(got) == len(want) and all(
        set(a) == {"word", "start", "end"} and a["word"] == b[2] and abs(a["start"] - b[0]) <= 0.0201 and
        abs(a["end"] - b[1]) <= 0.0201 for a, b in zip(got, want)), f"{what}: words {got} vs {want}")

def gtext(g):
    return "".join(s["text"] for s in g["segments"]).strip()

g_prompt, g_words, g_both = golden(PROMPT, False), golden(None, True), golden(PROMPT, True)
st, ct, body = post(form(fields("verbose_json", [("prompt", PROMPT, None)])))
v = json.loads(body) if st == 200 else {}
check(st == 200 and [s["tokens"] for s in v.get("segments", [])] == [s["tokens"] for s in g_prompt["segments"]]
      and "words" not in v, f"prompt: {st} {body[:300]}")
if not san:
    st, ct, body = post(form(fields("verbose_json", [("timestamp_granularities[]", "word", None)])))
    v = json.loads(body) if st == 200 else {}
    check(st == 200 and "segments" not in v and v.get("text") == gtext(g_words), f"word granularity: {st} {body[:300]}")
    same_words(v.get("words", []), g_words, "word granularity")
# both granularities: the segments (at their words' times) and the words
st, ct, body = post(form(fields("verbose_json", [("timestamp_granularities[]", "segment", None),
                                                 ("timestamp_granularities[]", "word", None),
                                                 ("prompt", PROMPT, None)])))
v = json.loads(body) if st == 200 else {}
check(st == 200 and [s["tokens"] for s in v.get("segments", [])] == [s["tokens"] for s in g_both["segments"]],
      f"word and segment granularity, prompt: {st} {body[:300]}")
same_words(v.get("words", []), g_both, "word and segment granularity, prompt")

# concurrent requests (--parallel 2, a third waits): the same text each
n_at_once = 2 if san else 3
with concurrent.futures.ThreadPoolExecutor(n_at_once) as ex:
    rs = list(ex.map(lambda _: post(form(fields("text"))), range(n_at_once)))
check(all(r[0] == 200 and r[2] == text + "\n" for r in rs), f"concurrent: {[r[:2] for r in rs]}")

def headers_only(length, keep=False):
    """Send a request's headers, no body; the reply's head, or (keep) the open
    socket once the server said 100 Continue: admitted, waiting for the body."""
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
              b"Content-Type: multipart/form-data; boundary=b0undary\r\nContent-Length: %d\r\n%s\r\n" %
              (length, b"Expect: 100-continue\r\n" if keep else b""))
    resp = b""
    try:
        while b"\r\n\r\n" not in resp:
            chunk = s.recv(4096)
            if not chunk:
                break
            resp += chunk
    except socket.timeout:
        pass
    if keep:
        if resp.startswith(b"HTTP/1.1 100"):
            return s
        s.close()
        return None
    s.close()
    return resp

# 413: Content-Length over the limit, refused before any body is sent
resp = headers_only(2000000)
check(resp.startswith(b"HTTP/1.1 413"), f"Content-Length over the limit: {resp[:100]!r}")
# uploads in progress: at most --parallel + --queue (6); the 7th is a 429 on its headers
import time
held = []
for _ in range(50):  # the last replies' connections may take a moment to end
    h = headers_only(1000, keep=True)
    if h:
        held.append(h)
        if len(held) == 6:
            break
    else:
        time.sleep(0.1)
check(len(held) == 6, f"{len(held)} uploads held at once, not 6: a place not given back?")
resp = headers_only(1000)
check(resp.startswith(b"HTTP/1.1 429"), f"a 7th upload at once: {resp[:100]!r}")
for h in held:
    h.close()
for _ in range(50):  # the server sees the closed uploads go
    st, ct, body = post(form(fields("text")))
    if st != 429:
        break
    time.sleep(0.1)
check(st == 200 and body == text + "\n", f"after the held uploads left: {st} {body[:100]}")
# a file over --max-audio-bytes (400000) whose body passes: 413 before decoding (it is no audio)
st, ct, body = post(form([("file", os.urandom(400001), "big.wav")]))
error_shape(st, body, 413, "file_too_large", "file over the limit")
st, ct, body = post(form([("file", os.urandom(400000), "noise.wav")]))
error_shape(st, body, 400, "invalid_audio", "not audio, at the limit")

# malformed bodies and bad fields: 400 in OpenAI's error shape
good = form(fields())
bad = [
    ("no Content-Type", good, None, "invalid_multipart"),
    ("JSON Content-Type", good, "application/json", "invalid_multipart"),
    ("no boundary", good, "multipart/form-data", "invalid_multipart"),
    ("boundary too long", good, "multipart/form-data; boundary=" + "x" * 71, "invalid_multipart"),
    ("another boundary", good, "multipart/form-data; boundary=other", "invalid_multipart"),
    ("unterminated quoted boundary", good, 'multipart/form-data; boundary="b0undary', "invalid_multipart"),
    ("truncated", good[: len(good) // 2], None, "invalid_multipart"),
    ("no close delimiter", good[: -len(b"--b0undary--\r\n")], None, "invalid_multipart"),
    ("bare LF", good.replace(b"\r\n", b"\n"), None, "invalid_multipart"),
    ("no Content-Disposition", b"--b0undary\r\nContent-Type: text/plain\r\n\r\nx\r\n--b0undary--\r\n", None,
     "invalid_multipart"),
    ("no name", b'--b0undary\r\nContent-Disposition: form-data; filename="a.wav"\r\n\r\nx\r\n--b0undary--\r\n',
     None, "invalid_multipart"),
    ("not form-data", b'--b0undary\r\nContent-Disposition: attachment; name="file"\r\n\r\nx\r\n--b0undary--\r\n',
     None, "invalid_multipart"),
    ("unterminated name", b'--b0undary\r\nContent-Disposition: form-data; name="file\r\n\r\nx\r\n--b0undary--\r\n',
     None, "invalid_multipart"),
    ("headers never end", b'--b0undary\r\nContent-Disposition: form-data; name="file"\r\n' + b"X: y\r\n" * 2000,
     None, "invalid_multipart"),
    ("duplicate field", form(fields() + [("model", "again", None)]), None, "invalid_multipart"),
    ("too many parts", form(fields() + [(f"x{i}[]", "1", None) for i in range(40)]), None, "invalid_multipart"),
    ("no file", form([("model", "whisper-1", None)]), None, "invalid_value"),
    ("empty file", form([("file", b"", "a.wav")]), None, "invalid_value"),
    ("not audio", form([("file", b"RIFF but not really a wave file", "a.wav")]), None, "invalid_audio"),
    ("unknown field", form(fields(extra=[("beam", "5", None)])), None, "unsupported_parameter"),
    ("response_format", form(fields("mp3")), None, "invalid_value"),
    ("temperature 2", form(fields(extra=[("temperature", "2", None)])), None, "invalid_value"),
    ("temperature x", form(fields(extra=[("temperature", "x", None)])), None, "invalid_value"),
    ("language fr", form(fields(extra=[("language", "fr", None)])), None, "unsupported_language"),
    ("word timestamps in json", form(fields(extra=[("timestamp_granularities[]", "word", None)])), None,
     "invalid_value"),
    ("word timestamps in srt", form(fields("srt", [("timestamp_granularities[]", "word", None)])), None,
     "invalid_value"),
    ("timestamp_granularities char", form(fields("verbose_json", [("timestamp_granularities[]", "char", None)])),
     None, "invalid_value"),
    ("prompt with a NUL", form(fields(extra=[("prompt", "Ken\0nedy", None)])), None, "invalid_value"),
    ("stream", form(fields(extra=[("stream", "true", None)])), None, "unsupported_parameter"),
]
for what, body, ctype, code in bad:
    st, ct, b = post(body, ctype=ctype if ctype or what == "no Content-Type" else
                     "multipart/form-data; boundary=b0undary")
    error_shape(st, b, 400, code, what)
# a quoted boundary, a preamble and an epilogue are RFC 2046's, and pass
st, ct, body = post(b"preamble\r\n" + form(fields(), "a b'c") + b"epilogue",
                    ctype='multipart/form-data; boundary="a b\'c"; charset=utf-8')
check(st == 200 and json.loads(body)["text"] == text, f"quoted boundary, preamble: {st} {body[:200]}")

# the API key
st, ct, body = post(good, headers={})
error_shape(st, body, 401, "invalid_api_key", "no key")
st, ct, body = post(good, headers={"Authorization": "Bearer wrong"})
error_shape(st, body, 401, "invalid_api_key", "wrong key")
# other methods and endpoints
st, ct, body = post(None, ctype=None, method="GET")
error_shape(st, body, 405, None, "GET transcriptions")
st, ct, body = post(b'{"messages": [{"role": "user", "content": "hi"}]}', ctype="application/json",
                    url="/v1/chat/completions")
error_shape(st, body, 400, "model_not_supported", "chat on whisper")
st, ct, body = post(b'{"input": "hi"}', ctype="application/json", url="/v1/embeddings")
error_shape(st, body, 400, "model_not_supported", "embeddings on whisper")
st, ct, body = post(None, ctype=None, url="/v1/models", method="GET")
check(st == 200 and json.loads(body)["data"][0]["meta"]["arch"] == "whisper", f"models: {st} {body}")
st, ct, body = post(good, p=lport, headers={})
error_shape(st, body, 400, "model_not_supported", "audio on a language model")
st, ct, body = post(None, ctype=None, url="/metrics", method="GET")
check('candle_requests_total{endpoint="audio",status="200"}' in body and
      'candle_requests_total{endpoint="audio",status="413"}' in body, "metrics: no audio counts")

# the official client
try:
    import openai
except ImportError:
    openai = None
    print("SKIP (part): the openai package is not installed")
if openai:
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sekret", max_retries=0,
                      timeout=600 if san else 120)
    with open(wav, "rb") as f:
        r = c.audio.transcriptions.create(model="whisper-1", file=f)
    check(r.text == text, f"openai json: {r.text!r}")
if openai and not san:
    with open(wav, "rb") as f:
        r = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json",
                                          timestamp_granularities=["segment"])
    check(r.text == text and len(r.segments) == len(cli["segments"]) and r.segments[0].end == cli["segments"][0]["end"],
          f"openai verbose_json: {r}")
    with open(wav, "rb") as f:
        r = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    check(r == cli_srt, f"openai srt: {r!r}")
    with open(wav, "rb") as f:
        r = c.audio.translations.create(model="whisper-1", file=f)
    check(r.text == text, f"openai translations: {r.text!r}")
if openai:
    with open(wav, "rb") as f:
        r = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json",
                                          timestamp_granularities=["word"], prompt=PROMPT)
    want = gtext(g_both)
    check(r.text == want and r.words, f"openai word timestamps with a prompt: {r.text!r} vs {want!r}")
    same_words([w.model_dump() for w in (r.words or [])], g_both, "openai word timestamps with a prompt")
    try:
        with open(wav, "rb") as f:
            c.audio.transcriptions.create(model="whisper-1", file=f, response_format="json",
                                          timestamp_granularities=["word"])
        check(False, "openai word timestamps in json accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400, f"openai word timestamps in json: {e}")
print("test_server_transcribe:", "FAILED" if fails else "passed")
sys.exit(1 if fails else 0)
PY
rc=$?
# shutdown: SIGTERM stops the server cleanly
kill -TERM $S
for _ in $(seq 100); do kill -0 $S 2>/dev/null || break; python3 -c 'import time; time.sleep(0.1)'; done
if kill -0 $S 2>/dev/null; then echo "FAIL: the server did not stop on SIGTERM"; rc=1; fi
grep -q "candle serve: stopped" "$LOG" || { echo "FAIL: no clean stop: $(tail -3 "$LOG")"; rc=1; }
[ $rc -ne 0 ] && cat "$LOG"
exit $rc
