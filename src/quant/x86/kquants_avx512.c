/* AVX-512 VNNI variants of the K-type kernels: the same code as
 * kquants_avx2.c (kquants-impl.h) with each madd of int16 products by the
 * sub-block scales and its add as one vpdpwssd (256-bit, VL). The int32
 * lanes and float steps are the AVX2 ones: results equal bit for bit.
 * Registered only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
#define QUANT_KERNEL(name) name##_vnni
#include "kquants-impl.h"
