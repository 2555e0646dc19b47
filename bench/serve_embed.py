#!/usr/bin/env python3
"""Embedding server benchmark: `candle serve -m ENCODER_DIR` against
`llama-server --embeddings` on a GGUF of the same weights, POST /v1/embeddings,
1, 16 and 64 concurrent clients, in one run, interleaved. With --endpoint
rerank: POST /v1/rerank on a cross-encoder directory, a query and --docs
documents per request (Candle builds only: --candle and --candle-ref).

    python3 bench/serve_embed.py -m MODEL_DIR --gguf MODEL-f32.gguf \\
        [--candle build/bin/candle] [--llama-server .../llama-server] \\
        [--malloc-count build/lib/libcandle_malloc_count.so] [--candle-dtype bf16] \\
        [--levels 1,16,64] [-t 2] [--requests 256] [--rounds 3] [--json OUT.json] \\
        [--candle-ref OTHER/candle] [--max-batch-tokens N] [--endpoint rerank --docs 8]

--candle-ref runs a second Candle binary (an earlier build: before/after in
the same run) beside the first, with the same options and counters.

Inputs: short natural sentences (8-40 tokens with the model's special
tokens; the table below), one per request, as a client would send them
(`{"input": "...", "model": ...}`); each client sends its requests one after
the other on one keep-alive connection (candle serve runs with
--conn-per-ip 1024: its default 64 per address would refuse a 64-client
level's reconnects). A level runs `level` clients at once until --requests requests
are done in all (at least 4 per client). Reported per level: inputs/s over the
level's wall time, P50/P99 of request latency (send to full reply), P99/P50.
Rerank: a query and the --docs sentences after it (in the list's order,
wrapping) per request; inputs/s counts the pairs, requests/s the requests.

Interleaving: both servers run for the whole benchmark (each idles while the
other works); every round runs each level on each server, the server order
alternating per round; the figure is the median over rounds.

Heap allocations (Candle): the server runs with bench/malloc_count.c
preloaded, which writes its counts to stderr on SIGUSR2; a signal before and
after each level (after a warm-up) gives the process's allocations per
request in steady state (the issue's target is zero).

llama-server: OMP_WAIT_POLICY=PASSIVE, --pooling mean, -np max(levels) slots
of 128 tokens each (so every client has a slot), -t as Candle's.
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from serve_util import free_port

# Short realistic sentences: queries, titles, chat lines and product text.
SENTENCES = [
    "How do I reset my password?",
    "The weather in Paris is lovely this time of year.",
    "Best budget laptop for students in 2025",
    "A man is playing a guitar on the street corner.",
    "What is the capital of Australia?",
    "Quarterly revenue grew by twelve percent, driven by strong demand in Asia.",
    "Stainless steel water bottle, keeps drinks cold for 24 hours.",
    "Can you recommend a good book about the history of mathematics?",
    "The cat sat on the warm windowsill and watched the birds outside.",
    "Symptoms of vitamin D deficiency",
    "Our team will contact you within two business days to schedule the installation.",
    "Two children are building a sandcastle at the beach.",
    "How long should I boil an egg for a soft yolk?",
    "The new update fixes a bug that caused the app to crash on startup.",
    "Train tickets from Berlin to Munich",
    "She finished the marathon in under four hours despite the rain.",
    "Is it safe to use ibuprofen and paracetamol together?",
    "The committee postponed the vote until more data on the environmental impact becomes available.",
    "Cheap flights to Tokyo in March",
    "A dog is running through a field of tall grass.",
    "Please find attached the invoice for last month's consulting services.",
    "Why is the sky blue?",
    "The museum's new exhibition features paintings from the Dutch golden age.",
    "Wireless noise cancelling headphones with thirty hours of battery life and fast charging.",
    "How to convert a string to an integer in Python",
    "The restaurant was crowded, but the service was quick and friendly.",
    "Researchers found that regular exercise improves memory in older adults.",
    "Return policy for items bought online",
    "The bridge will be closed for repairs from Monday to Friday next week.",
    "A woman is slicing vegetables in a small kitchen.",
    "What are the side effects of the flu vaccine?",
    "The startup raised forty million dollars to expand its delivery network across Europe.",
    "After three days of heavy rain, the river rose above its banks and flooded several streets in the old "
    "town, forcing shops to close early.",
    "I ordered the blue jacket in a medium size, but the package contained a black one in large, so I would "
    "like to exchange it.",
    "The study followed more than two thousand patients for five years and found no link between the drug "
    "and heart problems.",
    "Our quarterly meeting has been moved from Thursday morning to Friday afternoon because the main "
    "conference room is being renovated.",
]


class Client:
    """One client's keep-alive connection (reopened when the server closes
    it or a request fails)."""

    def __init__(self, port, url="/v1/embeddings"):
        self.port, self.url, self.c = port, url, None

    def post(self, body):
        """(seconds, reply body), or (None, error) on a failure."""
        t0 = time.perf_counter()
        try:
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            self.c.request("POST", self.url, body=body, headers={"Content-Type": "application/json"})
            r = self.c.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            print(f"request failed: {e!r}", file=sys.stderr)
            return None, str(e)
        t1 = time.perf_counter()
        if r.will_close:
            self.close()
        if r.status != 200:
            print(f"HTTP {r.status}: {data[:200]!r}", file=sys.stderr)
            return None, data
        return t1 - t0, data

    def close(self):
        if self.c:
            self.c.close()
        self.c = None


def embedding(port, text, model):
    _, data = Client(port).post(json.dumps({"input": text, "model": model}))
    return json.loads(data)["data"][0]["embedding"]


def rerank_body(k, docs, model):
    """Request k of a rerank run: query SENTENCES[k], the docs after it."""
    n = len(SENTENCES)
    return {"query": SENTENCES[k % n], "documents": [SENTENCES[(k + 1 + i) % n] for i in range(docs)],
            "model": model, "truncate": True}


def scores(port, docs, model):
    _, data = Client(port, "/v1/rerank").post(json.dumps(rerank_body(0, docs, model)))
    return [r["relevance_score"] for r in sorted(json.loads(data)["results"], key=lambda r: r["index"])]


def run_level(port, model, level, n_requests, docs=0):
    """docs 0: /v1/embeddings, one sentence per request; else /v1/rerank."""
    per = max(4, -(-n_requests // level))
    lat, fails, lock = [], [0], threading.Lock()

    def client(i):
        cl = Client(port, "/v1/rerank" if docs else "/v1/embeddings")
        for j in range(per):
            k = (i * 7 + j) % len(SENTENCES)
            body = rerank_body(k, docs, model) if docs else {"input": SENTENCES[k], "model": model}
            dt, _ = cl.post(json.dumps(body))
            with lock:
                if dt is None:
                    fails[0] += 1
                else:
                    lat.append(dt)
        cl.close()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(level)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return {"requests": level * per, "failed": fails[0], "wall_s": wall, "requests_per_s": len(lat) / wall,
            "inputs_per_s": len(lat) * max(docs, 1) / wall,
            "p50_ms": 1e3 * p50, "p99_ms": 1e3 * p99, "p99_over_p50": p99 / p50}


def wait_up(port, proc, what):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"{what} exited ({proc.returncode})")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"{what} did not start")


class Server:
    def __init__(self, name, cmd, env, log):
        self.name, self.log = name, log
        self.port = int(cmd[cmd.index("--port") + 1])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env)
        wait_up(self.port, self.proc, name)

    def malloc_count(self):
        """(allocations, frees) of the server process so far, or None when
        the counter is not preloaded."""
        n = len(open(self.log).read())
        self.proc.send_signal(12)  # SIGUSR2
        for _ in range(50):
            time.sleep(0.02)
            m = re.search(r"malloc_count (\d+) (\d+)\n", open(self.log).read()[n:])
            if m:
                return int(m.group(1)), int(m.group(2))
        return None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True, help="the encoder's Hugging Face directory (Candle)")
    ap.add_argument("--gguf", help="the same weights as a llama.cpp GGUF (convert_hf_to_gguf.py)")
    ap.add_argument("--candle", default="build/bin/candle")
    ap.add_argument("--candle-dtype", help="candle serve --dtype (bf16, f16, q8_0)")
    ap.add_argument("--candle-ref", help="a second candle binary run beside the first (named candle-ref)")
    ap.add_argument("--max-batch-tokens", type=int, help="candle serve --max-batch-tokens (not given to --candle-ref)")
    ap.add_argument("--malloc-count", default="build/lib/libcandle_malloc_count.so")
    ap.add_argument("--llama-server", default="/work/peers/llama.cpp/build/bin/llama-server")
    ap.add_argument("--levels", default="1,16,64")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=256, help="requests per level (at least 4 per client)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--allocs-only", action="store_true",
                    help="Candle alone: heap allocations per request for float and base64 replies, one input "
                         "and 16 inputs per request (sequential requests), then exit")
    ap.add_argument("--endpoint", choices=("embeddings", "rerank"), default="embeddings")
    ap.add_argument("--docs", type=int, default=8, help="documents per rerank request")
    ap.add_argument("--json")
    a = ap.parse_args()
    docs = a.docs if a.endpoint == "rerank" else 0
    if docs and (a.gguf or a.allocs_only):
        sys.exit("--endpoint rerank: Candle servers only, no --allocs-only")
    levels = [int(x) for x in a.levels.split(",")]
    tmp = tempfile.mkdtemp(prefix="serve_embed.")

    env = dict(os.environ)
    if a.malloc_count and os.path.exists(a.malloc_count):
        env["LD_PRELOAD"] = os.path.abspath(a.malloc_count)
    def candle_cmd(binary, extra):
        cmd = [binary, "serve", "-m", a.model, "--port", str(free_port()), "-t", str(a.threads),
               "--conn-per-ip", "1024", "--quiet"] + extra
        return cmd + (["--dtype", a.candle_dtype] if a.candle_dtype else [])
    suffix = f"-{a.candle_dtype}" if a.candle_dtype else ""
    mbt = ["--max-batch-tokens", str(a.max_batch_tokens)] if a.max_batch_tokens else []
    servers = [Server("candle" + suffix, candle_cmd(a.candle, mbt), env, os.path.join(tmp, "candle.log"))]
    if a.candle_ref:
        servers.append(Server("candle-ref" + suffix, candle_cmd(a.candle_ref, []), env,
                              os.path.join(tmp, "candle-ref.log")))
    candles = list(servers)
    if a.gguf:
        np_ = max(levels)
        lenv = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        lcmd = [a.llama_server, "-m", a.gguf, "--embeddings", "--pooling", "mean", "--port", str(free_port()),
                "-t", str(a.threads), "-tb", str(a.threads), "-np", str(np_), "-c", str(128 * np_),
                "-b", "2048", "-ub", "2048", "--no-webui"]
        servers.append(Server("llama-server", lcmd, lenv, os.path.join(tmp, "llama.log")))
    if a.allocs_only:
        s, cl = servers[0], Client(servers[0].port)
        try:
            for fmt in ("float", "base64"):
                for n in (1, 16):
                    body = [json.dumps({"input": SENTENCES[i:i + n] if n > 1 else SENTENCES[i], "model": "m",
                                        "encoding_format": fmt}) for i in range(16)]
                    for b in body:  # warm-up
                        cl.post(b)
                    m0 = s.malloc_count()
                    for _ in range(8):
                        for b in body:
                            cl.post(b)
                    m1 = s.malloc_count()
                    print(f"{fmt}, {n} input(s) per request: {(m1[0] - m0[0]) / 128:.1f} allocations, "
                          f"{(m1[1] - m0[1]) / 128:.1f} frees per request")
        finally:
            s.stop()
        return
    try:
        model = "m"
        # the servers compute the same thing: cosine between their embeddings
        # (rerank: the largest score difference between the Candle builds)
        vs = [scores(s.port, docs, model) if docs else embedding(s.port, SENTENCES[0], model) for s in servers]
        cos = None
        if docs and len(vs) > 1:
            print(f"max abs score diff candle vs candle-ref: {max(abs(x - y) for x, y in zip(*vs)):.3g}",
                  file=sys.stderr)
        if a.gguf:
            import math
            dot = sum(x * y for x, y in zip(vs[0], vs[-1]))
            cos = dot / math.sqrt(sum(x * x for x in vs[0]) * sum(y * y for y in vs[-1]))
            print(f"cosine candle vs llama-server: {cos:.6f}", file=sys.stderr)
        for s in servers:  # warm-up
            run_level(s.port, model, 4, 32, docs)
        res, allocs, load = {}, {}, []
        for r in range(a.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            for lv in levels:
                for s in order:
                    m0 = s.malloc_count() if s in candles else None
                    x = run_level(s.port, model, lv, a.requests, docs)
                    m1 = s.malloc_count() if m0 else None
                    if m1:
                        allocs.setdefault((s.name, lv), []).append((m1[0] - m0[0]) / x["requests"])
                    x["load"] = os.getloadavg()[0]
                    res.setdefault((s.name, lv), []).append(x)
                    time.sleep(0.2)
            load.append(os.getloadavg()[0])
            print(f"round {r + 1}/{a.rounds} done (load {load[-1]:.2f})", file=sys.stderr)
    finally:
        for s in servers:
            s.stop()

    med = {k: {f: statistics.median(x[f] for x in v) for f in ("requests_per_s", "inputs_per_s", "p50_ms",
                                                                 "p99_ms", "p99_over_p50")} for k, v in res.items()}
    names = [s.name for s in servers]
    out = {"model": a.model, "gguf": a.gguf, "threads": a.threads, "levels": levels, "requests": a.requests,
           "rounds": a.rounds, "cosine": cos, "load_min": min(load), "load_max": max(load),
           "max_batch_tokens": a.max_batch_tokens, "candle_ref": a.candle_ref, "endpoint": a.endpoint,
           "docs": docs,
           "allocs_per_request": {f"{k[0]}/{k[1]}": v for k, v in allocs.items()},
           "results": [{"server": k[0], "clients": k[1], **v, "rounds": res[k]} for k, v in med.items()]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"load average during the run: {min(load):.2f}-{max(load):.2f}; threads {a.threads}; "
          f"failed requests: {sum(x['failed'] for v in res.values() for x in v)}")
    print("\n| server | clients | requests/s | inputs/s | P50 ms | P99 ms | P99/P50 |" +
          (" candle allocs/request |" if allocs else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if allocs else ""))
    for lv in levels:
        for n in names:
            m = med[(n, lv)]
            al = ""
            if allocs:
                al = f" {statistics.median(allocs[(n, lv)]):.0f} |" if (n, lv) in allocs else " - |"
            print(f"| {n} | {lv} | {m['requests_per_s']:.1f} | {m['inputs_per_s']:.1f} | {m['p50_ms']:.2f} | "
                  f"{m['p99_ms']:.2f} | "
                  f"{m['p99_over_p50']:.2f} |{al}")
    if len(names) > 1:
        print(f"\n| clients | server | /{names[-1]} inputs/s | P50 ratio | P99 ratio |")
        print("|---:|---|---:|---:|---:|")
        for lv in levels:
            l = med[(names[-1], lv)]
            for n in names[:-1]:
                c = med[(n, lv)]
                print(f"| {lv} | {n} | {c['inputs_per_s'] / l['inputs_per_s']:.2f} | {c['p50_ms'] / l['p50_ms']:.2f} | "
                      f"{c['p99_ms'] / l['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()
