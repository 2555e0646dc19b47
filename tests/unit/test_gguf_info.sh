#!/usr/bin/env bash
# `candle info`: the summary, metadata and tensor table of a real GGUF file,
# CPU info without a file, and a clean error for malformed files.
set -euo pipefail
CANDLE="${CANDLE:?}"
model="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:?}/../shared}/data/models/stories260K.gguf"
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

out=$("$CANDLE" info)
[ -n "$out" ] || { echo "candle info printed nothing"; fail=1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -r "$model" ]; then
    out=$("$CANDLE" info "$model")
    expect "$out" 'format:        GGUF v3, alignment 32, 19 keys, 48 tensors' \
        'architecture:  llama' 'parameters:    292.80K (292800)' 'bits/weight:   32.39' \
        'f32          48 tensors       292800 params' \
        '[str x 512] ["<unk>", "<s>", "</s>",' 'llama.attention.layer_norm_rms_epsilon       f32  1e-05' \
        'token_embd.weight                        f32     [512, 64]                     14176'
    out2=$("$CANDLE" info --no-mmap "$model")
    [ "$out" = "$out2" ] || { echo "--no-mmap output differs"; fail=1; }
    head -c 20000 "$model" >"$tmp/cut.gguf"
    if "$CANDLE" info "$tmp/cut.gguf" >/dev/null 2>"$tmp/err"; then
        echo "truncated file accepted"
        fail=1
    fi
    expect "$(cat "$tmp/err")" "cut.gguf: gguf: tensor 'token_embd.weight' offset: " ' at offset '
else
    echo "SKIP: stories260K checks: $model absent"
fi
printf 'GGUF\x09\x00\x00\x00' >"$tmp/v9.gguf"
if "$CANDLE" info "$tmp/v9.gguf" >/dev/null 2>"$tmp/err"; then
    echo "version 9 accepted"
    fail=1
fi
expect "$(cat "$tmp/err")" 'gguf: version: 9 is not supported (only 2 and 3) at offset 4'
if "$CANDLE" info --bogus >/dev/null 2>&1; then
    echo "--bogus accepted"
    fail=1
fi
[ $fail -eq 0 ] && echo "test_gguf_info: passed"
exit $fail
