"""The server tests' HTTP and /metrics helpers (tests/slow/test_server_lookup.sh,
test_server_draft.sh and tests/models/test_server_embeddings.sh,
test_server_heads.sh import them through PYTHONPATH=tests/common)."""
import json
import re
import urllib.request


def post(port, path, body, timeout=900):
    """The JSON reply to a JSON POST to 127.0.0.1:port."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def metric(port, name):
    """One unlabelled series of /metrics; exits with a FAIL when it is missing."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise SystemExit(f"FAIL: {name} not in /metrics")


def histograms(port, name):
    """Histogram name of /metrics by its kind label ("" when unlabelled):
    {kind: {"buckets": [(le, count), ...] in order, "sum": s, "count": c}}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"(\w+?)_(bucket|sum|count)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        h = out.setdefault(labels.get("kind", ""), {"buckets": [], "sum": 0.0, "count": 0})
        if m.group(2) == "bucket":
            h["buckets"].append((float(labels["le"]), int(m.group(4))))
        else:
            h[m.group(2)] = float(m.group(4)) if m.group(2) == "sum" else int(m.group(4))
    return out


def histogram_problems(h):
    """What is wrong with one series of histograms(): empty, cumulative
    buckets that go down or bounds out of order, +Inf not the count."""
    b = h["buckets"]
    if not b or b[-1][0] != float("inf"):
        return ["no +Inf bucket"]
    bad = [f"bucket {b[i + 1]} after {b[i]}" for i in range(len(b) - 1)
           if b[i + 1][0] <= b[i][0] or b[i + 1][1] < b[i][1]]
    if b[-1][1] != h["count"]:
        bad.append(f"+Inf bucket {b[-1][1]} != count {h['count']}")
    return bad


def histogram_delta(after, before):
    """after - before of one series (buckets, sum, count)."""
    return {"buckets": [(le, a - b) for (le, a), (_, b) in zip(after["buckets"], before["buckets"])],
            "sum": after["sum"] - before["sum"], "count": after["count"] - before["count"]}


ENCODER_BATCH = ("tokens", "inputs", "requests", "seconds")


def encoder_batches(port):
    """The candle_encoder_batch_* histograms: {what: {kind: series}}."""
    return {w: histograms(port, f"candle_encoder_batch_{w}") for w in ENCODER_BATCH}


def encoder_batch_delta(port, before, kind):
    """The encoder batches of kind since before (an encoder_batches(), or
    None: since the server started):
    (now, {what: delta series}, problems): every series well formed, kinds
    embed, classify and rerank all there, one count for the four
    histograms of a kind."""
    now = encoder_batches(port)
    bad = []
    for w, series in now.items():
        if sorted(series) != ["classify", "embed", "rerank"]:
            bad.append(f"{w}: kinds {sorted(series)}")
        bad += [f"{w} {k}: {p}" for k, h in series.items() for p in histogram_problems(h)]
    if not bad:
        for k in now["tokens"]:
            counts = {now[w][k]["count"] for w in ENCODER_BATCH}
            if len(counts) != 1:
                bad.append(f"{k}: counts {counts} differ")
    if bad:
        return now, None, bad
    if before is None:
        return now, {w: now[w][kind] for w in ENCODER_BATCH}, []
    return now, {w: histogram_delta(now[w][kind], before[w][kind]) for w in ENCODER_BATCH}, []


def cumulative(series, values):
    """The buckets a series would have from observing values alone."""
    return [(le, sum(v <= le for v in values)) for le, _ in series["buckets"]]
