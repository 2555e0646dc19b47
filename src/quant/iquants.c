/* iq4_nl and iq4_xs: 4-bit indices into a fixed non-linear codebook (denser
 * near zero, where weights cluster). iq4_nl has one f16 scale per 32
 * elements; iq4_xs has 6-bit scales per 32 under an f16 scale per 256.
 *
 * The quantizer picks each scale by trying candidates around
 * max / codebook[0], assigning nearest codebook entries and refitting the
 * scale by least squares weighted with x^2, as ggml's reference does without
 * an importance matrix; the codes are then reassigned under the scale as
 * stored (f16, and for iq4_xs the 6-bit sub-scale). */
#include <math.h>
#include <string.h>

#include "quant-impl.h"

const int8_t cdl_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

static inline float h2f(uint16_t h) { return quant_f16_to_f32(h); }
static inline int nib(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

/* Index of the codebook entry nearest to v (the lower one on ties). */
static int nearest_code(float v) {
    if (v <= cdl_iq4nl_values[0]) return 0;
    if (v >= cdl_iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < cdl_iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    return v - cdl_iq4nl_values[lo] <= cdl_iq4nl_values[hi] - v ? lo : hi;
}

/* Assigns the nearest codes under inverse scale id; returns the weighted
 * sums that give the least-squares scale sum_qx / sum_q2. */
static void fit_iq4(const float *x, float id, uint8_t *L, float *sum_qx, float *sum_q2) {
    float qx = 0, q2 = 0;
    for (int j = 0; j < 32; j++) {
        L[j] = (uint8_t)nearest_code(id * x[j]);
        float q = cdl_iq4nl_values[L[j]], w = x[j] * x[j];
        qx += w * q * x[j];
        q2 += w * q * q;
    }
    *sum_qx = qx;
    *sum_q2 = q2;
}

/* Best scale for 32 values; fills the indices L. Tries the largest value on
 * the top entry of the codebook, then on the bottom entry with the inverse
 * scale stepped by whole codebook units (k = -7..7), keeping the best fit.
 * Returns 0 for an all-zero group. */
static float search_iq4(const float *x, uint8_t *L) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 8, 32); /* codebook[8] = 1, times scale 0 */
        return 0;
    }
    float best = -1, scale = 0, qx, q2;
    uint8_t aux[32];
    memset(L, 8, 32); /* kept if no candidate fits (non-finite input) */
    for (int k = -8; k <= 7; k++) {
        float id = k < -7 ? -(float)cdl_iq4nl_values[0] / max : ((float)cdl_iq4nl_values[0] + (float)k) / max;
        fit_iq4(x, id, aux, &qx, &q2);
        if (q2 > 0 && (best < 0 || qx * qx > best * q2)) {
            scale = qx / q2;
            best = scale * qx;
            memcpy(L, aux, 32);
        }
    }
    return scale;
}

static void pack_nibbles(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

/* Recomputes the indices against the scale actually stored. */
static void requantize(const float *x, float d, uint8_t *L) {
    if (d == 0) return;
    float id = 1 / d;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_code(id * x[j]);
}

/* ---- iq4_nl ---- */

void cdl_iq4_nl_to_f32(const void *src, float *dst, int64_t n) {
    const block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / QK4_NL; i++, dst += QK4_NL) {
        float d = h2f(b[i].d);
        for (int j = 0; j < QK4_NL; j++) dst[j] = d * (float)cdl_iq4nl_values[nib(b[i].qs, j)];
    }
}

void cdl_iq4_nl_from_f32(const float *src, void *dst, int64_t n) {
    block_iq4_nl *b = dst;
    uint8_t L[32];
    for (int64_t i = 0; i < n / QK4_NL; i++, src += QK4_NL) {
        b[i].d = candle_f32_to_f16(search_iq4(src, L));
        requantize(src, h2f(b[i].d), L);
        pack_nibbles(L, b[i].qs);
    }
}

void cdl_vec_dot_iq4_nl_q8_0(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += cdl_iq4nl_values[nib(x[i].qs, j)] * y[i].qs[j];
        acc += (float)s * (h2f(x[i].d) * h2f(y[i].d));
    }
    *out = acc;
}

/* ---- iq4_xs ---- */

static inline int iq4xs_scale(const block_iq4_xs *b, int ib) {
    int lo = (b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    int hi = (b->scales_h >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

void cdl_iq4_xs_to_f32(const void *src, float *dst, int64_t n) {
    const block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = h2f(b[i].d);
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            float dl = d * (float)iq4xs_scale(&b[i], ib);
            const uint8_t *qs = b[i].qs + 16 * ib;
            for (int j = 0; j < 32; j++) dst[j] = dl * (float)cdl_iq4nl_values[nib(qs, j)];
        }
    }
}

void cdl_iq4_xs_from_f32(const float *src, void *dst, int64_t n) {
    block_iq4_xs *b = dst;
    uint8_t L[QK_K];
    float scales[8];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0, max_scale = 0;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = search_iq4(src + 32 * ib, L + 32 * ib);
            if (fabsf(scales[ib]) > amax) {
                amax = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        /* -32 maps the largest scale exactly; codebook sign flips cover the rest */
        float d = max_scale / -32, id = d != 0 ? 1 / d : 0;
        b[i].d = candle_f32_to_f16(d);
        d = h2f(b[i].d);
        for (int ib = 0; ib < 8; ib++) {
            int l = d != 0 ? quant_nearest_int(id * scales[ib]) : 0;
            l = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
            b[i].scales_l[ib / 2] |= (uint8_t)((l & 0xF) << (4 * (ib % 2)));
            b[i].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
            requantize(src + 32 * ib, d * (float)(l - 32), L + 32 * ib);
            pack_nibbles(L + 32 * ib, b[i].qs + 16 * ib);
        }
    }
}

void cdl_vec_dot_iq4_xs_q8_k(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    float acc = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            int p = 0;
            for (int j = 0; j < 32; j++) p += cdl_iq4nl_values[nib(qs, j)] * q8[j];
            sum += p * iq4xs_scale(&x[i], ib);
        }
        acc += y[i].d * h2f(x[i].d) * (float)sum;
    }
    *out = acc;
}
