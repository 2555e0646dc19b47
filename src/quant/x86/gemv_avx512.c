/* AVX-512 VNNI matrix-vector rows (see gemv-impl.h): gemv-rows-impl.h with
 * CANDLE_QUANT_VNNI (the K types through kquants_avx512.c). The int32 block
 * sums and float steps are the AVX2 rows': results equal bit for bit.
 * Used only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
#define QUANT_KERNEL(name) name##_vnni
#include "gemv-rows-impl.h"
