#!/usr/bin/env python3
"""Grammar-constrained chat generation against unconstrained, Candle and llama.cpp, in one run.

  bench/grammar_compare.py CANDLE LLAMA_SERVER MODEL [--schema bench/prompts/schema20.json]
      [--reps 3] [--tokens 300] [--threads 2] [--passive]

Starts `candle serve` and `llama-server` on the same GGUF file (-t THREADS,
one slot each) and, with --passive, a second llama-server with
OMP_WAIT_POLICY=PASSIVE (llama.cpp's OpenMP threads otherwise spin between
the kernels, which on a shared, loaded machine takes cores from the others).
Each rep sends, to each server in turn, the same greedy streamed
/v1/chat/completions request without and with response_format
{type: json_schema, json_schema: {schema, strict: true}}. The rate is the
generated tokens after the first over the time after the first streamed
token (the decode rate a client sees); llama-server's own timings
(predicted_per_second) are shown beside it. The unconstrained request sets
ignore_eos so that it runs to max_tokens; the constrained one stops where
the JSON ends. Prints the median rates, constrained/unconstrained per
engine, Candle/llama.cpp, and whether each constrained output parses and
validates against the schema (jsonschema).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from serve_util import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = ("Write a JSON record for a fictional user of a web service: id, names, email, age, height, "
          "weight, flags, role, status, location, score, login count, plan, a short bio, newsletter "
          "choice, postal address and a few tags.")


def start(cmd, port, env=None):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(1200):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return p
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit(f"grammar_compare: {cmd[0]} exited with {p.returncode}")
        time.sleep(0.1)
    p.kill()
    sys.exit(f"grammar_compare: {cmd[0]} did not start")


def chat(port, n, schema):
    """(text, completion tokens, client rate, server-reported rate or None) of one streamed request."""
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": n, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    if schema is None:
        body["ignore_eos"] = True
    else:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "user", "schema": schema, "strict": True}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    text, chunks, t1, t_end, usage, timings = [], 0, None, None, None, None
    with urllib.request.urlopen(req, timeout=900) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or usage
            timings = ev.get("timings") or timings
            for c in ev.get("choices") or []:
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    now = time.perf_counter()
                    if t1 is None:
                        t1 = now
                    t_end = now
                    chunks += 1
                    text.append(piece)
    toks = (usage or {}).get("completion_tokens") or chunks
    rate = (toks - 1) / (t_end - t1) if t1 is not None and t_end > t1 else float("nan")
    srv = timings.get("predicted_per_second") if timings else None
    return "".join(text), toks, rate, srv


def validate(text, schema):
    try:
        import jsonschema
    except ImportError:
        return "no jsonschema"
    try:
        jsonschema.validate(json.loads(text), schema)
        return "yes"
    except json.JSONDecodeError as e:
        return f"no (not JSON: {e.msg} at {e.pos})"
    except jsonschema.ValidationError as e:
        return f"no ({e.message[:60]})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("candle")
    ap.add_argument("llama_server")
    ap.add_argument("model")
    ap.add_argument("--schema", default=os.path.join(HERE, "prompts", "schema20.json"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--passive", action="store_true", help="also llama-server with OMP_WAIT_POLICY=PASSIVE")
    ap.add_argument("--dump", help="folder for each engine's last constrained output")
    a = ap.parse_args()
    schema = json.load(open(a.schema))
    t = str(a.threads)

    engines, procs = [], []
    try:
        port = free_port()
        procs.append(start([a.candle, "serve", "-m", a.model, "--port", str(port), "-c", "4096",
                            "--parallel", "1", "-t", t, "--quiet"], port))
        engines.append(("Candle", port))
        variants = [("llama.cpp", {})] + ([("llama.cpp PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"})] if a.passive else [])
        for name, extra in variants:
            port = free_port()
            procs.append(start([a.llama_server, "-m", a.model, "--port", str(port), "-c", "4096", "-np", "1",
                                "-t", t, "-tb", t, "--no-webui"], port, dict(os.environ, **extra)))
            engines.append((name, port))

        res = {(e, m): [] for e, _ in engines for m in ("plain", "schema")}
        srv = {(e, m): [] for e, _ in engines for m in ("plain", "schema")}
        out = {}
        for e, port in engines:  # warm-up: page the weights in, compile the grammar once
            chat(port, 16, schema)
        for rep in range(a.reps):
            for e, port in engines:
                for m in ("plain", "schema"):
                    text, toks, rate, s = chat(port, a.tokens, schema if m == "schema" else None)
                    res[(e, m)].append((rate, toks))
                    if s is not None:
                        srv[(e, m)].append(s)
                    if m == "schema":
                        out[e] = text
            print(f"rep {rep + 1}/{a.reps} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()

    med = {k: statistics.median(r for r, _ in v) for k, v in res.items()}
    print("| engine | unconstrained tok/s (runs) | json_schema tok/s (runs) | tokens (schema) | "
          "schema/plain | server's own tok/s plain / schema | output validates |")
    print("|---|---|---|---:|---:|---|---|")
    for e, _ in engines:
        p, s = res[(e, "plain")], res[(e, "schema")]
        own = (f"{statistics.median(srv[(e, 'plain')]):.1f} / {statistics.median(srv[(e, 'schema')]):.1f}"
               if srv[(e, "plain")] and srv[(e, "schema")] else "")
        print(f"| {e} | {med[(e, 'plain')]:.1f} ({' '.join(f'{r:.1f}' for r, _ in p)}) | "
              f"{med[(e, 'schema')]:.1f} ({' '.join(f'{r:.1f}' for r, _ in s)}) | "
              f"{' '.join(str(n) for _, n in s)} | {med[(e, 'schema')] / med[(e, 'plain')]:.2f}x | {own} | "
              f"{validate(out[e], schema)} |")
    for e, _ in engines[1:]:
        print(f"Candle/{e}: unconstrained {med[('Candle', 'plain')] / med[(e, 'plain')]:.2f}x, "
              f"json_schema {med[('Candle', 'schema')] / med[(e, 'schema')]:.2f}x")
    if a.dump:
        os.makedirs(a.dump, exist_ok=True)
        for e, text in out.items():
            with open(os.path.join(a.dump, e.replace(" ", "_") + ".json"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
