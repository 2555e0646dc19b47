/* Machine probes for the benchmark (peak FMA rate, read bandwidth), on the
 * best instruction set available; portable loops elsewhere. */
#include <string.h>

#include "cpu-impl.h"
#include "x86/x86-impl.h"

static double probe_fma_scalar(int64_t iters) {
    float c[16];
    for (int j = 0; j < 16; j++) c[j] = 1.0f + 0.01f * (float)j; /* distinct: no merged chains */
    for (int64_t i = 0; i < iters; i++)
        for (int j = 0; j < 16; j++) c[j] = c[j] * 0.999999f + 1e-7f;
    float s = 0;
    for (int j = 0; j < 16; j++) s += c[j];
    return (double)iters * 16 * 2 + (s > 1e30f ? 1 : 0);
}

static float probe_read_scalar(const float *p, size_t n) {
    float s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += p[i + j];
    for (; i < n; i++) s[0] += p[i];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

#if defined(__x86_64__)
static bool have_avx2(void) {
    const cpu_features *f = cpu_get_features();
    return f->avx2 && f->fma;
}
#endif

double cpu_probe_fma(int64_t iters) {
#if defined(__x86_64__)
    /* zmm where the GEMM runs on zmm (the avx512 table, whose FMA rate
     * there can be twice the ymm one) */
    if (have_avx2() && !strcmp(cpu_simd_get()->name, "avx512")) return cpu_probe_fma_avx512(iters);
    if (have_avx2()) return cpu_probe_fma_avx2(iters);
#endif
    return probe_fma_scalar(iters);
}

float cpu_probe_read(const float *p, size_t n) {
#if defined(__x86_64__)
    if (have_avx2()) return cpu_probe_read_avx2(p, n);
#endif
    return probe_read_scalar(p, n);
}
