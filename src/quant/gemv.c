/* Matrix-vector dispatch: the AVX-512 VNNI rows where the traits chose the
 * VNNI dots, else the AVX2 kernels where the CPU has them, else none
 * (callers then use the traits vec_dot path). */
#include "gemv-impl.h"

#include "quant-impl.h"

size_t candle_gemv_x_bytes(candle_dtype t, int64_t K) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (candle_quant_uses_avx2()) return candle_gemv_x_bytes_avx2(t, K);
#endif
    (void)t;
    (void)K;
    return 0;
}

void candle_gemv_prep(candle_dtype t, int64_t K, const float *x, void *xv) {
#ifdef CANDLE_QUANT_HAVE_X86
    candle_gemv_prep_avx2(t, K, x, xv);
#else
    (void)t, (void)K, (void)x, (void)xv;
#endif
}

void candle_gemv_rows(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                      float *out) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (candle_quant_uses_vnni()) candle_gemv_rows_vnni(t, K, n, w, ws, xv, out);
    else candle_gemv_rows_avx2(t, K, n, w, ws, xv, out);
#else
    (void)t, (void)K, (void)n, (void)w, (void)ws, (void)xv, (void)out;
#endif
}
