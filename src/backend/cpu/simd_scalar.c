/* The portable fast-path primitives: plain C loops in f32 that any compiler
 * can auto-vectorise. Every SIMD table implements the same contracts, and
 * this one is what runs where no SIMD table applies. */
#include <math.h>
#include <string.h>

#include "cpu-impl.h"
#include "simd-impl.h"

static void gemm_ukr_scalar(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                            int mr, int nr, bool accumulate) {
    float acc[CPU_GEMM_MR][CPU_GEMM_NR] = {{0}};
    for (int64_t p = 0; p < k; p++) {
        const float *ap = a + p * CPU_GEMM_MR, *bp = b + p * CPU_GEMM_NR;
        for (int i = 0; i < CPU_GEMM_MR; i++)
            for (int j = 0; j < CPU_GEMM_NR; j++) acc[i][j] += ap[i] * bp[j];
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

static void to_f32_scalar(candle_dtype t, const void *src, float *dst, int64_t n) {
    if (t == CANDLE_DTYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
        return;
    }
    size_t esz = 2;
    for (int64_t i = 0; i < n; i++) dst[i] = cdl_load_f32(t, (const char *)src + (size_t)i * esz);
}

static void gemm_dot_scalar(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw,
                            candle_dtype wt, float *c, int64_t ldc, int mr, int nr, bool accumulate) {
    size_t esz = wt == CANDLE_DTYPE_F32 ? 4 : 2;
    for (int j = 0; j < nr; j++)
        for (int i = 0; i < mr; i++) {
            float acc = 0;
            for (int64_t p = 0; p < k; p++) acc += a[i * lda + p] * cdl_load_f32(wt, w + j * ldw + (size_t)p * esz);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc : acc;
        }
}

static void dot_rows_scalar(candle_dtype wt, int64_t k, const void *w, size_t w_stride,
                            int64_t n_rows, const float *x, float *out, int64_t out_stride) {
    size_t esz = wt == CANDLE_DTYPE_F32 ? 4 : 2;
    for (int64_t r = 0; r < n_rows; r++) {
        const char *row = (const char *)w + (size_t)r * w_stride;
        float acc[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= k; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += cdl_load_f32(wt, row + (size_t)(i + l) * esz) * x[i + l];
        for (; i < k; i++) acc[0] += cdl_load_f32(wt, row + (size_t)i * esz) * x[i];
        out[r * out_stride] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

void cpu_pack_b_generic(candle_dtype bt, const char *src, int64_t sk, int64_t sn, int64_t kc,
                        int nr, float *dst) {
    for (int64_t p = 0; p < kc; p++) {
        float *d = dst + p * CPU_GEMM_NR;
        const char *s = src + p * sk;
        int j = 0;
        if (bt == CANDLE_DTYPE_F32 && sn == 4) {
            memcpy(d, s, sizeof(float) * (size_t)nr);
            j = nr;
        }
        for (; j < nr; j++) d[j] = cdl_load_f32(bt, s + j * sn);
        for (; j < CPU_GEMM_NR; j++) d[j] = 0.0f;
    }
}

/* erfc form: 1 + erf(z) would cancel to 0 in gelu's negative tail */
static float gelu_erf_f(float x) { return 0.5f * x * erfcf(-x * 0.70710678118654752f); }
/* 0.5 x (1 + tanh u) = x sigmoid(2u), which keeps the negative tail */
static float gelu_tanh_f(float x) {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

float cpu_unary1(candle_op op, float x, const double *p) {
    switch (op) {
    case CANDLE_OP_NEG: return -x;
    case CANDLE_OP_ABS: return fabsf(x);
    case CANDLE_OP_EXP: return expf(x);
    case CANDLE_OP_LOG: return logf(x);
    case CANDLE_OP_SQRT: return sqrtf(x);
    case CANDLE_OP_RSQRT: return 1.0f / sqrtf(x);
    case CANDLE_OP_SIN: return sinf(x);
    case CANDLE_OP_COS: return cosf(x);
    case CANDLE_OP_TANH: return tanhf(x);
    case CANDLE_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CANDLE_OP_RELU: return x > 0 ? x : 0.0f;
    case CANDLE_OP_SILU: return x / (1.0f + expf(-x));
    case CANDLE_OP_GELU_ERF: return gelu_erf_f(x);
    case CANDLE_OP_GELU_TANH: return gelu_tanh_f(x);
    case CANDLE_OP_AFFINE: return (float)(x * p[0] + p[1]);
    case CANDLE_OP_CLAMP: return x < p[0] ? (float)p[0] : (x > p[1] ? (float)p[1] : x);
    default: return NAN;
    }
}

static void unary_scalar(candle_op op, const float *x, float *y, int64_t n, const double *p) {
    for (int64_t i = 0; i < n; i++) y[i] = cpu_unary1(op, x[i], p);
}

float cpu_binary1(candle_op op, float a, float b) {
    switch (op) {
    case CANDLE_OP_ADD: return a + b;
    case CANDLE_OP_SUB: return a - b;
    case CANDLE_OP_MUL: return a * b;
    case CANDLE_OP_DIV: return a / b;
    case CANDLE_OP_MAXIMUM: return (a > b || isnan(a)) ? a : b;
    case CANDLE_OP_MINIMUM: return (a < b || isnan(a)) ? a : b;
    case CANDLE_OP_POW: return powf(a, b);
    default: return NAN;
    }
}

static void binary_scalar(candle_op op, const float *a, const float *b, int64_t b_step, float *y,
                          int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = cpu_binary1(op, a[i], b[i * b_step]);
}

static void softmax_scalar(const float *x, float *y, int64_t n, bool log) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - m);
        if (!log) y[i] = e;
        sum += e;
    }
    if (log) {
        float ls = (float)(m + logf((float)sum));
        for (int64_t i = 0; i < n; i++) y[i] = x[i] - ls;
    } else {
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

static void rms_norm_scalar(const float *x, const float *w, float *y, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)(n ? n : 1) + eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * (w ? w[i] : 1.0f);
}

static void layer_norm_scalar(const float *x, const float *r, const float *w, const float *b, float *y,
                              int64_t n, double eps) {
    const float *v = x;
    if (r) {
        for (int64_t k = 0; k < n; k++) y[k] = x[k] + r[k];
        v = y;
    }
    double sum = 0, ss = 0;
    for (int64_t k = 0; k < n; k++) sum += v[k];
    double mean = sum / (double)n;
    for (int64_t k = 0; k < n; k++) ss += ((double)v[k] - mean) * ((double)v[k] - mean);
    float m = (float)mean, s = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t k = 0; k < n; k++) {
        float t = (v[k] - m) * s;
        y[k] = t * (w ? w[k] : 1.0f) + (b ? b[k] : 0.0f);
    }
}

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float acc[4] = {0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) acc[l] += a[i + l] * b[i + l];
    for (; i < n; i++) acc[0] += a[i] * b[i];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static void scale_axpy_scalar(float *y, float s, float w, const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = y[i] * s + w * v[i];
}

static float exp_sum_scalar(float *x, int64_t n, float m) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] = expf(x[i] - m);
    return s;
}

const cpu_simd cpu_simd_scalar = {
    .name = "scalar",
    .gemm_ukr = gemm_ukr_scalar,
    .gemm_dot = gemm_dot_scalar,
    .dot_rows = dot_rows_scalar,
    .to_f32 = to_f32_scalar,
    .pack_b = cpu_pack_b_generic,
    .unary = unary_scalar,
    .binary = binary_scalar,
    .softmax = softmax_scalar,
    .rms_norm = rms_norm_scalar,
    .layer_norm = layer_norm_scalar,
    .dot = dot_scalar,
    .scale_axpy = scale_axpy_scalar,
    .exp_sum = exp_sum_scalar,
};
