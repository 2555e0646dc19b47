/* Helpers shared by the primitive tables (simd_scalar.c, x86/ *_avx2.c). */
#ifndef CANDLE_CPU_SIMD_IMPL_H
#define CANDLE_CPU_SIMD_IMPL_H

#include "cpu-impl.h"

/* One element of the f32 unary/binary ops (the SIMD tables' tails and the
 * ops they do not vectorise). */
float cpu_unary1(candle_op op, float x, const double *p);
float cpu_binary1(candle_op op, float a, float b);
/* Any B layout and dtype, one element at a time. */
void cpu_pack_b_generic(candle_dtype bt, const char *src, int64_t sk, int64_t sn, int64_t kc,
                        int nr, float *dst);

#endif
