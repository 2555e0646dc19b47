#!/bin/bash
# The paged attention fast kernel takes the flash kernel's table (AVX-512 where
# the machine has it): test_paged_attention runs the default table; this runs it
# again on the AVX2 table (CANDLE_CPU_ISA=avx2) and the scalar one, so every
# table meets the double reference on an AVX-512 machine too.
set -e
bin="${CANDLE_BINARY_DIR:?}/bin/test_paged_attention"
for isa in avx2 scalar; do
  echo "CANDLE_CPU_ISA=$isa"
  CANDLE_CPU_ISA=$isa "$bin"
done
