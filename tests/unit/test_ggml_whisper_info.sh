#!/usr/bin/env bash
# `candle info ggml-model.bin`: a whisper.cpp file's hparams and tensors (the
# committed fuzz seed whisper_q8_0.bin), the same with --no-mmap, and a clean
# error for a truncated one.
set -euo pipefail
CANDLE="${CANDLE:?}"
src="${CANDLE_SOURCE_DIR:?}"
seed="$src/tests/fuzz/corpus/ggml_whisper/whisper_q8_0.bin"
fail=0
expect() { # expect OUTPUT WANT...
    local out="$1"
    shift
    for want in "$@"; do
        if ! grep -qF -- "$want" <<<"$out"; then
            echo "output lacks '$want'"
            fail=1
        fi
    done
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$CANDLE" info "$seed")
expect "$out" 'format:        whisper.cpp ggml, 50 tensors, 32 tokens, mel filters 2 x 3' \
    'n_vocab 40, audio ctx 6 state 32 heads 2 layers 1' 'ftype 7 (quantization version 2)' \
    'encoder.conv1.weight' 'f16      [32, 2, 3]' 'decoder.token_embedding.weight' 'q8_0     [40, 32]'
out2=$("$CANDLE" info --no-mmap "$seed")
[ "$out" = "$out2" ] || { echo "--no-mmap output differs"; fail=1; }
head -c 1000 "$seed" >"$tmp/cut.bin"
if "$CANDLE" info "$tmp/cut.bin" >/dev/null 2>"$tmp/err"; then
    echo "truncated file accepted"
    fail=1
fi
expect "$(cat "$tmp/err")" "cut.bin: " "runs past the end of the file"
[ "$fail" = 0 ] && echo "test_ggml_whisper_info: ok"
exit "$fail"
