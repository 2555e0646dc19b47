/* The scalar reference row kernels of the float and block types: the public
 * dtype table's (a CPU config's own copy starts from them and takes its
 * ISA's kernels: src/backend/cpu/quant/quant_kernels.c). */

#include "../core/dtype-impl.h"
#include "quant-impl.h"

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
    set(t, CANDLE_DTYPE_##T, cdl_##lower##_to_f32, cdl_##lower##_from_f32, dot, CANDLE_DTYPE_##dt)
    Q(Q4_0, q4_0, cdl_vec_dot_q4_0_q8_0, Q8_0);
    Q(Q4_1, q4_1, cdl_vec_dot_q4_1_q8_1, Q8_1);
    Q(Q5_0, q5_0, cdl_vec_dot_q5_0_q8_0, Q8_0);
    Q(Q5_1, q5_1, cdl_vec_dot_q5_1_q8_1, Q8_1);
    Q(Q8_0, q8_0, cdl_vec_dot_q8_0_q8_0, Q8_0);
    Q(Q8_1, q8_1, cdl_vec_dot_q8_1_q8_1, Q8_1);
    Q(Q2_K, q2_k, cdl_vec_dot_q2_k_q8_k, Q8_K);
    Q(Q3_K, q3_k, cdl_vec_dot_q3_k_q8_k, Q8_K);
    Q(Q4_K, q4_k, cdl_vec_dot_q4_k_q8_k, Q8_K);
    Q(Q5_K, q5_k, cdl_vec_dot_q5_k_q8_k, Q8_K);
    Q(Q6_K, q6_k, cdl_vec_dot_q6_k_q8_k, Q8_K);
    Q(Q8_K, q8_k, cdl_vec_dot_q8_k_q8_k, Q8_K);
    Q(IQ4_NL, iq4_nl, cdl_vec_dot_iq4_nl_q8_0, Q8_0);
    Q(IQ4_XS, iq4_xs, cdl_vec_dot_iq4_xs_q8_k, Q8_K);
    Q(Q4_Z128, q4_z128, cdl_vec_dot_q4_z128_q8_0, Q8_0);
#undef Q
}

void cdl_quant_register_traits(candle_dtype_traits *t) { register_scalar(t); }
