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
case "$msg" in *"exceeds"*) ;; *) echo "FAIL --no-truncate: $msg" >&2; fail=1 ;; esac

[ $fail -eq 0 ] && echo "test_embed_cli: passed"
exit $fail
