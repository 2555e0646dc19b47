/* Portable tile primitives of the blocked flash attention (contracts in
 * attention-impl.h): plain loops, the fallback where no SIMD table applies
 * and the baseline the AVX2 ones are tested against. */
#include <math.h>
#include <string.h>

#include "attention-impl.h"

static void pack_kt_scalar(candle_dtype t, const char *k, int64_t sk, int64_t nk, int64_t d, float *kt) {
    int64_t esz = t == CANDLE_DTYPE_F32 ? 4 : 2, nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t j = 0; j < nkp; j++) {
        float *panel = kt + (j / ATTN_NR) * d * ATTN_NR + j % ATTN_NR;
        for (int64_t p = 0; p < d; p++) panel[p * ATTN_NR] = j < nk ? cdl_load_f32(t, k + j * sk + p * esz) : 0.0f;
    }
}

static void scores_scalar(const float *q, int64_t lda, int64_t r, int64_t d, const float *kt, int64_t nk,
                          float *s, int64_t lds) {
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j0 = 0; j0 < nkp; j0 += ATTN_NR) {
            float acc[ATTN_NR] = {0};
            const float *panel = kt + (j0 / ATTN_NR) * d * ATTN_NR;
            for (int64_t p = 0; p < d; p++)
                for (int j = 0; j < ATTN_NR; j++) acc[j] += q[i * lda + p] * panel[p * ATTN_NR + j];
            memcpy(s + i * lds + j0, acc, sizeof acc);
        }
}

static void scores_rows_scalar(const float *q, int64_t lda, int64_t r, int64_t d, candle_dtype t, const char *k,
                               int64_t sk, int64_t nk, float *s, int64_t lds) {
    int64_t esz = t == CANDLE_DTYPE_F32 ? 4 : 2;
    for (int64_t j = 0; j < nk; j++)
        for (int64_t i = 0; i < r; i++) {
            float acc = 0;
            for (int64_t p = 0; p < d; p++) acc += q[i * lda + p] * cdl_load_f32(t, k + j * sk + p * esz);
            s[i * lds + j] = acc;
        }
}

static void accum_scalar(const float *p, int64_t ldp, int64_t r, const float *corr, const float *v, int64_t ldv,
                         int64_t nk, int64_t dv, float *o, int64_t ldo) {
    for (int64_t i = 0; i < r; i++) {
        float *oi = o + i * ldo;
        for (int64_t e = 0; e < dv; e++) oi[e] *= corr[i];
        for (int64_t j = 0; j < nk; j++) {
            float w = p[i * ldp + j];
            const float *vj = v + j * ldv;
            for (int64_t e = 0; e < dv; e++) oi[e] += w * vj[e];
        }
    }
}

static void softmax_scalar(float *s, int64_t lds, int64_t r, int64_t nk, float *m, float *l, float *corr) {
    for (int64_t i = 0; i < r; i++) {
        float *si = s + i * lds, mn = m[i];
        for (int64_t j = 0; j < nk; j++) mn = si[j] > mn ? si[j] : mn;
        if (mn == -INFINITY) {
            memset(si, 0, sizeof(float) * (size_t)nk);
            corr[i] = l[i] = 0.0f;
            continue;
        }
        float sum = 0;
        for (int64_t j = 0; j < nk; j++) sum += si[j] = exp2f(si[j] - mn);
        corr[i] = exp2f(m[i] - mn);
        l[i] = l[i] * corr[i] + sum;
        m[i] = mn;
    }
}

static float max_scalar(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

static void sub_scalar(float *x, int64_t n, float m) {
    for (int64_t j = 0; j < n; j++) x[j] -= m;
}

static float sum_scalar(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j];
    return s;
}

const cpu_attn_ops cpu_attn_scalar = {
    .name = "scalar",
    .pack_kt = pack_kt_scalar,
    .scores = scores_scalar,
    .scores_rows = scores_rows_scalar,
    .accum = accum_scalar,
    .softmax = softmax_scalar,
    .max = max_scalar,
    .sub = sub_scalar,
    .sum = sum_scalar,
};
