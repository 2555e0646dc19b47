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

/* q2_K and q3_K low bits: byte 32h + l holds elements 128h + 32k + l at shift 2k. */
static void q2_codes(const uint8_t *qs, uint8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * k + l] = (qs[32 * h + l] >> (2 * k)) & 3;
}

/* q3_K: the low bits, 4 lower where the hmask bit is clear: -4..3. */
static void q3k_codes(const block_q3_K *b, int8_t *q) {
    uint8_t low[QK_K];
    q2_codes(b->qs, low);
    for (int e = 0; e < QK_K; e++) q[e] = (int8_t)(low[e] - (((b->hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
}

/* q4_K/q5_K nibbles: byte 32c + l holds element 64c + l (low) and 64c + 32 + l (high). */
static void q4k_codes(const uint8_t *qs, uint8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 0xF;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
}

/* q5_K: nibble plus the fifth bit, bit e/32 of qh[e % 32]: 0..31. */
static void q5k_codes(const block_q5_K *b, uint8_t *q) {
    q4k_codes(b->qs, q);
    for (int e = 0; e < QK_K; e++) q[e] |= (uint8_t)(((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}

/* q6_K: element 128h + 32k + l has its low 4 bits in ql[64h + 32(k&1) + l]
 * (low nibble for k < 2) and its high 2 bits in qh[32h + l] at shift 2k: -32..31. */
static void q6k_codes(const block_q6_K *b, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                uint8_t lo = b->ql[64 * h + 32 * (k & 1) + l];
                int low = k < 2 ? lo & 0xF : lo >> 4;
                int high = (b->qh[32 * h + l] >> (2 * k)) & 3;
                q[128 * h + 32 * k + l] = (int8_t)((low | (high << 4)) - 32);
            }
}

/* Integer dot of n codes with q8 values. */
static inline int dot_u8(const uint8_t *q, const int8_t *y, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += q[i] * y[i];
    return s;
}
static inline int dot_i8(const int8_t *q, const int8_t *y, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += q[i] * y[i];
    return s;
}

/* ---- to_f32 ---- */

void cdl_q2_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t q[QK_K];
        q2_codes(b[i].qs, q);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)(b[i].scales[s] & 0xF), ml = dmin * (float)(b[i].scales[s] >> 4);
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q[e] - ml;
        }
    }
}

void cdl_q3_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d);
        int8_t q[QK_K];
        q3k_codes(&b[i], q);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)quant_q3k_scale(s, b[i].scales);
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q[e];
        }
    }
}

void cdl_q4_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q4_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t q[QK_K];
        q4k_codes(b[i].qs, q);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, b[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q[e] - ml;
        }
    }
}

void cdl_q5_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q5_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t q[QK_K];
        q5k_codes(&b[i], q);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, b[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * s; e < 32 * s + 32; e++) dst[e] = dl * (float)q[e] - ml;
        }
    }
}

void cdl_q6_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = h2f(b[i].d);
        int8_t q[QK_K];
        q6k_codes(&b[i], q);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)b[i].scales[s];
            for (int e = 16 * s; e < 16 * s + 16; e++) dst[e] = dl * (float)q[e];
        }
    }
}

void cdl_q8_k_to_f32(const void *src, float *dst, int64_t n) {
    const block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int e = 0; e < QK_K; e++) dst[e] = b[i].d * (float)b[i].qs[e];
}

/* ---- dots with q8_K ---- */

void cdl_vec_dot_q2_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        uint8_t q[QK_K];
        q2_codes(x[i].qs, q);
        for (int s = 0; s < 16; s++) {
            sum_q += dot_u8(q + 16 * s, y[i].qs + 16 * s, 16) * (x[i].scales[s] & 0xF);
            sum_m += y[i].bsums[s] * (x[i].scales[s] >> 4);
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void cdl_vec_dot_q3_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        int8_t q[QK_K];
        q3k_codes(&x[i], q);
        for (int s = 0; s < 16; s++) sum += dot_i8(q + 16 * s, y[i].qs + 16 * s, 16) * quant_q3k_scale(s, x[i].scales);
        acc += y[i].d * h2f(x[i].d) * (float)sum;
    }
    *out = acc;
}

void cdl_vec_dot_q4_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        uint8_t q[QK_K];
        q4k_codes(x[i].qs, q);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, x[i].scales, &sc, &m);
            sum_q += dot_u8(q + 32 * s, y[i].qs + 32 * s, 32) * sc;
            sum_m += (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]) * m;
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void cdl_vec_dot_q5_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        uint8_t q[QK_K];
        q5k_codes(&x[i], q);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            quant_k4_scale_min(s, x[i].scales, &sc, &m);
            sum_q += dot_u8(q + 32 * s, y[i].qs + 32 * s, 32) * sc;
            sum_m += (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]) * m;
        }
        acc += y[i].d * (h2f(x[i].d) * (float)sum_q - h2f(x[i].dmin) * (float)sum_m);
    }
    *out = acc;
}

void cdl_vec_dot_q6_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        int8_t q[QK_K];
        q6k_codes(&x[i], q);
        for (int s = 0; s < 16; s++) sum += dot_i8(q + 16 * s, y[i].qs + 16 * s, 16) * x[i].scales[s];
        acc += y[i].d * h2f(x[i].d) * (float)sum;
    }
    *out = acc;
}

void cdl_vec_dot_q8_k_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        acc += x[i].d * y[i].d * (float)dot_i8(x[i].qs, y[i].qs, QK_K);
    }
    *out = acc;
}
