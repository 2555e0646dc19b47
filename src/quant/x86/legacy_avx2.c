/* AVX2 kernels of the 32-element block types: activation quantizers (q8_0,
 * q8_1; bit-identical to the scalar ones) and dot products. */
#include "avx2-impl.h"

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

/* One 32-element q8 block: returns the float scale and writes the codes;
 * with sum, also their sum (for q8_1). */
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

void candle_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0)
        b[i].d = _cvtss_sh(quantize_q8_32(src, b[i].qs, NULL), _MM_FROUND_TO_NEAREST_INT);
}

void candle_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_1 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++, src += QK8_1) {
        float d = quantize_q8_32(src, b[i].qs, &sum);
        b[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        b[i].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

#define QUANT_KERNEL(name) name##_avx2
#include "legacy-dots-impl.h"
