#!/usr/bin/env bash
# candle embed on the tiny sentence-transformers directories
# (tests/data/encoders): the embeddings of -p texts and of -f lines match
# sentence-transformers' goldens (cosine >= 0.9999), options change what
# they should, and bad input is refused.
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
enc="$CANDLE_SOURCE_DIR/tests/data/encoders"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
fail=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# cosine of TSV rows (stdin) against golden.json's `key` for the first N sentences
check() { # name model key n [embed options...]
    local name="$1" model="$2" key="$3" n="$4"
    shift 4
    python3 -c "
import json, sys
g = json.load(open('$enc/$model/golden.json'))
for s in g['sentences'][:$n]:
    if s and '\\n' not in s: print(s)" > "$tmp/in.txt"
    "$CANDLE" embed -m "$enc/$model" -f "$tmp/in.txt" -o tsv "$@" > "$tmp/out.tsv" 2> "$tmp/err" ||
        { echo "FAIL $name: $(cat "$tmp/err")" >&2; fail=1; return; }
    python3 - "$enc/$model/golden.json" "$key" "$n" "$tmp/out.tsv" <<'PY' || { echo "FAIL $name" >&2; fail=1; }
import json, math, sys
g = json.load(open(sys.argv[1])); key = sys.argv[2]; n = int(sys.argv[3])
rows = [list(map(float, l.split('\t'))) for l in open(sys.argv[4]) if l.strip()]
# -f skips empty lines: compare with the goldens of the texts it read
want = [e for s, e in zip(g['sentences'][:n], g[key][:n]) if s and '\n' not in s]
assert len(rows) == len(want), f"{len(rows)} rows, want {len(want)}"
for i, (a, b) in enumerate(zip(rows, want)):
    b = b[:len(a)]
    c = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    assert c >= 0.9999, f"row {i}: cosine {c}"
PY
}

check "mean+normalize" bert-tiny embeddings 24
check "mean, --no-normalize" bert-tiny golden_mean_nonorm 24 --no-normalize
check "cls+dense" bert-tiny-cls-dense embeddings 24

# --dimensions keeps the first N and renormalises; json output parses
out="$("$CANDLE" embed -m "$enc/bert-tiny" -p "Hello world!" --dimensions 8 -o json)"
python3 -c "
import json, math, sys
r = json.loads(sys.argv[1]); e = r['embedding']
assert r['index'] == 0 and len(e) == 8, r
assert abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-5" "$out" || { echo "FAIL --dimensions: $out" >&2; fail=1; }

# refusals
msg="$("$CANDLE" embed -m "$CANDLE_SOURCE_DIR/tests/data/hf/qwen2" -p hi 2>&1)"
case "$msg" in *"not an encoder"*) ;; *) echo "FAIL decoder as encoder: $msg" >&2; fail=1 ;; esac
msg="$("$CANDLE" embed -m "$enc/bert-tiny" -p hi --pool median 2>&1)"
case "$msg" in *"--pool median"*) ;; *) echo "FAIL --pool: $msg" >&2; fail=1 ;; esac
long="$(python3 -c "print('word ' * 200)")"
msg="$("$CANDLE" embed -m "$enc/bert-tiny" -p "$long" --no-truncate 2>&1)"
case "$msg" in *"tokens exceed the model"*) ;; *) echo "FAIL --no-truncate: $msg" >&2; fail=1 ;; esac

# prompts (scripts/gen_encoder_prompt_goldens.py): bert-tiny with the
# golden's config_sentence_transformers.json; the default prompt, --prompt-name,
# --prompt (over --prompt-name), --prompt "" and an unknown name
mkdir "$tmp/prompts"
for f in "$enc/bert-tiny"/*; do
    case "$(basename "$f")" in golden.json | config_sentence_transformers.json) ;; *) cp -r "$f" "$tmp/prompts/" ;; esac
done
pg="$enc/bert-tiny-prompts.json"
python3 -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['config'], open(sys.argv[2], 'w'))" \
    "$pg" "$tmp/prompts/config_sentence_transformers.json"
for c in 0 1 2 4 5 6; do
    args=()
    while IFS= read -r -d '' a; do args+=("$a"); done < <(python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['cases'][int(sys.argv[2])]['args']
for k, v in a.items():
    sys.stdout.write(('--prompt-name' if k == 'prompt_name' else '--prompt') + '\0' + v + '\0')" "$pg" "$c")
    "$CANDLE" embed -m "$tmp/prompts" -p "Hello world!" -p "What is the capital of France?" -o tsv "${args[@]}" \
        > "$tmp/p.tsv" 2> "$tmp/err" || { echo "FAIL prompt case $c: $(cat "$tmp/err")" >&2; fail=1; continue; }
    python3 - "$pg" "$c" "$tmp/p.tsv" <<'PY' || { echo "FAIL prompt case $c" >&2; fail=1; }
import json, math, sys
cs = json.load(open(sys.argv[1]))['cases'][int(sys.argv[2])]
rows = [list(map(float, l.split('\t'))) for l in open(sys.argv[3]) if l.strip()]
assert len(rows) == 2
for a, r in zip(rows, cs['rows'][:2]):
    b = r['embedding']
    c = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    assert c >= 0.9999, f"{cs['name']}: cosine {c}"
PY
done
msg="$("$CANDLE" embed -m "$tmp/prompts" -p hi --prompt-name search 2>&1)"
case "$msg" in *"prompt_name 'search' is not one of the model's prompts ('query', 'document'"*) ;;
*) echo "FAIL --prompt-name search: $msg" >&2; fail=1 ;; esac
"$CANDLE" embed --help | grep -q -- "--prompt-name" || { echo "FAIL --help lacks --prompt-name" >&2; fail=1; }
[ $fail -eq 0 ] && echo "test_embed_cli: passed"
exit $fail
