#!/usr/bin/env python3
"""PyTorch (transformers) in f32 on the CPU on a GGUF file: the third peer of
bench/compare, measured the way llama-bench and `candle bench` measure.

    torch_bench.py MODEL.gguf [-p 512] [-n 128] [-r 5] [-t 2]
    torch_bench.py MODEL.gguf --greedy N --ids "1 2 3" [-t 2]

transformers reads the GGUF (needs the `gguf` package) and dequantizes every
tensor to f32, so the model that runs is the file's values in f32 whatever
the file's type. Prompt processing (pp) is one forward over -p random tokens
into an empty KV cache, keeping only the last position's logits (as a
llama.cpp batch with one output); generation (tg) feeds -n random tokens one
at a time through the KV cache. Each test has a warm-up, then -r repetitions.
Prints a JSON list of records in bench/compare's format (samples_ns,
samples_ts, avg_ts, stddev_ts, peak_rss, start_rss, load_s).

--greedy N prints {"ids": [...], "text": "..."}: the N tokens greedy decoding
appends to the prompt ids --ids, and their text by the GGUF's tokenizer (for
the check that Candle and PyTorch agree).

Install torch and transformers with scripts/install-bench-deps.sh (a venv in
build-bench/venv; bench/compare finds it there).
"""
import argparse
import json
import os
import random
import statistics
import sys
import time


def proc_status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def imports(threads):
    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF loading progress bar
    import torch
    if torch.get_num_threads() != threads or torch.get_num_interop_threads() != 1:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)  # allowed once, before any parallel work
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


def load(path, threads):
    torch, transformers = imports(threads)
    from transformers import AutoModelForCausalLM
    path = os.path.abspath(path)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path),
                                                 gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32)
    model.eval()
    return torch, model


def forward(model, ids, cache, keep_last):
    """One forward of ids [1, n] appending to cache (a DynamicCache, updated in
    place); returns the logits."""
    kw = {cache_arg(model): cache, "input_ids": ids, "use_cache": True}
    if keep_last:
        kw["logits_to_keep"] = 1
    return model(**kw).logits


def cache_arg(model):
    """transformers 5.x renamed past_key_values to cache."""
    if not hasattr(model, "_candle_cache_arg"):
        import inspect
        names = inspect.signature(model.forward).parameters
        model._candle_cache_arg = "cache" if "cache" in names else "past_key_values"
    return model._candle_cache_arg


def new_cache():
    from transformers import DynamicCache
    return DynamicCache()


def record(a, n_prompt, n_gen, ns):
    ts = [(n_prompt + n_gen) * 1e9 / x for x in ns]
    return {"model_filename": a.model, "n_threads": a.t, "use_mmap": False,
            "n_prompt": n_prompt, "n_gen": n_gen, "samples_ns": ns, "samples_ts": ts,
            "avg_ns": statistics.mean(ns), "avg_ts": statistics.mean(ts),
            "stddev_ts": statistics.stdev(ts) if len(ts) > 1 else 0.0}


def bench(a):
    imports(a.t)
    rss0 = proc_status_bytes("VmRSS")  # the interpreter with torch and transformers imported
    t0 = time.perf_counter()
    torch, model = load(a.model, a.t)
    t_load = time.perf_counter() - t0
    n_vocab = model.config.vocab_size
    rng = random.Random(42)
    toks = torch.tensor([[rng.randrange(n_vocab) for _ in range(max(a.p, a.n, 1))]])

    def pp():
        t = time.perf_counter()
        forward(model, toks[:, :a.p], new_cache(), True)
        return time.perf_counter() - t

    def tg(n):
        cache = new_cache()
        t = time.perf_counter()
        for i in range(n):
            forward(model, toks[:, i:i + 1], cache, False)
        return time.perf_counter() - t

    recs = []
    with torch.inference_mode():
        for n_prompt, n_gen, fn in ((a.p, 0, pp), (0, a.n, lambda: tg(a.n))):
            if not (n_prompt or n_gen):
                continue
            if n_prompt:
                pp()
            else:
                tg(min(a.n, 4))
            ns = [fn() * 1e9 for _ in range(a.r)]
            recs.append(record(a, n_prompt, n_gen, ns))
    for r in recs:
        r["load_s"] = t_load
        r["peak_rss"] = proc_status_bytes("VmHWM")
        r["start_rss"] = rss0
        r["torch_version"] = torch.__version__
        r["dtype"] = "f32"
    json.dump(recs, sys.stdout, indent=1)


def greedy(a):
    torch, model = load(a.model, a.t)
    ids = [int(x) for x in a.ids.split()]
    out = []
    with torch.inference_mode():
        cache = new_cache()
        logits = forward(model, torch.tensor([ids]), cache, True)
        for _ in range(a.greedy):
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            logits = forward(model, torch.tensor([[nxt]]), cache, False)
    text = None
    try:  # the text too, with the GGUF's own tokenizer (transformers reads it)
        from transformers import AutoTokenizer
        path = os.path.abspath(a.model)
        tok = AutoTokenizer.from_pretrained(os.path.dirname(path),
                                            gguf_file=os.path.basename(path))
        text = tok.decode(out)
    except Exception as e:  # noqa: BLE001 (a missing decode only loses the text check)
        print(f"torch_bench: no tokenizer from the GGUF: {e}", file=sys.stderr)
    json.dump({"ids": out, "text": text}, sys.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--greedy", type=int, default=0, metavar="N")
    ap.add_argument("--ids", default="", help="prompt token ids for --greedy")
    a = ap.parse_args()
    if a.greedy:
        if not a.ids.split():
            ap.error("--greedy needs --ids")
        return greedy(a)
    return bench(a)


if __name__ == "__main__":
    main()
