/* AVX-512 tile primitives of the blocked flash attention (contracts in
 * attention-impl.h): the two products and the online-softmax step on zmm,
 * decoding scores straight from the key rows where d is a multiple of 16,
 * the rest (key packing, other decoding scores, the paged kernel's max /
 * sub / sum) from the AVX2 table.
 *   scores: 6 q rows (broadcast) x 4 panels of 16 transposed keys (64
 *           keys, one zmm a panel) over d: 24 accumulators, four vector
 *           loads and six broadcasts per 24 FMAs;
 *   accum:  6 p rows (broadcast) x 64 columns of v rows over the tile's
 *           keys, the accumulators starting from o * corr; a tail of dv
 *           takes masked loads (no copy per row count); accum_rows the
 *           same on f16/bf16 value rows, converted in registers;
 *   scores_rows: up to 4 q rows x 4 keys, each key row converted once for
 *           all the rows, 16 accumulators (one zmm a score) along d.
 * Each lane does the AVX2 table's arithmetic in the same order (the same
 * FMAs from zero along d or along the keys, the same 2^x, the row sums
 * kept per column mod 16 and reduced by the same tree), so the outputs
 * are those of the AVX2 table bit for bit: the avx2 isa setting changes no
 * result, only the speed. */
#include <immintrin.h>
#include <stddef.h>
#include <math.h>
#include <string.h>

#include "../attention-impl.h"
#include "avx2-util.h"
#include "quant/quant-impl.h" /* block_q8_0 */

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- scores ---- */

/* mr rows x np panels (mr <= 6, np <= 4, constants after inlining). */
static ALWAYS_INLINE void scores_tile(const float *q, int64_t lda, const int mr, const int np, int64_t d,
                                      const float *kt, float *s, int64_t lds) {
    __m512 c[6][4];
    const int64_t ps = d * ATTN_NR; /* floats between panels */
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < np; n++) c[i][n] = _mm512_setzero_ps();
    for (int64_t p = 0; p < d; p++) {
        __m512 b[4];
        for (int n = 0; n < np; n++) b[n] = _mm512_loadu_ps(kt + n * ps + p * ATTN_NR);
        for (int i = 0; i < mr; i++) {
            __m512 a = _mm512_set1_ps(q[i * lda + p]);
            for (int n = 0; n < np; n++) c[i][n] = _mm512_fmadd_ps(a, b[n], c[i][n]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < np; n++) _mm512_storeu_ps(s + i * lds + n * ATTN_NR, c[i][n]);
}

#define SCORES_NP(MR)                                                                \
    switch (np) {                                                                    \
    case 1: scores_tile(qi, lda, MR, 1, d, panel, si + j0, lds); break;              \
    case 2: scores_tile(qi, lda, MR, 2, d, panel, si + j0, lds); break;              \
    case 3: scores_tile(qi, lda, MR, 3, d, panel, si + j0, lds); break;              \
    default: scores_tile(qi, lda, MR, 4, d, panel, si + j0, lds); break;             \
    }

static void scores_avx512(const float *q, int64_t lda, int64_t r, int64_t d, const float *kt, int64_t nk, float *s,
                          int64_t lds) {
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t i = 0; i < r; i += 6) {
        const float *qi = q + i * lda;
        float *si = s + i * lds;
        for (int64_t j0 = 0; j0 < nkp; j0 += 4 * ATTN_NR) {
            const float *panel = kt + (j0 / ATTN_NR) * d * ATTN_NR;
            int np = nkp - j0 < 4 * ATTN_NR ? (int)((nkp - j0) / ATTN_NR) : 4;
            switch (r - i < 6 ? r - i : 6) {
            case 1: SCORES_NP(1); break;
            case 2: SCORES_NP(2); break;
            case 3: SCORES_NP(3); break;
            case 4: SCORES_NP(4); break;
            case 5: SCORES_NP(5); break;
            default: SCORES_NP(6); break;
            }
        }
    }
}

/* ---- accum ---- */

/* Elements e.. e + 15 of a row of type T (lanes `m`; the rest zero, nothing
 * past them read), as f32. q8_0 (e a multiple of 16, all lanes): codes
 * times the block's scale, the exact products its to_f32 gives. */
static ALWAYS_INLINE __m512 ld16_t(const candle_dtype T, const char *row, int64_t e, __mmask16 m) {
    if (T == CANDLE_DTYPE_Q8_0) {
        const char *b = row + (e / 32) * (int64_t)sizeof(block_q8_0);
        uint16_t d;
        memcpy(&d, b + offsetof(block_q8_0, d), 2);
        __m128i q = _mm_loadu_si128((const __m128i *)(b + offsetof(block_q8_0, qs) + e % 32));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(d)));
    }
    if (T == CANDLE_DTYPE_F32) return _mm512_maskz_loadu_ps(m, row + e * 4);
    __m256i h = _mm256_maskz_loadu_epi16(m, row + e * 2);
    return T == CANDLE_DTYPE_F16 ? _mm512_cvtph_ps(h)
                                 : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Decoding reads each key and value row once, from memory. Where the
 * CPU's streams take T0 prefetches (candle_stream_prefetch's kind: not
 * AMD, whose decoding touches the whole tile first, fast_attention.c's
 * touch_kv), scores_rows and accum_rows prefetch the row ATTN_PF_ROWS keys
 * ahead of the one they read, so its misses overlap the products of the
 * rows before it. Ice Lake Xeon, 30 layers of f16 KV at 2048 keys (9 / 3
 * heads, 2 threads), the attention node against touch_kv, alternating:
 * 112-172 against 127-191 us, faster in 11 rounds of 12; SmolLM2-135M Q4_0
 * decoding at 2048 tokens of context (candle bench -d 2048, f16 KV)
 * 91-99 -> 101-114 t/s. Reads only: the same bits. */
#define ATTN_PF_ROWS 32

/* mr rows x nc zmm columns (mr <= 6, nc <= 4, constants after inlining);
 * the last column loads lanes `last` of v (a tail of dv: the rest are
 * zeros, never read beyond the row), o's padding up to the next 16 is
 * scratch. v rows of type T (f32 for accum), sv bytes apart, converted in
 * registers (exactly: the products are those of accum on f32 rows). */
static ALWAYS_INLINE void accum_tile(const float *p, int64_t ldp, const int mr, const int nc, const float *corr,
                                     const candle_dtype T, const char *v, int64_t sv, int64_t n0, int64_t nk,
                                     __mmask16 last, float *o, int64_t ldo, int64_t pf) {
    __m512 c[6][4];
    for (int i = 0; i < mr; i++) {
        __m512 k = _mm512_set1_ps(corr[i]);
        for (int n = 0; n < nc; n++) c[i][n] = _mm512_mul_ps(k, _mm512_loadu_ps(o + i * ldo + n * 16));
    }
    for (int64_t j = 0; j < nk; j++) {
        const char *vj = v + j * sv;
        if (pf && j + ATTN_PF_ROWS < nk) attn_prefetch_row(vj + ATTN_PF_ROWS * sv, pf);
        __m512 b[4];
        for (int n = 0; n < nc; n++) b[n] = ld16_t(T, vj, n0 + n * 16, n == nc - 1 ? last : (__mmask16)0xFFFF);
        for (int i = 0; i < mr; i++) {
            __m512 a = _mm512_set1_ps(p[i * ldp + j]);
            for (int n = 0; n < nc; n++) c[i][n] = _mm512_fmadd_ps(a, b[n], c[i][n]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int n = 0; n < nc; n++) _mm512_storeu_ps(o + i * ldo + n * 16, c[i][n]);
}

#define ACCUM_TILE(MR, NC) \
    accum_tile(p + i * ldp, ldp, MR, NC, corr + i, T, v, sv, n0, nk, last, o + i * ldo + n0, ldo, pf)
#define ACCUM_NC(MR)                          \
    switch (nc) {                             \
    case 1: ACCUM_TILE(MR, 1); break;         \
    case 2: ACCUM_TILE(MR, 2); break;         \
    case 3: ACCUM_TILE(MR, 3); break;         \
    default: ACCUM_TILE(MR, 4); break;        \
    }

/* rows: v's rows are read from memory (accum_rows): the first pass over
 * them prefetches ahead (ATTN_PF_ROWS) where the CPU takes T0 prefetches. */
static ALWAYS_INLINE void accum_t(const float *p, int64_t ldp, int64_t r, const float *corr, const candle_dtype T,
                                  const char *v, int64_t sv, int64_t nk, int64_t dv, float *o, int64_t ldo,
                                  bool rows) {
    int64_t vb = rows && !cpu_config_get()->stream_nta ? (int64_t)candle_dtype_row_size(T, dv) : 0;
    for (int64_t i = 0; i < r; i += 6) {
        for (int64_t n0 = 0; n0 < dv; n0 += 64) {
            int64_t pf = i == 0 && n0 == 0 ? vb : 0; /* bytes of a row to prefetch, 0: none */
            int64_t nr = dv - n0 < 64 ? dv - n0 : 64;
            int nc = (int)((nr + 15) / 16);
            int tail = (int)(nr - (nc - 1) * 16); /* 1..16 lanes of the last column */
            __mmask16 last = (__mmask16)(tail == 16 ? 0xFFFF : (1u << tail) - 1);
            switch (r - i < 6 ? r - i : 6) {
            case 1: ACCUM_NC(1); break;
            case 2: ACCUM_NC(2); break;
            case 3: ACCUM_NC(3); break;
            case 4: ACCUM_NC(4); break;
            case 5: ACCUM_NC(5); break;
            default: ACCUM_NC(6); break;
            }
        }
    }
}

static void accum_avx512(const float *p, int64_t ldp, int64_t r, const float *corr, const float *v, int64_t ldv,
                         int64_t nk, int64_t dv, float *o, int64_t ldo) {
    accum_t(p, ldp, r, corr, CANDLE_DTYPE_F32, (const char *)v, ldv * (int64_t)sizeof(float), nk, dv, o, ldo, false);
}

static void accum_rows_avx512(const float *p, int64_t ldp, int64_t r, const float *corr, candle_dtype t,
                              const char *v, int64_t sv, int64_t nk, int64_t dv, float *o, int64_t ldo) {
    if (t == CANDLE_DTYPE_F16) accum_t(p, ldp, r, corr, CANDLE_DTYPE_F16, v, sv, nk, dv, o, ldo, true);
    else if (t == CANDLE_DTYPE_BF16) accum_t(p, ldp, r, corr, CANDLE_DTYPE_BF16, v, sv, nk, dv, o, ldo, true);
    else if (t == CANDLE_DTYPE_Q8_0) accum_t(p, ldp, r, corr, CANDLE_DTYPE_Q8_0, v, sv, nk, dv, o, ldo, true);
    else accum_t(p, ldp, r, corr, CANDLE_DTYPE_F32, v, sv, nk, dv, o, ldo, true);
}

/* ---- decoding scores straight from the key rows ---- */

/* R q rows x 4 keys (rows kr[0..3]) along d (a multiple of 16): each key's
 * 16 elements converted once for all the rows, one accumulator a score,
 * its halves added, then the four keys' sums together (sum4x8): the AVX2
 * table's scores_rows16_t order, so the same bits. */
static ALWAYS_INLINE void scores_rows4(const float *q, int64_t lda, const int R, int64_t d, const candle_dtype T,
                                       const char *const *kr, float *s, int64_t lds, int n) {
    __m512 c[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) c[i][u] = _mm512_setzero_ps();
    for (int64_t p = 0; p < d; p += 16) {
        __m512 b[4];
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) b[u] = ld16_t(T, kr[u], p, (__mmask16)0xFFFF);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_loadu_ps(q + i * lda + p);
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) c[i][u] = _mm512_fmadd_ps(a, b[u], c[i][u]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        __m256 y[4];
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++)
            y[u] = _mm256_add_ps(_mm512_castps512_ps256(c[i][u]),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c[i][u]), 1)));
        store4_n(s + i * lds, sum4x8(y[0], y[1], y[2], y[3]), n);
    }
}

static ALWAYS_INLINE void scores_rows_t(const float *q, int64_t lda, int64_t r, int64_t d, const candle_dtype T,
                                        const char *k, int64_t sk, int64_t nk, float *s, int64_t lds) {
    int64_t kb = cpu_config_get()->stream_nta ? 0 : (int64_t)candle_dtype_row_size(T, d); /* bytes to prefetch a row */
    for (int64_t j = 0; j < nk; j += 4) {
        int n = nk - j < 4 ? (int)(nk - j) : 4;
        for (int64_t u = j + ATTN_PF_ROWS; kb && u < j + ATTN_PF_ROWS + 4 && u < nk; u++) attn_prefetch_row(k + u * sk, kb);
        const char *kr[4];
        for (int u = 0; u < 4; u++) kr[u] = k + (j + (u < n ? u : n - 1)) * sk;
        for (int64_t i = 0; i < r; i += 4) {
            const float *qi = q + i * lda;
            float *si = s + i * lds + j;
            switch (r - i < 4 ? r - i : 4) {
            case 1: scores_rows4(qi, lda, 1, d, T, kr, si, lds, n); break;
            case 2: scores_rows4(qi, lda, 2, d, T, kr, si, lds, n); break;
            case 3: scores_rows4(qi, lda, 3, d, T, kr, si, lds, n); break;
            default: scores_rows4(qi, lda, 4, d, T, kr, si, lds, n); break;
            }
        }
    }
}

static void scores_rows_avx512(const float *q, int64_t lda, int64_t r, int64_t d, candle_dtype t, const char *k,
                               int64_t sk, int64_t nk, float *s, int64_t lds) {
    if (d % 16) cpu_attn_avx2.scores_rows(q, lda, r, d, t, k, sk, nk, s, lds);
    else if (t == CANDLE_DTYPE_F16) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F16, k, sk, nk, s, lds);
    else if (t == CANDLE_DTYPE_BF16) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_BF16, k, sk, nk, s, lds);
    else if (t == CANDLE_DTYPE_Q8_0) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_Q8_0, k, sk, nk, s, lds);
    else scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F32, k, sk, nk, s, lds);
}

/* ---- the online-softmax step ---- */

/* 2^y for y <= 0, lane for lane the AVX2 table's exp2_nonpos (avx2-util.h:
 * the same operations, so the same bits). */
static inline __m512 exp2_nonpos16(__m512 y) {
    const __m512 magic = _mm512_set1_ps(EXP2_MAGIC);
    y = _mm512_max_ps(_mm512_set1_ps(-127.0f), y);
    __m512 t = _mm512_add_ps(y, magic);
    __m512 f = _mm512_sub_ps(y, _mm512_sub_ps(t, magic));
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EXP2_P5), f, _mm512_set1_ps(EXP2_P4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_P3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_P2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_P1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_P0));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}

static inline __mmask16 lanes16(int64_t n) { return (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1); }

/* Per-lane maximum of a row's nk scores (lane k: the columns j % 16 == k),
 * folded to 8 lanes; columns past nk are not read. NaN scores are passed
 * over (max returns its second operand, the running maximum). */
static ALWAYS_INLINE __m256 row_max16(const float *x, int64_t nk) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= nk; j += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + j), m);
    if (j < nk) {
        __mmask16 k = lanes16(nk - j);
        m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, x + j), m);
    }
    return _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
}

/* x[j] = 2^(x[j] - m) for j < nk (nothing stored past nk), and the sums of
 * the columns j % 16 == k in lane k, folded to 8 lanes as the AVX2 table
 * folds its two accumulators (columns j % 16 < 8 and >= 8). */
static ALWAYS_INLINE __m256 row_exp2_sum16(float *x, int64_t nk, __m512 m) {
    __m512 s = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= nk; j += 16) {
        __m512 e = exp2_nonpos16(_mm512_sub_ps(_mm512_loadu_ps(x + j), m));
        _mm512_storeu_ps(x + j, e);
        s = _mm512_add_ps(s, e);
    }
    if (j < nk) {
        __mmask16 k = lanes16(nk - j);
        __m512 e = _mm512_maskz_mov_ps(k, exp2_nonpos16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m)));
        _mm512_mask_storeu_ps(x + j, k, e);
        s = _mm512_add_ps(s, e); /* + 0 in the lanes past nk: no change (the sums are >= +0) */
    }
    return _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
}

/* n rows (n <= 8) at once: their maxima, corrections, sums and running
 * state as one vector each (lane i = row i), as in the AVX2 table. */
static ALWAYS_INLINE void softmax_n(float *s, int64_t lds, const int n, int64_t nk, float *m, float *l,
                                    float *corr) {
    __m256 x[8];
    for (int i = 0; i < 8; i++) x[i] = i < n ? row_max16(s + i * lds, nk) : _mm256_set1_ps(-INFINITY);
    __mmask8 kn = (__mmask8)((1u << n) - 1);
    __m256 mt, st;
    REDUCE8(_mm256_max_ps, x, mt);
    __m256 mo = _mm256_maskz_loadu_ps(kn, m), mn = _mm256_max_ps(mt, mo);
    /* a row that has seen no key (mn = -inf) takes corr 0 and p 0 */
    __mmask8 seen = _mm256_cmp_ps_mask(mn, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    __m256 c = _mm256_maskz_mov_ps(seen, exp2_nonpos(_mm256_sub_ps(mo, mn)));
    float mv[8];
    _mm256_storeu_ps(mv, _mm256_maskz_mov_ps(seen, mn));
    for (int i = 0; i < 8; i++)
        x[i] = i < n ? row_exp2_sum16(s + i * lds, nk, _mm512_set1_ps(mv[i])) : _mm256_setzero_ps();
    REDUCE8(_mm256_add_ps, x, st);
    __m256 lo = _mm256_maskz_loadu_ps(kn, l);
    _mm256_mask_storeu_ps(corr, kn, c);
    _mm256_mask_storeu_ps(l, kn, _mm256_maskz_mov_ps(seen, _mm256_fmadd_ps(lo, c, st)));
    _mm256_mask_storeu_ps(m, kn, mn);
}

/* The full row group has its own copy; a row that has seen no key has only
 * -inf scores, which 2^x already made 0, unless some were NaN: the
 * contract wants 0 there too. */
static void softmax_avx512(float *s, int64_t lds, int64_t r, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i0 = 0; i0 < r; i0 += 8) {
        int n = r - i0 < 8 ? (int)(r - i0) : 8;
        float *si = s + i0 * lds;
        switch (n) {
        case 6: softmax_n(si, lds, 6, nk, m + i0, l + i0, corr + i0); break;
        default: softmax_n(si, lds, n, nk, m + i0, l + i0, corr + i0); break;
        }
        for (int i = 0; i < n; i++)
            if (m[i0 + i] == -INFINITY) memset(si + i * lds, 0, sizeof(float) * (size_t)nk);
    }
}

/* ---- the rest: the AVX2 table's ---- */

static void pack_kt_fwd(candle_dtype t, const char *k, int64_t sk, int64_t nk, int64_t d, float *kt) {
    cpu_attn_avx2.pack_kt(t, k, sk, nk, d, kt);
}

static float max_fwd(const float *x, int64_t n) { return cpu_attn_avx2.max(x, n); }
static void sub_fwd(float *x, int64_t n, float m) { cpu_attn_avx2.sub(x, n, m); }
static float sum_fwd(const float *x, int64_t n) { return cpu_attn_avx2.sum(x, n); }

const cpu_attn_ops cpu_attn_avx512 = {
    .name = "avx512",
    .pack_kt = pack_kt_fwd,
    .scores = scores_avx512,
    .scores_rows = scores_rows_avx512,
    .accum = accum_avx512,
    .accum_rows = accum_rows_avx512,
    .q8_0_rows = true,
    .prefetches_rows = true,
    .softmax = softmax_avx512,
    .max = max_fwd,
    .sub = sub_fwd,
    .sum = sum_fwd,
};
