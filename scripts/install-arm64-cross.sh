#!/usr/bin/env bash
# Cross toolchain and user-mode emulator for `make test-arm64`
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user): installed with
# apt-get when missing and we are root. Never fails: prints SKIP and exits 0
# when they are absent and cannot be installed; `make test-arm64` then skips.
set -u
need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "SKIP arm64: needs ${need[*]} (not root or no apt-get)" >&2
    exit 0
fi
echo "arm64: installing ${need[*]}" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2; } ||
    echo "SKIP arm64: could not install ${need[*]}" >&2
exit 0
