#!/usr/bin/env bash
# A fetch in the background, so a long download overlaps make test's builds
# and fuzzing instead of adding to them:
#
#   scripts/fetch-bg.sh start NAME SCRIPT [ARGS...]   run SCRIPT, return at once
#   scripts/fetch-bg.sh wait NAME                     until it ends (no-op if none)
#
# The pid and the log go to ${CANDLE_DATA_CACHE:-build-data}/.fetch-NAME.{pid,log}.
# A fetch that fails is best effort, like test-data's others: wait prints its
# log's last lines and returns 0 (the tests that need the data skip).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${CANDLE_DATA_CACHE:-$root/build-data}"
cmd="${1:?usage: fetch-bg.sh start|wait NAME ...}"
name="${2:?usage: fetch-bg.sh start|wait NAME ...}"
pidf="$cache/.fetch-$name.pid" log="$cache/.fetch-$name.log"
mkdir -p "$cache"

case "$cmd" in
start)
    shift 2
    nohup bash "$@" >"$log" 2>&1 </dev/null &
    echo $! >"$pidf"
    echo "fetch-bg: $name in the background (log $log)"
    ;;
wait)
    [ -e "$pidf" ] || exit 0
    pid="$(cat "$pidf")" t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do sleep 2; done
    rm -f "$pidf"
    echo "fetch-bg: $name done after waiting $((SECONDS - t0)) s; its log's end:"
    tail -n 3 "$log" || true
    ;;
*)
    echo "usage: fetch-bg.sh start|wait NAME ..." >&2
    exit 2
    ;;
esac
