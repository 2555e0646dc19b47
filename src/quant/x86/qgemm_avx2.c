/* AVX2 multi-row kernels of the 32-element block types (see qgemm-impl.h).
 *
 * A panel holds 8 weight rows, block by block: the 32 codes of each row are
 * transposed in 4-byte groups, so group g is one vector whose 32-bit lane j
 * holds elements 4g..4g+3 of row j. An activation row's 4 bytes of group g,
 * broadcast to every lane, then take one maddubs to advance all 8 dots: per
 * block 8 maddubs + 1 madd + 1 scale fma for 8 outputs, against 8 x (unpack,
 * maddubs, madd, convert, fma) for 8 single-row dots. Packing costs about as
 * much as one row's dots and is shared by every activation row.
 *
 * Block record: q4_0/q4_1: 8 vectors of codes 0..15, f32 scales d[8] (and
 * for q4_1 the minimums m[8]); q8_0: 8 vectors |w|, 8 vectors w (the sign
 * trick of dot_i8_i8), d[8]. */
#include "avx2-impl.h"

#include "../qgemm-impl.h"

#define NR CANDLE_QGEMM_NR

static size_t rec_bytes(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_Q4_0: return 8 * 32 + NR * 4;
    case CANDLE_DTYPE_Q4_1: return 8 * 32 + 2 * NR * 4;
    default: return 16 * 32 + NR * 4; /* q8_0 */
    }
}

size_t candle_qgemm_panel_bytes_avx2(candle_dtype t, int64_t K) { return (size_t)(K / 32) * rec_bytes(t); }

/* r[j] dword g -> g[j'] lane j: the 8 x 8 transpose of 32-bit elements. */
static void transpose8(const __m256i r[8], __m256i *g) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0..3, then 4..7 */
        const __m256i *s = t + 4 * h;
        u[4 * h + 0] = _mm256_unpacklo_epi64(s[0], s[2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(s[0], s[2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(s[1], s[3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(s[1], s[3]);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_si256((__m256i *)&g[i], _mm256_permute2x128_si256(u[i], u[4 + i], 0x20));
        _mm256_storeu_si256((__m256i *)&g[4 + i], _mm256_permute2x128_si256(u[i], u[4 + i], 0x31));
    }
}

void candle_qgemm_pack_avx2(candle_dtype t, int64_t K, int nn, const void *w, size_t ws, void *p) {
    size_t rb = rec_bytes(t);
    for (int64_t b = 0; b < K / 32; b++) {
        char *rec = (char *)p + (size_t)b * rb;
        __m256i r[8];
        float d[NR], mn[NR];
        for (int j = 0; j < NR; j++) {
            r[j] = _mm256_setzero_si256();
            d[j] = mn[j] = 0;
            if (j >= nn) continue;
            const char *row = (const char *)w + (size_t)j * ws;
            if (t == CANDLE_DTYPE_Q4_0) {
                const block_q4_0 *x = (const block_q4_0 *)row + b;
                r[j] = unpack_nibbles(x->qs);
                d[j] = h2f(x->d);
            } else if (t == CANDLE_DTYPE_Q4_1) {
                const block_q4_1 *x = (const block_q4_1 *)row + b;
                r[j] = unpack_nibbles(x->qs);
                d[j] = h2f(x->d);
                mn[j] = h2f(x->m);
            } else {
                const block_q8_0 *x = (const block_q8_0 *)row + b;
                r[j] = load32(x->qs);
                d[j] = h2f(x->d);
            }
        }
        __m256i *g = (__m256i *)rec;
        if (t == CANDLE_DTYPE_Q8_0) {
            transpose8(r, g + 8);
            for (int i = 0; i < 8; i++) {
                __m256i s = _mm256_loadu_si256(&g[8 + i]);
                _mm256_storeu_si256(&g[i], _mm256_sign_epi8(s, s));
            }
            memcpy(rec + 16 * 32, d, sizeof d);
        } else {
            transpose8(r, g);
            memcpy(rec + 8 * 32, d, sizeof d);
            if (t == CANDLE_DTYPE_Q4_1) memcpy(rec + 8 * 32 + sizeof d, mn, sizeof mn);
        }
    }
}

static inline __m256i bcast4(const int8_t *q, int g) {
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return _mm256_set1_epi32(v);
}

/* Codes 0..15 times one q8 block: the 8 dots of the panel's rows. Pair sums
 * stay below 2 * 15 * 127, so the 8 groups add up in 16 bits. */
static inline __m256i dot_u4(const __m256i *g, const int8_t *q) {
    __m256i acc = _mm256_maddubs_epi16(_mm256_loadu_si256(&g[0]), bcast4(q, 0));
    for (int i = 1; i < 8; i++) acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(_mm256_loadu_si256(&g[i]), bcast4(q, i)));
    return _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
}

static void store_out(__m256 acc, int nn, float *out) {
    if (nn == NR) {
        _mm256_storeu_ps(out, acc);
        return;
    }
    float tmp[NR];
    _mm256_storeu_ps(tmp, acc);
    memcpy(out, tmp, (size_t)nn * sizeof(float));
}

static void panel_q4_0(int64_t K, int nn, const char *p, const block_q8_0 *y, float *out) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, p += rec_bytes(CANDLE_DTYPE_Q4_0)) {
        /* codes are value + 8: take 8 * sum(y) off */
        __m256i ys = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load32(y[b].qs)),
                                       _mm256_set1_epi16(1));
        __m256i s = _mm256_sub_epi32(dot_u4((const __m256i *)p, y[b].qs), _mm256_set1_epi32(8 * hsum_i32(ys)));
        __m256 sc = _mm256_mul_ps(_mm256_loadu_ps((const float *)(p + 8 * 32)), _mm256_set1_ps(h2f(y[b].d)));
        acc = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc);
    }
    store_out(acc, nn, out);
}

static void panel_q4_1(int64_t K, int nn, const char *p, const block_q8_1 *y, float *out) {
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, p += rec_bytes(CANDLE_DTYPE_Q4_1)) {
        __m256i s = dot_u4((const __m256i *)p, y[b].qs);
        const float *d = (const float *)(p + 8 * 32);
        __m256 sc = _mm256_mul_ps(_mm256_loadu_ps(d), _mm256_set1_ps(h2f(y[b].d)));
        acc = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc);
        accm = _mm256_fmadd_ps(_mm256_loadu_ps(d + NR), _mm256_set1_ps(h2f(y[b].s)), accm);
    }
    store_out(_mm256_add_ps(acc, accm), nn, out);
}

static void panel_q8_0(int64_t K, int nn, const char *p, const block_q8_0 *y, float *out) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, p += rec_bytes(CANDLE_DTYPE_Q8_0)) {
        const __m256i *g = (const __m256i *)p;
        __m256i s = _mm256_setzero_si256();
        for (int i = 0; i < 8; i++) {
            __m256i yb = _mm256_sign_epi8(bcast4(y[b].qs, i), _mm256_loadu_si256(&g[8 + i]));
            s = _mm256_add_epi32(s, dot_u8_i8(_mm256_loadu_si256(&g[i]), yb));
        }
        __m256 sc = _mm256_mul_ps(_mm256_loadu_ps((const float *)(p + 16 * 32)), _mm256_set1_ps(h2f(y[b].d)));
        acc = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc);
    }
    store_out(acc, nn, out);
}

void candle_qgemm_panel_avx2(candle_dtype t, int64_t K, int nn, const void *p, const void *x, float *out) {
    if (t == CANDLE_DTYPE_Q4_0) panel_q4_0(K, nn, p, x, out);
    else if (t == CANDLE_DTYPE_Q4_1) panel_q4_1(K, nn, p, x, out);
    else panel_q8_0(K, nn, p, x, out);
}
