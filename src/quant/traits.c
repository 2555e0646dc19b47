/* Registers the row kernels of the float and block types in the dtype traits
 * table, picking the AVX2 kernels when the CPU has them (NEON on aarch64). */
#include <stdlib.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

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

static int use_avx2, use_vnni, use_neon, use_dotprod;
bool candle_quant_stream_nta;

/* A switch set in the environment (set, not empty, not "0"). */
static int env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && *e != '0';
}

int candle_quant_uses_neon(void) {
    candle_dtype_info(CANDLE_DTYPE_F32);
    return use_neon;
}

int candle_quant_uses_dotprod(void) {
    candle_dtype_info(CANDLE_DTYPE_F32);
    return use_dotprod;
}

int candle_quant_uses_avx2(void) {
    candle_dtype_info(CANDLE_DTYPE_F32); /* registration decides */
    return use_avx2;
}

int candle_quant_uses_vnni(void) {
    candle_dtype_info(CANDLE_DTYPE_F32);
    return use_vnni;
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
/* F16C through cpuid: clang's __builtin_cpu_supports does not know "f16c". */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

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
/* NEON is baseline on aarch64; the dot product (SDOT) where AT_HWCAP says
 * so, unless CANDLE_QUANT_NO_DOTPROD (comparison, tests). */
static void register_neon(candle_dtype_traits *t) {
    int dp = 0;
#ifdef __linux__
    dp = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
    if (env_on("CANDLE_QUANT_NO_DOTPROD")) dp = 0;
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
    use_neon = 1;
    use_dotprod = dp;
}
#endif

/* candle_quant_stream_nta: CANDLE_PREFETCH=nta or t0, else AMD's CPUs. */
static bool stream_nta(void) {
    const char *e = getenv("CANDLE_PREFETCH");
    if (e && !strcmp(e, "nta")) return true;
    if (e && !strcmp(e, "t0")) return false;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    return !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
#else
    return false;
#endif
}

void candle_quant_register_traits(candle_dtype_traits *t) {
    candle_quant_stream_nta = stream_nta();
    register_scalar(t);
#ifdef CANDLE_QUANT_HAVE_NEON
    if (!env_on("CANDLE_QUANT_SCALAR")) register_neon(t);
#endif
#ifdef CANDLE_QUANT_HAVE_X86
    /* CANDLE_QUANT_SCALAR forces the reference kernels (debugging, tests) */
    if (!env_on("CANDLE_QUANT_SCALAR") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        cpu_has_f16c()) {
        register_avx2(t);
        use_avx2 = 1;
        /* CANDLE_QUANT_NO_VNNI keeps the AVX2 dots (comparison, debugging) */
        if (!env_on("CANDLE_QUANT_NO_VNNI") && __builtin_cpu_supports("avx512vnni") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
            register_vnni(t);
            use_vnni = 1;
        }
    }
#endif
}
