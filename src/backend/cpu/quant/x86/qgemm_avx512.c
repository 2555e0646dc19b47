/* AVX-512 VNNI variants of the multi-row panel kernels (see qgemm_avx2.c,
 * which packs the panels for both): the byte dots as vpdpbusd, on 256-bit
 * vectors (AVX512VL: one panel, the last odd one) and on 512-bit vectors
 * (two panels at once, below). Same bits as the AVX2 kernels. Chosen only
 * on CPUs with avx512vnni, avx512vl and avx512bw (cdl_quant_uses_vnni). */
#define CANDLE_QUANT_VNNI 1
#define QGEMM_KERNEL(name) name##_vnni
#include "qgemm-panels-impl.h"

/* Two panels at once in 512-bit vectors (every type with panels): lane j
 * of a vector is row j of panel p0 (j < 8) or row j - 8 of p1, so
 * each broadcast of an activation row's 4 bytes (a load) serves 16 weight
 * rows. With 8-row vectors the loop issued about 12 loads per 8 outputs
 * and block, 8 of them these broadcasts: bound by the load ports, not by
 * the vpdpbusd. The arithmetic per output is panel_legacy_r's, in the same
 * order (same bits). */
ALWAYS_INLINE void store16(__m512 h, int nn, float *out) {
    _mm512_mask_storeu_ps(out, (__mmask16)((1u << nn) - 1), h);
}

typedef struct lanes16 {
    __m512 a[8][4], m[8][4]; /* [lane][row]: vectors over the 16 panel rows */
    float e[4][2 * NR];      /* [row]: the tail blocks' offset terms */
} lanes16;

/* Vector k of block record rec in p0 (low half) and in p1 (high half). */
ALWAYS_INLINE __m512i pair_i(const char *r0, const char *r1, int k) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r0 + k)),
                              _mm256_loadu_si256((const __m256i *)r1 + k), 1);
}
ALWAYS_INLINE __m512 pair_f(const char *r0, const char *r1, size_t off) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)(r0 + off))),
                              _mm256_loadu_ps((const float *)(r1 + off)), 1);
}
ALWAYS_INLINE __m512i bcast4_512(const int8_t *q, int g) {
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return _mm512_set1_epi32(v);
}

/* act_scales in 16 lanes. */
ALWAYS_INLINE void act_scales16(candle_dtype t, const rows4 *rw, int r, int64_t b, __m512 *dy, __m512 *sy) {
    if (min_type(t)) {
        const block_q8_1 *y = (const block_q8_1 *)rw->x[r] + b;
        int32_t ds;
        memcpy(&ds, &y->d, 4);
        __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(ds));
        *dy = _mm512_broadcastss_ps(f);
        *sy = _mm512_broadcastss_ps(_mm_movehdup_ps(f));
    } else if (off_type(t)) {
        *dy = _mm512_set1_ps(rw->aux[r][b]);
        *sy = _mm512_set1_ps(rw->aux[r][rw->nb + b]);
    } else {
        *dy = _mm512_set1_ps(h2f(((const block_q8_0 *)rw->x[r] + b)->d));
        *sy = _mm512_setzero_ps();
    }
}

/* Group k's unsigned weight bytes: the codes, or for q8_0 w + 128 (w xor
 * 0x80, one op per group for all rows): the dot then exceeds w . x by 128
 * times the sum of x's codes, taken off per block from the aux record
 * (per group in the tail blocks). */
ALWAYS_INLINE __m512i wts16(candle_dtype t, const char *r0, const char *r1, int k) {
    if (t == CANDLE_DTYPE_Q8_0) return _mm512_xor_si512(pair_i(r0, r1, 8 + k), _mm512_set1_epi8((char)0x80));
    return pair_i(r0, r1, k);
}

ALWAYS_INLINE void block_sums16(candle_dtype t, int R, const char *r0, const char *r1, const int8_t *const *q,
                                __m512i *s) {
    __m512i u[4];
    for (int k = 0; k < 4; k++) {
        __m512i w0 = wts16(t, r0, r1, k), w1 = wts16(t, r0, r1, 4 + k);
        FOR_R {
            s[r] = _mm512_dpbusd_epi32(k ? s[r] : _mm512_setzero_si512(), w0, bcast4_512(q[r], k));
            u[r] = _mm512_dpbusd_epi32(k ? u[r] : _mm512_setzero_si512(), w1, bcast4_512(q[r], 4 + k));
        }
    }
    FOR_R s[r] = _mm512_add_epi32(s[r], u[r]);
}

ALWAYS_INLINE void full_lane16(candle_dtype t, int R, int64_t ng, int i, const char *p0, const char *p1,
                               const rows4 *rw, lanes16 *L) {
    const size_t rb = rec_bytes(t), doff = t == CANDLE_DTYPE_Q8_0 ? 16 * 32 : 8 * 32;
    __m512 a[4], m[4];
    FOR_R a[r] = m[r] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; gi++) {
        int64_t b = 8 * gi + i;
        const char *r0 = p0 + (size_t)b * rb, *r1 = p1 + (size_t)b * rb;
        const int8_t *q[4];
        __m512i s[4];
        FOR_R q[r] = act_codes(t, rw, r, b);
        block_sums16(t, R, r0, r1, q, s);
        if (t == CANDLE_DTYPE_Q8_0)
            FOR_R s[r] = _mm512_sub_epi32(s[r], _mm512_set1_epi32(((const int32_t *)rw->aux[r])[b] * 128));
        __m512 dw = pair_f(r0, r1, doff);
        FOR_R {
            __m512 dy, sy, v = _mm512_cvtepi32_ps(s[r]);
            act_scales16(t, rw, r, b, &dy, &sy);
            if (off_type(t)) a[r] = _mm512_fmadd_ps(dw, _mm512_fmadd_ps(dy, v, sy), a[r]);
            else a[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), v, a[r]);
            if (min_type(t)) m[r] = _mm512_fmadd_ps(pair_f(r0, r1, doff + NR * 4), sy, m[r]);
        }
    }
    FOR_R {
        L->a[i][r] = a[r];
        L->m[i][r] = m[r];
    }
}

ALWAYS_INLINE void tail_row16(candle_dtype t, int64_t b0, int64_t nb, const char *p0, const char *p1,
                              const rows4 *rw, int r, lanes16 *L) {
    const size_t rb = rec_bytes(t), doff = t == CANDLE_DTYPE_Q8_0 ? 16 * 32 : 8 * 32;
    for (int64_t b = b0; b < nb; b++) {
        const char *r0 = p0 + (size_t)b * rb, *r1 = p1 + (size_t)b * rb;
        __m512 dy, sy;
        const int8_t *q = act_codes(t, rw, r, b);
        act_scales16(t, rw, r, b, &dy, &sy);
        __m512 dd = _mm512_mul_ps(pair_f(r0, r1, doff), dy);
        for (int i = 0; i < 8; i++) {
            __m512i x = bcast4_512(q, i), d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wts16(t, r0, r1, i), x);
            if (t == CANDLE_DTYPE_Q8_0) /* 128 times the group's code sum */
                d = _mm512_sub_epi32(d, _mm512_slli_epi32(
                                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), x), 7));
            L->a[i][r] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(d), L->a[i][r]);
        }
        if (t == CANDLE_DTYPE_Q8_0) continue;
        /* the matrix-vector kernel's scalar statement (see tail_row) */
        float w[2 * NR], s = _mm512_cvtss_f32(sy);
        _mm512_storeu_ps(w, pair_f(r0, r1, doff + (min_type(t) ? NR * 4 : 0)));
        for (int j = 0; j < 2 * NR; j++) L->e[r][j] += w[j] * s;
    }
}

ALWAYS_INLINE void panel16_r(candle_dtype t, int R, int64_t K, int nn, const char *p0, const char *p1,
                             const rows4 *rw) {
    lanes16 L;
    int64_t nb = K / 32, ng = nb / 8;
    if (ng > 0)
        for (int i = 0; i < 8; i++) full_lane16(t, R, ng, i, p0, p1, rw, &L);
    else
        for (int i = 0; i < 8; i++) FOR_R L.a[i][r] = L.m[i][r] = _mm512_setzero_ps();
    FOR_R {
        for (int j = 0; j < 2 * NR; j++) L.e[r][j] = 0;
        if (nb > 8 * ng) tail_row16(t, 8 * ng, nb, p0, p1, rw, r, &L);
        __m512 v[8];
        for (int i = 0; i < 8; i++) v[i] = t == CANDLE_DTYPE_Q8_0 ? L.a[i][r] : _mm512_add_ps(L.a[i][r], L.m[i][r]);
        for (int i = 0; i < 4; i++) v[i] = _mm512_add_ps(v[i], v[4 + i]);
        __m512 h = _mm512_add_ps(_mm512_add_ps(v[0], v[2]), _mm512_add_ps(v[1], v[3]));
        if (t != CANDLE_DTYPE_Q8_0) h = _mm512_add_ps(h, _mm512_loadu_ps(L.e[r]));
        store16(h, nn, rw->out[r]);
    }
}

/* The K types' sub-block s (32 codes) of both panels against each row's
 * q8_K codes: a[r] sums codes 0..15, c[r] codes 16..31, per weight row. */
ALWAYS_INLINE void k_subblock_dots(int R, const char *p0, const char *p1, int s, const block_q8_K *const *y,
                                   __m512i *a, __m512i *c) {
    for (int i = 0; i < 4; i++) {
        __m512i w0 = pair_i(p0, p1, 8 * s + i), w1 = pair_i(p0, p1, 8 * s + 4 + i);
        FOR_R {
            a[r] = _mm512_dpbusd_epi32(i ? a[r] : _mm512_setzero_si512(), w0, bcast4_512(y[r]->qs + 32 * s, i));
            c[r] = _mm512_dpbusd_epi32(i ? c[r] : _mm512_setzero_si512(), w1, bcast4_512(y[r]->qs + 32 * s, 4 + i));
        }
    }
}

/* panel_q4_k_r's VNNI arithmetic over 16 rows. */
ALWAYS_INLINE void panel16_q4_k_r(int R, int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) {
    __m512 acc[4];
    FOR_R acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK_K; b++, p0 += Q4K_REC, p1 += Q4K_REC) {
        const block_q8_K *y[4];
        __m512i tot[4], mins[4];
        FOR_R {
            y[r] = (const block_q8_K *)rw->x[r] + b;
            tot[r] = mins[r] = _mm512_setzero_si512();
        }
        for (int s = 0; s < 8; s++) {
            __m512i a[4], c[4];
            k_subblock_dots(R, p0, p1, s, y, a, c);
            __m512i sc32 = _mm512_srai_epi32(pair_i(p0, p1, Q4K_SC / 32 + s), 16);
            __m512i mnv = pair_i(p0, p1, Q4K_MN / 32 + s);
            FOR_R {
                tot[r] = _mm512_add_epi32(tot[r], _mm512_mullo_epi32(_mm512_add_epi32(a[r], c[r]), sc32));
                int32_t bs;
                memcpy(&bs, &y[r]->bsums[2 * s], 4);
                mins[r] = _mm512_add_epi32(mins[r], _mm512_madd_epi16(mnv, _mm512_set1_epi32(bs)));
            }
        }
        __m512 dv = pair_f(p0, p1, Q4K_D), dm = pair_f(p0, p1, Q4K_D + NR * 4);
        FOR_R {
            __m512 yd = _mm512_set1_ps(y[r]->d);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, yd), _mm512_cvtepi32_ps(tot[r]), acc[r]);
            acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, yd), _mm512_cvtepi32_ps(mins[r]), acc[r]);
        }
    }
    FOR_R store16(acc[r], nn, rw->out[r]);
}

/* panel_q6_k_r's VNNI arithmetic over 16 rows. */
ALWAYS_INLINE void panel16_q6_k_r(int R, int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) {
    __m512 acc[4];
    FOR_R acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK_K; b++, p0 += Q6K_REC, p1 += Q6K_REC) {
        const block_q8_K *y[4];
        __m512i tot[4], off[4];
        FOR_R {
            y[r] = (const block_q8_K *)rw->x[r] + b;
            tot[r] = off[r] = _mm512_setzero_si512();
        }
        for (int s = 0; s < 8; s++) {
            __m512i a[4], c[4];
            k_subblock_dots(R, p0, p1, s, y, a, c);
            __m512i s0 = _mm512_srai_epi32(pair_i(p0, p1, Q6K_SC / 32 + 2 * s), 16);
            __m512i s1 = _mm512_srai_epi32(pair_i(p0, p1, Q6K_SC / 32 + 2 * s + 1), 16);
            __m512i spv = pair_i(p0, p1, Q6K_SP / 32 + s);
            FOR_R {
                tot[r] = _mm512_add_epi32(
                    tot[r], _mm512_add_epi32(_mm512_mullo_epi32(a[r], s0), _mm512_mullo_epi32(c[r], s1)));
                int32_t bs;
                memcpy(&bs, &y[r]->bsums[2 * s], 4);
                off[r] = _mm512_add_epi32(off[r], _mm512_madd_epi16(spv, _mm512_set1_epi32(bs)));
            }
        }
        __m512 dv = pair_f(p0, p1, Q6K_D);
        FOR_R {
            __m512i t = _mm512_sub_epi32(tot[r], _mm512_slli_epi32(off[r], 5));
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(y[r]->d)), _mm512_cvtepi32_ps(t), acc[r]);
        }
    }
    FOR_R store16(acc[r], nn, rw->out[r]);
}

typedef void (*panel16_fn)(int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw);

#define PANEL16_INSTANCES(T, CALL)                                                                                \
    static void T##_16_1(int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) { CALL(1); }    \
    static void T##_16_2(int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) { CALL(2); }    \
    static void T##_16_3(int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) { CALL(3); }    \
    static void T##_16_4(int64_t K, int nn, const char *p0, const char *p1, const rows4 *rw) { CALL(4); }    \
    static const panel16_fn T##_16_fns[4] = {T##_16_1, T##_16_2, T##_16_3, T##_16_4};
#define CALL_Q4_0(R) panel16_r(CANDLE_DTYPE_Q4_0, R, K, nn, p0, p1, rw)
#define CALL_Q4_1(R) panel16_r(CANDLE_DTYPE_Q4_1, R, K, nn, p0, p1, rw)
#define CALL_Q5_0(R) panel16_r(CANDLE_DTYPE_Q5_0, R, K, nn, p0, p1, rw)
#define CALL_Q5_1(R) panel16_r(CANDLE_DTYPE_Q5_1, R, K, nn, p0, p1, rw)
#define CALL_Q8_0(R) panel16_r(CANDLE_DTYPE_Q8_0, R, K, nn, p0, p1, rw)
#define CALL_Q4_K(R) panel16_q4_k_r(R, K, nn, p0, p1, rw)
#define CALL_Q6_K(R) panel16_q6_k_r(R, K, nn, p0, p1, rw)
PANEL16_INSTANCES(q4_0, CALL_Q4_0)
PANEL16_INSTANCES(q4_1, CALL_Q4_1)
PANEL16_INSTANCES(q5_0, CALL_Q5_0)
PANEL16_INSTANCES(q5_1, CALL_Q5_1)
PANEL16_INSTANCES(q8_0, CALL_Q8_0)
PANEL16_INSTANCES(q4_k, CALL_Q4_K)
PANEL16_INSTANCES(q6_k, CALL_Q6_K)

int cdl_qgemm_has_pairs_vnni(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_0 || t == CANDLE_DTYPE_Q5_1 ||
           t == CANDLE_DTYPE_Q8_0 || t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q6_K;
}

void cdl_qgemm_pair_rows_vnni(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                 const void *aux, int64_t M, float *c, int64_t ldc) {
    const panel16_fn *fns;
    switch (t) {
    case CANDLE_DTYPE_Q4_0: fns = q4_0_16_fns; break;
    case CANDLE_DTYPE_Q4_1: fns = q4_1_16_fns; break;
    case CANDLE_DTYPE_Q5_0: fns = q5_0_16_fns; break;
    case CANDLE_DTYPE_Q5_1: fns = q5_1_16_fns; break;
    case CANDLE_DTYPE_Q4_K: fns = q4_k_16_fns; break;
    case CANDLE_DTYPE_Q6_K: fns = q6_k_16_fns; break;
    default: fns = q8_0_16_fns; break;
    }
    const char *p0 = p, *p1 = p0 + cdl_qgemm_panel_bytes_avx2(t, K);
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
        fns[R - 1](K, nn, p0, p1, &rw);
    }
}
