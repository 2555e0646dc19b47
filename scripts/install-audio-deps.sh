#!/usr/bin/env bash
# Libraries the audio input links (src/audio: libsndfile decodes WAV, FLAC,
# OGG and MP3; libsoxr resamples to 16 kHz) and zlib (Whisper's
# compression-ratio check of its temperature fallback): installed with apt-get when
# missing and we are root. Never fails the build: without them CMake builds
# the library without audio decoding (its calls say which library is
# missing).
set -u
have() { pkg-config --exists "$1" 2>/dev/null; }
need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
have sndfile || need+=(libsndfile1-dev)
have soxr || need+=(libsoxr-dev)
have zlib || need+=(zlib1g-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: audio input needs ${need[*]} (not root or no apt-get: skipped)" >&2
    exit 0
fi
echo "deps: installing ${need[*]}" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2; } ||
    echo "deps: could not install ${need[*]}; building without audio decoding" >&2
exit 0
