# Cross build for arm64 Linux with Debian's gcc-aarch64-linux-gnu
# (scripts/install-arm64-cross.sh); ctest runs the test binaries under
# qemu-user with the arm64 sysroot. `make test-arm64` uses it:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CANDLE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${CANDLE_CROSS_TRIPLE}-gcc)
set(CMAKE_SYSROOT_DIR /usr/${CANDLE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH ${CMAKE_SYSROOT_DIR})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The CPU model comes from QEMU_CPU in the environment (make test-arm64 runs
# the tests with -cpu max and again with cortex-a57: no dotprod, no fp16).
# QEMU_LD_PREFIX is qemu-aarch64 -L for the tests.
set(CMAKE_CROSSCOMPILING_EMULATOR env;QEMU_LD_PREFIX=${CMAKE_SYSROOT_DIR};qemu-aarch64)
# pkg-config must not hand the host's x86-64 libraries to the cross link:
# only arm64 .pc files (none unless libmicrohttpd-dev:arm64 is installed),
# so the server is simply not built.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${CANDLE_CROSS_TRIPLE}/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
