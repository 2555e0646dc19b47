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
 * Block record: q4_0/q4_1/q5_0/q5_1: 8 vectors of codes (0..15, q5 0..31),
 * f32 scales d[8] (and for q4_1/q5_1 the minimums m[8]); q8_0: 8 vectors
 * |w|, 8 vectors w (the sign trick of dot_i8_i8), d[8]; q4_K and q6_K
 * in qgemm-panels-impl.h. The panel kernels live there too, compiled here
 * (maddubs + madd) and in qgemm_avx512.c (AVX512-VNNI vpdpbusd) from these
 * same panels. */
#define QGEMM_KERNEL(name) name##_avx2
#include "qgemm-panels-impl.h"

size_t cdl_qgemm_panel_bytes_avx2(candle_dtype t, int64_t K) {
    return (size_t)(K / (t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q6_K ? QK_K : 32)) * rec_bytes(t);
}

/* r[j] dword g -> g[j'] lane j: the 8 x 8 transpose of 32-bit elements
 * (inlined: the q8_0 packing then signs the vectors in registers). */
static inline __attribute__((always_inline)) void transpose8_regs(const __m256i r[8], __m256i *o) {
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
        o[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        o[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

static void transpose8(const __m256i r[8], __m256i *g) {
    __m256i o[8];
    transpose8_regs(r, o);
    for (int i = 0; i < 8; i++) _mm256_storeu_si256(&g[i], o[i]);
}

static void pack_q4_k(int64_t K, int nn, const void *w, size_t ws, char *p) {
    for (int64_t b = 0; b < K / QK_K; b++) {
        char *rec = p + (size_t)b * Q4K_REC;
        __m256i r[8][8]; /* [sub-block][row] */
        int16_t sc[8][NR][2], mn[8][NR][2];
        float d[NR], dmin[NR];
        for (int j = 0; j < NR; j++) {
            d[j] = dmin[j] = 0;
            if (j >= nn) {
                for (int s = 0; s < 8; s++) {
                    r[s][j] = _mm256_setzero_si256();
                    sc[s][j][0] = sc[s][j][1] = mn[s][j][0] = mn[s][j][1] = 0;
                }
                continue;
            }
            const block_q4_K *x = (const block_q4_K *)((const char *)w + (size_t)j * ws) + b;
            d[j] = h2f(x->d);
            dmin[j] = h2f(x->dmin);
            for (int c = 0; c < 4; c++) {
                __m256i v = load32(x->qs + 32 * c);
                r[2 * c][j] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
                r[2 * c + 1][j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
            }
            for (int s = 0; s < 8; s++) {
                uint8_t a, m;
                quant_k4_scale_min(s, x->scales, &a, &m);
                sc[s][j][0] = sc[s][j][1] = a;
                mn[s][j][0] = mn[s][j][1] = m;
            }
        }
        for (int s = 0; s < 8; s++) transpose8(r[s], (__m256i *)rec + 8 * s);
        memcpy(rec + Q4K_SC, sc, sizeof sc);
        memcpy(rec + Q4K_MN, mn, sizeof mn);
        memcpy(rec + Q4K_D, d, sizeof d);
        memcpy(rec + Q4K_D + sizeof d, dmin, sizeof dmin);
    }
}

/* Sub-block 4h + k: elements 128h + 32k + l (see q6k_codes in kquants.c). */
static __m256i q6k_sub(const block_q6_K *x, int h, int k) {
    __m256i lo = load32(x->ql + 64 * h + 32 * (k & 1)), m4 = _mm256_set1_epi8(0x0F);
    lo = k < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
    __m256i hi = _mm256_srl_epi16(load32(x->qh + 32 * h), _mm_cvtsi32_si128(2 * k));
    hi = _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(3)), 4);
    return _mm256_or_si256(lo, hi);
}

static void pack_q6_k(int64_t K, int nn, const void *w, size_t ws, char *p) {
    for (int64_t b = 0; b < K / QK_K; b++) {
        char *rec = p + (size_t)b * Q6K_REC;
        __m256i r[8][8]; /* [sub-block][row] */
        int16_t sc[16][NR][2], sp[8][NR][2];
        float d[NR];
        memset(sc, 0, sizeof sc);
        memset(sp, 0, sizeof sp);
        for (int j = 0; j < NR; j++) {
            d[j] = 0;
            if (j >= nn) {
                for (int s = 0; s < 8; s++) r[s][j] = _mm256_setzero_si256();
                continue;
            }
            const block_q6_K *x = (const block_q6_K *)((const char *)w + (size_t)j * ws) + b;
            d[j] = h2f(x->d);
            for (int s = 0; s < 8; s++) r[s][j] = q6k_sub(x, s / 4, s % 4);
            for (int s = 0; s < 16; s++) sc[s][j][0] = sc[s][j][1] = sp[s / 2][j][s % 2] = x->scales[s];
        }
        for (int s = 0; s < 8; s++) transpose8(r[s], (__m256i *)rec + 8 * s);
        memcpy(rec + Q6K_SC, sc, sizeof sc);
        memcpy(rec + Q6K_SP, sp, sizeof sp);
        memcpy(rec + Q6K_D, d, sizeof d);
    }
}

/* A q5 block's codes 0..31 in element order. */
static inline __m256i q5_codes(const uint8_t *qs, const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    return _mm256_or_si256(unpack_nibbles(qs), _mm256_and_si256(bits_to_bytes(h), _mm256_set1_epi8(0x10)));
}

/* One 32-element block of nn rows: codes as bytes, d (and the *_1 m) as f32. */
static inline __attribute__((always_inline)) void load_legacy(candle_dtype t, int64_t b, int nn, const char *w,
                                                              size_t ws, __m256i *r, float *d, float *mn) {
    for (int j = 0; j < NR; j++) {
        if (j >= nn) {
            r[j] = _mm256_setzero_si256();
            d[j] = mn[j] = 0;
            continue;
        }
        const char *row = w + (size_t)j * ws;
        if (t == CANDLE_DTYPE_Q4_0) {
            const block_q4_0 *x = (const block_q4_0 *)row + b;
            r[j] = unpack_nibbles(x->qs);
            d[j] = h2f(x->d);
        } else if (t == CANDLE_DTYPE_Q4_1) {
            const block_q4_1 *x = (const block_q4_1 *)row + b;
            r[j] = unpack_nibbles(x->qs);
            d[j] = h2f(x->d);
            mn[j] = h2f(x->m);
        } else if (t == CANDLE_DTYPE_Q5_0) {
            const block_q5_0 *x = (const block_q5_0 *)row + b;
            r[j] = q5_codes(x->qs, x->qh);
            d[j] = h2f(x->d);
        } else if (t == CANDLE_DTYPE_Q5_1) {
            const block_q5_1 *x = (const block_q5_1 *)row + b;
            r[j] = q5_codes(x->qs, x->qh);
            d[j] = h2f(x->d);
            mn[j] = h2f(x->m);
        } else {
            const block_q8_0 *x = (const block_q8_0 *)row + b;
            r[j] = load32(x->qs);
            d[j] = h2f(x->d);
        }
    }
}

/* t and (for full panels) nn are constants after inlining, so the row loop
 * has no per-row branches and nothing is zeroed that is then overwritten. */
static inline __attribute__((always_inline)) void pack_legacy(candle_dtype t, int64_t K, int nn, const char *w,
                                                              size_t ws, char *p) {
    size_t rb = rec_bytes(t);
    /* the next panel's lines, spread over the blocks (see prefetch_share) */
    const char *next = w + (size_t)NR * ws;
    size_t lines = ((size_t)NR * ws + 63) / 64, per = (lines + (size_t)(K / 32) - 1) / (size_t)(K / 32);
    for (int64_t b = 0; b < K / 32; b++) {
        for (size_t l = (size_t)b * per; l < (size_t)(b + 1) * per && l < lines; l++)
            _mm_prefetch(next + 64 * l, _MM_HINT_T0);
        char *rec = p + (size_t)b * rb;
        __m256i r[8];
        float d[NR], mn[NR];
        load_legacy(t, b, nn, w, ws, r, d, mn);
        __m256i *g = (__m256i *)rec;
        if (t == CANDLE_DTYPE_Q8_0) {
            __m256i o[8];
            transpose8_regs(r, o);
            for (int i = 0; i < 8; i++) {
                _mm256_storeu_si256(&g[8 + i], o[i]);
                _mm256_storeu_si256(&g[i], _mm256_sign_epi8(o[i], o[i]));
            }
            memcpy(rec + 16 * 32, d, sizeof d);
        } else {
            transpose8(r, g);
            memcpy(rec + 8 * 32, d, sizeof d);
            if (min_type(t)) memcpy(rec + 8 * 32 + sizeof d, mn, sizeof mn);
        }
    }
}

/* The f16 words at w + j * ws + 4 * i for rows j < 8 (q4_1: d, m; q4_0: d
 * and two code bytes), as f32 [row 0 word 0, row 0 word 1, row 1 word 0,
 * ...] over two vectors; then words 0 and words 1 of the 8 rows. */
static inline void load_scales8(const char *w, size_t ws, __m256 *d, __m256 *mn) {
    __m128i h[2];
    for (int q = 0; q < 2; q++) {
        int32_t v[4];
        for (int j = 0; j < 4; j++) memcpy(&v[j], w + (size_t)(4 * q + j) * ws, 4);
        h[q] = _mm_setr_epi32(v[0], v[1], v[2], v[3]);
    }
    __m256 f0 = _mm256_cvtph_ps(h[0]), f1 = _mm256_cvtph_ps(h[1]);
    /* per 128-bit lane [r0 r1 r4 r5 | r2 r3 r6 r7]: 64-bit chunks 0 2 1 3 */
    __m256 e = _mm256_shuffle_ps(f0, f1, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(f0, f1, _MM_SHUFFLE(3, 1, 3, 1));
    *d = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    *mn = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* The fifth bits of code group k (elements 4k..4k+3 when hi is 0, else
 * 16 + 4k..) of the 8 rows whose qh words are the lanes of qh, as 0x10
 * bytes in the group vector's layout (lane j: row j). */
static inline __m256i q5_group_bits(__m256i qh, int k, int hi) {
    /* each lane's byte holding the 4 bits, to all four of its bytes */
    int src = 2 * hi + k / 2;
    const __m256i ctrl = _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0,
                                                          0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
                                         _mm256_set1_epi8((char)src));
    const __m256i sel = _mm256_set1_epi32(k % 2 ? (int)0x80402010 : 0x08040201);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(qh, ctrl), sel);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10));
}

/* Full nibble-type panels transpose the packed 16 code bytes of the rows
 * (rows j and j + 4 in one vector: a 4 x 4 dword transpose per 128-bit
 * half) and split the nibbles after: dword g of a row holds elements
 * 4g..4g+3 in its low nibbles and 16+4g.. in its high ones, so the same
 * groups as pack_legacy in a third of the shuffles, with the scales
 * converted 8 at a time; q5 ors each group's fifth bits in from the rows'
 * qh words (one vector, lane j row j). */
static inline __attribute__((always_inline)) void pack_q4_full(candle_dtype t, int64_t K, const char *w, size_t ws,
                                                               char *p) {
    size_t rb = rec_bytes(t), bsz, qoff, hoff = 0;
    switch (t) {
    case CANDLE_DTYPE_Q4_0: bsz = sizeof(block_q4_0), qoff = offsetof(block_q4_0, qs); break;
    case CANDLE_DTYPE_Q4_1: bsz = sizeof(block_q4_1), qoff = offsetof(block_q4_1, qs); break;
    case CANDLE_DTYPE_Q5_0:
        bsz = sizeof(block_q5_0), qoff = offsetof(block_q5_0, qs), hoff = offsetof(block_q5_0, qh);
        break;
    default: bsz = sizeof(block_q5_1), qoff = offsetof(block_q5_1, qs), hoff = offsetof(block_q5_1, qh); break;
    }
    const char *next = w + (size_t)NR * ws;
    size_t lines = ((size_t)NR * ws + 63) / 64, per = (lines + (size_t)(K / 32) - 1) / (size_t)(K / 32);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < K / 32; b++) {
        for (size_t l = (size_t)b * per; l < (size_t)(b + 1) * per && l < lines; l++)
            _mm_prefetch(next + 64 * l, _MM_HINT_T0);
        const char *blk = w + (size_t)b * bsz;
        char *rec = p + (size_t)b * rb;
        __m256i r[4];
        for (int k = 0; k < 4; k++)
            r[k] = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk + (size_t)k * ws + qoff))),
                _mm_loadu_si128((const __m128i *)(blk + (size_t)(k + 4) * ws + qoff)), 1);
        __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        __m256i g[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                        _mm256_unpackhi_epi64(t1, t3)};
        __m256i qh = _mm256_setzero_si256();
        if (q5_type(t)) {
            int32_t h[NR];
            for (int j = 0; j < NR; j++) memcpy(&h[j], blk + (size_t)j * ws + hoff, 4);
            qh = _mm256_setr_epi32(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
        }
        __m256i *o = (__m256i *)rec;
        for (int k = 0; k < 4; k++) {
            __m256i lo = _mm256_and_si256(g[k], m4), hi = _mm256_and_si256(_mm256_srli_epi16(g[k], 4), m4);
            if (q5_type(t)) {
                lo = _mm256_or_si256(lo, q5_group_bits(qh, k, 0));
                hi = _mm256_or_si256(hi, q5_group_bits(qh, k, 1));
            }
            _mm256_storeu_si256(&o[k], lo);
            _mm256_storeu_si256(&o[4 + k], hi);
        }
        __m256 d, mn;
        load_scales8(blk, ws, &d, &mn);
        _mm256_storeu_ps((float *)(rec + 8 * 32), d);
        if (min_type(t)) _mm256_storeu_ps((float *)(rec + 8 * 32 + NR * 4), mn);
    }
}

static void pack_q4_0_full(int64_t K, const char *w, size_t ws, char *p) { pack_q4_full(CANDLE_DTYPE_Q4_0, K, w, ws, p); }
static void pack_q4_1_full(int64_t K, const char *w, size_t ws, char *p) { pack_q4_full(CANDLE_DTYPE_Q4_1, K, w, ws, p); }
static void pack_q5_0_full(int64_t K, const char *w, size_t ws, char *p) { pack_q4_full(CANDLE_DTYPE_Q5_0, K, w, ws, p); }
static void pack_q5_1_full(int64_t K, const char *w, size_t ws, char *p) { pack_q4_full(CANDLE_DTYPE_Q5_1, K, w, ws, p); }
static void pack_q8_0_full(int64_t K, const char *w, size_t ws, char *p) { pack_legacy(CANDLE_DTYPE_Q8_0, K, NR, w, ws, p); }

/* The weight streams from memory and the panel's rows are read 8 at a time
 * in short pieces, which the hardware prefetchers follow poorly: packing a
 * panel asks for the next panel's rows (contiguous after these), so they
 * arrive while this panel is multiplied with the activation rows. Issued
 * all at once, the prefetches stall on the full miss queue: each block
 * issues its share (the legacy types inline, the full K panels here; the
 * partial K panels are the last ones). Prefetches past the weight's end
 * are harmless: they never fault. */
static inline void prefetch_share(const char *w, size_t ws, int64_t b, int64_t nb) {
    const char *next = w + (size_t)NR * ws;
    size_t lines = ((size_t)NR * ws + 63) / 64, per = (lines + (size_t)nb - 1) / (size_t)nb;
    for (size_t l = (size_t)b * per; l < (size_t)(b + 1) * per && l < lines; l++)
        _mm_prefetch(next + 64 * l, _MM_HINT_T0);
}

static void pack_q4_k_full(int64_t K, const char *w, size_t ws, char *p) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const int64_t nb = K / QK_K;
    for (int64_t b = 0; b < nb; b++) {
        prefetch_share(w, ws, b, nb);
        char *rec = p + (size_t)b * Q4K_REC;
        __m256i *g = (__m256i *)rec;
        const block_q4_K *x[NR];
        for (int j = 0; j < NR; j++) x[j] = (const block_q4_K *)(w + (size_t)j * ws) + b;
        for (int c = 0; c < 4; c++) {
            __m256i r[8], o[8];
            for (int j = 0; j < NR; j++) r[j] = load32(x[j]->qs + 32 * c);
            transpose8_regs(r, o);
            for (int i = 0; i < 8; i++) {
                _mm256_storeu_si256(&g[16 * c + i], _mm256_and_si256(o[i], m4));
                _mm256_storeu_si256(&g[16 * c + 8 + i], _mm256_and_si256(_mm256_srli_epi16(o[i], 4), m4));
            }
        }
        uint32_t sc[8][NR], mn[8][NR];
        float d[NR], dmin[NR];
        for (int j = 0; j < NR; j++) {
            uint32_t u[3];
            memcpy(u, x[j]->scales, 12);
            uint32_t s0 = u[0] & 0x3F3F3F3Fu, m0 = u[1] & 0x3F3F3F3Fu;
            uint32_t s1 = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 2) & 0x30303030u);
            uint32_t m1 = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 2) & 0x30303030u);
            for (int k = 0; k < 4; k++) { /* both 16-bit halves: the value */
                sc[k][j] = ((s0 >> 8 * k) & 0xFF) * 0x10001u;
                sc[4 + k][j] = ((s1 >> 8 * k) & 0xFF) * 0x10001u;
                mn[k][j] = ((m0 >> 8 * k) & 0xFF) * 0x10001u;
                mn[4 + k][j] = ((m1 >> 8 * k) & 0xFF) * 0x10001u;
            }
            d[j] = h2f(x[j]->d);
            dmin[j] = h2f(x[j]->dmin);
        }
        memcpy(rec + Q4K_SC, sc, sizeof sc);
        memcpy(rec + Q4K_MN, mn, sizeof mn);
        memcpy(rec + Q4K_D, d, sizeof d);
        memcpy(rec + Q4K_D + sizeof d, dmin, sizeof dmin);
    }
}

/* Full q6_K panels: the 8 rows' ql and qh chunks transposed as bytes (6
 * transposes per block instead of 8), each sub-block's codes then
 * assembled from them as q6k_sub does; scales as 32-bit words. */
static void pack_q6_k_full(int64_t K, const char *w, size_t ws, char *p) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const int64_t nb = K / QK_K;
    for (int64_t b = 0; b < nb; b++) {
        prefetch_share(w, ws, b, nb);
        char *rec = p + (size_t)b * Q6K_REC;
        __m256i *g = (__m256i *)rec;
        const block_q6_K *x[NR];
        for (int j = 0; j < NR; j++) x[j] = (const block_q6_K *)(w + (size_t)j * ws) + b;
        for (int h = 0; h < 2; h++) {
            __m256i r[8], ql[2][8], qh[8];
            for (int half = 0; half < 2; half++) {
                for (int j = 0; j < NR; j++) r[j] = load32(x[j]->ql + 64 * h + 32 * half);
                transpose8_regs(r, ql[half]);
            }
            for (int j = 0; j < NR; j++) r[j] = load32(x[j]->qh + 32 * h);
            transpose8_regs(r, qh);
            for (int k = 0; k < 4; k++) /* sub-block 4h + k */
                for (int i = 0; i < 8; i++) {
                    __m256i lo = ql[k & 1][i];
                    lo = k < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh[i], 2 * k), m2);
                    _mm256_storeu_si256(&g[8 * (4 * h + k) + i], _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
                }
        }
        uint32_t sc[16][NR], sp[8][NR];
        float d[NR];
        for (int j = 0; j < NR; j++) {
            for (int k = 0; k < 16; k++) sc[k][j] = (uint32_t)(uint16_t)(int16_t)x[j]->scales[k] * 0x10001u;
            for (int k = 0; k < 8; k++)
                sp[k][j] = (uint32_t)(uint16_t)(int16_t)x[j]->scales[2 * k] |
                           (uint32_t)(uint16_t)(int16_t)x[j]->scales[2 * k + 1] << 16;
            d[j] = h2f(x[j]->d);
        }
        memcpy(rec + Q6K_SC, sc, sizeof sc);
        memcpy(rec + Q6K_SP, sp, sizeof sp);
        memcpy(rec + Q6K_D, d, sizeof d);
    }
}

void cdl_qgemm_pack_avx2(candle_dtype t, int64_t K, int nn, const void *w, size_t ws, void *p) {
    if (t == CANDLE_DTYPE_Q6_K && nn == NR) pack_q6_k_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_K && nn == NR) pack_q4_k_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q6_K) pack_q6_k(K, nn, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_K) pack_q4_k(K, nn, w, ws, p);
    else if (nn < NR) pack_legacy(t, K, nn, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_0) pack_q4_0_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_1) pack_q4_1_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q5_0) pack_q5_0_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q5_1) pack_q5_1_full(K, w, ws, p);
    else pack_q8_0_full(K, w, ws, p);
}

size_t cdl_qgemm_aux_bytes_avx2(candle_dtype t, int64_t K) {
    if (t == CANDLE_DTYPE_Q8_0) return (size_t)(K / 32) * sizeof(int32_t);
    return off_type(t) ? (size_t)(K / 32) * 2 * sizeof(float) : 0;
}

/* Eight blocks at a time: their code sums in one vector (lane i = block
 * i, the reduction of q8_0_row in gemv_avx2.c), the scales converted
 * together. */
static void prep_row(float off, const block_q8_0 *y, int64_t nb, float *d, float *s) {
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i r[8];
        for (int j = 0; j < 8; j++) r[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, load32(y[b + j].qs)), one16);
        __m256i lo = reduce_x4(r[0], r[1], r[2], r[3]), hi = reduce_x4(r[4], r[5], r[6], r[7]);
        __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
        __m256 dh = h2f_x8(&y[b].d, sizeof *y);
        _mm256_storeu_ps(d + b, dh);
        _mm256_storeu_ps(s + b, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(off), dh), _mm256_cvtepi32_ps(sum)));
    }
    for (; b < nb; b++) {
        float dh = h2f(y[b].d);
        d[b] = dh;
        s[b] = off * dh * (float)hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(one8, load32(y[b].qs)), one16));
    }
}

void cdl_qgemm_prep_avx2(candle_dtype t, int64_t K, int64_t M, const void *x, size_t xs, void *aux) {
    int64_t nb = K / 32;
    if (t == CANDLE_DTYPE_Q8_0) { /* the code sums (the VNNI kernels' w + 128 correction) */
        const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
        int32_t *o = aux;
        for (int64_t m = 0; m < M; m++, o += nb) {
            const block_q8_0 *y = (const block_q8_0 *)((const char *)x + (size_t)m * xs);
            for (int64_t b = 0; b < nb; b++)
                o[b] = hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(one8, load32(y[b].qs)), one16));
        }
        return;
    }
    if (!off_type(t)) return;
    float *o = aux;
    for (int64_t m = 0; m < M; m++, o += 2 * nb)
        prep_row(t == CANDLE_DTYPE_Q4_0 ? -8.0f : -16.0f, (const block_q8_0 *)((const char *)x + (size_t)m * xs), nb,
                 o, o + nb);
}
