#!/usr/bin/env bash
# candle tokenize on the reference vocabularies: ids as the .out files give
# them (--no-special), BOS and special-token parsing by default, -f FILE,
# and usage errors.
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
data="${CANDLE_SHARED_DIR:-$CANDLE_SOURCE_DIR/../shared}/data"
fail=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

expect() { # name got want
    if [ "$2" != "$3" ]; then
        echo "FAIL $1: got '$2', want '$3'" >&2
        fail=1
    fi
}

# The reference vocabularies: in the shared folder, else in the cache that
# scripts/fetch-test-data.sh fills (CANDLE_DATA_CACHE); each part whose data
# is in neither place is skipped with a SKIP line (the usage checks always run).
tok="$data/tokenizers"
[ -r "$tok/ggml-vocab-gpt-2.gguf" ] || tok="${CANDLE_DATA_CACHE:-$CANDLE_SOURCE_DIR/build-data}/tokenizers"
spm="$tok/ggml-vocab-llama-spm.gguf"
gpt2="$tok/ggml-vocab-gpt-2.gguf"
stories="$data/models/stories260K.gguf"

if [ -r "$spm" ] && [ -r "$gpt2" ]; then
    expect spm-no-special "$("$CANDLE" tokenize -m "$spm" -p " Hello, world!" --no-special)" \
        "29871 15043 29892 3186 29991"
    expect spm-bos "$("$CANDLE" tokenize -m "$spm" -p "Hello world")" "1 15043 3186"
    expect gpt2 "$("$CANDLE" tokenize -m "$gpt2" -p "Hello world" --no-special)" "15496 995"

    # -f reads bytes as they are: the last .inp input has newlines and tabs.
    inp="$tok/ggml-vocab-gpt-2.gguf.inp"
    python3 - "$inp" "$tmp/last.txt" <<'PY' 2>/dev/null || awk 'BEGIN{RS="\n__ggml_vocab_test__\n"} {last=$0} END{printf "%s", last > ARGV[2]}' "$inp" "$tmp/last.txt"
import sys
parts = open(sys.argv[1], "rb").read().split(b"\n__ggml_vocab_test__\n")
open(sys.argv[2], "wb").write(parts[-2])
PY
    want="$(sed -n 46p "$tok/ggml-vocab-gpt-2.gguf.out" | sed 's/^ //')"
    expect gpt2-file "$("$CANDLE" tokenize -m "$gpt2" -f "$tmp/last.txt" --no-special)" "$want"
else
    echo "SKIP: reference vocabularies absent ($spm, $gpt2: scripts/fetch-test-data.sh)"
fi

if [ -r "$stories" ]; then
    expect stories-special "$("$CANDLE" tokenize -m "$stories" -p "Hello <s> world")" \
        "1 346 306 414 410 1 410 263 304 341"
    expect stories-plain "$("$CANDLE" tokenize -m "$stories" -p "Hello <s> world" --no-special)" \
        "346 306 414 410 504 419 505 263 304 341"
else
    echo "SKIP: stories260K checks: $stories absent"
fi

# Usage errors exit 2 with a message; a missing model exits 1. Without -m
# the default model is used, as run's (test_cli_llama.sh).
"$CANDLE" tokenize -m "$spm" >/dev/null 2>"$tmp/err"
expect usage-rc "$?" "2"
grep -q "need exactly one of -p TEXT, -f FILE" "$tmp/err" || { echo "FAIL usage message: $(cat "$tmp/err")" >&2; fail=1; }
"$CANDLE" tokenize -m "$spm" -p "x" -f "$tmp/last.txt" >/dev/null 2>&1
expect both-rc "$?" "2"
"$CANDLE" tokenize -m "$tmp/missing.gguf" -p "x" >/dev/null 2>"$tmp/err"
expect missing-rc "$?" "1"
"$CANDLE" tokenize --help | grep -q -- "--no-special" || { echo "FAIL --help" >&2; fail=1; }

[ "$fail" = 0 ] && echo "test_tokenize_cli: passed"
exit "$fail"
