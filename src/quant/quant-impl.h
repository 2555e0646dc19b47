/* Internal: GGUF block layouts and the scalar reference row kernels of
 * every block type.
 *
 * The structs are byte-exact GGUF blocks (no padding: every field is a byte
 * array or sits at its natural alignment), checked by static asserts against
 * the type sizes of the dtype table. Half floats are kept as raw uint16_t.
 *
 * Row kernels follow the traits signatures: n is the element count and a
 * multiple of the block size. vec_dot(n, out, x, y) takes x in the weight type
 * and y in its vec_dot_type (q8_0, q8_1 or q8_k). Scalar versions are the
 * reference; the SIMD versions are CPU kernels (src/backend/cpu/quant/: x86/,
 * arm/), picked by the CPU backend's settings. */
#ifndef CANDLE_QUANT_IMPL_H
#define CANDLE_QUANT_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "candle/dtype.h"

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

/* q4_z128 (Candle's, no GGUF id): a GPTQ/AWQ group of 128 weights. */
#define QK4_Z 128
typedef struct {
    uint16_t d;             /* f16 scale */
    uint8_t z;              /* zero point (0..16: GPTQ v1 stores z - 1 in 4 bits) */
    uint8_t pad;
    uint8_t qs[QK4_Z / 2];  /* four q4_0 nibble blocks: element 32s + j of sub-block s in
                               the low nibble of qs[16s + j], 32s + j + 16 in the high */
} block_q4_z128;

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
_Static_assert(sizeof(block_q4_z128) == 68, "q4_z128 layout");

/* The non-linear 4-bit codebook of iq4_nl / iq4_xs. */
extern const int8_t cdl_iq4nl_values[16];

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
    void cdl_##t##_to_f32(const void *src, float *dst, int64_t n); \
    void cdl_##t##_from_f32(const float *src, void *dst, int64_t n)

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
QUANT_DECLARE(q4_z128);

/* Scalar reference dots. */
void cdl_vec_dot_q4_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_0_q8_0(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_1_q8_1(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_nl_q8_0(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q2_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q3_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q5_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q6_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q8_k_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_iq4_xs_q8_k(int64_t n, float *out, const void *x, const void *y);
void cdl_vec_dot_q4_z128_q8_0(int64_t n, float *out, const void *x, const void *y);

#endif
