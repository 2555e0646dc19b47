# Sourced by the CLI tests on stories260K (`. tests/common/stories_cli.sh NAME`):
# sets src, candle, model and tmp (a folder removed on exit), and ok / fail /
# check, which count into passes and fails. Skips (77) when the model is absent.
set -u
src="${CANDLE_SOURCE_DIR:?}"
candle="${CANDLE:?}"
model="${CANDLE_SHARED_DIR:-$src/../shared}/data/models/stories260K.gguf"
[ -r "$model" ] || { echo "SKIP: $1: $model absent"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
passes=0
ok() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { if eval "$2"; then ok; else fail "$1"; fi; }
