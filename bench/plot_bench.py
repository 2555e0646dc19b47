#!/usr/bin/env python3
"""Charts of the encoder and Whisper benchmarks, Candle beside its peers.

    bench/plot_bench.py embed RESULT.json OUT.png     (bench/embed_compare.py --json)
    bench/plot_bench.py whisper TABLE.tsv OUT.png     (columns model, beam, engine, transcribe_s)
    bench/plot_bench.py serve-embed R1.json[,R2.json] OUT.png   (bench/serve_embed.py --json)

embed: inputs/s per engine for each (threads, tokens, batch), one panel for
batch 1 and one for larger batches. whisper: seconds of transcription per
engine for each (model, beam). serve-embed: inputs/s and P99/P50 latency per
server for each (threads, clients). Uses bench/plot.py's matplotlib (installed
with pip --user when missing).
"""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import need_matplotlib  # noqa: E402


def bars(ax, groups, engines, value, ylabel, title):
    width = 0.8 / max(1, len(engines))
    for i, eng in enumerate(engines):
        xs = [g + (i - (len(engines) - 1) / 2) * width for g in range(len(groups))]
        ys = [value(grp, eng) for grp in groups]
        ax.bar(xs, [y or 0 for y in ys], width, label=eng)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[1] for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)


def embed(path, out, plt):
    with open(path) as f:
        d = json.load(f)
    rows = d["results"]
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, want_one in zip(axes, (True, False)):
        keys = sorted({(r["batch"], r["threads"], r["tokens"]) for r in rows if (r["batch"] == 1) == want_one})
        groups = [(k, "b%d t%d %dtok" % k) for k in keys]
        val = {(r["batch"], r["threads"], r["tokens"], r["engine"]): r["inputs_per_s"] for r in rows}
        bars(ax, groups, engines, lambda g, e: val.get(g[0] + (e,)), "inputs/s (higher is better)",
             "%s: batch %s" % (os.path.basename(d["model"]), "1" if want_one else "> 1"))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def whisper(path, out, plt):
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    keys = list(dict.fromkeys((r["model"], r["beam"]) for r in rows))
    label = "beam" if all(k[1].isdigit() for k in keys) else "file"
    groups = [(k, "%s %s %s" % (k[0], label, k[1])) for k in keys]
    val = {(r["model"], r["beam"], r["engine"]): float(r["transcribe_s"]) for r in rows}
    fig, ax = plt.subplots(figsize=(11, 4.5))
    bars(ax, groups, engines, lambda g, e: val.get(g[0] + (e,)), "seconds (lower is better)",
         "Whisper: transcription time, " + os.path.basename(os.path.dirname(os.path.abspath(path))))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def serve_embed(paths, out, plt):
    rows, model = [], ""
    for p in paths.split(","):
        with open(p) as f:
            d = json.load(f)
        model = os.path.basename(d["model"])
        rows += [dict(r, threads=d["threads"]) for r in d["results"]]
    servers = list(dict.fromkeys(r["server"] for r in rows))
    keys = sorted({(r["threads"], r["clients"]) for r in rows})
    groups = [(k, "t%d, %d clients" % k) for k in keys]
    val = {(r["threads"], r["clients"], r["server"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    bars(axes[0], groups, servers, lambda g, e: (val.get(g[0] + (e,)) or {}).get("inputs_per_s"),
         "inputs/s (higher is better)", "%s: POST /v1/embeddings, one sentence each" % model)
    bars(axes[1], groups, servers, lambda g, e: (val.get(g[0] + (e,)) or {}).get("p99_over_p50"),
         "P99 / P50 latency (target <= 1.5 at 16 clients)", "%s: latency spread" % model)
    axes[1].axhline(1.5, color="grey", linestyle="--", linewidth=1)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    modes = {"embed": embed, "whisper": whisper, "serve-embed": serve_embed}
    if len(sys.argv) != 4 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    plt = need_matplotlib()
    modes[sys.argv[1]](sys.argv[2], sys.argv[3], plt)
    print(sys.argv[3])


if __name__ == "__main__":
    main()
