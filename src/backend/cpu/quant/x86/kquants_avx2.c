/* AVX2 kernels of the K types: the q8_K activation quantizer (bit-identical
 * to the scalar one) here, and the q2_K to q6_K and iq4_xs dots and K
 * matrix-vector rows from kquants-impl.h (shared with kquants_avx512.c).
 * Sub-block products are summed in int32 with the sub-block scales applied
 * by madd; the minimums are folded in through q8_K's bsums, as in the
 * scalar kernels. */
#include <stdbool.h>
#include <stddef.h>

#include "../gemv-impl.h"
#include "avx2-impl.h"

void cdl_q8_k_from_f32_avx2(const float *src, void *dst, int64_t n) {
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


#define QUANT_KERNEL(name) name##_avx2
#include "kquants-impl.h"
