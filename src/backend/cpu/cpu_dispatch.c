/* Run-time choice of the primitive table (cpuid) and of the fast kernel for
 * a node (dtype and layout conditions, checked by each kernel's match). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-impl.h"

static _Atomic(const cpu_simd *) g_simd;

static const cpu_simd *best_simd(void) {
#if defined(__x86_64__)
    const cpu_features *f = cpu_get_features();
    const char *force = getenv("CANDLE_CPU_ISA");
    if (force && !strcmp(force, "scalar")) return &cpu_simd_scalar;
    if (f->avx2 && f->fma && f->f16c) return &cpu_simd_avx2;
#endif
    return &cpu_simd_scalar;
}

const cpu_simd *cpu_simd_get(void) {
    const cpu_simd *s = atomic_load_explicit(&g_simd, memory_order_acquire);
    if (!s) {
        s = best_simd();
        atomic_store_explicit(&g_simd, s, memory_order_release);
    }
    return s;
}

bool cpu_simd_force(const char *name) {
    const cpu_simd *s = NULL;
    if (!strcmp(name, "scalar")) s = &cpu_simd_scalar;
#if defined(__x86_64__)
    const cpu_features *f = cpu_get_features();
    if (!strcmp(name, "avx2") && f->avx2 && f->fma && f->f16c) s = &cpu_simd_avx2;
#endif
    if (!strcmp(name, "auto")) s = best_simd();
    if (s) atomic_store_explicit(&g_simd, s, memory_order_release);
    return s != NULL;
}

/* Candidates per op, tried in order. */
static const cpu_fast_kernel *const *candidates(candle_op op) {
    static const cpu_fast_kernel *const matmul[] = {&cpu_fast_matmul, &cpu_fast_matmul_quant, NULL};
    static const cpu_fast_kernel *const unary[] = {&cpu_fast_unary, NULL};
    static const cpu_fast_kernel *const binary[] = {&cpu_fast_binary, NULL};
    static const cpu_fast_kernel *const softmax[] = {&cpu_fast_softmax, NULL};
    static const cpu_fast_kernel *const rms[] = {&cpu_fast_rms_norm, NULL};
    static const cpu_fast_kernel *const rope[] = {&cpu_fast_rope, NULL};
    static const cpu_fast_kernel *const attn[] = {&cpu_fast_attention, NULL};
    if (op >= CANDLE_OP_NEG && op <= CANDLE_OP_CLAMP) return unary;
    if (op >= CANDLE_OP_ADD && op <= CANDLE_OP_POW) return binary;
    switch (op) {
    case CANDLE_OP_MATMUL: return matmul;
    case CANDLE_OP_SOFTMAX:
    case CANDLE_OP_LOG_SOFTMAX: return softmax;
    case CANDLE_OP_RMS_NORM: return rms;
    case CANDLE_OP_ROPE: return rope;
    case CANDLE_OP_ATTENTION: return attn;
    default: return NULL;
    }
}

/* CANDLE_CPU_REF=1 runs reference kernels only (debugging a model). */
static bool ref_only(void) {
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("CANDLE_CPU_REF");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

const cpu_fast_kernel *cpu_fast_kernel_for(const candle_tensor *dst) {
    if (ref_only()) return NULL;
    const cpu_fast_kernel *const *c = candidates((candle_op)dst->op);
    for (; c && *c; c++)
        if ((*c)->match(dst)) return *c;
    return NULL;
}

static atomic_int g_always_parallel;

void cpu_set_always_parallel(bool on) { atomic_store(&g_always_parallel, on); }

int cpu_tasks_for(double work, double min_work, int n_threads, int tasks_per_thread) {
    if (n_threads <= 1) return 1;
    if (!atomic_load_explicit(&g_always_parallel, memory_order_relaxed) && work < min_work) return 1;
    return n_threads * tasks_per_thread;
}
