#!/usr/bin/env bash
# candle run --lookup / --draft-model on stories260K: greedy output equal to
# plain greedy (prompt lookup, the model as its own draft with every draft
# accepted, a tiny model of the same vocabulary as draft), the acceptance
# line on stderr, seeded sampling reproducible, and the refusals (another
# vocabulary, --ctx-shift, options without a drafting mode); with a grammar,
# the same text as plain greedy and sampled texts in the grammar.
. "${CANDLE_SOURCE_DIR:?}/tests/common/stories_cli.sh" test_speculative_cli

prompts=("Once upon a time" "Lily had a red ball. Tom had a red ball. Lily had a red ball. Tom had a")
for i in 0 1; do
    p="${prompts[$i]}"
    "$candle" run -m "$model" -p "$p" -n 80 --temp 0 -s 1 >"$tmp/plain$i" 2>/dev/null
    check "plain $i" '[ -s "$tmp/plain$i" ]'
    for opt in "--lookup 1" "--lookup 2 --draft-max 4" "--lookup 3 --draft-max 64" \
               "--draft-model $model --draft-max 6" "--draft-model $src/tests/data/tiny/qwen2.gguf"; do
        "$candle" run -m "$model" -p "$p" -n 80 --temp 0 -s 1 $opt >"$tmp/spec" 2>"$tmp/err"
        rc=$?
        check "prompt $i $opt: rc $rc" '[ $rc -eq 0 ]'
        check "prompt $i $opt: same text as plain greedy" 'cmp -s "$tmp/plain$i" "$tmp/spec"'
        check "prompt $i $opt: acceptance line" 'grep -q "^speculative: [0-9]* steps, [0-9]* drafted, [0-9]* accepted" "$tmp/err"'
        check "prompt $i $opt: generation line" 'grep -q "^generation: 80 tokens" "$tmp/err"'
    done
done
"$candle" run -m "$model" -p "${prompts[1]}" -n 60 --temp 0 -s 1 --draft-model "$model" >/dev/null 2>"$tmp/err"
check "self-draft accepts every draft" 'grep -q "accepted (100.0%)" "$tmp/err"'
"$candle" run -m "$model" -p "${prompts[1]}" -n 60 --temp 0 -s 1 --lookup 2 >/dev/null 2>"$tmp/err"
check "lookup accepts some drafts on a repetitive prompt" '! grep -q " 0 accepted" "$tmp/err"'

# seeded sampling is reproducible
for opt in "--lookup 2" "--draft-model $model"; do
    "$candle" run -m "$model" -p "${prompts[1]}" -n 40 --temp 0.9 --repeat-penalty 1.1 -s 5 $opt >"$tmp/a" 2>/dev/null
    "$candle" run -m "$model" -p "${prompts[1]}" -n 40 --temp 0.9 --repeat-penalty 1.1 -s 5 $opt >"$tmp/b" 2>/dev/null
    check "sampling $opt reproducible" 'cmp -s "$tmp/a" "$tmp/b" && [ -s "$tmp/a" ]'
done

# refusals
other="$src/../main/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -r "$other" ] || other="${CANDLE_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -r "$other" ]; then
    "$candle" run -m "$model" -p "Once" -n 4 --draft-model "$other" >/dev/null 2>"$tmp/err"
    rc=$?
    check "another vocabulary refused: rc $rc" '[ $rc -eq 1 ] && grep -q "vocabulary" "$tmp/err"'
else
    echo "SKIP (part): no model of another vocabulary for the CLI refusal (the library test covers it)"
fi
"$candle" run -m "$model" -p "Once" -n 4 --lookup 2 --ctx-shift >/dev/null 2>"$tmp/err"
rc=$?
check "lookup with --ctx-shift refused: rc $rc" '[ $rc -eq 2 ] && grep -q "does not combine" "$tmp/err"'

# a grammar: the step advances the matcher; greedy text equal to plain's
g='root ::= ("Lily" | "Tom" | " had" | " a" | " red" | " ball" | ".")+ "!"'
for opt in "--lookup 1" "--lookup 2 --draft-max 16" "--draft-model $model"; do
    "$candle" run -m "$model" -p "${prompts[1]}" -n 60 --temp 0 -s 1 --grammar-text "$g" >"$tmp/gp" 2>/dev/null
    "$candle" run -m "$model" -p "${prompts[1]}" -n 60 --temp 0 -s 1 --grammar-text "$g" $opt >"$tmp/gs" 2>"$tmp/err"
    rc=$?
    check "grammar $opt: rc $rc" '[ $rc -eq 0 ]'
    check "grammar $opt: same text as plain" 'cmp -s "$tmp/gp" "$tmp/gs" && [ -s "$tmp/gp" ]'
    check "grammar $opt: drafts accepted" '! grep -q " 0 accepted" "$tmp/err"'
    for seed in 1 2 3; do
        "$candle" run -m "$model" -p "${prompts[1]}" -n 40 --temp 1 -s $seed --grammar-text "$g" $opt >"$tmp/gr" 2>/dev/null
        check "grammar $opt seed $seed: the text matches" 'python3 -c "import re,sys; sys.exit(0 if re.fullmatch(r\"(Lily|Tom| had| a| red| ball|\.)*(Lily|Tom| had| a| red| ball|\.)!?\", open(sys.argv[1]).read()) else 1)" "$tmp/gr"'
    done
done
"$candle" run -m "$model" -p "Once" -n 4 --draft-max 4 >/dev/null 2>"$tmp/err"
rc=$?
check "--draft-max alone refused: rc $rc" '[ $rc -eq 2 ] && grep -q "need --draft-model or --lookup" "$tmp/err"'
"$candle" run -m "$model" -p "Once" -n 4 --lookup 2 --draft-model "$model" >/dev/null 2>"$tmp/err"
rc=$?
check "both drafting modes refused: rc $rc" '[ $rc -eq 2 ]'
"$candle" run -m "$model" -p "Once" -n 4 --lookup 2 --draft-max 65 >/dev/null 2>"$tmp/err"
rc=$?
check "--draft-max 65 refused: rc $rc" '[ $rc -eq 2 ]'
"$candle" run -m "$model" -p "Once" -n 4 --draft-model "$tmp/absent.gguf" >/dev/null 2>"$tmp/err"
rc=$?
check "absent draft model: rc $rc" '[ $rc -eq 1 ] && grep -q "absent.gguf" "$tmp/err"'
"$candle" chat -m "$model" --lookup 2 </dev/null >/dev/null 2>"$tmp/err"
rc=$?
check "chat refuses --lookup: rc $rc" '[ $rc -eq 2 ]'

echo "test_speculative_cli: $passes passed, $fails failed"
[ $fails -eq 0 ] && [ $passes -gt 0 ]
