#!/usr/bin/env bash
# candle bench -m MODEL: the JSON output parses and carries llama-bench's
# field names and values (so tools written for llama-bench read it); the
# markdown table has llama-bench's columns; --latency and --roofline add
# their figures; usage errors and a missing model fail with a message.
# Timings are never asserted.
set -euo pipefail

CANDLE="${CANDLE:?}"
MODEL="${CANDLE_SHARED_DIR:-${CANDLE_SOURCE_DIR:?}/../shared}/data/models/stories260K.gguf"
if [ ! -f "$MODEL" ]; then
    echo "SKIP: test_bench_cli: $MODEL not found"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_bench_cli: $*"; exit 1; }

"$CANDLE" bench -m "$MODEL" -p 16 -n 8 -r 2 -o json >"$tmp/out.json" 2>"$tmp/err" ||
    fail "bench -o json exited $? ($(cat "$tmp/err"))"
python3 - "$tmp/out.json" "$MODEL" <<'PY' || fail "JSON check"
import json, sys
recs = json.load(open(sys.argv[1]))
assert isinstance(recs, list) and len(recs) == 2, recs
fields = ["build_commit", "cpu_info", "backends", "model_filename", "model_type", "model_size",
          "model_n_params", "n_batch", "n_threads", "type_k", "type_v", "use_mmap", "n_prompt",
          "n_gen", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns",
          "samples_ts"]
for r in recs:
    missing = [f for f in fields if f not in r]
    assert not missing, missing
    assert r["model_filename"] == sys.argv[2]
    assert r["n_threads"] == 2 and r["use_mmap"] is True
    assert r["model_n_params"] == 292800, r["model_n_params"]  # stories260K
    assert r["model_type"].startswith("llama "), r["model_type"]
    assert len(r["samples_ts"]) == 2 and len(r["samples_ns"]) == 2
    assert all(t > 0 for t in r["samples_ts"])
    n = r["n_prompt"] + r["n_gen"]
    for ns, ts in zip(r["samples_ns"], r["samples_ts"]):
        assert abs(n * 1e9 / ns - ts) <= 1e-3 * ts, (ns, ts)
    assert abs(sum(r["samples_ts"]) / 2 - r["avg_ts"]) <= 1e-3 * r["avg_ts"]
    assert r["stddev_ts"] >= 0
assert (recs[0]["n_prompt"], recs[0]["n_gen"]) == (16, 0)
assert (recs[1]["n_prompt"], recs[1]["n_gen"]) == (0, 8)
PY

# Markdown, no mmap, latency (its own figures) and the roofline.
"$CANDLE" bench -m "$MODEL" -p 8 -n 4 -r 1 --no-mmap --latency 20 --roofline >"$tmp/out.md" 2>"$tmp/err" ||
    fail "bench markdown exited $? ($(cat "$tmp/err"))"
grep -q '^| model | size | params | backend | threads | mmap | test | t/s |$' "$tmp/out.md" || fail "table header"
grep -q '| 2 | 0 | pp8 |' "$tmp/out.md" || fail "pp8 row with mmap 0: $(cat "$tmp/out.md")"
grep -q '| 2 | 0 | tg4 |' "$tmp/out.md" || fail "tg4 row"
grep -q '^| 20 | ' "$tmp/out.md" || fail "latency row"
grep -q '^machine floor: 20 passes of 2 threads .* P99/P50 [0-9.]*$' "$tmp/out.md" || fail "machine floor line"
grep -q 'of the bandwidth roofline' "$tmp/out.md" || fail "roofline line"

"$CANDLE" bench -m "$MODEL" -p 0 -n 4 -r 1 --latency 20 -o json >"$tmp/lat.json" 2>"$tmp/err" ||
    fail "bench --latency json exited $?"
python3 - "$tmp/lat.json" <<'PY' || fail "latency JSON"
import json, sys
recs = json.load(open(sys.argv[1]))
assert len(recs) == 1 and recs[0]["n_gen"] == 4
r = recs[0]
assert r["lat_tokens"] == 20
assert 0 < r["lat_p50_ms"] <= r["lat_p90_ms"] <= r["lat_p99_ms"]
assert r["allocs_per_token"] >= 0 and r["peak_rss"] > 0
assert r["lat_floor_p50_ms"] > 0 and r["lat_floor_p99_p50"] >= 1
PY

# --latency-fixed: every timed token at one position (the cache truncated back).
"$CANDLE" bench -m "$MODEL" -p 0 -n 2 -r 1 --latency 20 --latency-fixed -o json >"$tmp/fix.json" 2>"$tmp/err" ||
    fail "bench --latency-fixed exited $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[-1]; assert r["lat_tokens"] == 20 and 0 < r["lat_p50_ms"] <= r["lat_p99_ms"] and r["allocs_per_token"] == 0 and r["copies_per_token"] == 0' "$tmp/fix.json" ||
    fail "latency-fixed JSON"

# The LD_PRELOAD counter (not under sanitizers, which replace malloc).
LIB="${CANDLE_BINARY_DIR:?}/lib/libcandle_malloc_count.so"
if [ -f "$LIB" ] && ! ldd "$CANDLE" | grep 'libasan\|libtsan' >/dev/null; then
    LD_PRELOAD="$LIB" "$CANDLE" bench -m "$MODEL" -p 4 -n 2 -r 1 --latency 10 -o json >"$tmp/m.json" ||
        fail "bench under the malloc counter"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[-1]; assert r["mallocs_per_token"] >= 0 and r["mallocs_per_prompt"] >= 0, r' "$tmp/m.json" ||
        fail "malloc counts"
fi

# -d: the tests run after that many tokens (llama-bench's n_depth, "@ dN" in
# the table); -ctk/-ctv: the KV cache type (f16 by default, as llama.cpp).
"$CANDLE" bench -m "$MODEL" -p 8 -n 4 -r 1 -d 24 -o json >"$tmp/d.json" 2>"$tmp/err" ||
    fail "bench -d exited $? ($(cat "$tmp/err"))"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["n_depth"] for x in r] == [24, 24] and all(x["type_k"] == x["type_v"] == "f16" and x["avg_ts"] > 0 for x in r), r' "$tmp/d.json" ||
    fail "depth JSON"
"$CANDLE" bench -m "$MODEL" -p 0 -n 4 -r 1 -d 8 -ctk f32 -ctv f32 >"$tmp/d.md" 2>"$tmp/err" ||
    fail "bench -d -ctk f32 exited $? ($(cat "$tmp/err"))"
grep -q '| tg4 @ d8 |' "$tmp/d.md" || fail "tg4 @ d8 row: $(cat "$tmp/d.md")"
"$CANDLE" bench -m "$MODEL" -p 0 -n 4 -r 1 -ctk f32 -o json >"$tmp/k.json" 2>"$tmp/err" ||
    fail "bench -ctk f32 exited $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; assert r["type_k"] == r["type_v"] == "f32" and r["n_depth"] == 0, r' "$tmp/k.json" ||
    fail "-ctk f32 JSON"

# Errors: bad values and a missing file.
set +e
"$CANDLE" bench -m "$MODEL" -o xml >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad value 'xml' for -o" "$tmp/err" || fail "-o xml: rc $rc, $(cat "$tmp/err")"
"$CANDLE" bench -m "$MODEL" -r 0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad value '0' for -r" "$tmp/err" || fail "-r 0: rc $rc"
"$CANDLE" bench -m "$MODEL" -ctk f16 -ctv f32 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "ctk and -ctv differ" "$tmp/err" || fail "-ctk f16 -ctv f32: rc $rc, $(cat "$tmp/err")"
"$CANDLE" bench -m "$MODEL" -ctk q5_k >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad value 'q5_k' for -ctk" "$tmp/err" || fail "-ctk q5_k: rc $rc"
# a quantized cache needs head_dim a multiple of its blocks (stories260K: 8)
"$CANDLE" bench -m "$MODEL" -p 0 -n 2 -r 1 -ctk q8_0 -ctv q8_0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "kv cache: q8_0 rows are blocks of 32, head_dim 8 is not a multiple" "$tmp/err" ||
    fail "-ctk q8_0 on head_dim 8: rc $rc, $(cat "$tmp/err")"
"$CANDLE" bench -m "$MODEL" -d -1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad value '-1' for -d" "$tmp/err" || fail "-d -1: rc $rc"
"$CANDLE" bench -m "$MODEL" --bogus >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option" "$tmp/err" || fail "--bogus: rc $rc"
"$CANDLE" bench -m "$tmp/none.gguf" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "candle bench: .*none.gguf" "$tmp/err" || fail "missing model: rc $rc, $(cat "$tmp/err")"
set -e
echo "PASS test_bench_cli"
