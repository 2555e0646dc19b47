/* Internal: the K-type kernels (q2_K to q6_K and iq4_xs dots, the K
 * matrix-vector rows), included by kquants_avx2.c (maddubs, then madd with
 * the scales and an add) and kquants_avx512.c (CANDLE_QUANT_VNNI: the madd
 * and add as one vpdpwssd, through avx2-impl.h's madd_acc), with
 * QUANT_KERNEL naming the variant. The int32 lanes are the same in both
 * (the sums are exact), so are the float steps: the results are equal bit
 * for bit. Sub-block products are summed in int32 with the sub-block scales
 * applied by madd; the minimums are folded in through q8_K's bsums, as in
 * the scalar kernels. */
#ifndef CANDLE_QUANT_KQUANTS_IMPL_H
#define CANDLE_QUANT_KQUANTS_IMPL_H

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

/* q8_K's 16 bsums summed in pairs: the sums of the 8 sub-blocks of 32. */
static inline __m128i bsum_pairs(const int16_t *bsums) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 8)));
}

/* v's 16-bit lanes shifted left by s (right by -s), s in -5..4. */
static inline __attribute__((always_inline)) __m256i shift16(__m256i v, int s) {
    return s >= 0 ? _mm256_slli_epi16(v, s) : _mm256_srli_epi16(v, -s);
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
        /* bits 2c and 2c + 1 of every qh byte shifted to bit 4: a 16-bit
         * shift by at most 4 moves no other byte's bit onto a bit 4 */
        const __m256i b4 = _mm256_set1_epi8(0x10);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(shift16(qh, 4 - 2 * c), b4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(shift16(qh, 3 - 2 * c), b4));
    }
}

/* The running sums of one q4_K/q5_K row: the scaled code sums (8 lanes)
 * and the minimum terms (4 lanes), kept apart until the end. */
typedef struct k45_acc {
    __m256 q;
    __m128 m;
} k45_acc;

#ifdef CANDLE_QUANT_VNNI
/* The code sums of a q4_K/q5_K block (scales applied) in 512-bit registers:
 * chunk c's 64 codes in one (low half: the low nibbles, sub-block 2c; high
 * half: the high nibbles, 2c + 1) against the 64 activation codes that
 * follow each other, one maddubs and one vpdpwssd per 64 codes; Zen 4 runs
 * a 512-bit op as two 256-bit halves, but the loop has half the
 * instructions. The two halves added give the AVX2 lanes exactly. */
static const char k45_zctrl[4][64] __attribute__((aligned(64))) = {
#define W2(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define W16(j) W2(j), W2(j), W2(j), W2(j), W2(j), W2(j), W2(j), W2(j)
    {W16(0), W16(0), W16(1), W16(1)}, {W16(2), W16(2), W16(3), W16(3)},
    {W16(4), W16(4), W16(5), W16(5)}, {W16(6), W16(6), W16(7), W16(7)},
#undef W16
#undef W2
};
static inline __attribute__((always_inline)) __m256i k45_sums(const uint8_t *x, bool q5, const int8_t *y,
                                                              uint64_t sc) {
    const size_t o_qs = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0F), nib = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    __m512i qh = q5 ? _mm512_broadcast_i64x4(load32(x + offsetof(block_q5_K, qh))) : _mm512_setzero_si512();
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i q = _mm512_broadcast_i64x4(load32(x + o_qs + 32 * c));
        __m512i codes = _mm512_and_si512(_mm512_srlv_epi64(q, nib), m4);
        if (q5) {
            /* qh bit 2c (low half) or 2c + 1 (high) of each byte rotated
             * to bit 4 of the same byte (see k45_codes), or-ed in */
            __m512i rot = _mm512_set_epi32((3 - 2 * c) & 31, (3 - 2 * c) & 31, (3 - 2 * c) & 31, (3 - 2 * c) & 31,
                                           (3 - 2 * c) & 31, (3 - 2 * c) & 31, (3 - 2 * c) & 31, (3 - 2 * c) & 31,
                                           (4 - 2 * c) & 31, (4 - 2 * c) & 31, (4 - 2 * c) & 31, (4 - 2 * c) & 31,
                                           (4 - 2 * c) & 31, (4 - 2 * c) & 31, (4 - 2 * c) & 31, (4 - 2 * c) & 31);
            codes = _mm512_ternarylogic_epi32(codes, _mm512_rolv_epi32(qh, rot), _mm512_set1_epi8(0x10), 0xF8);
        }
        __m512i p = _mm512_maddubs_epi16(codes, _mm512_loadu_si512(y + 64 * c));
        __m512i sv = _mm512_shuffle_epi8(scv, _mm512_load_si512(k45_zctrl[c]));
        if (c & 1) s1 = _mm512_dpwssd_epi32(s1, p, sv);
        else s0 = _mm512_dpwssd_epi32(s0, p, sv);
    }
    __m512i s = _mm512_add_epi32(s0, s1);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}
#else
/* The same sums in 256-bit registers: per chunk c, the low nibbles
 * (sub-block 2c) and high nibbles (2c + 1) each by maddubs and a madd with
 * the scale, summed in two chains. */
static inline __attribute__((always_inline)) __m256i k45_sums(const uint8_t *x, bool q5, const int8_t *y,
                                                              uint64_t sc) {
    const size_t o_qs = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, scv = scales_u64(sc);
    __m256i qh = q5 ? load32(x + offsetof(block_q5_K, qh)) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k45_codes(x + o_qs, qh, c, q5, &lo, &hi);
        __m256i p0 = _mm256_maddubs_epi16(lo, load32(y + 64 * c));
        __m256i p1 = _mm256_maddubs_epi16(hi, load32(y + 64 * c + 32));
        s0 = madd_acc(s0, p0, spread(scv, bcast_ctrl[2 * c]));
        s1 = madd_acc(s1, p1, spread(scv, bcast_ctrl[2 * c + 1]));
    }
    return _mm256_add_epi32(s0, s1);
}
#endif

/* One q4_K/q5_K super-block of a row into *a. Both types start with d,
 * dmin, scales[12], so x is read through those offsets. This is the whole
 * per-block cost of the matrix-vector kernels, which run at the rate of
 * their instructions even with the rows streaming from memory: the scales
 * are unpacked in scalar registers and spread by shuffles (other ports than
 * the multiplies), d and dmin converted together, the minimum terms summed
 * in four lanes with no horizontal step, and the sub-blocks summed in two
 * chains. maddubs pair sums stay below 2 * 31 * 127 (no saturation); times
 * a 6-bit scale and summed over 256 codes the total is below 2^23. */
static inline __attribute__((always_inline)) void k45_block(const uint8_t *x, bool q5, const block_q8_K *y,
                                                            __m128i pairs, k45_acc *a) {
    uint64_t sc, mn;
    k4_scales(x + offsetof(block_q4_K, scales), &sc, &mn);
    __m256i s = k45_sums(x, q5, y->qs, sc);
    __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)), pairs);
    uint32_t d_dmin; /* the f16 pair d, dmin */
    memcpy(&d_dmin, x, 4);
    __m128 dv = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin)), _mm_set1_ps(y->d));
    a->q = _mm256_fmadd_ps(_mm256_broadcastss_ps(dv), _mm256_cvtepi32_ps(s), a->q);
    a->m = _mm_fmadd_ps(_mm_permute_ps(dv, 0x55), _mm_cvtepi32_ps(m), a->m);
}

static inline float k45_result(k45_acc a) {
    __m128 r = _mm_sub_ps(_mm_add_ps(_mm256_castps256_ps128(a.q), _mm256_extractf128_ps(a.q, 1)), a.m);
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* The vec_dots take the matrix-vector kernels' float steps, so a row's
 * result does not depend on the path that computed it. */
static inline __attribute__((always_inline)) float k45_dot(const uint8_t *x, bool q5, const block_q8_K *y,
                                                           int64_t nb) {
    const size_t bs = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    k45_acc a = {_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < nb; i++) k45_block(x + (size_t)i * bs, q5, y + i, bsum_pairs(y[i].bsums), &a);
    return k45_result(a);
}

void QUANT_KERNEL(cdl_vec_dot_q4_k_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
    *out = k45_dot(vx, false, vy, n / QK_K);
}

void QUANT_KERNEL(cdl_vec_dot_q5_k_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
    *out = k45_dot(vx, true, vy, n / QK_K);
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
#ifdef CANDLE_QUANT_VNNI
/* 512-bit: codes k and k + 1 of a half (k = 0, 2) in one register, 64
 * activation codes that follow each other; the scales of the four 16-code
 * groups are the four 128-bit lanes' words (q6k_zctrl). The high bits
 * masked per half and rotated to bits 4, 5 of the same byte (one rolv for
 * both halves), the low nibbles merged by one ternary logic op. */
static const char q6k_zctrl[2][64] __attribute__((aligned(64))) = {
#define W2(j) (char)(2 * (j)), (char)(2 * (j) + 1)
#define W16(j) W2(j), W2(j), W2(j), W2(j), W2(j), W2(j), W2(j), W2(j)
    {W16(0), W16(1), W16(2), W16(3)},
    {W16(4), W16(5), W16(6), W16(7)},
#undef W16
#undef W2
};
static inline __attribute__((always_inline)) __m256i q6k_block(const block_q6_K *x, const int8_t *y) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* (qh & 0x03) << 4 | (qh & 0x0C) << 2, then (qh & 0x30) | (qh & 0xC0) >> 2 */
    const __m512i mask01 = _mm512_inserti64x4(_mm512_set1_epi8(0x03), _mm256_set1_epi8(0x0C), 1);
    const __m512i mask23 = _mm512_inserti64x4(_mm512_set1_epi8(0x30), _mm256_set1_epi8((char)0xC0), 1);
    const __m512i rot01 = _mm512_inserti64x4(_mm512_set1_epi32(4), _mm256_set1_epi32(2), 1);
    const __m512i rot23 = _mm512_inserti64x4(_mm512_set1_epi32(0), _mm256_set1_epi32(30), 1);
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(x->scales + 8 * h))));
        __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(load32(x->qh + 32 * h));
        __m512i h01 = _mm512_rolv_epi32(_mm512_and_si512(qh, mask01), rot01);
        __m512i h23 = _mm512_rolv_epi32(_mm512_and_si512(qh, mask23), rot23);
        /* (a & c) | b */
        __m512i c01 = _mm512_ternarylogic_epi32(l, h01, m4, 0xEC);
        __m512i c23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), h23, m4, 0xEC);
        __m512i p01 = _mm512_maddubs_epi16(c01, _mm512_loadu_si512(y + 128 * h));
        __m512i p23 = _mm512_maddubs_epi16(c23, _mm512_loadu_si512(y + 128 * h + 64));
        s0 = _mm512_dpwssd_epi32(s0, p01, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[0])));
        s1 = _mm512_dpwssd_epi32(s1, p23, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[1])));
    }
    __m512i s = _mm512_add_epi32(s0, s1);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}
#else
static inline __attribute__((always_inline)) __m256i q6k_block(const block_q6_K *x, const int8_t *y) {
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q[4], scv = scales_i8(x->scales + 8 * h);
        q6k_codes(x, h, q);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i p = _mm256_maddubs_epi16(q[k], load32(y + 128 * h + 32 * k));
            sum = madd_acc(sum, p, spread(scv, pair_ctrl[k]));
            KEEP(sum);
        }
    }
    return sum;
}
#endif

/* q6_K codes are 0..63 (value + 32): the dot uses them unsigned and removes
 * 32 * sum(y) per 16 elements afterwards through bsums. */
void QUANT_KERNEL(cdl_vec_dot_q6_k_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
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

/* The bytes of a block (84 q2_K, 110 q3_K, 144 q4_K, 176 q5_K, 210 q6_K):
 * every line of [p, p + bytes) is touched by one of these prefetches (see
 * the matrix-vector kernels at the end), of the decoding streams' kind
 * (candle_stream_prefetch in quant-impl.h). (gcc 12 dropped
 * the same loop written with _mm_prefetch from the q4_K pass.) */
static inline __attribute__((always_inline)) void kgemv_prefetch(const uint8_t *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) candle_stream_prefetch(p + o);
    candle_stream_prefetch(p + bytes - 1);
}

/* One q2_K super-block into acc and acc_m (the minimum terms, in 8 lanes
 * with no horizontal step per block). */
static inline __attribute__((always_inline)) void q2k_block(const block_q2_K *x, const block_q8_K *y, __m256 *acc,
                                                            __m256 *acc_m) {
    const __m256i m2 = _mm256_set1_epi8(3);
    __m128i raw = _mm_loadu_si128((const __m128i *)x->scales);
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
    __m256i sum_m = _mm256_madd_epi16(mins, load32(y->bsums));
    __m128i lows = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
#ifdef CANDLE_QUANT_VNNI
    /* 512-bit: codes k and k + 1 of a half in one register (one shift by
     * 2k / 2k + 2 per 64-bit lane), 64 activation codes that follow each
     * other, the scales spread as q6_K's; halves added = the AVX2 lanes */
    (void)m2;
    const __m512i m2z = _mm512_set1_epi8(3);
    const __m512i sh01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), sh23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    __m512i z0 = _mm512_setzero_si512(), z1 = z0;
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(h ? _mm_srli_si128(lows, 8) : lows));
        __m512i q = _mm512_broadcast_i64x4(load32(x->qs + 32 * h));
        __m512i c01 = _mm512_and_si512(_mm512_srlv_epi64(q, sh01), m2z);
        __m512i c23 = _mm512_and_si512(_mm512_srlv_epi64(q, sh23), m2z);
        __m512i p01 = _mm512_maddubs_epi16(c01, _mm512_loadu_si512(y->qs + 128 * h));
        __m512i p23 = _mm512_maddubs_epi16(c23, _mm512_loadu_si512(y->qs + 128 * h + 64));
        z0 = _mm512_dpwssd_epi32(z0, p01, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[0])));
        z1 = _mm512_dpwssd_epi32(z1, p23, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[1])));
    }
    __m512i z = _mm512_add_epi32(z0, z1);
    __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
#else
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h ? _mm_srli_si128(lows, 8) : lows));
        __m256i q = load32(x->qs + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i qk = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2);
            __m256i p = _mm256_maddubs_epi16(qk, load32(y->qs + 128 * h + 32 * k));
            sumi = madd_acc(sumi, p, spread(scv, pair_ctrl[k]));
        }
    }
#endif
    uint32_t d_dmin; /* the f16 pair d, dmin */
    memcpy(&d_dmin, &x->d, 4);
    __m128 dv = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin)), _mm_set1_ps(y->d));
    *acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dv), _mm256_cvtepi32_ps(sumi), *acc);
    *acc_m = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dv)), _mm256_cvtepi32_ps(sum_m), *acc_m);
}

/* A q2_K row, prefetching pf bytes ahead in the weight stream (0: none). */
static inline __attribute__((always_inline)) float q2k_row(const block_q2_K *x, const block_q8_K *y, int64_t nb,
                                                           size_t pf) {
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        if (pf) kgemv_prefetch((const uint8_t *)&x[i] + pf, sizeof(block_q2_K));
        q2k_block(&x[i], &y[i], &acc, &acc_m);
    }
    return hsum_ps(_mm256_sub_ps(acc, acc_m));
}

void QUANT_KERNEL(cdl_vec_dot_q2_k_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
    *out = q2k_row(vx, vy, n / QK_K, 0);
}

/* One q3_K super-block into acc. A q3_K value is its 3-bit code (the 2
 * low bits, 4 where the hmask bit is set) minus 4: the codes are used
 * unsigned and 4 * sum_s sc[s] * bsums[s] taken off afterwards (one maddubs
 * per 32 values instead of two). Hmask bit j of byte l (element 32j + l)
 * reaches bit 2 by one 16-bit shift by 2 - j, which moves no other byte's
 * bit onto a bit 2 (j <= 7). */
static inline __attribute__((always_inline)) void q3k_block(const block_q3_K *x, const block_q8_K *y, __m256 *acc) {
    const __m256i m2 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
    __m128i sc = q3k_scales(x->scales);
#ifdef CANDLE_QUANT_VNNI
    /* as q2k_block's 512-bit loop; hmask bit 4h + k rotated to bit 2 of
     * the same byte (one vprold for both halves, counts mod 32), merged by
     * one ternary logic op */
    (void)m2, (void)b2;
    const __m512i m2z = _mm512_set1_epi8(3), b2z = _mm512_set1_epi8(4);
    const __m512i sh01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), sh23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    __m512i hm = _mm512_broadcast_i64x4(load32(x->hmask)), z0 = _mm512_setzero_si512(), z1 = z0;
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const int j = 4 * h; /* hmask bits j .. j + 3 */
        const __m512i r01 = _mm512_inserti64x4(_mm512_set1_epi32((2 - j) & 31), _mm256_set1_epi32((1 - j) & 31), 1);
        const __m512i r23 = _mm512_inserti64x4(_mm512_set1_epi32((0 - j) & 31), _mm256_set1_epi32((-1 - j) & 31), 1);
        __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc, 8) : sc));
        __m512i q = _mm512_broadcast_i64x4(load32(x->qs + 32 * h));
        /* a | (b & c) */
        __m512i c01 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srlv_epi64(q, sh01), m2z),
                                                _mm512_rolv_epi32(hm, r01), b2z, 0xF8);
        __m512i c23 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srlv_epi64(q, sh23), m2z),
                                                _mm512_rolv_epi32(hm, r23), b2z, 0xF8);
        __m512i p01 = _mm512_maddubs_epi16(c01, _mm512_loadu_si512(y->qs + 128 * h));
        __m512i p23 = _mm512_maddubs_epi16(c23, _mm512_loadu_si512(y->qs + 128 * h + 64));
        z0 = _mm512_dpwssd_epi32(z0, p01, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[0])));
        z1 = _mm512_dpwssd_epi32(z1, p23, _mm512_shuffle_epi8(scv, _mm512_load_si512(q6k_zctrl[1])));
    }
    __m512i z = _mm512_add_epi32(z0, z1);
    __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
#else
    __m256i hm = load32(x->hmask), sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc, 8) : sc));
        __m256i q = load32(x->qs + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i high = _mm256_and_si256(shift16(hm, 2 - (4 * h + k)), b2);
            __m256i code = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m2), high);
            __m256i p = _mm256_maddubs_epi16(code, load32(y->qs + 128 * h + 32 * k));
            sumi = madd_acc(sumi, p, spread(scv, pair_ctrl[k]));
        }
    }
#endif
    __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), load32(y->bsums));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 2));
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(x->d)), _mm256_cvtepi32_ps(sumi), *acc);
}

/* A q3_K row, prefetching pf bytes ahead in the weight stream (0: none). */
static inline __attribute__((always_inline)) float q3k_row(const block_q3_K *x, const block_q8_K *y, int64_t nb,
                                                           size_t pf) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        if (pf) kgemv_prefetch((const uint8_t *)&x[i] + pf, sizeof(block_q3_K));
        q3k_block(&x[i], &y[i], &acc);
    }
    return hsum_ps(acc);
}

void QUANT_KERNEL(cdl_vec_dot_q3_k_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
    *out = q3k_row(vx, vy, n / QK_K, 0);
}

void QUANT_KERNEL(cdl_vec_dot_iq4_xs_q8_k)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cdl_iq4nl_values));
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
            sumi = madd_acc(sumi, p, spread(scv, bcast_ctrl[ib]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- Matrix-vector kernels of the K types (see gemv-impl.h) ----
 *
 * The activation is the vec_dot's q8_K row; each row's blocks go through
 * the vec_dot's code (equal results bit for bit). Measured on the 2-core
 * Zen 3 with the rows streaming from DRAM on 2 threads (bench/RESULTS.md
 * shapes and 32768x4096, best of 10 runs interleaved):
 *
 * q4_K and q5_K run at the rate of their instructions, not far above one
 * thread's share of the memory bandwidth (q4_K from L2: about 15 GB/s a
 * thread before the lean block above, 20 after), so a row is read alone,
 * start to end, which costs fewest instructions: one stream per thread,
 * software-prefetched KGEMV_PF_BYTES ahead (4 KiB beat 1 and 2 KiB on the
 * model shapes). Passes of 4 or 8 rows side by side (one stream each,
 * prefetched a pass or two ahead) were 10-20% slower on the model shapes
 * (2048x2048, 5632x2048, 2048x5632) and no faster on 32768x4096.
 *
 * q2_K and q3_K (no routing of their own before: the vec_dot per row)
 * go the same way, their blocks being even heavier per byte.
 *
 * q6_K has more bytes per instruction: there passes of KGEMV_ROWS rows,
 * each row prefetching the same block KGEMV_ROWS rows on (the next pass),
 * were a little faster than one row at a time (AVX2 rows). With no software
 * prefetch at all, four-row passes ran at half speed. The VNNI rows (Zen 5,
 * whose hardware prefetchers follow one stream per thread, not eight rows
 * apart) read q6_K one row after another too, prefetching KGEMV_PF6_BYTES
 * ahead in the stream: tinyllama-shape decode products as q6_K (8 layers,
 * q/k/v/o/gate/up/down, 2 threads, a barrier per product, variants
 * alternated per pass, medians of 7, load 4.4, a fuzzer holding a vCPU)
 * 8-row passes 18.2/20.0/23.8 GB/s, one row 4/8/16 KiB ahead
 * 25.5/26.2/27.1, 21.4/26.3/22.3, 24.0/26.9/24.0 (read loop 27.4-29.6);
 * one thread 36.8 -> 42.8, 37.0 -> 43.7 for 8 KiB (read loop 44); in L2
 * 67.6 -> 65.6 GB/s (thread CPU time). */
#ifndef KGEMV_PF_BYTES
#define KGEMV_PF_BYTES 4096
#endif
#ifndef KGEMV_PF6_BYTES
#define KGEMV_PF6_BYTES 8192
#endif
#define KGEMV_ROWS 8

/* As k45_dot, prefetching pf bytes ahead in the weight stream; pairs: the
 * bsum_pairs of every block, 8 int16 each, which the prepared activation
 * holds after its q8_K row (the same values as the vec_dot's, taken once
 * per product instead of once per block per row). */
static inline __attribute__((always_inline)) float k45_dot_pf(const uint8_t *x, bool q5, const block_q8_K *y,
                                                              const int16_t *pairs, int64_t nb, size_t pf) {
    const size_t bs = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    k45_acc a = {_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < nb; i++, x += bs) {
        kgemv_prefetch(x + pf, bs);
        k45_block(x, q5, y + i, _mm_loadu_si128((const __m128i *)(pairs + 8 * i)), &a);
    }
    return k45_result(a);
}

/* Rows of q4_K (q5 false) or q5_K: one after another, the prefetches
 * running ahead through the next rows when they are contiguous. */
static inline __attribute__((always_inline)) void k45_rows(bool q5, const uint8_t *w, size_t ws, int64_t n,
                                                           const block_q8_K *y, int64_t nb, float *out) {
    const int16_t *pairs = (const int16_t *)(const void *)(y + nb);
    for (int64_t r = 0; r < n; r++) out[r] = k45_dot_pf(w + (size_t)r * ws, q5, y, pairs, nb, KGEMV_PF_BYTES);
}

/* One q6_K block of a row into acc (the vec_dot's float steps). */
static inline __attribute__((always_inline)) __m256 q6k_step(const uint8_t *x, const block_q8_K *y, __m256 acc) {
    const block_q6_K *b = (const block_q6_K *)x;
    /* the codes carry +32: take off 32 * sum_s sc[s] * bsums[s] */
    __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales)), load32(y->bsums));
    __m256i s = _mm256_sub_epi32(q6k_block(b, y->qs), _mm256_slli_epi32(off, 5));
    return _mm256_fmadd_ps(_mm256_set1_ps(y->d * h2f(b->d)), _mm256_cvtepi32_ps(s), acc);
}

#ifdef CANDLE_QUANT_VNNI
/* q6_K rows one after another, one stream prefetched KGEMV_PF6_BYTES ahead. */
static void q6k_rows(const uint8_t *w, size_t ws, int64_t n, const block_q8_K *y, int64_t nb, float *out) {
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *x = w + (size_t)r * ws;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++, x += sizeof(block_q6_K)) {
            kgemv_prefetch(x + KGEMV_PF6_BYTES, sizeof(block_q6_K));
            acc = q6k_step(x, y + i, acc);
        }
        out[r] = hsum_ps(acc);
    }
}
#else
/* Per row the float steps are the vec_dot's: equal results bit for bit. */
static void q6k_pass(const uint8_t *w, size_t ws, int nr, const block_q8_K *y, int64_t nb, float *out) {
    __m256 acc[KGEMV_ROWS];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, y++) {
        const uint8_t *x = w + (size_t)i * sizeof(block_q6_K);
#pragma GCC unroll 1
        for (int r = 0; r < nr; r++, x += ws) {
            kgemv_prefetch(x + KGEMV_ROWS * ws, sizeof(block_q6_K));
            acc[r] = q6k_step(x, y, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) out[r] = hsum_ps(acc[r]);
}

static void q6k_rows(const uint8_t *w, size_t ws, int64_t n, const block_q8_K *y, int64_t nb, float *out) {
    for (int64_t r = 0; r < n; r += KGEMV_ROWS)
        q6k_pass(w + (size_t)r * ws, ws, (int)(n - r < KGEMV_ROWS ? n - r : KGEMV_ROWS), y, nb, out + r);
}
#endif

static void q4k_rows(const uint8_t *w, size_t ws, int64_t n, const block_q8_K *y, int64_t nb, float *out) {
    k45_rows(false, w, ws, n, y, nb, out);
}
static void q5k_rows(const uint8_t *w, size_t ws, int64_t n, const block_q8_K *y, int64_t nb, float *out) {
    k45_rows(true, w, ws, n, y, nb, out);
}

void QUANT_KERNEL(cdl_gemv_rows_k)(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out) {
    const uint8_t *row = w;
    const int64_t nb = K / QK_K;
    if (t == CANDLE_DTYPE_Q2_K)
        for (int64_t r = 0; r < n; r++) out[r] = q2k_row((const void *)(row + (size_t)r * ws), xv, nb, KGEMV_PF_BYTES);
    if (t == CANDLE_DTYPE_Q3_K)
        for (int64_t r = 0; r < n; r++) out[r] = q3k_row((const void *)(row + (size_t)r * ws), xv, nb, KGEMV_PF_BYTES);
    if (t == CANDLE_DTYPE_Q4_K) q4k_rows(row, ws, n, xv, nb, out);
    if (t == CANDLE_DTYPE_Q5_K) q5k_rows(row, ws, n, xv, nb, out);
    if (t == CANDLE_DTYPE_Q6_K) q6k_rows(row, ws, n, xv, nb, out);
}

/* Products with a few activation rows (a speculative verification step, a
 * server's concurrent streams): each weight block is decoded once (codes,
 * scales spread over registers) and multiplied with up to KROWS activation
 * rows, where the packed panels of qgemm_avx2.c would repack the weight on
 * every call and the traits vec_dots would decode it once per row. Per
 * activation row the operations are those of the matrix-vector rows above
 * (k45_block, q6k_step) in their order, so each output has the bits of the
 * one-row product, whatever the batch. */
#define KROWS 6

/* R (<= KROWS) activation rows, q8_K, ys bytes apart, times one q4_K/q5_K
 * weight row x: out[r * ldo]. */
static inline __attribute__((always_inline)) void k45_multi(bool q5, int R, const uint8_t *x, const char *y0,
                                                            size_t ys, int64_t nb, float *out, int64_t ldo) {
    const size_t bs = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t o_qs = q5 ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    k45_acc a[KROWS];
    for (int r = 0; r < R; r++) a[r] = (k45_acc){_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < nb; i++, x += bs) {
        kgemv_prefetch(x + KGEMV_PF_BYTES, bs);
        uint64_t sc, mn;
        k4_scales(x + offsetof(block_q4_K, scales), &sc, &mn);
        __m256i scv = scales_u64(sc), qh = q5 ? load32(x + offsetof(block_q5_K, qh)) : _mm256_setzero_si256();
        __m256i s[KROWS]; /* one chain per row: the int32 sums are exact in any order */
        for (int r = 0; r < R; r++) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            k45_codes(x + o_qs, qh, c, q5, &lo, &hi);
            __m256i c0 = spread(scv, bcast_ctrl[2 * c]), c1 = spread(scv, bcast_ctrl[2 * c + 1]);
            for (int r = 0; r < R; r++) {
                const int8_t *q = ((const block_q8_K *)(const void *)(y0 + (size_t)r * ys) + i)->qs + 64 * c;
                s[r] = madd_acc(madd_acc(s[r], _mm256_maddubs_epi16(lo, load32(q)), c0),
                                _mm256_maddubs_epi16(hi, load32(q + 32)), c1);
            }
        }
        __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
        uint32_t d_dmin; /* the f16 pair d, dmin */
        memcpy(&d_dmin, x, 4);
        __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin));
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(y0 + (size_t)r * ys) + i;
            __m128i m = _mm_madd_epi16(mn16, bsum_pairs(y->bsums));
            __m128 dv = _mm_mul_ps(dd, _mm_set1_ps(y->d));
            a[r].q = _mm256_fmadd_ps(_mm256_broadcastss_ps(dv), _mm256_cvtepi32_ps(s[r]), a[r].q);
            a[r].m = _mm_fmadd_ps(_mm_permute_ps(dv, 0x55), _mm_cvtepi32_ps(m), a[r].m);
        }
    }
    for (int r = 0; r < R; r++) out[r * ldo] = k45_result(a[r]);
}

/* The same for one q6_K weight row. */
static inline __attribute__((always_inline)) void q6k_multi(int R, const uint8_t *x, const char *y0, size_t ys,
                                                            int64_t nb, float *out, int64_t ldo) {
    __m256 acc[KROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, x += sizeof(block_q6_K)) {
        kgemv_prefetch(x + KGEMV_PF6_BYTES, sizeof(block_q6_K));
        const block_q6_K *b = (const block_q6_K *)(const void *)x;
        __m256i sum[KROWS];
        for (int r = 0; r < R; r++) sum[r] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q[4], scv = scales_i8(b->scales + 8 * h);
            q6k_codes(b, h, q);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i sk = spread(scv, pair_ctrl[k]);
                for (int r = 0; r < R; r++) {
                    const int8_t *qy = ((const block_q8_K *)(const void *)(y0 + (size_t)r * ys) + i)->qs;
                    sum[r] = madd_acc(sum[r], _mm256_maddubs_epi16(q[k], load32(qy + 128 * h + 32 * k)), sk);
                }
            }
        }
        /* the codes carry +32: take off 32 * sum_s sc[s] * bsums[s] */
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        float dx = h2f(b->d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(y0 + (size_t)r * ys) + i;
            __m256i s = _mm256_sub_epi32(sum[r], _mm256_slli_epi32(_mm256_madd_epi16(sc16, load32(y->bsums)), 5));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx), _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r * ldo] = hsum_ps(acc[r]);
}

/* One weight row times R = 1..KROWS activation rows, R a constant in each
 * case so the row loops unroll. */
#define K_MULTI(R)                                                                                             \
    do {                                                                                                       \
        if (t == CANDLE_DTYPE_Q6_K) q6k_multi(R, row, y, xs, nb, out, ldc);                                    \
        else k45_multi(t == CANDLE_DTYPE_Q5_K, R, row, y, xs, nb, out, ldc);                                   \
    } while (0)

int QUANT_KERNEL(cdl_qgemm_rows_k)(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                   const void *x, size_t xs, float *c, int64_t ldc) {
    if ((t != CANDLE_DTYPE_Q4_K && t != CANDLE_DTYPE_Q5_K && t != CANDLE_DTYPE_Q6_K) || K % QK_K) return 0;
    const int64_t nb = K / QK_K;
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * ws;
        for (int64_t m = 0; m < M; m += KROWS) {
            const char *y = (const char *)x + (size_t)m * xs;
            float *out = c + m * ldc + n;
            switch (M - m < KROWS ? M - m : KROWS) {
            case 1: K_MULTI(1); break;
            case 2: K_MULTI(2); break;
            case 3: K_MULTI(3); break;
            case 4: K_MULTI(4); break;
            case 5: K_MULTI(5); break;
            default: K_MULTI(6); break;
            }
        }
    }
    return 1;
}
#undef K_MULTI

#endif
