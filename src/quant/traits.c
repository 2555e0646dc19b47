/* Registers row conversion kernels in the dtype traits table. */
#include "../core/dtype-impl.h"

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

void candle_quant_register_traits(candle_dtype_traits *t) {
    t[CANDLE_DTYPE_F32].to_f32 = f32_copy_row;
    t[CANDLE_DTYPE_F32].from_f32 = f32_store_row;
    t[CANDLE_DTYPE_F16].to_f32 = f16_to_f32_row;
    t[CANDLE_DTYPE_F16].from_f32 = f32_to_f16_row;
    t[CANDLE_DTYPE_BF16].to_f32 = bf16_to_f32_row;
    t[CANDLE_DTYPE_BF16].from_f32 = f32_to_bf16_row;
}
