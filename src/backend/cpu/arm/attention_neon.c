/* NEON tile primitives of the blocked flash attention (contracts in
 * attention-impl.h), the aarch64 twin of x86/attention_avx2.c:
 *   pack_kt: four keys at a time, 4 x 4 blocks along d transposed into the
 *            panel (f16/bf16 converted on the way);
 *   scores:  6 q rows (lane-broadcast) x a panel of 16 transposed keys over
 *            d: 24 four-lane accumulators (the NEON GEMM micro-kernel's
 *            shape), one FMA chain from zero along d per score;
 *   scores_rows (decoding): one q row x 4 key rows, four accumulators along
 *            d reduced pairwise into a vector of four scores;
 *   accum:   6 p rows x 16 columns of v rows over the tile's keys, the
 *            accumulators starting from o * corr; a tail of dv reads v
 *            through a zero-padded copy (never beyond the row);
 *   softmax: per row, the maximum with NaN scores passed over (vmaxnmq),
 *            2^(s - m) on neon_exp2_nonpos4 (AVX2's exp2_nonpos, the same
 *            constants), the row sum kept in four vectors by column mod 16
 *            (so a row's sum does not depend on how far its group's tile
 *            reaches: other block sizes, other thread counts, same bits).
 * Chosen on aarch64 for the "neon" cpu_simd table (cpu_attn_ops_get);
 * the scalar isa setting gives the scalar table. Tested against the scalar
 * table (tests/ops/test_attention_neon.c) and through the kernel tests
 * under qemu-user (make test-arm64). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "../attention-impl.h"
#include "neon-util.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

_Static_assert(ATTN_NR == 16 && ATTN_MR == 6, "the NEON attention tiles are 6 x 16");

/* 4 x 4 transpose: r[i] lane p -> r[p] lane i */
static ALWAYS_INLINE void transpose4(float32x4_t r[4]) {
    float32x4x2_t a = vtrnq_f32(r[0], r[1]), b = vtrnq_f32(r[2], r[3]);
    r[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
    r[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
    r[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
    r[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}

static void pack_kt_neon(candle_dtype t, const char *k, int64_t sk, int64_t nk, int64_t d, float *kt) {
    int64_t esz = t == CANDLE_DTYPE_F32 ? 4 : 2, nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t j0 = 0; j0 < nkp; j0 += 4) {
        float *dst = kt + (j0 / ATTN_NR) * d * ATTN_NR + j0 % ATTN_NR;
        int64_t nv = nk - j0 < 4 ? (nk - j0 > 0 ? nk - j0 : 0) : 4;
        const char *rows = k + j0 * sk;
        int64_t p0 = 0;
        for (; p0 + 4 <= d; p0 += 4) {
            float32x4_t r[4];
            for (int i = 0; i < 4; i++) r[i] = i < nv ? neon_ld4(t, rows + i * sk + p0 * esz) : vdupq_n_f32(0);
            transpose4(r);
            for (int i = 0; i < 4; i++) vst1q_f32(dst + (p0 + i) * ATTN_NR, r[i]);
        }
        for (; p0 < d; p0++)
            for (int i = 0; i < 4; i++) dst[p0 * ATTN_NR + i] = i < nv ? cdl_load_f32(t, rows + i * sk + p0 * esz) : 0.0f;
    }
}

/* One mr x 16 tile of scores (mr <= 6, a constant after inlining). */
static ALWAYS_INLINE void scores_tile(const float *q, int64_t lda, const int mr, int64_t d, const float *kt,
                                      float *s, int64_t lds) {
    float32x4_t c[6][4];
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < 4; n++) c[i][n] = vdupq_n_f32(0);
    for (int64_t p = 0; p < d; p++) {
        const float *b = kt + p * ATTN_NR;
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        for (int i = 0; i < mr; i++) {
            float a = q[i * lda + p];
            c[i][0] = vfmaq_n_f32(c[i][0], b0, a);
            c[i][1] = vfmaq_n_f32(c[i][1], b1, a);
            c[i][2] = vfmaq_n_f32(c[i][2], b2, a);
            c[i][3] = vfmaq_n_f32(c[i][3], b3, a);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < 4; n++) vst1q_f32(s + i * lds + 4 * n, c[i][n]);
}

static void scores_neon(const float *q, int64_t lda, int64_t r, int64_t d, const float *kt, int64_t nk, float *s,
                        int64_t lds) {
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t i = 0; i < r; i += 6) {
        const float *qi = q + i * lda;
        float *si = s + i * lds;
        for (int64_t j0 = 0; j0 < nkp; j0 += ATTN_NR) {
            const float *panel = kt + (j0 / ATTN_NR) * d * ATTN_NR;
            switch (r - i < 6 ? r - i : 6) {
            case 1: scores_tile(qi, lda, 1, d, panel, si + j0, lds); break;
            case 2: scores_tile(qi, lda, 2, d, panel, si + j0, lds); break;
            case 3: scores_tile(qi, lda, 3, d, panel, si + j0, lds); break;
            case 4: scores_tile(qi, lda, 4, d, panel, si + j0, lds); break;
            case 5: scores_tile(qi, lda, 5, d, panel, si + j0, lds); break;
            default: scores_tile(qi, lda, 6, d, panel, si + j0, lds); break;
            }
        }
    }
}

/* One q row x 4 keys (rows kr[0..3]): four accumulators along d, reduced
 * pairwise into the four scores; T is a constant after inlining. */
static ALWAYS_INLINE float32x4_t scores_row4(const float *q, int64_t d, const candle_dtype T, const char *const *kr) {
    const int64_t esz = T == CANDLE_DTYPE_F32 ? 4 : 2;
    float32x4_t c0 = vdupq_n_f32(0), c1 = c0, c2 = c0, c3 = c0;
    int64_t p = 0;
    for (; p + 4 <= d; p += 4) {
        float32x4_t a = vld1q_f32(q + p);
        c0 = vfmaq_f32(c0, a, neon_ld4(T, kr[0] + p * esz));
        c1 = vfmaq_f32(c1, a, neon_ld4(T, kr[1] + p * esz));
        c2 = vfmaq_f32(c2, a, neon_ld4(T, kr[2] + p * esz));
        c3 = vfmaq_f32(c3, a, neon_ld4(T, kr[3] + p * esz));
    }
    float32x4_t out = vpaddq_f32(vpaddq_f32(c0, c1), vpaddq_f32(c2, c3));
    if (p < d) {
        float tail[4];
        for (int j = 0; j < 4; j++) {
            float t = 0;
            for (int64_t e = p; e < d; e++) t += q[e] * cdl_load_f32(T, kr[j] + e * esz);
            tail[j] = t;
        }
        out = vaddq_f32(out, vld1q_f32(tail));
    }
    return out;
}

/* Four keys at a time (past nk the last valid key is read again and its
 * score not stored), each q row in turn: the key rows stay in L1. */
static ALWAYS_INLINE void scores_rows_t(const float *q, int64_t lda, int64_t r, int64_t d, const candle_dtype T,
                                        const char *k, int64_t sk, int64_t nk, float *s, int64_t lds) {
    for (int64_t j = 0; j < nk; j += 4) {
        int64_t n = nk - j < 4 ? nk - j : 4;
        const char *kr[4];
        for (int i = 0; i < 4; i++) kr[i] = k + (j + (i < n ? i : n - 1)) * sk;
        for (int64_t i = 0; i < r; i++) {
            float32x4_t v = scores_row4(q + i * lda, d, T, kr);
            if (n == 4) {
                vst1q_f32(s + i * lds + j, v);
            } else {
                float out[4];
                vst1q_f32(out, v);
                memcpy(s + i * lds + j, out, sizeof(float) * (size_t)n);
            }
        }
    }
}

static void scores_rows_neon(const float *q, int64_t lda, int64_t r, int64_t d, candle_dtype t, const char *k,
                             int64_t sk, int64_t nk, float *s, int64_t lds) {
    if (t == CANDLE_DTYPE_F32) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F32, k, sk, nk, s, lds);
    else if (t == CANDLE_DTYPE_F16) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F16, k, sk, nk, s, lds);
    else scores_rows_t(q, lda, r, d, CANDLE_DTYPE_BF16, k, sk, nk, s, lds);
}

/* mr x 16 output columns (mr <= 6, a constant after inlining); with a tail
 * (nr < 16 columns of dv left) each v row goes through a zero-padded copy,
 * so the last v row is not read beyond its end; o's padding up to 16 is
 * scratch. */
static ALWAYS_INLINE void accum_tile(const float *p, int64_t ldp, const int mr, const float *corr, const float *v,
                                     int64_t ldv, int64_t nk, int nr, float *o, int64_t ldo, const bool tail) {
    float32x4_t c[6][4];
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < 4; n++) c[i][n] = vmulq_n_f32(vld1q_f32(o + i * ldo + 4 * n), corr[i]);
    float buf[ATTN_NR] = {0};
    for (int64_t j = 0; j < nk; j++) {
        const float *vj = v + j * ldv;
        if (tail) {
            memcpy(buf, vj, sizeof(float) * (size_t)nr);
            vj = buf;
        }
        float32x4_t b0 = vld1q_f32(vj), b1 = vld1q_f32(vj + 4), b2 = vld1q_f32(vj + 8), b3 = vld1q_f32(vj + 12);
        for (int i = 0; i < mr; i++) {
            float a = p[i * ldp + j];
            c[i][0] = vfmaq_n_f32(c[i][0], b0, a);
            c[i][1] = vfmaq_n_f32(c[i][1], b1, a);
            c[i][2] = vfmaq_n_f32(c[i][2], b2, a);
            c[i][3] = vfmaq_n_f32(c[i][3], b3, a);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < 4; n++) vst1q_f32(o + i * ldo + 4 * n, c[i][n]);
}

#define ACCUM_MR(MR, TAIL) \
    accum_tile(p + i * ldp, ldp, MR, corr + i, v + n0, ldv, nk, nr, o + i * ldo + n0, ldo, TAIL)

static void accum_neon(const float *p, int64_t ldp, int64_t r, const float *corr, const float *v, int64_t ldv,
                       int64_t nk, int64_t dv, float *o, int64_t ldo) {
    for (int64_t i = 0; i < r; i += 6) {
        int mr = r - i < 6 ? (int)(r - i) : 6;
        for (int64_t n0 = 0; n0 < dv; n0 += ATTN_NR) {
            int nr = dv - n0 < ATTN_NR ? (int)(dv - n0) : ATTN_NR;
            if (nr < ATTN_NR) {
                ACCUM_MR(mr, true);
                continue;
            }
            switch (mr) {
            case 1: ACCUM_MR(1, false); break;
            case 2: ACCUM_MR(2, false); break;
            case 3: ACCUM_MR(3, false); break;
            case 4: ACCUM_MR(4, false); break;
            case 5: ACCUM_MR(5, false); break;
            default: ACCUM_MR(6, false); break;
            }
        }
    }
}

/* Lanes j < n of four (n >= 0) as an all-ones mask. */
static inline uint32x4_t lanes_below(int64_t n) {
    static const uint32_t lane[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(lane), vdupq_n_u32((uint32_t)(n < 4 ? n : 4)));
}

/* One row: the maximum of its nk scores (columns past nk up to the next 4
 * are read and left out), then s[j] = 2^(s[j] - mn) and the sum, column j
 * in accumulator (j % 16) / 4 whatever nk is; columns past nk (to the next
 * 4) become 0. */
static void softmax_row(float *s, int64_t nk, float *m, float *l, float *corr) {
    float32x4_t mv = vdupq_n_f32(-INFINITY);
    int64_t j = 0;
    for (; j + 4 <= nk; j += 4) mv = vmaxnmq_f32(mv, vld1q_f32(s + j));
    if (j < nk) mv = vmaxnmq_f32(mv, vbslq_f32(lanes_below(nk - j), vld1q_f32(s + j), vdupq_n_f32(-INFINITY)));
    float mn = vmaxnmvq_f32(mv);
    mn = *m > mn ? *m : mn;
    if (mn == -INFINITY) { /* no key seen yet (NaN scores too give 0) */
        memset(s, 0, sizeof(float) * (size_t)nk);
        *corr = *l = 0.0f;
        return;
    }
    float32x4_t mb = vdupq_n_f32(mn), acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (j = 0; j + 16 <= nk; j += 16)
        for (int u = 0; u < 4; u++) {
            float32x4_t e = neon_exp2_nonpos4(vsubq_f32(vld1q_f32(s + j + 4 * u), mb));
            vst1q_f32(s + j + 4 * u, e);
            acc[u] = vaddq_f32(acc[u], e);
        }
    for (; j < nk; j += 4) {
        float32x4_t e = neon_exp2_nonpos4(vsubq_f32(vld1q_f32(s + j), mb));
        e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), lanes_below(nk - j)));
        vst1q_f32(s + j, e);
        acc[(j % 16) / 4] = vaddq_f32(acc[(j % 16) / 4], e);
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    float c = vgetq_lane_f32(neon_exp2_nonpos4(vdupq_n_f32(*m - mn)), 0); /* 0 when m is -inf */
    *corr = c;
    *l = *l * c + sum;
    *m = mn;
}

static void softmax_neon(float *s, int64_t lds, int64_t r, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i = 0; i < r; i++) softmax_row(s + i * lds, nk, m + i, l + i, corr + i);
}

static float max_neon(const float *x, int64_t n) {
    float32x4_t m = vdupq_n_f32(-INFINITY);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) m = vmaxnmq_f32(m, vld1q_f32(x + j));
    float r = vmaxnmvq_f32(m);
    for (; j < n; j++) r = x[j] > r ? x[j] : r;
    return r;
}

static void sub_neon(float *x, int64_t n, float m) {
    float32x4_t mv = vdupq_n_f32(m);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(x + j, vsubq_f32(vld1q_f32(x + j), mv));
    for (; j < n; j++) x[j] -= m;
}

static float sum_neon(const float *x, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        s0 = vaddq_f32(s0, vld1q_f32(x + j));
        s1 = vaddq_f32(s1, vld1q_f32(x + j + 4));
    }
    for (; j + 4 <= n; j += 4) s0 = vaddq_f32(s0, vld1q_f32(x + j));
    float r = vaddvq_f32(vaddq_f32(s0, s1));
    for (; j < n; j++) r += x[j];
    return r;
}

const cpu_attn_ops cpu_attn_neon = {
    .name = "neon",
    .pack_kt = pack_kt_neon,
    .scores = scores_neon,
    .scores_rows = scores_rows_neon,
    .accum = accum_neon,
    .softmax = softmax_neon,
    .max = max_neon,
    .sub = sub_neon,
    .sum = sum_neon,
};
#else
typedef int cdl_attention_neon_empty; /* ISO C: no empty translation unit */
#endif
