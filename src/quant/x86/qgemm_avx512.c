/* AVX-512 VNNI variants of the multi-row panel kernels (see qgemm_avx2.c,
 * which packs the panels for both): the byte dots as vpdpbusd on 256-bit
 * vectors (AVX512VL), the activation bytes broadcast from memory by the
 * instruction itself. Same bits as the AVX2 kernels. Chosen only on CPUs
 * with avx512vnni, avx512vl and avx512bw (candle_quant_uses_vnni). */
#define CANDLE_QUANT_VNNI 1
#define QGEMM_KERNEL(name) name##_vnni
#include "qgemm-panels-impl.h"
