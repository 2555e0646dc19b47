/* AVX-512 VNNI variants of the 32-element block dots: the same kernels as
 * legacy_avx2.c with the byte dot products as one vpdpbusd (256-bit, VL).
 * Registered only on CPUs with avx512vnni, avx512vl and avx512bw. */
#define CANDLE_QUANT_VNNI 1
#define QUANT_KERNEL(name) name##_vnni
#include "legacy-dots-impl.h"
