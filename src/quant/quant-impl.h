/* Internal: GGUF block layouts and the row kernels of every block type.
 *
 * The structs are byte-exact GGUF blocks (no padding: every field is a byte
 * array or sits at its natural alignment), checked by static asserts against
 * the type sizes of the dtype table. Half floats are kept as raw uint16_t.
 *
 * Row kernels follow the traits signatures: n is the element count and a
 * multiple of the block size. vec_dot(n, out, x, y) takes x in the weight type
 * and y in its vec_dot_type (q8_0, q8_1 or q8_k). Scalar versions are the
 * reference; x86/ has AVX2 versions of the hot ones, picked at registration. */
#ifndef CANDLE_QUANT_IMPL_H
#define CANDLE_QUANT_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "candle/dtype.h"
/* The quantized kernels are CPU kernels chosen by the backend's settings. */
#include "../backend/cpu/cpu-config.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct {
    uint16_t d;             /* f16 scale */
    uint8_t qs[QK4_0 / 2];  /* element j in low nibble of byte j, j+16 in the high */
} block_q4_0;

typedef struct {
    uint16_t d;             /* f16 scale */
    uint16_t m;             /* f16 minimum */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct {
    uint16_t d;
    uint8_t qh[4];          /* bit j: fifth bit of element j (little-endian u32) */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

typedef struct {
    uint16_t d;             /* f16 scale */
    uint16_t s;             /* f16 of d * sum(qs): lets q4_1/q5_1 dots fold the minimum in */
    int8_t qs[QK8_1];
} block_q8_1;

typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble: scale, high nibble: min, per 16 elements */
    uint8_t qs[QK_K / 4];      /* 2 bits; byte b of half h holds elements h*128+32k+b at shift 2k */
    uint16_t d;
    uint16_t dmin;
} block_q2_K;

typedef struct {
    uint8_t hmask[QK_K / 8];   /* bit k of byte b: high bit of element 32k+b, set means no -4 */
    uint8_t qs[QK_K / 4];      /* low 2 bits, as q2_K */
    uint8_t scales[12];        /* 16 6-bit scales, biased by 32 */
    uint16_t d;
} block_q3_K;

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins, per 32 elements */
    uint8_t qs[QK_K / 2];      /* chunk c of 64: byte 32c+b low nibble = elem 64c+b, high = 64c+32+b */
} block_q4_K;

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];      /* bit k of byte b: fifth bit of element 32k+b */
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];  /* per 16 elements */
    uint16_t d;
} block_q6_K;

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  /* sums of qs per 16 elements: the K dots fold minimums with them */
} block_q8_K;

typedef struct {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];    /* indices into the non-linear table, nibbles as q4_0 */
} block_iq4_nl;

typedef struct {
    uint16_t d;
    uint16_t scales_h;         /* high 2 bits of the 8 6-bit scales */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits, two per byte */
    uint8_t qs[QK_K / 2];      /* per 32 elements as iq4_nl */
} block_iq4_xs;

_Static_assert(sizeof(block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs layout");

/* The non-linear 4-bit codebook of iq4_nl / iq4_xs. */
extern const int8_t candle_iq4nl_values[16];

/* Exact f16 -> f32, inline for the dot kernels (subnormals scale exactly). */
static inline float quant_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f;
        memcpy(&bits, &v, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round half to even, as an int (the same as cvtps2dq / lrintf in the default
 * rounding mode), inline: adding 1.5 * 2^23 leaves the rounded integer in the
 * low mantissa bits. Out-of-range values saturate to +-2^22, NaN gives 0;
 * callers clamp to their code range. */
static inline int quant_nearest_int(float v) {
    if (!(fabsf(v) < 4194304.0f)) return v > 0 ? 4194304 : v < 0 ? -4194304 : 0;
    float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* 6-bit scale and min j (0..7) of a q4_K/q5_K block. */
static inline void quant_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Biased 6-bit scale j (0..15) of a q3_K block, as a signed value. */
static inline int quant_q3k_scale(int j, const uint8_t *s) {
    int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

#define QUANT_DECLARE(t)                                            \
    void candle_##t##_to_f32(const void *src, float *dst, int64_t n); \
    void candle_##t##_from_f32(const float *src, void *dst, int64_t n)

QUANT_DECLARE(q4_0);
QUANT_DECLARE(q4_1);
QUANT_DECLARE(q5_0);
QUANT_DECLARE(q5_1);
QUANT_DECLARE(q8_0);
QUANT_DECLARE(q8_1);
QUANT_DECLARE(q2_k);
QUANT_DECLARE(q3_k);
QUANT_DECLARE(q4_k);
QUANT_DECLARE(q5_k);
QUANT_DECLARE(q6_k);
QUANT_DECLARE(q8_k);
QUANT_DECLARE(iq4_nl);
QUANT_DECLARE(iq4_xs);

/* Scalar reference dots. */
void candle_vec_dot_q4_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_nl_q8_0(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q2_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q3_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q6_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_xs_q8_k(int64_t n, float *out, const void *x, const void *y);

/* AVX2 + FMA + F16C versions (x86/, only on x86-64 builds; call only when
 * candle_quant_uses_avx2()). Results equal the scalar ones up to float summation
 * order; the quantizers are bit-identical to the scalar ones. */
#if defined(__x86_64__) || defined(_M_X64)
#define CANDLE_QUANT_HAVE_X86 1
void candle_f16_to_f32_row_avx2(const void *src, float *dst, int64_t n);
void candle_f32_to_f16_row_avx2(const float *src, void *dst, int64_t n);
void candle_bf16_to_f32_row_avx2(const void *src, float *dst, int64_t n);
void candle_f32_to_bf16_row_avx2(const float *src, void *dst, int64_t n);
void candle_q4_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q4_1_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q5_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q8_0_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q4_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q5_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q6_k_to_f32_avx2(const void *src, float *dst, int64_t n);
void candle_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n);
void candle_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n);
void candle_q8_k_from_f32_avx2(const float *src, void *dst, int64_t n);
void candle_vec_dot_q4_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_1_q8_1_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_1_q8_1_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_0_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q2_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q3_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_xs_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q6_k_q8_k_avx2(int64_t n, float *out, const void *x, const void *y);
/* AVX-512 VNNI versions of the 32-element and K dots (same results as AVX2). */
void candle_vec_dot_q4_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_1_q8_1_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_1_q8_1_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_0_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_nl_q8_0_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q2_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q3_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_iq4_xs_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q6_k_q8_k_vnni(int64_t n, float *out, const void *x, const void *y);
#endif

/* NEON versions (arm/, only on aarch64 builds): _neon on plain armv8-a,
 * _dotprod with the armv8.2-a dot product (only where AT_HWCAP has it).
 * Their results equal the scalar dots bit for bit (same integer block sums,
 * same float steps). candle_qgemm_rows_* returns 0 for a type it lacks. */
#if defined(__aarch64__)
#define CANDLE_QUANT_HAVE_NEON 1
void candle_vec_dot_q4_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_1_q8_1_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_1_q8_1_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q8_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_0_q8_0_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_1_q8_1_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_0_q8_0_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_1_q8_1_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q6_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_k_q8_k_neon(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q5_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q4_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
void candle_vec_dot_q6_k_q8_k_dotprod(int64_t n, float *out, const void *x, const void *y);
int candle_qgemm_rows_neon(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                           const void *x, size_t xs, float *c, int64_t ldc);
int candle_qgemm_rows_dotprod(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                              const void *x, size_t xs, float *c, int64_t ldc);
/* q4_K, q5_K and q6_K (kquants_*.c), called by the two above; rows at the
 * blocks' natural alignment. */
int candle_qgemm_rows_k_neon(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                             const void *x, size_t xs, float *c, int64_t ldc);
int candle_qgemm_rows_k_dotprod(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                const void *x, size_t xs, float *c, int64_t ldc);
#endif
/* The running CPU config's quantized kernels (cpu-config.h): the NEON dots,
 * and their dotprod versions (0 elsewhere); the AVX2 kernels, and the
 * AVX-512 VNNI dots where they exist (0 elsewhere). */
static inline int candle_quant_uses_neon(void) { return cpu_config_get()->quant >= CPU_QUANT_NEON; }
static inline int candle_quant_uses_dotprod(void) { return cpu_config_get()->quant == CPU_QUANT_DOTPROD; }
static inline int candle_quant_uses_avx2(void) {
    cpu_quant_level q = cpu_config_get()->quant;
    return q == CPU_QUANT_AVX2 || q == CPU_QUANT_VNNI;
}
static inline int candle_quant_uses_vnni(void) { return cpu_config_get()->quant == CPU_QUANT_VNNI; }

/* A config's dtype table: the public one's entries with the kernels of its
 * level (traits.c). */
void candle_quant_register_kernels(candle_dtype_traits *t, cpu_quant_level level);

/* Prefetches of the decoding weight streams, which are read once per token
 * (the q4/q5/q8_0 and K-type matrix-vector rows, the f16/bf16 rows): non-
 * temporal where the config says (by default on AMD, whose L3 is a victim
 * cache of L2: T0 lines there went into it over the KV cache, activations
 * and code), T0 elsewhere (an Ice Lake Xeon's prefetchnta fills L1 alone,
 * past the L2 streamer, and halves the stream). Figures in bench/RESULTS.md. */
static inline __attribute__((always_inline)) void candle_stream_prefetch(const void *p) {
    if (cpu_config_get()->stream_nta) __builtin_prefetch(p, 0, 0);
    else __builtin_prefetch(p, 0, 3);
}

#endif
