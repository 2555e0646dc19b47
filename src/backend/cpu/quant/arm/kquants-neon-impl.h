/* Internal template: the NEON dots of q4_K, q5_K and q6_K against q8_K, included
 * by kquants_neon.c (plain armv8-a) and kquants_dotprod.c (+dotprod) with
 * NEON_SFX and NEON_DOT16 as in legacy-neon-impl.h. Each super-block's
 * integer sums are exact and its float step is the scalar reference's
 * (src/quant/kquants.c), block after block, so the results are the scalar
 * bits. */
#include <arm_neon.h>
#include <string.h>

#include "quant-arm-impl.h"
#include "neon-common.h"

static inline int32_t dot_sub(int8x16_t a0, int8x16_t a1, const int8_t *y) {
    int32x4_t s = NEON_DOT16(vdupq_n_s32(0), a0, vld1q_s8(y));
    return vaddvq_s32(NEON_DOT16(s, a1, vld1q_s8(y + 16)));
}

/* The 256 codes of a q4_K block as 16 int8x16 (element 16j + l in q[j]). */
static inline void q4k_unpack(const block_q4_K *b, int8x16_t *q) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int c = 0; c < 4; c++) {
        uint8x16_t v0 = vld1q_u8(b->qs + 32 * c), v1 = vld1q_u8(b->qs + 32 * c + 16);
        q[4 * c] = vreinterpretq_s8_u8(vandq_u8(v0, m4));
        q[4 * c + 1] = vreinterpretq_s8_u8(vandq_u8(v1, m4));
        q[4 * c + 2] = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4));
        q[4 * c + 3] = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
    }
}

/* q5_K: the q4_K nibbles (same qs layout) plus the fifth bit, bit e / 32
 * of qh[e % 32], as 16. */
static inline void q5k_unpack(const block_q5_K *b, int8x16_t *q) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    uint8x16_t h0 = vld1q_u8(b->qh), h1 = vld1q_u8(b->qh + 16);
    for (int c = 0; c < 4; c++) {
        uint8x16_t v0 = vld1q_u8(b->qs + 32 * c), v1 = vld1q_u8(b->qs + 32 * c + 16);
        int8x16_t lo = vdupq_n_s8((int8_t)(-2 * c)), hi = vdupq_n_s8((int8_t)(-2 * c - 1));
        q[4 * c] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v0, m4), vshlq_n_u8(vandq_u8(vshlq_u8(h0, lo), one), 4)));
        q[4 * c + 1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v1, m4), vshlq_n_u8(vandq_u8(vshlq_u8(h1, lo), one), 4)));
        q[4 * c + 2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v0, 4), vshlq_n_u8(vandq_u8(vshlq_u8(h0, hi), one), 4)));
        q[4 * c + 3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v1, 4), vshlq_n_u8(vandq_u8(vshlq_u8(h1, hi), one), 4)));
    }
}

/* acc after one q4_K / q5_K block (f16 d, dmin; 6-bit scales and mins)
 * against one q8_K block: the scalar step. */
static inline float q4k_step(float acc, uint16_t d, uint16_t dmin, const int8x16_t *q, const uint8_t *sc,
                             const uint8_t *mn, const block_q8_K *y) {
    int sum_q = 0, sum_m = 0;
    for (int s = 0; s < 8; s++) {
        sum_q += dot_sub(q[2 * s], q[2 * s + 1], y->qs + 32 * s) * sc[s];
        sum_m += (y->bsums[2 * s] + y->bsums[2 * s + 1]) * mn[s];
    }
    return acc + y->d * (neon_f16_to_f32(d) * (float)sum_q - neon_f16_to_f32(dmin) * (float)sum_m);
}

static inline void q4k_scales(const uint8_t *scales, uint8_t *sc, uint8_t *mn) {
    for (int s = 0; s < 8; s++) quant_k4_scale_min(s, scales, &sc[s], &mn[s]);
}

/* The 256 codes of a q6_K block (minus 32) as 16 int8x16. */
static inline void q6k_unpack(const block_q6_K *b, int8x16_t *q) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
        uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
        for (int k = 0; k < 4; k++) {
            /* elements 128h + 32k + l, l < 32 */
            uint8x16_t a = k & 1 ? l2 : l0, bb = k & 1 ? l3 : l1;
            a = k < 2 ? vandq_u8(a, m4) : vshrq_n_u8(a, 4);
            bb = k < 2 ? vandq_u8(bb, m4) : vshrq_n_u8(bb, 4);
            uint8x16_t ha = vandq_u8(vshlq_u8(h0, vdupq_n_s8((int8_t)(-2 * k))), m3);
            uint8x16_t hb = vandq_u8(vshlq_u8(h1, vdupq_n_s8((int8_t)(-2 * k))), m3);
            q[8 * h + 2 * k] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(a, vshlq_n_u8(ha, 4))), off);
            q[8 * h + 2 * k + 1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(bb, vshlq_n_u8(hb, 4))), off);
        }
    }
}

static inline float q6k_step(float acc, const block_q6_K *b, const int8x16_t *q, const block_q8_K *y) {
    int sum = 0;
    for (int s = 0; s < 16; s++)
        sum += vaddvq_s32(NEON_DOT16(vdupq_n_s32(0), q[s], vld1q_s8(y->qs + 16 * s))) * b->scales[s];
    return acc + y->d * neon_f16_to_f32(b->d) * (float)sum;
}

void NEON_FN(cdl_vec_dot_q4_k_q8_k_)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t q[16];
        uint8_t sc[8], mn[8];
        q4k_unpack(&x[i], q);
        q4k_scales(x[i].scales, sc, mn);
        acc = q4k_step(acc, x[i].d, x[i].dmin, q, sc, mn, &y[i]);
    }
    *out = acc;
}

void NEON_FN(cdl_vec_dot_q5_k_q8_k_)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t q[16];
        uint8_t sc[8], mn[8];
        q5k_unpack(&x[i], q);
        q4k_scales(x[i].scales, sc, mn);
        acc = q4k_step(acc, x[i].d, x[i].dmin, q, sc, mn, &y[i]);
    }
    *out = acc;
}

void NEON_FN(cdl_vec_dot_q6_k_q8_k_)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8x16_t q[16];
        q6k_unpack(&x[i], q);
        acc = q6k_step(acc, &x[i], q, &y[i]);
    }
    *out = acc;
}

/* One weight row against up to four activation rows: each block unpacked
 * once, one float chain per row in the single-row order. */
static void k_row4(candle_dtype t, int64_t nb, const char *w, const char *x, size_t xs, int nr, float *c,
                   int64_t ldc) {
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < nb; i++) {
        int8x16_t q[16];
        if (t == CANDLE_DTYPE_Q4_K) {
            const block_q4_K *b = (const block_q4_K *)w + i;
            uint8_t sc[8], mn[8];
            q4k_unpack(b, q);
            q4k_scales(b->scales, sc, mn);
            for (int r = 0; r < nr; r++)
                acc[r] = q4k_step(acc[r], b->d, b->dmin, q, sc, mn, (const block_q8_K *)(x + (size_t)r * xs) + i);
        } else if (t == CANDLE_DTYPE_Q5_K) {
            const block_q5_K *b = (const block_q5_K *)w + i;
            uint8_t sc[8], mn[8];
            q5k_unpack(b, q);
            q4k_scales(b->scales, sc, mn);
            for (int r = 0; r < nr; r++)
                acc[r] = q4k_step(acc[r], b->d, b->dmin, q, sc, mn, (const block_q8_K *)(x + (size_t)r * xs) + i);
        } else {
            const block_q6_K *b = (const block_q6_K *)w + i;
            q6k_unpack(b, q);
            for (int r = 0; r < nr; r++) acc[r] = q6k_step(acc[r], b, q, (const block_q8_K *)(x + (size_t)r * xs) + i);
        }
    }
    for (int r = 0; r < nr; r++) c[r * ldc] = acc[r];
}

#define NEON_K_ROWS 8 /* weight rows per pass over the activation rows */

int NEON_FN(cdl_qgemm_rows_k_)(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                  const void *x, size_t xs, float *c, int64_t ldc) {
    if (t != CANDLE_DTYPE_Q4_K && t != CANDLE_DTYPE_Q5_K && t != CANDLE_DTYPE_Q6_K) return 0;
    int64_t nb = K / QK_K;
    for (int64_t n0 = 0; n0 < N; n0 += NEON_K_ROWS) {
        int64_t n1 = N - n0 < NEON_K_ROWS ? N : n0 + NEON_K_ROWS;
        for (int64_t m = 0; m < M; m += 4) {
            int nr = M - m < 4 ? (int)(M - m) : 4;
            for (int64_t n = n0; n < n1; n++)
                k_row4(t, nb, (const char *)w + (size_t)n * ws, (const char *)x + (size_t)m * xs, xs, nr,
                       c + m * ldc + n, ldc);
        }
    }
    return 1;
}
