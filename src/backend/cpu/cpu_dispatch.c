/* Run-time choice of the primitive table (cpuid) and of the fast kernel for
 * a node (dtype and layout conditions, checked by each kernel's match). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fast-impl.h"
#include "x86/x86-impl.h"

#if defined(__x86_64__)
/* The AVX2 table with the AVX-512 GEMM micro-kernels (x86/gemm_avx512.c),
 * and that table with the AVX512_BF16 tiles where the CPU has them. */
static cpu_simd g_avx512, g_avx512_bf16;
static pthread_once_t g_avx512_once = PTHREAD_ONCE_INIT;

static void avx512_init(void) {
    g_avx512 = cpu_simd_avx2;
    g_avx512.name = "avx512";
    g_avx512.gemm_ukr = cpu_gemm_ukr_avx512;
    g_avx512.gemm_ukr2 = cpu_gemm_ukr2_avx512;
    g_avx512.wt_ukr = cpu_wt_ukr_avx512;
    g_avx512.wt_panels = 4;
    g_avx512.wt_ukr_t = cpu_wt_ukr_t_avx512;
    g_avx512.wt_ct_out = cpu_wt_ct_out_avx512;
    g_avx512.wt_ukr_p = cpu_wt_ukr_p_avx512;
    g_avx512.pack_ap8 = cpu_pack_ap8_avx512;
    g_avx512.wt_half_to_f32 = cpu_half_to_f32_avx512;
    g_avx512.dot_rows = cpu_dot_rows_avx512;
    g_avx512.gemm_dot = cpu_gemm_dot_avx512;
    g_avx512.unary = cpu_unary_avx512;
    g_avx512_bf16 = g_avx512;
    if (cpu_get_features()->avx512bf16) {
        g_avx512_bf16.wt_bf16_ukr = cpu_wt_bf16_ukr_avx512;
        g_avx512_bf16.wt_bf16_ukr_t = cpu_wt_bf16_ukr_t_avx512;
        g_avx512_bf16.wt_bf16_ukr_p = cpu_wt_bf16_ukr_p_avx512;
        g_avx512_bf16.pack_ap8_bf16 = cpu_pack_ap8_bf16_avx512;
        g_avx512_bf16.pack_at16_bf16 = cpu_pack_at16_bf16_avx512;
        g_avx512_bf16.gemm_bf16_ukr2 = cpu_gemm_bf16_ukr2_avx512;
        g_avx512_bf16.pack_a6_bf16 = cpu_pack_a6_bf16_avx512;
        g_avx512_bf16.pack_b16_bf16 = cpu_pack_b16_bf16_avx512;
        g_avx512_bf16.pack_b16_f32_bf16 = cpu_pack_b16_f32_bf16_avx512;
        g_avx512_bf16.f32_to_bf16 = cpu_f32_to_bf16_avx512;
        g_avx512_bf16.q8_0_to_bf16 = cpu_q8_0_to_bf16_avx512;
    }
}

static const cpu_simd *avx512_table(bool bf16_exact) {
    pthread_once(&g_avx512_once, avx512_init);
    return bf16_exact ? &g_avx512 : &g_avx512_bf16;
}

static bool have_avx2(const cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
/* x86/gemm_avx512.c is built with BW / VL / DQ too (masks, 16-bit loads):
 * AVX-512F alone (Xeon Phi) does not run it */
static bool have_avx512(const cpu_features *f) { return have_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl; }
#endif

const cpu_simd *cpu_simd_table(candle_cpu_isa isa, bool bf16_exact) {
    (void)bf16_exact;
    if (isa == CANDLE_CPU_ISA_SCALAR) return &cpu_simd_scalar;
#if defined(__aarch64__)
    /* NEON is baseline on aarch64 */
    if (isa == CANDLE_CPU_ISA_AUTO || isa == CANDLE_CPU_ISA_NEON) return cpu_simd_neon_table();
#elif defined(__x86_64__)
    const cpu_features *f = cpu_get_features();
    if ((isa == CANDLE_CPU_ISA_AUTO || isa == CANDLE_CPU_ISA_AVX512) && have_avx512(f))
        return avx512_table(bf16_exact);
    if ((isa == CANDLE_CPU_ISA_AUTO || isa == CANDLE_CPU_ISA_AVX2) && have_avx2(f)) return &cpu_simd_avx2;
#endif
    return isa == CANDLE_CPU_ISA_AUTO ? &cpu_simd_scalar : NULL;
}

bool cpu_simd_force(const char *name) {
    int isa = candle_cpu_isa_from_name(name);
    if (isa < 0) return false;
    candle_cpu_params p = candle_cpu_get_defaults();
    p.isa = (candle_cpu_isa)isa;
    if (candle_cpu_set_defaults(&p)) return false;
    cpu_config_swap(NULL);
    return true;
}

/* Candidates per op, tried in order. */
static const cpu_fast_kernel *const *candidates(candle_op op) {
    static const cpu_fast_kernel *const matmul[] = {&cpu_fast_matmul, &cpu_fast_matmul_quant, NULL};
    static const cpu_fast_kernel *const unary[] = {&cpu_fast_unary, NULL};
    static const cpu_fast_kernel *const binary[] = {&cpu_fast_binary, NULL};
    static const cpu_fast_kernel *const softmax[] = {&cpu_fast_softmax, NULL};
    static const cpu_fast_kernel *const rms[] = {&cpu_fast_rms_norm, NULL};
    static const cpu_fast_kernel *const ln[] = {&cpu_fast_layer_norm, NULL};
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
    case CANDLE_OP_LAYER_NORM: return ln;
    case CANDLE_OP_ROPE: return rope;
    case CANDLE_OP_ATTENTION: return attn;
    case CANDLE_OP_INDEX_SELECT: return index;
    case CANDLE_OP_PAGED_ATTENTION: return paged;
    case CANDLE_OP_COPY: return copy;
    default: return NULL;
    }
}

const cpu_fast_kernel *cpu_fast_kernel_for(const candle_tensor *dst) {
    if (cpu_config_get()->reference_only) return NULL;
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
