/* Scalar load/store of one element of a plain (non-block) dtype, in double
 * precision. Used by the reference kernels and element access. */
#ifndef CANDLE_ELEM_IMPL_H
#define CANDLE_ELEM_IMPL_H

#include <math.h>
#include <string.h>

#include "candle/dtype.h"

static inline double cdl_load_f64(candle_dtype t, const void *p) {
    switch (t) {
    case CANDLE_DTYPE_F32: return *(const float *)p;
    case CANDLE_DTYPE_F16: return candle_f16_to_f32(*(const uint16_t *)p);
    case CANDLE_DTYPE_BF16: return candle_bf16_to_f32(*(const uint16_t *)p);
    case CANDLE_DTYPE_I8: return *(const int8_t *)p;
    case CANDLE_DTYPE_I32: return *(const int32_t *)p;
    case CANDLE_DTYPE_I64: return (double)*(const int64_t *)p;
    case CANDLE_DTYPE_U8: return *(const uint8_t *)p;
    case CANDLE_DTYPE_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    default: return NAN;
    }
}

/* One f32, f16 or bf16 element as float (p need not be aligned): the
 * kernels' tail and fallback loads. */
static inline float cdl_load_f32(candle_dtype t, const void *p) {
    if (t == CANDLE_DTYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == CANDLE_DTYPE_F16 ? candle_f16_to_f32(h) : candle_bf16_to_f32(h);
}

/* double -> int64 saturating, NaN -> 0 (2^63 itself does not fit). */
static inline int64_t cdl_f64_to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 0x1p63) return INT64_MAX;
    if (v <= -0x1p63) return INT64_MIN;
    return (int64_t)v;
}

static inline int64_t cdl_load_i64(candle_dtype t, const void *p) {
    switch (t) {
    case CANDLE_DTYPE_I8: return *(const int8_t *)p;
    case CANDLE_DTYPE_I32: return *(const int32_t *)p;
    case CANDLE_DTYPE_I64: return *(const int64_t *)p;
    case CANDLE_DTYPE_U8: return *(const uint8_t *)p;
    case CANDLE_DTYPE_BOOL: return *(const uint8_t *)p != 0;
    default: return cdl_f64_to_i64(cdl_load_f64(t, p));
    }
}

/* Float to integer conversion saturates and maps NaN to 0 (C's cast is UB). */
static inline int64_t cdl_sat_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

/* double -> float rounded to odd: truncate, then set the last bit when
 * anything was cut off. Rounding that once more to f16/bf16 (RNE) gives the
 * correctly rounded result; going through an RNE float would round twice
 * (e.g. 1 + 2^-8 + 2^-30 would land on the bf16 tie and go down). */
static inline float cdl_f64_to_f32_odd(double v) {
    float f = (float)v;
    if (isnan(v) || (double)f == v) return f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (fabs((double)f) > fabs(v)) u--; /* rounded away from zero: step back */
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}

/* int64 -> double rounded to odd (53 bits), so a second rounding to a
 * narrower float is still correct. */
static inline double cdl_i64_to_f64_odd(int64_t v) {
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int shift = 0;
    while ((m >> shift) >= ((uint64_t)1 << 53)) shift++;
    uint64_t kept = m >> shift;
    if (shift && (m & (((uint64_t)1 << shift) - 1))) kept |= 1u;
    double d = ldexp((double)kept, shift);
    return v < 0 ? -d : d;
}

static inline void cdl_store_f64(candle_dtype t, void *p, double v) {
    switch (t) {
    case CANDLE_DTYPE_F32: *(float *)p = (float)v; break;
    case CANDLE_DTYPE_F16: *(uint16_t *)p = candle_f32_to_f16(cdl_f64_to_f32_odd(v)); break;
    case CANDLE_DTYPE_BF16: *(uint16_t *)p = candle_f32_to_bf16(cdl_f64_to_f32_odd(v)); break;
    case CANDLE_DTYPE_I8: *(int8_t *)p = (int8_t)cdl_sat_i64(v, -128.0, 127.0); break;
    case CANDLE_DTYPE_I32:
        *(int32_t *)p = (int32_t)cdl_sat_i64(v, -2147483648.0, 2147483647.0);
        break;
    case CANDLE_DTYPE_I64: *(int64_t *)p = cdl_f64_to_i64(v); break;
    case CANDLE_DTYPE_U8: *(uint8_t *)p = (uint8_t)cdl_sat_i64(v, 0.0, 255.0); break;
    case CANDLE_DTYPE_BOOL: *(uint8_t *)p = v != 0.0; break;
    default: break;
    }
}

static inline void cdl_store_i64(candle_dtype t, void *p, int64_t v) {
    switch (t) {
    case CANDLE_DTYPE_I8: *(int8_t *)p = (int8_t)v; break;
    case CANDLE_DTYPE_I32: *(int32_t *)p = (int32_t)v; break;
    case CANDLE_DTYPE_I64: *(int64_t *)p = v; break;
    case CANDLE_DTYPE_U8: *(uint8_t *)p = (uint8_t)v; break;
    case CANDLE_DTYPE_BOOL: *(uint8_t *)p = v != 0; break;
    default: cdl_store_f64(t, p, cdl_i64_to_f64_odd(v)); break;
    }
}

#endif
