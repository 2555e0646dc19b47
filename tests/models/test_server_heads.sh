#!/usr/bin/env bash
# `candle serve -m RERANKER` answers POST /v1/rerank and /rerank (Jina's /
# Cohere's shape, and TEI's with "texts"), `candle serve -m CLASSIFIER`
# answers POST /v1/classify, /classify and TEI's /predict, checked against
# the goldens of scripts/gen_encoder_head_goldens.py
# (tests/data/encoders/bert-tiny-reranker, bert-tiny-classifier): scores
# within 1e-4, the golden's order, top_n, return_documents, usage, the
# cut document refused unless "truncate": true, bad requests 400 naming the
# field, and each endpoint refused on the other kind of model. Then
# batching across clients (enc_batch.c): 8 clients at once with rerank,
# classify and embeddings requests (and one bad request each round) on
# both models, on the default budget and on --max-batch-tokens 40 (pairs
# span batches, the longest runs alone): every reply equals the request's
# reply alone within 1e-5, every bad one is its own 400; the batches'
# /metrics histograms (candle_encoder_batch_*) count every input once.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
ENC=$SRC/tests/data/encoders
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(free_port); P2=$(free_port); P3=$(free_port); P4=$(free_port)
LOG1=$(mktemp); LOG2=$(mktemp)
"$BIN" serve -m "$ENC/bert-tiny-reranker" --port "$P1" 2>"$LOG1" & S1=$!
"$BIN" serve -m "$ENC/bert-tiny-classifier" --port "$P2" 2>"$LOG2" & S2=$!
"$BIN" serve -m "$ENC/bert-tiny-reranker" --port "$P3" --max-batch-tokens 40 --quiet 2>>"$LOG1" & S3=$!
"$BIN" serve -m "$ENC/bert-tiny-classifier" --port "$P4" --max-batch-tokens 40 --quiet 2>>"$LOG2" & S4=$!
trap 'kill $S1 $S2 $S3 $S4 2>/dev/null; rm -f "$LOG1" "$LOG2"' EXIT
for p in "$P1" "$P2" "$P3" "$P4"; do
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        python3 -c 'import time; time.sleep(0.1)'
    done
done
PYTHONPATH="$SRC/tests/common" python3 - "$P1" "$P2" "$ENC" "$P3" "$P4" <<'PY'
import http.client, json, math, sys, threading, urllib.error, urllib.request
from srv_client import cumulative, encoder_batch_delta, encoder_batches

p_rr, p_cls, enc = sys.argv[1], sys.argv[2], sys.argv[3]
rr = json.load(open(f"{enc}/bert-tiny-reranker/golden.json"))
cl = json.load(open(f"{enc}/bert-tiny-classifier/golden.json"))
fails = []

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)

def post(port, url, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{url}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        return 200, json.load(urllib.request.urlopen(req, timeout=60))
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

docs = rr["documents"]
# the document cut longest-first with every query: refused unless truncate
cut = [i for i, pr in enumerate(rr["queries"][0]["pairs"]) if pr["untruncated_length"] > len(pr["token_ids"])]
check(cut == [len(docs) - 1], f"golden: the cut document is the last ({cut})")
worst = 0.0
for q in rr["queries"]:
    for url in ("/v1/rerank", "/rerank"):
        code, b = post(p_rr, url, {"model": "x", "query": q["query"], "documents": docs, "truncate": True})
        check(code == 200, f"{url}: {code} {b}")
        if code != 200:
            continue
        res = b["results"]
        check([r["index"] for r in res] == q["order"], f"{url}: order {[r['index'] for r in res]} != {q['order']}")
        for r in res:
            worst = max(worst, abs(r["relevance_score"] - q["scores"][r["index"]]))
        check(all("document" not in r for r in res), f"{url}: documents returned without return_documents")
        want_tokens = sum(len(pr["token_ids"]) for pr in q["pairs"])
        check(b["usage"]["prompt_tokens"] == want_tokens == b["usage"]["total_tokens"], f"{url}: usage {b['usage']}")
        check(isinstance(b["model"], str) and b["model"], f"{url}: model {b.get('model')}")
check(worst <= 1e-4, f"rerank: max abs score diff {worst}")
print(f"rerank: {len(rr['queries'])} queries x {len(docs)} documents, max abs score diff {worst:.3g}")
q = rr["queries"][1]
code, b = post(p_rr, "/v1/rerank", {"query": q["query"], "documents": [{"text": d} for d in docs],
                                     "top_n": 3, "return_documents": True, "truncate": True})
check(code == 200 and [r["index"] for r in b["results"]] == q["order"][:3] and
      all(r["document"] == {"text": docs[r["index"]]} for r in b["results"]), f"top_n 3, objects: {code} {b}")
code, b = post(p_rr, "/v1/rerank", {"query": q["query"], "documents": docs, "top_n": 100, "truncate": True})
check(code == 200 and len(b["results"]) == len(docs), f"top_n 100: {code}")
# TEI's /rerank shape: texts in, a bare array out
code, b = post(p_rr, "/rerank", {"query": q["query"], "texts": docs, "return_text": True, "truncate": True})
check(code == 200 and isinstance(b, list) and [r["index"] for r in b] == q["order"] and
      abs(b[0]["score"] - q["scores"][q["order"][0]]) <= 1e-4 and b[0]["text"] == docs[q["order"][0]],
      f"TEI texts: {code} {str(b)[:200]}")
code, b = post(p_rr, "/v1/rerank", {"query": q["query"], "documents": docs})
check(code == 400 and b["error"]["param"] == "documents" and "truncate" in b["error"]["message"],
      f"long pair without truncate: {code} {b}")
code, b = post(p_rr, "/v1/rerank", {"query": q["query"], "documents": docs[:-1], "truncate": False})
check(code == 200 and len(b["results"]) == len(docs) - 1, f"short pairs with truncate false: {code}")
for bad, param in (({"documents": docs}, "query"), ({"query": "", "documents": docs}, "query"),
                   ({"query": "q"}, "documents"), ({"query": "q", "documents": []}, "documents"),
                   ({"query": "q", "documents": ["a", 3]}, "documents"), ({"query": "q", "documents": [""]}, "documents"),
                   ({"query": "q", "documents": "a"}, "documents"),
                   ({"query": "q", "documents": ["a"] * 2049}, "documents"),
                   ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
                   ({"query": "q", "documents": ["a"], "top_n": "2"}, "top_n"),
                   ({"query": "q", "documents": ["a"], "return_documents": 1}, "return_documents"),
                   ({"query": "q", "documents": ["a"], "truncate": "yes"}, "truncate")):
    code, b = post(p_rr, "/v1/rerank", bad)
    check(code == 400 and b["error"]["type"] == "invalid_request_error" and b["error"]["param"] == param,
          f"rerank {str(bad)[:60]}: {code} {b}")
code, b = post(p_rr, "/v1/classify", {"input": "hello"})  # one label: a score, labels of one
check(code == 200 and len(b["data"][0]["labels"]) == 1, f"classify on a reranker: {code}")

# classification
labels, sents = cl["labels"], cl["sentences"]
texts = [s for s in sents if s]
want = [p for s, p in zip(sents, cl["probs"]) if s]
toks = [t for s, t in zip(sents, cl["token_ids"]) if s]
worst = 0.0
for url in ("/v1/classify", "/classify"):
    code, b = post(p_cls, url, {"model": "x", "input": texts})
    check(code == 200 and len(b.get("data", [])) == len(texts), f"{url}: {code} {str(b)[:200]}")
    if code != 200:
        continue
    for d, w in zip(b["data"], want):
        worst = max([worst] + [abs(a - x) for a, x in zip(d["probs"], w)])
        best = max(range(len(w)), key=lambda k: w[k])
        check(d["label"] == labels[best] and d["labels"][0]["label"] == labels[best], f"{url}: top label")
        sc = [l["score"] for l in d["labels"]]
        check(sc == sorted(sc, reverse=True) and sorted(l["label"] for l in d["labels"]) == sorted(labels),
              f"{url}: labels sorted")
    check(b["usage"]["prompt_tokens"] == sum(len(t) for t in toks), f"{url}: usage {b['usage']}")
check(worst <= 1e-4, f"classify: max abs probability diff {worst}")
print(f"classify: {len(texts)} inputs x {len(labels)} labels, max abs probability diff {worst:.3g}")
code, b = post(p_cls, "/v1/classify", {"input": texts[0]})
check(code == 200 and len(b["data"]) == 1 and b["data"][0]["index"] == 0, f"one string: {code}")
code, b = post(p_cls, "/predict", {"inputs": texts[0]})
check(code == 200 and isinstance(b, list) and isinstance(b[0], dict) and
      abs(b[0]["score"] - max(want[0])) <= 1e-4 and len(b) == len(labels), f"/predict one: {code} {b}")
code, b = post(p_cls, "/predict", {"inputs": texts[:3]})
check(code == 200 and isinstance(b, list) and len(b) == 3 and isinstance(b[2], list), f"/predict batch: {code}")
long = rr["documents"][-1] * 2
code, b = post(p_cls, "/v1/classify", {"input": [texts[0], long]})
check(code == 400 and b["error"]["param"] == "input" and "truncate" in b["error"]["message"], f"long: {code} {b}")
code, b = post(p_cls, "/v1/classify", {"input": [texts[0], long], "truncate": True})
check(code == 200 and b["usage"]["prompt_tokens"] == len(toks[0]) + 64, f"long, truncate: {code} {b.get('usage')}")
for bad, param in (({}, "input"), ({"input": []}, "input"), ({"input": [""]}, "input"), ({"input": 5}, "input"),
                   ({"input": ["a", None]}, "input"), ({"input": [["a", "b"]]}, "input"),
                   ({"inputs": [3]}, "inputs"), ({"input": "a", "truncate": 1}, "truncate"),
                   ({"input": ["x"] * 2049}, "input")):
    code, b = post(p_cls, "/v1/classify", bad)
    check(code == 400 and b["error"]["type"] == "invalid_request_error" and b["error"]["param"] == param,
          f"classify {str(bad)[:60]}: {code} {b}")
code, b = post(p_cls, "/v1/rerank", {"query": "q", "documents": ["a"]})
check(code == 400 and b["error"]["param"] == "model" and "/v1/classify" in b["error"]["message"],
      f"rerank on a classifier: {code} {b}")
req = urllib.request.Request(f"http://127.0.0.1:{p_cls}/v1/rerank")
try:
    urllib.request.urlopen(req, timeout=10)
    check(False, "GET /v1/rerank answered")
except urllib.error.HTTPError as e:
    check(e.code == 405, f"GET /v1/rerank: {e.code}")
for port, ep in ((p_rr, "rerank"), (p_cls, "classify")):  # counted under their own endpoint label
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    ok200 = [l for l in m.splitlines() if l.startswith(f'candle_requests_total{{endpoint="{ep}",status="200"}}')]
    check(ok200 and int(ok200[0].split()[-1]) > 0, f"/metrics {ep}: {ok200}")

# Batching across clients. A reply's numbers: rerank scores by index,
# classify probabilities, embeddings; compared to the request's reply alone.
def numbers(url, body):
    if url == "/v1/embeddings":
        return [x for d in body["data"] for x in d["embedding"]]
    if url == "/rerank" and isinstance(body, list):
        return [r["score"] for r in sorted(body, key=lambda r: r["index"])]
    if "rerank" in url:
        res = body["results"]
        check([r["relevance_score"] for r in res] == sorted((r["relevance_score"] for r in res), reverse=True),
              f"{url}: results not sorted")
        return [r["relevance_score"] for r in sorted(res, key=lambda r: r["index"])]
    if url == "/predict":
        return [l["score"] for row in body for l in sorted(row, key=lambda l: l["label"])]
    return [p for d in body["data"] for p in d["probs"]]

def conn_post(c, url, body):
    c.request("POST", url, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())

qs = [q["query"] for q in rr["queries"]]
rr_good = []
for k in range(8):
    sub = [docs[(k + i) % len(docs)] for i in range(1 + k % 5)]
    rr_good += [("/v1/rerank", {"query": qs[k % 3], "documents": sub, "truncate": True}),
                ("/rerank", {"query": qs[(k + 1) % 3], "texts": docs[k % 4:], "truncate": True}),
                ("/v1/classify", {"input": sub[:2], "truncate": True}),
                ("/v1/embeddings", {"input": sub[0], "truncate": True, "encoding_format": "float"})]
cl_good = []
for k in range(8):
    cl_good += [("/v1/classify", {"input": [texts[(3 * k + i) % len(texts)] for i in range(1 + k % 6)]}),
                ("/predict", {"inputs": texts[k:k + 3]}),
                ("/v1/classify", {"input": [texts[k], long], "truncate": True})]
rr_bad = [(("/v1/rerank", {"query": qs[0], "documents": [docs[0], docs[-1]]}), "documents"),
          (("/v1/rerank", {"query": qs[1], "documents": ["a", ""]}), "documents"),
          (("/v1/classify", {"input": [docs[0], docs[-1] * 2]}), "input")]
cl_bad = [(("/v1/classify", {"input": [texts[0], long]}), "input"), (("/v1/classify", {"input": ["x", 1]}), "input")]

# /metrics' encoder batch histograms, one request at a time: on the default
# budget each request is one batch of its pairs or texts; on 40 tokens a
# request's inputs span batches, each within the budget unless alone.
def batches_of(port, kind, url, bodies):
    """The delta of port's kind batch histograms over bodies sent one by
    one, and each reply's usage."""
    before, used = encoder_batches(port), []
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for b in bodies:
        code, body = conn_post(c, url, b)
        check(code == 200, f"alone on {port} {url}: {code} {str(body)[:200]}")
        used.append(body["usage"]["prompt_tokens"] if code == 200 else -1)
    _, d, bad = encoder_batch_delta(port, before, kind)
    check(not bad, f"/metrics on {port}: {bad}")
    return d, used

n_in = [1, 2, 3, 4]
for port, kind, url, bodies in (
        (p_rr, "rerank", "/v1/rerank", [{"query": qs[0], "documents": docs[:k], "truncate": True} for k in n_in]),
        (p_cls, "classify", "/v1/classify", [{"input": [texts[i % len(texts)] for i in range(k)]} for k in n_in])):
    d, used = batches_of(port, kind, url, bodies)
    check(d and d["tokens"]["count"] == len(n_in) and d["tokens"]["sum"] == sum(used) and
          d["tokens"]["buckets"] == cumulative(d["tokens"], used) and d["inputs"]["sum"] == sum(n_in) and
          d["inputs"]["buckets"] == cumulative(d["inputs"], n_in) and
          d["requests"]["buckets"] == cumulative(d["requests"], [1] * len(n_in)) and d["seconds"]["sum"] > 0,
          f"{kind} batches of {n_in} inputs alone on {port}: {d}")
for port, kind, url, body, n in (
        (sys.argv[4], "rerank", "/v1/rerank", {"query": qs[1], "documents": docs, "truncate": True}, len(docs)),
        (sys.argv[5], "classify", "/v1/classify", {"input": texts, "truncate": True}, len(texts))):
    d, used = batches_of(port, kind, url, [body])
    if d:
        over = d["tokens"]["count"] - dict(d["tokens"]["buckets"])[64.0]  # past 64, so past 40: one input alone
        check(d["inputs"]["sum"] == n and d["tokens"]["sum"] == used[0] and
              math.ceil(used[0] / 40) <= d["tokens"]["count"] <= n and d["requests"]["sum"] == d["tokens"]["count"] and
              over <= dict(d["inputs"]["buckets"])[1.0], f"{kind} batches of {n} inputs on 40 tokens, {used}: {d}")
    else:
        check(False, f"{kind} batches on 40 tokens: no histograms")

def kind_inputs(url, b):
    """The batch kind of a request, and its inputs."""
    x = b.get("documents", b.get("texts", b.get("input", b.get("inputs"))))
    kind = "rerank" if "rerank" in url else "embed" if "embeddings" in url else "classify"
    return kind, 1 if isinstance(x, str) else len(x)

for port, good, bad in ((p_rr, rr_good, rr_bad), (sys.argv[4], rr_good, rr_bad), (p_cls, cl_good, cl_bad),
                        (sys.argv[5], cl_good, cl_bad)):
    before = encoder_batches(port)
    c0 = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    ref = []
    for url, b in good:
        code, body = conn_post(c0, url, b)
        check(code == 200, f"alone on {port} {url}: {code} {str(body)[:200]}")
        ref.append(numbers(url, body) if code == 200 else None)
    worst, n_ok, n_bad, lock, start = [0.0], [0], [0], threading.Lock(), threading.Barrier(8)
    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        for rep in range(4):
            for i in range(k, len(good), 8) if rep % 2 else range(len(good) - 1 - k, -1, -8):
                url, b = good[i]
                code, body = conn_post(c, url, b)
                with lock:
                    got = numbers(url, body) if code == 200 else None
                    if got is None or ref[i] is None or len(got) != len(ref[i]):
                        check(False, f"concurrent {url} {i} on {port}: {code} {str(body)[:200]}")
                        continue
                    n_ok[0] += 1
                    worst[0] = max([worst[0]] + [abs(x - y) for x, y in zip(got, ref[i])])
            (url, b), param = bad[(k + rep) % len(bad)]
            code, body = conn_post(c, url, b)
            with lock:
                n_bad[0] += 1
                check(code == 400 and body["error"]["param"] == param,
                      f"bad {url} {str(b)[:60]} on {port}: {code} {body}")
    ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"concurrent on {port}: {n_ok[0]} replies, max abs diff to alone {worst[0]:.3g}; {n_bad[0]} bad requests")
    check(n_ok[0] == 4 * len(good) and worst[0] <= 1e-5, f"concurrent replies on {port}: {n_ok[0]}, diff {worst[0]}")
    # each good request ran once alone and four times concurrently; the bad never reach a batch
    for kind in ("embed", "classify", "rerank"):
        sent = [n for k, n in (kind_inputs(url, b) for url, b in good) if k == kind]
        _, d, bad_m = encoder_batch_delta(port, before, kind)
        check(not bad_m and d["inputs"]["sum"] == 5 * sum(sent) and d["requests"]["sum"] >= 5 * len(sent) and
              (d["tokens"]["count"] > 0) == bool(sent) and d["tokens"]["count"] <= 5 * sum(sent),
              f"concurrent {kind} batches on {port}: {bad_m or d}")
print("test_server_heads:", "FAILED" if fails else "passed")
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc -eq 0 ] || { cat "$LOG1"; cat "$LOG2"; }
exit $rc
