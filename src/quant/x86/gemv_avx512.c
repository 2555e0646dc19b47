/* AVX-512 VNNI matrix-vector rows (see gemv-impl.h): the K types through
 * kquants_avx512.c; the others, for now, through the AVX2 rows. */
#include "../gemv-impl.h"
#include "avx2-impl.h"

void candle_gemv_rows_vnni(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out) {
    switch (t) {
    case CANDLE_DTYPE_Q2_K:
    case CANDLE_DTYPE_Q3_K:
    case CANDLE_DTYPE_Q4_K:
    case CANDLE_DTYPE_Q5_K:
    case CANDLE_DTYPE_Q6_K: candle_gemv_rows_k_vnni(t, K, n, w, ws, xv, out); break;
    default: candle_gemv_rows_avx2(t, K, n, w, ws, xv, out); break;
    }
}
