/* NEON activation quantizers: f32 rows to q8_0, q8_1 and q8_K blocks (the
 * activation side of every quantized product on arm64), byte for byte the
 * scalar quantizers of legacy.c and kquants_quantize.c:
 *   q8_0 / q8_1: amax over |x| with NaN passed over (vmaxnmq, as the
 *     scalar `fabsf(x) > amax`), d = amax / 127, id = 1 / d (0 when d is
 *     0), codes roundf(x * id) - half AWAY from zero: vcvtaq_s32_f32, which
 *     like the scalar float->int conversion on aarch64 saturates (and gives
 *     0 for NaN), narrowed by truncation as the scalar (int8_t) store is;
 *     the f16 fields through the same candle_f32_to_f16;
 *   q8_K: the same amax, the sign of the first element of that magnitude,
 *     iscale = -127 / max, codes quant_nearest_int(iscale * x) clamped to
 *     +-127 - nearest, ties to EVEN: vcvtnq_s32_f32 (saturating, NaN -> 0)
 *     then the clamp; bsums of the codes per 16, d = 1 / iscale.
 * Checked against the scalar quantizers by tests/ops/test_quant_neon.c
 * (ties, subnormal and infinite scales, NaN, equal +-amax). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "quant-arm-impl.h"

/* The 32 codes of a q8_0/q8_1 block and its scale (before the f16
 * rounding); *sum gets the codes' sum. */
static inline float quantize32(const float *x, int8_t *qs, int *sum) {
    float32x4_t v[8], a = vdupq_n_f32(0);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        a = vmaxnmq_f32(a, vabsq_f32(v[k]));
    }
    float amax = vmaxnmvq_f32(a);
    float d = amax / 127;
    float id = d != 0 ? 1.0f / d : 0.0f;
    int16x8_t h[4];
    for (int k = 0; k < 4; k++) {
        int32x4_t q0 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * k], id)), q1 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * k + 1], id));
        h[k] = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
    }
    int8x16_t c0 = vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])), c1 = vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3]));
    vst1q_s8(qs, c0);
    vst1q_s8(qs + 16, c1);
    *sum = vaddlvq_s8(c0) + vaddlvq_s8(c1);
    return d;
}

void cdl_q8_0_from_f32_neon(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) b[i].d = candle_f32_to_f16(quantize32(src, b[i].qs, &sum));
}

void cdl_q8_1_from_f32_neon(const float *src, void *dst, int64_t n) {
    block_q8_1 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++, src += QK8_1) {
        float d = quantize32(src, b[i].qs, &sum);
        b[i].d = candle_f32_to_f16(d);
        b[i].s = candle_f32_to_f16((float)sum * d);
    }
}

void cdl_q8_k_from_f32_neon(const float *src, void *dst, int64_t n) {
    block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
        for (int e = 0; e < QK_K; e += 8) {
            a0 = vmaxnmq_f32(a0, vabsq_f32(vld1q_f32(src + e)));
            a1 = vmaxnmq_f32(a1, vabsq_f32(vld1q_f32(src + e + 4)));
        }
        float amax = vmaxnmvq_f32(vmaxnmq_f32(a0, a1)), max = 0;
        if (amax == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* the first element of that magnitude gives the scale its sign */
        for (int e = 0; e < QK_K; e++)
            if (fabsf(src[e]) == amax) {
                max = src[e];
                break;
            }
        float iscale = -127 / max;
        const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127);
        for (int g = 0; g < QK_K / 16; g++) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++)
                q[k] = vminq_s32(vmaxq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + 16 * g + 4 * k), iscale)), lo), hi);
            int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])), h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            vst1q_s8(b[i].qs + 16 * g, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
            b[i].bsums[g] = (int16_t)(vaddvq_s16(h0) + vaddvq_s16(h1));
        }
        b[i].d = 1 / iscale;
    }
}
#else
typedef int cdl_quantize_neon_empty; /* ISO C: no empty translation unit */
#endif
