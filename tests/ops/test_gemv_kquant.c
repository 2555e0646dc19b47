/* The K-type matrix-vector kernels (q2_K to q6_K in
 * src/quant/x86/kquants_avx2.c, reached through src/quant/gemv.c and the
 * M = 1 path of src/backend/cpu/fast_matmul_quant.c).
 *
 * Two references: the traits vec_dot on the same q8_K activation, which
 * the kernels equal bit for bit (same int32 lanes, same float steps per
 * row: batch-1 decoding gives the text the vec_dot path gave), and the
 * double-precision dot of the dequantized weight
 * with the f32 activation, whose only error of note is the q8_K rounding
 * of x: at most half a q8_K step (amax / 254) per element, so by
 * Cauchy-Schwarz |error| <= |w| sqrt(K) amax / 254.
 *
 * K of 1 to 22 super-blocks; row counts around the kernels' eight-row
 * passes (1-7 row tails, odd counts); rows inside a wider stride, and rows
 * 2 bytes apart beyond their size (no 16-byte alignment); through
 * candle_matmul with the activation contiguous, misaligned by one float and
 * strided, on 1 and 2 threads.
 *
 * On a CPU with AVX-512 VNNI the dispatch takes the VNNI rows and dots
 * (kquants_avx512.c): every check_rows also runs the AVX2 and VNNI rows and
 * vec_dots directly and wants them equal bit for bit, and the whole test
 * runs once more with the CPU defaults' quant set to avx2 (the AVX2 path
 * through the dispatch: vnni-rerun.h). */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "backend/cpu/quant/gemv-impl.h"
#include "backend/cpu/quant/x86/quant-x86-impl.h"
#include "vnni-rerun.h"

static const candle_dtype k_types[] = {CANDLE_DTYPE_Q2_K, CANDLE_DTYPE_Q3_K, CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q5_K,
                                       CANDLE_DTYPE_Q6_K};
#define N_K_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

/* n rows of k random values in [-1, 1) (every 7th row scaled by 1e-3, so
 * the super-block scales vary), and their norms. */
static float *rand_rows(int64_t n, int64_t k, uint64_t seed, double *norms) {
    float *v = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t r = 0; r < n; r++) {
        double s = 0, scale = r % 7 == 3 ? 1e-3 : 1;
        for (int64_t i = 0; i < k; i++) {
            v[r * k + i] = (float)(scale * mt_uniform(&seed, -1, 1));
            s += (double)v[r * k + i] * v[r * k + i];
        }
        norms[r] = sqrt(s);
    }
    return v;
}

/* The exact dot of a dequantized weight row with x, and the bound on the
 * q8_K rounding error of x (see the header). */
static double exact_dot(candle_dtype t, const void *wrow, const float *x, int64_t K, double *tol) {
    float *wd = malloc(sizeof(float) * (size_t)K);
    cpu_dtype(t)->to_f32(wrow, wd, K);
    double s = 0, amax = 0, dn = 0;
    for (int64_t k = 0; k < K; k++) {
        s += (double)wd[k] * x[k];
        dn += (double)wd[k] * wd[k];
        amax = fmax(amax, fabs(x[k]));
    }
    free(wd);
    /* |w| of the dequantized row: the bound holds for what is multiplied */
    *tol = sqrt(dn) * sqrt((double)K) * amax / 254 * 1.001 + 1e-5 * sqrt(dn) * sqrt((double)K) * amax;
    return s;
}

/* Checks out[n] against both references; returns false at the first miss. */
static bool check_out(const char *what, candle_dtype t, const float *out, int64_t N, int64_t K, const char *w,
                      size_t ws, const void *xq, const float *xf) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    for (int64_t n = 0; n < N; n++) {
        float want;
        wt->vec_dot(K, &want, w + (size_t)n * ws, xq);
        if (out[n] != want) {
            CHECK_MSG(0, "%s %s N %lld K %lld: out[%lld] = %.9g, vec_dot %.9g", wt->name, what, (long long)N,
                      (long long)K, (long long)n, out[n], want);
            return false;
        }
        double tol, exact = exact_dot(t, w + (size_t)n * ws, xf, K, &tol);
        if (fabs((double)out[n] - exact) > tol) {
            CHECK_MSG(0, "%s %s N %lld K %lld: out[%lld] = %.9g, exact %.9g (tol %.3g)", wt->name, what,
                      (long long)N, (long long)K, (long long)n, out[n], exact, tol);
            return false;
        }
    }
    return true;
}

/* The AVX2 and VNNI variants, called directly, against the dispatched
 * rows c: equal bit for bit (the same int32 lanes and float steps). */
static void check_variants(candle_dtype t, int64_t N, int64_t K, const char *w, size_t ws, const void *xv,
                           const void *xq, const float *c) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return;
    static const candle_vec_dot_fn dots[][2] = {
        {cdl_vec_dot_q2_k_q8_k_avx2, cdl_vec_dot_q2_k_q8_k_vnni},
        {cdl_vec_dot_q3_k_q8_k_avx2, cdl_vec_dot_q3_k_q8_k_vnni},
        {cdl_vec_dot_q4_k_q8_k_avx2, cdl_vec_dot_q4_k_q8_k_vnni},
        {cdl_vec_dot_q5_k_q8_k_avx2, cdl_vec_dot_q5_k_q8_k_vnni},
        {cdl_vec_dot_q6_k_q8_k_avx2, cdl_vec_dot_q6_k_q8_k_vnni},
    };
    int ti = 0;
    while (k_types[ti] != t) ti++;
    bool vnni = cdl_quant_uses_vnni();
    float *a = malloc(sizeof(float) * (size_t)(N + 1)), *b = malloc(sizeof(float) * (size_t)(N + 1));
    a[N] = b[N] = -7.0f;
    cdl_gemv_rows_avx2(t, K, N, w, ws, xv, a);
    if (vnni) cdl_gemv_rows_vnni(t, K, N, w, ws, xv, b);
    CHECK_MSG(a[N] == -7.0f && b[N] == -7.0f, "%s N %lld K %lld: a variant wrote past the last row",
              candle_dtype_name(t), (long long)N, (long long)K);
    for (int64_t n = 0; n < N; n++) {
        float da, db = 0;
        dots[ti][0](K, &da, w + (size_t)n * ws, xq);
        if (vnni) dots[ti][1](K, &db, w + (size_t)n * ws, xq);
        bool ok = memcmp(&a[n], &c[n], 4) == 0 && memcmp(&da, &c[n], 4) == 0 &&
                  (!vnni || (memcmp(&b[n], &c[n], 4) == 0 && memcmp(&db, &c[n], 4) == 0));
        CHECK_MSG(ok, "%s N %lld K %lld row %lld: rows %.9g, avx2 rows %.9g dot %.9g, vnni rows %.9g dot %.9g",
                  candle_dtype_name(t), (long long)N, (long long)K, (long long)n, c[n], a[n], da, b[n], db);
        if (!ok) break;
    }
    free(a), free(b);
#else
    (void)t, (void)N, (void)K, (void)w, (void)ws, (void)xv, (void)xq, (void)c;
#endif
}

/* cdl_gemv_rows on N rows `pad` bytes apart beyond the row size. */
static void check_rows(candle_dtype t, int64_t N, int64_t K, size_t pad) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    size_t xb = cdl_gemv_x_bytes(t, K);
    CHECK_MSG(xb > 0, "%s K %lld: no gemv kernel", wt->name, (long long)K);
    if (!xb) return;
    double *wn = malloc(sizeof(double) * (size_t)N), xn;
    float *wf = rand_rows(N, K, (uint64_t)(N * 13 + K), wn), *xf = rand_rows(1, K, (uint64_t)(K + 3), &xn);
    size_t row, xs;
    char *w = mt_quantize_rows(t, wf, N, K, &row), *x = mt_quantize_rows(wt->vec_dot_type, xf, 1, K, &xs);
    size_t ws = row + pad;
    char *wide = malloc(ws * (size_t)N);
    for (int64_t n = 0; n < N; n++) memcpy(wide + (size_t)n * ws, w + (size_t)n * row, row);
    void *xv = aligned_alloc(64, xb);
    cdl_gemv_prep(t, K, xf, xv);
    CHECK_MSG(memcmp(xv, x, xs) == 0, "%s K %lld: prepared row differs from the q8_K row", wt->name, (long long)K);
    float *c = malloc(sizeof(float) * (size_t)(N + 1));
    c[N] = -7.0f;
    cdl_gemv_rows(t, K, N, wide, ws, xv, c);
    CHECK_MSG(c[N] == -7.0f, "%s gemv N %lld K %lld: wrote past the last row", wt->name, (long long)N, (long long)K);
    check_out(pad ? "gemv wide" : "gemv", t, c, N, K, wide, ws, x, xf);
    check_variants(t, N, K, wide, ws, xv, x, c);
    free(wn), free(wf), free(xf), free(w), free(x), free(wide), free(xv), free(c);
}

static void test_rows(void) {
    /* around the eight-row passes: tails of 1 to 7 rows */
    static const int64_t Ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 19};
    const int n_ns = (int)(sizeof Ns / sizeof Ns[0]);
    for (int i = 0; i < N_K_TYPES; i++) {
        candle_dtype t = k_types[i];
        if (!cdl_gemv_x_bytes(t, 256)) continue; /* no AVX2: the vec_dot path serves */
        CHECK(cdl_gemv_x_bytes(t, 256) % 64 == 0);
        CHECK(cdl_gemv_x_bytes(t, 288) == 0); /* not whole super-blocks */
        for (int64_t K = 256; K <= 1024; K += 256)
            for (int j = 0; j < n_ns; j++) {
                check_rows(t, Ns[j], K, 0);
                check_rows(t, Ns[j], K, 2 * cpu_dtype(t)->type_size);
            }
        for (int j = 0; j < n_ns; j += 2) check_rows(t, Ns[j], 512 * (j % 4 + 1), 2);
        /* 11 and 22 super-blocks (TinyLlama's ffn_down K = 5632) */
        check_rows(t, 5, 2816, 0);
        check_rows(t, 7, 5632, cpu_dtype(t)->type_size);
        check_rows(t, 9, 4096, 2);
    }
}

/* Activation layouts through candle_matmul. */
enum { X_CONTIG, X_MISALIGNED, X_STRIDED };
static const char *const x_layout_names[] = {"contiguous", "misaligned", "strided"};

/* x [1, 1, K] in layout lay, over a buffer of 2K + 2 floats whose
 * elements at x's positions are xf. */
static candle_tensor *x_view(candle_ctx *ctx, const float *xf, int64_t K, int lay) {
    int64_t n = 2 * K + 2, sh[1] = {n};
    float *buf = calloc((size_t)n, sizeof(float));
    int64_t step = lay == X_STRIDED ? 2 : 1, off = lay == X_CONTIG ? 0 : 1;
    for (int64_t k = 0; k < K; k++) buf[off + k * step] = xf[k];
    candle_tensor *b = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, sh, buf);
    free(buf);
    int64_t xsh[3] = {1, 1, K}, xst[3] = {K * step * 4, K * step * 4, step * 4};
    return b ? candle_as_strided(ctx, b, 3, xsh, xst, (size_t)off * 4) : NULL;
}

/* Through candle_matmul: x [1, 1, K] times the transpose of w [N, K]. */
static void check_matmul(candle_ctx *ctx, candle_dtype t, int64_t N, int64_t K, int lay) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    double *wn = malloc(sizeof(double) * (size_t)N), xn;
    float *wf = rand_rows(N, K, (uint64_t)(N + 17), wn), *xf = rand_rows(1, K, (uint64_t)(K + 9), &xn);
    int64_t wsh[2] = {N, K};
    candle_tensor *w = candle_tensor_from_f32(ctx, t, 2, wsh, wf);
    candle_tensor *xt = x_view(ctx, xf, K, lay);
    candle_tensor *y = candle_matmul(ctx, xt, candle_transpose(ctx, w, 0, 1));
    CHECK_MSG(y != NULL, "%s matmul: %s", wt->name, candle_errmsg(ctx));
    if (y) {
        const cpu_fast_kernel *k = cpu_fast_kernel_for(y);
        CHECK_MSG(k == &cpu_fast_matmul_quant, "%s: kernel %s", wt->name, k ? k->name : "reference");
        size_t xs;
        char *xq = mt_quantize_rows(wt->vec_dot_type, xf, 1, K, &xs);
        check_out(x_layout_names[lay], t, (const float *)tensor_ptr(y), N, K, tensor_ptr(w),
                  (size_t)w->stride[0], xq, xf);
        free(xq);
    }
    free(wn), free(wf), free(xf);
    candle_ctx_reset(ctx, mark);
}

static void test_matmul_threads(int threads) {
    candle_ctx *ctx = mt_ctx_threads(true, threads);
    /* N past several tasks of 32 rows with odd tails */
    static const int64_t Ns[] = {1, 5, 33, 70, 129};
    for (int i = 0; i < N_K_TYPES; i++)
        for (int j = 0; j < 5; j++)
            for (int lay = X_CONTIG; lay <= X_STRIDED; lay++) {
                check_matmul(ctx, k_types[i], Ns[j], 256, lay);
                check_matmul(ctx, k_types[i], Ns[j], 1024, lay);
            }
    for (int i = 0; i < N_K_TYPES; i++) check_matmul(ctx, k_types[i], 37, 2816, X_MISALIGNED);
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    test_rows();
    test_matmul_threads(1);
    test_matmul_threads(2);
}

int main(void) {
    cpu_set_always_parallel(true);
    return vnni_run_passes(run_checks, "test_gemv_kquant");
}
