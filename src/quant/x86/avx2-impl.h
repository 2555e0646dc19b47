/* Internal helpers shared by the AVX2 quant kernels (compiled with -mavx2
 * -mfma -mf16c). A file that defines CANDLE_QUANT_VNNI first (compiled with
 * the AVX-512 flags) gets dot_u8_i8 as one VNNI instruction instead. */
#ifndef CANDLE_QUANT_AVX2_IMPL_H
#define CANDLE_QUANT_AVX2_IMPL_H

#include <immintrin.h>

#include "../quant-impl.h"

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

/* Signed times signed via the sign trick: |x| * (y with x's sign). y must
 * not hold -128 where x is negative (our activation quantizers never emit it). */
static inline __m256i dot_i8_i8(__m256i x, __m256i y) {
    return dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

#endif
