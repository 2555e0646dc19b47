#!/usr/bin/env bash
# `candle info model.bin`: a CTranslate2 file's header, variables and
# aliases (the committed fuzz seed whisper_like.bin, and the real tiny.en
# when scripts/fetch-whisper.sh fetched it), and a clean error for a
# truncated one.
set -euo pipefail
CANDLE="${CANDLE:?}"
src="${CANDLE_SOURCE_DIR:?}"
seed="$src/tests/fuzz/corpus/ct2/whisper_like.bin"
real="${CANDLE_DATA_CACHE:-$src/build-data}/models/whisper-tiny-en/model.bin"
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
expect "$out" 'format:        CTranslate2 model.bin v6, spec WhisperSpec revision 3, 7 variables, 1 aliases' \
    'encoder/conv1/weight' 'float16  [4, 2, 3]' 'decoder/num_heads' 'int16    []' \
    'alias decoder/projection/weight -> decoder/embeddings/weight'
out2=$("$CANDLE" info --no-mmap "$seed")
[ "$out" = "$out2" ] || { echo "--no-mmap output differs"; fail=1; }
head -c 100 "$seed" >"$tmp/cut.bin"
if "$CANDLE" info "$tmp/cut.bin" >/dev/null 2>"$tmp/err"; then
    echo "truncated file accepted"
    fail=1
fi
expect "$(cat "$tmp/err")" "cut.bin: " "data runs past the end of the file"
if [ -r "$real" ]; then
    out=$("$CANDLE" info "$real")
    expect "$out" '148 variables, 1 aliases' 'decoder/embeddings/weight' '[51864, 384]' \
        'encoder/position_encodings/encodings'
else
    echo "SKIP: tiny.en: $real absent (scripts/fetch-whisper.sh)"
fi
[ $fail -eq 0 ] && echo "test_ct2_info: ok"
exit $fail
