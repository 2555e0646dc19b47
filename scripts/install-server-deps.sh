#!/usr/bin/env bash
# Libraries `candle serve` links (libmicrohttpd for HTTP, jansson for JSON):
# installed with apt-get when missing and we are root. Never fails the build:
# without them CMake builds everything but the server.
set -u
have() { pkg-config --exists "$1" 2>/dev/null; }
need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
have libmicrohttpd || need+=(libmicrohttpd-dev)
have jansson || need+=(libjansson-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: candle serve needs ${need[*]} (not root or no apt-get: skipped)" >&2
    exit 0
fi
echo "deps: installing ${need[*]}" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2; } ||
    echo "deps: could not install ${need[*]}; building without the server" >&2
exit 0
