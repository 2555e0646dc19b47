#!/usr/bin/env bash
# Cross-check with the reference `gguf` Python package (PyPI):
#  1. a file written by Candle's writer loads in gguf.GGUFReader with the same
#     metadata, tensor shapes, types, offsets and bytes;
#  2. a file written by gguf.GGUFWriter (every value type, nested arrays,
#     quantized tensor) is read by `candle info`.
# Prints SKIP and exits 77 (a CTest skip) when the package is not installed.
set -euo pipefail

if ! python3 -c 'import gguf' 2>/dev/null; then
    echo "SKIP: test_gguf_python: python3 cannot import gguf (pip install gguf)"
    exit 77
fi
BIN="${CANDLE_BINARY_DIR:?}/bin"
CANDLE="${CANDLE:-$BIN/candle}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN/test_gguf" --write "$tmp/candle.gguf"

python3 - "$tmp/candle.gguf" <<'EOF'
import sys
import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as Q

r = GGUFReader(sys.argv[1])
f = {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}

def val(k):
    return f[k].contents()

assert r.alignment == 64, r.alignment
assert val("general.architecture") == "llama"
assert val("test.u32") == 4000000000
assert val("test.i32") == -42
assert abs(val("test.f32") - 1e-5) < 1e-12
assert val("test.bool") is True or val("test.bool") == 1
assert val("test.str") == "replaced"
assert list(val("test.arr_i32")) == [-1, 0, 65536]
assert list(val("test.arr_f32")) == [0.25, -8.0]
assert list(val("test.arr_u8")) == [1, 2, 3, 250, 255]
assert list(val("test.arr_str")) == ["<unk>", "", 'h\u00e9llo "q"'], val("test.arr_str")
assert val("general.alignment") == 64

t = {x.name: x for x in r.tensors}
assert list(t) == ["w.f32", "w.f16", "w.q8_0", "w.i32"], list(t)
want = {  # gguf lists dims innermost-first
    "w.f32": (Q.F32, [3, 2]),
    "w.f16": (Q.F16, [4]),
    "w.q8_0": (Q.Q8_0, [32, 2]),
    "w.i32": (Q.I32, [1, 5, 1]),
}
for name, (ty, shape) in want.items():
    x = t[name]
    assert x.tensor_type == ty, (name, x.tensor_type)
    assert list(map(int, x.shape)) == shape, (name, x.shape)
    assert x.data_offset % 64 == 0, (name, x.data_offset)
np.testing.assert_array_equal(t["w.f32"].data.reshape(-1),
                              np.array([1.5, -2.0, 3.25, 0.0, -0.5, 1e-3], np.float32))
np.testing.assert_array_equal(t["w.f16"].data.reshape(-1),
                              np.array([-1.5, -0.5, 0.5, 1.5], np.float16))
q8 = np.frombuffer(t["w.q8_0"].data.tobytes(), np.uint8)
assert list(q8) == [(i * 7 + 1) % 256 for i in range(68)], q8[:8]
assert list(t["w.i32"].data.reshape(-1)) == [7, -8, 9, 2147483647, -2147483648]
print("gguf.GGUFReader reads Candle's file")
EOF

python3 - "$tmp/py.gguf" <<'EOF'
import sys
import numpy as np
from gguf import GGUFWriter, GGUFValueType as V, GGMLQuantizationType as Q

w = GGUFWriter(sys.argv[1], "llama")
w.add_uint8("py.u8", 200)
w.add_int8("py.i8", -100)
w.add_uint16("py.u16", 60000)
w.add_int16("py.i16", -30000)
w.add_uint32("py.u32", 123456)
w.add_int32("py.i32", -123456)
w.add_float32("py.f32", 0.5)
w.add_uint64("py.u64", 2**63 + 5)
w.add_int64("py.i64", -(2**40))
w.add_float64("py.f64", 3.25)
w.add_bool("py.bool", False)
w.add_string("py.str", "hello world")
w.add_array("py.arr_str", ["a", "bc", "def"])
w.add_array("py.nested", [[1, 2], [3]])
w.add_tensor("t.f32", np.arange(12, dtype=np.float32).reshape(3, 4))
w.add_tensor("t.q8", np.zeros((2, 34), np.uint8), raw_dtype=Q.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
EOF

out=$("$CANDLE" info "$tmp/py.gguf")
fail=0
for want in 'architecture:  llama' 'py.u8 ' ' 200' ' -100' ' 60000' ' -30000' ' 123456' \
    ' -123456' ' 0.5' ' 9223372036854775813' ' -1099511627776' ' 3.25' ' false' \
    '"hello world"' '[str x 3] ["a", "bc", "def"]' '[arr x 2]' \
    't.f32 ' '[3, 4]' 't.q8 ' 'q8_0' '[2, 32]' 'parameters:    76 (76)'; do
    if ! grep -qF -- "$want" <<<"$out"; then
        echo "candle info output lacks '$want'"
        fail=1
    fi
done
if [ $fail -ne 0 ]; then
    echo "$out"
    exit 1
fi
echo "candle info reads gguf.GGUFWriter's file"
echo "test_gguf_python: passed"
