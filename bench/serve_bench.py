#!/usr/bin/env python3
"""Serving benchmark: N concurrent streaming clients against an
OpenAI-compatible server (candle serve, or llama-cpp-python's server).

  serve_bench.py --url http://127.0.0.1:8080 [--levels 1,4,16,64] [--max-tokens 32]
  serve_bench.py --start candle --candle build/bin/candle --model M.gguf --parallel 16
  serve_bench.py --start llama-cpp --model M.gguf

Each level runs `level` clients at once, each sending --requests-per-client
streaming completions (greedy, ignore_eos so every request makes max_tokens
tokens; --max-tokens-spread varies that length per request so the clients do
not run in lockstep). Reports total generated tokens/s over the level's wall time, TTFT
(request sent to first token) and inter-token latency percentiles, as JSON
lines and a Markdown table; with candle serve, also the level's prompt tokens,
those reused from the prefix cache and the prompt rows computed (/metrics)."""
import argparse
import http.client
import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time
import urllib.parse

from serve_util import free_port

PROMPTS = ["Write a short story about a robot who learns to paint.",
           "Explain how rain forms, in simple words.",
           "List three uses of copper and why it fits each.",
           "Describe the sea at night to someone who has never seen it."]


def one_request(url, prompt, max_tokens, key, chat):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = {"max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    t0 = time.perf_counter()
    c.request("POST", path, body=json.dumps(body), headers=h)
    r = c.getresponse()
    if r.status != 200:
        print(f"HTTP {r.status}: {r.read()[:200]!r}", file=sys.stderr)
        return None
    times, usage = [], None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"].get("completion_tokens")
        ch = ev.get("choices") or []
        if not ch:
            continue
        txt = ch[0].get("text") if "text" in ch[0] else (ch[0].get("delta") or {}).get("content")
        if txt:
            times.append(time.perf_counter())
    c.close()
    # Tokens: the server's usage count when it sends one (a chunk may carry
    # several tokens, e.g. a multi-token character), else the text chunks.
    return t0, times, usage if usage is not None else len(times)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_level(url, level, rpc, max_tokens, key, chat, spread=0.0):
    res, lock = [], threading.Lock()

    def client(i):
        # a fixed draw per client and request, the same for every server
        rng = random.Random(1000 * level + i)
        for j in range(rpc):
            n = max(1, round(max_tokens * (1 + spread * (2 * rng.random() - 1))))
            r = one_request(url, PROMPTS[(i + j) % len(PROMPTS)], n, key, chat)
            with lock:
                res.append(r)
    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(level)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in res if r and r[1]]
    # a request that streamed no text (an immediate end of generation) did not fail
    ttft = [r[1][0] - r[0] for r in ok]
    itl = [b - a for r in ok for a, b in zip(r[1], r[1][1:])]
    toks = sum(r[2] for r in ok)
    return {"clients": level, "requests": len(res), "failed": sum(1 for r in res if r is None),
            "tokens": toks, "wall_s": round(wall, 2), "tok_per_s": round(toks / wall, 2),
            "ttft_p50_ms": round(1e3 * pct(ttft, 50), 1), "ttft_p99_ms": round(1e3 * pct(ttft, 99), 1),
            "itl_p50_ms": round(1e3 * pct(itl, 50), 1), "itl_p99_ms": round(1e3 * pct(itl, 99), 1)}


METRICS = {"candle_prompt_tokens_total": "prompt_tokens",
           "candle_prompt_tokens_cached_total": "cached_tokens",
           "candle_step_prefill_rows_sum": "prompt_rows"}


def metrics(url, key):
    """candle serve's prompt counters (prompt tokens, those reused from the
    prefix cache, prompt rows computed), or {} from a server without them."""
    u = urllib.parse.urlparse(url)
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        c.request("GET", "/metrics", headers={"Authorization": "Bearer " + key} if key else {})
        r = c.getresponse()
        text = r.read().decode() if r.status == 200 else ""
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] in METRICS:
            out[METRICS[f[0]]] = int(float(f[1]))
    return out


def start_server(a):
    port = free_port()
    if a.start == "candle":
        cmd = [a.candle, "serve", "-m", a.model, "--port", str(port), "--parallel", str(a.parallel),
               "-c", str(a.ctx), "--queue", "1024"]
        if a.threads:
            cmd += ["-t", str(a.threads)]
        cmd += shlex.split(a.server_args)
    else:
        # Its default cuts a running stream short when another request comes
        # in; serve them in turn instead (it has no parallel decoding).
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", a.model, "--port", str(port),
               "--n_ctx", str(a.ctx), "--interrupt_requests", "False"]
        if a.threads:
            cmd += ["--n_threads", str(a.threads)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                return p, url
        except OSError:
            pass
        time.sleep(0.1)
    p.kill()
    sys.exit("server did not start: " + " ".join(cmd))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--start", choices=["candle", "llama-cpp"])
    ap.add_argument("--candle", default="build/bin/candle")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--levels", default="1,4,16,64")
    ap.add_argument("--requests-per-client", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-tokens-spread", type=float, default=0.0,
                    help="each request's max_tokens uniform in max_tokens x [1-F, 1+F]: "
                         "clients then finish apart and prompts arrive beside running decodes")
    ap.add_argument("--api-key", default=os.environ.get("CANDLE_API_KEY"))
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--label", default=None)
    ap.add_argument("--server-args", default="",
                    help="more options for candle serve, e.g. '--itl-stretch 1.5'")
    a = ap.parse_args()
    proc = None
    url = a.url
    if a.start:
        proc, url = start_server(a)
    if not url:
        sys.exit("--url or --start is needed")
    label = a.label or a.start or url
    rows = []
    try:
        one_request(url, PROMPTS[0], 4, a.api_key, a.chat)  # warm-up
        for lv in [int(x) for x in a.levels.split(",")]:
            m0 = metrics(url, a.api_key)
            r = run_level(url, lv, a.requests_per_client, a.max_tokens, a.api_key, a.chat,
                          a.max_tokens_spread)
            m1 = metrics(url, a.api_key)
            r.update({k: m1[k] - m0[k] for k in m1 if k in m0})
            r["server"] = label
            print(json.dumps(r), flush=True)
            rows.append(r)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\n| server | clients | tokens/s | TTFT P50 ms | TTFT P99 ms | ITL P50 ms | ITL P99 ms | failed |"
          f" prompt / cached / computed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        pc = "/".join(str(r.get(k, "-")) for k in ("prompt_tokens", "cached_tokens", "prompt_rows"))
        print(f"| {r['server']} | {r['clients']} | {r['tok_per_s']} | {r['ttft_p50_ms']} | "
              f"{r['ttft_p99_ms']} | {r['itl_p50_ms']} | {r['itl_p99_ms']} | {r['failed']} | {pc} |")


if __name__ == "__main__":
    main()
