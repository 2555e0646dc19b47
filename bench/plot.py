#!/usr/bin/env python3
"""Charts of bench/compare results: tokens/s per model and type, Candle beside
llama.cpp and (where compare ran it) PyTorch f32, one chart per test (pp, tg)
and loading mode.

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
    """{(test kind, mode): [(label, candle avg, candle sd, llama avg, llama sd, n,
    torch avg or None, torch sd)]}"""
    out, info = {}, None
    for p in paths:
        d = json.load(open(p))
        info = info or d
        for res in d["results"]:
            ts = res.get("torch") or [None] * len(res["candle"])
            for ce, le, te in zip(res["candle"], res["llama"], ts):
                kind = "pp" if ce["n_prompt"] else "tg"
                n = ce["n_prompt"] or ce["n_gen"]
                label = f"{res['name']}\n{res['type']}"
                out.setdefault((kind, res["mode"]), []).append(
                    (label, ce["avg_ts"], ce["stddev_ts"], le["avg_ts"], le["stddev_ts"], n,
                     te["avg_ts"] if te else None, te["stddev_ts"] if te else 0.0))
    return out, info


def chart(plt, rows, kind, mode, info, path):
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows) + 2), 4.2))
    x = list(range(len(rows)))
    c = [r[1] for r in rows]
    l = [r[3] for r in rows]
    t = [r[6] for r in rows]
    has_t = any(v is not None for v in t)
    w = 0.27 if has_t else 0.38
    off = w if has_t else w / 2
    ax.bar([i - off for i in x], c, w, yerr=[r[2] for r in rows], label="Candle", color="#d95f02",
           capsize=3)
    ax.bar([i + (0 if has_t else off) for i in x], l, w, yerr=[r[4] for r in rows],
           label="llama.cpp", color="#7570b3", capsize=3)
    if has_t:
        ti = [i for i in x if t[i] is not None]
        ax.bar([i + off for i in ti], [t[i] for i in ti], w, yerr=[rows[i][7] for i in ti],
               label="PyTorch f32", color="#1b9e77", capsize=3)
    for i, (cv, lv, tv) in enumerate(zip(c, l, t)):
        r = rows[i]  # above the error bars
        top = max(cv + r[2], lv + r[4], (tv or 0) + r[7])
        note = f"{cv / lv:.2f}x" if lv > 0 else ""
        if tv:
            note += f"\n{cv / tv:.2f}x PT"
        if note:
            ax.annotate(note, (i, top), ha="center", va="bottom", fontsize=7)
    ax.margins(y=0.12)  # room for the labels above the bars
    ax.set_xticks(x)
    ax.set_xticklabels([r[0] for r in rows], fontsize=8)
    ax.set_ylabel("tokens/s")
    ns = sorted({r[5] for r in rows})
    what = "prompt processing" if kind == "pp" else "generation"
    threads = info["args"]["t"] if info else "?"
    ax.set_title(f"{what} ({kind}{'/'.join(map(str, ns))}), {threads} threads, "
                 f"{'mmap' if mode == 'mmap' else 'no mmap'}\nlabel: Candle / llama.cpp"
                 + (", Candle / PyTorch (PT)" if has_t else ""), fontsize=9)
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
