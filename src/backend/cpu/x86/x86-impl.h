/* Internal: the x86-64 kernels of the CPU backend's primitive tables
 * (simd_avx2.c: the avx2 table; gemm_avx512.c: the kernels the avx512
 * tables take on top of it, built in cpu_dispatch.c) and the benchmark
 * probes (probe_avx2.c, gemm_avx512.c). The fast kernels reach them only
 * through the table (cpu_simd_get()); each contract is the table field's
 * in cpu-impl.h. Safe to include anywhere: empty elsewhere. */
#ifndef CANDLE_CPU_X86_IMPL_H
#define CANDLE_CPU_X86_IMPL_H

#include "../cpu-impl.h"

#if defined(__x86_64__)
/* gelu (erf)'s fit, erf(z) = z P(z^2) / Q(z^2) on [-4, 4], coefficients
 * from the constant term up (simd_avx2.c's gelu_erf8, unary_avx512.c) */
#define CDL_GELU_P 1.128379107e+00f, 1.970888972e-01f, 5.357315764e-02f, 4.040447064e-03f, \
                   2.888628223e-04f, 1.966335958e-06f
#define CDL_GELU_Q 1.0f, 5.079965591e-01f, 1.168190837e-01f, 1.551530417e-02f, 1.225469168e-03f, \
                   3.744049900e-05f
/* erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a / 2), a >= 0: Numerical
 * Recipes' Chebyshev fit (erfcc), relative error < 1.2e-7; P's
 * coefficients from the highest power down */
#define CDL_ERFC_C 0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, \
                   0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f
/* simd_avx2.c (the avx2 table's pack_a6, pack_at16, wt_ukr, wt_ukr_t,
 * wt_ct_out) */
void cpu_pack_a6_avx2(const float *a, int64_t lda, int64_t kc, float *dst);
void cpu_pack_at16_avx2(const float *a, int64_t lda, int rows, int64_t kc, float *dst);
void cpu_wt_ukr_avx2(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                     int64_t ldc, bool accumulate);
void cpu_wt_ukr_t_avx2(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *ct,
                       int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                       int64_t pf_bytes);
void cpu_wt_ct_out_avx2(const float *ct, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                        const float *bias);

/* gemm_avx512.c: the avx512 table's GEMM tiles, matrix-vector rows and
 * dot tiles */
void cpu_gemm_ukr_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                         bool accumulate);
void cpu_gemm_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                          bool accumulate);
void cpu_dot_rows_avx512(candle_dtype wt, int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                         const float *x, float *out, int64_t out_stride);
void cpu_gemm_dot_avx512(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw, candle_dtype wt,
                         float *c, int64_t ldc, int mr, int nr, bool accumulate);
/* its wt tiles: direct, C-transposed (and that scratch's write-out), in k
 * pairs (with their A packing), and 16-wide f16 / bf16 row conversion */
void cpu_wt_ukr_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                       int64_t ldc, bool accumulate);
void cpu_wt_ukr_t_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *ct,
                         int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                         int64_t pf_bytes);
void cpu_wt_ct_out_avx512(const float *ct, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                          const float *bias);
void cpu_pack_ap8_avx512(const float *a, int64_t lda, int rows, int64_t kc, float *dst);
void cpu_wt_ukr_p_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *ap, int np, float *ct,
                         int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                         int64_t pf_bytes);
void cpu_half_to_f32_avx512(bool f16, const void *src, float *dst, int64_t n);
/* unary_avx512.c: GELU (erf) on zmm, the other unary ops through the AVX2 table */
void cpu_unary_avx512(candle_op op, const float *x, float *y, int64_t n, const double *p);
/* its AVX512_BF16 kernels (the bf16 table): the wt tiles on bf16 weights
 * and the packed GEMM's bf16 panels */
void cpu_pack_at16_bf16_avx512(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp);
void cpu_wt_bf16_ukr_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                            float *c, int64_t ldc, bool accumulate);
void cpu_wt_bf16_ukr_t_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                              float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                              int pf_rows, int64_t pf_bytes);
void cpu_pack_ap8_bf16_avx512(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp);
void cpu_wt_bf16_ukr_p_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *ap, int np,
                              float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                              int pf_rows, int64_t pf_bytes);
void cpu_gemm_bf16_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                               bool accumulate);
void cpu_pack_a6_bf16_avx512(candle_dtype at, const char *a, int64_t sam, int64_t sak, int rows, int64_t kc,
                             float *dst);
void cpu_pack_b16_bf16_avx512(const char *src, int64_t sk, int64_t sn, int64_t kc, int nr, float *dst);
void cpu_pack_b16_f32_bf16_avx512(const float *src, int64_t sk, int64_t kc, int nr, uint32_t *dst);
void cpu_f32_to_bf16_avx512(const float *src, uint16_t *dst, int64_t n);
void cpu_q8_0_to_bf16_avx512(const void *blocks, uint16_t *dst, int64_t n);

/* benchmark probes (cpu_probe.c) */
double cpu_probe_fma_avx2(int64_t iters);
float cpu_probe_read_avx2(const float *p, size_t n);
double cpu_probe_fma_avx512(int64_t iters);
#endif

#endif
