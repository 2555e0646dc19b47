/* The matrix-vector kernels of the 32-element block types (q4_0, q4_1,
 * q5_0, q5_1, q8_0: src/quant/x86/gemv_avx2.c through cdl_gemv_rows).
 *
 * Their float steps per row are a contract (see the kernel file's comment):
 * the packed multi-row kernels reproduce them, so a row's result does not
 * depend on its batch. The first reference here is a plain per-row loop of
 * exactly those steps on the prepared activation (the integer block sums
 * are exact, so only the float order matters), which the kernels must
 * equal bit for bit; the second is the traits vec_dot on the type's q8
 * activation, the same sum in another float order, within a few float
 * roundings of the sum of the terms' magnitudes.
 *
 * K from one block to 64 (tail blocks only; whole groups of 8; groups and
 * a tail, as SmolLM2's 576 and gemma's 640), row counts 1-9 and 19,
 * rows at odd strides from an odd address.
 *
 * On a CPU with AVX-512 VNNI the dispatch takes the VNNI rows
 * (gemv_avx512.c): every check also runs the AVX2 and VNNI rows directly and
 * wants them equal bit for bit, and the whole test runs once more with
 * the CPU defaults' quant set to avx2 (the AVX2 rows through the dispatch:
 * vnni-rerun.h);
 * q8_0's prepared offset terms are checked as the VNNI bias. */
#include <math.h>
#include <stdlib.h>

#include "mathtest.h"
#include "backend/cpu/quant/gemv-impl.h"
#include "backend/cpu/quant/x86/quant-x86-impl.h"
#include "vnni-rerun.h"

static const candle_dtype types[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q5_1,
                                     CANDLE_DTYPE_Q8_0};

/* ---- the weight block fields ---- */

static float f16(uint16_t h) { return candle_f16_to_f32(h); }

static bool has_min(candle_dtype t) { return t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_1; }

/* Block b of a row: scale, minimum (the *_1 types) and the 32 codes as
 * the kernels use them (nibble types unsigned: 0..15, 0..31). */
static void block_fields(candle_dtype t, const uint8_t *row, int64_t b, float *d, float *m, int codes[32]) {
    union {
        block_q4_0 q40;
        block_q4_1 q41;
        block_q5_0 q50;
        block_q5_1 q51;
        block_q8_0 q80;
    } x; /* a copy: the rows may be misaligned */
    size_t bs = cpu_dtype(t)->type_size;
    memcpy(&x, row + (size_t)b * bs, bs);
    const uint8_t *qs = NULL;
    uint32_t qh = 0;
    *m = 0;
    switch (t) {
    case CANDLE_DTYPE_Q4_0: *d = f16(x.q40.d), qs = x.q40.qs; break;
    case CANDLE_DTYPE_Q4_1: *d = f16(x.q41.d), *m = f16(x.q41.m), qs = x.q41.qs; break;
    case CANDLE_DTYPE_Q5_0:
        *d = f16(x.q50.d), qs = x.q50.qs;
        memcpy(&qh, x.q50.qh, 4);
        break;
    case CANDLE_DTYPE_Q5_1:
        *d = f16(x.q51.d), *m = f16(x.q51.m), qs = x.q51.qs;
        memcpy(&qh, x.q51.qh, 4);
        break;
    default:
        *d = f16(x.q80.d);
        for (int j = 0; j < 32; j++) codes[j] = x.q80.qs[j];
        return;
    }
    for (int j = 0; j < 16; j++) {
        codes[j] = (qs[j] & 15) | (int)((qh >> j & 1) << 4);
        codes[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16) & 1) << 4);
    }
}

/* ---- the prepared activation (gemv_avx2.c's layout) ---- */

typedef struct xparts {
    const int8_t *qs;
    const float *d, *s;
    int64_t nb;
    bool paired; /* the nibble types: full groups of 8 in pairs (q8_0: blocks i, i + 4 side by side) */
    bool q8;
} xparts;

static xparts x_parts(candle_dtype t, const void *xv, int64_t K) {
    int64_t nb = K / 32;
    const int8_t *qs = xv;
    const float *d = (const float *)(qs + nb * 32);
    return (xparts){qs, d, d + nb, nb, true, t == CANDLE_DTYPE_Q8_0};
}

/* Activation code j of block b. */
static int x_code(const xparts *x, int64_t b, int j) {
    if (!x->paired || b >= x->nb / 8 * 8) return x->qs[b * 32 + j];
    int64_t g = b / 8, i = b % 8;
    if (x->q8) return x->qs[g * 256 + (i % 4) * 64 + (i / 4) * 32 + j];
    return x->qs[g * 256 + (i % 4) * 64 + (i / 4) * 16 + (j < 16 ? j : j - 16 + 32)];
}

/* ---- reference 1: the kernels' float steps, one row ----
 *
 * The kernel sums the tail blocks' offset terms with the statement
 * extra += a * b, which a compiler may contract into one fma (clang's
 * default, the kernel file having -mfma); fused picks that reading. */

static float ref_row(candle_dtype t, const uint8_t *row, const xparts *x, bool fused) {
    float acc[8] = {0}, acc_m[8] = {0}, extra = 0, d, m;
    int codes[32];
    int64_t ng = x->nb / 8;
    for (int64_t g = 0; g < ng; g++)
        for (int i = 0; i < 8; i++) { /* lane i: block i of the group */
            int64_t b = g * 8 + i;
            block_fields(t, row, b, &d, &m, codes);
            int isum = 0;
            for (int j = 0; j < 32; j++) isum += codes[j] * x_code(x, b, j);
            if (t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q5_0) {
                acc[i] = fmaf(d, fmaf(x->d[b], (float)isum, x->s[b]), acc[i]);
            } else {
                float dd = d * x->d[b];
                acc[i] = fmaf(dd, (float)isum, acc[i]);
                if (has_min(t)) acc_m[i] = fmaf(m, x->s[b], acc_m[i]);
            }
        }
    for (int64_t b = ng * 8; b < x->nb; b++) { /* lane k: elements 4k..4k+3 */
        block_fields(t, row, b, &d, &m, codes);
        float dd = d * x->d[b];
        for (int k = 0; k < 8; k++) {
            int lane = 0;
            for (int j = 4 * k; j < 4 * k + 4; j++) lane += codes[j] * x_code(x, b, j);
            acc[k] = fmaf(dd, (float)lane, acc[k]);
        }
        if (t == CANDLE_DTYPE_Q8_0) continue;
        float a = has_min(t) ? m : d;
        if (fused) {
            extra = fmaf(a, x->s[b], extra);
        } else {
            float term = a * x->s[b];
            extra += term;
        }
    }
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = t == CANDLE_DTYPE_Q8_0 ? acc[i] : acc[i] + acc_m[i];
    /* hsum_ps: (0+4, 1+5, 2+6, 3+7), then (.0 + .2) + (.1 + .3) */
    float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
    float h = (s0 + s2) + (s1 + s3);
    return t == CANDLE_DTYPE_Q8_0 ? h : h + extra;
}

/* ---- reference 2: the traits vec_dot ---- */

/* Sum of the magnitudes of a row's terms, for the float-order bound. */
static double magnitude(candle_dtype t, const uint8_t *row, const xparts *x) {
    double s = 0;
    float d, m;
    int codes[32];
    for (int64_t b = 0; b < x->nb; b++) {
        block_fields(t, row, b, &d, &m, codes);
        double a = 0;
        for (int j = 0; j < 32; j++) a += fabs((double)codes[j] * x_code(x, b, j));
        s += fabs((double)d * x->d[b]) * a;
        if (t != CANDLE_DTYPE_Q8_0) s += fabs((double)(has_min(t) ? m : d) * x->s[b]); /* q8_0: the VNNI bias */
    }
    return s;
}

/* ---- the checks ---- */

static float *rand_vals(int64_t n, uint64_t seed) {
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)mt_uniform(&seed, -1, 1);
        if (i % 37 == 5) v[i] *= 30.0f; /* block scales that differ widely */
        if (i % 101 < 32 && i / 101 % 3 == 1) v[i] = fabsf(v[i]); /* all-positive blocks (q*_1 minimums) */
    }
    return v;
}

/* The AVX2 and VNNI rows, called directly, against the dispatched rows
 * out: equal bit for bit. */
static void check_variants(candle_dtype t, int64_t N, int64_t K, const uint8_t *w, size_t ws, const void *xv,
                           const float *out) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return;
    bool vnni = cdl_quant_uses_vnni();
    float *a = malloc(sizeof(float) * (size_t)(N + 1)), *b = malloc(sizeof(float) * (size_t)(N + 1));
    a[N] = b[N] = -7.0f;
    cdl_gemv_rows_avx2(t, K, N, w, ws, xv, a);
    if (vnni) cdl_gemv_rows_vnni(t, K, N, w, ws, xv, b);
    CHECK_MSG(a[N] == -7.0f && b[N] == -7.0f, "%s N %lld K %lld: a variant wrote past the last row",
              candle_dtype_name(t), (long long)N, (long long)K);
    for (int64_t n = 0; n < N; n++) {
        bool ok = memcmp(&a[n], &out[n], 4) == 0 && (!vnni || memcmp(&b[n], &out[n], 4) == 0);
        CHECK_MSG(ok, "%s N %lld K %lld row %lld: rows %.9g, avx2 %.9g, vnni %.9g", candle_dtype_name(t),
                  (long long)N, (long long)K, (long long)n, out[n], a[n], vnni ? b[n] : 0.0f);
        if (!ok) break;
    }
    free(a), free(b);
#else
    (void)t, (void)N, (void)K, (void)w, (void)ws, (void)xv, (void)out;
#endif
}

/* cdl_gemv_rows over N rows `ws = row + pad` bytes apart from an
 * address `off` bytes past an aligned one. */
static void check_rows(candle_dtype t, int64_t N, int64_t K, size_t pad, size_t off) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    size_t xb = cdl_gemv_x_bytes(t, K);
    if (!xb) return; /* no kernel on this CPU: the vec_dot path serves */
#ifndef CANDLE_QUANT_HAVE_X86
    /* the portable rows are traits vec_dots: block rows at their natural
     * (2-byte) alignment, as GGUF tensors have them */
    if ((off | pad) & 1) return;
#endif
    CHECK(xb % 64 == 0);
    float *wf = rand_vals(N * K, (uint64_t)(N * 131 + K + pad)), *xf = rand_vals(K, (uint64_t)(K * 7 + 1));
    size_t row, xs;
    char *w = mt_quantize_rows(t, wf, N, K, &row), *xq = mt_quantize_rows(wt->vec_dot_type, xf, 1, K, &xs);
    size_t ws = row + pad;
    char *buf = malloc(ws * (size_t)N + off + 64);
    uint8_t *wrows = (uint8_t *)buf + off;
    for (int64_t n = 0; n < N; n++) memcpy(wrows + (size_t)n * ws, w + (size_t)n * row, row);
    void *xv = aligned_alloc(64, xb);
    cdl_gemv_prep(t, K, xf, xv);
    float *out = malloc(sizeof(float) * (size_t)(N + 1));
    out[N] = -7.0f;
    cdl_gemv_rows(t, K, N, wrows, ws, xv, out);
    CHECK_MSG(out[N] == -7.0f, "%s N %lld K %lld: wrote past the last row", wt->name, (long long)N, (long long)K);
#ifndef CANDLE_QUANT_HAVE_X86
    /* the portable rows (arm64): the activation is the vec_dot_type row
     * itself and each row the traits vec_dot, bit for bit */
    CHECK_MSG(memcmp(xv, xq, xs) == 0, "%s K %lld: the prepared activation is not the vec_dot_type row", wt->name,
              (long long)K);
    for (int64_t n = 0; n < N; n++) {
        float vd;
        wt->vec_dot(K, &vd, w + (size_t)n * row, xq);
        CHECK_MSG(memcmp(&out[n], &vd, sizeof vd) == 0, "%s N %lld K %lld pad %zu off %zu: out[%lld] = %.9g, vec_dot %.9g",
                  wt->name, (long long)N, (long long)K, pad, off, (long long)n, out[n], vd);
    }
    free(wf), free(xf), free(w), free(xq), free(buf), free(xv), free(out);
    return;
#endif
    xparts x = x_parts(t, xv, K);
    check_variants(t, N, K, wrows, ws, xv, out);
    if (t == CANDLE_DTYPE_Q8_0) /* the VNNI rows' bias: -128 * sum(codes) */
        for (int64_t b = 0; b < x.nb; b++) {
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += x_code(&x, b, j);
            CHECK_MSG(x.s[b] == -128.0f * (float)sum, "q8_0 K %lld block %lld: bias %g, codes sum %d", (long long)K,
                      (long long)b, x.s[b], sum);
        }
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *r = wrows + (size_t)n * ws;
        float want = ref_row(t, r, &x, false), want_c = ref_row(t, r, &x, true);
        bool same = memcmp(&out[n], &want, sizeof want) == 0 || memcmp(&out[n], &want_c, sizeof want_c) == 0;
        CHECK_MSG(same, "%s N %lld K %lld pad %zu off %zu: out[%lld] = %.9g, the float steps give %.9g", wt->name,
                  (long long)N, (long long)K, pad, off, (long long)n, out[n], want);
        float vd;
        wt->vec_dot(K, &vd, w + (size_t)n * row, xq); /* the aligned copy: vec_dot wants aligned blocks */
        double tol = 1e-6 * (double)(x.nb + 8) * magnitude(t, r, &x);
        CHECK_MSG(fabs((double)out[n] - vd) <= tol, "%s N %lld K %lld: out[%lld] = %.9g, vec_dot %.9g (tol %.3g)",
                  wt->name, (long long)N, (long long)K, (long long)n, out[n], vd, tol);
        if (!same) break;
    }
    free(wf), free(xf), free(w), free(xq), free(buf), free(xv), free(out);
}

static void test_rows(void) {
    static const int64_t Ks[] = {32, 64, 96, 224, 256, 288, 512, 576, 640, 1536, 2048};
    static const int64_t Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 19};
    for (int ti = 0; ti < 5; ti++)
        for (int k = 0; k < 11; k++)
            for (int n = 0; n < 10; n++) {
                check_rows(types[ti], Ns[n], Ks[k], 0, 0);
                if (n % 3 == 1) check_rows(types[ti], Ns[n], Ks[k], 3 + 2 * (size_t)n, 1 + (size_t)n);
            }
    /* a row past the prefetch distance many times over */
    for (int ti = 0; ti < 5; ti++) check_rows(types[ti], 6, 32 * 200, 5, 3);
    CHECK(cdl_gemv_x_bytes(CANDLE_DTYPE_Q4_0, 48) == 0); /* not whole blocks */
}

int main(void) { return vnni_run_passes(test_rows, "test_gemv"); }
