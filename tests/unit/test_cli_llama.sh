#!/usr/bin/env bash
# The CLI as a llama.cpp user types it (issue 22, findings 11 and the rest
# of 9): -s/--seed (random by default, printed on stderr so a run repeats),
# -sys/--system for chat's system prompt, run -f FILE, a trailing newline
# after run's text, a file named once in an error, tokenize --show-tokens
# and its default model, bench's comma lists, -c above the training context
# lowered with a warning, and an option a command does not use refused.
set -u
CANDLE="$(realpath "${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}")"
MODEL="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:-.}/../shared}/data/models/stories260K.gguf"
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
c() { timeout 60 "$CANDLE" "$@"; }
SAMPLE=(-n 16 --temp 1.0 --top-k 0 --top-p 1 --min-p 0)

# -s is the seed: printed, and the same seed gives the same text
c run -m "$MODEL" -p "Once upon a time" "${SAMPLE[@]}" -s 42 >"$T/a" 2>"$T/ea" || bad "run -s 42: $(cat "$T/ea")"
c run -m "$MODEL" -p "Once upon a time" "${SAMPLE[@]}" --seed 42 >"$T/b" 2>"$T/eb"
grep -qx "seed: 42" "$T/ea" || bad "-s 42 not the seed: $(head -3 "$T/ea")"
cmp -s "$T/a" "$T/b" && [ -s "$T/a" ] || bad "-s 42 and --seed 42 differ"
# the default seed is random, printed, and repeats the run when given back
c run -m "$MODEL" -p "Once upon a time" "${SAMPLE[@]}" >"$T/r1" 2>"$T/er1"
c run -m "$MODEL" -p "Once upon a time" "${SAMPLE[@]}" >"$T/r2" 2>"$T/er2"
s1=$(sed -n 's/^seed: \([0-9]*\)$/\1/p' "$T/er1"); s2=$(sed -n 's/^seed: \([0-9]*\)$/\1/p' "$T/er2")
[ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" != "$s2" ] || bad "default seeds not random and printed: '$s1' '$s2'"
c run -m "$MODEL" -p "Once upon a time" "${SAMPLE[@]}" -s "$s1" >"$T/r3" 2>/dev/null
cmp -s "$T/r1" "$T/r3" || bad "the printed seed $s1 does not repeat the run"

# -sys is chat's system prompt; run refuses it (it has none)
printf 'Hello\n' | c chat -m "$MODEL" --chat-template zephyr -sys "You are brief." -n 4 --temp 0 \
    >/dev/null 2>"$T/err" || bad "chat -sys: $(cat "$T/err")"
c run -m "$MODEL" -p hi -sys "x" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q -- "-sys is not an option of run" "$T/err" || bad "run -sys: rc $rc $(cat "$T/err")"

# run -f FILE is the prompt; the text ends with a newline
printf 'Once upon a time' >"$T/prompt.txt"
c run -m "$MODEL" -f "$T/prompt.txt" -n 12 --temp 0 >"$T/f" 2>"$T/err" || bad "run -f: $(cat "$T/err")"
c run -m "$MODEL" -p "Once upon a time" -n 12 --temp 0 >"$T/p" 2>/dev/null
cmp -s "$T/f" "$T/p" && [ -s "$T/f" ] || bad "run -f and -p differ: '$(cat "$T/f")' '$(cat "$T/p")'"
[ "$(tail -c 1 "$T/p" | od -An -c | tr -d ' ')" = '\n' ] || bad "no newline after run's text"
c run -m "$MODEL" -f "$T/prompt.txt" -p x >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] || bad "run -f and -p both: rc $rc"
c run -m "$MODEL" -f "$T/none.txt" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "cannot read" "$T/err" || bad "run -f missing: rc $rc"

# a missing file is named once
for cmd in "run -p hi" "tokenize -p hi"; do
    c $cmd -m "$T/missing.gguf" >/dev/null 2>"$T/err"
    [ "$(grep -o "missing.gguf" "$T/err" | wc -l)" = 1 ] || bad "$cmd: the file named $(grep -o "missing.gguf" "$T/err" | wc -l) times: $(cat "$T/err")"
done
c info "$T/missing.gguf" >/dev/null 2>"$T/err"
[ "$(grep -o "missing.gguf" "$T/err" | wc -l)" = 1 ] || bad "info FILE: $(cat "$T/err")"

# tokenize: --show-tokens as llama-tokenize; the default model as run's
c tokenize -m "$MODEL" -p "Hello <s> world" --show-tokens >"$T/tok" 2>"$T/err" || bad "--show-tokens: $(cat "$T/err")"
[ "$(head -2 "$T/tok")" = "$(printf "     1 -> '<s>'\n   346 -> ' He'")" ] && [ "$(wc -l <"$T/tok")" = 10 ] ||
    bad "--show-tokens: $(cat "$T/tok")"
mkdir -p "$T/cwd/models"
ln -s "$MODEL" "$T/cwd/models/SmolLM2-135M-Instruct.Q4_1.gguf"
(cd "$T/cwd" && c tokenize -p "Hello world" --no-special) >"$T/tok" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ "$(cat "$T/tok")" = "$(c tokenize -m "$MODEL" -p "Hello world" --no-special)" ] ||
    bad "tokenize's default model: rc $rc $(cat "$T/tok" "$T/err")"

# bench: comma lists, a row per combination (pp, then tg, for each -t)
c bench -m "$MODEL" -p 8,16 -n 4 -t 1,2 -r 1 -o json >"$T/b.json" 2>"$T/err" || bad "bench lists: $(cat "$T/err")"
python3 - "$T/b.json" <<'PY' || bad "bench lists: rows $(cat "$T/b.json" | head -c 300)"
import json, sys
rows = [(r["n_prompt"], r["n_gen"], r["n_threads"]) for r in json.load(open(sys.argv[1]))]
assert rows == [(8, 0, 1), (16, 0, 1), (0, 4, 1), (8, 0, 2), (16, 0, 2), (0, 4, 2)], rows
PY
for v in "-p 8,,16" "-p 8," "-t 1,0" "-n 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"; do
    c bench -m "$MODEL" $v -r 1 >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 2 ] && grep -q "bad value" "$T/err" || bad "bench $v: rc $rc"
done
c bench -m "$MODEL" -p 8 -n 4 -t 1,2 --latency 8 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "take one -t value" "$T/err" || bad "bench --latency with -t 1,2: rc $rc"

# -c above the training context (2048): lowered, with a warning
c run -m "$MODEL" -p hi -n 2 -c 100000 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 0 ] && grep -q "warning: -c 100000 is above the model's training context of 2048; using 2048" "$T/err" ||
    bad "-c 100000: rc $rc $(cat "$T/err")"

# options a command does not use: refused, naming the option
refuse() { # OPTION COMMAND ARGS...
    local o="$1"; shift
    c "$@" >/dev/null 2>"$T/err" </dev/null; local rc=$?
    [ $rc = 2 ] && grep -qF -- "$o is not an option of $1" "$T/err" || bad "candle $*: rc $rc $(cat "$T/err")"
}
printf 'one two three four five six seven eight\n' >"$T/text"
refuse --temp logits -m "$MODEL" -p hi --temp 0.5
refuse -n logits -m "$MODEL" -p hi -n 3
refuse -p perplexity -m "$MODEL" -f "$T/text" -p hi
refuse --seed perplexity -m "$MODEL" -f "$T/text" --seed 1
refuse --top run -m "$MODEL" -p hi --top 3
refuse --chat-template run -m "$MODEL" -p hi --chat-template chatml
refuse -p chat -m "$MODEL" -p hi
refuse -f chat -m "$MODEL" -f "$T/text"
refuse --grammar-text logits -m "$MODEL" -p hi --grammar-text 'root ::= "a"'
[ $fail = 0 ] && echo "test_cli_llama: OK"
exit $fail
