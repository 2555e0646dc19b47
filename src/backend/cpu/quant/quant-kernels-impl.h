/* Internal: the CPU backend's quantized kernels, shared by every ISA: which
 * ones the running config chose, and the registration of a config's dtype
 * table (quant_kernels.c). The kernels' prototypes are in the per-ISA
 * headers x86/quant-x86-impl.h and arm/quant-arm-impl.h; the block layouts
 * and scalar reference kernels in src/quant/quant-impl.h. */
#ifndef CANDLE_CPU_QUANT_KERNELS_IMPL_H
#define CANDLE_CPU_QUANT_KERNELS_IMPL_H

#include "../../../quant/quant-impl.h"
#include "../cpu-config.h"

/* The running CPU config's quantized kernels (cpu-config.h): the NEON dots,
 * and their dotprod versions (0 elsewhere); the AVX2 kernels, and the
 * AVX-512 VNNI dots where they exist (0 elsewhere). */
static inline int cdl_quant_uses_neon(void) { return cpu_config_get()->quant >= CPU_QUANT_NEON; }
static inline int cdl_quant_uses_dotprod(void) { return cpu_config_get()->quant == CPU_QUANT_DOTPROD; }
static inline int cdl_quant_uses_avx2(void) {
    cpu_quant_level q = cpu_config_get()->quant;
    return q == CPU_QUANT_AVX2 || q == CPU_QUANT_VNNI;
}
static inline int cdl_quant_uses_vnni(void) { return cpu_config_get()->quant == CPU_QUANT_VNNI; }

/* A config's dtype table: the public one's entries with the kernels of its
 * level (quant_kernels.c). */
void cdl_quant_register_kernels(candle_dtype_traits *t, cpu_quant_level level);

#endif
