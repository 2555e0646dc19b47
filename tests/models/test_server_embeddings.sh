#!/usr/bin/env bash
# `candle serve -m ENCODER` answers /v1/embeddings as OpenAI's API does,
# checked with the official openai client (its default base64 encoding and
# float) against sentence-transformers' goldens (tests/data/encoders/bert-tiny),
# token-array inputs, dimensions, usage, too-long inputs (400 unless
# "truncate": true), bad inputs, the prompt_name extension, and generation,
# rerank and classify endpoints refused; batching across clients and the
# batches' /metrics histograms (candle_encoder_batch_*); then a decoder embedder
# (qwen3-embedding-tiny: last-token pooling) with and without its prompt.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
ENC=$SRC/tests/data/encoders
# bert-tiny with the prompts of bert-tiny-prompts.json and no default prompt,
# so that requests without prompt_name get bert-tiny's goldens
TMPD=$(mktemp -d)
MODEL=$TMPD/bert-tiny
mkdir "$MODEL" && cp -r "$ENC/bert-tiny"/* "$MODEL/" &&
    python3 -c "import json, sys; c = json.load(open(sys.argv[1]))['config']; c['default_prompt_name'] = None
json.dump(c, open(sys.argv[2], 'w'))" "$ENC/bert-tiny-prompts.json" "$MODEL/config_sentence_transformers.json" ||
    { echo "cannot build $MODEL"; exit 1; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
. "$SRC/tests/common/openai.sh"
need_openai
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
"$BIN" serve -m "$MODEL" --port "$PORT" 2>"$LOG" & S=$!
# a decoder embedder (Qwen3-Embedding's layout, scripts/gen_encoder_qwen3_goldens.py)
QPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve -m "$ENC/qwen3-embedding-tiny" --port "$QPORT" 2>>"$LOG" & SQ=$!
# the same model with a budget of 16 tokens: a request's inputs span batches,
# and an input longer than the budget runs alone
BPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve -m "$MODEL" --port "$BPORT" --max-batch-tokens 16 --quiet 2>>"$LOG" & SB=$!
trap 'kill $S $SQ $SB 2>/dev/null; rm -f "$LOG"; rm -rf "$TMPD"' EXIT
for p in "$PORT" "$QPORT" "$BPORT"; do
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
done
PYTHONPATH="$SRC/tests/common" python3 - "$PORT" "$MODEL/golden.json" "$ENC/bert-tiny-prompts.json" "$QPORT" "$ENC/qwen3-embedding-tiny/golden.json" \
    "$BPORT" <<'PY'
import base64, http.client, json, math, struct, sys, threading, urllib.error, urllib.request
import openai
from srv_client import cumulative, encoder_batch_delta, encoder_batches, histogram_delta, histogram_problems, histograms

port, golden, pgold = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=60)
fails = []

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)

def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        return 200, json.load(urllib.request.urlopen(req, timeout=60))
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

texts = [s for s in golden["sentences"] if s]
want = [e for s, e in zip(golden["sentences"], golden["embeddings"]) if s]
model = client.models.list().data[0].id
def floats(e):  # the client hands base64 back as it came when asked for it explicitly
    if isinstance(e, str):
        raw = base64.b64decode(e)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return e

for fmt in ("base64", "float", None):
    kw = {"encoding_format": fmt} if fmt else {}  # None: the client's default (base64, decoded by it)
    r = client.embeddings.create(model=model, input=texts, **kw)
    got = [floats(d.embedding) for d in sorted(r.data, key=lambda d: d.index)]
    worst = min(cos(a, b) for a, b in zip(got, want))
    check(len(got) == len(want) and worst >= 0.9999, f"{fmt}: worst cosine {worst}")
    check(r.usage.prompt_tokens == sum(len(t) for s, t in zip(golden["sentences"], golden["token_ids"]) if s),
          f"{fmt}: usage {r.usage}")
# token ids in, one string in, dimensions
r = client.embeddings.create(model=model, input=[golden["token_ids"][0]], encoding_format="float")
check(cos(r.data[0].embedding, golden["embeddings"][0]) >= 0.9999, "token-array input")
r = client.embeddings.create(model=model, input=golden["sentences"][0], dimensions=8, encoding_format="float")
e = r.data[0].embedding
check(len(e) == 8 and abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-5, "dimensions 8")
# too long: refused, or cut when asked
long = golden["truncated"]["text"]
code, body = post({"input": long})
check(code == 400 and "truncate" in body["error"]["message"], f"long input: {code} {body}")
code, body = post({"input": long, "truncate": True})
check(code == 200 and cos(body["data"][0]["embedding"], golden["truncated"]["embedding"]) >= 0.9999,
      f"truncate: {code}")
# prompt_name (an extension field): sentence-transformers' encode(prompt_name=...)
for case in pgold["cases"]:
    if list(case["args"]) != ["prompt_name"]:
        continue
    rows = [row for s, row in zip(pgold["sentences"], case["rows"]) if s]  # OpenAI's API takes no ""
    r = client.embeddings.create(model=model, input=[s for s in pgold["sentences"] if s], encoding_format="float",
                                 extra_body={"prompt_name": case["args"]["prompt_name"]})
    got = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
    worst = min(cos(a, row["embedding"]) for a, row in zip(got, rows))
    check(len(got) == len(rows) and worst >= 0.9999, f"prompt_name {case['args']['prompt_name']}: worst cosine {worst}")
    check(r.usage.prompt_tokens == sum(len(row["token_ids"]) for row in rows),
          f"prompt_name {case['args']['prompt_name']}: usage {r.usage}")
code, body = post({"input": "a", "prompt_name": "search"})
check(code == 400 and body["error"]["param"] == "prompt_name" and "'query', 'document'" in body["error"]["message"],
      f"prompt_name search: {code} {body}")
code, body = post({"input": [golden["token_ids"][0]], "prompt_name": "query"})
check(code == 400 and body["error"]["param"] == "prompt_name", f"prompt_name with token ids: {code} {body}")
for bad in ({"input": []}, {"input": [""]}, {"input": 5}, {"input": [[1, 99999]]}, {"input": ["a", 3]},
            {"input": "a", "dimensions": 0}, {"input": "a", "encoding_format": "hex"}, {"input": ["x"] * 2049}):
    code, body = post(bad)
    check(code == 400 and body["error"]["type"] == "invalid_request_error", f"{str(bad)[:60]}: {code}")
for url in ("/v1/rerank", "/v1/classify"):  # an embedding model has no classifier head
    req = urllib.request.Request(f"http://127.0.0.1:{port}{url}", data=b'{"query": "q", "documents": ["a"], "input": "a"}')
    try:
        urllib.request.urlopen(req, timeout=60)
        check(False, f"{url} on an embedding model answered")
    except urllib.error.HTTPError as e:
        check(e.code == 400 and "no classifier head" in json.load(e)["error"]["message"], f"{url}: {e.code}")
try:
    client.completions.create(model=model, prompt="hi", max_tokens=1)
    check(False, "completions on an encoder answered")
except openai.BadRequestError as e:
    check("encoder" in str(e), f"completions: {e}")
# Batching across clients: 8 clients at once, each with its own requests
# (strings, arrays, token ids, dimensions, a prompt, both formats) and one
# bad request each, on the default budget and on a 16-token one. Every
# reply must be the request's reply when sent alone: the same to float
# rounding, not bit for bit (the products block by row count; measured
# max abs diff 2.4e-7 here), and every bad request its own 400.
def conn_post(c, body, url="/v1/embeddings"):
    c.request("POST", url, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())

def rows(body):
    return [floats(d["embedding"]) for d in sorted(body["data"], key=lambda d: d["index"])]

ss = texts + [long]
good = []
for k in range(8):
    good += [{"input": ss[k % len(ss)], "truncate": True, "encoding_format": "float"},
             {"input": [ss[(k + i) % len(ss)] for i in range(1 + k % 4)], "truncate": True, "encoding_format": "base64"},
             {"input": [golden["token_ids"][k % len(golden["token_ids"])]], "encoding_format": "float"},
             {"input": ss[(3 * k + 1) % len(ss)], "dimensions": 4 + k, "truncate": True, "encoding_format": "float"},
             {"input": [ss[(k + 5) % len(ss)], ss[(k + 2) % len(ss)]], "prompt_name": "query", "truncate": True,
              "encoding_format": "float"}]
bad = [({"input": long}, "input"), ({"input": [[1, 99999]]}, "input"), ({"input": ["ok", ""]}, "input"),
       ({"input": [[1, 2]], "prompt_name": "query"}, "prompt_name"), ({"input": "a", "dimensions": 10**6}, "dimensions")]

# /metrics' encoder batch histograms. One request at a time, a request's
# batches follow from the budget: on the default one each request is one
# batch; on 16 tokens, token-id inputs of 10, 5, 3, 12 and 20 tokens are
# batches of 10+5, 3+12 and 20 (over the budget, alone).
def batches_of(bp, send):
    """The delta of bp's embed batch histograms over send(), with the
    requests' queue waits as d["queue"]."""
    before, q0 = encoder_batches(bp), histograms(bp, "candle_encoder_queue_seconds")
    send()
    _, d, bad = encoder_batch_delta(bp, before, "embed")
    q1 = histograms(bp, "candle_encoder_queue_seconds")
    bad += [f"queue {k}: {p}" for k, h in q1.items() for p in histogram_problems(h)]
    check(not bad and sorted(q1) == ["classify", "embed", "rerank"], f"/metrics on {bp}: {bad} {sorted(q1)}")
    if d is not None and "embed" in q1 and "embed" in q0:
        d["queue"] = histogram_delta(q1["embed"], q0["embed"])
    return d

def send_alone(bp, bodies, usage):
    c = http.client.HTTPConnection("127.0.0.1", bp, timeout=60)
    for b in bodies:
        code, body = conn_post(c, b)
        check(code == 200, f"alone on {bp}: {code} {str(body)[:200]}")
        usage.append(body["usage"]["prompt_tokens"] if code == 200 else -1)

n_in = [1, 2, 3, 4, 5]
used = []
d = batches_of(port, lambda: send_alone(port, [{"input": [texts[i % len(texts)] for i in range(k)]} for k in n_in],
                                        used))
check(d and d["tokens"]["count"] == len(n_in) and d["tokens"]["sum"] == sum(used) and
      d["tokens"]["buckets"] == cumulative(d["tokens"], used) and d["inputs"]["sum"] == sum(n_in) and
      d["inputs"]["buckets"] == cumulative(d["inputs"], n_in) and d["requests"]["sum"] == len(n_in) and
      d["requests"]["buckets"] == cumulative(d["requests"], [1] * len(n_in)) and d["seconds"]["sum"] > 0 and
      d["queue"]["count"] == len(n_in) and d["queue"]["sum"] >= 0,
      f"embed batches of {n_in} inputs alone: {d}")
tok0, lens, used = golden["token_ids"][0], [10, 5, 3, 12, 20], []
d = batches_of(sys.argv[6], lambda: send_alone(
    sys.argv[6], [{"input": [[tok0[i % len(tok0)] for i in range(n)] for n in lens]}], used))
check(used == [sum(lens)] and d and d["tokens"]["count"] == 3 and
      d["tokens"]["buckets"] == cumulative(d["tokens"], [15, 15, 20]) and d["tokens"]["sum"] == 50 and
      d["inputs"]["buckets"] == cumulative(d["inputs"], [2, 2, 1]) and d["inputs"]["sum"] == 5 and
      d["requests"]["buckets"] == cumulative(d["requests"], [1, 1, 1]) and d["requests"]["sum"] == 3 and
      d["queue"]["count"] == 1, f"embed batches of {lens} tokens on a 16-token budget: {d}")

def n_inputs(body):
    return 1 if isinstance(body["input"], str) else len(body["input"])

for bp in (port, sys.argv[6]):
    before = encoder_batches(bp)
    c0 = http.client.HTTPConnection("127.0.0.1", bp, timeout=60)
    ref = []
    for b in good:
        code, body = conn_post(c0, b)
        check(code == 200, f"alone on {bp}: {code} {body}")
        ref.append(rows(body) if code == 200 else None)
    worst, n_ok, n_bad, lock, start = [1.0, 0.0], [0], [0], threading.Lock(), threading.Barrier(8)
    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", bp, timeout=60)
        start.wait()
        for rep in range(6):
            for i in range(k, len(good), 8) if rep % 2 else range(len(good) - 1 - k, -1, -8):
                code, body = conn_post(c, good[i])
                with lock:
                    if code != 200 or ref[i] is None or len(rows(body)) != len(ref[i]):
                        check(False, f"concurrent request {i} on {bp}: {code} {str(body)[:200]}")
                        continue
                    n_ok[0] += 1
                    for a, b in zip(rows(body), ref[i]):
                        worst[0] = min(worst[0], cos(a, b))
                        worst[1] = max(worst[1], max(abs(x - y) for x, y in zip(a, b)))
            b, param = bad[(k + rep) % len(bad)]
            code, body = conn_post(c, b)
            with lock:
                n_bad[0] += 1
                check(code == 400 and body["error"]["param"] == param, f"bad request {b} on {bp}: {code} {body}")
    ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"concurrent on {bp}: {n_ok[0]} replies, min cosine to alone {worst[0]:.9f}, max abs diff "
          f"{worst[1]:.3g}; {n_bad[0]} bad requests")
    check(n_ok[0] == 6 * len(good) and worst[0] >= 0.99999 and worst[1] <= 1e-5,
          f"concurrent replies on {bp}: {n_ok[0]}, cosine {worst[0]}, diff {worst[1]}")
    # Each good request ran once alone and six times concurrently; the bad
    # ones never reach a batch. A request spanning batches counts in each;
    # a batch over the budget holds one input.
    now, d, bad_m = encoder_batch_delta(bp, before, "embed")
    check(not bad_m, f"/metrics on {bp}: {bad_m}")
    sent = 7 * sum(n_inputs(b) for b in good)
    print(f"batches on {bp}: {d and d['tokens']['count']} for {7 * len(good)} requests of {sent} inputs, "
          f"{d and d['requests']['sum']} requests in them")
    check(d and d["inputs"]["sum"] == sent and d["requests"]["sum"] >= 7 * len(good) and
          1 <= d["tokens"]["count"] <= sent, f"concurrent embed batches on {bp}: {d}")
    if d and bp == sys.argv[6]:
        over = d["tokens"]["count"] - dict(d["tokens"]["buckets"])[16.0]
        check(over <= dict(d["inputs"]["buckets"])[1.0], f"batches over the 16-token budget: {d}")
    check(all(now[w][k]["count"] == 0 for w in now for k in ("classify", "rerank")),
          f"classify or rerank batches on an embedding model: {now['tokens']}")
# the decoder embedder: last-token pooling, its query prompt, generation refused
qport, qg = sys.argv[4], json.load(open(sys.argv[5]))
qc = openai.OpenAI(base_url=f"http://127.0.0.1:{qport}/v1", api_key="x", max_retries=0, timeout=60)
for key, extra in (("embeddings", {}), ("embeddings_query", {"prompt_name": "query"})):
    r = qc.embeddings.create(model="q", input=qg["sentences"], encoding_format="float", extra_body=extra)
    got = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
    worst = min(cos(a, row["embedding"]) for a, row in zip(got, qg[key]))
    check(len(got) == len(qg[key]) and worst >= 0.9999, f"qwen3 {key}: worst cosine {worst}")
    check(r.usage.prompt_tokens == sum(len(row["token_ids"]) for row in qg[key]), f"qwen3 {key}: usage {r.usage}")
try:
    qc.chat.completions.create(model="q", messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    check(False, "chat on a decoder embedder answered")
except openai.BadRequestError as e:
    check("encoder" in str(e), f"qwen3 chat: {e}")
print("test_server_embeddings:", "FAILED" if fails else "passed")
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc -eq 0 ] || cat "$LOG"
exit $rc
