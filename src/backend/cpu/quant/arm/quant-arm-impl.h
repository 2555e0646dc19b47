/* Internal: the arm64 quantized kernels (this folder, only on aarch64
 * builds): the NEON dots (_neon on plain armv8-a, _dotprod with the
 * armv8.2-a dot product, called only where the config chose it), their
 * multi-row kernels behind ../qgemm.c, and the activation quantizers
 * (quantize_neon.c: f32 rows to q8_0 / q8_1 / q8_K, the scalar quantizers'
 * bytes exactly, registered as those types' from_f32 by ../quant_kernels.c).
 * Safe to include anywhere: empty elsewhere. */
#ifndef CANDLE_CPU_QUANT_ARM_IMPL_H
#define CANDLE_CPU_QUANT_ARM_IMPL_H

#include "../quant-kernels-impl.h"

/* NEON versions (arm/, only on aarch64 builds): _neon on plain armv8-a,
 * _dotprod with the armv8.2-a dot product (only where AT_HWCAP has it).
 * Their results equal the scalar dots bit for bit (same integer block sums,
 * same float steps). cdl_qgemm_rows_* returns 0 for a type it lacks. */
#if defined(__aarch64__)
#define CANDLE_QUANT_HAVE_NEON 1
void cdl_vec_dot_q4_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_1_q8_1_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_1_q8_1_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_1_q8_1_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_1_q8_1_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_z128_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_z128_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q6_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q6_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
int cdl_qgemm_rows_neon(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                           const void *x, size_t xs, float *c, int64_t ldc);
int cdl_qgemm_rows_dotprod(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                              const void *x, size_t xs, float *c, int64_t ldc);
/* q4_K, q5_K and q6_K (kquants_*.c), called by the two above; rows at the
 * blocks' natural alignment. */
int cdl_qgemm_rows_k_neon(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                             const void *x, size_t xs, float *c, int64_t ldc);
int cdl_qgemm_rows_k_dotprod(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                const void *x, size_t xs, float *c, int64_t ldc);
#endif

#if defined(__aarch64__)
void cdl_q8_0_from_f32_neon(const float *src, void *dst, int64_t n);
void cdl_q8_1_from_f32_neon(const float *src, void *dst, int64_t n);
void cdl_q8_k_from_f32_neon(const float *src, void *dst, int64_t n);
#endif

#endif
