#!/usr/bin/env bash
# Strings from a model file reach the terminal escaped (issue 22, finding 10):
# a GGUF whose architecture, name, keys and tensor name carry terminal
# control sequences (ESC ] title, ESC [ 2J clear, BEL, CSI as U+009B) shows
# them as \x1b, \x07, \u009b in `candle info` and in the loader's error.
set -u
CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$T/evil.gguf" <<'PY'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
kvs = [kv_str(b"general.architecture", b"llama\x1b[2J"),
       kv_str(b"general.name", b"x\x1b]0;pwned\x07y\xc2\x9b31m"),
       kv_str(b"evil\x1b[31m.key", b"v")]
name = b"tok\x1b[5membd"
tensor = s(name) + struct.pack("<I", 1) + struct.pack("<Q", 8) + struct.pack("<I", 0) + struct.pack("<Q", 0)
head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs) + tensor
head += b"\0" * (-len(head) % 32)
open(sys.argv[1], "wb").write(head + b"\0" * 32)
PY
fail=0 checks=0
no_controls() { # no_controls WHAT FILE: no ESC, BEL or the C1 CSI in FILE, and the escapes shown
    checks=$((checks + 1))
    if LC_ALL=C grep -q $'[\x1b\x07]\|\xc2\x9b' "$2"; then echo "FAIL: $1: raw control characters:"; cat -v "$2"; fail=1; fi
    if ! grep -qF '\x1b' "$2"; then echo "FAIL: $1: no \\x1b escape shown:"; cat -v "$2"; fail=1; fi
}
"$CANDLE" info "$T/evil.gguf" >"$T/info" 2>&1
no_controls "candle info" "$T/info"
checks=$((checks + 1))
grep -qF 'x\x1b]0;pwned\x07y\u009b31m' "$T/info" || { echo "FAIL: general.name not shown escaped:"; cat -v "$T/info"; fail=1; }
"$CANDLE" run -m "$T/evil.gguf" -p hi -n 1 >"$T/run" 2>&1; rc=$?
checks=$((checks + 1))
[ $rc != 0 ] || { echo "FAIL: run of a model with an unknown architecture succeeded"; fail=1; }
no_controls "candle run's error" "$T/run"
[ $fail = 0 ] && echo "test_terminal_escape: $checks checks passed"
exit $fail
