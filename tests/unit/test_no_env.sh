#!/usr/bin/env bash
# The library reads no environment variable: settings reach it as parameters
# (candle_cpu_params, context and session params). Fails when an object of
# libcandle.a refers to getenv or secure_getenv, naming the object; the
# tools map their documented switches in tools/common/env_settings.c.
set -uo pipefail
lib="${CANDLE_BINARY_DIR:?}/lib/libcandle.a"
nm_tool=nm
command -v "$nm_tool" >/dev/null || { echo "SKIP: no nm"; exit 77; }
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
syms=$("$nm_tool" -A "$lib" 2>/dev/null) || { echo "FAIL: nm could not read $lib"; exit 1; }
n_undef=$(grep -c ' U ' <<<"$syms")
[ "$n_undef" -gt 0 ] || { echo "FAIL: no undefined symbols listed in $lib (nm output unreadable)"; exit 1; }
bad=$(grep -E ' U (secure_)?getenv$' <<<"$syms" | cut -d: -f2 | sort -u)
if [ -n "$bad" ]; then
    echo "FAIL: library objects read the environment:"
    echo "$bad"
    exit 1
fi
echo "test_no_env: libcandle.a: no getenv among $n_undef undefined references"
