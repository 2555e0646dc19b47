#!/usr/bin/env bash
# whisper.cpp ggml files on tiny.en (scripts/fetch-whisper.sh) and jfk.wav:
# `candle quantize` writes the CTranslate2 package as a whisper.cpp file
# (src/models/whisper_quantize.c) and `candle transcribe` reads it back
# (src/models/whisper_src_ggml.c). f16 and q8_0 give faster-whisper's greedy
# text (jfk_transcript.txt, as test_transcribe); q4_0 stays within a word
# error rate of 0.10 (measured: 0.00 on words lowercased and stripped of
# punctuation; its commas differ). A ggml file is a source too: f16 -> q8_0
# gives the same bytes as the package -> q8_0. k types are refused for
# tiny's width of 384, an unknown type is a usage error.
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
model="${CANDLE_DATA_CACHE:-$CANDLE_SOURCE_DIR/build-data}/models/whisper-tiny-en"
wav="$CANDLE_SOURCE_DIR/tests/data/audio/jfk.wav"
[ -r "$model/model.bin" ] || { echo "SKIP: test_whisper_ggml: $model absent (scripts/fetch-whisper.sh)"; exit 77; }
[ -r "$wav" ] || { echo "SKIP: test_whisper_ggml: $wav absent"; exit 77; }
gold="$CANDLE_SOURCE_DIR/tests/data/whisper/jfk_transcript.txt"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
greedy() { "$CANDLE" transcribe -m "$1" -f "$wav" --beam 1 --no-timestamps --no-condition --no-fallback -t 2; }
# word error rate of $1 against $2 (files): words lowercased, punctuation dropped
wer() {
    awk 'function words(f, w,   line, n, i, a) {
             n = 0
             while ((getline line < f) > 0) {
                 line = tolower(line); gsub(/[^a-z0-9'"'"' ]/, " ", line)
                 k = split(line, a, / +/)
                 for (i = 1; i <= k; i++) if (a[i] != "") w[++n] = a[i]
             }
             return n
         }
         BEGIN {
             h = words(ARGV[1], hw); r = words(ARGV[2], rw)
             for (i = 0; i <= h; i++) d[i, 0] = i
             for (j = 0; j <= r; j++) d[0, j] = j
             for (i = 1; i <= h; i++) for (j = 1; j <= r; j++) {
                 c = d[i-1, j-1] + (hw[i] != rw[j]); if (d[i-1, j] + 1 < c) c = d[i-1, j] + 1
                 if (d[i, j-1] + 1 < c) c = d[i, j-1] + 1; d[i, j] = c
             }
             printf "%.4f\n", r ? d[h, r] / r : 1
         }' "$1" "$2"
}

types="f16 q8_0 q4_0"
[ "${CANDLE_TEST_SANITIZED:-0}" = 1 ] && { types=q8_0; echo "sanitizer run: q8_0 only"; }
for t in $types; do
    if ! "$CANDLE" quantize -q "$model" "$tmp/tiny-$t.bin" "$t" >"$tmp/q.$t" 2>"$tmp/err"; then
        fail "quantize $t: $(cat "$tmp/err")"
        continue
    fi
    grep -q "as whisper.cpp $t" "$tmp/q.$t" || fail "quantize $t: summary '$(head -1 "$tmp/q.$t")'"
    [ -e "$tmp/tiny-$t.bin.tmp" ] && fail "quantize $t left its temporary file"
    if ! greedy "$tmp/tiny-$t.bin" >"$tmp/out.$t" 2>"$tmp/err"; then
        fail "transcribe $t: $(cat "$tmp/err")"
        continue
    fi
    case $t in
    q4_0)
        w=$(wer "$tmp/out.$t" "$gold")
        echo "q4_0: '$(cat "$tmp/out.$t")': WER $w"
        awk -v w="$w" 'BEGIN { exit !(w <= 0.10) }' || fail "q4_0: WER $w above 0.10"
        ;;
    *) cmp -s "$tmp/out.$t" "$gold" || fail "$t: text '$(cat "$tmp/out.$t")' vs '$(cat "$gold")'" ;;
    esac
done
if [ -r "$tmp/tiny-f16.bin" ] && [ -r "$tmp/tiny-q8_0.bin" ]; then
    "$CANDLE" quantize -q "$tmp/tiny-f16.bin" "$tmp/again-q8_0.bin" q8_0 >/dev/null 2>"$tmp/err" ||
        fail "quantize from a ggml file: $(cat "$tmp/err")"
    cmp -s "$tmp/again-q8_0.bin" "$tmp/tiny-q8_0.bin" || fail "f16 ggml -> q8_0 differs from CTranslate2 -> q8_0"
    out=$("$CANDLE" info "$tmp/tiny-q8_0.bin")
    grep -qF "n_vocab 51864, audio ctx 1500 state 384 heads 6 layers 4" <<<"$out" || fail "info: $out"
    grep -qF "ftype 7 (quantization version 2)" <<<"$out" || fail "info: no ftype 7"
fi
if "$CANDLE" quantize -q "$model" "$tmp/k.bin" q4_k >/dev/null 2>"$tmp/err"; then
    fail "q4_k accepted for a width of 384"
else
    grep -q "multiple of 256" "$tmp/err" || fail "q4_k: '$(cat "$tmp/err")'"
    [ -e "$tmp/k.bin" ] || [ -e "$tmp/k.bin.tmp" ] && fail "q4_k left a file"
fi
"$CANDLE" quantize -q "$model" "$tmp/x.bin" q4_2 >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "unknown type: not a usage error"
grep -q "q4_2 is not a type" "$tmp/err" || fail "unknown type: '$(cat "$tmp/err")'"
# multilingual (when base is fetched): its f16 ggml file detects German on
# de.wav and decodes the tokens of the package itself (the same f16 weights)
base="${CANDLE_DATA_CACHE:-$CANDLE_SOURCE_DIR/build-data}/models/whisper-base"
de="$CANDLE_SOURCE_DIR/tests/data/audio/de.wav"
if [ -r "$base/model.bin" ] && [ -r "$de" ] && [ "${CANDLE_TEST_SANITIZED:-0}" != 1 ]; then
    "$CANDLE" quantize -q "$base" "$tmp/base-f16.bin" f16 >/dev/null 2>"$tmp/err" || fail "quantize base: $(cat "$tmp/err")"
    for m in "$base" "$tmp/base-f16.bin"; do
        "$CANDLE" transcribe -m "$m" -f "$de" --beam 1 --no-timestamps --no-fallback -t 2 -o json \
            >"$tmp/de.$(basename "$m").json" 2>"$tmp/err" || fail "transcribe de.wav from $m: $(cat "$tmp/err")"
    done
    grep -q '"language": *"de"' "$tmp/de.base-f16.bin.json" || fail "base ggml: language not de"
    python3 - "$tmp/de.whisper-base.json" "$tmp/de.base-f16.bin.json" <<'PY' || fail "base ggml: other tokens than the package's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["tokens"] == b["tokens"] and a["language"] == b["language"], (a["text"], b["text"])
PY
else
    echo "whisper-base or de.wav absent (or the sanitizer run): no multilingual case"
fi
[ "$fails" = 0 ] && echo "test_whisper_ggml: ok"
exit "$fails"
