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

/* q6_K codes are 0..63 (value + 32): the dot uses them unsigned and removes
 * 32 * sum(y) per 16 elements afterwards through bsums. */
void candle_vec_dot_q6_k_q8_k_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *sc = x[i].scales;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i scv = scales_i8(sc + 8 * h);
            __m256i l0 = load32(x[i].ql + 64 * h), l1 = load32(x[i].ql + 64 * h + 32);
            __m256i qh = load32(x[i].qh + 32 * h);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i p = _mm256_maddubs_epi16(q[k], load32(y[i].qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, spread(scv, pair_ctrl[k])));
            }
        }
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

/* Matrix-vector kernels of the K types (see gemv-impl.h): the activation is
 * the q8_K row of the vec_dot, and two weight rows go through each pass so
 * every activation load and the bsums pair sums serve both. Per row and
 * super-block the float steps are those of the vec_dot above, so results
 * are equal to it bit for bit. The software prefetch runs KGEMV_PF bytes
 * ahead in each row; past a row's end it lands in rows of the next pass. */
#ifndef KGEMV_PF
#define KGEMV_PF 1536
#endif
#define KGEMV_ROWS 2

static inline void kgemv_prefetch(const void *p, int lines) {
    for (int l = 0; l < lines; l++) _mm_prefetch((const char *)p + KGEMV_PF + 64 * l, _MM_HINT_T0);
}

/* The q8_K bsums summed in pairs: the 8 sums of 32 elements each. */
static inline __m128i bsum_pairs(const int16_t *bsums) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
}

static inline int mins_dot_pairs(uint64_t mins, __m128i pairs) {
    __m128i p = _mm_madd_epi16(pairs, _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mins)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(p);
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

/* nr (1 or 2) rows of q4_K or q5_K; the block fields are at the same
 * offsets relative to d, dmin, scales, and q5_K adds qh before qs. */
static inline __attribute__((always_inline)) void k45_rows(int nr, bool q5, const uint8_t *w, size_t ws,
                                                           const block_q8_K *y, int64_t nb, float *out) {
    const size_t bs = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t o_d = q5 ? offsetof(block_q5_K, d) : offsetof(block_q4_K, d);
    const size_t o_dmin = q5 ? offsetof(block_q5_K, dmin) : offsetof(block_q4_K, dmin);
    const size_t o_sc = q5 ? offsetof(block_q5_K, scales) : offsetof(block_q4_K, scales);
    const size_t o_qs = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const size_t o_qh = q5 ? offsetof(block_q5_K, qh) : 0;
    __m256 acc[KGEMV_ROWS] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    float acc_m[KGEMV_ROWS] = {0, 0};
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *x[KGEMV_ROWS];
        uint64_t sc[KGEMV_ROWS] = {0, 0}, mn[KGEMV_ROWS] = {0, 0};
        __m256i scv[KGEMV_ROWS], sumi[KGEMV_ROWS], qh[KGEMV_ROWS];
        for (int r = 0; r < KGEMV_ROWS; r++) {
            x[r] = w + (size_t)(r < nr ? r : 0) * ws + (size_t)i * bs;
            qh[r] = sumi[r] = _mm256_setzero_si256();
        }
        for (int r = 0; r < nr; r++) {
            kgemv_prefetch(x[r], 3);
            k4_scales(x[r] + o_sc, &sc[r], &mn[r]);
            scv[r] = scales_u64(sc[r]);
            if (q5) qh[r] = load32(x[r] + o_qh);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i y0 = load32(y[i].qs + 64 * c), y1 = load32(y[i].qs + 64 * c + 32);
            for (int r = 0; r < nr; r++) {
                __m256i lo, hi;
                k45_codes(x[r] + o_qs, qh[r], c, q5, &lo, &hi);
                __m256i p0 = _mm256_maddubs_epi16(lo, y0), p1 = _mm256_maddubs_epi16(hi, y1);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p0, spread(scv[r], bcast_ctrl[2 * c])));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p1, spread(scv[r], bcast_ctrl[2 * c + 1])));
            }
        }
        __m128i pairs = bsum_pairs(y[i].bsums);
        for (int r = 0; r < nr; r++) {
            uint16_t d, dmin;
            memcpy(&d, x[r] + o_d, 2);
            memcpy(&dmin, x[r] + o_dmin, 2);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(d)), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc_m[r] += y[i].d * h2f(dmin) * (float)mins_dot_pairs(mn[r], pairs);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]) - acc_m[r];
}

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

static inline __attribute__((always_inline)) void q6k_rows(int nr, const uint8_t *w, size_t ws,
                                                           const block_q8_K *y, int64_t nb, float *out) {
    __m256 acc[KGEMV_ROWS] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_K *x[KGEMV_ROWS];
        __m256i sumi[KGEMV_ROWS];
        for (int r = 0; r < KGEMV_ROWS; r++) {
            x[r] = (const block_q6_K *)(w + (size_t)(r < nr ? r : 0) * ws) + i;
            sumi[r] = _mm256_setzero_si256();
        }
        for (int r = 0; r < nr; r++) kgemv_prefetch(x[r], 4);
        for (int h = 0; h < 2; h++) {
            __m256i yk[4];
            for (int k = 0; k < 4; k++) yk[k] = load32(y[i].qs + 128 * h + 32 * k);
            for (int r = 0; r < nr; r++) {
                __m256i q[4], scv = scales_i8(x[r]->scales + 8 * h);
                q6k_codes(x[r], h, q);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m256i p = _mm256_maddubs_epi16(q[k], yk[k]);
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, spread(scv, pair_ctrl[k])));
                }
            }
        }
        __m256i bsums = load32(y[i].bsums);
        for (int r = 0; r < nr; r++) {
            /* the codes carry +32: remove 32 * sum_s sc[s] * bsums[s] */
            __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[r]->scales));
            sumi[r] = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[r]->d)), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]);
}

void candle_gemv_rows_k_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out) {
    const block_q8_K *y = xv;
    const uint8_t *row = w;
    int64_t nb = K / QK_K, r = 0;
    switch (t) {
    case CANDLE_DTYPE_Q4_K:
        for (; r + KGEMV_ROWS <= n; r += KGEMV_ROWS) k45_rows(KGEMV_ROWS, false, row + (size_t)r * ws, ws, y, nb, out + r);
        if (r < n) k45_rows(1, false, row + (size_t)r * ws, ws, y, nb, out + r);
        break;
    case CANDLE_DTYPE_Q5_K:
        for (; r + KGEMV_ROWS <= n; r += KGEMV_ROWS) k45_rows(KGEMV_ROWS, true, row + (size_t)r * ws, ws, y, nb, out + r);
        if (r < n) k45_rows(1, true, row + (size_t)r * ws, ws, y, nb, out + r);
        break;
    case CANDLE_DTYPE_Q6_K:
        for (; r + KGEMV_ROWS <= n; r += KGEMV_ROWS) q6k_rows(KGEMV_ROWS, row + (size_t)r * ws, ws, y, nb, out + r);
        if (r < n) q6k_rows(1, row + (size_t)r * ws, ws, y, nb, out + r);
        break;
    default: break;
    }
}
