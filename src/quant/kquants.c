/* The 256-element "K" block types: scalar dequantize and dot products with
 * q8_K activations. Quantizers are in kquants_quantize.c.
 *
 * Dequantization multiplies in the gguf package's order, (d * scale) * q
 * - (dmin * min), so the floats match it exactly. The dots sum integer
 * products per sub-block and fold the minimums in through q8_K's bsums. */
#include <string.h>

#include "quant-impl.h"

static inline float h2f(uint16_t h) { return quant_f16_to_f32(h); }

/* ---- unpacking one block to integer codes (shared by to_f32 and the dots) ---- */

/* q2_K and q3_K low bits: element e sits in byte (e/128)*32 + e%32 at shift 2*((e%128)/32). */
static inline int q2_bits(const uint8_t *qs, int e) {
    return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* q4_K/q5_K low nibble: byte (e/64)*32 + e%32, high nibble for the second 32 of each 64. */
static inline int q4k_nib(const uint8_t *qs, int e) {
    uint8_t b = qs[(e / 64) * 32 + e % 32];
    return (e % 64) < 32 ? b & 0xF : b >> 4;
}

/* q6_K code (0..63) of element e. */
static inline int q6k_code(const block_q6_K *b, int e) {
    int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
    uint8_t lo = b->ql[h * 64 + (k & 1) * 32 + l];
    int low = k < 2 ? lo & 0xF : lo >> 4;
    int high = (b->qh[h * 32 + l] >> (2 * k)) & 3;
    return low | (high << 4);
}

static inline int q3k_code(const block_q3_K *b, int e) {
    int high = (b->hmask[e % 32] >> (e / 32)) & 1;
    return q2_bits(b->qs, e) - (high ? 0 : 4);
}

static inline int q5k_code(const block_q5_K *b, int e) {
    return q4k_nib(b->qs, e) | (((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}

/* ---- to_f32 ---- */

void candle_q2_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)(b[i].scales[s] & 0xF), ml = dmin * (float)(b[i].scales[s] >> 4);
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q2_bits(b[i].qs, e) - ml;
        }
    }
}

void candle_q3_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)quant_q3k_scale(s, b[i].scales);
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q3k_code(&b[i], e);
        }
    }
}

void candle_q4_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q4_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, b[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q4k_nib(b[i].qs, e) - ml;
        }
    }
}

void candle_q5_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q5_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, b[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q5k_code(&b[i], e) - ml;
        }
    }
}

void candle_q6_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)b[i].scales[s];
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)(q6k_code(&b[i], e) - 32);
        }
    }
}

void candle_q8_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int e = 0; e < QK_K; e++) dst[e] = b[i].d * (float)b[i].qs[e];
}

/* ---- dots with q8_K ---- */

void candle_vec_dot_q2_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        for (int s = 0; s < 16; s++) {
            int p = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) p += q2_bits(x[i].qs, e) * y[i].qs[e];
            sum_q += p * (x[i].scales[s] & 0xF);
            sum_m += y[i].bsums[s] * (x[i].scales[s] >> 4);
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void candle_vec_dot_q3_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        for (int s = 0; s < 16; s++) {
            int p = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) p += q3k_code(&x[i], e) * y[i].qs[e];
            sum += p * quant_q3k_scale(s, x[i].scales);
        }
        acc += y[i].d * h2f(x[i].d) * (float)sum;
    }
    *out = acc;
}

void candle_vec_dot_q4_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, x[i].scales, &sc, &m);
            int p = 0;
            for (int e = 32 * s; e < 32 * s + 32; e++) p += q4k_nib(x[i].qs, e) * y[i].qs[e];
            sum_q += p * sc;
            sum_m += (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]) * m;
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void candle_vec_dot_q5_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, x[i].scales, &sc, &m);
            int p = 0;
            for (int e = 32 * s; e < 32 * s + 32; e++) p += q5k_code(&x[i], e) * y[i].qs[e];
            sum_q += p * sc;
            sum_m += (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]) * m;
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void candle_vec_dot_q6_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        for (int s = 0; s < 16; s++) {
            int p = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) p += (q6k_code(&x[i], e) - 32) * y[i].qs[e];
            sum += p * x[i].scales[s];
        }
        acc += y[i].d * h2f(x[i].d) * (float)sum;
    }
    *out = acc;
}

void candle_vec_dot_q8_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        for (int e = 0; e < QK_K; e++) sum += x[i].qs[e] * y[i].qs[e];
        acc += x[i].d * y[i].d * (float)sum;
    }
    *out = acc;
}
