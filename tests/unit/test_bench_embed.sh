#!/usr/bin/env bash
# candle bench embed on the tiny BERT directory (tests/data/encoders/bert-tiny)
# with few calls: the JSON parses, has a row per thread count x length x batch
# with every figure present and > 0 (timings are never compared), a length over
# the model's limit is reported as skipped, and the table and option errors work.
set -euo pipefail

CANDLE="${CANDLE:?}"
here="$(cd "$(dirname "$0")" && pwd)"
model="$here/../data/encoders/bert-tiny"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_bench_embed: $*"; exit 1; }

"$CANDLE" bench embed -m "$model" --lengths 16,32,100 --batch 1,4 -t 1,2 --reps 3 --batch-reps 2 --json \
    >"$tmp/out.json" 2>"$tmp/err" || fail "bench embed --json exited $? ($(cat "$tmp/err"))"
grep -q "100 tokens is over the model's limit (64" "$tmp/err" || fail "no skip message: $(cat "$tmp/err")"

python3 - "$tmp/out.json" <<'PY' || fail "JSON check failed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bench"] == "embed" and d["dim"] == 64 and d["max_tokens"] == 64, d
assert d["skipped"] == [100], d["skipped"]
assert isinstance(d["word"], str) and d["word"], d
rows = d["results"]
want = {(t, L, b) for t in (1, 2) for L in (16, 32) for b in (1, 4)}
assert {(r["threads"], r["tokens"], r["batch"]) for r in rows} == want and len(rows) == len(want), rows
for r in rows:
    for f in ["p50_ms", "p99_ms", "mean_ms", "min_ms", "inputs_per_s"]:
        assert r[f] > 0, (f, r)
    assert r["reps"] == (3 if r["batch"] == 1 else 2), r
    assert r["min_ms"] <= r["p50_ms"] <= r["p99_ms"], r
    assert abs(r["inputs_per_s"] - 1e3 * r["batch"] / r["p50_ms"]) <= 0.01 * r["inputs_per_s"], r
PY

"$CANDLE" bench embed -m "$model" --lengths 16 --batch 1 -t 1 --reps 2 >"$tmp/out.md" 2>"$tmp/err" ||
    fail "bench embed (table) exited $?"
grep -q '^| threads | tokens | batch | calls | P50 ms | P99 ms | mean ms | inputs/s |' "$tmp/out.md" || fail "no table header"
grep -qE '^\| 1 \| 16 \| 1 \| 2 \| [0-9.]+ \|' "$tmp/out.md" || fail "no row: $(cat "$tmp/out.md")"

if "$CANDLE" bench embed -m "$model" --bogus >"$tmp/out" 2>"$tmp/err"; then fail "--bogus accepted"; fi
grep -q "unknown option '--bogus'" "$tmp/err" || fail "no message for --bogus: $(cat "$tmp/err")"
if "$CANDLE" bench embed -m "$model" --lengths 2 >"$tmp/out" 2>"$tmp/err"; then fail "--lengths 2 accepted"; fi
if "$CANDLE" bench embed --json >"$tmp/out" 2>"$tmp/err"; then fail "no -m accepted"; fi
grep -q "need -m MODEL" "$tmp/err" || fail "no message for a missing -m"
echo "PASS test_bench_embed"
