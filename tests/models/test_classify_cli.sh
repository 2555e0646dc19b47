#!/usr/bin/env bash
# candle classify / candle rerank on the tiny head directories
# (tests/data/encoders, goldens by scripts/gen_encoder_head_goldens.py):
# probabilities within 1e-4 of transformers', problem_type
# multi_label_classification switching softmax for sigmoid, rerank output
# sorted as CrossEncoder.rank with scores within 1e-4, --top-n, refusals.
set -u
: "${CANDLE:?CANDLE must point at the candle binary}"
: "${CANDLE_SOURCE_DIR:?}"
enc="$CANDLE_SOURCE_DIR/tests/data/encoders"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
fail=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# classify the golden sentences that survive -f (non-empty, one line);
# compare --all probabilities with golden key `key`
classify() { # name dir key
    local name="$1" dir="$2" key="$3"
    python3 -c "
import json
g = json.load(open('$enc/bert-tiny-classifier/golden.json'))
for s in g['sentences']:
    if s and '\\n' not in s: print(s)" > "$tmp/in.txt"
    "$CANDLE" classify -m "$dir" -f "$tmp/in.txt" --all > "$tmp/out.jsonl" 2> "$tmp/err" ||
        { echo "FAIL $name: $(cat "$tmp/err")" >&2; fail=1; return; }
    python3 - "$enc/bert-tiny-classifier/golden.json" "$key" "$tmp/out.jsonl" <<'PY' || { echo "FAIL $name" >&2; fail=1; }
import json, sys
g = json.load(open(sys.argv[1])); key = sys.argv[2]
rows = [json.loads(l) for l in open(sys.argv[3])]
want = [p for s, p in zip(g['sentences'], g[key]) if s and '\n' not in s]
assert len(rows) == len(want), (len(rows), len(want))
for i, (r, w) in enumerate(zip(rows, want)):
    got = [r['scores'][l] for l in g['labels']]
    assert max(abs(a - b) for a, b in zip(got, w)) <= 1e-4, (i, got, w)
    best = max(range(len(w)), key=lambda k: w[k])
    assert r['index'] == i and r['label'] == g['labels'][best], (i, r)
PY
}

classify "classify (softmax)" "$enc/bert-tiny-classifier" probs
# the same weights with problem_type multi_label_classification: sigmoid
mkdir "$tmp/multi"
for f in model.safetensors tokenizer.json tokenizer_config.json; do ln -s "$enc/bert-tiny-classifier/$f" "$tmp/multi/$f"; done
python3 -c "
import json
c = json.load(open('$enc/bert-tiny-classifier/config.json'))
c['problem_type'] = 'multi_label_classification'
json.dump(c, open('$tmp/multi/config.json', 'w'))"
classify "classify (multi-label: sigmoid)" "$tmp/multi" probs_sigmoid

# rerank: every query of the golden, all documents, then --top-n 3
python3 -c "
import json
g = json.load(open('$enc/bert-tiny-reranker/golden.json'))
print('\n'.join(g['documents']))" > "$tmp/docs.txt"
nq="$(python3 -c "import json; print(len(json.load(open('$enc/bert-tiny-reranker/golden.json'))['queries']))")"
for ((q = 0; q < nq; q++)); do
    query="$(python3 -c "import json; print(json.load(open('$enc/bert-tiny-reranker/golden.json'))['queries'][$q]['query'])")"
    for top in 0 3; do
        "$CANDLE" rerank -m "$enc/bert-tiny-reranker" -q "$query" -f "$tmp/docs.txt" --top-n "$top" \
            > "$tmp/rank.jsonl" 2> "$tmp/err" || { echo "FAIL rerank $q: $(cat "$tmp/err")" >&2; fail=1; continue; }
        python3 - "$enc/bert-tiny-reranker/golden.json" "$q" "$top" "$tmp/rank.jsonl" <<'PY' ||
import json, sys
g = json.load(open(sys.argv[1])); q = g['queries'][int(sys.argv[2])]; top = int(sys.argv[3])
rows = [json.loads(l) for l in open(sys.argv[4])]
order = q['order'][:top] if top else q['order']
assert [r['index'] for r in rows] == order, ([r['index'] for r in rows], order)
for r in rows:
    assert abs(r['score'] - q['scores'][r['index']]) <= 1e-4, r
    assert r['document'] == g['documents'][r['index']], r
PY
            { echo "FAIL rerank query $q --top-n $top" >&2; fail=1; }
    done
done

# refusals
msg="$("$CANDLE" classify -m "$enc/bert-tiny" -p hi 2>&1)"
case "$msg" in *"no classifier head"*) ;; *) echo "FAIL classify without a head: $msg" >&2; fail=1 ;; esac
msg="$("$CANDLE" rerank -m "$enc/bert-tiny-classifier" -q q -p doc 2>&1)"
case "$msg" in *"a reranker has one score"*) ;; *) echo "FAIL rerank on 3 labels: $msg" >&2; fail=1 ;; esac
msg="$("$CANDLE" rerank -m "$enc/bert-tiny-reranker" -p doc 2>&1)"
case "$msg" in *"need -m MODEL, -q QUERY"*) ;; *) echo "FAIL rerank without -q: $msg" >&2; fail=1 ;; esac

[ $fail -eq 0 ] && echo "test_classify_cli: passed"
exit $fail
