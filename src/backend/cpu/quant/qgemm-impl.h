/* Internal: quantized weight rows times many quantized activation rows.
 *
 * cdl_qgemm_rows computes c[m * ldc + n] = vec_dot(K, weight row n,
 * activation row m) for m < M, n < N: weight rows at w + n * ws in the weight
 * dtype, activation rows at x + m * xs in its vec_dot_type, K a multiple of
 * both block sizes. Types with a multi-row kernel (AVX2: q4_0, q4_1, q5_0,
 * q5_1, q8_0, q4_K, q6_K, and q4_z128 through q8_0's; with AVX512-VNNI the
 * same kernels on vpdpbusd)
 * repack CANDLE_QGEMM_NR weight rows at a time into scratch, interleaved so
 * one integer multiply-add serves all of them, and reuse each packed panel
 * for all M activation rows; the others (and the scalar build) run one
 * traits vec_dot per output. Results equal the per-output vec_dot up to the
 * order of the float sums of block scales (the integer block sums are exact);
 * for q4_0, q4_1, q5_0, q5_1 and q8_0 they equal cdl_gemv_rows bit for
 * bit. */
#ifndef CANDLE_QGEMM_IMPL_H
#define CANDLE_QGEMM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "candle/dtype.h"

#define CANDLE_QGEMM_NR 8 /* weight rows per packed panel */

/* True when t has a multi-row kernel on this CPU (without the AVX2 kernels:
 * every type with a vec_dot, on the exact per-output dots). */
int cdl_qgemm_has_fast(candle_dtype t);
/* Activation rows up to which cdl_qgemm_rows runs t with depth K on the
 * few-row kernels (each output the matrix-vector product's bits), 0 when
 * t has none on this CPU; the K types' limits do not depend on K. */
int64_t cdl_qgemm_few_rows(candle_dtype t, int64_t K);
/* True when cdl_qgemm_rows gives each output the traits vec_dot's bits
 * (the path without the AVX2 kernels). */
int cdl_qgemm_rows_exact(candle_dtype t);
/* True when the panels run on the AVX512-VNNI kernels (the CPU has them
 * and the config's quant cap is not avx2). */
int cdl_qgemm_uses_vnni(void);
/* Scratch bytes cdl_qgemm_rows needs for dtype t and K (0 for the
 * per-output path). */
size_t cdl_qgemm_scratch_bytes(candle_dtype t, int64_t K);
/* Rows up to which a product whose rows must keep their one-row bits
 * (cdl_qgemm_rows_steps) stays on the few-row kernels: AVX2's limits, which
 * the VNNI panels' speed lowers for cdl_qgemm_rows (q4_K 6, q6_K 10). */
int64_t cdl_qgemm_few_rows_steps(candle_dtype t, int64_t K);
/* cdl_qgemm_rows, the few-row kernels up to cdl_qgemm_few_rows_steps rows
 * (the same scratch). */
void cdl_qgemm_rows_steps(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                          const void *x, size_t xs, float *c, int64_t ldc, void *scratch);
/* scratch: cdl_qgemm_scratch_bytes(t, K) bytes, 32-byte aligned. */
void cdl_qgemm_rows(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                       const void *x, size_t xs, float *c, int64_t ldc, void *scratch);

#endif
