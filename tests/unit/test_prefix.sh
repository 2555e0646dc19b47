#!/usr/bin/env bash
# Internal code keeps out of the public prefix (issue 17): every candle_ name
# in src/, tools/, tests/, bench/ and examples/ is declared in include/candle/
# (internal names are cdl_; scripts/rename_internal.py renames new ones).
set -u
SRC="${CANDLE_SOURCE_DIR:?}"
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
cd "$SRC" && python3 scripts/rename_internal.py --check >/dev/null || exit 1
echo "test_prefix: no internal candle_ names"
