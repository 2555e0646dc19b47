/* AVX-512 VNNI variants of the K-type kernels: the same code as
 * kquants_avx2.c (kquants-impl.h) with each madd of int16 products by the
 * sub-block scales and its add as one vpdpwssd (256-bit, VL). The int32
 * lanes and float steps are the AVX2 ones: results equal bit for bit.
 * Registered only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
/* Prefetch distance of the q2_K..q5_K row streams (kquants-impl.h: 4 KiB
 * for the AVX2 rows). 8 KiB on Zen 5, q4_K tinyllama-shape decode products
 * (8 layers, q/k/v/o/gate/up/down, variants alternated per pass, medians,
 * flock; session 6, load 2-3, 2 threads: 4 KiB 42.3-44.5 GB/s, 8 KiB
 * 43.8-45.3, 16 KiB 42.6-45.2; session 7, load 3.6-4.5, a fuzzer holding a
 * vCPU, 4/8/16 KiB: 2 threads 13.1/17.5/15.7, 14.6/13.9/14.4,
 * 32.9/35.5/32.5, 35.6/37.4/38.2, 23.9/25.5/27.0; 1 thread 27.3/29.4/34.7,
 * 36.5/40.6/39.9, 34.6/36.5/38.8). q2_K, q3_K not measured. */
#define KGEMV_PF_BYTES 8192
#define QUANT_KERNEL(name) name##_vnni
#include "kquants-impl.h"
