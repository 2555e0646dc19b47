/* Shared by the NEON dot templates (legacy-neon-impl.h, kquants-neon-impl.h):
 * each template is compiled twice, with NEON_SFX naming the variant
 * (_neon, _dotprod) that NEON_FN appends to its function names. */
#ifndef CANDLE_QUANT_NEON_COMMON_H
#define CANDLE_QUANT_NEON_COMMON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define NEON_FN(name) NEON_CAT(name, NEON_SFX)

/* f16 -> f32: exact (the hardware conversion, base armv8-a) */
static inline float neon_f16_to_f32(uint16_t h) {
    __fp16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

#endif
