/* Internal helpers shared by the AVX2 quant kernels (compiled with -mavx2
 * -mfma -mf16c). A file that defines CANDLE_QUANT_VNNI first (compiled with
 * the AVX-512 flags) gets dot_u8_i8 as one VNNI instruction instead. */
#ifndef CANDLE_QUANT_AVX2_IMPL_H
#define CANDLE_QUANT_AVX2_IMPL_H

#include <immintrin.h>

#include "quant-x86-impl.h"

/* The AVX2 kernels are only registered on CPUs with F16C too. */
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles -> 32 codes: low nibbles (elements 0..15) in the low
 * lane, high nibbles (16..31) in the high lane. */
static inline __m256i unpack_nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* 32 bits -> 32 bytes, 0xFF where the bit is set. */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

/* Unsigned bytes times signed bytes, summed in 8 int32 lanes (four
 * products a lane). maddubs saturates its pair sums at 16 bits; every
 * caller's codes keep them below 2^15. */
static inline __m256i dot_u8_i8(__m256i u, __m256i s) {
#ifdef CANDLE_QUANT_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* acc + the int16 pair products of a and b summed in int32 lanes (madd and
 * an add; with CANDLE_QUANT_VNNI one vpdpwssd). */
static inline __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
#ifdef CANDLE_QUANT_VNNI
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* Signed times signed via the sign trick: |x| * (y with x's sign). y must
 * not hold -128 where x is negative (our activation quantizers never emit it). */
static inline __m256i dot_i8_i8(__m256i x, __m256i y) {
    return dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* Four blocks' 8-lane int32 sums -> one vector whose lane j (of each
 * 128-bit half) is a partial sum of block j: the horizontal sums happen
 * once per four blocks, and the final hsum_ps adds the two halves. */
static inline __m256i reduce_x4(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* Eight f16 fields `stride` bytes apart -> eight floats (one vcvtph2ps;
 * the halves are gathered on the integer ports). */
static inline uint64_t f16x4_at(const uint8_t *p, size_t stride) {
    uint16_t a, b, c, e;
    memcpy(&a, p, 2);
    memcpy(&b, p + stride, 2);
    memcpy(&c, p + 2 * stride, 2);
    memcpy(&e, p + 3 * stride, 2);
    return (uint64_t)a | (uint64_t)b << 16 | (uint64_t)c << 32 | (uint64_t)e << 48;
}
static inline __m256 h2f_x8(const void *p, size_t stride) {
    const uint8_t *b = p;
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)f16x4_at(b + 4 * stride, stride), (long long)f16x4_at(b, stride)));
}

/* roundf (half away from zero): add the largest float below one half with
 * v's sign, then truncate. Checked against roundf for every float below 2^23
 * in magnitude (codes here are at most 127). */
static inline __m256 round_away(__m256 v) {
    __m256 half = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(0.49999997f));
    return _mm256_round_ps(_mm256_add_ps(v, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

/* 4 x 8 int32 (each in -128..127) -> 32 int8 in element order. */
static inline __m256i pack_i32x4(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element q8 block (the q8_0/q8_1 rounding): returns the float scale
 * and writes the codes; with sum, also their sum (for q8_1). */
static inline float quantize_q8_32(const float *x, int8_t *qs, int *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float d = _mm_cvtss_f32(h) / 127;
    __m256 vid = _mm256_set1_ps(d != 0 ? 1.0f / d : 0.0f);
    __m256i q0 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v0, vid)));
    __m256i q1 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v1, vid)));
    __m256i q2 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v2, vid)));
    __m256i q3 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v3, vid)));
    if (sum) *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    _mm256_storeu_si256((__m256i *)qs, pack_i32x4(q0, q1, q2, q3));
    return d;
}

#endif
