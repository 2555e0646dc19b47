#!/usr/bin/env python3
"""Charts of bench/compare results: tokens/s per model and type, Candle beside
llama.cpp, one chart per test (pp, tg) and loading mode.

    bench/plot.py [--out bench/results] compare.json [compare.json ...]

Writes OUT/<test>-<mode>.png (e.g. tg-mmap.png) and prints their paths.
Installs matplotlib with pip (--user) when it is missing.
"""
import argparse
import json
import os
import subprocess
import sys


def need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--user", "-q", "matplotlib"])
        import site
        import importlib
        importlib.reload(site)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def load(paths):
    """{(test kind, mode): [(label, candle avg, candle sd, llama avg, llama sd, n)]}"""
    out, info = {}, None
    for p in paths:
        d = json.load(open(p))
        info = info or d
        for res in d["results"]:
            for ce, le in zip(res["candle"], res["llama"]):
                kind = "pp" if ce["n_prompt"] else "tg"
                n = ce["n_prompt"] or ce["n_gen"]
                label = f"{res['name']}\n{res['type']}"
                out.setdefault((kind, res["mode"]), []).append(
                    (label, ce["avg_ts"], ce["stddev_ts"], le["avg_ts"], le["stddev_ts"], n))
    return out, info


def chart(plt, rows, kind, mode, info, path):
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows) + 2), 4.2))
    x = list(range(len(rows)))
    w = 0.38
    c = [r[1] for r in rows]
    l = [r[3] for r in rows]
    ax.bar([i - w / 2 for i in x], c, w, yerr=[r[2] for r in rows], label="Candle", color="#d95f02",
           capsize=3)
    ax.bar([i + w / 2 for i in x], l, w, yerr=[r[4] for r in rows], label="llama.cpp",
           color="#7570b3", capsize=3)
    for i, (cv, lv) in enumerate(zip(c, l)):
        if lv > 0:
            ax.annotate(f"{cv / lv:.2f}x", (i, max(cv, lv)), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels([r[0] for r in rows], fontsize=8)
    ax.set_ylabel("tokens/s")
    ns = sorted({r[5] for r in rows})
    what = "prompt processing" if kind == "pp" else "generation"
    threads = info["args"]["t"] if info else "?"
    ax.set_title(f"{what} ({kind}{'/'.join(map(str, ns))}), {threads} threads, "
                 f"{'mmap' if mode == 'mmap' else 'no mmap'}; label: Candle / llama.cpp", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    a = ap.parse_args()
    plt = need_matplotlib()
    data, info = load(a.files)
    os.makedirs(a.out, exist_ok=True)
    for (kind, mode), rows in sorted(data.items()):
        path = os.path.join(a.out, f"{kind}-{mode}.png")
        chart(plt, rows, kind, mode, info, path)
        print(path)


if __name__ == "__main__":
    main()
