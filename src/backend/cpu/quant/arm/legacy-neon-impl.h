/* Internal template: the NEON dots of q4_0, q4_1, q5_0, q5_1 and q8_0 against their q8
 * activation blocks (and q4_z128's single-row dot), the single-row vec_dot and the multi-row product of
 * cdl_qgemm_rows, included by legacy_neon.c (plain armv8-a: vmull_s8 +
 * vpadalq_s16) and legacy_dotprod.c (armv8.2-a dotprod: vdotq_s32) with
 * NEON_SFX naming the variant and NEON_DOT16(acc, a, b) adding the products
 * of 16 int8 pairs into four int32 lanes.
 *
 * The block integer sums are exact in both variants and the float steps are
 * the scalar reference's (src/quant/legacy.c), one block after the other:
 * acc += (float)isum * (d_w * d_x) (q4_1, q5_1: + m_w * s_x), without fused
 * multiply-adds (ISO C11 keeps -ffp-contract=off). So every kernel here
 * gives the scalar dots' bits: single-row, multi-row, with or without
 * dotprod. */
#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#include "../qgemm-impl.h"
#include "quant-arm-impl.h"
#include "neon-common.h"

/* The 32 codes of a block as two int8x16 (elements 0-15, 16-31). */
static inline void ld_q8(const int8_t *qs, int8x16_t *lo, int8x16_t *hi) {
    *lo = vld1q_s8(qs);
    *hi = vld1q_s8(qs + 16);
}

static inline void ld_q4(const uint8_t *qs, int bias, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t v = vld1q_u8(qs);
    int8x16_t l = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
    int8x16_t h = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    if (bias) {
        l = vsubq_s8(l, vdupq_n_s8((int8_t)bias));
        h = vsubq_s8(h, vdupq_n_s8((int8_t)bias));
    }
    *lo = l;
    *hi = h;
}

/* q5: the nibbles plus bit j of the little-endian qh word as 16, minus
 * bias */
static inline void ld_q5(const uint8_t *qs, const uint8_t *qh, int bias, int8x16_t *lo, int8x16_t *hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bm = vld1q_u8(bit), b16 = vdupq_n_u8(0x10);
    int8x16_t l, h;
    ld_q4(qs, 0, &l, &h);
    uint8x16_t hl = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bm), b16);
    uint8x16_t hh = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bm), b16);
    l = vreinterpretq_s8_u8(vorrq_u8(vreinterpretq_u8_s8(l), hl));
    h = vreinterpretq_s8_u8(vorrq_u8(vreinterpretq_u8_s8(h), hh));
    if (bias) {
        l = vsubq_s8(l, vdupq_n_s8((int8_t)bias));
        h = vsubq_s8(h, vdupq_n_s8((int8_t)bias));
    }
    *lo = l;
    *hi = h;
}

/* One weight block's codes (q4_0: bias 8; q5_0: 16; q4_1, q5_1: 0; q8_0:
 * none). q4_1 and q5_1 add m_w * s_x (their q8_1 activations). */
typedef enum { NK_Q4_0, NK_Q4_1, NK_Q8_0, NK_Q5_0, NK_Q5_1 } neon_kind;
static inline int has_min(neon_kind k) { return k == NK_Q4_1 || k == NK_Q5_1; }

/* Blocks are read by byte offsets (any address: rows need no alignment). */
static inline void ld_w(neon_kind k, const char *wb, int8x16_t *lo, int8x16_t *hi) {
    if (k == NK_Q8_0) ld_q8((const int8_t *)(wb + offsetof(block_q8_0, qs)), lo, hi);
    else if (k == NK_Q4_0) ld_q4((const uint8_t *)(wb + offsetof(block_q4_0, qs)), 8, lo, hi);
    else if (k == NK_Q4_1) ld_q4((const uint8_t *)(wb + offsetof(block_q4_1, qs)), 0, lo, hi);
    else if (k == NK_Q5_0)
        ld_q5((const uint8_t *)(wb + offsetof(block_q5_0, qs)), (const uint8_t *)(wb + offsetof(block_q5_0, qh)), 16,
              lo, hi);
    else
        ld_q5((const uint8_t *)(wb + offsetof(block_q5_1, qs)), (const uint8_t *)(wb + offsetof(block_q5_1, qh)), 0,
              lo, hi);
}

static inline size_t w_size(neon_kind k) {
    return k == NK_Q8_0   ? sizeof(block_q8_0)
           : k == NK_Q4_0 ? sizeof(block_q4_0)
           : k == NK_Q4_1 ? sizeof(block_q4_1)
           : k == NK_Q5_0 ? sizeof(block_q5_0)
                          : sizeof(block_q5_1);
}

static inline float w_d(neon_kind k, const char *wb) {
    uint16_t d;
    memcpy(&d, wb, 2); /* d leads every block */
    (void)k;
    return neon_f16_to_f32(d);
}

/* The activation blocks: q8_0 (q4_0, q8_0) or q8_1 (q4_1); d first, codes
 * at qs. */
static inline size_t x_size(neon_kind k) { return has_min(k) ? sizeof(block_q8_1) : sizeof(block_q8_0); }
static inline const int8_t *x_qs(neon_kind k, const char *xb) {
    return (const int8_t *)(xb + (has_min(k) ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs)));
}

static inline int32x4_t dot32(int8x16_t wl, int8x16_t wh, const int8_t *xq) {
    int32x4_t s = vdupq_n_s32(0);
    s = NEON_DOT16(s, wl, vld1q_s8(xq));
    s = NEON_DOT16(s, wh, vld1q_s8(xq + 16));
    return s;
}

/* acc after one block: the scalar reference's float steps. */
static inline float step(neon_kind k, float acc, int32_t isum, const char *wb, const char *xb) {
    uint16_t xd;
    memcpy(&xd, xb, 2);
    float p = (float)isum * (w_d(k, wb) * neon_f16_to_f32(xd));
    if (has_min(k)) {
        uint16_t m, s;
        memcpy(&m, wb + 2, 2);
        memcpy(&s, xb + 2, 2);
        return acc + (p + neon_f16_to_f32(m) * neon_f16_to_f32(s));
    }
    return acc + p;
}

static inline float dot_row(neon_kind k, int64_t nb, const char *w, const char *x) {
    size_t wsz = w_size(k), xsz = x_size(k);
    float acc = 0;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) { /* four blocks' integer sums, then the float steps in order */
        int32x4_t s[4];
        for (int j = 0; j < 4; j++) {
            int8x16_t wl, wh;
            ld_w(k, w + (size_t)(b + j) * wsz, &wl, &wh);
            s[j] = dot32(wl, wh, x_qs(k, x + (size_t)(b + j) * xsz));
        }
        int32x4_t t = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
        int32_t is[4];
        vst1q_s32(is, t);
        for (int j = 0; j < 4; j++) acc = step(k, acc, is[j], w + (size_t)(b + j) * wsz, x + (size_t)(b + j) * xsz);
    }
    for (; b < nb; b++) {
        int8x16_t wl, wh;
        ld_w(k, w + (size_t)b * wsz, &wl, &wh);
        acc = step(k, acc, vaddvq_s32(dot32(wl, wh, x_qs(k, x + (size_t)b * xsz))), w + (size_t)b * wsz,
                   x + (size_t)b * xsz);
    }
    return acc;
}

void NEON_FN(cdl_vec_dot_q4_0_q8_0_)(int64_t n, float *out, const void *x, const void *y) {
    *out = dot_row(NK_Q4_0, n / QK4_0, x, y);
}
void NEON_FN(cdl_vec_dot_q4_1_q8_1_)(int64_t n, float *out, const void *x, const void *y) {
    *out = dot_row(NK_Q4_1, n / QK4_1, x, y);
}
void NEON_FN(cdl_vec_dot_q8_0_q8_0_)(int64_t n, float *out, const void *x, const void *y) {
    *out = dot_row(NK_Q8_0, n / QK8_0, x, y);
}
void NEON_FN(cdl_vec_dot_q5_0_q8_0_)(int64_t n, float *out, const void *x, const void *y) {
    *out = dot_row(NK_Q5_0, n / QK5_0, x, y);
}
void NEON_FN(cdl_vec_dot_q5_1_q8_1_)(int64_t n, float *out, const void *x, const void *y) {
    *out = dot_row(NK_Q5_1, n / QK5_1, x, y);
}

/* q4_z128: per code block the exact sum of (q - z) x, then the scalar
 * reference's acc += (float)isum * (d * d_x), the code blocks in order. */
void NEON_FN(cdl_vec_dot_q4_z128_q8_0_)(int64_t n, float *out, const void *vx, const void *vy) {
    const char *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK4_Z; i++, x += sizeof(block_q4_z128), y += 4) {
        float d = w_d(NK_Q4_0, x);
        int32x4_t s[4];
        for (int j = 0; j < 4; j++) {
            int8x16_t wl, wh;
            ld_q4((const uint8_t *)x + offsetof(block_q4_z128, qs) + 16 * j, (uint8_t)x[offsetof(block_q4_z128, z)],
                  &wl, &wh);
            s[j] = dot32(wl, wh, y[j].qs);
        }
        int32_t is[4];
        vst1q_s32(is, vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3])));
        for (int j = 0; j < 4; j++) {
            uint16_t yd;
            memcpy(&yd, &y[j].d, 2);
            acc += (float)is[j] * (d * neon_f16_to_f32(yd));
        }
    }
    *out = acc;
}

/* One weight row against four activation rows: each weight block loaded
 * (and q4 unpacked) once; four independent float chains, each the
 * single-row order. */
static inline void dot_row4(neon_kind k, int64_t nb, const char *w, const char *x, size_t xs, float *c,
                            int64_t ldc) {
    size_t wsz = w_size(k), xsz = x_size(k);
    float acc[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nb; b++) {
        const char *wb = w + (size_t)b * wsz, *xb = x + (size_t)b * xsz;
        int8x16_t wl, wh;
        ld_w(k, wb, &wl, &wh);
        int32x4_t s0 = dot32(wl, wh, x_qs(k, xb)), s1 = dot32(wl, wh, x_qs(k, xb + xs));
        int32x4_t s2 = dot32(wl, wh, x_qs(k, xb + 2 * xs)), s3 = dot32(wl, wh, x_qs(k, xb + 3 * xs));
        int32_t is[4];
        vst1q_s32(is, vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3)));
        for (int r = 0; r < 4; r++) acc[r] = step(k, acc[r], is[r], wb, xb + (size_t)r * xs);
    }
    for (int r = 0; r < 4; r++) c[r * ldc] = acc[r];
}

#define NEON_ROWS 16 /* weight rows per pass over the activation rows (kept in L1) */

int NEON_FN(cdl_qgemm_rows_)(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                const void *x, size_t xs, float *c, int64_t ldc) {
    neon_kind k;
    if (t == CANDLE_DTYPE_Q4_0) k = NK_Q4_0;
    else if (t == CANDLE_DTYPE_Q4_1) k = NK_Q4_1;
    else if (t == CANDLE_DTYPE_Q8_0) k = NK_Q8_0;
    else if (t == CANDLE_DTYPE_Q5_0) k = NK_Q5_0;
    else if (t == CANDLE_DTYPE_Q5_1) k = NK_Q5_1;
    else return NEON_FN(cdl_qgemm_rows_k_)(t, K, M, N, w, ws, x, xs, c, ldc);
    int64_t nb = K / 32;
    const char *wc = w, *xc = x;
    for (int64_t n0 = 0; n0 < N; n0 += NEON_ROWS) {
        int64_t n1 = N - n0 < NEON_ROWS ? N : n0 + NEON_ROWS;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4)
            for (int64_t n = n0; n < n1; n++)
                dot_row4(k, nb, wc + (size_t)n * ws, xc + (size_t)m * xs, xs, c + m * ldc + n, ldc);
        for (; m < M; m++)
            for (int64_t n = n0; n < n1; n++)
                c[m * ldc + n] = dot_row(k, nb, wc + (size_t)n * ws, xc + (size_t)m * xs);
    }
    return 1;
}
