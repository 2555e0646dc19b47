#!/usr/bin/env bash
# The Makefile's housekeeping (issue 22, finding 15): `make clean` removes
# every build folder the Makefile creates (it left build-arm64 and
# build-bench), and `make help` lists the targets.
set -u
SRC="${CANDLE_SOURCE_DIR:?}"
command -v make >/dev/null || { echo "SKIP: make not installed"; exit 77; }
fail=0 checks=0
clean=$(make -s -n -C "$SRC" clean 2>&1)
# the folders the rules configure into (-B DIR) and the bench venv's folder
dirs=$(grep -oE -- '-B +build[-a-z0-9]*' "$SRC/Makefile" | awk '{print $2}' | sort -u)
dirs="$dirs $(grep -ohE 'build-bench' "$SRC/scripts/install-bench-deps.sh" | sort -u)"
for d in $dirs; do
    checks=$((checks + 1))
    if ! grep -qE "(^| )$d( |$)" <<<"$clean"; then echo "FAIL: make clean leaves $d: $clean"; fail=1; fi
done
help=$(make -s -C "$SRC" help 2>&1)
for t in test run install clean fuzz test-data test-arm64 help; do
    checks=$((checks + 1))
    if ! grep -qE "^ *make $t( |$)" <<<"$help"; then echo "FAIL: make help does not list '$t'"; fail=1; fi
done
[ $checks -ge 10 ] || { echo "FAIL: only $checks checks"; exit 1; }
[ $fail = 0 ] && echo "test_makefile: $checks checks passed"
exit $fail
