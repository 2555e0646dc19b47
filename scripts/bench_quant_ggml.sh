#!/usr/bin/env bash
# Candle's quant kernels vs ggml's x86 (AVX2) kernels, single thread.
# Usage: scripts/bench_quant_ggml.sh GGML_CHECKOUT [BUILD_DIR]
# (a checkout of ggml-org/ggml; BUILD_DIR holds lib/libcandle.a, default build)
set -euo pipefail
ggml=${1:?usage: $0 GGML_CHECKOUT [BUILD_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
flags="-O2 -mavx2 -mfma -mf16c"
$cc $flags -c "$ggml/src/ggml-quants.c" -I"$ggml/include" -I"$ggml/src" -o "$tmp/q.o"
$cc $flags -c "$ggml/src/ggml-cpu/arch/x86/quants.c" -I"$ggml/include" -I"$ggml/src" -I"$ggml/src/ggml-cpu" -o "$tmp/cpu.o"
$cc -O2 -std=c11 -D_GNU_SOURCE -I"$here/../include" "$here/bench_quant_ggml.c" "$tmp/q.o" "$tmp/cpu.o" \
    "$build/lib/libcandle.a" -o "$tmp/bench" -lm -lpthread -ldl
"$tmp/bench"
