#!/usr/bin/env bash
# Cross-check with the reference `safetensors` Python package (PyPI): a file
# written by safetensors.numpy.save_file (every numpy dtype it stores, rank
# 0, zero elements, metadata) reads back in Candle with the same names,
# dtypes, shapes and values (F64 rounded to F32; dtypes Candle has no type
# for refused). Prints SKIP and exits 77 (a CTest skip) when the packages
# are not installed.
set -euo pipefail

if ! python3 -c 'import safetensors, numpy' 2>/dev/null; then
    echo "SKIP: test_safetensors_python: python3 cannot import safetensors and numpy (pip install safetensors numpy)"
    exit 77
fi
BIN="${CANDLE_BINARY_DIR:?}/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp/ref.safetensors" <<'EOF_PY'
import sys
import numpy as np
from safetensors.numpy import save_file

rng = np.random.default_rng(7)
t = {
    "f32": np.array([[1.5, -0.0, np.inf], [-np.inf, 1e-40, 3.4e38]], dtype=np.float32),
    "f16": rng.standard_normal(6).astype(np.float16),
    "f64": np.array([0.1, -1e300, 1e-50, 2.5, np.nan], dtype=np.float64),
    "i8": np.array([-128, 127, 0, 5], dtype=np.int8),
    "i32": np.array([[-(2**24), 2**24]], dtype=np.int32),
    "i64": np.arange(-3, 3, dtype=np.int64).reshape(2, 1, 3),
    "u8": np.array([0, 255, 7], dtype=np.uint8),
    "bool": np.array([True, False, True]),
    "u16": np.array([1, 2], dtype=np.uint16),
    "i16": np.array([-1], dtype=np.int16),
    "scalar": np.array(2.0, dtype=np.float32),
    "empty": np.zeros((3, 0), dtype=np.float32),
}
save_file(t, sys.argv[1], metadata={"format": "np", "note": "h\u00e9llo"})
EOF_PY

"$BIN/test_safetensors" --dump "$tmp/ref.safetensors" >"$tmp/dump.txt"

python3 - "$tmp/ref.safetensors" "$tmp/dump.txt" <<'EOF_PY'
import sys
import numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open

ref = load_file(sys.argv[1])
with safe_open(sys.argv[1], "np") as f:
    meta = f.metadata()
got_meta, got = {}, {}
for line in open(sys.argv[2], encoding="utf-8"):
    kind, rest = line.rstrip("\n").split(" ", 1)
    if kind == "meta":
        k, v = rest.split(" ", 1)
        got_meta[k] = v
        continue
    name, dtype, rest = rest.split(" ", 2)
    shape, _, vals = rest.partition("] ")
    shape = [int(x) for x in shape.strip("[]").split(",") if x.strip()]
    got[name] = (dtype, shape, vals)
assert got_meta == meta, (got_meta, meta)
assert set(got) == set(ref), (set(got), set(ref))
names = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int8: "I8",
         np.int32: "I32", np.int64: "I64", np.uint8: "U8", np.bool_: "BOOL",
         np.uint16: "U16", np.int16: "I16"}
for name, a in ref.items():
    dtype, shape, vals = got[name]
    assert dtype == names[a.dtype.type], (name, dtype, a.dtype)
    assert shape == list(a.shape), (name, shape, a.shape)
    if dtype in ("U16", "I16"):
        assert vals == "unsupported", (name, vals)
        continue
    want = a.astype(np.float32).ravel()
    have = np.array([float(x) for x in vals.split()], dtype=np.float32)
    assert have.shape == want.shape, (name, have, want)
    assert np.array_equal(have, want, equal_nan=True), (name, have, want)
print("test_safetensors_python: %d tensors and %d metadata keys agree" % (len(ref), len(meta)))
EOF_PY
