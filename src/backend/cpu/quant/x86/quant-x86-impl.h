/* Internal: the x86-64 quantized kernels (this folder, only on x86-64
 * builds): the AVX2 row kernels and dots, their AVX-512 VNNI versions, and
 * the matrix-vector (gemv) and multi-row (qgemm) kernels behind
 * ../gemv.c and ../qgemm.c. Safe to include anywhere: empty elsewhere. */
#ifndef CANDLE_CPU_QUANT_X86_IMPL_H
#define CANDLE_CPU_QUANT_X86_IMPL_H

#include "../quant-kernels-impl.h"

/* AVX2 + FMA + F16C versions (x86/, only on x86-64 builds; call only when
 * cdl_quant_uses_avx2()). Results equal the scalar ones up to float summation
 * order; the quantizers are bit-identical to the scalar ones. */
#if defined(__x86_64__) || defined(_M_X64)
#define CANDLE_QUANT_HAVE_X86 1
void cdl_f16_to_f32_row_avx2(const void *src, float *dst, int64_t n);
void cdl_f32_to_f16_row_avx2(const float *src, void *dst, int64_t n);
void cdl_bf16_to_f32_row_avx2(const void *src, float *dst, int64_t n);
void cdl_f32_to_bf16_row_avx2(const float *src, void *dst, int64_t n);
void cdl_q4_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q4_1_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q5_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q4_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q5_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q6_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void cdl_q4_z128_to_f32_avx2(const void *src, float *dst, int64_t n);
/* n q4_z128 values as q8_0 blocks (codes q - z) or q5_0 blocks (codes
 * q - z + 16) of the same values, each code block's scale the block's d:
 * q4_z128 takes q8_0's VNNI kernels and q5_0's AVX2 panels. */
void cdl_q4_z128_to_q8_0_avx2(const void *src, void *dst, int64_t n);
void cdl_q4_z128_to_q5_0_avx2(const void *src, void *dst, int64_t n);
void cdl_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n);
void cdl_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n);
void cdl_q8_k_from_f32_avx2(const float *src, void *dst, int64_t n);
void cdl_vec_dot_q4_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_1_q8_1_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_1_q8_1_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q2_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q3_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_xs_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q6_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
/* AVX-512 VNNI versions of the 32-element and K dots (same results as AVX2). */
void cdl_vec_dot_q4_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_1_q8_1_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_1_q8_1_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_nl_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q2_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q3_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_xs_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q6_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);

/* Matrix-vector rows (gemv_avx2.c, kquants_avx2.c; VNNI: gemv_avx512.c,
 * kquants_avx512.c), dispatched by ../gemv.c. */
size_t cdl_gemv_x_bytes_avx2(candle_dtype t, int64_t K);
void cdl_gemv_prep_avx2(candle_dtype t, int64_t K, const float *x, void *xv);
void cdl_gemv_rows_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out);
/* q2_K to q6_K (kquants-impl.h); xv: the q8_K row, for q4_K
 * and q5_K followed by each block's bsums summed in pairs (8 int16). */
void cdl_gemv_rows_k_avx2(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out);
/* The prepared activation of cdl_gemv_prep_avx2 from the row quantized
 * to t's vec_dot type (q8_0, q8_1) rather than from its floats. */
void cdl_gemv_prep_q8_avx2(candle_dtype t, int64_t K, const void *q8, void *xv);
/* q4_0, q4_1, q5_0, q5_1 or q8_0 weight rows times M prepared activation
 * rows (cdl_gemv_prep_*, xb bytes apart), each output the bits of
 * cdl_gemv_rows_avx2's: c[m * ldc + n]. AVX2 (no VNNI variant). */
void cdl_qgemm_rows_few_avx2(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                             const void *xv, size_t xb, float *c, int64_t ldc);
/* q4_K, q5_K and q6_K weight rows times M activation rows in their q8_K
 * (xs bytes apart), each output the bits of cdl_gemv_rows_k_avx2's:
 * c[m * ldc + n] for m < M, n < N. Returns 0 for another type. */
int cdl_qgemm_rows_k_avx2(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                          const void *x, size_t xs, float *c, int64_t ldc);
/* AVX-512 VNNI rows (gemv_avx512.c, kquants_avx512.c), used
 * when cdl_quant_uses_vnni(): the same activation, int32 lanes and float
 * steps as the AVX2 rows, so the results are equal bit for bit. */
void cdl_gemv_rows_vnni(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out);
void cdl_gemv_rows_k_vnni(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                             float *out);
int cdl_qgemm_rows_k_vnni(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                          const void *x, size_t xs, float *c, int64_t ldc);

/* Multi-row panels (qgemm_avx2.c, qgemm_avx512.c, qgemm_direct_avx512.c),
 * dispatched by ../qgemm.c. */
/* Pack nn <= CANDLE_QGEMM_NR weight rows (missing rows as zeros) into p. */
size_t cdl_qgemm_panel_bytes_avx2(candle_dtype t, int64_t K);
void cdl_qgemm_pack_avx2(candle_dtype t, int64_t K, int nn, const void *w, size_t ws, void *p);
/* Per activation row, what the panels of t need besides the row (q4_0,
 * q5_0: the block scales and offset terms; q8_0: the blocks' code sums, for
 * the 16-row VNNI kernel), aux_bytes(t, K) each (0: none), prepared once
 * for all panels by prep from M rows xs bytes apart. */
size_t cdl_qgemm_aux_bytes_avx2(candle_dtype t, int64_t K);
void cdl_qgemm_prep_avx2(candle_dtype t, int64_t K, int64_t M, const void *x, size_t xs, void *aux);
/* The panel times M activation rows xs bytes apart (with their aux
 * records): c[m * ldc + j] for j < nn. */
void cdl_qgemm_panel_rows_avx2(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                  const void *aux, int64_t M, float *c, int64_t ldc);
/* The same with the byte dots as AVX512-VNNI vpdpbusd (qgemm_avx512.c), the
 * same bits; only where cdl_quant_uses_vnni(). */
void cdl_qgemm_panel_rows_vnni(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                  const void *aux, int64_t M, float *c, int64_t ldc);
/* With AVX512-VNNI, the types with panels also multiply two panels at once
 * (16 weight rows in 512-bit vectors, the same bits): p holds the
 * panel of rows 0..7 and after it (panel_bytes later) the panel of rows
 * 8..nn-1, 8 < nn <= 16. */
int cdl_qgemm_has_pairs_vnni(candle_dtype t);
void cdl_qgemm_pair_rows_vnni(candle_dtype t, int64_t K, int nn, const void *p, const void *x, size_t xs,
                                 const void *aux, int64_t M, float *c, int64_t ldc);
/* Small M with AVX512-VNNI (qgemm_direct_avx512.c): the weight blocks read
 * in place (no panels), the activation rows in the vector lanes, 16 per
 * tile; q4_0, q4_1 and q8_0, the same bits as the panels. scratch:
 * cdl_qgemm_direct_bytes_vnni(t, K, M) bytes. */
int cdl_qgemm_has_direct_vnni(candle_dtype t);
size_t cdl_qgemm_direct_bytes_vnni(candle_dtype t, int64_t K, int64_t M);
void cdl_qgemm_direct_vnni(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                              const void *x, size_t xs, float *c, int64_t ldc, void *scratch);
#endif

#endif
