#!/usr/bin/env bash
# candle bench quant --quick --json: the JSON parses and has, for every weight
# type, M = 1, 8, 16, 64 and 128 rows with all their fields, conversion throughputs and
# the matvec target lines; the markdown table and option errors work.
# Timings are never asserted (only that they are positive numbers).
set -euo pipefail

CANDLE="${CANDLE:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_bench_quant: $*"; exit 1; }

"$CANDLE" bench quant --quick --json -t 2 >"$tmp/out.json" 2>"$tmp/err" ||
    fail "bench quant --json exited $? ($(cat "$tmp/err"))"

python3 - "$tmp/out.json" <<'PY' || fail "JSON check failed"
import json, sys
d = json.load(open(sys.argv[1]))
types = ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k",
         "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"]
assert d["bench"] == "quant" and d["threads"] == 2 and d["quick"] is True, d
assert d["machine"]["read_gbs"] > 0 and d["machine"]["kernels"], d["machine"]
fields = ["type", "bpw", "shape", "M", "N", "K", "weight_bytes", "ms", "gbs", "gflops", "pct_bw"]
for t in types:
    rows = [r for r in d["results"] if r["type"] == t]
    assert sorted(r["M"] for r in rows) == [1, 8, 16, 64, 128], (t, rows)
    for r in rows:
        for f in fields:
            assert f in r, (t, f)
        assert r["ms"] > 0 and r["gbs"] >= 0 and r["gflops"] >= 0 and r["pct_bw"] >= 0, r
        flops = 2 * r["M"] * r["N"] * r["K"] / (r["ms"] * 1e-3) * 1e-9
        assert abs(flops - r["gflops"]) <= 0.02 * flops + 0.002, r
    q = [c for c in d["quantize"] if c["type"] == t]
    assert len(q) == 1 and q[0]["from_f32_mbs"] > 0 and q[0]["to_f32_mbs"] > 0, (t, q)
bpw = {r["type"]: r["bpw"] for r in d["results"]}
assert bpw["f16"] == 16 and bpw["q4_0"] == 4.5 and bpw["q8_0"] == 8.5 and bpw["q4_k"] == 4.5, bpw
assert sorted(t["type"] for t in d["target"]) == ["q4_0", "q4_k", "q8_0"], d["target"]
for t in d["target"]:
    assert t["goal_pct"] == 80 and isinstance(t["met"], bool), t
PY

"$CANDLE" bench quant --quick -t 1 >"$tmp/out.md" 2>"$tmp/err" || fail "bench quant (table) exited $?"
grep -q '^| type | bpw | shape | M | ms | GB/s | GFLOP/s | %bw |$' "$tmp/out.md" || fail "no table header"
grep -q '^| iq4_xs | 4.25 | 256x512 | 64 |' "$tmp/out.md" || fail "no iq4_xs M=64 row"
grep -q '^target q4_k matvec' "$tmp/out.md" || fail "no target line"

if "$CANDLE" bench quant --bogus >"$tmp/out" 2>"$tmp/err"; then fail "--bogus accepted"; fi
grep -q "unknown option '--bogus'" "$tmp/err" || fail "no message for --bogus: $(cat "$tmp/err")"
if "$CANDLE" bench quant -t 0 >"$tmp/out" 2>"$tmp/err"; then fail "-t 0 accepted"; fi
grep -q "1..256 threads" "$tmp/err" || fail "no message for -t 0"
if "$CANDLE" bench quant --type q4_K7 >"$tmp/out" 2>"$tmp/err"; then fail "--type q4_K7 accepted"; fi
grep -q "is not one of: f16" "$tmp/err" || fail "no message for --type q4_K7: $(cat "$tmp/err")"
"$CANDLE" bench quant --type Q4_K --shape 256x512 --m 2 -t 1 >"$tmp/out.md" 2>"$tmp/err" || fail "--type Q4_K exited $?"
grep -q '^| q4_k | 4.50 | 256x512 | 2 |' "$tmp/out.md" || fail "--type Q4_K (any case) ran no q4_k row"
echo "PASS test_bench_quant"
