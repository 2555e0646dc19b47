#!/usr/bin/env bash
# bench/compare picks a candle build that runs on this machine (issue 22,
# finding 14: after make test it took build-arm64's cross build, newer, and
# died with "Exec format error"), and says what to install when
# llama-cpp-python is missing instead of a bare traceback.
set -u
SRC="${CANDLE_SOURCE_DIR:?}"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bench" "$T/build/bin" "$T/build-arm64/bin"
cp "$SRC/bench/compare" "$T/bench/compare"
cp /bin/true "$T/build/bin/candle"
# an aarch64 ELF header (e_machine 183), made after the host's build
python3 - "$T/build-arm64/bin/candle" <<'PY'
import struct, sys
h = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HH", 2, 183)
open(sys.argv[1], "wb").write(h + b"\0" * 44)
PY
touch -d '+1 minute' "$T/build-arm64/bin/candle" 2>/dev/null || touch "$T/build-arm64/bin/candle"
fail=0
got=$(cd "$T" && python3 - <<'PY'
import importlib.machinery, importlib.util, sys
sys.argv = ["compare"]
loader = importlib.machinery.SourceFileLoader("compare", "bench/compare")
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("compare", loader))
loader.exec_module(m)
print(m.find_build_file("bin/candle"))
PY
)
if [ "$got" != "$T/build/bin/candle" ]; then echo "FAIL: compare picked '$got', want $T/build/bin/candle"; fail=1; fi
if python3 -c 'import llama_cpp' 2>/dev/null; then
    echo "(llama_cpp importable: the missing-package message is not checked)"
else
    (cd "$T" && python3 bench/compare x.gguf) >/dev/null 2>"$T/err"; rc=$?
    if [ $rc = 0 ] || grep -q Traceback "$T/err" || ! grep -q "install llama-cpp-python" "$T/err"; then
        echo "FAIL: without llama_cpp: rc $rc:"; cat "$T/err"; fail=1
    fi
fi
[ $fail = 0 ] && echo "test_bench_compare_host: passed"
exit $fail
