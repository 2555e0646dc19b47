/* AVX2 dequantization of the block types of the real models (q4_0, q4_1,
 * q5_0, q8_0, q4_K, q5_K, q6_K, q4_z128): the prefill matmul dequantizes weights
 * through these. Each element takes the scalar kernel's operations in the
 * same order (a product, then a separate add or subtract: no fma), so the
 * floats are bit-identical to it and to the gguf package. */
#include "avx2-impl.h"

/* 32 signed bytes -> 4 x 8 floats times d, stored. */
static inline void store_scaled(__m256i q, __m256 d, float *dst) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(dst, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(dst + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(dst + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

/* The same, then minus m (d * q - m). */
static inline void store_scaled_sub(__m256i q, __m256 d, __m256 m, float *dst) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[k]))), m));
}

void cdl_q4_0_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0)
        store_scaled(_mm256_sub_epi8(unpack_nibbles(b[i].qs), _mm256_set1_epi8(8)), _mm256_set1_ps(h2f(b[i].d)), dst);
}

void cdl_q4_1_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        /* d * q + m, as d * q - (-m): negation is exact */
        store_scaled_sub(unpack_nibbles(b[i].qs), _mm256_set1_ps(h2f(b[i].d)), _mm256_set1_ps(-h2f(b[i].m)), dst);
    }
}

void cdl_q4_z128_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_z128 *b = src;
    for (int64_t i = 0; i < n / QK4_Z; i++) {
        __m256 d = _mm256_set1_ps(h2f(b[i].d));
        __m256i z = _mm256_set1_epi8((char)b[i].z); /* q - z in [-16, 15] */
        for (int s = 0; s < 4; s++, dst += 32) store_scaled(_mm256_sub_epi8(unpack_nibbles(b[i].qs + 16 * s), z), d, dst);
    }
}

void cdl_q4_z128_to_q8_0_avx2(const void *src, void *dst, int64_t n) {
    const block_q4_z128 *b = src;
    block_q8_0 *q = dst;
    for (int64_t i = 0; i < n / QK4_Z; i++) {
        __m256i z = _mm256_set1_epi8((char)b[i].z);
        for (int s = 0; s < 4; s++, q++) {
            q->d = b[i].d;
            _mm256_storeu_si256((__m256i *)(void *)q->qs, _mm256_sub_epi8(unpack_nibbles(b[i].qs + 16 * s), z));
        }
    }
}

void cdl_q4_z128_to_q5_0_avx2(const void *src, void *dst, int64_t n) {
    const block_q4_z128 *b = src;
    block_q5_0 *q = dst;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK4_Z; i++) {
        __m256i off = _mm256_set1_epi8((char)(16 - b[i].z)); /* q - z + 16 in [0, 31] */
        for (int s = 0; s < 4; s++, q++) {
            __m256i v = _mm256_add_epi8(unpack_nibbles(b[i].qs + 16 * s), off);
            uint32_t qh = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(v, 3)); /* bit 4 of each code */
            __m128i lo = _mm_and_si128(_mm256_castsi256_si128(v), m4), hi = _mm_and_si128(_mm256_extracti128_si256(v, 1), m4);
            q->d = b[i].d;
            memcpy(q->qh, &qh, 4);
            _mm_storeu_si128((__m128i *)(void *)q->qs, _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
        }
    }
}

void cdl_q5_0_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        __m256i clear = _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8((char)0xF0));
        store_scaled(_mm256_or_si256(unpack_nibbles(b[i].qs), clear), _mm256_set1_ps(h2f(b[i].d)), dst);
    }
}

void cdl_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0)
        store_scaled(load32(b[i].qs), _mm256_set1_ps(h2f(b[i].d)), dst);
}

/* q4_K / q5_K: sub-block s of 32 is dl * q - ml with dl = d * sc, ml = dmin * m. */
static inline void k4_sub(__m256i q, float d, float dmin, uint8_t sc, uint8_t m, float *dst) {
    store_scaled_sub(q, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(dmin * (float)m), dst);
}

void cdl_q4_k_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min(2 * c, b[i].scales, &sc0, &m0);
            quant_k4_scale_min(2 * c + 1, b[i].scales, &sc1, &m1);
            __m256i q = load32(b[i].qs + 32 * c);
            k4_sub(_mm256_and_si256(q, m4), d, dmin, sc0, m0, dst + 64 * c);
            k4_sub(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), d, dmin, sc1, m1, dst + 64 * c + 32);
        }
    }
}

void cdl_q5_k_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q5_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        __m256i qh = load32(b[i].qh);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min(2 * c, b[i].scales, &sc0, &m0);
            quant_k4_scale_min(2 * c + 1, b[i].scales, &sc1, &m1);
            __m256i bit0 = _mm256_set1_epi8((char)(1 << (2 * c))), bit1 = _mm256_set1_epi8((char)(2 << (2 * c)));
            __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit0), bit0), b4);
            __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit1), bit1), b4);
            __m256i q = load32(b[i].qs + 32 * c);
            k4_sub(_mm256_or_si256(_mm256_and_si256(q, m4), h0), d, dmin, sc0, m0, dst + 64 * c);
            k4_sub(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1), d, dmin, sc1, m1, dst + 64 * c + 32);
        }
    }
}

void cdl_q6_k_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const block_q6_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d);
        for (int h = 0; h < 2; h++) {
            __m256i l0 = load32(b[i].ql + 64 * h), l1 = load32(b[i].ql + 64 * h + 32), qh = load32(b[i].qh + 32 * h);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                /* 32 elements, two scales of 16 */
                int s = 8 * h + 2 * k;
                __m256i v = _mm256_sub_epi8(q[k], off);
                __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                __m256 d0 = _mm256_set1_ps(d * (float)b[i].scales[s]), d1 = _mm256_set1_ps(d * (float)b[i].scales[s + 1]);
                float *o = dst + 128 * h + 32 * k;
                _mm256_storeu_ps(o, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
                _mm256_storeu_ps(o + 8, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
                _mm256_storeu_ps(o + 16, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
                _mm256_storeu_ps(o + 24, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
            }
        }
    }
}
