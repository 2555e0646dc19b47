/* CPU settings (candle_cpu_params) turned into the kernel choice of a
 * backend (cpu-config.h), and the defaults for backends made without
 * explicit settings. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-impl.h"
#include "quant/quant-kernels-impl.h"

_Thread_local const cpu_config *cpu_config_tls __attribute__((tls_model("initial-exec")));
_Thread_local bool cpu_stream_nta_tls __attribute__((tls_model("initial-exec")));

static const char *const isa_names[CANDLE_CPU_ISA_COUNT] = {"auto", "scalar", "avx2", "avx512", "neon"};
static const char *const quant_names[CANDLE_CPU_QUANT_COUNT] = {"auto", "scalar", "avx2", "neon"};
static const char *const prefetch_names[CANDLE_CPU_PREFETCH_COUNT] = {"auto", "nta", "t0"};

static int index_of(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

const char *candle_cpu_isa_name(candle_cpu_isa isa) {
    return (unsigned)isa < CANDLE_CPU_ISA_COUNT ? isa_names[isa] : "invalid";
}
const char *candle_cpu_quant_name(candle_cpu_quant q) {
    return (unsigned)q < CANDLE_CPU_QUANT_COUNT ? quant_names[q] : "invalid";
}
const char *candle_cpu_prefetch_name(candle_cpu_prefetch k) {
    return (unsigned)k < CANDLE_CPU_PREFETCH_COUNT ? prefetch_names[k] : "invalid";
}
int candle_cpu_isa_from_name(const char *name) { return index_of(isa_names, CANDLE_CPU_ISA_COUNT, name); }
int candle_cpu_quant_from_name(const char *name) { return index_of(quant_names, CANDLE_CPU_QUANT_COUNT, name); }
int candle_cpu_prefetch_from_name(const char *name) {
    return index_of(prefetch_names, CANDLE_CPU_PREFETCH_COUNT, name);
}

candle_cpu_params candle_cpu_default_params(void) {
    return (candle_cpu_params){.n_threads = 0, .qmm_max_m = -1, .qgemm_direct_max_m = -1, .qgemm_few_max_m = -1};
}

static cpu_quant_level quant_level(candle_cpu_quant q) {
    const cpu_features *f = cpu_get_features();
    if (q == CANDLE_CPU_QUANT_SCALAR) return CPU_QUANT_SCALAR;
#if defined(__aarch64__)
    if (q == CANDLE_CPU_QUANT_AUTO && f->dotprod) return CPU_QUANT_DOTPROD;
    return q == CANDLE_CPU_QUANT_AUTO || q == CANDLE_CPU_QUANT_NEON ? CPU_QUANT_NEON : (cpu_quant_level)-1;
#elif defined(__x86_64__)
    bool avx2 = f->avx2 && f->fma && f->f16c, vnni = avx2 && f->avx512vnni && f->avx512vl && f->avx512bw;
    if (q == CANDLE_CPU_QUANT_AUTO) return vnni ? CPU_QUANT_VNNI : avx2 ? CPU_QUANT_AVX2 : CPU_QUANT_SCALAR;
    return q == CANDLE_CPU_QUANT_AVX2 && avx2 ? CPU_QUANT_AVX2 : (cpu_quant_level)-1;
#else
    (void)f;
    return q == CANDLE_CPU_QUANT_AUTO ? CPU_QUANT_SCALAR : (cpu_quant_level)-1;
#endif
}

static candle_status check_params(const candle_cpu_params *p) {
    if ((unsigned)p->isa >= CANDLE_CPU_ISA_COUNT || (unsigned)p->quant >= CANDLE_CPU_QUANT_COUNT ||
        (unsigned)p->prefetch >= CANDLE_CPU_PREFETCH_COUNT)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "cpu params: isa %d, quant %d or prefetch %d out of range",
                                (int)p->isa, (int)p->quant, (int)p->prefetch);
    if (p->n_threads < 0 || p->n_threads > 4096)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "cpu params: n_threads %d (0..4096)", p->n_threads);
    if (p->qmm_max_m < -1 || p->qgemm_direct_max_m < -1 || p->qgemm_direct_max_m > CPU_QGEMM_DIRECT_MAX_M)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "cpu params: qmm_max_m %d (-1 or more), qgemm_direct_max_m %d (-1..%d)",
                                p->qmm_max_m, p->qgemm_direct_max_m, CPU_QGEMM_DIRECT_MAX_M);
    if (p->qgemm_few_max_m < -1 || p->qgemm_few_max_m > CPU_QGEMM_FEW_MAX_M)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "cpu params: qgemm_few_max_m %d (-1..%d)",
                                p->qgemm_few_max_m, CPU_QGEMM_FEW_MAX_M);
    return CANDLE_OK;
}

static candle_status build(cpu_config *c, const candle_cpu_params *p) {
    const cpu_simd *simd = cpu_simd_table(p->isa, p->bf16_exact);
    if (!simd)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "cpu params: isa %s: not available on this CPU",
                                candle_cpu_isa_name(p->isa));
    int level = (int)quant_level(p->quant);
    if (level < 0)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "cpu params: quant %s: not available on this CPU",
                                candle_cpu_quant_name(p->quant));
    memset(c, 0, sizeof *c);
    c->simd = simd;
    c->quant = (cpu_quant_level)level;
    c->reference_only = p->reference_only;
    c->stream_nta = p->prefetch == CANDLE_CPU_PREFETCH_NTA ||
                    (p->prefetch == CANDLE_CPU_PREFETCH_AUTO && cpu_get_features()->amd);
    c->qmm_max_m = p->qmm_max_m;
    c->qgemm_direct_max_m = p->qgemm_direct_max_m < 0 ? CPU_QGEMM_DIRECT_MAX_M : p->qgemm_direct_max_m;
    c->qgemm_few_max_m = p->qgemm_few_max_m;
    for (int t = 0; t < CANDLE_DTYPE_COUNT; t++) c->dt[t] = *candle_dtype_info((candle_dtype)t);
    cdl_quant_register_kernels(c->dt, c->quant);
    c->params = *p;
    c->params.n_threads = 0;
    c->params.isa = (candle_cpu_isa)candle_cpu_isa_from_name(simd->name);
    static const candle_cpu_quant quant_of[] = {
        [CPU_QUANT_SCALAR] = CANDLE_CPU_QUANT_SCALAR, [CPU_QUANT_AVX2] = CANDLE_CPU_QUANT_AVX2,
        [CPU_QUANT_VNNI] = CANDLE_CPU_QUANT_AUTO,     [CPU_QUANT_NEON] = CANDLE_CPU_QUANT_NEON,
        [CPU_QUANT_DOTPROD] = CANDLE_CPU_QUANT_AUTO};
    c->params.quant = quant_of[c->quant];
    c->params.prefetch = c->stream_nta ? CANDLE_CPU_PREFETCH_NTA : CANDLE_CPU_PREFETCH_T0;
    return CANDLE_OK;
}

/* Configs made so far, one per distinct setting (the thread count aside):
 * few in a process, kept for its life (backends and threads point at them). */
typedef struct config_node {
    candle_cpu_params key;
    cpu_config cfg;
    struct config_node *next;
} config_node;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static config_node *g_configs;

static bool same_key(const candle_cpu_params *a, const candle_cpu_params *b) {
    return a->isa == b->isa && a->quant == b->quant && a->prefetch == b->prefetch &&
           a->reference_only == b->reference_only && a->bf16_exact == b->bf16_exact &&
           a->qmm_max_m == b->qmm_max_m && a->qgemm_direct_max_m == b->qgemm_direct_max_m &&
           a->qgemm_few_max_m == b->qgemm_few_max_m;
}

static _Atomic(const cpu_config *) g_default;

const cpu_config *cpu_config_for(const candle_cpu_params *p) {
    if (!p) return cpu_config_default();
    if (check_params(p)) return NULL;
    pthread_mutex_lock(&g_lock);
    config_node *n = g_configs;
    while (n && !same_key(&n->key, p)) n = n->next;
    if (!n) {
        n = calloc(1, sizeof *n);
        if (!n) {
            cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: cpu config");
        } else if (build(&n->cfg, p)) {
            free(n);
            n = NULL;
        } else {
            n->key = *p;
            n->next = g_configs;
            g_configs = n;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return n ? &n->cfg : NULL;
}

const cpu_config *cpu_config_default(void) {
    const cpu_config *c = atomic_load_explicit(&g_default, memory_order_acquire);
    if (!c) {
        candle_cpu_params p = candle_cpu_default_params();
        c = cpu_config_for(&p); /* the automatic choice cannot be refused */
        const cpu_config *expected = NULL;
        if (!atomic_compare_exchange_strong(&g_default, &expected, c)) c = expected;
        if (!cpu_config_tls) cpu_stream_nta_tls = c->stream_nta;
    }
    return c;
}

static _Atomic int g_default_threads;

candle_status candle_cpu_set_defaults(const candle_cpu_params *p) {
    if (!p) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "cpu_set_defaults: params are NULL");
    const cpu_config *c = cpu_config_for(p);
    if (!c) return candle_last_error();
    atomic_store(&g_default_threads, p->n_threads);
    atomic_store_explicit(&g_default, c, memory_order_release);
    if (!cpu_config_tls) cpu_stream_nta_tls = c->stream_nta;
    return CANDLE_OK;
}

candle_cpu_params candle_cpu_get_defaults(void) {
    candle_cpu_params p = cpu_config_default()->params;
    p.n_threads = atomic_load(&g_default_threads);
    return p;
}
