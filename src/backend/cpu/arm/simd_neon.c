/* The NEON primitive table (aarch64; NEON is baseline there): the scalar
 * table with the hot entries replaced. A 6x16 GEMM micro-kernel on
 * vfmaq_laneq_f32 (24 accumulators), f32/f16/bf16 dot_rows, the 4x3
 * gemm_dot tile and to_f32 (the
 * f16 conversion is base armv8-a: no fp16 arithmetic needed), binary
 * add/sub/mul/div, unary neg/abs/relu/sqrt (the scalar bits) and
 * exp/sigmoid/silu/gelu_tanh (AVX2's exp polynomial, neon-util.h), softmax
 * (sum in double, as the scalar one), rms_norm (squares summed in
 * double, as the scalar one), dot, scale_axpy and exp_sum. gelu_erf,
 * pack_b and the rest stay on the scalar entries.
 * Tested through the op tests against the reference kernels (the default
 * table on arm64) and test_fast_kernels (scalar vs neon, 1 and 2 threads),
 * under qemu-user (make test-arm64). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../cpu-impl.h"
#include "../simd-impl.h"
#include "neon-util.h"

_Static_assert(CPU_GEMM_MR == 6 && CPU_GEMM_NR == 16, "the NEON micro-kernel is 6x16");

static void gemm_ukr_neon(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                          bool accumulate) {
    float32x4_t c00 = vdupq_n_f32(0), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    float32x4_t c40 = c00, c41 = c00, c42 = c00, c43 = c00, c50 = c00, c51 = c00, c52 = c00, c53 = c00;
    for (int64_t p = 0; p < k; p++, a += 6, b += 16) {
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
        float32x4_t a0 = vld1q_f32(a);
        float32x2_t a1 = vld1_f32(a + 4);
        c00 = vfmaq_laneq_f32(c00, b0, a0, 0), c01 = vfmaq_laneq_f32(c01, b1, a0, 0);
        c02 = vfmaq_laneq_f32(c02, b2, a0, 0), c03 = vfmaq_laneq_f32(c03, b3, a0, 0);
        c10 = vfmaq_laneq_f32(c10, b0, a0, 1), c11 = vfmaq_laneq_f32(c11, b1, a0, 1);
        c12 = vfmaq_laneq_f32(c12, b2, a0, 1), c13 = vfmaq_laneq_f32(c13, b3, a0, 1);
        c20 = vfmaq_laneq_f32(c20, b0, a0, 2), c21 = vfmaq_laneq_f32(c21, b1, a0, 2);
        c22 = vfmaq_laneq_f32(c22, b2, a0, 2), c23 = vfmaq_laneq_f32(c23, b3, a0, 2);
        c30 = vfmaq_laneq_f32(c30, b0, a0, 3), c31 = vfmaq_laneq_f32(c31, b1, a0, 3);
        c32 = vfmaq_laneq_f32(c32, b2, a0, 3), c33 = vfmaq_laneq_f32(c33, b3, a0, 3);
        c40 = vfmaq_lane_f32(c40, b0, a1, 0), c41 = vfmaq_lane_f32(c41, b1, a1, 0);
        c42 = vfmaq_lane_f32(c42, b2, a1, 0), c43 = vfmaq_lane_f32(c43, b3, a1, 0);
        c50 = vfmaq_lane_f32(c50, b0, a1, 1), c51 = vfmaq_lane_f32(c51, b1, a1, 1);
        c52 = vfmaq_lane_f32(c52, b2, a1, 1), c53 = vfmaq_lane_f32(c53, b3, a1, 1);
    }
    float t[6][16];
    vst1q_f32(t[0], c00), vst1q_f32(t[0] + 4, c01), vst1q_f32(t[0] + 8, c02), vst1q_f32(t[0] + 12, c03);
    vst1q_f32(t[1], c10), vst1q_f32(t[1] + 4, c11), vst1q_f32(t[1] + 8, c12), vst1q_f32(t[1] + 12, c13);
    vst1q_f32(t[2], c20), vst1q_f32(t[2] + 4, c21), vst1q_f32(t[2] + 8, c22), vst1q_f32(t[2] + 12, c23);
    vst1q_f32(t[3], c30), vst1q_f32(t[3] + 4, c31), vst1q_f32(t[3] + 8, c32), vst1q_f32(t[3] + 12, c33);
    vst1q_f32(t[4], c40), vst1q_f32(t[4] + 4, c41), vst1q_f32(t[4] + 8, c42), vst1q_f32(t[4] + 12, c43);
    vst1q_f32(t[5], c50), vst1q_f32(t[5] + 4, c51), vst1q_f32(t[5] + 8, c52), vst1q_f32(t[5] + 12, c53);
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        int j = 0;
        for (; j + 4 <= nr; j += 4) {
            float32x4_t v = vld1q_f32(t[i] + j);
            vst1q_f32(ci + j, accumulate ? vaddq_f32(vld1q_f32(ci + j), v) : v);
        }
        for (; j < nr; j++) ci[j] = accumulate ? ci[j] + t[i][j] : t[i][j];
    }
}

static void dot_rows_neon(candle_dtype wt, int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                          const float *x, float *out, int64_t out_stride) {
    size_t esz = wt == CANDLE_DTYPE_F32 ? 4 : 2;
    for (int64_t r = 0; r < n_rows; r++) {
        const char *row = (const char *)w + (size_t)r * w_stride;
        float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
        int64_t i = 0;
        for (; i + 16 <= k; i += 16) {
            s0 = vfmaq_f32(s0, neon_ld4(wt, row + (size_t)i * esz), vld1q_f32(x + i));
            s1 = vfmaq_f32(s1, neon_ld4(wt, row + (size_t)(i + 4) * esz), vld1q_f32(x + i + 4));
            s2 = vfmaq_f32(s2, neon_ld4(wt, row + (size_t)(i + 8) * esz), vld1q_f32(x + i + 8));
            s3 = vfmaq_f32(s3, neon_ld4(wt, row + (size_t)(i + 12) * esz), vld1q_f32(x + i + 12));
        }
        for (; i + 4 <= k; i += 4) s0 = vfmaq_f32(s0, neon_ld4(wt, row + (size_t)i * esz), vld1q_f32(x + i));
        float acc = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
        for (; i < k; i++) acc += cdl_load_f32(wt, row + (size_t)i * esz) * x[i];
        out[r * out_stride] = acc;
    }
}

/* C[i, j] (+)= dot(a row i, w row j) over k, i < mr <= 4, j < nr <= 3: the
 * 4 x 3 tile's twelve accumulators, four k at a time; rows missing past mr
 * or nr read row 0 (their sums are dropped). */
static void gemm_dot_neon(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw, candle_dtype wt,
                          float *c, int64_t ldc, int mr, int nr, bool accumulate) {
    size_t esz = wt == CANDLE_DTYPE_F32 ? 4 : 2;
    const float *ar[4];
    const char *wr[3];
    for (int i = 0; i < 4; i++) ar[i] = a + (i < mr ? i : 0) * lda;
    for (int j = 0; j < 3; j++) wr[j] = w + (j < nr ? j : 0) * ldw;
    float32x4_t s[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) s[i][j] = vdupq_n_f32(0);
    int64_t p = 0;
    for (; p + 4 <= k; p += 4) {
        float32x4_t b0 = neon_ld4(wt, wr[0] + (size_t)p * esz), b1 = neon_ld4(wt, wr[1] + (size_t)p * esz),
                    b2 = neon_ld4(wt, wr[2] + (size_t)p * esz);
        for (int i = 0; i < 4; i++) {
            float32x4_t av = vld1q_f32(ar[i] + p);
            s[i][0] = vfmaq_f32(s[i][0], av, b0);
            s[i][1] = vfmaq_f32(s[i][1], av, b1);
            s[i][2] = vfmaq_f32(s[i][2], av, b2);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float acc = vaddvq_f32(s[i][j]);
            for (int64_t q = p; q < k; q++) acc += ar[i][q] * cdl_load_f32(wt, wr[j] + (size_t)q * esz);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc : acc;
        }
}

static void to_f32_neon(candle_dtype t, const void *src, float *dst, int64_t n) {
    if (t == CANDLE_DTYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
        return;
    }
    const char *s = src;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, neon_ld4(t, s + (size_t)i * 2));
    for (; i < n; i++) dst[i] = cdl_load_f32(t, s + (size_t)i * 2);
}

static void binary_neon(candle_op op, const float *a, const float *b, int64_t b_step, float *y, int64_t n) {
    if (op != CANDLE_OP_ADD && op != CANDLE_OP_SUB && op != CANDLE_OP_MUL && op != CANDLE_OP_DIV) {
        cpu_simd_scalar.binary(op, a, b, b_step, y, n);
        return;
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t va = vld1q_f32(a + i), vb = b_step ? vld1q_f32(b + i) : vdupq_n_f32(b[0]), r;
        switch (op) {
        case CANDLE_OP_ADD: r = vaddq_f32(va, vb); break;
        case CANDLE_OP_SUB: r = vsubq_f32(va, vb); break;
        case CANDLE_OP_MUL: r = vmulq_f32(va, vb); break;
        default: r = vdivq_f32(va, vb); break;
        }
        vst1q_f32(y + i, r);
    }
    for (; i < n; i++) y[i] = cpu_binary1(op, a[i], b[i * b_step]);
}

/* The unary ops with a NEON form (neg, abs, relu, sqrt: the scalar bits;
 * exp, sigmoid, silu, gelu_tanh: within a few ulp of expf); the others (gelu_erf, the
 * trigonometric ones, affine in double, clamp's NaN rule) go to the scalar
 * entry. */
static inline float32x4_t unary4(candle_op op, float32x4_t v) {
    switch (op) {
    case CANDLE_OP_NEG: return vnegq_f32(v);
    case CANDLE_OP_ABS: return vabsq_f32(v);
    case CANDLE_OP_RELU: { /* NaN -> 0, as x > 0 ? x : 0 */
        float32x4_t zero = vdupq_n_f32(0);
        return vbslq_f32(vcgtq_f32(v, zero), v, zero);
    }
    case CANDLE_OP_EXP: return neon_exp4(v);
    case CANDLE_OP_SIGMOID: return neon_sigmoid4(v);
    case CANDLE_OP_SILU: return vmulq_f32(v, neon_sigmoid4(v));
    case CANDLE_OP_GELU_TANH: { /* 0.5 x (1 + tanh u) = x sigmoid(2u): no cancellation near u = 0 */
        float32x4_t u = vfmaq_f32(v, vdupq_n_f32(0.044715f), vmulq_f32(vmulq_f32(v, v), v));
        return vmulq_f32(v, neon_sigmoid4(vmulq_f32(u, vdupq_n_f32(1.5957691216057308f))));
    }
    default: return vsqrtq_f32(v);
    }
}

static void unary_neon(candle_op op, const float *x, float *y, int64_t n, const double *p) {
    if (op != CANDLE_OP_NEG && op != CANDLE_OP_ABS && op != CANDLE_OP_RELU && op != CANDLE_OP_SQRT &&
        op != CANDLE_OP_EXP && op != CANDLE_OP_SIGMOID && op != CANDLE_OP_SILU && op != CANDLE_OP_GELU_TANH) {
        cpu_simd_scalar.unary(op, x, y, n, p);
        return;
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, unary4(op, vld1q_f32(x + i)));
    if (i < n) { /* the tail through the same vector code, so an element's
                  * value does not depend on where a row split falls */
        float b[4] = {0};
        memcpy(b, x + i, (size_t)(n - i) * sizeof *b);
        vst1q_f32(b, unary4(op, vld1q_f32(b)));
        memcpy(y + i, b, (size_t)(n - i) * sizeof *b);
    }
}

/* x[j] = exp(x[j] - m), returning their sum; the tail through the same
 * vector code (padded with -inf: exp 0). */
static float exp_sum_neon(float *x, int64_t n, float m) {
    float32x4_t mv = vdupq_n_f32(m), s0 = vdupq_n_f32(0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t e0 = neon_exp4(vsubq_f32(vld1q_f32(x + i), mv)), e1 = neon_exp4(vsubq_f32(vld1q_f32(x + i + 4), mv));
        vst1q_f32(x + i, e0), vst1q_f32(x + i + 4, e1);
        s0 = vaddq_f32(s0, e0), s1 = vaddq_f32(s1, e1);
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i += 4) {
        float b[4];
        for (int j = 0; j < 4; j++) b[j] = i + j < n ? x[i + j] : -INFINITY;
        vst1q_f32(b, neon_exp4(vsubq_f32(vld1q_f32(b), mv)));
        for (int64_t j = i; j < n && j < i + 4; j++) s += x[j] = b[j - i];
    }
    return s;
}

/* Row softmax (log: log-softmax) as the scalar entry: the maximum with NaN
 * passed over (vmaxnmq), exp(x - m) on neon_exp4, the sum in double (each
 * 4-lane exp widened), y scaled by (float)(1 / sum); the tail through the
 * same vector exp (padded with -inf: exp 0). */
static void softmax_neon(const float *x, float *y, int64_t n, bool log) {
    float32x4_t mv = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) mv = vmaxnmq_f32(mv, vld1q_f32(x + i));
    float m = vmaxnmvq_f32(mv);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    float32x4_t mb = vdupq_n_f32(m);
    float64x2_t s0 = vdupq_n_f64(0), s1 = s0;
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t e = neon_exp4(vsubq_f32(vld1q_f32(x + i), mb));
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
        if (!log) vst1q_f32(y + i, e);
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    if (i < n) {
        float b[4];
        for (int j = 0; j < 4; j++) b[j] = i + j < n ? x[i + j] : -INFINITY;
        vst1q_f32(b, neon_exp4(vsubq_f32(vld1q_f32(b), mb)));
        for (int64_t j = i; j < n; j++) {
            sum += b[j - i];
            if (!log) y[j] = b[j - i];
        }
    }
    if (log) {
        float ls = (float)(m + logf((float)sum));
        float32x4_t lv = vdupq_n_f32(ls);
        for (i = 0; i + 4 <= n; i += 4) vst1q_f32(y + i, vsubq_f32(vld1q_f32(x + i), lv));
        for (; i < n; i++) y[i] = x[i] - ls;
        return;
    }
    float inv = (float)(1.0 / sum);
    float32x4_t iv = vdupq_n_f32(inv);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), iv));
    for (; i < n; i++) y[i] *= inv;
}

static void rms_norm_neon(const float *x, const float *w, float *y, int64_t n, float eps) {
    float64x2_t s0 = vdupq_n_f64(0), s1 = s0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        s0 = vfmaq_f64(s0, lo, lo);
        s1 = vfmaq_f64(s1, hi, hi);
    }
    double ss = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)(n ? n : 1) + eps));
    float32x4_t vr = vdupq_n_f32(r);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vmulq_f32(vld1q_f32(x + i), vr); /* (x * r) * w, the scalar order */
        vst1q_f32(y + i, w ? vmulq_f32(v, vld1q_f32(w + i)) : v);
    }
    for (; i < n; i++) y[i] = x[i] * r * (w ? w[i] : 1.0f);
}

static float dot_neon(const float *a, const float *b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float acc = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) acc += a[i] * b[i];
    return acc;
}

/* y * s + w * v without fusing: the scalar entry's bits */
static void scale_axpy_neon(float *y, float s, float w, const float *v, int64_t n) {
    float32x4_t vs = vdupq_n_f32(s), vw = vdupq_n_f32(w);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vmulq_f32(vld1q_f32(y + i), vs), vmulq_f32(vld1q_f32(v + i), vw)));
    for (; i < n; i++) y[i] = y[i] * s + w * v[i];
}

static cpu_simd g_neon;
static pthread_once_t g_neon_once = PTHREAD_ONCE_INIT;

static void neon_init(void) {
    g_neon = cpu_simd_scalar;
    g_neon.name = "neon";
    g_neon.gemm_ukr = gemm_ukr_neon;
    g_neon.dot_rows = dot_rows_neon;
    g_neon.gemm_dot = gemm_dot_neon;
    g_neon.to_f32 = to_f32_neon;
    g_neon.binary = binary_neon;
    g_neon.unary = unary_neon;
    g_neon.softmax = softmax_neon;
    g_neon.rms_norm = rms_norm_neon;
    g_neon.dot = dot_neon;
    g_neon.scale_axpy = scale_axpy_neon;
    g_neon.exp_sum = exp_sum_neon;
}

const cpu_simd *cpu_simd_neon_table(void) {
    pthread_once(&g_neon_once, neon_init);
    return &g_neon;
}
#else
typedef int cdl_simd_neon_empty; /* ISO C: no empty translation unit */
#endif
