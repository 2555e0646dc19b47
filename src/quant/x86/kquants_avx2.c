/* AVX2 kernels of the K types: the q8_K activation quantizer (bit-identical
 * to the scalar one) and the q4_K, q5_K, q6_K dots. Sub-block products are
 * summed in int32 with the sub-block scales applied by madd; the minimums
 * are folded in through q8_K's bsums, as in the scalar kernels. */
#include <stdbool.h>
#include <stddef.h>

#include "../gemv-impl.h"
#include "avx2-impl.h"

/* Shuffle controls that spread one 16-bit lane of a vector holding 8 int16
 * scales (the same in both halves) over a whole register (bcast_ctrl[j]), or
 * lane 2p over the low half and 2p+1 over the high half (pair_ctrl[p]): the
 * lanes of a maddubs result cover elements 0..15 low, 16..31 high. */
#define B16(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define B16x8(j) B16(j), B16(j), B16(j), B16(j), B16(j), B16(j), B16(j), B16(j)
static const char bcast_ctrl[8][32] __attribute__((aligned(32))) = {
    {B16x8(0), B16x8(0)}, {B16x8(1), B16x8(1)}, {B16x8(2), B16x8(2)}, {B16x8(3), B16x8(3)},
    {B16x8(4), B16x8(4)}, {B16x8(5), B16x8(5)}, {B16x8(6), B16x8(6)}, {B16x8(7), B16x8(7)},
};
static const char pair_ctrl[4][32] __attribute__((aligned(32))) = {
    {B16x8(0), B16x8(1)}, {B16x8(2), B16x8(3)}, {B16x8(4), B16x8(5)}, {B16x8(6), B16x8(7)},
};
#undef B16x8
#undef B16

static inline __m256i spread(__m256i scales16, const char *ctrl) {
    return _mm256_shuffle_epi8(scales16, _mm256_load_si256((const __m256i *)ctrl));
}

/* 8 scales (bytes, signed or not) as int16 in both halves of a register. */
static inline __m256i scales_u8(const uint8_t *p) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p)));
}
static inline __m256i scales_i8(const int8_t *p) {
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p)));
}

void candle_q8_k_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_K *b = dst;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(src + k), abs_mask));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float amax = _mm_cvtss_f32(h), max = 0;
        if (amax == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* the sign of the scale follows the first element of largest magnitude */
        for (int e = 0; e < QK_K; e++)
            if (fabsf(src[e]) == amax) {
                max = src[e];
                break;
            }
        float iscale = -127 / max;
        __m256 vis = _mm256_set1_ps(iscale);
        const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
        for (int g = 0; g < QK_K / 32; g++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + 32 * g + 8 * k), vis));
                q[k] = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
            }
            b[i].bsums[2 * g] = (int16_t)hsum_i32(_mm256_add_epi32(q[0], q[1]));
            b[i].bsums[2 * g + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q[2], q[3]));
            __m256i ab = _mm256_packs_epi32(q[0], q[1]), cd = _mm256_packs_epi32(q[2], q[3]);
            __m256i v = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                                    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * g), v);
        }
        b[i].d = 1 / iscale;
    }
}

/* The 8 6-bit scales and 8 6-bit mins of a q4_K/q5_K block, unpacked with
 * 32-bit lane arithmetic (see quant_k4_scale_min for the layout) into two
 * 64-bit integers (eight bytes each), kept in registers: going through a
 * byte array would stall each 8-byte load on two 4-byte stores. */
static inline void k4_scales(const uint8_t *packed, uint64_t *sc, uint64_t *mn) {
    uint32_t a, b, c;
    memcpy(&a, packed, 4);
    memcpy(&b, packed + 4, 4);
    memcpy(&c, packed + 8, 4);
    uint32_t lo0 = a & 0x3f3f3f3fu, lo1 = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    uint32_t hi0 = b & 0x3f3f3f3fu, hi1 = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    *sc = (uint64_t)lo0 | (uint64_t)lo1 << 32;
    *mn = (uint64_t)hi0 | (uint64_t)hi1 << 32;
}

/* 8 unsigned byte scales as int16 in both halves of a register. */
static inline __m256i scales_u64(uint64_t v) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)v)));
}

/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]). */
static inline int mins_dot(uint64_t mins, const int16_t *bsums) {
    __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
    __m128i m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mins));
    __m128i p = _mm_madd_epi16(pairs, m);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(p);
}

void candle_vec_dot_q4_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float acc_m = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint64_t sc, mn;
        k4_scales(x[i].scales, &sc, &mn);
        __m256i sumi = _mm256_setzero_si256(), scv = scales_u64(sc);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(x[i].qs + 32 * c);
            __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), load32(y[i].qs + 64 * c));
            __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), load32(y[i].qs + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, spread(scv, bcast_ctrl[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, spread(scv, bcast_ctrl[2 * c + 1])));
        }
        float d = y[i].d * h2f(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc_m += y[i].d * h2f(x[i].dmin) * (float)mins_dot(mn, y[i].bsums);
    }
    *out = hsum_ps(acc) - acc_m;
}

void candle_vec_dot_q5_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    float acc_m = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint64_t sc, mn;
        k4_scales(x[i].scales, &sc, &mn);
        __m256i qh = load32(x[i].qh), sumi = _mm256_setzero_si256(), scv = scales_u64(sc);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i q = load32(x[i].qs + 32 * c);
            __m256i bit0 = _mm256_set1_epi8((char)(1 << (2 * c))), bit1 = _mm256_set1_epi8((char)(2 << (2 * c)));
            __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit0), bit0), b4);
            __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit1), bit1), b4);
            __m256i q0 = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
            __m256i p0 = _mm256_maddubs_epi16(q0, load32(y[i].qs + 64 * c));
            __m256i p1 = _mm256_maddubs_epi16(q1, load32(y[i].qs + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, spread(scv, bcast_ctrl[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, spread(scv, bcast_ctrl[2 * c + 1])));
        }
        float d = y[i].d * h2f(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc_m += y[i].d * h2f(x[i].dmin) * (float)mins_dot(mn, y[i].bsums);
    }
    *out = hsum_ps(acc) - acc_m;
}

/* An empty asm that claims to change v: keeps the compiler from
 * reassociating a chain of integer adds into a tree whose many live
 * partial sums spill to the stack. */
#define KEEP(v) __asm__("" : "+x"(v))

/* q6_K codes of half h: q[k] are elements 128h + 32k .. + 31. */
static inline __attribute__((always_inline)) void q6k_codes(const block_q6_K *x, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256i l0 = load32(x->ql + 64 * h), l1 = load32(x->ql + 64 * h + 32), qh = load32(x->qh + 32 * h);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
}

/* One q6_K row's super-block: sum over the 16 sub-blocks of sc[s] * the
 * dot of s with codes 0..63 (value + 32), 8 int32 lanes. Pair sums stay
 * below 2 * 63 * 127; times the int8 scales and summed, below 2^28. */
static inline __attribute__((always_inline)) __m256i q6k_block(const block_q6_K *x, const int8_t *y) {
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q[4], scv = scales_i8(x->scales + 8 * h);
        q6k_codes(x, h, q);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i p = _mm256_maddubs_epi16(q[k], load32(y + 128 * h + 32 * k));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, spread(scv, pair_ctrl[k])));
            KEEP(sum);
        }
    }
    return sum;
}

/* q6_K codes are 0..63 (value + 32): the dot uses them unsigned and removes
 * 32 * sum(y) per 16 elements afterwards through bsums. */
void candle_vec_dot_q6_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *sc = x[i].scales;
        __m256i sumi = q6k_block(&x[i], y[i].qs);
        /* the codes carry +32: remove 32 * sum_s sc[s] * bsums[s] */
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, load32(y[i].bsums)), 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

/* The 16 biased 6-bit scales of a q3_K block (see quant_q3k_scale) as
 * signed bytes: four at a time in 32-bit lanes, then the bias off. */
static inline __m128i q3k_scales(const uint8_t *packed) {
    uint32_t a0, a1, hi;
    memcpy(&a0, packed, 4);
    memcpy(&a1, packed + 4, 4);
    memcpy(&hi, packed + 8, 4);
    __m128i v = _mm_setr_epi32((int)((a0 & 0x0f0f0f0fu) | ((hi & 0x03030303u) << 4)),
                               (int)((a1 & 0x0f0f0f0fu) | (((hi >> 2) & 0x03030303u) << 4)),
                               (int)(((a0 >> 4) & 0x0f0f0f0fu) | (((hi >> 4) & 0x03030303u) << 4)),
                               (int)(((a1 >> 4) & 0x0f0f0f0fu) | (((hi >> 6) & 0x03030303u) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

void candle_vec_dot_q2_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    float acc_m = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i raw = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
        int sum_m = hsum_i32(_mm256_madd_epi16(mins, load32(y[i].bsums)));
        __m128i lows = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h ? _mm_srli_si128(lows, 8) : lows));
            __m256i q = load32(x[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i qk = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2);
                __m256i p = _mm256_maddubs_epi16(qk, load32(y[i].qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, spread(scv, pair_ctrl[k])));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        acc_m += y[i].d * h2f(x[i].dmin) * (float)sum_m;
    }
    *out = hsum_ps(acc) - acc_m;
}

/* q3_K codes are the 2 low bits minus 4 where the high bit is clear: the
 * dot is maddubs(low, y) - maddubs(4 * !high, y), both unsigned x signed. */
void candle_vec_dot_q3_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i sc = q3k_scales(x[i].scales);
        __m256i hm = load32(x[i].hmask), sumi = _mm256_setzero_si256(), bit = _mm256_set1_epi8(1);
        for (int h = 0; h < 2; h++) {
            __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc, 8) : sc));
            __m256i q = load32(x[i].qs + 32 * h);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i clear = _mm256_andnot_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
                __m256i low = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2);
                __m256i yk = load32(y[i].qs + 128 * h + 32 * k);
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(low, yk), _mm256_maddubs_epi16(clear, yk));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, spread(scv, pair_ctrl[k])));
                bit = _mm256_add_epi8(bit, bit);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

void candle_vec_dot_iq4_xs_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)candle_iq4nl_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t ls[8];
        for (int ib = 0; ib < 8; ib++)
            ls[ib] = (uint8_t)(((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4));
        __m256i scv = _mm256_sub_epi16(scales_u8(ls), _mm256_set1_epi16(32)), sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs + 16 * ib));
            __m256i yk = load32(y[i].qs + 32 * ib);
            __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yk, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, spread(scv, bcast_ctrl[ib])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- Matrix-vector kernels of the K types (see gemv-impl.h) ----
 *
 * The activation is the vec_dot's q8_K row. Four weight rows go through
 * each pass: per super-block the q8_K pair sums are formed once for the
 * four rows, whose q4_K/q5_K 6-bit scales and minimum terms are decoded
 * together (rows in 32-bit lanes); each row's sub-block products are summed
 * in int32 with its scales applied by madd against 32-bit broadcast loads
 * (no shuffles; q6_K's 16 int8 scales keep the vec_dot's shuffle spread).
 * Per row the float steps are those of the vec_dot (the int32 lanes are the
 * same), so results equal it bit for bit.
 *
 * Rows are contiguous or strided streams; each pass prefetches, for every
 * row, the same super-block KGEMV_PF_ROWS rows further on (two passes
 * ahead), so the lines arrive while this pass computes. A tail pass of 1-3
 * rows repeats its last row in the unused slots (cache hits) and stores only
 * its own outputs. */
#ifndef KGEMV_PF_ROWS
#define KGEMV_PF_ROWS 8
#endif
#define KGEMV_ROWS 4

/* The 144 (q4_K), 176 (q5_K) or 210 (q6_K) bytes of a block: every line
 * of [p, p + bytes) is touched by one of these prefetches. (gcc 12 dropped
 * the same loop written with _mm_prefetch from the q4_K pass.) */
static inline __attribute__((always_inline)) void kgemv_prefetch(const uint8_t *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
    __builtin_prefetch(p + bytes - 1, 0, 3);
}

/* q8_K's 16 bsums summed in pairs: the sums of the 8 sub-blocks of 32. */
static inline __m128i bsum_pairs(const int16_t *bsums) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
}

/* The rows of a pass: r < nr at w + r * ws, the others repeat the last. */
static inline void pass_rows(const uint8_t *w, size_t ws, int nr, const uint8_t *x[KGEMV_ROWS]) {
    for (int r = 0; r < KGEMV_ROWS; r++) x[r] = w + (size_t)(r < nr ? r : nr - 1) * ws;
}

/* q4_K (q5 false) or q5_K (q5 true) codes of chunk c (elements 64c ..
 * 64c + 63): *lo the first 32, *hi the next 32. */
static inline __attribute__((always_inline)) void k45_codes(const uint8_t *qs, __m256i qh, int c, bool q5,
                                                            __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i q = load32(qs + 32 * c);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (q5) {
        const __m256i b4 = _mm256_set1_epi8(0x10);
        __m256i bit0 = _mm256_set1_epi8((char)(1 << (2 * c))), bit1 = _mm256_set1_epi8((char)(2 << (2 * c)));
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit0), bit0), b4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit1), bit1), b4));
    }
}

/* The scales and minimum terms of four q4_K/q5_K rows' blocks (both types
 * start with d, dmin, scales[12]), decoded together with the rows in 32-bit
 * lanes. */
typedef struct k4_head {
    /* sc[r][j]: row r's scale j in both 16-bit halves, so a 32-bit
     * broadcast load (no shuffle) spreads it over a register */
    int32_t sc[KGEMV_ROWS][8] __attribute__((aligned(32)));
    int32_t mins[KGEMV_ROWS]; /* row r: sum_j mins_r[j] * (bsums[2j] + bsums[2j+1]) */
} k4_head;

/* 8 scale bytes -> 8 dwords, each scale in both 16-bit halves. */
static inline void k4_scale_pairs(__m128i bytes, int32_t *dst) {
    __m256i v = _mm256_cvtepu8_epi32(bytes);
    _mm256_store_si256((__m256i *)dst, _mm256_or_si256(v, _mm256_slli_epi32(v, 16)));
}

static inline __attribute__((always_inline)) void k4_head4(const uint8_t *const x[KGEMV_ROWS], const int16_t *bsums,
                                                           k4_head *h) {
    __m128i v[KGEMV_ROWS];
    for (int r = 0; r < KGEMV_ROWS; r++) v[r] = _mm_loadu_si128((const __m128i *)x[r]);
    /* transpose: lane r of dword j of every row -> vector j */
    __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpackhi_epi32(v[0], v[1]);
    __m128i t2 = _mm_unpacklo_epi32(v[2], v[3]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
    __m128i a = _mm_unpackhi_epi64(t0, t2);
    __m128i b = _mm_unpacklo_epi64(t1, t3), c = _mm_unpackhi_epi64(t1, t3);
    /* the 6-bit unpacking of k4_scales, four rows at once */
    const __m128i m3f = _mm_set1_epi8(0x3f), m0f = _mm_set1_epi8(0x0f), m30 = _mm_set1_epi8(0x30);
    __m128i lo0 = _mm_and_si128(a, m3f), hi0 = _mm_and_si128(b, m3f);
    __m128i lo1 = _mm_or_si128(_mm_and_si128(c, m0f), _mm_and_si128(_mm_srli_epi32(a, 2), m30));
    __m128i hi1 = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(c, 4), m0f), _mm_and_si128(_mm_srli_epi32(b, 2), m30));
    __m128i sc01 = _mm_unpacklo_epi32(lo0, lo1), sc23 = _mm_unpackhi_epi32(lo0, lo1);
    k4_scale_pairs(sc01, h->sc[0]);
    k4_scale_pairs(_mm_srli_si128(sc01, 8), h->sc[1]);
    k4_scale_pairs(sc23, h->sc[2]);
    k4_scale_pairs(_mm_srli_si128(sc23, 8), h->sc[3]);
    /* mins of rows 0, 1 (then 2, 3) as int16 halves against the pair sums */
    __m256i pairs = _mm256_broadcastsi128_si256(bsum_pairs(bsums));
    __m256i m01 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi32(hi0, hi1)), pairs);
    __m256i m23 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi32(hi0, hi1)), pairs);
    __m256i s = _mm256_hadd_epi32(m01, m23); /* [r0 r0 r2 r2 | r1 r1 r3 r3] */
    s = _mm256_hadd_epi32(s, s);             /* [r0 r2 r0 r2 | r1 r3 r1 r3] */
    _mm_storeu_si128((__m128i *)h->mins,
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
}

/* One q4_K/q5_K row's super-block: sum over sub-blocks s of sc[s] * the
 * code-activation dot of s, 8 int32 lanes; scale byte s at byte ctrl[s].
 * maddubs pair sums stay below 2 * 31 * 127 (no saturation); times a 6-bit
 * scale and summed over 256 codes the total is below 2^23. */
static inline __attribute__((always_inline)) __m256i k45_block(const uint8_t *x, bool q5, const int8_t *y,
                                                               const int32_t *sc) {
    const size_t o_qs = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    __m256i sum = _mm256_setzero_si256();
    __m256i qh = q5 ? load32(x + offsetof(block_q5_K, qh)) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k45_codes(x + o_qs, qh, c, q5, &lo, &hi);
        __m256i p0 = _mm256_maddubs_epi16(lo, load32(y + 64 * c));
        __m256i p1 = _mm256_maddubs_epi16(hi, load32(y + 64 * c + 32));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p0, _mm256_set1_epi32(sc[2 * c])));
        KEEP(sum);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p1, _mm256_set1_epi32(sc[2 * c + 1])));
        KEEP(sum);
    }
    return sum;
}

/* One pass of q4_K (q5 false) or q5_K rows: out[r] for r < nr. Per row
 * the float steps are the vec_dot's (an 8-lane fma of d * y's d, the
 * minimum term summed apart in scalar and taken off at the end), so the
 * results equal it bit for bit. */
static inline __attribute__((always_inline)) void k45_pass(bool q5, const uint8_t *w, size_t ws, int nr,
                                                           const block_q8_K *y, int64_t nb, float *out) {
    const size_t bs = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t o_d = q5 ? offsetof(block_q5_K, d) : offsetof(block_q4_K, d);
    const size_t o_dm = q5 ? offsetof(block_q5_K, dmin) : offsetof(block_q4_K, dmin);
    const uint8_t *x[KGEMV_ROWS];
    pass_rows(w, ws, nr, x);
    __m256 acc[KGEMV_ROWS];
    float acc_m[KGEMV_ROWS];
    for (int r = 0; r < KGEMV_ROWS; r++) {
        acc[r] = _mm256_setzero_ps();
        acc_m[r] = 0;
    }
    for (int64_t i = 0; i < nb; i++, y++) {
        k4_head h;
        k4_head4(x, y->bsums, &h);
        /* one row at a time: unrolled, the rows' shared activation loads
         * would be hoisted into more registers than there are */
#pragma GCC unroll 1
        for (int r = 0; r < KGEMV_ROWS; r++) {
            kgemv_prefetch(x[r] + KGEMV_PF_ROWS * ws, bs);
            __m256i s = k45_block(x[r], q5, y->qs, h.sc[r]);
            uint16_t d, dmin;
            memcpy(&d, x[r] + o_d, 2);
            memcpy(&dmin, x[r] + o_dm, 2);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(d)), _mm256_cvtepi32_ps(s), acc[r]);
            acc_m[r] += y->d * h2f(dmin) * (float)h.mins[r];
            x[r] += bs;
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]) - acc_m[r];
}

/* Per row the float steps are the vec_dot's: equal results bit for bit. */
static void q6k_pass(const uint8_t *w, size_t ws, int nr, const block_q8_K *y, int64_t nb, float *out) {
    const uint8_t *x[KGEMV_ROWS];
    pass_rows(w, ws, nr, x);
    __m256 acc[KGEMV_ROWS];
    for (int r = 0; r < KGEMV_ROWS; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, y++) {
        __m256i bsums = load32(y->bsums);
#pragma GCC unroll 1
        for (int r = 0; r < KGEMV_ROWS; r++) {
            const block_q6_K *b = (const block_q6_K *)x[r];
            kgemv_prefetch(x[r] + KGEMV_PF_ROWS * ws, sizeof(block_q6_K));
            /* the codes carry +32: take off 32 * sum_s sc[s] * bsums[s] */
            __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales)), bsums);
            __m256i s = _mm256_sub_epi32(q6k_block(b, y->qs), _mm256_slli_epi32(off, 5));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(b->d)), _mm256_cvtepi32_ps(s), acc[r]);
            x[r] += sizeof(block_q6_K);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]);
}

static void q4k_pass(const uint8_t *w, size_t ws, int nr, const block_q8_K *y, int64_t nb, float *out) {
    k45_pass(false, w, ws, nr, y, nb, out);
}
static void q5k_pass(const uint8_t *w, size_t ws, int nr, const block_q8_K *y, int64_t nb, float *out) {
    k45_pass(true, w, ws, nr, y, nb, out);
}

void candle_gemv_rows_k_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out) {
    void (*pass)(const uint8_t *, size_t, int, const block_q8_K *, int64_t, float *) =
        t == CANDLE_DTYPE_Q4_K ? q4k_pass : t == CANDLE_DTYPE_Q5_K ? q5k_pass : t == CANDLE_DTYPE_Q6_K ? q6k_pass : NULL;
    if (!pass) return;
    const uint8_t *row = w;
    for (int64_t r = 0; r < n; r += KGEMV_ROWS)
        pass(row + (size_t)r * ws, ws, (int)(n - r < KGEMV_ROWS ? n - r : KGEMV_ROWS), xv, K / QK_K, out + r);
}
