/* AVX2 + FMA tile primitives of the blocked flash attention (contracts in
 * attention-impl.h). Both products are register-blocked 6 x 16 tiles, twelve
 * 8-lane accumulators, two vector loads and six broadcasts per twelve FMAs,
 * as in the GEMM micro-kernel:
 *   scores: q rows (broadcast) x a panel of 16 transposed keys, over d;
 *   accum:  p rows (broadcast) x 16 columns of v rows, over the tile's keys,
 *           the accumulators starting from o * corr (the online-softmax
 *           rescale costs no extra pass over o).
 * Row counts below six get their own inlined copies (no wasted FMAs); a
 * few rows (decoding) take their scores straight from the key rows, eight
 * keys at a time, with no transposed copy. The online-softmax step works
 * on a whole row group at once (lane i = row i) with a 2^x for x <= 0 that
 * leaves most of its work off the FMA pipes. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../attention-impl.h"
#include "avx2-util.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Eight keys at a time: 8 x 8 blocks loaded along d and transposed into
 * the panel's half; keys past nk are zero. */
static void pack_kt_avx2(candle_dtype t, const char *k, int64_t sk, int64_t nk, int64_t d, float *kt) {
    int64_t esz = t == CANDLE_DTYPE_F32 ? 4 : 2, nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t j0 = 0; j0 < nkp; j0 += 8) {
        float *dst = kt + (j0 / ATTN_NR) * d * ATTN_NR + j0 % ATTN_NR;
        int64_t nv = nk - j0 < 8 ? (nk - j0 > 0 ? nk - j0 : 0) : 8;
        const char *rows = k + j0 * sk;
        int64_t p0 = 0;
        for (; p0 + 8 <= d; p0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = i < nv ? load8(t, rows + i * sk + p0 * esz) : _mm256_setzero_ps();
            transpose8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (p0 + i) * ATTN_NR, r[i]);
        }
        for (; p0 < d; p0++)
            for (int i = 0; i < 8; i++) dst[p0 * ATTN_NR + i] = i < nv ? cdl_load_f32(t, rows + i * sk + p0 * esz) : 0.0f;
    }
}

/* One mr x 16 tile of scores (mr <= 6, a constant after inlining). */
static ALWAYS_INLINE void scores_tile(const float *q, int64_t lda, const int mr, int64_t d, const float *kt,
                                      float *s, int64_t lds) {
    __m256 c[6][2];
    for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < d; p++) {
        __m256 b0 = _mm256_loadu_ps(kt + p * ATTN_NR), b1 = _mm256_loadu_ps(kt + p * ATTN_NR + 8);
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_broadcast_ss(q + i * lda + p);
            c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
        }
    }
    for (int i = 0; i < mr; i++) {
        _mm256_storeu_ps(s + i * lds, c[i][0]);
        _mm256_storeu_ps(s + i * lds + 8, c[i][1]);
    }
}

/* Six q rows stay in L1 while they meet every panel of the key tile. */
static void scores_avx2(const float *q, int64_t lda, int64_t r, int64_t d, const float *kt, int64_t nk, float *s,
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

/* One q row x 8 keys (rows kr[0..7]), dot products along d: eight
 * accumulators reduced to one vector of eight scores at the end, so the
 * horizontal sums cost a few shuffles per eight keys. T is a constant
 * after inlining (no dtype test in the loop). */
static ALWAYS_INLINE __m256 scores_row8(const float *q, int64_t d, const candle_dtype T, const char *const *kr) {
    const int64_t esz = T == CANDLE_DTYPE_F32 ? 4 : 2;
    __m256 c[8];
    for (int j = 0; j < 8; j++) c[j] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= d; p += 8) {
        __m256 a = _mm256_loadu_ps(q + p);
        for (int j = 0; j < 8; j++) c[j] = _mm256_fmadd_ps(a, load8(T, kr[j] + p * esz), c[j]);
    }
    __m256 out;
    REDUCE8(_mm256_add_ps, c, out);
    if (p < d) {
        float tail[8];
        for (int j = 0; j < 8; j++) {
            float t = 0;
            for (int64_t e = p; e < d; e++) t += q[e] * cdl_load_f32(T, kr[j] + e * esz);
            tail[j] = t;
        }
        out = _mm256_add_ps(out, _mm256_loadu_ps(tail));
    }
    return out;
}

/* Eight keys at a time (past nk the last valid key is read again and its
 * score not stored), each q row in turn: the key rows stay in L1 for the
 * rows after the first. For d not a multiple of 16. */
static ALWAYS_INLINE void scores_rows8_t(const float *q, int64_t lda, int64_t r, int64_t d, const candle_dtype T,
                                         const char *k, int64_t sk, int64_t nk, float *s, int64_t lds) {
    for (int64_t j = 0; j < nk; j += 8) {
        int64_t n = nk - j < 8 ? nk - j : 8;
        const char *kr[8];
        for (int i = 0; i < 8; i++) kr[i] = k + (j + (i < n ? i : n - 1)) * sk;
        for (int64_t i = 0; i < r; i++) {
            __m256 v = scores_row8(q + i * lda, d, T, kr);
            if (n == 8) {
                _mm256_storeu_ps(s + i * lds + j, v);
            } else {
                float out[8];
                _mm256_storeu_ps(out, v);
                memcpy(s + i * lds + j, out, sizeof(float) * (size_t)n);
            }
        }
    }
}

/* d a multiple of 16: each score summed as 16 lanes (two 8-lane halves here)
 * along d, the halves added, then four keys' sums reduced together (sum4x8):
 * the AVX-512 table's order (one zmm per key, its halves added), so both
 * tables give the same bits. Four keys at a time (past nk the last valid key
 * is read again and its score not stored), each q row in turn. */
static ALWAYS_INLINE void scores_rows16_t(const float *q, int64_t lda, int64_t r, int64_t d, const candle_dtype T,
                                          const char *k, int64_t sk, int64_t nk, float *s, int64_t lds) {
    const int64_t esz = T == CANDLE_DTYPE_F32 ? 4 : 2;
    for (int64_t j = 0; j < nk; j += 4) {
        int n = nk - j < 4 ? (int)(nk - j) : 4;
        const char *kr[4];
        for (int i = 0; i < 4; i++) kr[i] = k + (j + (i < n ? i : n - 1)) * sk;
        for (int64_t i = 0; i < r; i++) {
            const float *qi = q + i * lda;
            __m256 lo[4], hi[4];
            for (int u = 0; u < 4; u++) lo[u] = hi[u] = _mm256_setzero_ps();
            for (int64_t p = 0; p < d; p += 16) {
                __m256 a0 = _mm256_loadu_ps(qi + p), a1 = _mm256_loadu_ps(qi + p + 8);
                for (int u = 0; u < 4; u++) {
                    lo[u] = _mm256_fmadd_ps(a0, load8(T, kr[u] + p * esz), lo[u]);
                    hi[u] = _mm256_fmadd_ps(a1, load8(T, kr[u] + (p + 8) * esz), hi[u]);
                }
            }
            store4_n(s + i * lds + j, sum4x8(_mm256_add_ps(lo[0], hi[0]), _mm256_add_ps(lo[1], hi[1]),
                                             _mm256_add_ps(lo[2], hi[2]), _mm256_add_ps(lo[3], hi[3])), n);
        }
    }
}

static ALWAYS_INLINE void scores_rows_t(const float *q, int64_t lda, int64_t r, int64_t d, const candle_dtype T,
                                        const char *k, int64_t sk, int64_t nk, float *s, int64_t lds) {
    if (d % 16 == 0) scores_rows16_t(q, lda, r, d, T, k, sk, nk, s, lds);
    else scores_rows8_t(q, lda, r, d, T, k, sk, nk, s, lds);
}

static void scores_rows_avx2(const float *q, int64_t lda, int64_t r, int64_t d, candle_dtype t, const char *k,
                             int64_t sk, int64_t nk, float *s, int64_t lds) {
    if (t == CANDLE_DTYPE_F32) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F32, k, sk, nk, s, lds);
    else if (t == CANDLE_DTYPE_F16) scores_rows_t(q, lda, r, d, CANDLE_DTYPE_F16, k, sk, nk, s, lds);
    else scores_rows_t(q, lda, r, d, CANDLE_DTYPE_BF16, k, sk, nk, s, lds);
}

/* mr x 16 output columns (mr <= 6, a constant after inlining); columns
 * past nr (a tail of dv) are loaded as zeros and never read, so the last v
 * row is not read beyond its end. */
static ALWAYS_INLINE void accum_tile(const float *p, int64_t ldp, const int mr, const float *corr, const float *v,
                                     int64_t ldv, int64_t nk, int nr, float *o, int64_t ldo, const bool masked) {
    __m256 c[6][2];
    for (int i = 0; i < mr; i++) {
        __m256 k = _mm256_broadcast_ss(corr + i);
        c[i][0] = _mm256_mul_ps(k, _mm256_loadu_ps(o + i * ldo));
        c[i][1] = _mm256_mul_ps(k, _mm256_loadu_ps(o + i * ldo + 8));
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
    for (int64_t j = 0; j < nk; j++) {
        const float *vj = v + j * ldv;
        __m256 b0 = masked ? _mm256_maskload_ps(vj, m0) : _mm256_loadu_ps(vj);
        __m256 b1 = masked ? _mm256_maskload_ps(vj + 8, m1) : _mm256_loadu_ps(vj + 8);
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_broadcast_ss(p + i * ldp + j);
            c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
        }
    }
    for (int i = 0; i < mr; i++) {
        _mm256_storeu_ps(o + i * ldo, c[i][0]);
        _mm256_storeu_ps(o + i * ldo + 8, c[i][1]);
    }
}

#define ACCUM_MR(MR, MASKED) \
    accum_tile(p + i * ldp, ldp, MR, corr + i, v + n0, ldv, nk, nr, o + i * ldo + n0, ldo, MASKED)

static void accum_avx2(const float *p, int64_t ldp, int64_t r, const float *corr, const float *v, int64_t ldv,
                       int64_t nk, int64_t dv, float *o, int64_t ldo) {
    for (int64_t i = 0; i < r; i += 6) {
        int mr = r - i < 6 ? (int)(r - i) : 6;
        for (int64_t n0 = 0; n0 < dv; n0 += ATTN_NR) {
            int nr = dv - n0 < ATTN_NR ? (int)(dv - n0) : ATTN_NR;
            if (nr < ATTN_NR) {
                ACCUM_MR(mr, true); /* the tail: not worth a copy per row count */
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

/* Lanes j < n of eight (0 <= n <= 8) as an all-ones mask. */
static inline __m256 lanes_below(int64_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}

/* Per-lane maximum of a row's nk scores; with tail, the columns past nk
 * (up to the next 8) are read but left out, else nk is a multiple of 16.
 * NaN scores are passed over: max returns its second operand, the running
 * maximum, when one is NaN. */
static ALWAYS_INLINE __m256 row_max8(const float *x, int64_t nk, const bool tail) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t j = 0;
    for (; j + 16 <= nk; j += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), m1);
    }
    for (; tail && j < nk; j += 8)
        m0 = _mm256_max_ps(_mm256_blendv_ps(m0, _mm256_loadu_ps(x + j), lanes_below(nk - j)), m0);
    return _mm256_max_ps(m0, m1);
}

/* x[j] = 2^(x[j] - m) for j < nk, and their per-lane sums; with tail, the
 * columns past nk (up to the next 8) become 0, else nk is a multiple of 16. */
static ALWAYS_INLINE __m256 row_exp2_sum8(float *x, int64_t nk, __m256 m, const bool tail) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 16 <= nk; j += 16) {
        __m256 e0 = exp2_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + j), m));
        __m256 e1 = exp2_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), m));
        _mm256_storeu_ps(x + j, e0);
        _mm256_storeu_ps(x + j + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    /* column j goes to s0 when j % 16 < 8, as in the loop above, so a row's
     * sum does not depend on how far its group's tile reaches (blocks of
     * other sizes, on other thread counts, give the same bits) */
    for (; tail && j < nk; j += 8) {
        __m256 e = _mm256_and_ps(exp2_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + j), m)), lanes_below(nk - j));
        _mm256_storeu_ps(x + j, e);
        if (j % 16 == 0) s0 = _mm256_add_ps(s0, e);
        else s1 = _mm256_add_ps(s1, e);
    }
    return _mm256_add_ps(s0, s1);
}

/* n rows (n <= 8, a constant in the hot copy) at once: their maxima,
 * corrections, sums and running state as one vector each (lane i = row i).
 * The state goes through small arrays: AVX2 masked loads and stores are
 * slow on some cores (microcoded on AMD). */
static ALWAYS_INLINE void softmax_n(float *s, int64_t lds, const int n, int64_t nk, float *m, float *l, float *corr,
                                    const bool tail) {
    __m256 x[8];
    float mo8[8] = {0}, l8[8] = {0}, mv[8], out[3][8];
    for (int i = 0; i < 8; i++) x[i] = i < n ? row_max8(s + i * lds, nk, tail) : _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < n; i++) mo8[i] = m[i], l8[i] = l[i];
    __m256 mt, st;
    REDUCE8(_mm256_max_ps, x, mt);
    __m256 mo = _mm256_loadu_ps(mo8), mn = _mm256_max_ps(mt, mo);
    /* a row that has seen no key (mn = -inf) takes corr 0 and p 0 */
    __m256 seen = _mm256_cmp_ps(mn, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    __m256 c = _mm256_and_ps(exp2_nonpos(_mm256_sub_ps(mo, mn)), seen);
    _mm256_storeu_ps(mv, _mm256_blendv_ps(_mm256_setzero_ps(), mn, seen));
    for (int i = 0; i < 8; i++)
        x[i] = i < n ? row_exp2_sum8(s + i * lds, nk, _mm256_set1_ps(mv[i]), tail) : _mm256_setzero_ps();
    REDUCE8(_mm256_add_ps, x, st);
    _mm256_storeu_ps(out[0], c);
    _mm256_storeu_ps(out[1], _mm256_and_ps(_mm256_fmadd_ps(_mm256_loadu_ps(l8), c, st), seen));
    _mm256_storeu_ps(out[2], mn);
    for (int i = 0; i < n; i++) corr[i] = out[0][i], l[i] = out[1][i], m[i] = out[2][i];
}

/* The full row group of whole key panels (nearly every call) has its own
 * copy; a row that has seen no key has only -inf scores, which exp2
 * already made 0, unless some were NaN: the contract wants 0 there too. */
static void softmax_avx2(float *s, int64_t lds, int64_t r, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i0 = 0; i0 < r; i0 += 8) {
        int n = r - i0 < 8 ? (int)(r - i0) : 8;
        float *si = s + i0 * lds;
        if (n == ATTN_MR && nk % 16 == 0) softmax_n(si, lds, ATTN_MR, nk, m + i0, l + i0, corr + i0, false);
        else softmax_n(si, lds, n, nk, m + i0, l + i0, corr + i0, true);
        for (int i = 0; i < n; i++)
            if (m[i0 + i] == -INFINITY) memset(si + i * lds, 0, sizeof(float) * (size_t)nk);
    }
}

static float max_avx2(const float *x, int64_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
    float r = hmax(m);
    for (; j < n; j++) r = x[j] > r ? x[j] : r;
    return r;
}

static void sub_avx2(float *x, int64_t n, float m) {
    __m256 mv = _mm256_set1_ps(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
    for (; j < n; j++) x[j] -= m;
}

static float sum_avx2(const float *x, int64_t n) {
    __m256 s = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + j));
    float r = hsum(s);
    for (; j < n; j++) r += x[j];
    return r;
}

const cpu_attn_ops cpu_attn_avx2 = {
    .name = "avx2",
    .pack_kt = pack_kt_avx2,
    .scores = scores_avx2,
    .scores_rows = scores_rows_avx2,
    .accum = accum_avx2,
    .softmax = softmax_avx2,
    .max = max_avx2,
    .sub = sub_avx2,
    .sum = sum_avx2,
};
