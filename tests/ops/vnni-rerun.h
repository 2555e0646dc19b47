/* For tests of the quantized kernels: where the AVX-512 VNNI kernels run,
 * the whole test once more in the same process with the CPU defaults' quant
 * set to CANDLE_CPU_QUANT_AVX2 (the AVX2 kernels through the same dispatch).
 * Elsewhere, or where the defaults already exclude VNNI, one pass. */
#ifndef CANDLE_TEST_VNNI_RERUN_H
#define CANDLE_TEST_VNNI_RERUN_H

#include <stdlib.h>

#include "backend/cpu/quant/x86/quant-x86-impl.h"
#include "mathtest.h"
#include "test.h"

/* body as for mt_run_passes: makes its own contexts each call. Summaries
 * "name (VNNI)" and "name (no VNNI)" where both passes run; one pass
 * "name" where this CPU lacks VNNI, or "name (no VNNI)" where
 * CANDLE_QUANT_NO_VNNI=1 in the environment (tests/env_init.c) took them
 * off, with a check that the switch took. Restores the defaults; returns main's exit status. */
static inline int vnni_run_passes(mt_pass_fn body, const char *name) {
    char label[160];
    const char *nv = getenv("CANDLE_QUANT_NO_VNNI");
    bool env_no_vnni = nv && *nv && *nv != '0';
    if (env_no_vnni) CHECK_MSG(!cdl_quant_uses_vnni(), "CANDLE_QUANT_NO_VNNI=1 left the VNNI kernels on");
    if (!cdl_quant_uses_vnni()) {
        snprintf(label, sizeof label, env_no_vnni ? "%s (no VNNI)" : "%s", name);
        body();
        return test_done(label);
    }
    snprintf(label, sizeof label, "%s (VNNI)", name);
    body();
    int rc = test_done(label);
    fflush(NULL); /* the first pass's lines before the second's */
    test_counts_reset();
    const candle_cpu_params saved = candle_cpu_get_defaults();
    candle_cpu_params p = saved;
    p.quant = CANDLE_CPU_QUANT_AVX2;
    if (candle_cpu_set_defaults(&p) != CANDLE_OK) {
        fprintf(stderr, "%s: quant avx2 refused: %s\n", name, candle_last_errmsg());
        return 1;
    }
    candle_cpu_params bp = {0};
    CHECK_MSG(!cdl_quant_uses_vnni() && mt_ctx_cpu_params(&bp) && bp.quant == CANDLE_CPU_QUANT_AVX2,
              "%s: the no-VNNI pass still runs the VNNI kernels", name);
    snprintf(label, sizeof label, "%s (no VNNI)", name);
    body();
    rc = test_combine(rc, test_done(label));
    if (candle_cpu_set_defaults(&saved) != CANDLE_OK) {
        fprintf(stderr, "%s: the CPU defaults not restored: %s\n", name, candle_last_errmsg());
        rc = 1;
    }
    return rc;
}

#endif
