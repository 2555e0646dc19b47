/* AVX-512 VNNI matrix-vector rows (see gemv-impl.h): gemv-rows-impl.h with
 * CANDLE_QUANT_VNNI (the K types through kquants_avx512.c). The int32 block
 * sums and float steps are the AVX2 rows': results equal bit for bit.
 * Used only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
/* Prefetch distance of a row stream: 4 KiB measured faster than the AVX2
 * rows' 2 KiB from memory on Zen 4 (q8_0 262144x640 and 5632x2048, q4_0
 * 5632x2048, one thread: 1.06-1.2x against 1.0-1.03x for 2 KiB, seven
 * alternating runs), no different in cache. */
#define GEMV_PF 4096
#define QUANT_KERNEL(name) name##_vnni
#include "gemv-rows-impl.h"
