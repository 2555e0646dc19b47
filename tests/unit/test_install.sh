#!/usr/bin/env bash
# What an embedding program sees: `cmake --install` into a temporary prefix,
# then examples/generate.c (public API only) built three ways from that
# prefix alone: pkg-config against libcandle.so, pkg-config --static against
# libcandle.a, and a CMake project using find_package(Candle). Each runs
# stories260K greedily and must give llama.cpp's continuation. Exit 77
# (skip) without pkg-config or the model.
set -u
build="${CANDLE_BINARY_DIR:?}"
src="${CANDLE_SOURCE_DIR:?}"
model="${CANDLE_SHARED_DIR:-$src/../shared}/data/models/stories260K.gguf"
want=", there was a little girl named Lily"
# The build's own compiler and options, from its cache.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" 2>/dev/null; }
cc="${CC:-$(cache CMAKE_C_COMPILER)}"
cc="${cc:-cc}"
# A sanitizer build's library needs its runtime linked first, and a cross
# build's cannot run here: an embedding program is a plain native build.
if [ "$(cache CANDLE_SANITIZE)" = ON ] || [ "$(cache CANDLE_TSAN)" = ON ] ||
    [ "$(cache CANDLE_FUZZ)" = ON ] || [ -n "$(cache CMAKE_TOOLCHAIN_FILE)" ]; then
    echo "SKIP test_install: sanitizer or cross build"
    exit 77
fi
if ! command -v pkg-config >/dev/null; then
    echo "SKIP test_install: pkg-config not found"
    exit 77
fi
if [ ! -r "$model" ]; then
    echo "SKIP test_install: $model not found"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail=0
die() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; die "cmake --install"; }
pc=$(find "$prefix" -name candle.pc | head -n 1)
[ -n "$pc" ] || die "no candle.pc installed"
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir candle)
for f in include/candle/candle.h include/candle/api.h bin/candle; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; fail=1; }
done
for f in libcandle.a libcandle.so libcandle.so.0; do
    [ -e "$libdir/$f" ] || { echo "FAIL: $libdir/$f not installed"; fail=1; }
done
[ "$(pkg-config --modversion candle)" = "$("$prefix/bin/candle" --version | sed 's/^candle //')" ] ||
    { echo "FAIL: candle.pc version differs from the CLI's"; fail=1; }

# run NAME BINARY [ENV...]: the greedy continuation must start as llama.cpp's
run() {
    local name="$1" bin="$2"
    shift 2
    if ! env "$@" "$bin" "$model" "Once upon a time" 12 >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        echo "FAIL: $name: generate exited $?:"
        cat "$tmp/$name.err"
        fail=1
    elif [[ "$(cat "$tmp/$name.out")" != "$want"* ]]; then
        echo "FAIL: $name: got '$(cat "$tmp/$name.out")', want '$want...'"
        fail=1
    else
        echo "ok: $name: $(cat "$tmp/$name.out")"
    fi
}
flags="-std=c11 -Wall -Wextra -Werror"

# shared: only the exported API is there to link against
# shellcheck disable=SC2046
if $cc $flags -o "$tmp/gen_shared" "$src/examples/generate.c" $(pkg-config --cflags --libs candle) \
    2>"$tmp/cc.err"; then
    run shared "$tmp/gen_shared" LD_LIBRARY_PATH="$libdir"
    if command -v readelf >/dev/null && ! readelf -d "$tmp/gen_shared" | grep -q 'NEEDED.*libcandle\.so\.0'; then
        echo "FAIL: shared: the binary does not need libcandle.so.0"
        fail=1
    fi
else
    echo "FAIL: shared: compile:"; cat "$tmp/cc.err"; fail=1
fi

# static: pkg-config --static adds Libs.private; -l:libcandle.a because a
# plain -lcandle would pick the .so beside it
static_libs=$(pkg-config --static --libs candle | sed -E 's/(^| )-lcandle( |$)/\1-l:libcandle.a\2/')
# shellcheck disable=SC2046,SC2086
if $cc $flags -o "$tmp/gen_static" $(pkg-config --cflags candle) "$src/examples/generate.c" \
    $static_libs 2>"$tmp/cc.err"; then
    run static "$tmp/gen_static"
    if command -v readelf >/dev/null && readelf -d "$tmp/gen_static" | grep -q 'NEEDED.*libcandle'; then
        echo "FAIL: static: the binary still needs libcandle.so"
        fail=1
    fi
else
    echo "FAIL: static: compile:"; cat "$tmp/cc.err"; fail=1
fi

# CMake package: find_package(Candle) and Candle::candle
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(embed C)
find_package(Candle 0.1 REQUIRED)
add_executable(gen_cmake "$src/examples/generate.c")
target_link_libraries(gen_cmake PRIVATE Candle::candle)
CMAKE
if cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$cc" >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/proj/build" >>"$tmp/cmake.log" 2>&1; then
    run cmake "$tmp/proj/build/gen_cmake"
else
    echo "FAIL: find_package(Candle) project:"; cat "$tmp/cmake.log"; fail=1
fi

[ "$fail" -eq 0 ] && echo "PASS: installed, built against the prefix, generated"
exit "$fail"
