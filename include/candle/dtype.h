/* Element types. Quantized types are blocks (GGUF's, and q4_z128):
 * `block_size` elements are stored together in `type_size` bytes, and rows
 * are whole blocks. */
#ifndef CANDLE_DTYPE_H
#define CANDLE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_dtype {
    CANDLE_DTYPE_F32 = 0,
    CANDLE_DTYPE_F16,
    CANDLE_DTYPE_BF16,
    CANDLE_DTYPE_I8,
    CANDLE_DTYPE_I32,
    CANDLE_DTYPE_I64,
    CANDLE_DTYPE_U8,
    CANDLE_DTYPE_BOOL,
    /* GGUF block types */
    CANDLE_DTYPE_Q4_0,
    CANDLE_DTYPE_Q4_1,
    CANDLE_DTYPE_Q5_0,
    CANDLE_DTYPE_Q5_1,
    CANDLE_DTYPE_Q8_0,
    CANDLE_DTYPE_Q8_1,
    CANDLE_DTYPE_Q2_K,
    CANDLE_DTYPE_Q3_K,
    CANDLE_DTYPE_Q4_K,
    CANDLE_DTYPE_Q5_K,
    CANDLE_DTYPE_Q6_K,
    CANDLE_DTYPE_Q8_K,
    CANDLE_DTYPE_IQ4_NL,
    CANDLE_DTYPE_IQ4_XS,
    /* Candle's own block type (no GGUF id): 128 four-bit codes q with one
     * f16 scale d and one zero point z, value d * (q - z): a GPTQ/AWQ group
     * of 128 as stored, repacked at load (4.25 bits per weight) */
    CANDLE_DTYPE_Q4_Z128,
    CANDLE_DTYPE_COUNT
} candle_dtype;

/* Row-conversion kernels: n is a multiple of the block size. */
typedef void (*candle_to_f32_fn)(const void *src, float *dst, int64_t n);
typedef void (*candle_from_f32_fn)(const float *src, void *dst, int64_t n);
/* Dot product of one row of a dtype with one row of its vec_dot_type. */
typedef void (*candle_vec_dot_fn)(int64_t n, float *out, const void *x, const void *y);

typedef struct candle_dtype_traits {
    const char *name;          /* "f32", "q4_k", ... */
    int64_t block_size;        /* elements per block (1 for plain types) */
    size_t type_size;          /* bytes per block */
    bool is_float;             /* f32/f16/bf16 */
    bool is_int;               /* i8/i32/i64/u8/bool */
    bool is_quantized;         /* block type */
    int gguf_id;               /* ggml_type id in GGUF files, -1 if none */
    candle_to_f32_fn to_f32;   /* NULL until a kernel is registered */
    candle_from_f32_fn from_f32;
    candle_vec_dot_fn vec_dot;
    candle_dtype vec_dot_type; /* activation type vec_dot pairs with */
} candle_dtype_traits;

CANDLE_API const candle_dtype_traits *candle_dtype_info(candle_dtype t);
CANDLE_API const char *candle_dtype_name(candle_dtype t);
/* Bytes for n elements (n a multiple of the block size). */
CANDLE_API size_t candle_dtype_row_size(candle_dtype t, int64_t n);
/* CANDLE_DTYPE_COUNT if unknown. */
CANDLE_API candle_dtype candle_dtype_from_name(const char *name);
CANDLE_API candle_dtype candle_dtype_from_gguf(int gguf_id);

/* Scalar conversions (round-to-nearest-even, NaN preserved). */
CANDLE_API uint16_t candle_f32_to_f16(float f);
CANDLE_API float candle_f16_to_f32(uint16_t h);
CANDLE_API uint16_t candle_f32_to_bf16(float f);
CANDLE_API float candle_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
