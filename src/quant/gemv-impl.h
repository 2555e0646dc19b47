/* Internal: quantized weight times one activation vector (batch-1 decoding).
 *
 * The activation is prepared once per product in a layout chosen for the
 * weight type (q8 codes ordered so that one load feeds two weight blocks,
 * block scales as floats, the offset terms of q4_0/q4_1 precomputed per
 * block), then every weight row is streamed once from the mapping with no
 * repacking. Codes and scales are those of the type's vec_dot activation
 * (q8_0, q8_1: the f16-rounded scale), so the integer block sums equal the
 * traits vec_dot's and results differ only in the order of float sums. */
#ifndef CANDLE_GEMV_IMPL_H
#define CANDLE_GEMV_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "candle/dtype.h"

/* Bytes of the prepared activation for weight type t and K elements (a
 * multiple of 64), or 0 when t has no matrix-vector kernel on this CPU. */
size_t candle_gemv_x_bytes(candle_dtype t, int64_t K);
/* x: K floats; xv: candle_gemv_x_bytes(t, K) bytes, 32-byte aligned. */
void candle_gemv_prep(candle_dtype t, int64_t K, const float *x, void *xv);
/* out[r] = dot(weight row r, x) for r < n; rows ws bytes apart (the
 * portable rows of non-x86 CPUs are traits vec_dots: rows at the blocks'
 * natural alignment, 2 bytes). */
void candle_gemv_rows(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                      float *out);

#if defined(__x86_64__) || defined(_M_X64)
size_t candle_gemv_x_bytes_avx2(candle_dtype t, int64_t K);
void candle_gemv_prep_avx2(candle_dtype t, int64_t K, const float *x, void *xv);
void candle_gemv_rows_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out);
/* q2_K to q6_K (src/quant/x86/kquants-impl.h); xv: the q8_K row, for q4_K
 * and q5_K followed by each block's bsums summed in pairs (8 int16). */
void candle_gemv_rows_k_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out);
/* AVX-512 VNNI rows (src/quant/x86/gemv_avx512.c, kquants_avx512.c), used
 * when candle_quant_uses_vnni(): the same activation, int32 lanes and float
 * steps as the AVX2 rows, so the results are equal bit for bit. */
void candle_gemv_rows_vnni(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out);
void candle_gemv_rows_k_vnni(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out);
#endif

#endif
