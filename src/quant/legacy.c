/* The 32-element block types (q4_0, q4_1, q5_0, q5_1, q8_0, q8_1) and
 * q4_z128 (four q4_0 nibble blocks under one scale and zero point): scalar
 * dequantize, round-to-nearest quantize and dot products.
 *
 * Dequantization and quantization follow the float32 operation order of the
 * gguf package (and so of ggml's reference), one rounding per operation, so
 * the bytes and floats match it exactly; tests/unit/test_quant.c checks that
 * against golden files. */
#include <math.h>
#include <string.h>

#include "quant-impl.h"

static inline float h2f(uint16_t h) { return quant_f16_to_f32(h); }
static inline uint16_t f2h(float f) { return candle_f32_to_f16(f); }

/* Nibble j of a 32-element block: low nibbles hold elements 0..15. */
static inline int nib(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

static inline uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void store_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Truncation to a code in [0, max], as the reference's trunc-then-clip for
 * finite values; NaN (from non-finite input) gives 0 instead of a UB cast. */
static inline int trunc_code(float v, int max) { return v >= 0 ? (v < (float)max ? (int)v : max) : 0; }

/* The signed value of largest magnitude (the first, on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* ---- q4_0 ---- */

void cdl_q4_0_to_f32(const void *src, float *dst, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        float d = h2f(b[i].d);
        for (int j = 0; j < QK4_0; j++) dst[j] = d * (float)(nib(b[i].qs, j) - 8);
    }
}

void cdl_q4_0_from_f32(const float *src, void *dst, int64_t n) {
    block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
        /* -8 maps the extreme value exactly; its opposite side loses one step */
        float d = signed_absmax(src, QK4_0) / -8;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < 16; j++) {
            float v0 = src[j] * id + 8.5f, v1 = src[j + 16] * id + 8.5f;
            int q0 = trunc_code(v0, 15), q1 = trunc_code(v1, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- q4_1 ---- */

void cdl_q4_1_to_f32(const void *src, float *dst, int64_t n) {
    const block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < QK4_1; j++) dst[j] = d * (float)nib(b[i].qs, j) + m;
    }
}

void cdl_q4_1_from_f32(const float *src, void *dst, int64_t n) {
    block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, src += QK4_1) {
        float mn, mx;
        min_max(src, QK4_1, &mn, &mx);
        float d = (mx - mn) / 15;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        b[i].m = f2h(mn);
        for (int j = 0; j < 16; j++) {
            float v0 = (src[j] - mn) * id + 0.5f, v1 = (src[j + 16] - mn) * id + 0.5f;
            int q0 = trunc_code(v0, 15), q1 = trunc_code(v1, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- q4_z128 ---- */

void cdl_q4_z128_to_f32(const void *src, float *dst, int64_t n) {
    const block_q4_z128 *b = src;
    for (int64_t i = 0; i < n / QK4_Z; i++) {
        float d = h2f(b[i].d);
        for (int s = 0; s < 4; s++, dst += 32)
            for (int j = 0; j < 32; j++) dst[j] = d * (float)(nib(b[i].qs + 16 * s, j) - b[i].z);
    }
}

/* Asymmetric round to nearest over the block's range widened to hold 0
 * (GPTQ's and AWQ's own quantizer): d = (max - min) / 15, z = round(-min / d). */
void cdl_q4_z128_from_f32(const float *src, void *dst, int64_t n) {
    block_q4_z128 *b = dst;
    for (int64_t i = 0; i < n / QK4_Z; i++, src += QK4_Z) {
        float mn, mx;
        min_max(src, QK4_Z, &mn, &mx);
        if (mn > 0) mn = 0;
        if (mx < 0) mx = 0;
        b[i].d = f2h((mx - mn) / 15);
        float d = h2f(b[i].d), id = d != 0 ? 1.0f / d : 0.0f;
        int z = d != 0 ? quant_nearest_int(-mn * id) : 0;
        z = z < 0 ? 0 : z > 15 ? 15 : z;
        b[i].z = (uint8_t)z;
        b[i].pad = 0;
        for (int s = 0; s < 4; s++)
            for (int j = 0; j < 16; j++) {
                int q0 = quant_nearest_int(src[32 * s + j] * id) + z, q1 = quant_nearest_int(src[32 * s + j + 16] * id) + z;
                q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
                q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
                b[i].qs[16 * s + j] = (uint8_t)(q0 | q1 << 4);
            }
    }
}

/* ---- q5_0 ---- */

static inline int q5_value(const uint8_t *qs, uint32_t qh, int j) {
    return nib(qs, j) | (int)(((qh >> j) & 1u) << 4);
}

/* Packs 32 five-bit codes: low nibbles as q4, fifth bits into qh. */
static void pack_q5(const int *q, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    for (int j = 0; j < 32; j++) h |= (uint32_t)((q[j] >> 4) & 1) << j;
    store_u32(qh, h);
}

void cdl_q5_0_to_f32(const void *src, float *dst, int64_t n) {
    const block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        float d = h2f(b[i].d);
        uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < QK5_0; j++) dst[j] = d * (float)(q5_value(b[i].qs, qh, j) - 16);
    }
}

void cdl_q5_0_from_f32(const float *src, void *dst, int64_t n) {
    block_q5_0 *b = dst;
    int q[QK5_0];
    for (int64_t i = 0; i < n / QK5_0; i++, src += QK5_0) {
        float d = signed_absmax(src, QK5_0) / -16;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < QK5_0; j++) {
            float v = src[j] * id + 16.5f;
            q[j] = trunc_code(v, 31);
        }
        pack_q5(q, b[i].qs, b[i].qh);
    }
}

/* ---- q5_1 ---- */

void cdl_q5_1_to_f32(const void *src, float *dst, int64_t n) {
    const block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        float d = h2f(b[i].d), m = h2f(b[i].m);
        uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < QK5_1; j++) dst[j] = d * (float)q5_value(b[i].qs, qh, j) + m;
    }
}

void cdl_q5_1_from_f32(const float *src, void *dst, int64_t n) {
    block_q5_1 *b = dst;
    int q[QK5_1];
    for (int64_t i = 0; i < n / QK5_1; i++, src += QK5_1) {
        float mn, mx;
        min_max(src, QK5_1, &mn, &mx);
        float d = (mx - mn) / 31;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        b[i].m = f2h(mn);
        for (int j = 0; j < QK5_1; j++) {
            float v = (src[j] - mn) * id + 0.5f;
            q[j] = trunc_code(v, 31);
        }
        pack_q5(q, b[i].qs, b[i].qh);
    }
}

/* ---- q8_0 / q8_1 ---- */

void cdl_q8_0_to_f32(const void *src, float *dst, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        float d = h2f(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

/* Scale so the largest magnitude maps to 127; codes round half away from 0.
 * Returns the float scale (before its f16 rounding) and the code sum. */
static float quantize_q8_32(const float *x, int8_t *qs, int *sum) {
    float amax = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    float d = amax / 127;
    float id = d != 0 ? 1.0f / d : 0.0f;
    int s = 0;
    for (int j = 0; j < 32; j++) {
        float r = roundf(x[j] * id);
        qs[j] = (int8_t)(r == r ? r : 0); /* NaN from non-finite input */
        s += qs[j];
    }
    *sum = s;
    return d;
}

void cdl_q8_0_from_f32(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) b[i].d = f2h(quantize_q8_32(src, b[i].qs, &sum));
}

void cdl_q8_1_to_f32(const void *src, float *dst, int64_t n) {
    const block_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK8_1; i++, dst += QK8_1) {
        float d = h2f(b[i].d);
        for (int j = 0; j < QK8_1; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void cdl_q8_1_from_f32(const float *src, void *dst, int64_t n) {
    block_q8_1 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++, src += QK8_1) {
        float d = quantize_q8_32(src, b[i].qs, &sum);
        b[i].d = f2h(d);
        b[i].s = f2h((float)sum * d);
    }
}

/* ---- dot products ---- */

/* The 32 codes of a 4-bit block minus bias, in element order. */
static void unpack4(const uint8_t *qs, int bias, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0xF) - bias);
        q[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
}

/* The 32 codes of a 5-bit block minus bias. */
static void unpack5(const uint8_t *qs, const uint8_t *qh, int bias, int8_t *q) {
    uint32_t h = load_u32(qh);
    unpack4(qs, bias, q);
    for (int j = 0; j < 32; j++) q[j] = (int8_t)(q[j] + (int)(((h >> j) & 1u) << 4));
}

static inline int dot32(const int8_t *a, const int8_t *b) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += a[j] * b[j];
    return s;
}

void cdl_vec_dot_q4_0_q8_0(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8_t q[32];
        unpack4(x[i].qs, 8, q);
        acc += (float)dot32(q, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *out = acc;
}

void cdl_vec_dot_q4_1_q8_1(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int8_t q[32];
        unpack4(x[i].qs, 0, q);
        acc += (float)dot32(q, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d)) + h2f(x[i].m) * h2f(y[i].s);
    }
    *out = acc;
}

void cdl_vec_dot_q5_0_q8_0(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8_t q[32];
        unpack5(x[i].qs, x[i].qh, 16, q);
        acc += (float)dot32(q, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *out = acc;
}

void cdl_vec_dot_q5_1_q8_1(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int8_t q[32];
        unpack5(x[i].qs, x[i].qh, 0, q);
        acc += (float)dot32(q, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d)) + h2f(x[i].m) * h2f(y[i].s);
    }
    *out = acc;
}

void cdl_vec_dot_q8_0_q8_0(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        acc += (float)dot32(x[i].qs, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *out = acc;
}

void cdl_vec_dot_q8_1_q8_1(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_1 *x = vx;
    const block_q8_1 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        acc += (float)dot32(x[i].qs, y[i].qs) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *out = acc;
}

/* Per 32-element sub-block the exact integer sum of (q - z) * y, then
 * d * dy times it. */
void cdl_vec_dot_q4_z128_q8_0(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_z128 *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK4_Z; i++) {
        float d = h2f(x[i].d);
        for (int s = 0; s < 4; s++) {
            int8_t q[32];
            unpack4(x[i].qs + 16 * s, x[i].z, q);
            acc += (float)dot32(q, y[4 * i + s].qs) * (d * h2f(y[4 * i + s].d));
        }
    }
    *out = acc;
}
