#!/usr/bin/env bash
# candle transcribe on Whisper tiny.en (scripts/fetch-whisper.sh) and jfk.wav:
# with --no-timestamps the text is faster-whisper's greedy transcript
# without timestamps (tests/data/whisper/jfk_transcript.txt,
# gen_whisper_goldens.py) and -o json carries the same text and token ids;
# by default the segments' text (-o txt), SRT and WebVTT are faster-whisper's
# segments as openai-whisper writes them (jfk_ts.txt, jfk.srt, jfk.vtt:
# gen_whisper_subtitles.py); sampling with --seed repeats; bad input fails
# with a message. --prompt gives faster-whisper's initial_prompt tokens and
# --word-timestamps its words in -o json (whisper_words_goldens.json,
# gen_whisper_words_goldens.py; times within 0.02 s as test_whisper_words).
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
model="${CANDLE_DATA_CACHE:-$CANDLE_SOURCE_DIR/build-data}/models/whisper-tiny-en"
wav="$CANDLE_SOURCE_DIR/tests/data/audio/jfk.wav"
[ -r "$model/model.bin" ] || { echo "SKIP: test_transcribe: $model absent (scripts/fetch-whisper.sh)"; exit 77; }
[ -r "$wav" ] || { echo "SKIP: test_transcribe: $wav absent"; exit 77; }
gold="$CANDLE_SOURCE_DIR/tests/data/whisper"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

if ! "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --no-timestamps --no-condition --no-fallback >"$tmp/out" 2>"$tmp/err"; then
    fail "transcribe: $(cat "$tmp/err")"
elif ! cmp -s "$tmp/out" "$gold/jfk_transcript.txt"; then
    fail "text '$(cat "$tmp/out")' vs '$(cat "$gold/jfk_transcript.txt")'"
fi
grep -q "real-time factor" "$tmp/err" || fail "no timing on stderr"
# weights kept as f16, bf16 or q8_0 (--dtype): the same greedy text on this clip
# (the sanitizer run: bf16 only, one code path)
dtypes="f16 bf16 q8_0"
[ "${CANDLE_TEST_SANITIZED:-0}" = 1 ] && dtypes=bf16
for d in $dtypes; do
    "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --no-timestamps --no-condition --no-fallback \
        --dtype "$d" >"$tmp/out.$d" 2>"$tmp/err" || fail "--dtype $d: $(cat "$tmp/err")"
    cmp -s "$tmp/out.$d" "$gold/jfk_transcript.txt" || fail "--dtype $d: text '$(cat "$tmp/out.$d")'"
done
"$CANDLE" transcribe -m "$model" -f "$wav" --dtype q4_k >/dev/null 2>&1 && fail "--dtype q4_k accepted"

if ! "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 -o json -t 2 --no-timestamps --no-fallback >"$tmp/out.json" 2>"$tmp/err"; then
    fail "transcribe -o json: $(cat "$tmp/err")"
elif command -v python3 >/dev/null; then
    python3 - "$tmp/out.json" "$gold/whisper_goldens.json" <<'PY' || fail "json output"
import json, sys
got = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
assert got["text"] == g["jfk_text"].strip(), got["text"]
assert got["tokens"] == g["jfk_tokens"], got["tokens"]
assert abs(got["duration"] - 11.0) < 0.01, got["duration"]
PY
fi

# The sanitizer run (CANDLE_TEST_SANITIZED=1) transcribes once per code path:
# timestamped text comes from --timestamps below, the seeded draw runs once.
san=${CANDLE_TEST_SANITIZED:-0}
fmts="txt srt vtt"
[ "$san" = 1 ] && { fmts="srt vtt"; echo "sanitizer run: no -o txt with timestamps, one seeded draw"; }
for fmt in $fmts; do
    want="$gold/jfk.$fmt"
    [ "$fmt" = txt ] && want="$gold/jfk_ts.txt"
    if ! "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 -o $fmt >"$tmp/out.$fmt" 2>"$tmp/err"; then
        fail "transcribe -o $fmt: $(cat "$tmp/err")"
    elif ! cmp -s "$tmp/out.$fmt" "$want"; then
        fail "-o $fmt differs from $want: $(diff "$tmp/out.$fmt" "$want")"
    fi
done
"$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --timestamps >"$tmp/out.ts" 2>"$tmp/err" || fail "--timestamps: $(cat "$tmp/err")"
[ "$(head -1 "$tmp/out.ts")" = "[00:00:00.000 --> 00:00:07.740]  And so my fellow Americans ask not what your country can do for you" ] ||
    fail "--timestamps line: $(head -1 "$tmp/out.ts")"
# sampling at temperature 1, seeded: the same draws twice
draws="1 2"
[ "$san" = 1 ] && draws=1
for k in $draws; do
    "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --temperature 1 --no-fallback --best-of 1 --seed 3 -o json \
        >"$tmp/t1.$k" 2>"$tmp/err" || fail "--temperature 1: $(cat "$tmp/err")"
done
[ "$san" = 1 ] || cmp -s "$tmp/t1.1" "$tmp/t1.2" || fail "--seed 3 twice: other samples"
grep -q '"temperature": 1.0' "$tmp/t1.1" || fail "--temperature 1: $(head -c 300 "$tmp/t1.1")"
"$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --temperature x >/dev/null 2>&1; [ $? -eq 2 ] || fail "--temperature x not a usage error"
"$CANDLE" transcribe -m "$model" -f "$wav" -o doc >/dev/null 2>&1; [ $? -eq 2 ] || fail "-o doc not a usage error"

"$CANDLE" transcribe -m "$model" -f "$tmp/missing.wav" >/dev/null 2>"$tmp/err" && fail "missing audio accepted"
grep -q "cannot open\|missing.wav" "$tmp/err" || fail "missing audio message: $(cat "$tmp/err")"
"$CANDLE" transcribe -m "$tmp" -f "$wav" >/dev/null 2>"$tmp/err" && fail "model dir without model.bin accepted"
"$CANDLE" transcribe -f "$wav" >/dev/null 2>&1; [ $? -eq 2 ] || fail "missing -m not a usage error"

# the default is beam search, 5 beams: faster-whisper's beam-5 tokens
# (whisper_beam_goldens.json, gen_whisper_beam_goldens.py) and the language
if ! "$CANDLE" transcribe -m "$model" -f "$wav" -o json >"$tmp/b5.json" 2>"$tmp/err"; then
    fail "transcribe (beam 5): $(cat "$tmp/err")"
elif command -v python3 >/dev/null; then
    python3 - "$tmp/b5.json" "$gold/whisper_beam_goldens.json" <<'PY' || fail "beam-5 json output"
import json, sys
got = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))["runs"][0]
assert g["model"] == "tiny.en" and g["timestamps"], g["model"]
assert [s["tokens"] for s in got["segments"]] == [s["tokens"] for s in g["segments"]], got["segments"]
assert got["language"] == "en" and got["language_probability"] == 1, got["language"]
PY
fi
for bad in "--beam 0" "--beam 17" "--task summarize" "--patience 0"; do
    # shellcheck disable=SC2086
    "$CANDLE" transcribe -m "$model" -f "$wav" $bad >/dev/null 2>&1; [ $? -eq 2 ] || fail "$bad not a usage error"
done

# --prompt, then --prompt with --word-timestamps (greedy, temperature 0 alone,
# as the goldens' runs 0 and 8); the sanitizer run does the second only
prompt="President Kennedy's inaugural address, January 1961."
wruns="0 8"
[ "$san" = 1 ] && wruns=8
for run in $wruns; do
    extra=""
    [ "$run" = 8 ] && extra="--word-timestamps"
    # shellcheck disable=SC2086
    if ! "$CANDLE" transcribe -m "$model" -f "$wav" --beam 1 --no-fallback --prompt "$prompt" $extra -o json \
        >"$tmp/w$run.json" 2>"$tmp/err"; then
        fail "transcribe --prompt $extra: $(cat "$tmp/err")"
    elif command -v python3 >/dev/null; then
        python3 - "$tmp/w$run.json" "$gold/whisper_words_goldens.json" "$run" <<'PY' || fail "--prompt $extra json output"
import json, sys
got = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2])); g = d["runs"][int(sys.argv[3])]
assert g["model"] == "tiny.en" and g["clip"] == "jfk" and g["beam_size"] == 1 and g["initial_prompt"] == d["prompt"]
gs = g["segments"]
assert [s["tokens"] for s in got["segments"]] == [s["tokens"] for s in gs], got["segments"]
for s, w in zip(got["segments"], gs):
    if not g["word_timestamps"]:
        assert "words" not in s, s
        continue
    assert [x["word"] for x in s["words"]] == [x[2] for x in w["words"]], s["words"]
    for x, y in zip(s["words"], w["words"]):
        assert abs(x["start"] - y[0]) <= 0.0201 and abs(x["end"] - y[1]) <= 0.0201, (x, y)
        assert abs(x["probability"] - y[3]) < 2e-3, (x, y)
    assert abs(s["start"] - w["start"]) <= 0.0201 and abs(s["end"] - w["end"]) <= 0.0201, (s["start"], w["start"])
PY
    fi
done

[ $fails -eq 0 ] && echo "test_transcribe: passed"
exit $((fails > 0))
