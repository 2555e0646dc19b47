/* The dtype traits table and scalar float conversions. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "dtype-impl.h"

#define PLAIN(nm, sz, fl, in, id) \
    {.name = nm, .block_size = 1, .type_size = sz, .is_float = fl, .is_int = in, .gguf_id = id}
#define QUANT(nm, bs, sz, id) \
    {.name = nm, .block_size = bs, .type_size = sz, .is_quantized = true, .gguf_id = id}

/* gguf ids are ggml_type values as stored in GGUF files. */
static candle_dtype_traits table[] = {
    [CANDLE_DTYPE_F32] = PLAIN("f32", 4, true, false, 0),
    [CANDLE_DTYPE_F16] = PLAIN("f16", 2, true, false, 1),
    [CANDLE_DTYPE_BF16] = PLAIN("bf16", 2, true, false, 30),
    [CANDLE_DTYPE_I8] = PLAIN("i8", 1, false, true, 24),
    [CANDLE_DTYPE_I32] = PLAIN("i32", 4, false, true, 26),
    [CANDLE_DTYPE_I64] = PLAIN("i64", 8, false, true, 27),
    [CANDLE_DTYPE_U8] = PLAIN("u8", 1, false, true, -1),
    [CANDLE_DTYPE_BOOL] = PLAIN("bool", 1, false, true, -1),
    [CANDLE_DTYPE_Q4_0] = QUANT("q4_0", 32, 18, 2),
    [CANDLE_DTYPE_Q4_1] = QUANT("q4_1", 32, 20, 3),
    [CANDLE_DTYPE_Q5_0] = QUANT("q5_0", 32, 22, 6),
    [CANDLE_DTYPE_Q5_1] = QUANT("q5_1", 32, 24, 7),
    [CANDLE_DTYPE_Q8_0] = QUANT("q8_0", 32, 34, 8),
    [CANDLE_DTYPE_Q8_1] = QUANT("q8_1", 32, 36, 9),
    [CANDLE_DTYPE_Q2_K] = QUANT("q2_k", 256, 84, 10),
    [CANDLE_DTYPE_Q3_K] = QUANT("q3_k", 256, 110, 11),
    [CANDLE_DTYPE_Q4_K] = QUANT("q4_k", 256, 144, 12),
    [CANDLE_DTYPE_Q5_K] = QUANT("q5_k", 256, 176, 13),
    [CANDLE_DTYPE_Q6_K] = QUANT("q6_k", 256, 210, 14),
    [CANDLE_DTYPE_Q8_K] = QUANT("q8_k", 256, 292, 15),
    [CANDLE_DTYPE_IQ4_NL] = QUANT("iq4_nl", 32, 18, 20),
    [CANDLE_DTYPE_IQ4_XS] = QUANT("iq4_xs", 256, 136, 23),
    [CANDLE_DTYPE_Q4_Z128] = QUANT("q4_z128", 128, 68, -1),
};
_Static_assert(sizeof(table) / sizeof(table[0]) == CANDLE_DTYPE_COUNT,
               "dtype traits table out of date");

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static void table_init(void) { cdl_quant_register_traits(table); }

const candle_dtype_traits *candle_dtype_info(candle_dtype t) {
    if ((unsigned)t >= CANDLE_DTYPE_COUNT) return NULL;
    pthread_once(&table_once, table_init);
    return &table[t];
}

const char *candle_dtype_name(candle_dtype t) {
    return (unsigned)t < CANDLE_DTYPE_COUNT ? table[t].name : "invalid";
}

size_t candle_dtype_row_size(candle_dtype t, int64_t n) {
    if ((unsigned)t >= CANDLE_DTYPE_COUNT || n < 0) return 0;
    return (size_t)(n / table[t].block_size) * table[t].type_size;
}

candle_dtype candle_dtype_from_name(const char *name) {
    if (!name) return CANDLE_DTYPE_COUNT;
    for (int i = 0; i < CANDLE_DTYPE_COUNT; i++)
        if (strcasecmp(name, table[i].name) == 0) return (candle_dtype)i;
    return CANDLE_DTYPE_COUNT;
}

candle_dtype candle_dtype_from_gguf(int gguf_id) {
    for (int i = 0; i < CANDLE_DTYPE_COUNT; i++)
        if (table[i].gguf_id == gguf_id && gguf_id >= 0) return (candle_dtype)i;
    return CANDLE_DTYPE_COUNT;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t candle_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float candle_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t candle_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (a < 0x38800000u) {
        /* subnormal or zero: scale so the float adder rounds to nearest even */
        float r = bits_f32(a) + 0.5f; /* 0.5 = 2^-1: ulp becomes 2^-24 */
        return (uint16_t)(sign | (f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + mant_odd;
    return (uint16_t)(sign | (a >> 13));
}

float candle_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}
