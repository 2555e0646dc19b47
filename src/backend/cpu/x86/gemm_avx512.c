/* AVX-512 GEMM micro-kernel, same packed panels and contract as the AVX2 one
 * (MR 6 x NR 16): one zmm holds a row of the tile. Six accumulators alone
 * would leave the FMA units waiting on their latency, so even and odd k
 * steps go to two sets of six, summed at the end. The other primitives stay
 * AVX2 (memory-bound or short). Chosen only when cpuid reports AVX-512F and
 * the OS saves the zmm state; this machine has no AVX-512, so it was built
 * here but run only where the hardware has it (test_fast_kernels covers it
 * there). */
#include <immintrin.h>

#include "../cpu-impl.h"

void cpu_gemm_ukr_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                         int nr, bool accumulate);

void cpu_gemm_ukr_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                         int nr, bool accumulate) {
    for (int i = 0; i < mr; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m512 e[CPU_GEMM_MR], o[CPU_GEMM_MR];
    for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = o[i] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 2 <= k; p += 2) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + CPU_GEMM_NR);
        for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, e[i]);
        for (int i = 0; i < CPU_GEMM_MR; i++)
            o[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[CPU_GEMM_MR + i]), b1, o[i]);
        a += 2 * CPU_GEMM_MR;
        b += 2 * CPU_GEMM_NR;
    }
    if (p < k) {
        __m512 b0 = _mm512_loadu_ps(b);
        for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, e[i]);
    }
    __mmask16 mask = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    for (int i = 0; i < mr; i++) {
        __m512 v = _mm512_add_ps(e[i], o[i]);
        float *ci = c + i * ldc;
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, ci));
        _mm512_mask_storeu_ps(ci, mask, v);
    }
}
