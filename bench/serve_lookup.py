#!/usr/bin/env python3
"""`candle serve --lookup` against plain serving, interleaved in one run.

  bench/serve_lookup.py CANDLE MODEL [--lookup 3 | --draft-model PATH] [--draft-max 8]
      [--tokens 256] [--reps 3] [--clients 1,4] [--threads 2] [--base CANDLE_B] [PROMPT_FILE ...]

Two servers on the same model (one with --lookup, or with --draft-model
PATH: a draft model's drafts instead): for each prompt file and
client count, greedy streamed completions go to each in turn; the rate is
the generated tokens after the first over the time after the first (the
decode rate a client sees), summed over the clients. Prints the median rate
of each, their ratio, the acceptance (from /metrics) and whether the texts
are equal. Default prompts: bench/prompts/code_edit.txt and story.txt.
With --base CANDLE_B, a third server, CANDLE_B's with the same drafts (a
build before a change), takes its turn after the two in every repetition,
and its rate and ratio to the plain server are printed beside.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from serve_util import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def start(candle, model, threads, extra):
    port = free_port()
    p = subprocess.Popen([candle, "serve", "-m", model, "--port", str(port), "-c", "4096", "--parallel", "8",
                          "-t", str(threads), "--quiet", *extra], stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return p, port
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit("serve_lookup: the server did not start")


def stream(port, prompt, n):
    """(text, tokens, seconds after the first token) of one greedy streamed completion."""
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    text, chunks, t1 = [], 0, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            d = json.loads(line[6:])
            t = d["choices"][0].get("text", "")
            if t:
                if t1 is None:
                    t1 = time.time()
                text.append(t)
    return "".join(text), time.time() - (t1 or time.time())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def rate(port, prompt, n, clients, tokenize):
    out = [None] * clients

    def one(i):
        out[i] = stream(port, prompt, n)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # tokens after the first: n - 1 each (ignore_eos), over the slowest client's time
    return clients * (n - 1) / max(s for _, s in out), out[0][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("candle")
    ap.add_argument("model")
    ap.add_argument("prompts", nargs="*")
    ap.add_argument("--lookup", type=int, default=3)
    ap.add_argument("--draft-model", help="the second server drafts with this model instead of --lookup")
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clients", default="1,4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--base", help="another build's drafting server, measured in the same turns")
    a = ap.parse_args()
    prompts = a.prompts or [os.path.join(HERE, "prompts", f) for f in ("code_edit.txt", "story.txt")]
    sp, pport = start(a.candle, a.model, a.threads, [])
    spec = ["--draft-model", a.draft_model] if a.draft_model else ["--lookup", str(a.lookup)]
    kind = "draft" if a.draft_model else "lookup"
    sl, lport = start(a.candle, a.model, a.threads, [*spec, "--draft-max", str(a.draft_max)])
    sb, bport = start(a.base, a.model, a.threads, [*spec, "--draft-max", str(a.draft_max)]) if a.base else (None, None)
    try:
        what = f"--draft-model {os.path.basename(a.draft_model)}" if a.draft_model else f"--lookup {a.lookup}"
        print(f"{os.path.basename(a.model)}, {a.tokens} tokens, greedy, -t {a.threads}, {what} "
              f"--draft-max {a.draft_max}, median of {a.reps}")
        if a.base:
            print(f"base: {a.base}")
        extra = f" base {kind} tok/s | base ratio | base acceptance |" if a.base else ""
        print(f"| prompt | clients | plain tok/s | {kind} tok/s | ratio | acceptance |{extra} same text |")
        print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if a.base else "") + "---|")
        for path in prompts:
            prompt = open(path).read()
            for c in [int(x) for x in a.clients.split(",")]:
                ports = [lport, bport] if a.base else [lport]
                counts = lambda: [(metric(q, "candle_spec_drafted_tokens_total"),
                                   metric(q, "candle_spec_accepted_tokens_total")) for q in ports]
                c0 = counts()
                rp, rl, same = [], [[] for _ in ports], True
                for _ in range(a.reps):
                    r1, t1 = rate(pport, prompt, a.tokens, c, None)
                    rp.append(r1)
                    for j, q in enumerate(ports):
                        r2, t2 = rate(q, prompt, a.tokens, c, None)
                        rl[j].append(r2)
                        same &= t1 == t2
                mp = statistics.median(rp)
                cols = []
                for (d0, a0), (d1, a1), r in zip(c0, counts(), rl):
                    ml = statistics.median(r)
                    cols.append(f"{ml:.1f} | {ml / mp:.2f}x | {100 * (a1 - a0) / max(d1 - d0, 1):.0f}% of {d1 - d0:.0f}")
                print(f"| {os.path.basename(path)} | {c} | {mp:.1f} | {' | '.join(cols)} | "
                      f"{'yes' if same else 'no'} |", flush=True)
    finally:
        sp.kill()
        sl.kill()
        if sb:
            sb.kill()


if __name__ == "__main__":
    main()
