#!/usr/bin/env bash
# `candle serve` against hostile clients (issue 22, findings 3-6), with raw
# sockets: libmicrohttpd's own error paths answered in OpenAI's shape, header
# and body deadlines, the per-address bound, 520 slow clients beside /health
# and a stream, --max-body-mem, 32 concurrent long prompts' peak memory and
# RSS after storms (tests/server/test_harden.py). Uses stories260K.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL=${SERVER_TEST_MODEL:-${CANDLE_SHARED_DIR:-$SRC/../shared}/data/models/stories260K.gguf}
[ -f "$MODEL" ] || { echo "SKIP: $MODEL absent"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
sanitized=$(sed -n 's/^CANDLE_SANITIZE:[A-Z]*=//p' "${CANDLE_BINARY_DIR:-$SRC/build}/CMakeCache.txt" 2>/dev/null)
RSSOPT=
[ "$sanitized" = ON ] && RSSOPT=--no-rss # freed memory stays in ASan's quarantine
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp -d)
trap 'kill $S 2>/dev/null; rm -rf "$LOG"' EXIT
"$BIN" serve -m "$MODEL" --port "$PORT" -c 256 --parallel 4 --header-timeout 3 --body-timeout 3 \
    --conn-per-ip 8 --max-body 1M --max-body-mem 40M --quiet 2>"$LOG/s" & S=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 $S 2>/dev/null || break
    python3 -c 'import time; time.sleep(0.1)'
done
if ! kill -0 $S 2>/dev/null; then echo "FAIL: the server did not start"; cat "$LOG/s"; exit 1; fi
timeout 300 python3 "$SRC/tests/server/test_harden.py" "$PORT" "$S" $RSSOPT; rc=$?
kill -0 $S 2>/dev/null || { echo "FAIL: the server died"; rc=1; }
kill -TERM $S; wait $S; src=$?
[ $src = 0 ] || { echo "FAIL: server exit $src"; rc=1; }
[ $rc = 0 ] || cat "$LOG/s"
exit $rc
