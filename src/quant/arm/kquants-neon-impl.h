/* Internal template: the NEON dots of q4_K and q6_K against q8_K, included
 * by kquants_neon.c (plain armv8-a) and kquants_dotprod.c (+dotprod) with
 * NEON_SFX and NEON_DOT16 as in legacy-neon-impl.h. Each super-block's
 * integer sums are exact and its float step is the scalar reference's
 * (src/quant/kquants.c), block after block, so the results are the scalar
 * bits. */
#include <arm_neon.h>
#include <string.h>

#include "../quant-impl.h"

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define NEON_FN(name) NEON_CAT(name, NEON_SFX)

static inline float kf16(uint16_t h) {
    __fp16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

static inline int32_t dot_sub(int8x16_t a0, int8x16_t a1, const int8_t *y) {
    int32x4_t s = NEON_DOT16(vdupq_n_s32(0), a0, vld1q_s8(y));
    return vaddvq_s32(NEON_DOT16(s, a1, vld1q_s8(y + 16)));
}

void NEON_FN(candle_vec_dot_q4_k_q8_k_)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        for (int c = 0; c < 4; c++) {
            uint8x16_t v0 = vld1q_u8(x[i].qs + 32 * c), v1 = vld1q_u8(x[i].qs + 32 * c + 16);
            const int8_t *yq = y[i].qs + 64 * c;
            int32_t lo = dot_sub(vreinterpretq_s8_u8(vandq_u8(v0, m4)), vreinterpretq_s8_u8(vandq_u8(v1, m4)), yq);
            int32_t hi = dot_sub(vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)),
                                 yq + 32);
            uint8_t sc, m;
            quant_k4_scale_min(2 * c, x[i].scales, &sc, &m);
            sum_q += lo * sc;
            sum_m += (y[i].bsums[4 * c] + y[i].bsums[4 * c + 1]) * m;
            quant_k4_scale_min(2 * c + 1, x[i].scales, &sc, &m);
            sum_q += hi * sc;
            sum_m += (y[i].bsums[4 * c + 2] + y[i].bsums[4 * c + 3]) * m;
        }
        acc += y[i].d * (kf16(x[i].d) * (float)sum_q - kf16(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void NEON_FN(candle_vec_dot_q6_k_q8_k_)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
            uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
            for (int k = 0; k < 4; k++) {
                /* elements 128h + 32k + l, l < 32: two 16-element sub-blocks */
                uint8x16_t a = k & 1 ? l2 : l0, b = k & 1 ? l3 : l1;
                a = k < 2 ? vandq_u8(a, m4) : vshrq_n_u8(a, 4);
                b = k < 2 ? vandq_u8(b, m4) : vshrq_n_u8(b, 4);
                uint8x16_t ha = vandq_u8(vshlq_u8(h0, vdupq_n_s8((int8_t)(-2 * k))), m3);
                uint8x16_t hb = vandq_u8(vshlq_u8(h1, vdupq_n_s8((int8_t)(-2 * k))), m3);
                int8x16_t qa = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(a, vshlq_n_u8(ha, 4))), off);
                int8x16_t qb = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(b, vshlq_n_u8(hb, 4))), off);
                int s = 8 * h + 2 * k; /* 16-element sub-block index */
                const int8_t *yq = y[i].qs + 128 * h + 32 * k;
                sum += vaddvq_s32(NEON_DOT16(vdupq_n_s32(0), qa, vld1q_s8(yq))) * x[i].scales[s];
                sum += vaddvq_s32(NEON_DOT16(vdupq_n_s32(0), qb, vld1q_s8(yq + 16))) * x[i].scales[s + 1];
            }
        }
        acc += y[i].d * kf16(x[i].d) * (float)sum;
    }
    *out = acc;
}
