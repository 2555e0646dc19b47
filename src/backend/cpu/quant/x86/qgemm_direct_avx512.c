/* The small-M quantized product on AVX512-VNNI straight from the weight
 * blocks (q4_0, q4_1, q8_0; q4_z128 as q8_0, each pass's NT rows
 * rewritten first: cdl_q4_z128_to_q8_0_avx2): no per-call panel packing.
 *
 * The panel kernels (qgemm-panels-impl.h) put weight rows in the vector
 * lanes, which needs the weight blocks repacked (transposed, nibbles
 * unpacked) on every call: at M = 16 (a server step of 16 sequences) the
 * packing was about a quarter of the product. Here the lanes are the
 * activation rows instead: a tile of up to 16 activation rows is
 * transposed once per call (vector k of block b holds codes 4k..4k+3 of
 * each row), and each weight block is read in place: a 4-byte group of its
 * codes is broadcast to all lanes and multiplied into the tile's vector
 * with vpdpbusd. For the nibble types a broadcast dword qs[4k..4k+3] holds
 * the codes of group k (low nibbles) and of group 4 + k (high nibbles):
 * the low nibbles are masked out (codes 0..15), the high ones masked in
 * place (16 x the codes, 0..240: the sum is 16 x the exact sum, shifted
 * back exactly). q8_0 takes w xor 0x80 = w + 128 (unsigned) and subtracts
 * 128 x the block's code sum, as the VNNI panel kernels do.
 *
 * Per output the float operations are the panel kernels' (and so the
 * matrix-vector kernels') in the same order: block 8g + i of the full
 * groups to accumulator lane i (q4_1's minimum term to a second set), each
 * block scale applied to its exact integer sum; the tail blocks' 8 group
 * sums to the lanes and their offset terms to a scalar; the lanes' tree
 * sum, then the scalar. So the bits equal cdl_gemv_rows (tested by
 * test_qgemm_order). */
#include <string.h>

#include "avx2-impl.h"

#include "../qgemm-impl.h"
#include "quant-x86-impl.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_M 16
/* weight rows per pass: their accumulators and the block's 8 activation
 * vectors stay in registers */
#ifndef NT
#define NT 6
#endif
#define UNROLL _Pragma("GCC unroll 8")

int cdl_qgemm_has_direct_vnni(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q8_0 || t == CANDLE_DTYPE_Q4_Z128;
}

static inline size_t blk_bytes(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_1 ? sizeof(block_q4_1) : t == CANDLE_DTYPE_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0);
}

static size_t tile_bytes(int64_t K) { return (size_t)(K / 32) * (8 * 64 + 2 * 64); }

size_t cdl_qgemm_direct_bytes_vnni(candle_dtype t, int64_t K, int64_t M) {
    int64_t tiles = (M + TILE_M - 1) / TILE_M;
    size_t z = t == CANDLE_DTYPE_Q4_Z128 ? NT * candle_dtype_row_size(CANDLE_DTYPE_Q8_0, K) : 0;
    if (t == CANDLE_DTYPE_Q4_Z128) t = CANDLE_DTYPE_Q8_0;
    return 64 + (size_t)tiles * tile_bytes(K) + (size_t)M * cdl_qgemm_aux_bytes_avx2(t, K) + z;
}

/* The tile of rows x[0..mm): codes X[b][k] (16 lanes x 4 bytes), then per
 * block the scale vector DY[b] and the offset vector SY[b] (q4_1: q8_1's s;
 * q4_0: the aux term; q8_0: int32 128 x the code sum). Lanes past mm are
 * zeros. */
static void build_tile(candle_dtype t, int64_t K, int mm, const char *x, size_t xs, const char *aux, size_t ab,
                       char *tile) {
    static const char zeros[32];
    int64_t nb = K / 32;
    size_t xbs = t == CANDLE_DTYPE_Q4_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    size_t qoff = t == CANDLE_DTYPE_Q4_1 ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs);
    __m512i *X = (__m512i *)tile;
    float *DY = (float *)(tile + (size_t)nb * 512), *SY = DY + nb * TILE_M;
    const __mmask16 live = (__mmask16)((1u << mm) - 1);
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)xs));
    const __m512i arows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32((int)ab));
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int64_t b = 0; b < nb; b++) {
        /* codes: rows j and 8 + j in the halves of r[j], then an 8 x 8 dword
         * transpose per half (group k of rows 0..7 | of rows 8..15) */
        __m512i r[8], u[8];
        for (int j = 0; j < 8; j++) {
            const char *p0 = j < mm ? x + (size_t)j * xs + (size_t)b * xbs + qoff : zeros;
            const char *p1 = j + 8 < mm ? x + (size_t)(j + 8) * xs + (size_t)b * xbs + qoff : zeros;
            r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                                      _mm256_loadu_si256((const __m256i *)p1), 1);
        }
        for (int j = 0; j < 8; j += 4) {
            __m512i t0 = _mm512_unpacklo_epi32(r[j], r[j + 1]), t1 = _mm512_unpackhi_epi32(r[j], r[j + 1]);
            __m512i t2 = _mm512_unpacklo_epi32(r[j + 2], r[j + 3]), t3 = _mm512_unpackhi_epi32(r[j + 2], r[j + 3]);
            u[j] = _mm512_unpacklo_epi64(t0, t2);
            u[j + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[j + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[j + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        /* u[c] (c < 4) holds groups c (128-bit lanes 0, 2) and 4 + c (lanes
         * 1, 3) of rows 0..3 / 8..11, u[4 + c] the same of rows 4..7 / 12..15 */
        for (int c = 0; c < 4; c++) {
            _mm512_store_si512(&X[b * 8 + c], _mm512_permutex2var_epi64(u[c], lo, u[4 + c]));
            _mm512_store_si512(&X[b * 8 + 4 + c], _mm512_permutex2var_epi64(u[c], hi, u[4 + c]));
        }
        /* the scales (exact f16 conversions) and offsets, lanes past mm zero */
        if (t == CANDLE_DTYPE_Q4_0) {
            const float *a = (const float *)aux;
            _mm512_store_ps(DY + b * TILE_M, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, arows, a + b, 1));
            _mm512_store_ps(SY + b * TILE_M,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, arows, a + nb + b, 1));
            continue;
        }
        __m512i ds = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, x + (size_t)b * xbs, 1);
        _mm512_store_ps(DY + b * TILE_M, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(ds)));
        if (t == CANDLE_DTYPE_Q4_1) {
            _mm512_store_ps(SY + b * TILE_M, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(ds, 16))));
        } else {
            __m512i cs = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, arows,
                                                     (const int32_t *)aux + b, 1);
            _mm512_store_si512((__m512i *)(SY + b * TILE_M), _mm512_slli_epi32(cs, 7));
        }
    }
}

ALWAYS_INLINE __m512i bcast_dw(const uint8_t *q, int k) {
    int32_t v;
    memcpy(&v, q + 4 * k, 4);
    return _mm512_set1_epi32(v);
}

static inline size_t qs_off(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_1 ? offsetof(block_q4_1, qs) : t == CANDLE_DTYPE_Q4_0 ? offsetof(block_q4_0, qs)
                                                                                      : offsetof(block_q8_0, qs);
}

/* mask & (dword at q broadcast): one instruction (an embedded broadcast
 * of the memory operand), which compilers do not form by themselves when
 * the broadcast has two uses. */
ALWAYS_INLINE __m512i and_bcast(const uint8_t *q, __m512i mask) {
    __m512i r;
    __asm__("vpandd %1%{1to16%}, %2, %0" : "=v"(r) : "m"(*(const int32_t *)q), "v"(mask));
    return r;
}
ALWAYS_INLINE __m512i xor_bcast(const uint8_t *q, __m512i mask) {
    __m512i r;
    __asm__("vpxord %1%{1to16%}, %2, %0" : "=v"(r) : "m"(*(const int32_t *)q), "v"(mask));
    return r;
}

/* The exact integer sum of a weight block with the tile's 16 rows. */
ALWAYS_INLINE __m512i block_sum(candle_dtype t, const uint8_t *qs, const __m512i *x, __m512i s128) {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    if (t == CANDLE_DTYPE_Q8_0) {
        const __m512i f = _mm512_set1_epi8((char)0x80);
        UNROLL for (int k = 0; k < 4; k++) {
            lo = _mm512_dpbusd_epi32(lo, xor_bcast(qs + 4 * k, f), x[k]);
            hi = _mm512_dpbusd_epi32(hi, xor_bcast(qs + 16 + 4 * k, f), x[4 + k]);
        }
        return _mm512_sub_epi32(_mm512_add_epi32(lo, hi), s128);
    }
    const __m512i ml = _mm512_set1_epi8(0x0F), mh = _mm512_set1_epi8((char)0xF0);
    UNROLL for (int k = 0; k < 4; k++) {
        lo = _mm512_dpbusd_epi32(lo, and_bcast(qs + 4 * k, ml), x[k]);
        hi = _mm512_dpbusd_epi32(hi, and_bcast(qs + 4 * k, mh), x[4 + k]);
    }
    return _mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4));
}

/* Group k's exact sum alone (the tail blocks). */
ALWAYS_INLINE __m512i group_sum(candle_dtype t, const uint8_t *qs, int k, __m512i x) {
    const __m512i z = _mm512_setzero_si512();
    if (t == CANDLE_DTYPE_Q8_0) {
        __m512i d = _mm512_dpbusd_epi32(z, _mm512_xor_si512(bcast_dw(qs, k), _mm512_set1_epi8((char)0x80)), x);
        return _mm512_sub_epi32(d, _mm512_slli_epi32(_mm512_dpbusd_epi32(z, _mm512_set1_epi8(1), x), 7));
    }
    __m512i v = bcast_dw(qs, k & 3);
    if (k >= 4) v = _mm512_srli_epi32(v, 4);
    return _mm512_dpbusd_epi32(z, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)), x);
}

/* The weight block's f16 at p as f32 in all lanes. */
ALWAYS_INLINE __m512 wscale16(const char *p) {
    int16_t h;
    memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16(h));
}
ALWAYS_INLINE void wscales(candle_dtype t, const char *blk, float *d, float *mn) {
    uint16_t h[2];
    memcpy(h, blk, 4);
    *d = h2f(h[0]);
    *mn = t == CANDLE_DTYPE_Q4_1 ? h2f(h[1]) : 0.0f;
}

typedef struct acc16 {
    __m512 a[8][NT], m[8][NT];
    __m512 dd[7][NT]; /* the tail blocks' dw * dy */
    float e[NT][TILE_M];
} acc16;

/* Weight rows w[0..R) (ws apart) times one tile; res[r][m]. The weight
 * streams from memory and a pass reads its rows lane by lane, 8 blocks
 * apart, which the hardware prefetchers do not follow: each step of the
 * pass asks for its share of the next pass's lines (next, lines 64-byte
 * lines); issued all at once they stall on the full miss queue (as in the
 * panels' packing, qgemm_avx2.c). */
ALWAYS_INLINE void tile_rows(candle_dtype t, int R, int64_t K, const char *w, size_t ws, const char *tile,
                             float res[NT][TILE_M], const char *next, size_t lines) {
    const int64_t nb = K / 32, ng = nb / 8;
    const int nt = (int)(nb - 8 * ng);
    const size_t bb = blk_bytes(t), qo = qs_off(t);
    const __m512i *X = (const __m512i *)tile;
    const float *DY = (const float *)(tile + (size_t)nb * 512), *SY = DY + nb * TILE_M;
    acc16 L;
    const size_t steps = 8 * (size_t)(ng > 0 ? ng : 1), per = (lines + steps - 1) / steps;
    size_t pl = 0;
    /* the tail blocks: their scales, and their offset terms in the
     * matrix-vector kernel's scalar statement (see tail_row) */
    for (int r = 0; r < R; r++) {
        float e[TILE_M] = {0};
        for (int tb = 0; tb < nt; tb++) {
            int64_t b = 8 * ng + tb;
            const char *blk = w + (size_t)r * ws + (size_t)b * bb;
            L.dd[tb][r] = _mm512_mul_ps(wscale16(blk), _mm512_load_ps(DY + b * TILE_M));
            if (t == CANDLE_DTYPE_Q8_0) continue;
            float d, mn;
            wscales(t, blk, &d, &mn);
            float wv = t == CANDLE_DTYPE_Q4_1 ? mn : d, s[TILE_M];
            memcpy(s, SY + b * TILE_M, sizeof s);
            for (int j = 0; j < TILE_M; j++) e[j] += wv * s[j];
        }
        memcpy(L.e[r], e, sizeof e);
    }
    for (int i = 0; i < 8; i++) {
        __m512 a[NT], m[NT];
        UNROLL for (int r = 0; r < R; r++) a[r] = m[r] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            int64_t b = 8 * g + i;
            for (size_t e = pl + per; pl < e && pl < lines; pl++) _mm_prefetch(next + 64 * pl, _MM_HINT_T0);
            __m512i x[8];
            UNROLL for (int k = 0; k < 8; k++) x[k] = _mm512_load_si512(&X[b * 8 + k]);
            __m512 dy = _mm512_load_ps(DY + b * TILE_M), sy = _mm512_load_ps(SY + b * TILE_M);
            __m512i s128 = _mm512_load_si512((const __m512i *)(SY + b * TILE_M));
            UNROLL for (int r = 0; r < R; r++) {
                const char *blk = w + (size_t)r * ws + (size_t)b * bb;
                __m512 v = _mm512_cvtepi32_ps(block_sum(t, (const uint8_t *)blk + qo, x, s128));
                __m512 dw = wscale16(blk);
                if (t == CANDLE_DTYPE_Q4_0) a[r] = _mm512_fmadd_ps(dw, _mm512_fmadd_ps(dy, v, sy), a[r]);
                else a[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), v, a[r]);
                if (t == CANDLE_DTYPE_Q4_1) m[r] = _mm512_fmadd_ps(wscale16(blk + 2), sy, m[r]);
            }
        }
        if (ng == 0)
            for (size_t e = pl + per; pl < e && pl < lines; pl++) _mm_prefetch(next + 64 * pl, _MM_HINT_T0);
        /* the tail blocks' group i to lane i, after the full groups */
        for (int tb = 0; tb < nt; tb++) {
            int64_t b = 8 * ng + tb;
            __m512i x = _mm512_load_si512(&X[b * 8 + i]);
            UNROLL for (int r = 0; r < R; r++) {
                const uint8_t *qs = (const uint8_t *)w + (size_t)r * ws + (size_t)b * bb + qo;
                a[r] = _mm512_fmadd_ps(L.dd[tb][r], _mm512_cvtepi32_ps(group_sum(t, qs, i, x)), a[r]);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            L.a[i][r] = a[r];
            L.m[i][r] = m[r];
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        __m512 v[8];
        for (int i = 0; i < 8; i++) v[i] = t == CANDLE_DTYPE_Q8_0 ? L.a[i][r] : _mm512_add_ps(L.a[i][r], L.m[i][r]);
        for (int i = 0; i < 4; i++) v[i] = _mm512_add_ps(v[i], v[4 + i]);
        __m512 h = _mm512_add_ps(_mm512_add_ps(v[0], v[2]), _mm512_add_ps(v[1], v[3]));
        if (t != CANDLE_DTYPE_Q8_0) h = _mm512_add_ps(h, _mm512_loadu_ps(L.e[r]));
        _mm512_storeu_ps(res[r], h);
    }
}

typedef void (*tile_fn)(int64_t K, const char *w, size_t ws, const char *tile, float res[NT][TILE_M], const char *next,
                        size_t lines);
#define TILE_FN(T, DT, R)                                                                                           \
    static void T##_t##R(int64_t K, const char *w, size_t ws, const char *tile, float res[NT][TILE_M],             \
                         const char *next, size_t lines) {                                                          \
        tile_rows(DT, R, K, w, ws, tile, res, next, lines);                                                         \
    }
#if NT == 4
#define TILE_INSTANCES(T, DT)                                                                                       \
    TILE_FN(T, DT, 1) TILE_FN(T, DT, 2) TILE_FN(T, DT, 3) TILE_FN(T, DT, 4)                                         \
    static const tile_fn T##_tfns[NT] = {T##_t1, T##_t2, T##_t3, T##_t4};
#elif NT == 6
#define TILE_INSTANCES(T, DT)                                                                                       \
    TILE_FN(T, DT, 1) TILE_FN(T, DT, 2) TILE_FN(T, DT, 3) TILE_FN(T, DT, 4) TILE_FN(T, DT, 5) TILE_FN(T, DT, 6)     \
    static const tile_fn T##_tfns[NT] = {T##_t1, T##_t2, T##_t3, T##_t4, T##_t5, T##_t6};
#else
#define TILE_INSTANCES(T, DT)                                                                                       \
    TILE_FN(T, DT, 1) TILE_FN(T, DT, 2) TILE_FN(T, DT, 3) TILE_FN(T, DT, 4) TILE_FN(T, DT, 5) TILE_FN(T, DT, 6)     \
    TILE_FN(T, DT, 7) TILE_FN(T, DT, 8)                                                                             \
    static const tile_fn T##_tfns[NT] = {T##_t1, T##_t2, T##_t3, T##_t4, T##_t5, T##_t6, T##_t7, T##_t8};
#endif
TILE_INSTANCES(q4_0, CANDLE_DTYPE_Q4_0)
TILE_INSTANCES(q4_1, CANDLE_DTYPE_Q4_1)
TILE_INSTANCES(q8_0, CANDLE_DTYPE_Q8_0)

void cdl_qgemm_direct_vnni(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                              const void *x, size_t xs, float *c, int64_t ldc, void *scratch) {
    const bool z128 = t == CANDLE_DTYPE_Q4_Z128;
    if (z128) t = CANDLE_DTYPE_Q8_0;
    const tile_fn *fns = t == CANDLE_DTYPE_Q4_0 ? q4_0_tfns : t == CANDLE_DTYPE_Q4_1 ? q4_1_tfns : q8_0_tfns;
    int64_t tiles = (M + TILE_M - 1) / TILE_M;
    size_t tb = tile_bytes(K), ab = cdl_qgemm_aux_bytes_avx2(t, K), rs = candle_dtype_row_size(t, K);
    char *tile0 = (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63), *aux = tile0 + (size_t)tiles * tb;
    char *zrows = aux + (size_t)M * ab; /* q4_z128: the pass's rows as q8_0 */
    if (ab) cdl_qgemm_prep_avx2(t, K, M, x, xs, aux);
    for (int64_t ti = 0; ti < tiles; ti++) {
        int mm = (int)(M - ti * TILE_M < TILE_M ? M - ti * TILE_M : TILE_M);
        build_tile(t, K, mm, (const char *)x + (size_t)(ti * TILE_M) * xs, xs, aux + (size_t)(ti * TILE_M) * ab, ab,
                   tile0 + (size_t)ti * tb);
    }
    float res[NT][TILE_M];
    for (int64_t n = 0; n < N; n += NT) {
        int R = (int)(N - n < NT ? N - n : NT);
        const char *wn = (const char *)w + (size_t)n * ws, *next = wn + (size_t)NT * ws, *rows = wn;
        size_t rws = ws;
        if (z128) {
            for (int r = 0; r < R; r++) cdl_q4_z128_to_q8_0_avx2(wn + (size_t)r * ws, zrows + (size_t)r * rs, K);
            rows = zrows, rws = rs;
        }
        /* the next pass's rows (contiguous after these; past the weight's
         * end prefetches are harmless, they never fault) */
        size_t lines = n + NT < N ? ((size_t)NT * ws + 63) / 64 : 0;
        for (int64_t ti = 0; ti < tiles; ti++) {
            int mm = (int)(M - ti * TILE_M < TILE_M ? M - ti * TILE_M : TILE_M);
            fns[R - 1](K, rows, rws, tile0 + (size_t)ti * tb, res, next, ti ? 0 : lines);
            for (int m = 0; m < mm; m++)
                for (int r = 0; r < R; r++) c[(ti * TILE_M + m) * ldc + n + r] = res[r][m];
        }
    }
}
