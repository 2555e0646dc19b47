/* Quantizers of the K block types. Each sub-block gets a scale (and for the
 * asymmetric types a minimum) from a small least-squares search over
 * candidate scales, as in ggml's reference quantizers; the sub-block scales
 * are then quantized to 4/6/8 bits against one f16 super-scale, and the codes
 * are recomputed with the scales actually stored, so rounding of the scales
 * is not paid twice. */
#include <math.h>
#include <string.h>

#include "quant-impl.h"

/* Below this magnitude a group is treated as all zeros. */
#define GROUP_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Asymmetric search: codes L in [0, nmax] with x ~ scale * L - min.
 * Starts from the min/max fit, then tries iscale = (nmax + rmin + k*rdelta) /
 * (max - min) for k = 0..nstep, refitting scale and min by weighted least
 * squares for each set of codes and keeping the lowest weighted error. The
 * minimum is clamped so that it never adds (min <= 0 in x ~ scale*L + min).
 * Returns the scale; *neg_min is the (non-negative) amount subtracted. */
static float search_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                              float *neg_min, float rmin, float rdelta, int nstep, int use_abs) {
    uint8_t aux[32];
    float mn = x[0], mx = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        memset(L, 0, (size_t)n);
        *neg_min = -mn;
        return 0;
    }
    float iscale = (float)nmax / (mx - mn), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(quant_nearest_int(iscale * (x[i] - mn)), 0, nmax);
        float diff = scale * L[i] + mn - x[i];
        best += w[i] * (use_abs ? fabsf(diff) : diff * diff);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (mx - mn);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(quant_nearest_int(iscale * (x[i] - mn)), 0, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det <= 0) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * aux[i] + m - x[i];
            err += w[i] * (use_abs ? fabsf(diff) : diff * diff);
        }
        if (err < best) {
            memcpy(L, aux, (size_t)n);
            best = err;
            scale = s;
            mn = m;
        }
    }
    *neg_min = -mn;
    return scale;
}

/* Symmetric search: codes L in [0, 2*nmax) meaning L - nmax, x ~ scale*(L - nmax),
 * weights x^2. Without refine (q6_K) it tries iscale = -(nmax + 0.1k)/max for
 * k = -9..9 and keeps the least-squares scale with the best fit. With refine
 * (q3_K) it starts from k = 0 only and improves the codes one at a time
 * (coordinate descent), as ggml's references do: on the unweighted error
 * that measures a quantizer, these choices are the better ones per type.
 * Maximising sum_lx^2 / sum_l2 is minimising the weighted squared error. */
static float search_scale_sym(int n, int nmax, const float *x, int8_t *L, int refine) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n); /* any code: the scale is 0 (0 as ggml, for equal bytes) */
        return 0;
    }
    float best = -1, best_lx = 0, best_l2 = 0;
    /* k = 0 (the extreme value on the end code) first: it wins ties */
    for (int t = 0; t <= (refine ? 0 : 18); t++) {
        int k = t == 0 ? 0 : t <= 9 ? t - 10 : t - 9;
        float iscale = -((float)nmax + 0.1f * (float)k) / max;
        float sum_lx = 0, sum_l2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sum_lx += w * x[i] * (float)l;
            sum_l2 += w * (float)l * (float)l;
        }
        if (sum_l2 > 0 && (best < 0 || sum_lx * sum_lx > best * sum_l2)) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            best = sum_lx / sum_l2 * sum_lx;
            best_lx = sum_lx;
            best_l2 = sum_l2;
        }
    }
    if (best < 0) { /* no usable candidate (non-finite input): codes must still be set */
        memset(L, 0, (size_t)n);
        return 0;
    }
    for (int pass = 0; refine && pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            int l = L[i] - nmax;
            float lx = best_lx - w * x[i] * (float)l, l2 = best_l2 - w * (float)l * (float)l;
            if (lx <= 0) continue;
            /* the best code for x[i] under the scale fitted to the others */
            int nl = clampi(quant_nearest_int(x[i] * l2 / lx), -nmax, nmax - 1);
            if (nl == l) continue;
            lx += w * x[i] * (float)nl;
            l2 += w * (float)nl * (float)nl;
            if (l2 > 0 && lx * lx * best_l2 > best_lx * best_lx * l2) {
                L[i] = (int8_t)(nl + nmax);
                best_lx = lx;
                best_l2 = l2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return best_lx / best_l2;
}

/* Packs 2-bit codes as q2_K/q3_K store them. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
}

/* ---- q2_K ---- */

void cdl_q2_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q2_K *b = dst;
    uint8_t L[QK_K];
    float w[16], scales[16], mins[16];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int s = 0; s < 16; s++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(src[16 * s + l]);
            scales[s] = search_scale_min(16, 3, src + 16 * s, w, L + 16 * s, &mins[s], -0.5f, 0.1f, 15, 1);
            /* comparisons, not fmaxf: a -0 minimum must not reach dmin */
            if (scales[s] > max_scale) max_scale = scales[s];
            if (mins[s] > max_min) max_min = mins[s];
        }
        float is = max_scale > 0 ? 15 / max_scale : 0, im = max_min > 0 ? 15 / max_min : 0;
        for (int s = 0; s < 16; s++) {
            int ls = clampi(quant_nearest_int(is * scales[s]), 0, 15);
            int lm = clampi(quant_nearest_int(im * mins[s]), 0, 15);
            b[i].scales[s] = (uint8_t)(ls | (lm << 4));
        }
        b[i].d = candle_f32_to_f16(max_scale / 15);
        b[i].dmin = candle_f32_to_f16(max_min / 15);
        float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)(b[i].scales[s] & 0xF), ml = dmin * (float)(b[i].scales[s] >> 4);
            if (dl == 0) continue;
            for (int l = 16 * s; l < 16 * s + 16; l++)
                L[l] = (uint8_t)clampi(quant_nearest_int((src[l] + ml) / dl), 0, 3);
        }
        pack_2bit(L, b[i].qs);
    }
}

/* ---- q3_K ---- */

void cdl_q3_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q3_K *b = dst;
    int8_t L[QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0, max_scale = 0;
        for (int s = 0; s < 16; s++) {
            scales[s] = search_scale_sym(16, 4, src + 16 * s, L + 16 * s, 1);
            if (fabsf(scales[s]) > amax) {
                amax = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        b[i].d = 0;
        if (max_scale != 0) {
            float iscale = -32 / max_scale;
            for (int s = 0; s < 16; s++) {
                int l = clampi(quant_nearest_int(iscale * scales[s]), -32, 31) + 32;
                if (s < 8) b[i].scales[s] = (uint8_t)(l & 0xF);
                else b[i].scales[s - 8] |= (uint8_t)((l & 0xF) << 4);
                b[i].scales[8 + s % 4] |= (uint8_t)((l >> 4) << (2 * (s / 4)));
            }
            b[i].d = candle_f32_to_f16(1 / iscale);
        }
        float d = quant_f16_to_f32(b[i].d);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)quant_q3k_scale(s, b[i].scales);
            if (dl == 0) continue;
            for (int l = 16 * s; l < 16 * s + 16; l++)
                L[l] = (int8_t)(clampi(quant_nearest_int(src[l] / dl), -4, 3) + 4);
        }
        uint8_t low[QK_K];
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK_K; e++) {
            int l = L[e];
            if (l > 3) {
                b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                l -= 4;
            }
            low[e] = (uint8_t)l;
        }
        pack_2bit(low, b[i].qs);
    }
}

/* ---- q4_K / q5_K ---- */

static void pack_k4_scales(const uint8_t *ls, const uint8_t *lm, uint8_t *q) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = ls[j];
            q[j + 4] = lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Shared by q4_K (nmax 15) and q5_K (nmax 31): fills d, dmin, scales and
 * the codes L (0..nmax) of one 256-element block. */
static void quantize_k4_block(const float *x, int nmax, uint16_t *d16, uint16_t *dmin16,
                              uint8_t *packed, uint8_t *L) {
    float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
    float rmin = nmax == 15 ? -1.0f : -0.5f;
    int nstep = nmax == 15 ? 20 : 15;
    for (int s = 0; s < 8; s++) {
        const float *xs = x + 32 * s;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[s] = search_scale_min(32, nmax, xs, w, L + 32 * s, &mins[s], rmin, 0.1f, nstep, 0);
        if (scales[s] > max_scale) max_scale = scales[s];
        if (mins[s] > max_min) max_min = mins[s];
    }
    float is = max_scale > 0 ? 63 / max_scale : 0, im = max_min > 0 ? 63 / max_min : 0;
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        ls[s] = (uint8_t)clampi(quant_nearest_int(is * scales[s]), 0, 63);
        lm[s] = (uint8_t)clampi(quant_nearest_int(im * mins[s]), 0, 63);
    }
    memset(packed, 0, K_SCALE_SIZE);
    pack_k4_scales(ls, lm, packed);
    *d16 = candle_f32_to_f16(max_scale / 63);
    *dmin16 = candle_f32_to_f16(max_min / 63);
    float d = quant_f16_to_f32(*d16), dmin = quant_f16_to_f32(*dmin16);
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        quant_k4_scale_min(s, packed, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        if (dl == 0) continue;
        for (int l = 32 * s; l < 32 * s + 32; l++)
            L[l] = (uint8_t)clampi(quant_nearest_int((x[l] + ml) / dl), 0, nmax);
    }
}

void cdl_q4_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q4_K *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        quantize_k4_block(src, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void cdl_q5_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q5_K *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        quantize_k4_block(src, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK_K; e++)
            if (L[e] > 15) b[i].qh[e % 32] |= (uint8_t)(1u << (e / 32));
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
    }
}

/* ---- q6_K ---- */

void cdl_q6_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q6_K *b = dst;
    int8_t L[QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0, max_scale = 0;
        for (int s = 0; s < 16; s++) {
            scales[s] = search_scale_sym(16, 32, src + 16 * s, L + 16 * s, 0);
            if (fabsf(scales[s]) > amax) {
                amax = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }
        if (amax < GROUP_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float iscale = -128 / max_scale;
        b[i].d = candle_f32_to_f16(1 / iscale);
        for (int s = 0; s < 16; s++) b[i].scales[s] = (int8_t)clampi(quant_nearest_int(iscale * scales[s]), -128, 127);
        float d = quant_f16_to_f32(b[i].d);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)b[i].scales[s];
            if (dl == 0) continue;
            for (int l = 16 * s; l < 16 * s + 16; l++)
                L[l] = (int8_t)(clampi(quant_nearest_int(src[l] / dl), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *p = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                b[i].ql[64 * h + l] = (uint8_t)((p[l] & 0xF) | ((p[l + 64] & 0xF) << 4));
                b[i].ql[64 * h + 32 + l] = (uint8_t)((p[l + 32] & 0xF) | ((p[l + 96] & 0xF) << 4));
                b[i].qh[32 * h + l] = (uint8_t)((p[l] >> 4) | ((p[l + 32] >> 4) << 2) |
                                                ((p[l + 64] >> 4) << 4) | ((p[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---- q8_K (activations) ---- */

void cdl_q8_k_from_f32(const float *src, void *dst, int64_t n) {
    block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0, max = 0;
        for (int e = 0; e < QK_K; e++) {
            if (fabsf(src[e]) > amax) {
                amax = fabsf(src[e]);
                max = src[e];
            }
        }
        if (amax == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float iscale = -127 / max;
        for (int e = 0; e < QK_K; e++) b[i].qs[e] = (int8_t)clampi(quant_nearest_int(iscale * src[e]), -127, 127);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) s += b[i].qs[e];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1 / iscale;
    }
}
