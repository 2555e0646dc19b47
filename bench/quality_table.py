#!/usr/bin/env python3
"""The quality-retention table (issue 23 part 5): one base model quantized to
each type by `candle quantize`, then perplexity and KL divergence against the
base, by Candle and by llama.cpp's llama-perplexity on the same files.

  bench/quality_table.py --base BASE.gguf [--candle build/bin/candle]
      [--llama-bin DIR] [--text FILE] [--ctx 512] [--threads 2]
      [--types F16,Q8_0,...] [--work DIR] [--name NAME] [--extra NAME=DIR,...]

BASE is an F32 (or F16) GGUF: for the real models here, whose originals are
not available, the quantized file dequantized to F32 with
`candle quantize --allow-requantize FILE BASE.gguf F32`. The text defaults to
the GPL-3 licence Debian ships (/usr/share/common-licenses/GPL-3): fixed and on
every machine. Prints a Markdown table; the raw outputs stay in --work.

--extra adds rows for checkpoints made elsewhere (bench/quantize_gptq_awq.py's
GPTQ-4 and AWQ-4 directories of the same base): Candle runs the directory as
it loads it; llama.cpp, which reads no GPTQ/AWQ, runs the F32 GGUF of its
dequantized weights (`candle quantize DIR X.gguf F32`), the same values. Their
size is the directory's safetensors. --extra-base names the base as such a
directory when its tokenizer.json splits the text unlike the GGUF's vocabulary:
Candle's rows for the extras are then against its distributions.
"""
import argparse
import os
import re
import subprocess
import sys

TYPES = ["F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K"]


def run(cmd, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        f.write(" ".join(cmd) + "\n" + p.stdout)
    if p.returncode != 0:
        sys.exit(f"quality_table: {' '.join(cmd)} failed (exit {p.returncode}), see {log}")
    return p.stdout


def grab(out, pattern):
    m = re.search(pattern, out)
    return float(m.group(1)) if m else None


def kld_stats(out):
    # Candle's KLD mode prints llama-perplexity's lines, so one parser reads both.
    return {
        "ppl": grab(out, r"Mean PPL\(Q\)\s*:\s*([0-9.]+)"),
        "base_ppl": grab(out, r"Mean PPL\(base\)\s*:\s*([0-9.]+)"),
        "ratio": grab(out, r"Mean PPL\(Q\)/PPL\(base\)\s*:\s*([0-9.]+)"),
        "kld": grab(out, r"Mean\s+KLD:\s*([0-9.eE+-]+)"),
        "top1": grab(out, r"Same top p:\s*([0-9.]+)"),
    }


def measured(cmd, log):
    """kld_stats of cmd's run, or of an earlier run's complete log (a rerun in the
    same --work folder measures only what is missing)."""
    if os.path.exists(log):
        st = kld_stats(open(log).read())
        if st["kld"] is not None and st["top1"] is not None:
            return st
    return kld_stats(run(cmd, log))


def n_params(candle, path, work):
    out = run([candle, "info", path], os.path.join(work, "info.log"))
    m = re.search(r"parameters:\s+\S+ \((\d+)\)", out)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--candle", default="build/bin/candle")
    ap.add_argument("--llama-bin", help="folder with llama-perplexity (llama.cpp built outside the repo)")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--work", default="build-bench/quality")
    ap.add_argument("--name", default=None)
    ap.add_argument("--extra", default="", help="NAME=DIR,... rows for GPTQ/AWQ directories")
    ap.add_argument("--extra-base", help="the base as a directory of the extras' tokenizer.json "
                    "(quantize_gptq_awq.py's f32), when it splits the text unlike the GGUF's")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    name = a.name or os.path.basename(a.base).replace(".gguf", "")
    common = ["-f", a.text, "-c", str(a.ctx), "-t", str(a.threads)]
    lcommon = ["-f", a.text, "-c", str(a.ctx), "-t", str(a.threads)]
    # The base's distributions are saved once per --work folder (delete the
    # files to redo them; both tools refuse a base of another text or -c).
    base_kld = os.path.join(a.work, f"{name}.base.ckld")
    if not os.path.exists(base_kld):
        run([a.candle, "perplexity", "-m", a.base, *common, "--kl-divergence-base", base_kld],
            os.path.join(a.work, f"{name}.base.candle.log"))
    llama_ppl = None
    if a.llama_bin:
        lbase = os.path.join(a.work, f"{name}.base.lkld")
        if not os.path.exists(lbase):
            run([os.path.join(a.llama_bin, "llama-perplexity"), "-m", a.base, *lcommon,
                 "--kl-divergence-base", lbase], os.path.join(a.work, f"{name}.base.llama.log"))
        llama_ppl = os.path.join(a.llama_bin, "llama-perplexity")

    rows = []
    for t in a.types.split(","):
        q = os.path.join(a.work, f"{name}.{t}.gguf")
        if not os.path.exists(q):
            run([a.candle, "quantize", a.base, q, t], os.path.join(a.work, f"{name}.{t}.quantize.log"))
        c = measured([a.candle, "perplexity", "-m", q, *common, "--kl-divergence-base", base_kld,
                      "--kl-divergence"], os.path.join(a.work, f"{name}.{t}.candle.log"))
        l = None
        if llama_ppl:
            l = measured([llama_ppl, "-m", q, *lcommon, "--kl-divergence-base", lbase, "--kl-divergence"],
                         os.path.join(a.work, f"{name}.{t}.llama.log"))
        rows.append((t, os.path.getsize(q), c, l))
        print(f"{t}: candle {c}  llama {l}", file=sys.stderr, flush=True)
    extra_kld = base_kld
    if a.extra and a.extra_base:
        extra_kld = os.path.join(a.work, f"{name}.extra-base.ckld")
        if not os.path.exists(extra_kld):
            run([a.candle, "perplexity", "-m", a.extra_base, *common, "--kl-divergence-base", extra_kld],
                os.path.join(a.work, f"{name}.extra-base.candle.log"))
    for item in filter(None, a.extra.split(",")):
        t, d = item.split("=", 1)
        c = measured([a.candle, "perplexity", "-m", d, *common, "--kl-divergence-base", extra_kld,
                      "--kl-divergence"], os.path.join(a.work, f"{name}.{t}.candle.log"))
        l = None
        if llama_ppl:
            q = os.path.join(a.work, f"{name}.{t}.dequantized.F32.gguf")
            if not os.path.exists(q):
                run([a.candle, "quantize", "--allow-requantize", d, q, "F32"],
                    os.path.join(a.work, f"{name}.{t}.quantize.log"))
            l = measured([llama_ppl, "-m", q, *lcommon, "--kl-divergence-base", lbase, "--kl-divergence"],
                         os.path.join(a.work, f"{name}.{t}.llama.log"))
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors"))
        rows.append((t, size, c, l))
        print(f"{t}: candle {c}  llama {l}", file=sys.stderr, flush=True)

    params = None
    try:
        params = n_params(a.candle, a.base, a.work)
    except SystemExit:
        pass
    print(f"\n{name}: text {os.path.basename(a.text)}, -c {a.ctx}, base PPL candle "
          f"{rows[0][2]['base_ppl'] if rows else '-'}" +
          (f", llama.cpp {rows[0][3]['base_ppl']}" if rows and rows[0][3] else ""))
    hdr = "| type | bpw | size MB | PPL | PPL ratio | mean KLD | same top-1 |"
    sep = "|---|---|---|---|---|---|---|"
    if llama_ppl:
        hdr += " llama.cpp PPL | llama.cpp ratio | llama.cpp KLD | KLD Candle/llama.cpp |"
        sep += "---|---|---|---|"
    print(hdr + "\n" + sep)

    def f(v, d):
        return "-" if v is None else f"{v:.{d}f}"

    for t, size, c, l in rows:
        bpw = f"{size * 8 / params:.2f}" if params else "-"
        line = (f"| {t} | {bpw} | {size / 1e6:.1f} | {f(c['ppl'], 4)} | {f(c['ratio'], 5)} | "
                f"{f(c['kld'], 6)} | {f(c['top1'], 2)}% |")
        if l:
            rel = f"{c['kld'] / l['kld']:.3f}" if c["kld"] is not None and l["kld"] else "-"
            line += f" {f(l['ppl'], 4)} | {f(l['ratio'], 5)} | {f(l['kld'], 6)} | {rel} |"
        print(line)


if __name__ == "__main__":
    main()
