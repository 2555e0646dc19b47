#!/usr/bin/env bash
# Line editing and history for `candle chat` (libedit's readline API):
# installed with apt-get when missing and we are root. Never fails the build:
# without it (or GNU readline) chat reads plain lines (tools/cli/cli.cmake).
set -u
have() { pkg-config --exists "$1" 2>/dev/null; }
need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
have libedit || need+=(libedit-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: chat's line editing needs ${need[*]} (not root or no apt-get: skipped)" >&2
    exit 0
fi
echo "deps: installing ${need[*]}" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2; } ||
    echo "deps: could not install ${need[*]}; chat reads plain lines" >&2
exit 0
