#!/usr/bin/env bash
# Layers depend downward only: no file under src/ includes a header of a
# higher layer (scripts/check_layers.py holds the order).
set -uo pipefail
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
exec python3 "${CANDLE_SOURCE_DIR:?}/scripts/check_layers.py" "$CANDLE_SOURCE_DIR"
