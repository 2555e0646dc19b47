/* Internal: small NEON helpers shared by the aarch64 kernel files of the CPU
 * backend (simd_neon.c, attention_neon.c): the f32/f16/bf16 row load, exp
 * (a port of x86/simd_avx2.c's exp8), sigmoid, and 2^y for y <= 0 (a port
 * of x86/avx2-util.h's exp2_nonpos, the same coefficients). aarch64 only. */
#ifndef CANDLE_CPU_ARM_NEON_UTIL_H
#define CANDLE_CPU_ARM_NEON_UTIL_H

#include <arm_neon.h>
#include <math.h>

#include "candle/dtype.h"

/* 4 elements of a row as f32 (f16 conversion is base armv8-a; bf16 is the
 * high half of an f32) */
static inline float32x4_t neon_ld4(candle_dtype t, const char *p) {
    if (t == CANDLE_DTYPE_F32) return vld1q_f32((const float *)p);
    uint16x4_t h = vld1_u16((const uint16_t *)p);
    if (t == CANDLE_DTYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16)); /* bf16 */
}

/* exp(x) as x86/simd_avx2.c's exp8: 2^n exp(r), n = round(x / ln 2),
 * r = x - n ln 2 with ln 2 in two parts, the degree-7 Taylor polynomial
 * (truncation < 4e-9 for |r| <= 0.35), 2^n applied as two normal factors
 * 2^(n/2) 2^(n - n/2) so overflow and gradual underflow come out right;
 * +inf above 88.72, 0 below -103.97, NaN passes through. */
static inline float32x4_t neon_exp4(float32x4_t x) {
    const float32x4_t hi = vdupq_n_f32(88.7228394f), lo = vdupq_n_f32(-103.972084f);
    float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
    float32x4_t n = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t ni = vcvtnq_s32_f32(n), n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1), bias = vdupq_n_s32(127);
    float32x4_t e1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    float32x4_t e2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    float32x4_t res = vmulq_f32(vmulq_f32(p, e1), e2);
    res = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), res);
    res = vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), res);
    return vbslq_f32(vceqq_f32(x, x), res, x);
}

/* 1 / (1 + exp(-x)) from e = exp(-|x|) (no overflow): 1 / (1 + e) for
 * x >= 0, e / (1 + e) below; NaN passes through. */
static inline float32x4_t neon_sigmoid4(float32x4_t x) {
    float32x4_t e = neon_exp4(vnegq_f32(vabsq_f32(x)));
    float32x4_t r = vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), e));
    r = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), vmulq_f32(e, r), r);
    return vbslq_f32(vceqq_f32(x, x), r, x);
}

/* 2^y for y <= 0 (online-softmax scores in log2 units minus their
 * maximum), x86/avx2-util.h's exp2_nonpos lane for lane (its constants,
 * the same FMAs): adding 1.5 * 2^23 + 127 rounds y to the nearest integer
 * n and leaves n + 127 in the low mantissa bits, shifted into the exponent
 * field they give 2^n; f = y - n in [-0.5, 0.5] exactly, a degree-5
 * minimax polynomial within 7.5e-8 of 2^f. y is clamped to -127 first
 * (2^n then exactly 0: -inf gives 0, results under ~1.2e-38 flush to 0);
 * NaN passes through (vmaxq_f32 returns NaN). Relative error < 2.5e-7. */
#define NEON_EXP2_MAGIC 12583039.0f /* 1.5 * 2^23 + 127 */
static inline float32x4_t neon_exp2_nonpos4(float32x4_t y) {
    const float32x4_t magic = vdupq_n_f32(NEON_EXP2_MAGIC);
    y = vmaxq_f32(vdupq_n_f32(-127.0f), y);
    float32x4_t t = vaddq_f32(y, magic);
    float32x4_t f = vsubq_f32(y, vsubq_f32(t, magic));
    float32x4_t p = vfmaq_f32(vdupq_n_f32(9.675552891e-3f), vdupq_n_f32(1.327646017e-3f), f);
    p = vfmaq_f32(vdupq_n_f32(5.550713397e-2f), p, f);
    p = vfmaq_f32(vdupq_n_f32(2.402211951e-1f), p, f);
    p = vfmaq_f32(vdupq_n_f32(6.931469669e-1f), p, f);
    p = vfmaq_f32(vdupq_n_f32(1.000000072f), p, f);
    return vmulq_f32(p, vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_f32(t), 23)));
}

#endif
