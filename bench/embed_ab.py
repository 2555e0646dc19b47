#!/usr/bin/env python3
"""Two Candle builds' sentence-embedding latency, interleaved in one run:
`candle bench embed` of each binary per configuration, the binaries' order
flipped every round; the figure is the median over rounds of each run's P50
(load varies on a shared machine: the 1-minute load average after each
round is printed).

    python3 bench/embed_ab.py --old /work/main/build/bin/candle --new build/bin/candle \\
        -m MODEL_DIR [--rounds 9] [-t 1]

Configurations: 16 and 128 tokens, batch 1 and 32 (reps 40, 20, 6, 3).
"""
import argparse
import json
import os
import statistics
import subprocess

CONFIGS = ((16, 1, 40), (128, 1, 20), (16, 32, 6), (128, 32, 3))


def p50(binary, model, threads, tokens, batch, reps):
    out = subprocess.run([binary, "bench", "embed", "-m", model, "--lengths", str(tokens), "--batch", str(batch),
                          "-t", str(threads), "--reps", str(reps), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])["results"][0]["p50_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("-t", "--threads", type=int, default=1)
    a = ap.parse_args()
    bins = {"old": a.old, "new": a.new}
    res, loads = {}, []
    for r in range(a.rounds):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            for tokens, batch, reps in CONFIGS:
                res.setdefault((tokens, batch), {}).setdefault(name, []).append(
                    p50(bins[name], a.model, a.threads, tokens, batch, reps))
        loads.append(os.getloadavg()[0])
    print("load averages (1 min) after each round:", " ".join(f"{x:.2f}" for x in loads))
    print("| tokens | batch | old P50 ms | new P50 ms | old/new |")
    print("|---|---:|---:|---:|---:|")
    for (tokens, batch), v in sorted(res.items()):
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        print(f"| {tokens} | {batch} | {o:.3f} | {n:.3f} | {o / n:.3f} |")


if __name__ == "__main__":
    main()
