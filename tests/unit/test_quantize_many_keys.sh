#!/usr/bin/env bash
# `candle quantize` of a GGUF with 100k metadata keys (issue 22, finding 10):
# the writer found each key by a scan of all before it, so copying the
# metadata was quadratic (over a minute); it must take well under the
# timeout here, and the output keeps every key, in order.
# tests/data/tiny/qwen2.gguf with 100000 u32 keys added.
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
SRC="${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
IN="$SRC/tests/data/tiny/qwen2.gguf"
[ -f "$IN" ] || { echo "SKIP: $IN absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$IN" "$T/in.gguf" 100000 <<'PY' || { echo "FAIL: cannot build the input"; exit 1; }
import struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = open(src, "rb").read()
pos = 4
def rd(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, b, pos)[0]
    pos += struct.calcsize("<" + fmt)
    return v
SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global pos
    if t == 8:
        l = rd("Q")
        pos += l
    elif t == 9:
        et, cnt = rd("I"), rd("Q")
        for _ in range(cnt):
            skip(et)
    else:
        pos += SIZE[t]
ver, nt, nkv = rd("I"), rd("Q"), rd("Q")
align = 32
for _ in range(nkv):
    kl = rd("Q")
    key = b[pos:pos + kl]
    pos += kl
    t = rd("I")
    if key == b"general.alignment":
        align = struct.unpack_from("<I", b, pos)[0]
    skip(t)
kv_end = pos
for _ in range(nt):
    l = rd("Q")
    pos += l
    nd = rd("I")
    pos += 8 * nd + 4 + 8
ti_end = pos
data = b[(ti_end + align - 1) // align * align:]
extra = b"".join(struct.pack("<Q", 13) + b"x.key.%07d" % i + struct.pack("<II", 4, i) for i in range(n))
head = b[:4] + struct.pack("<IQQ", ver, nt, nkv + n) + b[24:kv_end] + extra + b[kv_end:ti_end]
open(dst, "wb").write(head + b"\0" * ((-len(head)) % align) + data)
PY
fail=0
start=$(date +%s.%N)
timeout 30 "$CANDLE" quantize "$T/in.gguf" "$T/out.gguf" q8_0 >"$T/out" 2>"$T/err"; rc=$?
secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
if [ $rc != 0 ]; then
    echo "FAIL: quantize of 100k keys: exit $rc after $secs s (124: the 30 s timeout)"; tail -3 "$T/err"; fail=1
else
    "$CANDLE" info "$T/out.gguf" >"$T/info" 2>&1
    n=$(grep -c '^  x\.key\.' "$T/info")
    first=$(grep -m1 '^  x\.key\.' "$T/info" | awk '{print $1}')
    last=$(grep '^  x\.key\.' "$T/info" | tail -1 | awk '{print $1, $3}')
    { [ "$n" = 100000 ] && [ "$first" = x.key.0000000 ] && [ "$last" = "x.key.0099999 99999" ]; } ||
        { echo "FAIL: the output has $n of the keys (first $first, last $last)"; fail=1; }
    [ $fail = 0 ] && echo "quantize of 100k metadata keys: $secs s, every key kept in order"
fi
exit $fail
