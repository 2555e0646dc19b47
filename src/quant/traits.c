/* The row kernels of the float and block types: the scalar reference ones in
 * the public dtype table, and a CPU config's choice (AVX2, AVX-512 VNNI,
 * NEON, NEON dotprod) in its own copy of the table. */

#include "../core/dtype-impl.h"
#include "quant-impl.h"
#if defined(__aarch64__)
#include "arm/quantize-neon.h"
#endif

static void f16_to_f32_row(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = candle_f16_to_f32(s[i]);
}
static void f32_to_f16_row(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = candle_f32_to_f16(src[i]);
}
static void bf16_to_f32_row(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = candle_bf16_to_f32(s[i]);
}
static void f32_to_bf16_row(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = candle_f32_to_bf16(src[i]);
}
static void f32_copy_row(const void *src, float *dst, int64_t n) {
    const float *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = s[i];
}
static void f32_store_row(const float *src, void *dst, int64_t n) {
    float *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = src[i];
}

static void set(candle_dtype_traits *t, candle_dtype type, candle_to_f32_fn to, candle_from_f32_fn from,
                candle_vec_dot_fn dot, candle_dtype dot_type) {
    t[type].to_f32 = to;
    t[type].from_f32 = from;
    t[type].vec_dot = dot;
    t[type].vec_dot_type = dot_type;
}

static void register_scalar(candle_dtype_traits *t) {
    set(t, CANDLE_DTYPE_F32, f32_copy_row, f32_store_row, NULL, CANDLE_DTYPE_F32);
    set(t, CANDLE_DTYPE_F16, f16_to_f32_row, f32_to_f16_row, NULL, CANDLE_DTYPE_F16);
    set(t, CANDLE_DTYPE_BF16, bf16_to_f32_row, f32_to_bf16_row, NULL, CANDLE_DTYPE_BF16);
#define Q(T, lower, dot, dt) \
    set(t, CANDLE_DTYPE_##T, candle_##lower##_to_f32, candle_##lower##_from_f32, dot, CANDLE_DTYPE_##dt)
    Q(Q4_0, q4_0, candle_vec_dot_q4_0_q8_0, Q8_0);
    Q(Q4_1, q4_1, candle_vec_dot_q4_1_q8_1, Q8_1);
    Q(Q5_0, q5_0, candle_vec_dot_q5_0_q8_0, Q8_0);
    Q(Q5_1, q5_1, candle_vec_dot_q5_1_q8_1, Q8_1);
    Q(Q8_0, q8_0, candle_vec_dot_q8_0_q8_0, Q8_0);
    Q(Q8_1, q8_1, candle_vec_dot_q8_1_q8_1, Q8_1);
    Q(Q2_K, q2_k, candle_vec_dot_q2_k_q8_k, Q8_K);
    Q(Q3_K, q3_k, candle_vec_dot_q3_k_q8_k, Q8_K);
    Q(Q4_K, q4_k, candle_vec_dot_q4_k_q8_k, Q8_K);
    Q(Q5_K, q5_k, candle_vec_dot_q5_k_q8_k, Q8_K);
    Q(Q6_K, q6_k, candle_vec_dot_q6_k_q8_k, Q8_K);
    Q(Q8_K, q8_k, candle_vec_dot_q8_k_q8_k, Q8_K);
    Q(IQ4_NL, iq4_nl, candle_vec_dot_iq4_nl_q8_0, Q8_0);
    Q(IQ4_XS, iq4_xs, candle_vec_dot_iq4_xs_q8_k, Q8_K);
#undef Q
}

#ifdef CANDLE_QUANT_HAVE_X86
static void register_avx2(candle_dtype_traits *t) {
    t[CANDLE_DTYPE_F16].to_f32 = candle_f16_to_f32_row_avx2;
    t[CANDLE_DTYPE_F16].from_f32 = candle_f32_to_f16_row_avx2;
    t[CANDLE_DTYPE_BF16].to_f32 = candle_bf16_to_f32_row_avx2;
    t[CANDLE_DTYPE_BF16].from_f32 = candle_f32_to_bf16_row_avx2;
    t[CANDLE_DTYPE_Q4_0].to_f32 = candle_q4_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q4_1].to_f32 = candle_q4_1_to_f32_avx2;
    t[CANDLE_DTYPE_Q5_0].to_f32 = candle_q5_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q8_0].to_f32 = candle_q8_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q4_K].to_f32 = candle_q4_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q5_K].to_f32 = candle_q5_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q6_K].to_f32 = candle_q6_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q8_0].from_f32 = candle_q8_0_from_f32_avx2;
    t[CANDLE_DTYPE_Q8_1].from_f32 = candle_q8_1_from_f32_avx2;
    t[CANDLE_DTYPE_Q8_K].from_f32 = candle_q8_k_from_f32_avx2;
    t[CANDLE_DTYPE_Q4_0].vec_dot = candle_vec_dot_q4_0_q8_0_avx2;
    t[CANDLE_DTYPE_Q4_1].vec_dot = candle_vec_dot_q4_1_q8_1_avx2;
    t[CANDLE_DTYPE_Q5_0].vec_dot = candle_vec_dot_q5_0_q8_0_avx2;
    t[CANDLE_DTYPE_Q5_1].vec_dot = candle_vec_dot_q5_1_q8_1_avx2;
    t[CANDLE_DTYPE_Q8_0].vec_dot = candle_vec_dot_q8_0_q8_0_avx2;
    t[CANDLE_DTYPE_IQ4_NL].vec_dot = candle_vec_dot_iq4_nl_q8_0_avx2;
    t[CANDLE_DTYPE_Q2_K].vec_dot = candle_vec_dot_q2_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q3_K].vec_dot = candle_vec_dot_q3_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q4_K].vec_dot = candle_vec_dot_q4_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q5_K].vec_dot = candle_vec_dot_q5_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q6_K].vec_dot = candle_vec_dot_q6_k_q8_k_avx2;
    t[CANDLE_DTYPE_IQ4_XS].vec_dot = candle_vec_dot_iq4_xs_q8_k_avx2;
}

static void register_vnni(candle_dtype_traits *t) {
    t[CANDLE_DTYPE_Q4_0].vec_dot = candle_vec_dot_q4_0_q8_0_vnni;
    t[CANDLE_DTYPE_Q4_1].vec_dot = candle_vec_dot_q4_1_q8_1_vnni;
    t[CANDLE_DTYPE_Q5_0].vec_dot = candle_vec_dot_q5_0_q8_0_vnni;
    t[CANDLE_DTYPE_Q5_1].vec_dot = candle_vec_dot_q5_1_q8_1_vnni;
    t[CANDLE_DTYPE_Q8_0].vec_dot = candle_vec_dot_q8_0_q8_0_vnni;
    t[CANDLE_DTYPE_IQ4_NL].vec_dot = candle_vec_dot_iq4_nl_q8_0_vnni;
    t[CANDLE_DTYPE_Q2_K].vec_dot = candle_vec_dot_q2_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q3_K].vec_dot = candle_vec_dot_q3_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q4_K].vec_dot = candle_vec_dot_q4_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q5_K].vec_dot = candle_vec_dot_q5_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q6_K].vec_dot = candle_vec_dot_q6_k_q8_k_vnni;
    t[CANDLE_DTYPE_IQ4_XS].vec_dot = candle_vec_dot_iq4_xs_q8_k_vnni;
}
#endif

#ifdef CANDLE_QUANT_HAVE_NEON
/* NEON is baseline on aarch64; the dot product (SDOT) where the config
 * chose it. */
static void register_neon(candle_dtype_traits *t, bool dp) {
    t[CANDLE_DTYPE_Q4_0].vec_dot = dp ? candle_vec_dot_q4_0_q8_0_dotprod : candle_vec_dot_q4_0_q8_0_neon;
    t[CANDLE_DTYPE_Q4_1].vec_dot = dp ? candle_vec_dot_q4_1_q8_1_dotprod : candle_vec_dot_q4_1_q8_1_neon;
    t[CANDLE_DTYPE_Q8_0].vec_dot = dp ? candle_vec_dot_q8_0_q8_0_dotprod : candle_vec_dot_q8_0_q8_0_neon;
    t[CANDLE_DTYPE_Q5_0].vec_dot = dp ? candle_vec_dot_q5_0_q8_0_dotprod : candle_vec_dot_q5_0_q8_0_neon;
    t[CANDLE_DTYPE_Q5_1].vec_dot = dp ? candle_vec_dot_q5_1_q8_1_dotprod : candle_vec_dot_q5_1_q8_1_neon;
    t[CANDLE_DTYPE_Q4_K].vec_dot = dp ? candle_vec_dot_q4_k_q8_k_dotprod : candle_vec_dot_q4_k_q8_k_neon;
    t[CANDLE_DTYPE_Q6_K].vec_dot = dp ? candle_vec_dot_q6_k_q8_k_dotprod : candle_vec_dot_q6_k_q8_k_neon;
    t[CANDLE_DTYPE_Q5_K].vec_dot = dp ? candle_vec_dot_q5_k_q8_k_dotprod : candle_vec_dot_q5_k_q8_k_neon;
    /* the activation quantizers (the scalar bytes) */
    t[CANDLE_DTYPE_Q8_0].from_f32 = candle_q8_0_from_f32_neon;
    t[CANDLE_DTYPE_Q8_1].from_f32 = candle_q8_1_from_f32_neon;
    t[CANDLE_DTYPE_Q8_K].from_f32 = candle_q8_k_from_f32_neon;
}
#endif

void candle_quant_register_traits(candle_dtype_traits *t) { register_scalar(t); }

void candle_quant_register_kernels(candle_dtype_traits *t, cpu_quant_level level) {
    register_scalar(t);
#ifdef CANDLE_QUANT_HAVE_NEON
    if (level == CPU_QUANT_NEON || level == CPU_QUANT_DOTPROD) register_neon(t, level == CPU_QUANT_DOTPROD);
#endif
#ifdef CANDLE_QUANT_HAVE_X86
    if (level == CPU_QUANT_AVX2 || level == CPU_QUANT_VNNI) register_avx2(t);
    if (level == CPU_QUANT_VNNI) register_vnni(t);
#endif
    (void)level;
}
