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
 * below. */
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

static size_t rec_bytes(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_Q6_K: return Q6K_REC;
    case CANDLE_DTYPE_Q4_K: return Q4K_REC;
    case CANDLE_DTYPE_Q8_0: return 16 * 32 + NR * 4;
    default: return 8 * 32 + (min_type(t) ? 2 : 1) * NR * 4;
    }
}

size_t candle_qgemm_panel_bytes_avx2(candle_dtype t, int64_t K) {
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
    /* the next panel's lines, spread over the blocks (see prefetch_panel) */
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
 * arrive while this panel is multiplied with the activation rows. (Issued
 * all at once, the prefetches stall on the full miss queue: the legacy
 * types spread them over their blocks.) Prefetches past the weight's end
 * are harmless: they never fault. */
static void prefetch_panel(const char *w, size_t ws) {
    const char *next = w + (size_t)NR * ws;
    for (size_t off = 0; off < (size_t)NR * ws; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
}

void candle_qgemm_pack_avx2(candle_dtype t, int64_t K, int nn, const void *w, size_t ws, void *p) {
    if (t == CANDLE_DTYPE_Q6_K || t == CANDLE_DTYPE_Q4_K) prefetch_panel(w, ws);
    if (t == CANDLE_DTYPE_Q6_K) pack_q6_k(K, nn, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_K) pack_q4_k(K, nn, w, ws, p);
    else if (nn < NR) pack_legacy(t, K, nn, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_0) pack_q4_0_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q4_1) pack_q4_1_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q5_0) pack_q5_0_full(K, w, ws, p);
    else if (t == CANDLE_DTYPE_Q5_1) pack_q5_1_full(K, w, ws, p);
    else pack_q8_0_full(K, w, ws, p);
}

static inline __m256i bcast4(const int8_t *q, int g) {
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return _mm256_set1_epi32(v);
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
 * (two products; the sums are exact integers). */
typedef struct rows4 {
    const char *x[4];     /* activation rows in the vec_dot type */
    const float *aux[4];  /* their aux records (q4_0, q5_0), else NULL */
    float *out[4];
    int64_t nb;           /* blocks per row */
} rows4;

size_t candle_qgemm_aux_bytes_avx2(candle_dtype t, int64_t K) {
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

void candle_qgemm_prep_avx2(candle_dtype t, int64_t K, int64_t M, const void *x, size_t xs, void *aux) {
    if (!off_type(t)) return;
    int64_t nb = K / 32;
    float *o = aux;
    for (int64_t m = 0; m < M; m++, o += 2 * nb)
        prep_row(t == CANDLE_DTYPE_Q4_0 ? -8.0f : -16.0f, (const block_q8_0 *)((const char *)x + (size_t)m * xs), nb,
                 o, o + nb);
}

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
 * checks the bits against candle_gemv_rows. */
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
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256(&g[i]), bcast4(q, i)), _mm256_set1_epi16(1));
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
            __m256i a[4], w = _mm256_loadu_si256(&g[8 * s]);
            FOR_R a[r] = _mm256_maddubs_epi16(w, bcast4(y[r]->qs + 32 * s, 0));
            for (int i = 1; i < 8; i++) {
                w = _mm256_loadu_si256(&g[8 * s + i]);
                FOR_R a[r] = _mm256_add_epi16(a[r], _mm256_maddubs_epi16(w, bcast4(y[r]->qs + 32 * s, i)));
            }
            __m256i scv = _mm256_loadu_si256(&sc[s]), mnv = _mm256_loadu_si256(&mn[s]);
            FOR_R {
                tot[r] = _mm256_add_epi32(tot[r], _mm256_madd_epi16(a[r], scv));
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

void candle_qgemm_panel_rows_avx2(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                  const void *aux, int64_t M, float *c, int64_t ldc) {
    const panel_fn *fns = panel_fns(t);
    size_t ab = candle_qgemm_aux_bytes_avx2(t, K);
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
