#!/usr/bin/env bash
# candle bench attn --quick --json: the JSON parses and has the S = 256 case
# with all its fields (flash and materialised times, speedup, peak bytes);
# the markdown table and option errors work. Timings are never asserted
# (only that they are positive); peak bytes are: the flash context holds
# q/k/v/out and no [S, S] scores, the materialised one more than the scores.
set -euo pipefail

CANDLE="${CANDLE:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_bench_attn: $*"; exit 1; }

"$CANDLE" bench attn --quick --json -t 2 >"$tmp/out.json" 2>"$tmp/err" ||
    fail "bench attn --json exited $? ($(cat "$tmp/err"))"

python3 - "$tmp/out.json" <<'PY' || fail "JSON check failed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bench"] == "attn" and d["threads"] == 2 and d["quick"] is True and d["causal"] is True, d
rows = d["results"]
assert len(rows) == 1, rows
r = rows[0]
for f in ["heads", "hq", "hkv", "d", "s", "flash_ms", "materialised_ms", "speedup",
          "flash_peak_bytes", "materialised_peak_bytes"]:
    assert f in r, f
assert (r["hq"], r["hkv"], r["d"], r["s"]) == (9, 3, 64, 256), r
assert r["flash_ms"] > 0 and r["materialised_ms"] > 0, r
assert abs(r["speedup"] - r["materialised_ms"] / r["flash_ms"]) <= 0.01 * r["speedup"] + 1e-3, r
S, D = r["s"], r["d"]
qo = 2 * r["hq"] * S * D * 4
kv = 2 * r["hkv"] * S * D * 4
scores = r["hq"] * S * S * 4
assert qo + kv <= r["flash_peak_bytes"] < qo + kv + scores // 2, r
assert r["materialised_peak_bytes"] >= qo + kv + scores, r
assert d["target"] == [], d["target"]
PY

"$CANDLE" bench attn --quick -t 1 >"$tmp/out.md" 2>"$tmp/err" || fail "bench attn (table) exited $?"
grep -q '^| heads | Hq | Hkv | D | S | flash ms | materialised ms | speedup |' "$tmp/out.md" || fail "no table header"
grep -q '^| smollm2 | 9 | 3 | 64 | 256 |' "$tmp/out.md" || fail "no S=256 row"

if "$CANDLE" bench attn --bogus >"$tmp/out" 2>"$tmp/err"; then fail "--bogus accepted"; fi
grep -q "unknown option '--bogus'" "$tmp/err" || fail "no message for --bogus: $(cat "$tmp/err")"
if "$CANDLE" bench attn -t 0 >"$tmp/out" 2>"$tmp/err"; then fail "-t 0 accepted"; fi
grep -q "1..256 threads" "$tmp/err" || fail "no message for -t 0"
echo "PASS test_bench_attn"
