#!/usr/bin/env bash
# candle bench load: the tiny committed qwen2 as a Hugging Face directory, as
# its converter GGUF and as the bare model.safetensors each get a row with
# real figures (times, peak RSS, file and tensor bytes > 0; the two qwen2
# sources hold the same 26 tensors), the table has both rows, model_load
# applies to the directory and the GGUF and not to a bare .safetensors file;
# usage errors and a missing path fail with a message. Timings are never
# compared.
set -euo pipefail

CANDLE="${CANDLE:?}"
D="${CANDLE_SOURCE_DIR:?}/tests/data/hf/qwen2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_bench_load: $*"; exit 1; }

"$CANDLE" bench load -m "$D" -m "$D/qwen2.gguf" -m "$D/model.safetensors" --reps 1 --json \
    >"$tmp/out.json" 2>"$tmp/err" || fail "--json exited $? ($(cat "$tmp/err"))"
python3 - "$tmp/out.json" "$D" <<'PY' || fail "JSON check: $(cat "$tmp/out.json")"
import json, os, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d = sys.argv[2]
assert [r["path"] for r in recs] == [d, d + "/qwen2.gguf", d + "/model.safetensors"], recs
assert [(r["format"], r["reader"]) for r in recs] == [
    ("safetensors", "weights"), ("gguf", "gguf"), ("safetensors", "safetensors")], recs
for r in recs:
    assert r["reps"] == 1 and r["use_mmap"] is True, r
    assert r["n_tensors"] == 26, r  # 2 layers of qwen2 with biases, tied embeddings
    assert r["tensor_bytes"] > 0 and r["file_bytes"] >= r["tensor_bytes"] * 0.9, r
    assert r["load_ms"] > 0 and len(r["load_ms_samples"]) == 1, r
    assert r["peak_rss_bytes"] > 0 and r["peak_rss_bytes"] >= r["start_rss_bytes"] > 0, r
st, gg, raw = recs
assert st["file_bytes"] == os.path.getsize(d + "/model.safetensors"), st
assert gg["file_bytes"] == os.path.getsize(d + "/qwen2.gguf"), gg
for r in (st, gg):
    assert r["model_load_ms"] is not None and r["model_load_ms"] > 0, r
    assert r["model_load_peak_rss_bytes"] > 0, r
assert raw["model_load_ms"] is None and "not a model path" in raw["model_load_note"], raw
PY

# the table: a header and one row per path with numbers in every column
"$CANDLE" bench load -m "$D" -m "$D/qwen2.gguf" --reps 1 >"$tmp/out.md" 2>"$tmp/err" ||
    fail "table exited $? ($(cat "$tmp/err"))"
grep -q '^| path | format | reader | file MiB | tensors | open+load+touch ms | peak RSS MiB | model_load ms | model_load RSS MiB |$' \
    "$tmp/out.md" || fail "table header: $(cat "$tmp/out.md")"
num='[0-9]+(\.[0-9]+)?'
for row in "$D \| safetensors \| weights" "$D/qwen2.gguf \| gguf \| gguf"; do
    line=$(grep -E "^\| $row \| " "$tmp/out.md") || fail "no row '$row': $(cat "$tmp/out.md")"
    echo "$line" | grep -Eq "^\| [^|]+ \| [a-z]+ \| [a-z]+ \| $num \| 26 \| $num \| $num \| $num \| $num \|$" ||
        fail "row '$line' lacks figures"
    # every figure > 0 (file MiB and times are printed to 0.1 / 0.01: > 0 means some digit is not 0)
    for f in 4 6 7 8 9; do
        v=$(echo "$line" | awk -F'|' -v f="$f" '{gsub(/ /, "", $(f + 1)); print $(f + 1)}')
        awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || fail "column $f of '$line' is $v"
    done
done

# --cold (the files' cached pages dropped before each run) and --no-mmap
"$CANDLE" bench load -m "$D" -m "$D/qwen2.gguf" --reps 2 --cold --no-mmap --json >"$tmp/cold.json" 2>"$tmp/err" ||
    fail "--cold --no-mmap exited $? ($(cat "$tmp/err"))"
python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 2, recs
for r in recs:
    assert r["page_cache"] == "cold" and r["use_mmap"] is False and r["reps"] == 2, r
    assert len(r["load_ms_samples"]) == 2 and min(r["load_ms_samples"]) > 0 and r["peak_rss_bytes"] > 0, r
    assert r["model_load_ms"] > 0, r
' "$tmp/cold.json" || fail "cold JSON: $(cat "$tmp/cold.json")"

# errors
set +e
"$CANDLE" bench load >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no -m PATH" "$tmp/err" || fail "no -m: rc $rc, $(cat "$tmp/err")"
"$CANDLE" bench load -m "$D" --reps 0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad value '0' for --reps" "$tmp/err" || fail "--reps 0: rc $rc"
"$CANDLE" bench load -m "$D" --bogus >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option" "$tmp/err" || fail "--bogus: rc $rc"
"$CANDLE" bench load -m "$tmp/none.gguf" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "none.gguf" "$tmp/err" || fail "missing path: rc $rc, $(cat "$tmp/err")"
"$CANDLE" bench load -m "$D/config.json" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "not a directory, .safetensors or .gguf" "$tmp/err" || fail "config.json: rc $rc"
printf 'not a gguf' >"$tmp/bad.gguf"
"$CANDLE" bench load -m "$tmp/bad.gguf" --reps 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "bad.gguf: open: " "$tmp/err" || fail "bad gguf: rc $rc, $(cat "$tmp/err")"
set -e
echo "PASS test_bench_load"
