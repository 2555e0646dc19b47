#!/usr/bin/env bash
# bench/compare's report without running any engine: the summary and per-model
# tables from synthetic records, with and without the PyTorch peer, the
# roofline percentages (tg against bandwidth, pp against the FMA peak), the
# FLOPs per prompt token of a real GGUF (stories260K, when gguf is installed),
# --torch on failing cleanly without torch, and bench/plot.py's charts (when
# matplotlib is installed). The helper scripts parse.
set -euo pipefail

SRC="${CANDLE_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bash -n "$SRC/scripts/install-bench-deps.sh"
bash -n "$SRC/bench/make_bench_models.sh"
python3 -m py_compile "$SRC/bench/torch_bench.py" "$SRC/bench/plot.py"
python3 "$SRC/bench/torch_bench.py" --help | grep -q -- "--greedy"
python3 "$SRC/bench/compare" --help | grep -q -- "--torch"

# --torch on with a python that has no torch: a message, not a traceback
if python3 "$SRC/bench/compare" --torch on --torch-python /bin/false --candle /bin/true \
    "$tmp/none.gguf" >"$tmp/out" 2>&1; then
    echo "FAIL: --torch on without torch succeeded"; exit 1
fi
grep -q "no python imports torch" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: message"; exit 1; }
if grep -q Traceback "$tmp/out"; then cat "$tmp/out"; echo "FAIL: traceback"; exit 1; fi

STORIES="${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf"
python3 - "$SRC/bench/compare" "$tmp" "$STORIES" <<'EOF'
import importlib.machinery, importlib.util, json, os, sys, types

path, tmp, stories = sys.argv[1:4]
loader = importlib.machinery.SourceFileLoader("compare", path)
spec = importlib.util.spec_from_loader("compare", loader)
cmp = importlib.util.module_from_spec(spec)
loader.exec_module(cmp)
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def rec(n_prompt, n_gen, ts, sd=1.0, rss=200 << 20, rss0=4 << 20):
    return {"n_prompt": n_prompt, "n_gen": n_gen, "avg_ts": ts, "stddev_ts": sd,
            "peak_rss": rss, "start_rss": rss0, "samples_ts": [ts]}


mach = {"bw_read_gbs": 10.0, "fma_gflops": 100.0}
base = {"model": "m/SmolLM2-135M.Q4_0.gguf", "name": "SmolLM2-135M", "type": "Q4_0",
        "mode": "mmap", "file_size": 100 << 20, "bytes_per_token": 50e6,
        "bytes_per_token_f32": 400e6, "flops_per_prompt_token": 1e9,
        "candle": [rec(512, 0, 40.0), rec(0, 128, 100.0)],
        "llama": [rec(512, 0, 20.0), rec(0, 128, 50.0)]}
with_t = dict(base, torch=[rec(512, 0, 10.0), rec(0, 128, 5.0, rss=1 << 30)],
              torch_source="m/SmolLM2-135M.F16.gguf", torch_source_size=200 << 20,
              torch_version="9.9")
a = types.SimpleNamespace(t=2, p=512, n=128, r=5, rounds=1, latency=0, omp_wait="default", depth=None,
                          cache_type="f16")
check(cmp.parse_depths("512,2048,512") == [512, 2048] and cmp.parse_depths(None) == [], "--depth parsing")

# roofline: tg 100 t/s x 50 MB = 5 GB/s of 10 = 50 %; PyTorch 5 x 400 MB = 20 %;
# pp 40 t/s x 1 GFLOP = 40 GFLOP/s of 100 = 40 %
check(abs(cmp.roofline(base["candle"][1], base, "candle", mach) - 50.0) < 1e-9, "tg roofline")
check(abs(cmp.roofline(with_t["torch"][1], with_t, "torch", mach) - 20.0) < 1e-9,
      "torch tg roofline uses f32 bytes")
check(abs(cmp.roofline(base["candle"][0], base, "candle", mach) - 40.0) < 1e-9, "pp roofline")
check(cmp.roofline(None, base, "torch", mach) is None, "no record, no roofline")

checks = [{"name": "SmolLM2-135M", "model": "m/SmolLM2-135M.F16.gguf", "tokens": 16,
           "verdict": "same text ' Paris.'"}]
for name, res, want, absent in (
        ("torch", with_t, ["| PyTorch f32 t/s |", "| 2.00 | 4.00 | 40 / 20 / 10 |",
                           "| 2.00 | 20.00 | 50 / 25 / 20 |", "PyTorch 9.9, f32",
                           "PyTorch: f32 from SmolLM2-135M.F16.gguf", "greedy check SmolLM2-135M"],
         []),
        ("plain", base, ["| Candle / llama.cpp | % roofline Candle / llama.cpp |",
                         "| 2.00 | 40 / 20 |"], ["PyTorch"])):
    out = os.path.join(tmp, name)
    os.makedirs(out)
    sys.stdout = open(os.devnull, "w")
    cmp.print_report([res], mach, a, out, checks if name == "torch" else [], "/x/bin/candle")
    sys.stdout = sys.__stdout__
    text = open(os.path.join(out, "compare.md")).read()
    for w in want:
        check(w in text, f"{name} report lacks {w!r}:\n{text}")
    for w in absent:
        check(w not in text, f"{name} report has {w!r}")
    json.dump({"args": {"t": 2}, "results": [res]}, open(os.path.join(tmp, name + ".json"), "w"))

# PyTorch's (peak - baseline) / file size is against the file it loaded
rows = {r[0]: r for r in cmp.figures(with_t, mach)}
fs = rows["(peak - baseline) / file size"]
check(abs(fs[3] - ((1 << 30) - (4 << 20)) / (200 << 20)) < 1e-9, "torch RSS ratio vs its file")

try:
    import gguf  # noqa: F401
    have_gguf = os.path.exists(stories)
except ImportError:
    have_gguf = False
if have_gguf:
    # stories260K: 5 layers, dim 64, 8 heads of 8, 4 KV heads, n_ff 172: 2 x (2 x 64 x 64
    # + 2 x 64 x 32 + 3 x 64 x 172) x 5 FLOPs of matrices per token (the output
    # matrix not counted: pp keeps the last position's logits only), plus
    # attention 5 x 2 x 8 x (8 + 8) x (p + 1) / 2 = 2560 at p = 3
    bpt, bpt32, flops, ftype = cmp.model_stats(stories, 3)
    want = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172) * 5 + 2560
    check(flops == want, f"stories flops {flops} != {want}")
    check(bpt32 == bpt and ftype == "F32", f"stories f32 bytes {bpt} {bpt32} {ftype}")
else:
    print("SKIP: model_stats: no gguf package or no stories260K.gguf")
if fails:
    print("FAIL:\n" + "\n".join(fails))
    sys.exit(1)
EOF

if python3 -c 'import matplotlib' 2>/dev/null; then
    python3 "$SRC/bench/plot.py" --out "$tmp/png" "$tmp/torch.json" "$tmp/plain.json" >/dev/null
    for f in pp-mmap tg-mmap; do
        [ -s "$tmp/png/$f.png" ] || { echo "FAIL: no $f.png"; exit 1; }
    done
else
    echo "SKIP: plot: matplotlib not installed"
fi
echo "test_bench_compare: OK"
