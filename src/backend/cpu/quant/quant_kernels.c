/* A CPU config's dtype table: the scalar reference kernels (traits.c) with
 * those of the config's quantized-kernel level on top (AVX2, AVX-512 VNNI,
 * NEON, NEON dotprod). */
#include "../../../core/dtype-impl.h"
#include "arm/quant-arm-impl.h"
#include "quant-kernels-impl.h"
#include "x86/quant-x86-impl.h"

#ifdef CANDLE_QUANT_HAVE_X86
static void register_avx2(candle_dtype_traits *t) {
    t[CANDLE_DTYPE_F16].to_f32 = cdl_f16_to_f32_row_avx2;
    t[CANDLE_DTYPE_F16].from_f32 = cdl_f32_to_f16_row_avx2;
    t[CANDLE_DTYPE_BF16].to_f32 = cdl_bf16_to_f32_row_avx2;
    t[CANDLE_DTYPE_BF16].from_f32 = cdl_f32_to_bf16_row_avx2;
    t[CANDLE_DTYPE_Q4_0].to_f32 = cdl_q4_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q4_1].to_f32 = cdl_q4_1_to_f32_avx2;
    t[CANDLE_DTYPE_Q5_0].to_f32 = cdl_q5_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q8_0].to_f32 = cdl_q8_0_to_f32_avx2;
    t[CANDLE_DTYPE_Q4_K].to_f32 = cdl_q4_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q5_K].to_f32 = cdl_q5_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q6_K].to_f32 = cdl_q6_k_to_f32_avx2;
    t[CANDLE_DTYPE_Q4_Z128].to_f32 = cdl_q4_z128_to_f32_avx2;
    t[CANDLE_DTYPE_Q8_0].from_f32 = cdl_q8_0_from_f32_avx2;
    t[CANDLE_DTYPE_Q8_1].from_f32 = cdl_q8_1_from_f32_avx2;
    t[CANDLE_DTYPE_Q8_K].from_f32 = cdl_q8_k_from_f32_avx2;
    t[CANDLE_DTYPE_Q4_0].vec_dot = cdl_vec_dot_q4_0_q8_0_avx2;
    t[CANDLE_DTYPE_Q4_1].vec_dot = cdl_vec_dot_q4_1_q8_1_avx2;
    t[CANDLE_DTYPE_Q5_0].vec_dot = cdl_vec_dot_q5_0_q8_0_avx2;
    t[CANDLE_DTYPE_Q5_1].vec_dot = cdl_vec_dot_q5_1_q8_1_avx2;
    t[CANDLE_DTYPE_Q8_0].vec_dot = cdl_vec_dot_q8_0_q8_0_avx2;
    t[CANDLE_DTYPE_IQ4_NL].vec_dot = cdl_vec_dot_iq4_nl_q8_0_avx2;
    t[CANDLE_DTYPE_Q2_K].vec_dot = cdl_vec_dot_q2_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q3_K].vec_dot = cdl_vec_dot_q3_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q4_K].vec_dot = cdl_vec_dot_q4_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q5_K].vec_dot = cdl_vec_dot_q5_k_q8_k_avx2;
    t[CANDLE_DTYPE_Q6_K].vec_dot = cdl_vec_dot_q6_k_q8_k_avx2;
    t[CANDLE_DTYPE_IQ4_XS].vec_dot = cdl_vec_dot_iq4_xs_q8_k_avx2;
}

static void register_vnni(candle_dtype_traits *t) {
    t[CANDLE_DTYPE_Q4_0].vec_dot = cdl_vec_dot_q4_0_q8_0_vnni;
    t[CANDLE_DTYPE_Q4_1].vec_dot = cdl_vec_dot_q4_1_q8_1_vnni;
    t[CANDLE_DTYPE_Q5_0].vec_dot = cdl_vec_dot_q5_0_q8_0_vnni;
    t[CANDLE_DTYPE_Q5_1].vec_dot = cdl_vec_dot_q5_1_q8_1_vnni;
    t[CANDLE_DTYPE_Q8_0].vec_dot = cdl_vec_dot_q8_0_q8_0_vnni;
    t[CANDLE_DTYPE_IQ4_NL].vec_dot = cdl_vec_dot_iq4_nl_q8_0_vnni;
    t[CANDLE_DTYPE_Q2_K].vec_dot = cdl_vec_dot_q2_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q3_K].vec_dot = cdl_vec_dot_q3_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q4_K].vec_dot = cdl_vec_dot_q4_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q5_K].vec_dot = cdl_vec_dot_q5_k_q8_k_vnni;
    t[CANDLE_DTYPE_Q6_K].vec_dot = cdl_vec_dot_q6_k_q8_k_vnni;
    t[CANDLE_DTYPE_IQ4_XS].vec_dot = cdl_vec_dot_iq4_xs_q8_k_vnni;
}
#endif

#ifdef CANDLE_QUANT_HAVE_NEON
/* NEON is baseline on aarch64; the dot product (SDOT) where the config
 * chose it. */
static void register_neon(candle_dtype_traits *t, bool dp) {
    t[CANDLE_DTYPE_Q4_0].vec_dot = dp ? cdl_vec_dot_q4_0_q8_0_dotprod : cdl_vec_dot_q4_0_q8_0_neon;
    t[CANDLE_DTYPE_Q4_1].vec_dot = dp ? cdl_vec_dot_q4_1_q8_1_dotprod : cdl_vec_dot_q4_1_q8_1_neon;
    t[CANDLE_DTYPE_Q8_0].vec_dot = dp ? cdl_vec_dot_q8_0_q8_0_dotprod : cdl_vec_dot_q8_0_q8_0_neon;
    t[CANDLE_DTYPE_Q5_0].vec_dot = dp ? cdl_vec_dot_q5_0_q8_0_dotprod : cdl_vec_dot_q5_0_q8_0_neon;
    t[CANDLE_DTYPE_Q5_1].vec_dot = dp ? cdl_vec_dot_q5_1_q8_1_dotprod : cdl_vec_dot_q5_1_q8_1_neon;
    t[CANDLE_DTYPE_Q4_K].vec_dot = dp ? cdl_vec_dot_q4_k_q8_k_dotprod : cdl_vec_dot_q4_k_q8_k_neon;
    t[CANDLE_DTYPE_Q6_K].vec_dot = dp ? cdl_vec_dot_q6_k_q8_k_dotprod : cdl_vec_dot_q6_k_q8_k_neon;
    t[CANDLE_DTYPE_Q5_K].vec_dot = dp ? cdl_vec_dot_q5_k_q8_k_dotprod : cdl_vec_dot_q5_k_q8_k_neon;
    t[CANDLE_DTYPE_Q4_Z128].vec_dot = dp ? cdl_vec_dot_q4_z128_q8_0_dotprod : cdl_vec_dot_q4_z128_q8_0_neon;
    /* the activation quantizers (the scalar bytes) */
    t[CANDLE_DTYPE_Q8_0].from_f32 = cdl_q8_0_from_f32_neon;
    t[CANDLE_DTYPE_Q8_1].from_f32 = cdl_q8_1_from_f32_neon;
    t[CANDLE_DTYPE_Q8_K].from_f32 = cdl_q8_k_from_f32_neon;
}
#endif

void cdl_quant_register_kernels(candle_dtype_traits *t, cpu_quant_level level) {
    cdl_quant_register_traits(t);
#ifdef CANDLE_QUANT_HAVE_NEON
    if (level == CPU_QUANT_NEON || level == CPU_QUANT_DOTPROD) register_neon(t, level == CPU_QUANT_DOTPROD);
#endif
#ifdef CANDLE_QUANT_HAVE_X86
    if (level == CPU_QUANT_AVX2 || level == CPU_QUANT_VNNI) register_avx2(t);
    if (level == CPU_QUANT_VNNI) register_vnni(t);
#endif
    (void)level;
}
