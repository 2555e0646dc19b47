#!/usr/bin/env bash
# CLI behaviour on stories260K: run writes only the generated text to stdout
# (timings to stderr), greedy output matches llama.cpp, logits/perplexity/chat
# work, and bad input (missing file, unknown architecture, prompt or
# generation past the context) fails with a clear message.
. "${CANDLE_SOURCE_DIR:?}/tests/common/stories_cli.sh" cli_run

# run: greedy continuation (DESIGN.md), stdout is only the text
"$candle" run -m "$model" -p "Once upon a time" -n 30 --temp 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "run exit code" '[ $rc -eq 0 ]'
want=", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."
check "greedy text: $(cat "$tmp/out")" '[[ "$want" == "$(cat "$tmp/out")"* ]]'
check "stdout holds only the text" '! grep -q "tokens/s" "$tmp/out"'
check "stderr has load time" 'grep -q "load time:" "$tmp/err"'
check "stderr has prompt speed" 'grep -q "^prompt: .* tokens/s" "$tmp/err"'
check "stderr has generation speed" 'grep -q "^generation: 30 tokens .* tokens/s" "$tmp/err"'

# seeded sampling is reproducible; another seed is allowed to differ
"$candle" run -m "$model" -p "Once upon a time" -n 24 --temp 1.0 --top-k 20 --top-p 0.9 --min-p 0.02 --seed 7 >"$tmp/s1" 2>/dev/null
rc=$?
"$candle" run -m "$model" -p "Once upon a time" -n 24 --temp 1.0 --top-k 20 --top-p 0.9 --min-p 0.02 --seed 7 >"$tmp/s2" 2>/dev/null
rc=$?
check "same seed, same text" 'cmp -s "$tmp/s1" "$tmp/s2" && [ -s "$tmp/s1" ]'
"$candle" run -m "$model" -p "Once upon a time" -n 16 --temp 0.7 --repeat-penalty 1.3 --presence-penalty 0.5 --frequency-penalty 0.5 --seed 1 >"$tmp/s3" 2>/dev/null
rc=$?
check "penalties run" '[ $rc -eq 0 ] && [ -s "$tmp/s3" ]'

# KV cache types: f16 keeps the greedy text here; a quantized cache needs
# head_dim a multiple of its 32-element blocks (stories260K's is 8)
"$candle" run -m "$model" -p "Once upon a time" -n 30 --temp 0 -ctk f16 -ctv f16 >"$tmp/out" 2>/dev/null
rc=$?
check "-ctk f16 greedy text: $(cat "$tmp/out")" '[ $rc -eq 0 ] && [[ "$want" == "$(cat "$tmp/out")"* ]]'
"$candle" run -m "$model" -p hi -n 2 -ctk q8_0 -ctv q8_0 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "-ctk q8_0 on head_dim 8 fails: $(cat "$tmp/err")" '[ $rc -eq 1 ] && grep -q "head_dim 8 is not a multiple" "$tmp/err"'
"$candle" run -m "$model" -p hi -n 2 -ctk q8_0 -ctv f16 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "-ctk and -ctv differ: $(cat "$tmp/err")" '[ $rc -eq 2 ] && grep -q "K and V share one cache type" "$tmp/err"'
"$candle" run -m "$model" -p hi -n 2 --cache-type-k q9 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "bad cache type: $(cat "$tmp/err")" '[ $rc -eq 2 ] && grep -q "bad value .q9. for -ctk" "$tmp/err"'

# errors
"$candle" run -m "$tmp/missing.gguf" -p hi -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "missing file fails" '[ $rc -ne 0 ] && grep -q "missing.gguf" "$tmp/err" && [ ! -s "$tmp/out" ]'
python3 - "$model" "$tmp/arch.gguf" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"general.architecture"
i = data.index(key) + len(key)
# type (u32 = 8, string), length (u64 = 5), then the value
assert data[i + 12:i + 17] == b"llama"
data[i + 12:i + 17] = b"xlama"
open(sys.argv[2], "wb").write(data)
PY
"$candle" run -m "$tmp/arch.gguf" -p hi -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "unknown arch fails: $(cat "$tmp/err")" '[ $rc -ne 0 ] && grep -q "unknown architecture .xlama." "$tmp/err"'
"$candle" run -m "$model" -p "Once upon a time there was a little dog" -c 4 -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "prompt past context fails: $(cat "$tmp/err")" '[ $rc -ne 0 ] && grep -q "longer than the context of 4" "$tmp/err"'
"$candle" run -m "$model" -p "Once upon a time" -c 16 -n 40 --temp 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "generation past context fails: $(cat "$tmp/err")" '[ $rc -ne 0 ] && grep -q "context of 16 tokens is full" "$tmp/err"'
"$candle" run -m "$model" -p "Once upon a time" -c 16 -n 40 --temp 0 --ctx-shift >"$tmp/out" 2>"$tmp/err"
rc=$?
check "context shift generates on: $(cat "$tmp/err")" '[ $rc -eq 0 ] && grep -q "^generation: 40 tokens" "$tmp/err"'
"$candle" run -m "$model" -p hi --bogus >"$tmp/out" 2>"$tmp/err"
rc=$?
check "unknown option is a usage error" '[ $rc -eq 2 ] && grep -q "unknown option" "$tmp/err"'

# logits: one JSON line per prompt position, llama.cpp's top-1
"$candle" logits -m "$model" -p "Once upon a time" --top 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "logits exit code" '[ $rc -eq 0 ]'
check "logits lines" '[ "$(wc -l <"$tmp/out")" -eq 5 ]'
check "logits json: $(head -1 "$tmp/out")" 'head -1 "$tmp/out" | grep -Eq "^\{\"pos\": 0, \"token\": 1, \"top\": \[\[403, 17\.02[0-9]*\], \[385, [0-9.]+\], \[[0-9]+, [0-9.]+\]\]\}$"'

# perplexity: progress on stderr, PPL line on stdout
for i in 1 2 3 4 5 6; do echo "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."; done >"$tmp/text.txt"
"$candle" perplexity -m "$model" -f "$tmp/text.txt" -c 32 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "perplexity exit code: $(cat "$tmp/err")" '[ $rc -eq 0 ]'
check "PPL line: $(cat "$tmp/out")" 'grep -Eq "^PPL = [0-9]+\.[0-9]+$" "$tmp/out"'
check "progress bar" 'grep -q "chunks" "$tmp/err"'

# chat: stories260K has no template: a clear error, unless one is named
printf 'Hello\n' | "$candle" chat -m "$model" -n 8 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "chat without template fails: $(cat "$tmp/err")" '[ $rc -ne 0 ] && grep -q "chat_template" "$tmp/err"'
printf 'Hello\nTell me more\n' | "$candle" chat -m "$model" -n 8 --temp 0 --chat-template zephyr >"$tmp/out" 2>"$tmp/err"
rc=$?
check "chat with a named template: $(cat "$tmp/err")" '[ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -ge 2 ]'
printf 'Hello\n' | "$candle" chat -m "$model" --chat-template nope >"$tmp/out" 2>"$tmp/err"
rc=$?
check "unknown template name" '[ $rc -ne 0 ] && grep -q "unknown format .nope." "$tmp/err"'

echo "cli_run: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
