/* Internal: the multi-row panel kernels of qgemm_avx2.c, included by it
 * (maddubs + madd) and by qgemm_avx512.c (CANDLE_QUANT_VNNI defined first:
 * the byte dots as vpdpbusd), with QGEMM_KERNEL naming the entry point's
 * variant. Both read the same packed panels and give the same bits: the
 * integer block sums are exact either way, and the float operations on
 * them are the same in the same order. */
#ifndef CANDLE_QGEMM_PANELS_IMPL_H
#define CANDLE_QGEMM_PANELS_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "avx2-impl.h"

#include "../qgemm-impl.h"
#define NR CANDLE_QGEMM_NR

/* q4_K record per 256 elements: for each of the 8 sub-blocks, 8 code
 * vectors; then per sub-block the scales, and the minimums, of the 8 rows as
 * 16-bit pairs (both halves of lane j hold row j's value, so one madd
 * applies them: to a pair of 16-bit sums, or to q8_K's two bsums of the
 * sub-block); then f32 d[8] and dmin[8]. */
#define Q4K_SC (8 * 8 * 32)
#define Q4K_MN (Q4K_SC + 8 * 32)
#define Q4K_D (Q4K_MN + 8 * 32)
#define Q4K_REC (Q4K_D + 2 * NR * 4)

/* q6_K record per 256 elements: 8 x 8 code vectors (codes 0..63, value
 * + 32); per 16 elements the scales of the 8 rows as 16-bit pairs (for the
 * code sums); per 32 elements the pairs (scale 2t, scale 2t+1) (for q8_K's
 * bsums, which take the +32 off); f32 d[8]. */
#define Q6K_SC (8 * 8 * 32)
#define Q6K_SP (Q6K_SC + 16 * 32)
#define Q6K_D (Q6K_SP + 8 * 32)
#define Q6K_REC (Q6K_D + NR * 4)

/* The nibble types' roles: q*_0 (an offset term per activation block)
 * and q*_1 (a minimum per weight block); q5 adds a fifth code bit. */
static inline bool off_type(candle_dtype t) { return t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q5_0; }
static inline bool min_type(candle_dtype t) { return t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_1; }
static inline bool q5_type(candle_dtype t) { return t == CANDLE_DTYPE_Q5_0 || t == CANDLE_DTYPE_Q5_1; }

static inline size_t rec_bytes(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_Q6_K: return Q6K_REC;
    case CANDLE_DTYPE_Q4_K: return Q4K_REC;
    case CANDLE_DTYPE_Q8_0: return 16 * 32 + NR * 4;
    default: return 8 * 32 + (min_type(t) ? 2 : 1) * NR * 4;
    }
}
static inline __m256i bcast4(const int8_t *q, int g) {
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return _mm256_set1_epi32(v);
}

static inline void store_out(__m256 acc, int nn, float *out) {
    if (nn == NR) {
        _mm256_storeu_ps(out, acc);
        return;
    }
    float tmp[NR];
    _mm256_storeu_ps(tmp, acc);
    memcpy(out, tmp, (size_t)nn * sizeof(float));
}

/* The panel kernels multiply the packed panel with R <= 4 activation rows at
 * once (R a constant after inlining): each panel vector is loaded once for
 * all R rows, so a block costs 8 code loads + 8 R broadcasts instead of
 * 16 R loads, and R independent accumulator chains hide the maddubs
 * latency. Per row the arithmetic is the single-row kernel's, in the same
 * order. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define FOR_R _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)

/* Per q8_0 activation row, for q4_0 and q5_0, the aux record: the block
 * scales d[nb] as f32, then the offset terms s[nb], -8 (q5_0: -16) * d *
 * sum(codes) of the matrix-vector kernel (gemv_avx2.c), the same rounding
 * (two products; the sums are exact integers). (The same record for q4_1
 * and q8_0, the scales converted once per call instead of per panel,
 * measured no faster.) */
typedef struct rows4 {
    const char *x[4];     /* activation rows in the vec_dot type */
    const float *aux[4];  /* their aux records (q4_0, q5_0; q8_0: int32 code sums), else NULL */
    float *out[4];
    int64_t nb;           /* blocks per row */
} rows4;


/* The legacy types (q4_0, q4_1, q5_0, q5_1, q8_0) reproduce, per output, the float
 * order of their matrix-vector kernels (gemv_avx2.c), which serve one
 * activation row: so a row's result is the same bits whether it is
 * multiplied alone (M = 1: gemv) or with any number of others (here), and
 * a server's greedy streams do not depend on who shares the batch. That
 * order: the blocks of each full group of 8 go to 8 accumulator lanes
 * (block 8g + i to lane i, q4_1's minimum term to a second set), each
 * block scale applied to its exact integer sum; the blocks after the last
 * full group add their 8 partial sums (elements 4i..4i+3 to lane i), and
 * their offset terms go to a scalar; then the lanes' tree sum (hsum_ps),
 * then the scalar. Here each accumulator lane is a vector over the 8 panel
 * rows: the full groups run lane by lane (i outer, blocks 8g + i inner),
 * so R rows need 2R accumulators at a time. The test test_qgemm_order
 * checks the bits against cdl_gemv_rows. */
typedef struct lanes {
    __m256 a[8][4], m[8][4]; /* [lane][row]: vectors over the panel rows */
    float e[4][NR];          /* [row]: the tail blocks' offset terms */
} lanes;

/* Codes 0..15: pair sums stay below 2 * 15 * 128, so the 8 groups of a
 * block add up in 16 bits (q4_0 and q4_1); q5's codes 0..31 allow 4 groups
 * (block_sums); q8_0 takes |w| and w's sign. */
ALWAYS_INLINE __m256i group_dot(candle_dtype t, const __m256i *g, int i, const int8_t *q) {
    if (t == CANDLE_DTYPE_Q8_0)
        return dot_u8_i8(_mm256_loadu_si256(&g[i]), _mm256_sign_epi8(bcast4(q, i), _mm256_loadu_si256(&g[8 + i])));
#ifdef CANDLE_QUANT_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_loadu_si256(&g[i]), bcast4(q, i));
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256(&g[i]), bcast4(q, i)), _mm256_set1_epi16(1));
#endif
}

/* Block b's activation codes for row r. */
ALWAYS_INLINE const int8_t *act_codes(candle_dtype t, const rows4 *rw, int r, int64_t b) {
    if (min_type(t)) return ((const block_q8_1 *)rw->x[r] + b)->qs;
    return ((const block_q8_0 *)rw->x[r] + b)->qs;
}

/* Its f32 scale and offset term (q*_1: the q8_1 s; q*_0: the aux term;
 * q8_0: none). */
ALWAYS_INLINE void act_scales(candle_dtype t, const rows4 *rw, int r, int64_t b, __m256 *dy, __m256 *sy) {
    if (min_type(t)) {
        const block_q8_1 *y = (const block_q8_1 *)rw->x[r] + b;
        int32_t ds; /* d and s, converted together */
        memcpy(&ds, &y->d, 4);
        __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(ds));
        *dy = _mm256_broadcastss_ps(f);
        *sy = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(f), _mm256_set1_epi32(1));
    } else if (off_type(t)) {
        *dy = _mm256_set1_ps(rw->aux[r][b]);
        *sy = _mm256_set1_ps(rw->aux[r][rw->nb + b]);
    } else {
        *dy = _mm256_set1_ps(h2f(((const block_q8_0 *)rw->x[r] + b)->d));
        *sy = _mm256_setzero_ps();
    }
}

/* Keeps a sum where it is: without it gcc reorders the exact integer
 * additions of all R rows into trees and spills their terms. */
#define PIN(v) __asm__("" : "+x"(v))

/* The exact integer sums of block record g with R rows' codes q. */
#ifdef CANDLE_QUANT_VNNI
/* VNNI: each row's sum in two dpbusd chains (groups 0..3 and 4..7), so R
 * rows keep 2R chains in flight against the instruction's latency; the
 * 32-bit sums cannot saturate. */
ALWAYS_INLINE void block_sums(candle_dtype t, int R, const __m256i *g, const int8_t *const *q, __m256i *s) {
    __m256i u[4];
    for (int k = 0; k < 4; k++) {
        __m256i w0 = _mm256_loadu_si256(&g[k]), w1 = _mm256_loadu_si256(&g[4 + k]);
        FOR_R {
            __m256i x0 = bcast4(q[r], k), x1 = bcast4(q[r], 4 + k);
            if (t == CANDLE_DTYPE_Q8_0) {
                x0 = _mm256_sign_epi8(x0, _mm256_loadu_si256(&g[8 + k]));
                x1 = _mm256_sign_epi8(x1, _mm256_loadu_si256(&g[12 + k]));
            }
            s[r] = _mm256_dpbusd_epi32(k ? s[r] : _mm256_setzero_si256(), w0, x0);
            u[r] = _mm256_dpbusd_epi32(k ? u[r] : _mm256_setzero_si256(), w1, x1);
        }
    }
    FOR_R s[r] = _mm256_add_epi32(s[r], u[r]);
}
#else
ALWAYS_INLINE void block_sums(candle_dtype t, int R, const __m256i *g, const int8_t *const *q, __m256i *s) {
    if (t == CANDLE_DTYPE_Q8_0) {
        FOR_R s[r] = group_dot(t, g, 0, q[r]);
        for (int k = 1; k < 8; k++) FOR_R {
                s[r] = _mm256_add_epi32(s[r], group_dot(t, g, k, q[r]));
                PIN(s[r]);
            }
        return;
    }
    /* 16-bit runs of 8 groups (q4), or of 4 (q5: 4 * 2 * 31 * 128 < 2^15) */
    const int run = q5_type(t) ? 4 : 8;
    for (int k0 = 0; k0 < 8; k0 += run) {
        __m256i h[4], w = _mm256_loadu_si256(&g[k0]);
        FOR_R h[r] = _mm256_maddubs_epi16(w, bcast4(q[r], k0));
        for (int k = k0 + 1; k < k0 + run; k++) {
            w = _mm256_loadu_si256(&g[k]);
            FOR_R {
                h[r] = _mm256_add_epi16(h[r], _mm256_maddubs_epi16(w, bcast4(q[r], k)));
                PIN(h[r]);
            }
        }
        FOR_R {
            h[r] = _mm256_madd_epi16(h[r], _mm256_set1_epi16(1));
            s[r] = k0 ? _mm256_add_epi32(s[r], h[r]) : h[r];
        }
    }
}
#endif

/* Lane i of every row: blocks i, 8 + i, ... of the full groups. */
ALWAYS_INLINE void full_lane(candle_dtype t, int R, int64_t ng, int i, const char *p, const rows4 *rw, lanes *L) {
    const size_t rb = rec_bytes(t), doff = t == CANDLE_DTYPE_Q8_0 ? 16 * 32 : 8 * 32;
    __m256 a[4], m[4];
    FOR_R a[r] = m[r] = _mm256_setzero_ps();
    for (int64_t gi = 0; gi < ng; gi++) {
        int64_t b = 8 * gi + i;
        const char *rec = p + (size_t)b * rb;
        const int8_t *q[4];
        __m256i s[4];
        FOR_R q[r] = act_codes(t, rw, r, b);
        block_sums(t, R, (const __m256i *)rec, q, s);
        __m256 dw = _mm256_loadu_ps((const float *)(rec + doff));
        FOR_R {
            __m256 dy, sy, v = _mm256_cvtepi32_ps(s[r]);
            act_scales(t, rw, r, b, &dy, &sy);
            if (off_type(t)) a[r] = _mm256_fmadd_ps(dw, _mm256_fmadd_ps(dy, v, sy), a[r]);
            else a[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), v, a[r]);
            if (min_type(t))
                m[r] = _mm256_fmadd_ps(_mm256_loadu_ps((const float *)(rec + doff + NR * 4)), sy, m[r]);
        }
    }
    FOR_R {
        L->a[i][r] = a[r];
        L->m[i][r] = m[r];
    }
}

/* Blocks ng * 8.. of row r: partial sums to the lanes, offset terms to e. */
ALWAYS_INLINE void tail_row(candle_dtype t, int64_t b0, int64_t nb, const char *p, const rows4 *rw, int r,
                            lanes *L) {
    const size_t rb = rec_bytes(t), doff = t == CANDLE_DTYPE_Q8_0 ? 16 * 32 : 8 * 32;
    for (int64_t b = b0; b < nb; b++) {
        const char *rec = p + (size_t)b * rb;
        __m256 dy, sy;
        const int8_t *q = act_codes(t, rw, r, b);
        act_scales(t, rw, r, b, &dy, &sy);
        __m256 dw = _mm256_loadu_ps((const float *)(rec + doff)), dd = _mm256_mul_ps(dw, dy);
        for (int i = 0; i < 8; i++)
            L->a[i][r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(group_dot(t, (const __m256i *)rec, i, q)), L->a[i][r]);
        if (t == CANDLE_DTYPE_Q8_0) continue;
        /* the matrix-vector kernel's scalar statement, so that a compiler
         * contracting it (clang's default) does so in both */
        float w[NR], s = _mm256_cvtss_f32(sy);
        _mm256_storeu_ps(w, _mm256_loadu_ps((const float *)(rec + doff + (min_type(t) ? NR * 4 : 0))));
        for (int j = 0; j < NR; j++) L->e[r][j] += w[j] * s;
    }
}

ALWAYS_INLINE void panel_legacy_r(candle_dtype t, int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    lanes L;
    int64_t nb = K / 32, ng = nb / 8;
    if (ng > 0)
        for (int i = 0; i < 8; i++) full_lane(t, R, ng, i, p, rw, &L);
    else
        for (int i = 0; i < 8; i++) FOR_R L.a[i][r] = L.m[i][r] = _mm256_setzero_ps();
    FOR_R {
        for (int j = 0; j < NR; j++) L.e[r][j] = 0;
        if (nb > 8 * ng) tail_row(t, 8 * ng, nb, p, rw, r, &L);
        __m256 v[8];
        for (int i = 0; i < 8; i++) v[i] = t == CANDLE_DTYPE_Q8_0 ? L.a[i][r] : _mm256_add_ps(L.a[i][r], L.m[i][r]);
        /* hsum_ps's tree: (0+4, 1+5, 2+6, 3+7), then (.0 + .2, .1 + .3), then the two */
        for (int i = 0; i < 4; i++) v[i] = _mm256_add_ps(v[i], v[4 + i]);
        __m256 h = _mm256_add_ps(_mm256_add_ps(v[0], v[2]), _mm256_add_ps(v[1], v[3]));
        if (t != CANDLE_DTYPE_Q8_0) h = _mm256_add_ps(h, _mm256_loadu_ps(L.e[r]));
        store_out(h, nn, rw->out[r]);
    }
}

ALWAYS_INLINE void panel_q4_0_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    panel_legacy_r(CANDLE_DTYPE_Q4_0, R, K, nn, p, rw);
}
ALWAYS_INLINE void panel_q4_1_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    panel_legacy_r(CANDLE_DTYPE_Q4_1, R, K, nn, p, rw);
}
ALWAYS_INLINE void panel_q5_0_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    panel_legacy_r(CANDLE_DTYPE_Q5_0, R, K, nn, p, rw);
}
ALWAYS_INLINE void panel_q5_1_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    panel_legacy_r(CANDLE_DTYPE_Q5_1, R, K, nn, p, rw);
}
ALWAYS_INLINE void panel_q8_0_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    panel_legacy_r(CANDLE_DTYPE_Q8_0, R, K, nn, p, rw);
}

/* Sub-block sums stay below 8 * 2 * 15 * 127 in 16 bits; scaled by 6-bit
 * scales and summed over 8 sub-blocks they stay far inside 32 bits. */
ALWAYS_INLINE void panel_q4_k_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    __m256 acc[4];
    FOR_R acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QK_K; b++, p += Q4K_REC) {
        const __m256i *g = (const __m256i *)p, *sc = (const __m256i *)(p + Q4K_SC), *mn = (const __m256i *)(p + Q4K_MN);
        const block_q8_K *y[4];
        __m256i tot[4], mins[4];
        FOR_R {
            y[r] = (const block_q8_K *)rw->x[r] + b;
            tot[r] = mins[r] = _mm256_setzero_si256();
        }
        for (int s = 0; s < 8; s++) {
            __m256i scv = _mm256_loadu_si256(&sc[s]), mnv = _mm256_loadu_si256(&mn[s]);
#ifdef CANDLE_QUANT_VNNI
            /* 32-bit sub-block sums (two chains per row) times the scales
             * (the pairs' high halves, sign-extended) */
            __m256i a[4], c[4];
            for (int i = 0; i < 4; i++) {
                __m256i w0 = _mm256_loadu_si256(&g[8 * s + i]), w1 = _mm256_loadu_si256(&g[8 * s + 4 + i]);
                FOR_R {
                    a[r] = _mm256_dpbusd_epi32(i ? a[r] : _mm256_setzero_si256(), w0, bcast4(y[r]->qs + 32 * s, i));
                    c[r] = _mm256_dpbusd_epi32(i ? c[r] : _mm256_setzero_si256(), w1,
                                               bcast4(y[r]->qs + 32 * s, 4 + i));
                }
            }
            __m256i sc32 = _mm256_srai_epi32(scv, 16);
            FOR_R tot[r] = _mm256_add_epi32(tot[r], _mm256_mullo_epi32(_mm256_add_epi32(a[r], c[r]), sc32));
#else
            __m256i a[4], w = _mm256_loadu_si256(&g[8 * s]);
            FOR_R a[r] = _mm256_maddubs_epi16(w, bcast4(y[r]->qs + 32 * s, 0));
            for (int i = 1; i < 8; i++) {
                w = _mm256_loadu_si256(&g[8 * s + i]);
                FOR_R a[r] = _mm256_add_epi16(a[r], _mm256_maddubs_epi16(w, bcast4(y[r]->qs + 32 * s, i)));
            }
            FOR_R tot[r] = _mm256_add_epi32(tot[r], _mm256_madd_epi16(a[r], scv));
#endif
            FOR_R {
                int32_t bs;
                memcpy(&bs, &y[r]->bsums[2 * s], 4);
                mins[r] = _mm256_add_epi32(mins[r], _mm256_madd_epi16(mnv, _mm256_set1_epi32(bs)));
            }
        }
        const float *d = (const float *)(p + Q4K_D);
        __m256 dv = _mm256_loadu_ps(d), dm = _mm256_loadu_ps(d + NR);
        FOR_R {
            __m256 yd = _mm256_set1_ps(y[r]->d);
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, yd), _mm256_cvtepi32_ps(tot[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, yd), _mm256_cvtepi32_ps(mins[r]), acc[r]);
        }
    }
    FOR_R store_out(acc[r], nn, rw->out[r]);
}

/* Pair sums below 2 * 63 * 127: two groups add up in 16 bits, then the
 * 8-bit scale is applied by madd (per super-block far inside 32 bits). */
ALWAYS_INLINE void panel_q6_k_r(int R, int64_t K, int nn, const char *p, const rows4 *rw) {
    __m256 acc[4];
    FOR_R acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QK_K; b++, p += Q6K_REC) {
        const __m256i *g = (const __m256i *)p, *sc = (const __m256i *)(p + Q6K_SC), *sp = (const __m256i *)(p + Q6K_SP);
        const block_q8_K *y[4];
        __m256i tot[4], off[4];
        FOR_R {
            y[r] = (const block_q8_K *)rw->x[r] + b;
            tot[r] = off[r] = _mm256_setzero_si256();
        }
        for (int s = 0; s < 8; s++) {
#ifdef CANDLE_QUANT_VNNI
            /* 32-bit sums of the two 16-element halves (groups 0..3, 4..7)
             * times their scales (the pairs' high halves, sign-extended) */
            __m256i a[4], c[4];
            for (int i = 0; i < 4; i++) {
                __m256i w0 = _mm256_loadu_si256(&g[8 * s + i]), w1 = _mm256_loadu_si256(&g[8 * s + 4 + i]);
                FOR_R {
                    a[r] = _mm256_dpbusd_epi32(i ? a[r] : _mm256_setzero_si256(), w0, bcast4(y[r]->qs + 32 * s, i));
                    c[r] = _mm256_dpbusd_epi32(i ? c[r] : _mm256_setzero_si256(), w1,
                                               bcast4(y[r]->qs + 32 * s, 4 + i));
                }
            }
            __m256i s0 = _mm256_srai_epi32(_mm256_loadu_si256(&sc[2 * s]), 16);
            __m256i s1 = _mm256_srai_epi32(_mm256_loadu_si256(&sc[2 * s + 1]), 16);
            FOR_R tot[r] = _mm256_add_epi32(
                tot[r], _mm256_add_epi32(_mm256_mullo_epi32(a[r], s0), _mm256_mullo_epi32(c[r], s1)));
#else
            for (int h = 0; h < 4; h++) { /* group pairs 2h, 2h+1; 16-element half h / 2 */
                __m256i w0 = _mm256_loadu_si256(&g[8 * s + 2 * h]), w1 = _mm256_loadu_si256(&g[8 * s + 2 * h + 1]);
                __m256i scv = _mm256_loadu_si256(&sc[2 * s + h / 2]);
                FOR_R {
                    const int8_t *q = y[r]->qs + 32 * s;
                    __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast4(q, 2 * h)),
                                                 _mm256_maddubs_epi16(w1, bcast4(q, 2 * h + 1)));
                    tot[r] = _mm256_add_epi32(tot[r], _mm256_madd_epi16(a, scv));
                }
            }
#endif
            __m256i spv = _mm256_loadu_si256(&sp[s]);
            FOR_R {
                int32_t bs;
                memcpy(&bs, &y[r]->bsums[2 * s], 4);
                off[r] = _mm256_add_epi32(off[r], _mm256_madd_epi16(spv, _mm256_set1_epi32(bs)));
            }
        }
        __m256 dv = _mm256_loadu_ps((const float *)(p + Q6K_D));
        FOR_R {
            __m256i t = _mm256_sub_epi32(tot[r], _mm256_slli_epi32(off[r], 5));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(y[r]->d)), _mm256_cvtepi32_ps(t), acc[r]);
        }
    }
    FOR_R store_out(acc[r], nn, rw->out[r]);
}

typedef void (*panel_fn)(int64_t K, int nn, const char *p, const rows4 *rw);

/* The R = 1..4 instances of each kernel. */
#define PANEL_INSTANCES(T)                                                                                    \
    static void T##_1(int64_t K, int nn, const char *p, const rows4 *rw) { panel_##T##_r(1, K, nn, p, rw); } \
    static void T##_2(int64_t K, int nn, const char *p, const rows4 *rw) { panel_##T##_r(2, K, nn, p, rw); } \
    static void T##_3(int64_t K, int nn, const char *p, const rows4 *rw) { panel_##T##_r(3, K, nn, p, rw); } \
    static void T##_4(int64_t K, int nn, const char *p, const rows4 *rw) { panel_##T##_r(4, K, nn, p, rw); } \
    static const panel_fn T##_fns[4] = {T##_1, T##_2, T##_3, T##_4};
PANEL_INSTANCES(q4_0)
PANEL_INSTANCES(q4_1)
PANEL_INSTANCES(q5_0)
PANEL_INSTANCES(q5_1)
PANEL_INSTANCES(q8_0)
PANEL_INSTANCES(q4_k)
PANEL_INSTANCES(q6_k)

static const panel_fn *panel_fns(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_Q4_0: return q4_0_fns;
    case CANDLE_DTYPE_Q4_1: return q4_1_fns;
    case CANDLE_DTYPE_Q5_0: return q5_0_fns;
    case CANDLE_DTYPE_Q5_1: return q5_1_fns;
    case CANDLE_DTYPE_Q4_K: return q4_k_fns;
    case CANDLE_DTYPE_Q6_K: return q6_k_fns;
    default: return q8_0_fns;
    }
}

void QGEMM_KERNEL(cdl_qgemm_panel_rows)(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                  const void *aux, int64_t M, float *c, int64_t ldc) {
    const panel_fn *fns = panel_fns(t);
    size_t ab = cdl_qgemm_aux_bytes_avx2(t, K);
    for (int64_t m = 0; m < M; m += 4) {
        int R = (int)(M - m < 4 ? M - m : 4);
        rows4 rw;
        rw.nb = K / 32;
        for (int r = 0; r < R; r++) {
            rw.x[r] = (const char *)x + (size_t)(m + r) * xs;
            rw.aux[r] = ab ? (const float *)((const char *)aux + (size_t)(m + r) * ab) : NULL;
            rw.out[r] = c + (m + r) * ldc;
        }
        fns[R - 1](K, nn, p, &rw);
    }
}

#endif
