/* The kernel choice of one CPU backend, made once from its candle_cpu_params:
 * the primitive table, the quantized kernels and the thresholds between
 * algorithms. Kernels read the running thread's (cpu_config_get): the
 * backend makes its own current on the calling thread for each compute and
 * on its pool's workers once; elsewhere the defaults' (candle_cpu_set_defaults)
 * apply. A config is immutable and lives as long as the process. */
#ifndef CANDLE_CPU_CONFIG_H
#define CANDLE_CPU_CONFIG_H

#include "candle/candle.h"

struct cpu_simd;

/* Which quantized kernels the dtype table holds (cdl_quant_register_kernels). */
typedef enum cpu_quant_level {
    CPU_QUANT_SCALAR,
    CPU_QUANT_AVX2,
    CPU_QUANT_VNNI, /* AVX2 with the AVX-512 VNNI dots where they exist */
    CPU_QUANT_NEON,
    CPU_QUANT_DOTPROD, /* NEON with the armv8.2 dot-product dots */
} cpu_quant_level;

/* The VNNI kernels' direct path takes at most this many activation rows. */
#define CPU_QGEMM_DIRECT_MAX_M 64
#define CPU_QGEMM_FEW_MAX_M 32 /* the few-row products' largest M (their scratch rows) */

typedef struct cpu_config {
    candle_cpu_params params; /* as asked, AUTO resolved (n_threads as asked) */
    const struct cpu_simd *simd;
    cpu_quant_level quant;
    bool reference_only;
    bool stream_nta;          /* weight-stream prefetches non-temporal */
    int qmm_max_m;            /* -1: per type (cpu_qmm_max_m) */
    int64_t qgemm_direct_max_m;
    int qgemm_few_max_m;      /* -1: per type (cdl_qgemm_few_rows) */
    /* The dtype table with this config's kernels: to_f32, from_f32 and vec_dot
     * of the chosen ISA (the public table keeps the scalar reference ones). */
    candle_dtype_traits dt[CANDLE_DTYPE_COUNT];
} cpu_config;

extern _Thread_local const cpu_config *cpu_config_tls __attribute__((tls_model("initial-exec")));
/* The running config's stream_nta, kept beside the pointer so the weight
 * streams' inner loops read one thread-local flag (no call, so the compiler
 * keeps it out of the loop): set by cpu_config_swap, and on a thread that
 * never swapped by the defaults when it made or set them (else T0). */
extern _Thread_local bool cpu_stream_nta_tls __attribute__((tls_model("initial-exec")));

/* The config for p (NULL: the defaults), shared by every backend asking for the
 * same settings; NULL with the thread-local last error when p is invalid. */
const cpu_config *cpu_config_for(const candle_cpu_params *p);
const cpu_config *cpu_config_default(void);

static inline const cpu_config *cpu_config_get(void) {
    const cpu_config *c = cpu_config_tls;
    return c ? c : cpu_config_default();
}

/* Make c the calling thread's config (NULL: the defaults); returns the previous. */
static inline const cpu_config *cpu_config_swap(const cpu_config *c) {
    const cpu_config *prev = cpu_config_tls;
    cpu_config_tls = c;
    cpu_stream_nta_tls = (c ? c : cpu_config_default())->stream_nta;
    return prev;
}

/* candle_dtype_info with the running config's kernels (NULL for an invalid t). */
static inline const candle_dtype_traits *cpu_dtype(candle_dtype t) {
    return (unsigned)t < CANDLE_DTYPE_COUNT ? &cpu_config_get()->dt[t] : NULL;
}

/* Prefetches of the decoding weight streams, which are read once per token
 * (the q4/q5/q8_0 and K-type matrix-vector rows, the f16/bf16 rows): non-
 * temporal where the config says (by default on AMD, whose L3 is a victim
 * cache of L2: T0 lines there went into it over the KV cache, activations
 * and code), T0 elsewhere (an Ice Lake Xeon's prefetchnta fills L1 alone,
 * past the L2 streamer, and halves the stream). Figures in bench/RESULTS.md. */
static inline __attribute__((always_inline)) void candle_stream_prefetch(const void *p) {
    if (cpu_stream_nta_tls) __builtin_prefetch(p, 0, 0);
    else __builtin_prefetch(p, 0, 3);
}

#endif
