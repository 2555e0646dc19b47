/* Quantized weight x many activation rows (src/quant/qgemm.c and its use in
 * src/backend/cpu/fast_matmul_quant.c) against one traits vec_dot per
 * output: every block type, odd M, N not a multiple of the packed panel,
 * K of several blocks, batch dims, 1 and 2 threads. The integer block sums
 * are exact, so only the order of the float scale sums may differ: the
 * bound is relative to |w| |x| (which bounds sum |w_k x_k|). */
#include <math.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "backend/cpu/quant/gemv-impl.h"
#include "backend/cpu/quant/qgemm-impl.h"
#include "vnni-rerun.h"
#include "backend/cpu/quant/x86/quant-x86-impl.h"

#define REL 4e-6

/* n rows of k random values in [-1, 1), and their norms. */
static float *rand_rows(int64_t n, int64_t k, uint64_t seed, double *norms) {
    float *v = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int64_t i = 0; i < k; i++) {
            v[r * k + i] = (float)mt_uniform(&seed, -1, 1);
            s += (double)v[r * k + i] * v[r * k + i];
        }
        norms[r] = sqrt(s);
    }
    return v;
}

static void check_rows(candle_dtype t, int64_t M, int64_t N, int64_t K) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    double *wn = malloc(sizeof(double) * (size_t)N), *xn = malloc(sizeof(double) * (size_t)M);
    float *wf = rand_rows(N, K, (uint64_t)(N * 7 + K), wn), *xf = rand_rows(M, K, (uint64_t)(M * 3 + 1), xn);
    size_t ws, xs;
    char *w = mt_quantize_rows(t, wf, N, K, &ws), *x = mt_quantize_rows(wt->vec_dot_type, xf, M, K, &xs);
    size_t sb = cdl_qgemm_scratch_bytes(t, K);
    void *scratch = sb ? aligned_alloc(64, (sb + 63) & ~(size_t)63) : NULL;
    int64_t ldc = N + 3; /* outputs inside a wider row */
    float *c = malloc(sizeof(float) * (size_t)(M * ldc));
    for (int64_t i = 0; i < M * ldc; i++) c[i] = -7.0f;
    cdl_qgemm_rows(t, K, M, N, w, ws, x, xs, c, ldc, scratch);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++) {
        for (int64_t n = 0; n < ldc && !bad; n++) {
            float want = -7.0f;
            if (n < N) wt->vec_dot(K, &want, w + (size_t)n * ws, x + (size_t)m * xs);
            /* the per-output path gives vec_dot's bits */
            double tol = n < N && !cdl_qgemm_rows_exact(t) ? REL * wn[n] * xn[m] : 0;
            if (fabs((double)c[m * ldc + n] - want) > tol) {
                CHECK_MSG(0, "%s M %lld N %lld K %lld: c[%lld][%lld] = %.9g, vec_dot %.9g (fast %d)", wt->name,
                          (long long)M, (long long)N, (long long)K, (long long)m, (long long)n, c[m * ldc + n],
                          want, cdl_qgemm_has_fast(t));
                bad = 1;
            }
        }
    }
    CHECK(!bad);
    free(wn), free(xn), free(wf), free(xf), free(w), free(x), free(scratch), free(c);
}

static void test_rows(void) {
    /* M 1, 2 and 3 for q8_0 keep the plain dots; the packed kernels take
     * activation rows 4 at a time: 5, 6, 7 and 17 leave tails of 1-3 */
    static const int64_t Ms[] = {1, 2, 3, 5, 6, 7, 14, 17}, Ns[] = {1, 7, 8, 9, 19}; /* 14: the VNNI direct tiles */
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        const candle_dtype_traits *wt = cpu_dtype((candle_dtype)t);
        if (!wt->vec_dot || !wt->from_f32 || !cpu_dtype(wt->vec_dot_type)->from_f32) continue;
        int64_t bs = wt->block_size, K = bs >= 256 ? 2 * bs : 5 * bs;
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 5; j++) check_rows((candle_dtype)t, Ms[i], Ns[j], K);
        check_rows((candle_dtype)t, 4, 16, bs >= 256 ? 1536 : bs == 128 ? 1152 : 1184);
        /* past the 256 rows whose q4_0 aux records fit the scratch: a
         * second turn of activation rows over repacked panels */
        if (cdl_qgemm_has_fast((candle_dtype)t)) check_rows((candle_dtype)t, 261, 9, bs >= 256 ? bs : 2 * bs);
    }
}

/* The matrix-vector kernels against the traits vec_dot on the type's own
 * activation blocks: K with only tail blocks, one group of 8, groups and a
 * tail; rows ws apart inside a wider stride. */
static void check_gemv(candle_dtype t, int64_t N, int64_t K) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    size_t xb = cdl_gemv_x_bytes(t, K);
    if (!xb) return;
    double *wn = malloc(sizeof(double) * (size_t)N), xn;
    float *wf = rand_rows(N, K, (uint64_t)(N * 5 + K), wn), *xf = rand_rows(1, K, (uint64_t)K, &xn);
    size_t row, xs;
    char *w = mt_quantize_rows(t, wf, N, K, &row), *x = mt_quantize_rows(wt->vec_dot_type, xf, 1, K, &xs);
    size_t ws = row + 2 * wt->type_size; /* a wider stride than the row */
    char *wide = malloc(ws * (size_t)N);
    for (int64_t n = 0; n < N; n++) memcpy(wide + (size_t)n * ws, w + (size_t)n * row, row);
    void *xv = aligned_alloc(64, xb);
    cdl_gemv_prep(t, K, xf, xv);
    float *c = malloc(sizeof(float) * (size_t)(N + 1));
    c[N] = -7.0f;
    cdl_gemv_rows(t, K, N, wide, ws, xv, c);
    int bad = c[N] != -7.0f;
    CHECK_MSG(!bad, "%s gemv N %lld K %lld: wrote past the last row", wt->name, (long long)N, (long long)K);
    for (int64_t n = 0; n < N && !bad; n++) {
        float want;
        wt->vec_dot(K, &want, w + (size_t)n * row, x);
        if (fabs((double)c[n] - want) > REL * wn[n] * xn) {
            CHECK_MSG(0, "%s gemv N %lld K %lld: c[%lld] = %.9g, vec_dot %.9g", wt->name, (long long)N,
                      (long long)K, (long long)n, c[n], want);
            bad = 1;
        }
    }
    free(wn), free(wf), free(xf), free(w), free(x), free(wide), free(xv), free(c);
}

static void test_gemv(void) {
    static const int64_t Ks[] = {32, 96, 256, 288, 576, 2048 + 224, 384, 2048 + 128};
    int with = 0;
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        if (!cdl_gemv_x_bytes((candle_dtype)t, 256)) continue;
        with++;
        CHECK(cdl_gemv_x_bytes((candle_dtype)t, 256) % 64 == 0);
        CHECK(cdl_gemv_x_bytes((candle_dtype)t, 48) == 0); /* not whole blocks */
        for (int i = 0; i < 8; i++) {
            check_gemv((candle_dtype)t, 1, Ks[i]);
            check_gemv((candle_dtype)t, 19, Ks[i]);
        }
    }
    /* q4_0, q4_1, q5_0, q5_1 and q8_0 have kernels wherever the AVX2 quant kernels run */
    CHECK(with == 0 || with >= 5);
}

/* Through candle_matmul: x [B, M, K] times the transpose of w [N, K],
 * broadcast over the batch. */
static void check_matmul(candle_ctx *ctx, candle_dtype t, int64_t B, int64_t M, int64_t N, int64_t K) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    double *wn = malloc(sizeof(double) * (size_t)N), *xn = malloc(sizeof(double) * (size_t)(B * M));
    float *wf = rand_rows(N, K, (uint64_t)(N + 11), wn), *xf = rand_rows(B * M, K, (uint64_t)(M + 5), xn);
    int64_t wsh[2] = {N, K}, xsh[3] = {B, M, K};
    candle_tensor *w = candle_tensor_from_f32(ctx, t, 2, wsh, wf);
    candle_tensor *xt = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 3, xsh, xf);
    candle_tensor *y = candle_matmul(ctx, xt, candle_transpose(ctx, w, 0, 1));
    CHECK_MSG(y != NULL, "%s matmul: %s", wt->name, candle_errmsg(ctx));
    if (y) {
        bool quant = M <= cpu_qmm_max_m(t);
        const cpu_fast_kernel *k = cpu_fast_kernel_for(y);
        CHECK_MSG(k == (quant ? &cpu_fast_matmul_quant : &cpu_fast_matmul), "%s M %lld: kernel %s", wt->name,
                  (long long)M, k ? k->name : "reference");
        size_t xs;
        char *xq = mt_quantize_rows(wt->vec_dot_type, xf, B * M, K, &xs);
        const float *got = (const float *)tensor_ptr(y);
        int bad = 0;
        for (int64_t r = 0; r < B * M && !bad; r++)
            for (int64_t n = 0; n < N && !bad; n++) {
                float want;
                wt->vec_dot(K, &want, tensor_ptr(w) + n * w->stride[0], xq + (size_t)r * xs);
                /* the dequantizing GEMM keeps x in f32: q8 rounding of x only */
                double tol = (quant ? cdl_qgemm_rows_exact(t) ? 0 : REL : 2e-2) * wn[n] * xn[r];
                if (fabs((double)got[r * N + n] - want) > tol) {
                    CHECK_MSG(0, "%s B %lld M %lld N %lld: y[%lld][%lld] = %.9g, vec_dot %.9g", wt->name,
                              (long long)B, (long long)M, (long long)N, (long long)r, (long long)n,
                              got[r * N + n], want);
                    bad = 1;
                }
            }
        free(xq);
    }
    free(wn), free(xn), free(wf), free(xf);
    candle_ctx_reset(ctx, mark);
}

static void test_matmul_threads(int threads) {
    candle_ctx *ctx = mt_ctx_threads(true, threads);
    static const candle_dtype types[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_K,
                                         CANDLE_DTYPE_Q6_K, CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q4_Z128};
    for (int i = 0; i < 8; i++) {
        int64_t bs = cpu_dtype(types[i])->block_size, K = bs >= 256 ? 512 : bs == 128 ? 384 : 160;
        check_matmul(ctx, types[i], 2, 3, 37, K);
        check_matmul(ctx, types[i], 1, 16, 40, K);
        check_matmul(ctx, types[i], 3, 9, 17, K);
        check_matmul(ctx, types[i], 1, 1, 21, K);
        check_matmul(ctx, types[i], 1, 1, 70, K >= 384 ? 3 * K : 544); /* gemv: groups of 8 blocks and a tail */
        check_matmul(ctx, types[i], 1, cpu_qmm_max_m(types[i]) + 1, 19, K); /* past the threshold */
    }
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    test_rows();
    test_gemv();
    test_matmul_threads(1);
    test_matmul_threads(2);
}

int main(void) {
    cpu_set_always_parallel(true);
    return vnni_run_passes(run_checks, "test_qgemm");
}
