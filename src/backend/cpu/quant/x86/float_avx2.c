/* AVX2 + F16C row converters of the half types, bit-identical to the scalar
 * ones in core/dtype.c (round to nearest even, NaN kept quiet with its
 * payload's high bits), 8 or 16 elements a step and the scalar code for the
 * tail. */
#include "avx2-impl.h"

/* vcvtph2ps quiets signalling NaNs; the scalar conversion (and numpy) keep
 * the payload as it is, so NaN lanes are rebuilt from the bits. */
static inline __m256 f16x8_to_f32(__m128i h) {
    __m256i v = _mm256_cvtepu16_epi32(h);
    __m256i nan_bits = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x8000)), 16),
                                       _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                                                       _mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x3ff)), 13)));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7fff)), _mm256_set1_epi32(0x7c00));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_castps_si256(_mm256_cvtph_ps(h)), nan_bits, is_nan));
}

void cdl_f16_to_f32_row_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, f16x8_to_f32(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) dst[i] = candle_f16_to_f32(s[i]);
}

void cdl_f32_to_f16_row_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = candle_f32_to_f16(src[i]);
}

void cdl_bf16_to_f32_row_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) dst[i] = candle_bf16_to_f32(s[i]);
}

/* 8 floats -> 8 bf16 in the low 16 bits of each 32-bit lane. */
static inline __m256i bf16_round(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    return _mm256_and_si256(_mm256_blendv_epi8(r, quiet, nan), _mm256_set1_epi32(0xffff));
}

void cdl_f32_to_bf16_row_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round(_mm256_loadu_ps(src + i)), b = bf16_round(_mm256_loadu_ps(src + i + 8));
        /* packus works per 128-bit lane: restore element order after it */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(d + i), p);
    }
    for (; i < n; i++) d[i] = candle_f32_to_bf16(src[i]);
}
