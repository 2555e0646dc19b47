#!/usr/bin/env bash
# test_attention through the reference kernel only: the dispatcher otherwise
# sends f32 attention to the fast kernel, and the reference is the ground
# truth the fast kernel is checked against, so it is tested on its own too.
set -euo pipefail
CANDLE_CPU_REF=1 "${CANDLE_BINARY_DIR:?}/bin/test_attention"
