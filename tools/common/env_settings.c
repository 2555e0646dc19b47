/* The tools' environment switches, turned into candle_cpu_params. */
#include "env_settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
    const char *e = getenv(name);
    return e && *e ? e : NULL;
}

static bool on(const char *name) {
    const char *e = env(name);
    return e && strcmp(e, "0") != 0;
}

static int int_env(const char *name, int lo, int hi, int *out, char *err, size_t n) {
    const char *e = env(name);
    if (!e) return 0;
    char *end;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        snprintf(err, n, "%s=%s: not a number in %d..%d", name, e, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int tool_cpu_params_from_env(candle_cpu_params *p, char *err, size_t n) {
    const char *isa = env("CANDLE_CPU_ISA"), *pf = env("CANDLE_PREFETCH");
    if (isa) {
        int v = candle_cpu_isa_from_name(isa);
        if (v < 0) {
            snprintf(err, n, "CANDLE_CPU_ISA=%s: expected auto, scalar, avx2, avx512 or neon", isa);
            return -1;
        }
        p->isa = (candle_cpu_isa)v;
    }
    if (pf) {
        int v = candle_cpu_prefetch_from_name(pf);
        if (v < 0) {
            snprintf(err, n, "CANDLE_PREFETCH=%s: expected auto, nta or t0", pf);
            return -1;
        }
        p->prefetch = (candle_cpu_prefetch)v;
    }
    if (on("CANDLE_CPU_REF")) p->reference_only = true;
    if (on("CANDLE_CPU_BF16_EXACT")) p->bf16_exact = true;
#if defined(__aarch64__)
    if (on("CANDLE_QUANT_NO_DOTPROD")) p->quant = CANDLE_CPU_QUANT_NEON;
#else
    if (on("CANDLE_QUANT_NO_VNNI")) p->quant = CANDLE_CPU_QUANT_AVX2;
#endif
    if (on("CANDLE_QUANT_SCALAR")) p->quant = CANDLE_CPU_QUANT_SCALAR;
    if (int_env("CANDLE_QMM_MAX_M", 0, 1 << 30, &p->qmm_max_m, err, n)) return -1;
    if (int_env("CANDLE_QGEMM_FEW_MAX_M", 0, 32, &p->qgemm_few_max_m, err, n)) return -1;
    return int_env("CANDLE_QGEMM_DIRECT_MAX_M", 0, 64, &p->qgemm_direct_max_m, err, n);
}

int tool_apply_env_settings(char *err, size_t n) {
    candle_cpu_params p = candle_cpu_default_params();
    if (tool_cpu_params_from_env(&p, err, n)) return -1;
    if (candle_cpu_set_defaults(&p)) {
        snprintf(err, n, "%s", candle_last_errmsg());
        return -1;
    }
    if (on("CANDLE_PROFILE")) candle_profile_enable(true);
    return 0;
}
