#!/usr/bin/env bash
# The 107 s clip of bench/whisper_compare.sh: jfk.wav (11 s, real speech),
# 1 s of silence, then the Gettysburg Address read by espeak-ng (en-us, 150
# words a minute), 16 kHz mono 16-bit; and its reference text beside it.
#   bench/whisper_long_clip.sh JFK_WAV OUT.wav     (needs espeak-ng and sox)
# -D (no dither) makes it repeatable; the 2026-12-04 run used a clip made
# with sox's default dither, which differs from this one in the last bit.
set -eu
jfk="$1" out="$2"
here="$(cd "$(dirname "$0")" && pwd)"
text="$here/results/whisper-2026-12-04/gettysburg.txt"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
espeak-ng -v en-us -s 150 -w "$tmp/g.wav" -f "$text"
sox -D "$tmp/g.wav" -r 16000 -c 1 -b 16 "$tmp/g16.wav"
sox -D -n -r 16000 -c 1 -b 16 "$tmp/sil.wav" trim 0 1
sox -D "$jfk" "$tmp/sil.wav" "$tmp/g16.wav" "$out"
{ echo "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
  cat "$text"; } >"${out%.wav}.ref.txt"
echo "$out: $(soxi -D "$out") s" >&2
