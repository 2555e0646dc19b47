/* AVX2 + FMA + F16C primitives. Same contracts as simd_scalar.c; the tails
 * and the ops not vectorised here go through the scalar helpers. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../simd-impl.h"
#include "avx2-util.h"
#include "x86-impl.h"

/* The shared core of exp8 and exp8_nonpos: n = round(x / ln 2) and
 * exp(x - n ln 2) by the polynomial, for x already clamped. */
static inline __m256 exp8_reduced(__m256 xc, __m256 *n_out) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    *n_out = n;
    return p;
}

/* exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 with ln 2 in two
 * parts so r is exact enough; |r| <= 0.35, where the degree-7 Taylor
 * polynomial's truncation error (< 4e-9) is below f32 rounding. 2^n is
 * applied as two factors 2^(n/2) 2^(n - n/2), each a normal float for every
 * n in [-150, 128], so results near overflow and gradual underflow are right. */
static inline __m256 exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.7228394f), lo = _mm256_set1_ps(-103.972084f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n, p = exp8_reduced(xc, &n);
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 e2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, e1), e2);
    res = _mm256_blendv_ps(res, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    res = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* exp8 for x <= 0 (a score minus its row's maximum): the same reduction
 * and polynomial, so the same results down to x = -87.3 (2^n one normal
 * factor there); below, 0 instead of a denormal under 1.2e-38, which a
 * softmax sum (>= 1) cannot see. Without overflow and gradual underflow to
 * handle it costs two thirds of exp8. NaN passes through. */
static inline __m256 exp8_nonpos(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365479f);
    __m256 xc = _mm256_max_ps(x, lo);
    __m256 n, p = exp8_reduced(xc, &n);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    res = _mm256_and_ps(res, _mm256_cmp_ps(x, lo, _CMP_GE_OQ)); /* 0 below lo (and for -inf) */
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* From e = exp(-|x|) in (0, 1] (2^(-|x| log2 e): no overflow to handle,
 * relative error near 3e-7 for |x| < 10, where sigmoid is not 0 or 1 in
 * f32 anyway), then 1 / (1 + e) for x >= 0 and e / (1 + e) below (by x's
 * sign bit); a true division keeps sigmoid(0) = 0.5 and sigmoid(inf) = 1
 * exact. NaN passes through. */
static inline __attribute__((always_inline)) __m256 sigmoid8_with(__m256 x, const bool exact) {
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 na = _mm256_or_ps(x, _mm256_set1_ps(-0.0f));
    __m256 e = exp2_nonpos(_mm256_mul_ps(na, _mm256_set1_ps(1.44269504088896341f)));
    __m256 d = _mm256_add_ps(one, e), r;
    if (exact) {
        r = _mm256_div_ps(one, d);
    } else {
        r = _mm256_rcp_ps(d);
        r = _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
    }
    return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), x);
}

static inline __m256 sigmoid8(__m256 x) { return sigmoid8_with(x, true); }

/* silu and gelu scale x by a sigmoid, where nothing asks for exact 0.5 or
 * 1: the reciprocal from rcp and one Newton step (within ~1.5e-7, cheaper
 * than the division). */
static inline __m256 sigmoid8_scale(__m256 x) { return sigmoid8_with(x, false); }

/* erfc(a) for a >= 0 as t exp(-a^2 + P(t)), t = 1 / (1 + a / 2), the
 * Chebyshev fit of Numerical Recipes (erfcc), relative error < 1.2e-7 over
 * the whole range. */
static inline __m256 erfc8_pos(__m256 a) {
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), a, one));
    static const float c[] = {CDL_ERFC_C};
    __m256 p = _mm256_set1_ps(c[0]);
    for (int i = 1; i < 10; i++) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[i]));
    __m256 arg = _mm256_fnmadd_ps(a, a, p);
    return _mm256_mul_ps(t, exp8(arg));
}

/* gelu(x) = x/2 (1 + erf(z)), z = x / sqrt 2, with erf(z) = z P(z^2) / Q(z^2)
 * on z clamped to [-4, 4] (erf(4) is 1 in f32): a rational minimax fit of
 * degree 5 over 5 in z^2 (absolute error 3.4e-7 in f32 with FMA Horner
 * steps; no exp: half the operations of the erfc form). Where z < -3 the
 * erfc form gives 1 + erf = erfc(-z) instead, so the far negative tail keeps
 * its relative digits; few vectors have such a lane (5% in MiniLM's FFN).
 * 1 + erf is kept >= 0, so gelu keeps x's sign; NaN passes through (the
 * clamps take the constant first). x86-impl.h holds the fits, which
 * unary_avx512.c evaluates in the same order. */
static inline __m256 gelu_erf8(__m256 x) {
    static const float P[] = {CDL_GELU_P}, Q[] = {CDL_GELU_Q};
    __m256 zu = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    __m256 z = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), zu));
    __m256 t = _mm256_mul_ps(z, z), p = _mm256_set1_ps(P[5]), q = _mm256_set1_ps(Q[5]);
    for (int i = 4; i >= 0; i--) {
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(P[i]));
        q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(Q[i]));
    }
    __m256 e = _mm256_div_ps(_mm256_mul_ps(z, p), q);
    __m256 v = _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    __m256 tail = _mm256_cmp_ps(zu, _mm256_set1_ps(-3.0f), _CMP_LT_OQ);
    if (_mm256_movemask_ps(tail))
        v = _mm256_blendv_ps(v, erfc8_pos(_mm256_xor_ps(zu, _mm256_set1_ps(-0.0f))), tail);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), v);
}

/* ---- GEMM ---- */

static void gemm_ukr_avx2(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                          int mr, int nr, bool accumulate) {
    /* C is touched only after the loop: start its cache misses now */
    for (int i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t p = 0; p < k; p++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;
        av = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(av, b0, c10);
        c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(av, b0, c20);
        c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(av, b0, c30);
        c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(av, b0, c40);
        c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(av, b0, c50);
        c51 = _mm256_fmadd_ps(av, b1, c51);
        a += CPU_GEMM_MR;
        b += CPU_GEMM_NR;
    }
    __m256 acc[CPU_GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == CPU_GEMM_MR && nr == CPU_GEMM_NR) {
        for (int i = 0; i < CPU_GEMM_MR; i++) {
            float *ci = c + i * ldc;
            __m256 v0 = acc[i][0], v1 = acc[i][1];
            if (accumulate) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ci));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ci + 8));
            }
            _mm256_storeu_ps(ci, v0);
            _mm256_storeu_ps(ci + 8, v1);
        }
        return;
    }
    float tmp[CPU_GEMM_MR][CPU_GEMM_NR];
    for (int i = 0; i < CPU_GEMM_MR; i++) {
        _mm256_storeu_ps(tmp[i], acc[i][0]);
        _mm256_storeu_ps(tmp[i] + 8, acc[i][1]);
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tmp[i][j] : tmp[i][j];
}

/* B stored as rows of K (a weight seen through a transpose): 8x8 blocks are
 * loaded along K and transposed into the panel. Eight rows at a time, so
 * their cache lines (a weight's rows are often 4-8 KiB apart: one L1 set)
 * stay within the set's 8 ways while both halves of each line are used. */
#define DEF_PACK_T(NAME, LOAD, ESZ)                                                         \
    static void NAME(const char *src, int64_t sn, int64_t kc, float *dst) {              \
        for (int h = 0; h < 2; h++) {                                                     \
            const char *rows = src + h * 8 * sn;                                          \
            for (int64_t p0 = 0; p0 + 8 <= kc; p0 += 8) {                                 \
                __m256 r[8];                                                              \
                for (int i = 0; i < 8; i++) r[i] = LOAD(rows + i * sn + p0 * ESZ);       \
                transpose8(r);                                                            \
                for (int i = 0; i < 8; i++) _mm256_store_ps(dst + (p0 + i) * CPU_GEMM_NR + h * 8, r[i]); \
            }                                                                             \
        }                                                                                 \
    }
DEF_PACK_T(pack_t_f32, LOAD_F32, 4)
DEF_PACK_T(pack_t_f16, LOAD_F16, 2)
DEF_PACK_T(pack_t_bf16, LOAD_BF16, 2)

static void pack_b_avx2(candle_dtype bt, const char *src, int64_t sk, int64_t sn, int64_t kc,
                        int nr, float *dst) {
    int64_t esz = bt == CANDLE_DTYPE_F32 ? 4 : 2;
    if (nr == CPU_GEMM_NR && sk == esz) {
        if (bt == CANDLE_DTYPE_F32) pack_t_f32(src, sn, kc, dst);
        else if (bt == CANDLE_DTYPE_F16) pack_t_f16(src, sn, kc, dst);
        else pack_t_bf16(src, sn, kc, dst);
        int64_t done = kc & ~(int64_t)7;
        cpu_pack_b_generic(bt, src + done * sk, sk, sn, kc - done, nr, dst + done * CPU_GEMM_NR);
        return;
    }
    if (nr == CPU_GEMM_NR && sn == esz) {
        for (int64_t p = 0; p < kc; p++) {
            const char *s = src + p * sk;
            __m256 v0, v1;
            if (bt == CANDLE_DTYPE_F32) v0 = LOAD_F32(s), v1 = LOAD_F32(s + 32);
            else if (bt == CANDLE_DTYPE_F16) v0 = LOAD_F16(s), v1 = LOAD_F16(s + 16);
            else v0 = LOAD_BF16(s), v1 = LOAD_BF16(s + 16);
            _mm256_store_ps(dst + p * CPU_GEMM_NR, v0);
            _mm256_store_ps(dst + p * CPU_GEMM_NR + 8, v1);
        }
        return;
    }
    cpu_pack_b_generic(bt, src, sk, sn, kc, nr, dst);
}

/* One full A micro-panel (MR = 6 rows of contiguous f32, lda floats apart)
 * for the packed GEMM: dst[p * 6 + i] = a[i * lda + p], p < kc. Eight k at
 * a time go through an 8 x 8 transpose (rows 6 and 7 zero) and each column's
 * six floats are stored as 4 + 2, so nothing is written past the panel.
 * Not in the primitive table: fast_matmul.c calls it directly whenever a
 * SIMD table is in use (every non-scalar table implies AVX2). */

void cpu_pack_a6_avx2(const float *a, int64_t lda, int64_t kc, float *dst) {
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
        __m256 r[8];
        for (int i = 0; i < 6; i++) r[i] = _mm256_loadu_ps(a + i * lda + p);
        r[6] = r[7] = _mm256_setzero_ps();
        transpose8(r);
        for (int j = 0; j < 8; j++) {
            float *d = dst + (p + j) * 6;
            _mm_storeu_ps(d, _mm256_castps256_ps128(r[j]));
            _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(r[j], 1));
        }
    }
    for (; p < kc; p++)
        for (int i = 0; i < 6; i++) dst[p * 6 + i] = a[i * lda + p];
}

/* ---- weight-row GEMM (fast_matmul.c's wt path) ----
 * C[m][n] += sum_p w[n][p] at[p][m]: six f32 weight rows broadcast one
 * element at a time against a packed, transposed panel of 16 activation
 * rows, so a weight is converted row by row (no transposition) and the
 * activation side, packed once per product, is the vector side. Not in the
 * primitive table, like cpu_pack_a6_avx2.
 * cpu_wt_ukr_t_avx2 writes C transposed instead (ct[j * ldt + i], i < 16,
 * whole vectors) into a task's scratch, which cpu_wt_ct_out_avx2 writes to
 * C by 8 x 8 transposes, as the avx512 table does (gemm_avx512.c): C rows a
 * power of two floats apart (N = 2048) put the 16 rows in one or two L1
 * sets, and 6-float pieces stored through them missed again and again.
 * The C-transposed tile also issues the next group's weight-row
 * prefetches itself, a share before each block of 16 k, instead of the
 * burst before each tile (the avx2 isa setting, 1 thread, f16 M 64:
 * [5632, 2048] 122 -> 126 GFLOP/s, [32000, 2048] 120 -> 124). */

/* Rows past nw repeat the last one (valid memory); their sums are dropped. */
static inline __attribute__((always_inline)) void wt_tile_avx2(int64_t kc, const float *w, int64_t ldw, int nw,
                                                               const float *at, int nm, float *c, int64_t ldc,
                                                               bool accumulate, const bool ct, const char *pf,
                                                               int64_t pf_stride, int pf_rows, int64_t pf_bytes) {
    const float *w0 = w, *w1 = w + (nw > 1 ? 1 : nw - 1) * ldw, *w2 = w + (nw > 2 ? 2 : nw - 1) * ldw;
    const float *w3 = w + (nw > 3 ? 3 : nw - 1) * ldw, *w4 = w + (nw > 4 ? 4 : nw - 1) * ldw;
    const float *w5 = w + (nw > 5 ? 5 : nw - 1) * ldw;
    /* C is touched only after the loop: start its cache misses now */
    if (!ct)
        for (int i = 0; i < nm; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* blocks of 16 k, each after its share of the prefetches */
    wt_prefetch pfs = wt_prefetch_plan(pf, pf_stride, pf_rows, pf_bytes, kc / 16);
    for (int64_t p = 0; p < kc; p++) {
        if (p % 16 == 0) wt_prefetch_share(&pfs);
        __m256 a0 = _mm256_load_ps(at), a1 = _mm256_load_ps(at + 8), bv;
        bv = _mm256_broadcast_ss(w0 + p);
        c00 = _mm256_fmadd_ps(bv, a0, c00);
        c01 = _mm256_fmadd_ps(bv, a1, c01);
        bv = _mm256_broadcast_ss(w1 + p);
        c10 = _mm256_fmadd_ps(bv, a0, c10);
        c11 = _mm256_fmadd_ps(bv, a1, c11);
        bv = _mm256_broadcast_ss(w2 + p);
        c20 = _mm256_fmadd_ps(bv, a0, c20);
        c21 = _mm256_fmadd_ps(bv, a1, c21);
        bv = _mm256_broadcast_ss(w3 + p);
        c30 = _mm256_fmadd_ps(bv, a0, c30);
        c31 = _mm256_fmadd_ps(bv, a1, c31);
        bv = _mm256_broadcast_ss(w4 + p);
        c40 = _mm256_fmadd_ps(bv, a0, c40);
        c41 = _mm256_fmadd_ps(bv, a1, c41);
        bv = _mm256_broadcast_ss(w5 + p);
        c50 = _mm256_fmadd_ps(bv, a0, c50);
        c51 = _mm256_fmadd_ps(bv, a1, c51);
        at += 16;
    }
    if (ct) {
        /* lane i of cj0 / cj1: C[i] / C[8 + i] of weight row j */
        __m256 v[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
        for (int j = 0; j < 6 && j < nw; j++)
            for (int h = 0; h < 2; h++) {
                float *cj = c + j * ldc + 8 * h;
                _mm256_storeu_ps(cj, accumulate ? _mm256_add_ps(v[j][h], _mm256_loadu_ps(cj)) : v[j][h]);
            }
        return;
    }
    /* lanes are activation rows: transposed, each vector is one C row's
     * six outputs (lanes 6, 7 zero) */
    __m256 z = _mm256_setzero_ps();
    __m256 t[2][8] = {{c00, c10, c20, c30, c40, c50, z, z}, {c01, c11, c21, c31, c41, c51, z, z}};
    transpose8(t[0]);
    transpose8(t[1]);
    for (int i = 0; i < nm; i++) {
        __m256 v = t[i >> 3][i & 7];
        float *ci = c + i * ldc;
        if (nw == 6) {
            __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
            if (accumulate) {
                lo = _mm_add_ps(lo, _mm_loadu_ps(ci));
                hi = _mm_add_ps(hi, _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(ci + 4))));
            }
            _mm_storeu_ps(ci, lo);
            _mm_storel_epi64((__m128i *)(ci + 4), _mm_castps_si128(hi));
            continue;
        }
        float tmp[8];
        _mm256_storeu_ps(tmp, v);
        for (int j = 0; j < nw; j++) ci[j] = accumulate ? ci[j] + tmp[j] : tmp[j];
    }
}

void cpu_wt_ukr_avx2(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                     int64_t ldc, bool accumulate) {
    wt_tile_avx2(kc, w, ldw, nw, at, nm, c, ldc, accumulate, false, NULL, 0, 0, 0);
}

/* ct[j * ldt + i] (+)= the tile's C[i, j] for j < nw and all 16 i (rows past
 * the activation rows come from the packing's zero rows) */
/* one 16-row panel a call (the table's wt_panels): nm is at most 16, and
 * the scratch's rows past it are dropped when written out */
void cpu_wt_ukr_t_avx2(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *ct,
                       int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                       int64_t pf_bytes) {
    (void)nm;
    wt_tile_avx2(kc, w, ldw, nw, at, 16, ct, ldt, accumulate, true, pf, pf_stride, pf_rows, pf_bytes);
}

/* c[i * ldc + j] = ct[j * ldt + i] (+ bias[j]) for i < rows, j < cols, 8 x 8
 * blocks transposed in registers (ct read 8 floats at a time: ldt and the
 * rows it holds are whole multiples of 8 past rows), C rows stored masked
 * past cols; eight rows of C at a time along the columns, so that each line
 * is written whole before it leaves L1 (half-line stores down 64 rows 2048
 * floats apart, one L1 set, evicted each line between its halves). */
void cpu_wt_ct_out_avx2(const float *ct, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                        const float *bias) {
    for (int64_t i0 = 0; i0 < rows; i0 += 8) {
        int ni = rows - i0 < 8 ? (int)(rows - i0) : 8;
        for (int64_t j0 = 0; j0 < cols; j0 += 8) {
            int nj = cols - j0 < 8 ? (int)(cols - j0) : 8;
            __m256i jm = _mm256_cmpgt_epi32(_mm256_set1_epi32(nj), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256 r[8];
            for (int j = 0; j < 8; j++) r[j] = j < nj ? _mm256_loadu_ps(ct + (j0 + j) * ldt + i0) : _mm256_setzero_ps();
            transpose8(r);
            if (bias) {
                __m256 b = _mm256_maskload_ps(bias + j0, jm);
                for (int i = 0; i < ni; i++) r[i] = _mm256_add_ps(r[i], b);
            }
            for (int i = 0; i < ni; i++) {
                if (nj == 8) _mm256_storeu_ps(c + (i0 + i) * ldc + j0, r[i]);
                else _mm256_maskstore_ps(c + (i0 + i) * ldc + j0, jm, r[i]);
            }
        }
    }
}

/* dst[p * 16 + i] = a[i * lda + p] for i < rows, 0 for rows <= i < 16; dst
 * 32-byte aligned. Eight k at a time through 8 x 8 transposes. */
void cpu_pack_at16_avx2(const float *a, int64_t lda, int rows, int64_t kc, float *dst) {
    for (int h = 0; h < 2; h++) {
        int rh = rows - 8 * h < 0 ? 0 : rows - 8 * h > 8 ? 8 : rows - 8 * h;
        const float *ah = a + 8 * h * lda;
        int64_t p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = i < rh ? _mm256_loadu_ps(ah + i * lda + p) : _mm256_setzero_ps();
            transpose8(r);
            for (int j = 0; j < 8; j++) _mm256_store_ps(dst + (p + j) * 16 + 8 * h, r[j]);
        }
        for (; p < kc; p++)
            for (int i = 0; i < 8; i++) dst[p * 16 + 8 * h + i] = i < rh ? ah[i * lda + p] : 0.0f;
    }
}

/* ---- matrix-vector ----
 * f32 rows: eight (then four) rows per pass over x, the hardware prefetcher
 * streaming them. Half-precision rows longer than DOT_H_STREAM_MAX bytes:
 * four rows per pass, converted (F16C) as they stream, which takes enough
 * of the loop that the hardware prefetcher falls behind; prefetching the
 * next four rows (one group ahead, 16-32 KiB) keeps the loads in flight:
 * out of cache, +15-30% on 1 and 2 threads (for f32 rows the same prefetch
 * measured 5-20% slower, so it is off). Shorter half-precision rows: one
 * at a time, below. */

#define DEF_DOT_ROWS(NAME, LOAD, ESZ, WT)                                                    \
    static void NAME(int64_t k, const char *w, size_t ws, int64_t n_rows, const float *x,   \
                     float *out, int64_t os) {                                             \
        int64_t r = 0;                                                                     \
        for (; r + 4 <= n_rows; r += 4) {                                                  \
            const char *w0 = w + r * ws, *w1 = w0 + ws, *w2 = w1 + ws, *w3 = w2 + ws;      \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                    \
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                                     \
            const char *pf = w3 + ws;                                                      \
            int64_t i = 0;                                                                 \
            for (; i + 16 <= k; i += 16) {                                                 \
                if (ESZ == 2) {                                                            \
                    _mm_prefetch(pf + i * ESZ, _MM_HINT_T0);                               \
                    _mm_prefetch(pf + ws + i * ESZ, _MM_HINT_T0);                          \
                    _mm_prefetch(pf + 2 * ws + i * ESZ, _MM_HINT_T0);                      \
                    _mm_prefetch(pf + 3 * ws + i * ESZ, _MM_HINT_T0);                      \
                }                                                                          \
                __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);       \
                a0 = _mm256_fmadd_ps(LOAD(w0 + i * ESZ), x0, a0);                          \
                b0 = _mm256_fmadd_ps(LOAD(w0 + (i + 8) * ESZ), x1, b0);                    \
                a1 = _mm256_fmadd_ps(LOAD(w1 + i * ESZ), x0, a1);                          \
                b1 = _mm256_fmadd_ps(LOAD(w1 + (i + 8) * ESZ), x1, b1);                    \
                a2 = _mm256_fmadd_ps(LOAD(w2 + i * ESZ), x0, a2);                          \
                b2 = _mm256_fmadd_ps(LOAD(w2 + (i + 8) * ESZ), x1, b2);                    \
                a3 = _mm256_fmadd_ps(LOAD(w3 + i * ESZ), x0, a3);                          \
                b3 = _mm256_fmadd_ps(LOAD(w3 + (i + 8) * ESZ), x1, b3);                    \
            }                                                                              \
            for (; i + 8 <= k; i += 8) {                                                   \
                __m256 x0 = _mm256_loadu_ps(x + i);                                        \
                a0 = _mm256_fmadd_ps(LOAD(w0 + i * ESZ), x0, a0);                          \
                a1 = _mm256_fmadd_ps(LOAD(w1 + i * ESZ), x0, a1);                          \
                a2 = _mm256_fmadd_ps(LOAD(w2 + i * ESZ), x0, a2);                          \
                a3 = _mm256_fmadd_ps(LOAD(w3 + i * ESZ), x0, a3);                          \
            }                                                                              \
            float s0 = hsum(_mm256_add_ps(a0, b0)), s1 = hsum(_mm256_add_ps(a1, b1));      \
            float s2 = hsum(_mm256_add_ps(a2, b2)), s3 = hsum(_mm256_add_ps(a3, b3));      \
            for (; i < k; i++) {                                                           \
                s0 += cdl_load_f32(WT, w0 + i * ESZ) * x[i];                                      \
                s1 += cdl_load_f32(WT, w1 + i * ESZ) * x[i];                                      \
                s2 += cdl_load_f32(WT, w2 + i * ESZ) * x[i];                                      \
                s3 += cdl_load_f32(WT, w3 + i * ESZ) * x[i];                                      \
            }                                                                              \
            out[r * os] = s0;                                                              \
            out[(r + 1) * os] = s1;                                                        \
            out[(r + 2) * os] = s2;                                                        \
            out[(r + 3) * os] = s3;                                                        \
        }                                                                                  \
        for (; r < n_rows; r++) {                                                          \
            const char *w0 = w + r * ws;                                                   \
            __m256 a0 = _mm256_setzero_ps(), b0 = a0;                                      \
            int64_t i = 0;                                                                 \
            for (; i + 16 <= k; i += 16) {                                                 \
                a0 = _mm256_fmadd_ps(LOAD(w0 + i * ESZ), _mm256_loadu_ps(x + i), a0);      \
                b0 = _mm256_fmadd_ps(LOAD(w0 + (i + 8) * ESZ), _mm256_loadu_ps(x + i + 8), b0); \
            }                                                                              \
            for (; i + 8 <= k; i += 8)                                                     \
                a0 = _mm256_fmadd_ps(LOAD(w0 + i * ESZ), _mm256_loadu_ps(x + i), a0);      \
            float s0 = hsum(_mm256_add_ps(a0, b0));                                        \
            for (; i < k; i++) s0 += cdl_load_f32(WT, w0 + i * ESZ) * x[i];                       \
            out[r * os] = s0;                                                              \
        }                                                                                  \
    }
DEF_DOT_ROWS(dot_rows_f32, LOAD_F32, 4, CANDLE_DTYPE_F32)
DEF_DOT_ROWS(dot_rows4_f16, LOAD_F16, 2, CANDLE_DTYPE_F16)
DEF_DOT_ROWS(dot_rows4_bf16, LOAD_BF16, 2, CANDLE_DTYPE_BF16)

/* Eight f32 rows per pass: one load of x feeds eight FMAs, so the loop
 * spends its load slots on the weights (against four rows: +3-18% on the
 * bench's matrix-vector shapes, 1 and 2 threads, in and out of cache). */
static int64_t dot_rows8_f32(int64_t k, const char *w, size_t ws, int64_t n_rows, const float *x,
                             float *out, int64_t os) {
    int64_t r = 0;
    for (; r + 8 <= n_rows; r += 8) {
        const float *wr[8];
        for (int j = 0; j < 8; j++) wr[j] = (const float *)(w + (r + j) * ws);
        __m256 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= k; i += 8) {
            __m256 xv = _mm256_loadu_ps(x + i);
            for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[j] + i), xv, acc[j]);
        }
        for (int j = 0; j < 8; j++) {
            float sj = hsum(acc[j]);
            for (int64_t t = i; t < k; t++) sj += wr[j][t] * x[t];
            out[(r + j) * os] = sj;
        }
    }
    return r;
}

/* Short half-precision rows one at a time, in address order, with a
 * software prefetch DOT_H_PREFETCH bytes ahead on the row (and on into the
 * next ones). A weight's rows are contiguous, so this reads the matrix as
 * one sequential stream, where four rows per pass read four streams of only
 * a few lines each (SmolLM2's K = 576 rows are 1152 bytes, 18 lines), which
 * the hardware prefetcher followed less well. Out of cache, 2 threads:
 * K = 576 (tied output 49152 x 576, 960 x 576) 20-26 -> 27-31 GB/s, SmolLM2
 * F16 generation 55 -> 70 tokens/s; K = 1024 equal; K = 1536 to 5632 the
 * four streams win (30-37 against 24-26 GB/s), hence the bound. */
#ifndef DOT_H_PREFETCH
#define DOT_H_PREFETCH 1024
#endif
#ifndef DOT_H_STREAM_MAX
#define DOT_H_STREAM_MAX 2048
#endif
#define DEF_DOT_ROW_STREAM(NAME, LOAD, WT)                                                  \
    static void NAME(int64_t k, const char *w, size_t ws, int64_t n_rows, const float *x,  \
                     float *out, int64_t os) {                                            \
        for (int64_t r = 0; r < n_rows; r++) {                                            \
            const char *w0 = w + r * (int64_t)ws;                                         \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                   \
            int64_t i = 0;                                                                \
            for (; i + 32 <= k; i += 32) {                                                \
                _mm_prefetch(w0 + i * 2 + DOT_H_PREFETCH, _MM_HINT_T0);                   \
                a0 = _mm256_fmadd_ps(LOAD(w0 + i * 2), _mm256_loadu_ps(x + i), a0);       \
                a1 = _mm256_fmadd_ps(LOAD(w0 + i * 2 + 16), _mm256_loadu_ps(x + i + 8), a1); \
                a2 = _mm256_fmadd_ps(LOAD(w0 + i * 2 + 32), _mm256_loadu_ps(x + i + 16), a2); \
                a3 = _mm256_fmadd_ps(LOAD(w0 + i * 2 + 48), _mm256_loadu_ps(x + i + 24), a3); \
            }                                                                             \
            for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(LOAD(w0 + i * 2), _mm256_loadu_ps(x + i), a0); \
            float s0 = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); \
            for (; i < k; i++) s0 += cdl_load_f32(WT, w0 + i * 2) * x[i];              \
            out[r * os] = s0;                                                             \
        }                                                                                 \
    }
DEF_DOT_ROW_STREAM(dot_rows_f16, LOAD_F16, CANDLE_DTYPE_F16)
DEF_DOT_ROW_STREAM(dot_rows_bf16, LOAD_BF16, CANDLE_DTYPE_BF16)

static void dot_rows_avx2(candle_dtype wt, int64_t k, const void *w, size_t w_stride,
                          int64_t n_rows, const float *x, float *out, int64_t out_stride) {
    const char *wp = w;
    if (wt == CANDLE_DTYPE_F32) {
        int64_t done = dot_rows8_f32(k, wp, w_stride, n_rows, x, out, out_stride);
        dot_rows_f32(k, wp + done * (int64_t)w_stride, w_stride, n_rows - done, x, out + done * out_stride, out_stride);
    } else if (k * 2 > DOT_H_STREAM_MAX) {
        if (wt == CANDLE_DTYPE_F16) dot_rows4_f16(k, wp, w_stride, n_rows, x, out, out_stride);
        else dot_rows4_bf16(k, wp, w_stride, n_rows, x, out, out_stride);
    } else if (wt == CANDLE_DTYPE_F16) {
        dot_rows_f16(k, wp, w_stride, n_rows, x, out, out_stride);
    } else {
        dot_rows_bf16(k, wp, w_stride, n_rows, x, out, out_stride);
    }
}

/* ---- small-M GEMM on unpacked weight rows: a 4 x 3 tile of dot products,
 * twelve 8-lane accumulators, seven loads per twelve FMAs. Rows past mr / nr
 * repeat the last valid one and are not stored. ---- */

#define DEF_GEMM_DOT(NAME, LOAD, ESZ, WT)                                                    \
    static void NAME(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw,     \
                     float *c, int64_t ldc, int mr, int nr, bool accumulate) {              \
        const float *a0 = a, *a1 = a + (mr > 1 ? 1 : 0) * lda;                             \
        const float *a2 = a + (mr > 2 ? 2 : mr - 1) * lda, *a3 = a + (mr > 3 ? 3 : mr - 1) * lda; \
        const char *w0 = w, *w1 = w + (nr > 1 ? 1 : 0) * ldw, *w2 = w + (nr > 2 ? 2 : nr - 1) * ldw; \
        __m256 s00 = _mm256_setzero_ps(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00; \
        __m256 s20 = s00, s21 = s00, s22 = s00, s30 = s00, s31 = s00, s32 = s00;             \
        int64_t p = 0;                                                                     \
        for (; p + 8 <= k; p += 8) {                                                       \
            __m256 b0 = LOAD(w0 + p * ESZ), b1 = LOAD(w1 + p * ESZ), b2 = LOAD(w2 + p * ESZ); \
            __m256 x = _mm256_loadu_ps(a0 + p);                                            \
            s00 = _mm256_fmadd_ps(x, b0, s00);                                             \
            s01 = _mm256_fmadd_ps(x, b1, s01);                                             \
            s02 = _mm256_fmadd_ps(x, b2, s02);                                             \
            x = _mm256_loadu_ps(a1 + p);                                                   \
            s10 = _mm256_fmadd_ps(x, b0, s10);                                             \
            s11 = _mm256_fmadd_ps(x, b1, s11);                                             \
            s12 = _mm256_fmadd_ps(x, b2, s12);                                             \
            x = _mm256_loadu_ps(a2 + p);                                                   \
            s20 = _mm256_fmadd_ps(x, b0, s20);                                             \
            s21 = _mm256_fmadd_ps(x, b1, s21);                                             \
            s22 = _mm256_fmadd_ps(x, b2, s22);                                             \
            x = _mm256_loadu_ps(a3 + p);                                                   \
            s30 = _mm256_fmadd_ps(x, b0, s30);                                             \
            s31 = _mm256_fmadd_ps(x, b1, s31);                                             \
            s32 = _mm256_fmadd_ps(x, b2, s32);                                             \
        }                                                                                  \
        float r[4][3] = {{hsum(s00), hsum(s01), hsum(s02)}, {hsum(s10), hsum(s11), hsum(s12)}, \
                         {hsum(s20), hsum(s21), hsum(s22)}, {hsum(s30), hsum(s31), hsum(s32)}}; \
        const float *ar[4] = {a0, a1, a2, a3};                                             \
        const char *wr[3] = {w0, w1, w2};                                                  \
        for (; p < k; p++)                                                                 \
            for (int i = 0; i < 4; i++)                                                    \
                for (int j = 0; j < 3; j++) r[i][j] += ar[i][p] * cdl_load_f32(WT, wr[j] + p * ESZ); \
        for (int i = 0; i < mr; i++)                                                       \
            for (int j = 0; j < nr; j++)                                                   \
                c[i * ldc + j] = accumulate ? c[i * ldc + j] + r[i][j] : r[i][j];          \
    }
DEF_GEMM_DOT(gemm_dot_f32, LOAD_F32, 4, CANDLE_DTYPE_F32)
DEF_GEMM_DOT(gemm_dot_f16, LOAD_F16, 2, CANDLE_DTYPE_F16)
DEF_GEMM_DOT(gemm_dot_bf16, LOAD_BF16, 2, CANDLE_DTYPE_BF16)

static void gemm_dot_avx2(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw,
                          candle_dtype wt, float *c, int64_t ldc, int mr, int nr, bool accumulate) {
    if (wt == CANDLE_DTYPE_F32) gemm_dot_f32(k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
    else if (wt == CANDLE_DTYPE_F16) gemm_dot_f16(k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
    else gemm_dot_bf16(k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
}

static void to_f32_avx2(candle_dtype t, const void *src, float *dst, int64_t n) {
    const char *s = src;
    int64_t i = 0;
    if (t == CANDLE_DTYPE_F32) {
        memmove(dst, src, (size_t)n * 4);
        return;
    }
    if (t == CANDLE_DTYPE_F16)
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LOAD_F16(s + i * 2));
    else
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, LOAD_BF16(s + i * 2));
    for (; i < n; i++) dst[i] = cdl_load_f32(t, s + i * 2);
}

/* ---- elementwise ---- */

static inline __attribute__((always_inline)) __m256 unary8(candle_op op, __m256 x, __m256 p0, __m256 p1) {
    switch (op) {
    case CANDLE_OP_NEG: return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    case CANDLE_OP_ABS: return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    case CANDLE_OP_EXP: return exp8(x);
    case CANDLE_OP_SQRT: return _mm256_sqrt_ps(x);
    case CANDLE_OP_RSQRT: return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(x));
    case CANDLE_OP_SIGMOID: return sigmoid8(x);
    case CANDLE_OP_RELU: return _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
    case CANDLE_OP_SILU: return _mm256_mul_ps(x, sigmoid8_scale(x));
    case CANDLE_OP_GELU_ERF: return gelu_erf8(x);
    case CANDLE_OP_GELU_TANH: {
        /* 0.5 x (1 + tanh u) = x sigmoid(2u): no cancellation near u = 0 */
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 u = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x);
        return _mm256_mul_ps(x, sigmoid8_scale(_mm256_mul_ps(u, _mm256_set1_ps(1.5957691216057308f))));
    }
    case CANDLE_OP_AFFINE: return _mm256_fmadd_ps(x, p0, p1);
    case CANDLE_OP_CLAMP: return _mm256_min_ps(_mm256_max_ps(x, p0), p1);
    default: return x;
    }
}

static bool unary_vectorised(candle_op op) {
    return op != CANDLE_OP_LOG && op != CANDLE_OP_SIN && op != CANDLE_OP_COS && op != CANDLE_OP_TANH;
}

static void unary_avx2(candle_op op, const float *x, float *y, int64_t n, const double *p) {
    int64_t i = 0;
    if (unary_vectorised(op)) {
        __m256 p0 = _mm256_set1_ps((float)p[0]), p1 = _mm256_set1_ps((float)p[1]);
        /* the costly ops get loops of their own, so no switch (and no
         * reloaded constant) sits in the loop */
#define UNARY_LOOP(OP) \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, unary8(OP, _mm256_loadu_ps(x + i), p0, p1))
        switch (op) {
        case CANDLE_OP_SILU: UNARY_LOOP(CANDLE_OP_SILU); break;
        case CANDLE_OP_GELU_TANH: UNARY_LOOP(CANDLE_OP_GELU_TANH); break;
        case CANDLE_OP_GELU_ERF: UNARY_LOOP(CANDLE_OP_GELU_ERF); break;
        case CANDLE_OP_SIGMOID: UNARY_LOOP(CANDLE_OP_SIGMOID); break;
        case CANDLE_OP_EXP: UNARY_LOOP(CANDLE_OP_EXP); break;
        default: UNARY_LOOP(op); break;
        }
#undef UNARY_LOOP
        /* the tail through the same vector code keeps results independent of n */
        if (i < n) {
            float bx[8] = {0}, by[8];
            memcpy(bx, x + i, sizeof(float) * (size_t)(n - i));
            _mm256_storeu_ps(by, unary8(op, _mm256_loadu_ps(bx), p0, p1));
            memcpy(y + i, by, sizeof(float) * (size_t)(n - i));
        }
        return;
    }
    for (; i < n; i++) y[i] = cpu_unary1(op, x[i], p);
}

static inline bool binary8(candle_op op, __m256 a, __m256 b, __m256 *out) {
    switch (op) {
    case CANDLE_OP_ADD: *out = _mm256_add_ps(a, b); return true;
    case CANDLE_OP_SUB: *out = _mm256_sub_ps(a, b); return true;
    case CANDLE_OP_MUL: *out = _mm256_mul_ps(a, b); return true;
    case CANDLE_OP_DIV: *out = _mm256_div_ps(a, b); return true;
    case CANDLE_OP_MAXIMUM:
    case CANDLE_OP_MINIMUM: {
        /* a when a wins or is NaN, else b (NaN in b propagates as b) */
        __m256 win = op == CANDLE_OP_MAXIMUM ? _mm256_cmp_ps(a, b, _CMP_GT_OQ) : _mm256_cmp_ps(a, b, _CMP_LT_OQ);
        win = _mm256_or_ps(win, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
        *out = _mm256_blendv_ps(b, a, win);
        return true;
    }
    default: return false;
    }
}

static void binary_avx2(candle_op op, const float *a, const float *b, int64_t b_step, float *y,
                        int64_t n) {
    int64_t i = 0;
    __m256 t;
    if (binary8(op, _mm256_setzero_ps(), _mm256_setzero_ps(), &t)) {
        if (b_step == 0) {
            __m256 bv = _mm256_set1_ps(b[0]);
            for (; i + 8 <= n; i += 8) {
                binary8(op, _mm256_loadu_ps(a + i), bv, &t);
                _mm256_storeu_ps(y + i, t);
            }
        } else {
            for (; i + 8 <= n; i += 8) {
                binary8(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), &t);
                _mm256_storeu_ps(y + i, t);
            }
        }
    }
    for (; i < n; i++) y[i] = cpu_binary1(op, a[i], b[i * b_step]);
}

/* ---- rows: softmax, rms_norm ---- */

static void softmax_avx2(const float *x, float *y, int64_t n, bool log) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float m = hmax(mv);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m256 mb = _mm256_set1_ps(m), sv = _mm256_setzero_ps();
    float tail[8];
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
        sv = _mm256_add_ps(sv, e);
        if (!log) _mm256_storeu_ps(y + i, e);
    }
    double sum = hsum(sv);
    if (i < n) {
        float bx[8];
        for (int j = 0; j < 8; j++) bx[j] = i + j < n ? x[i + j] : -INFINITY;
        _mm256_storeu_ps(tail, exp8(_mm256_sub_ps(_mm256_loadu_ps(bx), mb)));
        for (int64_t j = i; j < n; j++) {
            sum += tail[j - i];
            if (!log) y[j] = tail[j - i];
        }
    }
    if (log) {
        __m256 ls = _mm256_set1_ps((float)(m + logf((float)sum)));
        for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), ls));
        for (; i < n; i++) y[i] = x[i] - _mm256_cvtss_f32(ls);
        return;
    }
    __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; i++) y[i] *= _mm256_cvtss_f32(inv);
}

/* Four double accumulators: with two, the FMA latency chain (not the
 * conversions) set the pace of the sum of squares. */
static void rms_norm_avx2(const float *x, const float *w, float *y, int64_t n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v = _mm256_loadu_ps(x + i), u = _mm256_loadu_ps(x + i + 8);
        __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        __m256d c = _mm256_cvtps_pd(_mm256_castps256_ps128(u)), d = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
        s0 = _mm256_fmadd_pd(a, a, s0);
        s1 = _mm256_fmadd_pd(b, b, s1);
        s2 = _mm256_fmadd_pd(c, c, s2);
        s3 = _mm256_fmadd_pd(d, d, s3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    double parts[4];
    _mm256_storeu_pd(parts, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    double ss = (parts[0] + parts[1]) + (parts[2] + parts[3]);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)(n ? n : 1) + eps));
    __m256 rv = _mm256_set1_ps(r);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = x[i] * r * (w ? w[i] : 1.0f);
}

static inline __m256d sum4_pd(__m256d a, __m256d b, __m256d c, __m256d d) {
    return _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d));
}

static inline double hsum_pd(__m256d v) {
    double p[4];
    _mm256_storeu_pd(p, v);
    return (p[0] + p[1]) + (p[2] + p[3]);
}

/* The scalar entry's arithmetic with the double sums in 16 lanes (one
 * serial double chain was most of the op's time); the vector per-element
 * pass multiplies and adds without fusing, as the scalar code. */
static void layer_norm_avx2(const float *x, const float *r, const float *w, const float *b, float *y, int64_t n,
                            double eps) {
    const float *v = x;
    int64_t i = 0;
    if (r) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i)));
        for (; i < n; i++) y[i] = x[i] + r[i];
        v = y;
    }
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(v + i), c = _mm256_loadu_ps(v + i + 8);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(c)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)));
    }
    double sum = hsum_pd(sum4_pd(s0, s1, s2, s3));
    for (; i < n; i++) sum += v[i];
    double mean = sum / (double)n;
    __m256d mv = _mm256_set1_pd(mean);
    s0 = s1 = s2 = s3 = _mm256_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(v + i), c = _mm256_loadu_ps(v + i + 8);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), mv);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), mv);
        __m256d d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(c)), mv);
        __m256d d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)), mv);
        s0 = _mm256_fmadd_pd(d0, d0, s0);
        s1 = _mm256_fmadd_pd(d1, d1, s1);
        s2 = _mm256_fmadd_pd(d2, d2, s2);
        s3 = _mm256_fmadd_pd(d3, d3, s3);
    }
    double ss = hsum_pd(sum4_pd(s0, s1, s2, s3));
    for (; i < n; i++) ss += ((double)v[i] - mean) * ((double)v[i] - mean);
    float m = (float)mean, s = (float)(1.0 / sqrt(ss / (double)n + eps));
    __m256 m8 = _mm256_set1_ps(m), s8 = _mm256_set1_ps(s);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + i), m8), s8);
        if (w) t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
        if (b) t = _mm256_add_ps(t, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) {
        float t = (v[i] - m) * s;
        y[i] = t * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void scale_axpy_avx2(float *y, float s, float w, const float *v, int64_t n) {
    __m256 sv = _mm256_set1_ps(s), wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(y + i), sv, _mm256_mul_ps(wv, _mm256_loadu_ps(v + i))));
    for (; i < n; i++) y[i] = y[i] * s + w * v[i];
}

/* exp of one vector of x - m: exp8_nonpos when no lane is positive, as for
 * scores minus their row maximum, else the full exp8. */
static inline __m256 exp8_shifted(__m256 d) {
    bool pos = _mm256_movemask_ps(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_GT_OQ)) != 0;
    return pos ? exp8(d) : exp8_nonpos(d);
}

/* exp8_nonpos on EXP_WAYS vectors step by step: one vector's dependency
 * chain (~60 cycles) would leave the FMA units idle, and the out-of-order
 * window does not reach far enough into the next iterations. */
#define EXP_WAYS 4
static inline void exp8_nonpos_n(__m256 *x) {
    const __m256 lo = _mm256_set1_ps(-87.3365479f);
    __m256 xc[EXP_WAYS], n[EXP_WAYS], r[EXP_WAYS], p[EXP_WAYS];
    for (int k = 0; k < EXP_WAYS; k++) xc[k] = _mm256_max_ps(x[k], lo);
    for (int k = 0; k < EXP_WAYS; k++)
        n[k] = _mm256_round_ps(_mm256_mul_ps(xc[k], _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    for (int k = 0; k < EXP_WAYS; k++) r[k] = _mm256_fnmadd_ps(n[k], _mm256_set1_ps(0.693359375f), xc[k]);
    for (int k = 0; k < EXP_WAYS; k++) r[k] = _mm256_fnmadd_ps(n[k], _mm256_set1_ps(-2.12194440e-4f), r[k]);
    static const float c[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    for (int k = 0; k < EXP_WAYS; k++) p[k] = _mm256_set1_ps(1.0f / 5040);
    for (int i = 0; i < 7; i++)
        for (int k = 0; k < EXP_WAYS; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(c[i]));
    for (int k = 0; k < EXP_WAYS; k++) {
        __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n[k]), _mm256_set1_epi32(127)), 23);
        __m256 res = _mm256_mul_ps(p[k], _mm256_castsi256_ps(e));
        res = _mm256_and_ps(res, _mm256_cmp_ps(x[k], lo, _CMP_GE_OQ));
        x[k] = _mm256_blendv_ps(res, x[k], _mm256_cmp_ps(x[k], x[k], _CMP_UNORD_Q));
    }
}

/* The tail through the same vector code as the body, like unary_avx2. */
static float exp_sum_avx2(float *x, int64_t n, float m) {
    __m256 mv = _mm256_set1_ps(m), sv = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * EXP_WAYS <= n; i += 8 * EXP_WAYS) {
        __m256 d[EXP_WAYS], any = _mm256_setzero_ps();
        for (int k = 0; k < EXP_WAYS; k++) {
            d[k] = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * k), mv);
            any = _mm256_or_ps(any, _mm256_cmp_ps(d[k], _mm256_setzero_ps(), _CMP_GT_OQ));
        }
        if (_mm256_movemask_ps(any)) {
            for (int k = 0; k < EXP_WAYS; k++) d[k] = exp8(d[k]);
        } else {
            exp8_nonpos_n(d);
        }
        for (int k = 0; k < EXP_WAYS; k++) {
            _mm256_storeu_ps(x + i + 8 * k, d[k]);
            sv = _mm256_add_ps(sv, d[k]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8_shifted(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        sv = _mm256_add_ps(sv, e);
    }
    float s = hsum(sv);
    if (i < n) {
        float b[8];
        for (int j = 0; j < 8; j++) b[j] = i + j < n ? x[i + j] : -INFINITY;
        _mm256_storeu_ps(b, exp8_shifted(_mm256_sub_ps(_mm256_loadu_ps(b), mv)));
        for (int64_t j = i; j < n; j++) s += x[j] = b[j - i];
    }
    return s;
}

const cpu_simd cpu_simd_avx2 = {
    .name = "avx2",
    .gemm_ukr = gemm_ukr_avx2,
    .gemm_dot = gemm_dot_avx2,
    .dot_rows = dot_rows_avx2,
    .to_f32 = to_f32_avx2,
    .pack_b = pack_b_avx2,
    .unary = unary_avx2,
    .binary = binary_avx2,
    .softmax = softmax_avx2,
    .rms_norm = rms_norm_avx2,
    .layer_norm = layer_norm_avx2,
    .dot = dot_avx2,
    .scale_axpy = scale_axpy_avx2,
    .exp_sum = exp_sum_avx2,
    .pack_a6 = cpu_pack_a6_avx2,
    .pack_at16 = cpu_pack_at16_avx2,
    .wt_ukr = cpu_wt_ukr_avx2,
    .wt_panels = 1,
    .wt_ukr_t = cpu_wt_ukr_t_avx2,
    .wt_ct_out = cpu_wt_ct_out_avx2,
};
