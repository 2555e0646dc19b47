#!/usr/bin/env bash
# `candle quantize` on the real stories260K model (F32): Q8_0 and Q4_K_M
# outputs read by `candle info` (dtypes, general.file_type) and generate text
# with `candle run`; with the `gguf` Python package present, its reader and
# reference dequantizers check the outputs against the F32 weights. Error
# paths: unknown type, the input as output (path, symlink, hard link), a
# missing output directory (no file, no temporary left), an existing output
# directory. Prints SKIP and exits 77 (a CTest skip) when the model is absent.
set -euo pipefail

CANDLE="${CANDLE:-${CANDLE_BINARY_DIR:?}/bin/candle}"
src="${CANDLE_SOURCE_DIR:-.}"
model=""
for m in "${CANDLE_SHARED_DIR:-$src/../shared}/data/models/stories260K.gguf"; do
    if [ -f "$m" ]; then model="$m"; break; fi
done
if [ -z "$model" ]; then
    echo "SKIP: test_quantize_cli: stories260K.gguf not found in ${CANDLE_SHARED_DIR:-$src/../shared}/data/models"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...: counts a failure instead of stopping
    local what="$1"; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=$((fail + 1)); fi
}
contains() { grep -qF -- "$2" "$1" || { echo "'$1' lacks '$2':" >&2; cat "$1" >&2; return 1; }; }

cp "$model" "$tmp/in.gguf"
before=$(cksum < "$tmp/in.gguf")

# --- Q8_0 ---
check "q8_0 runs" "$CANDLE" quantize -t 2 "$tmp/in.gguf" "$tmp/q8.gguf" q8_0 >"$tmp/out" 2>"$tmp/err"
check "summary names the type" contains "$tmp/out" "as Q8_0 (general.file_type 7)"
check "summary: bits per weight" contains "$tmp/out" "32.00 ->"
check "summary: throughput" contains "$tmp/out" "MB/s"
check "summary: per dtype" contains "$tmp/out" "  q8_0     32"
check "progress lines without a tty" contains "$tmp/err" "quantize: 100%"
check "fallback note for ffn_down (172 columns)" contains "$tmp/err" "blk.0.ffn_down.weight: rows of 172"
"$CANDLE" info "$tmp/q8.gguf" >"$tmp/info"
check "info: file_type 7" grep -qE "general.file_type +u32 +7" "$tmp/info"
check "info: quantization_version" grep -qE "general.quantization_version +u32 +2" "$tmp/info"
check "info: q8_0 tensors" grep -qE "^  q8_0 +32 tensors" "$tmp/info"
check "info: norms stay f32" grep -qE "^  f32 +11 tensors" "$tmp/info"
check "info: metadata copied" grep -qE "llama.attention.head_count_kv +u32 +4" "$tmp/info"
"$CANDLE" run -m "$tmp/q8.gguf" -p "Once upon a time" -n 12 --seed 0 >"$tmp/gen" 2>/dev/null
check "q8_0 model generates the story" contains "$tmp/gen" "there was a little"

# --- Q4_K_M: 64-column rows do not fit q4_k/q6_k blocks ---
check "q4_k_m runs" "$CANDLE" quantize "$tmp/in.gguf" "$tmp/q4km.gguf" Q4_K_M >"$tmp/out" 2>"$tmp/err"
"$CANDLE" info "$tmp/q4km.gguf" >"$tmp/info"
check "info: file_type 15" grep -qE "general.file_type +u32 +15" "$tmp/info"
check "info: q5_0 for q4_k rows of 64" grep -qE "^  q5_0 +29 tensors" "$tmp/info"
check "info: q8_0 for output and lifted attn_v" grep -qE "^  q8_0 +3 tensors" "$tmp/info"
check "info: f16 for ffn_down" grep -qE "^  f16 +5 tensors" "$tmp/info"
"$CANDLE" run -m "$tmp/q4km.gguf" -p "Once upon a time" -n 12 --seed 0 >"$tmp/gen" 2>/dev/null
check "q4_k_m model generates" contains "$tmp/gen" "there was a little"

# --- llama-quantize's type options ---
check "type options run" "$CANDLE" quantize -q --output-tensor-type f16 "$tmp/in.gguf" "$tmp/o16.gguf" q4_0 \
    >/dev/null 2>"$tmp/err"
"$CANDLE" info "$tmp/o16.gguf" >"$tmp/info"
check "output.weight f16" grep -qE " output.weight +f16 " "$tmp/info"
check "token_embd by the rules" grep -qE " token_embd.weight +q4_0 " "$tmp/info"
check "--output-tensor-type model generates" sh -c "'$CANDLE' run -m '$tmp/o16.gguf' -p 'Once upon a time' -n 12 --seed 0 2>/dev/null | grep -qF 'there was a little'"
check "token embedding type wins" "$CANDLE" quantize -q --output-tensor-type f16 --token-embedding-type q8_0 \
    "$tmp/in.gguf" "$tmp/o8.gguf" q4_0 >/dev/null 2>"$tmp/err"
"$CANDLE" info "$tmp/o8.gguf" >"$tmp/info"
check "token_embd q8_0" grep -qE " token_embd.weight +q8_0 " "$tmp/info"
check "output still f16" grep -qE " output.weight +f16 " "$tmp/info"
set +e
"$CANDLE" quantize --output-tensor-type i32 "$tmp/in.gguf" "$tmp/x.gguf" q4_0 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "bad --output-tensor-type: exit 2" test "$rc" = 2
check "bad --output-tensor-type: message" contains "$tmp/err" "--output-tensor-type wants a weight dtype"
check "bad --output-tensor-type: no file" test ! -e "$tmp/x.gguf"

# --- the outputs through the gguf package's reader and dequantizers ---
if python3 -c 'import gguf' 2>/dev/null; then
    check "gguf package reads the outputs" python3 - "$tmp/in.gguf" "$tmp/q8.gguf" "$tmp/q4km.gguf" <<'EOF'
import sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ref = {t.name: np.array(t.data, dtype=np.float32) for t in GGUFReader(sys.argv[1]).tensors}
for path, bound in ((sys.argv[2], 1e-4), (sys.argv[3], 2e-2)):
    r = GGUFReader(path)
    assert int(r.fields["general.file_type"].contents()) in (7, 15)
    for t in r.tensors:
        got = dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float64)
        want = ref[t.name].reshape(-1).astype(np.float64)
        nmse = float(((got - want) ** 2).sum() / max((want ** 2).sum(), 1e-30))
        assert nmse <= bound, (path, t.name, t.tensor_type.name, nmse)
EOF
else
    echo "test_quantize_cli: gguf package absent, reference dequantization skipped"
fi

# --- errors ---
set +e
"$CANDLE" quantize "$tmp/in.gguf" "$tmp/x.gguf" q9_9 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "unknown type: exit 2" test "$rc" = 2
check "unknown type: message" contains "$tmp/err" "unknown type 'q9_9'"
check "unknown type: lists the valid ones" contains "$tmp/err" "Q4_K_M"
check "unknown type: no file" test ! -e "$tmp/x.gguf"

ln -s "$tmp/in.gguf" "$tmp/sym.gguf"
ln "$tmp/in.gguf" "$tmp/hard.gguf"
for out in "$tmp/in.gguf" "$tmp/sym.gguf" "$tmp/hard.gguf"; do
    set +e
    "$CANDLE" quantize "$tmp/in.gguf" "$out" q4_0 >/dev/null 2>"$tmp/err"; rc=$?
    set -e
    check "same file ($out): exit 1" test "$rc" = 1
    check "same file ($out): message" contains "$tmp/err" "refusing to overwrite the input"
done
check "input unchanged" test "$(cksum < "$tmp/in.gguf")" = "$before"

set +e
"$CANDLE" quantize "$tmp/in.gguf" "$tmp/no/such/dir/o.gguf" q8_0 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "missing dir: exit 1" test "$rc" = 1
check "missing dir: nothing left" test ! -e "$tmp/no"
mkdir "$tmp/adir"
set +e
"$CANDLE" quantize "$tmp/in.gguf" "$tmp/adir" q8_0 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "output is a directory: exit 1" test "$rc" = 1
check "output is a directory: no temporary" test ! -e "$tmp/adir.tmp"

# An existing output that is not a regular file is refused before any work
# (the rename would replace it: as root, /dev/null became a regular file);
# a FIFO made here stands for the device node.
mkfifo "$tmp/fifo"
set +e
"$CANDLE" quantize "$tmp/in.gguf" "$tmp/fifo" q8_0 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "output is a FIFO: exit 1" test "$rc" = 1
check "output is a FIFO: message" contains "$tmp/err" "is not a regular file"
check "output is a FIFO: still a FIFO" test -p "$tmp/fifo"
ln -s fifo "$tmp/fifolink"
set +e
"$CANDLE" quantize "$tmp/in.gguf" "$tmp/fifolink" q8_0 >/dev/null 2>"$tmp/err"; rc=$?
set -e
check "output is a symlink to a FIFO: exit 1" test "$rc" = 1
check "symlink to a FIFO kept" test -L "$tmp/fifolink" -a -p "$tmp/fifo"
# A symlink planted at the old temporary name (OUT.tmp) is never written
# through: the temporary is a new file under a unique name.
echo victim > "$tmp/victim"
ln -s victim "$tmp/planted.gguf.tmp"
check "planted symlink: quantize runs" "$CANDLE" quantize "$tmp/in.gguf" "$tmp/planted.gguf" q8_0 \
    >/dev/null 2>"$tmp/err"
check "planted symlink: target untouched" test "$(cat "$tmp/victim")" = victim
check "planted symlink: output written" "$CANDLE" info "$tmp/planted.gguf" >/dev/null
check "no temporary left" test -z "$(find "$tmp" -name '.planted.gguf.*')"

"$CANDLE" quantize --help >"$tmp/out"
check "help lists the types" contains "$tmp/out" "IQ4_XS"

if [ "$fail" -ne 0 ]; then
    echo "test_quantize_cli: $fail checks failed" >&2
    exit 1
fi
echo "test_quantize_cli: passed"
