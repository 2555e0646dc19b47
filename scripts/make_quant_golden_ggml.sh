#!/usr/bin/env bash
# Golden quantized blocks for the K types, q8_1 and iq4_* from ggml's
# reference quantizers (the gguf package only dequantizes these).
# Usage: scripts/make_quant_golden_ggml.sh /path/to/ggml-checkout [outdir]
# (a checkout of ggml-org/ggml; x86-64 little-endian; writes tests/data/quant/*.q)
set -euo pipefail
ggml=${1:?usage: $0 GGML_CHECKOUT [OUTDIR]}
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here/../tests/data/quant}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
$cc -O2 -ffp-contract=off -c "$ggml/src/ggml-quants.c" -I"$ggml/include" -I"$ggml/src" -o "$tmp/ggml-quants.o"
$cc -O2 -ffp-contract=off "$here/quant_golden_ggml.c" "$tmp/ggml-quants.o" -o "$tmp/gen" -lm
mkdir -p "$out"
"$tmp/gen" "$out"
