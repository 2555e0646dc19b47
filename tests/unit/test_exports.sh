#!/usr/bin/env bash
# The shared library's ABI is the public headers: every symbol libcandle.so
# exports starts with candle_ and is declared CANDLE_API in include/candle/,
# and every CANDLE_API function is exported (a declared function that is not
# would fail only when an embedding program links). Internals stay hidden
# (-fvisibility=hidden), so they can neither be called from outside nor
# collide with another library's symbols (ggml's gguf_*, ...). Exit 77: skip.
set -u
lib="${CANDLE_BINARY_DIR:?}/lib/libcandle.so"
inc="${CANDLE_SOURCE_DIR:?}/include/candle"
# The build's nm (a cross build's reads its own target's files).
cache() { sed -n "s/^$1:[A-Z]*=//p" "$CANDLE_BINARY_DIR/CMakeCache.txt" 2>/dev/null; }
nm=$(cache CMAKE_NM)
command -v "${nm:-nm}" >/dev/null || nm=nm
if ! command -v "$nm" >/dev/null; then
    echo "SKIP test_exports: nm not found (binutils)"
    exit 77
fi
[ -e "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols ("ADDR TYPE NAME", versioned names cut at @).
# Some linkers add their section markers to the dynamic table; they are
# no function of ours.
"$nm" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' |
    grep -vxE '_init|_fini|_edata|_end|__bss_start' | sort -u >"$tmp/exported"
# Sanitizer and fuzzer instrumentation may export its own reserved (__*)
# names from the library; those builds are not the one that is shipped.
if [ "$(cache CANDLE_SANITIZE)" = ON ] || [ "$(cache CANDLE_TSAN)" = ON ] ||
    [ "$(cache CANDLE_FUZZ)" = ON ]; then
    grep -v '^__' "$tmp/exported" >"$tmp/x" && mv "$tmp/x" "$tmp/exported"
fi
# Names declared CANDLE_API (the name is the identifier before the first '('
# on the declaration's first line).
grep -h '^CANDLE_API ' "$inc"/*.h | sed -E 's/\(.*//; s/.*[^A-Za-z0-9_]//' | sort -u >"$tmp/declared"

n=$(wc -l <"$tmp/exported")
fail=0
if [ "$n" -eq 0 ]; then
    echo "FAIL: nm -D found no exported symbols in $lib"
    exit 1
fi
if [ "$(wc -l <"$tmp/declared")" -eq 0 ]; then
    echo "FAIL: no CANDLE_API declarations found in $inc"
    exit 1
fi
bad=$(grep -v '^candle_' "$tmp/exported")
if [ -n "$bad" ]; then
    echo "FAIL: exported without the candle_ prefix:"
    echo "$bad" | sed 's/^/  /'
    fail=1
fi
undeclared=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$undeclared" ]; then
    echo "FAIL: exported but not declared CANDLE_API in include/candle/*.h:"
    echo "$undeclared" | sed 's/^/  /'
    fail=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$missing" ]; then
    echo "FAIL: declared CANDLE_API but not exported (undefined or hidden):"
    echo "$missing" | sed 's/^/  /'
    fail=1
fi
# The static library keeps its internals global (the tests and tools call
# them), so there a name another library also defines would clash at link
# time: none of ggml's and llama.cpp's prefixes, nor generic ones.
archive="${CANDLE_BINARY_DIR}/lib/libcandle.a"
if [ -e "$archive" ]; then
    clash=$("$nm" -g --defined-only "$archive" 2>/dev/null | awk 'NF >= 3 { print $3 }' |
        grep -E '^(gguf|ggml|llama|utf8|unicode|cfg)_' | sort -u)
    if [ -n "$clash" ]; then
        echo "FAIL: libcandle.a defines globals that collide with ggml/llama.cpp or are too generic:"
        echo "$clash" | sed 's/^/  /'
        fail=1
    fi
fi
[ "$fail" -eq 0 ] && echo "PASS: $n symbols exported, all declared in include/candle"
exit "$fail"
