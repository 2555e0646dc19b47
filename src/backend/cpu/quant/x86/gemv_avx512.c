/* AVX-512 VNNI matrix-vector rows (see gemv-impl.h): gemv-rows-impl.h with
 * CANDLE_QUANT_VNNI (the K types through kquants_avx512.c). The int32 block
 * sums and float steps are the AVX2 rows': results equal bit for bit.
 * Used only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
/* Prefetch distance of a row stream: 4 KiB measured faster than the AVX2
 * rows' 2 KiB from memory on Zen 4 (q8_0 262144x640 and 5632x2048, q4_0
 * 5632x2048, one thread: 1.06-1.2x against 1.0-1.03x for 2 KiB, seven
 * alternating runs), no different in cache. 8 KiB on Zen 5 (tinyllama-shape
 * decode products of 8 layers, q/k/v/o/gate/up/down, 2 threads, a barrier
 * per product, distances alternated per pass, medians of 9-11, load 2-3):
 * q4_0 4 -> 8 KiB 40.3 -> 41.7, 42.7 -> 41.8, 41.7 -> 43.7, 32.8 -> 36.9,
 * 31.9 -> 36.2, 33.2 -> 35.1, 32.4 -> 35.7, 32.6 -> 36.5 GB/s (16 KiB
 * 35.0-35.5, 2 KiB 37.4-39.6);
 * q8_0 33.9 -> 36.3, 32.8 -> 35.6, 33.5 -> 35.8 (16 KiB 35.5-36.5). */
#define GEMV_PF 8192
#define QUANT_KERNEL(name) name##_vnni
#include "gemv-rows-impl.h"
