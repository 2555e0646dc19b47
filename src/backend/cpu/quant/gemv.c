/* Matrix-vector dispatch: the AVX-512 VNNI rows where the traits chose the
 * VNNI dots, else the AVX2 kernels where the CPU has them. Other CPUs
 * (arm64: the NEON dots) take the portable rows: the activation quantized
 * to the type's vec_dot_type by its traits from_f32 (the batched product's
 * own quantization) and one traits vec_dot per row, so a row's result is the
 * batched product's bits and the matrix-vector callers (guided row chunks,
 * fused products sharing one activation) work everywhere. */
#include "gemv-impl.h"

#include "arm/quant-arm-impl.h"
#include "quant-kernels-impl.h"
#include "x86/quant-x86-impl.h"

#ifndef CANDLE_QUANT_HAVE_X86
static size_t portable_x_bytes(candle_dtype t, int64_t K) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    if (!wt || !wt->is_quantized || !wt->vec_dot || K <= 0) return 0;
    const candle_dtype_traits *vt = cpu_dtype(wt->vec_dot_type);
    if (!vt->from_f32 || K % wt->block_size || K % vt->block_size) return 0;
    return (candle_dtype_row_size(wt->vec_dot_type, K) + 63) & ~(size_t)63;
}
#endif

size_t cdl_gemv_x_bytes(candle_dtype t, int64_t K) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2()) return cdl_gemv_x_bytes_avx2(t, K);
    (void)t;
    (void)K;
    return 0;
#else
    return portable_x_bytes(t, K);
#endif
}

void cdl_gemv_prep(candle_dtype t, int64_t K, const float *x, void *xv) {
#ifdef CANDLE_QUANT_HAVE_X86
    cdl_gemv_prep_avx2(t, K, x, xv);
#else
    cpu_dtype(cpu_dtype(t)->vec_dot_type)->from_f32(x, xv, K);
#endif
}

void cdl_gemv_rows(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                      float *out) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_vnni()) cdl_gemv_rows_vnni(t, K, n, w, ws, xv, out);
    else cdl_gemv_rows_avx2(t, K, n, w, ws, xv, out);
#else
    candle_vec_dot_fn dot = cpu_dtype(t)->vec_dot;
    for (int64_t r = 0; r < n; r++) dot(K, out + r, (const char *)w + (size_t)r * ws, xv);
#endif
}
