/* The environment variables the tools honour, mapped to the library's
 * settings in one place (the library itself reads none). */
#ifndef CANDLE_TOOLS_ENV_SETTINGS_H
#define CANDLE_TOOLS_ENV_SETTINGS_H

#include <stddef.h>

#include "candle/candle.h"

/* CPU settings from the environment, over *p:
 *   CANDLE_CPU_ISA=auto|scalar|avx2|avx512|neon   isa
 *   CANDLE_CPU_REF=1                              reference_only
 *   CANDLE_QUANT_SCALAR=1                         quant scalar
 *   CANDLE_QUANT_NO_VNNI=1                        quant avx2 (x86-64)
 *   CANDLE_QUANT_NO_DOTPROD=1                     quant neon (arm64)
 *   CANDLE_PREFETCH=nta|t0                        prefetch
 *   CANDLE_CPU_BF16_EXACT=1                       bf16_exact
 *   CANDLE_QMM_MAX_M=N, CANDLE_QGEMM_DIRECT_MAX_M=N
 * A switch is on when set to anything but "" or "0". Returns -1 with a
 * message in err for a value it cannot read, else 0. */
int tool_cpu_params_from_env(candle_cpu_params *p, char *err, size_t err_len);

/* The above as the library's CPU defaults, and CANDLE_PROFILE=1 (the profiler).
 * Returns -1 with a message in err when a value is invalid or the CPU lacks
 * the ISA asked for (nothing changed), else 0. */
int tool_apply_env_settings(char *err, size_t err_len);

#endif
