/* AVX2 kernels of the 32-element block types: activation quantizers (q8_0,
 * q8_1; bit-identical to the scalar ones) and dot products. */
#include "avx2-impl.h"

void cdl_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0)
        b[i].d = _cvtss_sh(quantize_q8_32(src, b[i].qs, NULL), _MM_FROUND_TO_NEAREST_INT);
}

void cdl_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n) {
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
