#!/usr/bin/env bash
# `candle serve -m whisper-base` (multilingual) on tests/data/audio/de.wav:
# /v1/audio/transcriptions with no language detects German (verbose_json's
# "language": "german") and /v1/audio/translations with language=de gives
# English, both the text of faster-whisper's beam-5 runs
# (tests/data/whisper/whisper_beam_goldens.json); language as Whisper's
# English name works, an unknown language is a 400. The sanitizer run
# (CANDLE_TEST_SANITIZED=1) translates and refuses only.
set -u
SRC=${CANDLE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${CANDLE:-$SRC/build/bin/candle}
MODEL="${CANDLE_DATA_CACHE:-$SRC/build-data}/models/whisper-base"
WAV="$SRC/tests/data/audio/de.wav"
GOLD="$SRC/tests/data/whisper/whisper_beam_goldens.json"
[ -r "$MODEL/model.bin" ] || { echo "SKIP: $MODEL absent (scripts/fetch-whisper.sh base)"; exit 77; }
if "$BIN" serve --help 2>&1 | grep -q "has no server"; then echo "SKIP: candle built without the server (make deps)"; exit 77; fi
TMPD=$(mktemp -d)
S=
trap 'kill $S 2>/dev/null; rm -rf "$TMPD"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve -m "$MODEL" --port "$PORT" -t 2 2>"$TMPD/log" & S=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    python3 -c 'import time; time.sleep(0.1)'
done
U="http://127.0.0.1:$PORT/v1/audio"
post() { # ENDPOINT OUT FIELDS...
    local ep=$1 out=$2
    shift 2
    curl -s -o "$out" -w '%{http_code}' "$U/$ep" -F "file=@$WAV" -F model=whisper-1 "$@"
}
SAN=${CANDLE_TEST_SANITIZED:-0}
c1=skip c3=skip
[ "$SAN" = 1 ] || c1=$(post transcriptions "$TMPD/t.json" -F response_format=verbose_json)
c2=$(post translations "$TMPD/tr.json" -F response_format=verbose_json -F language=de)
[ "$SAN" = 1 ] || c3=$(post transcriptions "$TMPD/n.json" -F language=german)
c4=$(post transcriptions "$TMPD/bad.json" -F language=klingon)
python3 - "$GOLD" "$TMPD" "$c1" "$c2" "$c3" "$c4" <<'PY'
import json, sys
gold, d, c1, c2, c3, c4 = sys.argv[1:]
runs = [r for r in json.load(open(gold))["runs"] if r["model"] == "base" and r["clip"] == "de"]
want = {r["task"]: "".join(s["text"] for s in r["segments"]).strip() for r in runs}
fails = []
def check(ok, what):
    if not ok: fails.append(what)
t = json.load(open(f"{d}/t.json")) if c1 == "200" else {}
check(c1 == "skip" or (c1 == "200" and t.get("language") == "german" and t.get("task") == "transcribe"
      and t.get("text") == want["transcribe"]), f"auto: {c1} {t}")
tr = json.load(open(f"{d}/tr.json")) if c2 == "200" else {}
check(c2 == "200" and tr.get("task") == "translate" and tr.get("language") == "german"
      and tr.get("text") == want["translate"], f"translate: {c2} {tr}")
n = json.load(open(f"{d}/n.json")) if c3 == "200" else {}
check(c3 == "skip" or (c3 == "200" and n.get("text") == want["transcribe"]), f"language german: {c3} {n}")
bad = json.load(open(f"{d}/bad.json"))
check(c4 == "400" and bad.get("error", {}).get("param") == "language", f"language klingon: {c4} {bad}")
for f in fails: print("FAIL:", f)
print("test_server_multilingual:", "FAIL" if fails else f"ok ({4 - [c1, c3].count('skip')} checks)")
sys.exit(1 if fails else 0)
PY
