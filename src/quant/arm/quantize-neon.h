/* NEON activation quantizers (arm/quantize_neon.c, aarch64 only): f32 rows
 * to q8_0 / q8_1 / q8_K, the scalar quantizers' bytes exactly (registered
 * as the from_f32 of those types by traits.c). */
#ifndef CANDLE_QUANT_ARM_QUANTIZE_NEON_H
#define CANDLE_QUANT_ARM_QUANTIZE_NEON_H

#include <stdint.h>

void candle_q8_0_from_f32_neon(const float *src, void *dst, int64_t n);
void candle_q8_1_from_f32_neon(const float *src, void *dst, int64_t n);
void candle_q8_k_from_f32_neon(const float *src, void *dst, int64_t n);

#endif
