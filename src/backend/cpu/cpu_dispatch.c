/* Run-time choice of the primitive table (cpuid) and of the fast kernel for
 * a node (dtype and layout conditions, checked by each kernel's match). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fast-impl.h"

static _Atomic(const cpu_simd *) g_simd;

#if defined(__x86_64__)
void cpu_gemm_ukr_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                         int nr, bool accumulate);
void cpu_gemm_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                          int nr, bool accumulate);
void cpu_wt_ukr_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                       int64_t ldc, bool accumulate);
void cpu_wt_bf16_ukr_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                            float *c, int64_t ldc, bool accumulate);
void cpu_pack_at16_bf16_avx512(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp);
void cpu_gemm_bf16_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                               bool accumulate);
void cpu_pack_a6_bf16_avx512(candle_dtype at, const char *a, int64_t sam, int64_t sak, int rows, int64_t kc,
                             float *dst);
void cpu_pack_b16_bf16_avx512(const char *src, int64_t sk, int64_t sn, int64_t kc, int nr, float *dst);
void cpu_dot_rows_avx512(candle_dtype wt, int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                         const float *x, float *out, int64_t out_stride);
void cpu_gemm_dot_avx512(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw, candle_dtype wt,
                         float *c, int64_t ldc, int mr, int nr, bool accumulate);

/* The AVX2 table with the AVX-512 GEMM micro-kernels (x86/gemm_avx512.c). */
static cpu_simd g_avx512;
static pthread_once_t g_avx512_once = PTHREAD_ONCE_INIT;

static void avx512_init(void) {
    g_avx512 = cpu_simd_avx2;
    g_avx512.name = "avx512";
    g_avx512.gemm_ukr = cpu_gemm_ukr_avx512;
    g_avx512.gemm_ukr2 = cpu_gemm_ukr2_avx512;
    g_avx512.wt_ukr = cpu_wt_ukr_avx512;
    g_avx512.wt_panels = 4;
    g_avx512.dot_rows = cpu_dot_rows_avx512;
    g_avx512.gemm_dot = cpu_gemm_dot_avx512;
    /* CANDLE_CPU_BF16_EXACT=1 keeps bf16 weights on the exact f32 path
     * (activations not rounded to bf16) */
    const char *exact = getenv("CANDLE_CPU_BF16_EXACT");
    if (cpu_get_features()->avx512bf16 && !(exact && *exact && strcmp(exact, "0") != 0)) {
        g_avx512.wt_bf16_ukr = cpu_wt_bf16_ukr_avx512;
        g_avx512.pack_at16_bf16 = cpu_pack_at16_bf16_avx512;
        g_avx512.gemm_bf16_ukr2 = cpu_gemm_bf16_ukr2_avx512;
        g_avx512.pack_a6_bf16 = cpu_pack_a6_bf16_avx512;
        g_avx512.pack_b16_bf16 = cpu_pack_b16_bf16_avx512;
    }
}

static const cpu_simd *avx512_table(void) {
    pthread_once(&g_avx512_once, avx512_init);
    return &g_avx512;
}

static bool have_avx2(const cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
/* x86/gemm_avx512.c is built with BW / VL / DQ too (masks, 16-bit loads):
 * AVX-512F alone (Xeon Phi) does not run it */
static bool have_avx512(const cpu_features *f) { return have_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl; }
#endif

#if defined(__aarch64__)
const cpu_simd *cpu_simd_neon_table(void); /* arm/simd_neon.c */
#endif

/* CANDLE_CPU_ISA=scalar|avx2 caps the choice (debugging, comparisons). */
static const cpu_simd *best_simd(void) {
#if defined(__aarch64__)
    /* NEON is baseline on aarch64; CANDLE_CPU_ISA=scalar keeps the fallback */
    const char *isa = getenv("CANDLE_CPU_ISA");
    if (isa && !strcmp(isa, "scalar")) return &cpu_simd_scalar;
    return cpu_simd_neon_table();
#endif
#if defined(__x86_64__)
    const cpu_features *f = cpu_get_features();
    const char *force = getenv("CANDLE_CPU_ISA");
    if (force && !strcmp(force, "scalar")) return &cpu_simd_scalar;
    bool cap_avx2 = force && !strcmp(force, "avx2");
    if (have_avx512(f) && !cap_avx2) return avx512_table();
    if (have_avx2(f)) return &cpu_simd_avx2;
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
    if (!strcmp(name, "avx2") && have_avx2(f)) s = &cpu_simd_avx2;
    if (!strcmp(name, "avx512") && have_avx512(f)) s = avx512_table();
#endif
#if defined(__aarch64__)
    if (!strcmp(name, "neon")) s = cpu_simd_neon_table();
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
    static const cpu_fast_kernel *const index[] = {&cpu_fast_index_select, NULL};
    static const cpu_fast_kernel *const paged[] = {&cpu_fast_paged_attention, NULL};
    static const cpu_fast_kernel *const copy[] = {&cpu_fast_copy, NULL};
    if (op >= CANDLE_OP_NEG && op <= CANDLE_OP_CLAMP) return unary;
    if (op >= CANDLE_OP_ADD && op <= CANDLE_OP_POW) return binary;
    switch (op) {
    case CANDLE_OP_MATMUL: return matmul;
    case CANDLE_OP_SOFTMAX:
    case CANDLE_OP_LOG_SOFTMAX: return softmax;
    case CANDLE_OP_RMS_NORM: return rms;
    case CANDLE_OP_ROPE: return rope;
    case CANDLE_OP_ATTENTION: return attn;
    case CANDLE_OP_INDEX_SELECT: return index;
    case CANDLE_OP_PAGED_ATTENTION: return paged;
    case CANDLE_OP_COPY: return copy;
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
