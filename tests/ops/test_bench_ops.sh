#!/bin/bash
# `candle bench ops`: runs the small shapes and prints well-formed JSON with
# the machine probes and one record per shape and thread count. No timing is
# asserted (only that every figure is a positive number).
set -euo pipefail
out=$("$CANDLE" bench ops --quick --json -t 1)
printf '%s\n' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["bench"] == "ops", d
m = d["machine"]
assert m["peak_gflops"]["1"] > 0 and m["read_gbs"]["1"] > 0, m
rows = d["results"]
assert len(rows) >= 6, len(rows)
for r in rows:
    assert r["gflops"] > 0 and r["threads"] == 1, r
    assert r["weight"] in ("f32", "f16", "bf16"), r
    if d["openblas"] and r["weight"] == "f32":
        assert r["openblas_gflops"] > 0 and r["ratio"] > 0, r
shapes = {(r["shape"], r["M"]) for r in rows}
assert ("2048x2048", 1) in shapes and ("square 64", 64) in shapes, shapes
assert {(r["shape"], r["M"]) for r in rows if r["weight"] == "bf16"} == {("2048x2048", 1), ("2048x2048", 32)}, rows
print("bench ops json ok:", len(rows), "rows")
'
# usage errors exit 2
set +e
"$CANDLE" bench ops --bogus >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "bench ops --bogus: exit $rc, want 2"; exit 1; }
"$CANDLE" bench ops -t 0 >/dev/null 2>&1 && { echo "bench ops -t 0 accepted"; exit 1; }
echo "test_bench_ops: ok"
