/* The backends this build has, by name, and the context convenience that
 * gives a context without one the default backend (the CPU). Above the core:
 * the core computes on whatever backend a context was made with. */
#include <string.h>

#include "../core/core-impl.h"

typedef struct backend_reg {
    const char *name;
    const char *what;
    /* params: the backend's own settings struct (NULL: its defaults) */
    candle_status (*init)(candle_backend **out, const void *params);
} backend_reg;

static candle_status cpu_init(candle_backend **out, const void *params) {
    return candle_backend_cpu_init_params(out, params);
}

static const backend_reg kBackends[] = {
    {"cpu", "the CPU: scalar reference kernels, AVX2/AVX-512/NEON fast kernels, a thread pool (candle_cpu_params)",
     cpu_init},
};
enum { N_BACKENDS = sizeof kBackends / sizeof kBackends[0] };

int candle_backend_count(void) { return N_BACKENDS; }

const char *candle_backend_reg_name(int i) { return i >= 0 && i < N_BACKENDS ? kBackends[i].name : NULL; }

const char *candle_backend_reg_description(int i) { return i >= 0 && i < N_BACKENDS ? kBackends[i].what : NULL; }

candle_status candle_backend_init_by_name(candle_backend **out, const char *name, const void *params) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "backend_init_by_name: out is NULL");
    *out = NULL;
    for (int i = 0; name && i < N_BACKENDS; i++)
        if (!strcmp(kBackends[i].name, name)) return kBackends[i].init(out, params);
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "backend '%s': not in this build (candle info lists them)",
                            name ? name : "(null)");
}

candle_status candle_ctx_init(candle_ctx **out, const candle_ctx_params *p) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "ctx_init: out is NULL");
    *out = NULL;
    candle_ctx_params def = candle_ctx_default_params();
    if (!p) p = &def;
    if (p->backend) return cdl_ctx_init_on(out, p, p->backend, false);
    candle_backend *be = candle_backend_cpu_init(p->n_threads);
    if (!be) return candle_last_error();
    candle_status s = cdl_ctx_init_on(out, p, be, true);
    if (s) candle_backend_free(be);
    return s;
}
