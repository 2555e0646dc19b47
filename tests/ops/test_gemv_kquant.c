/* The K-type matrix-vector kernels (q4_K, q5_K, q6_K in
 * src/quant/x86/kquants_avx2.c, reached through src/quant/gemv.c and the
 * M = 1 path of src/backend/cpu/fast_matmul_quant.c) against the traits
 * vec_dot on the same q8_K activation: K of 1 to 4 super-blocks, row
 * counts odd and even (the kernels take rows two at a time), rows inside a
 * wider stride, 1 and 2 threads. The integer super-block sums are exact and
 * the float steps those of the vec_dot, so the bound is tight: relative to
 * |w| |x| (which bounds sum |w_k x_k|). */
#include <math.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "quant/gemv-impl.h"

#define REL 1e-6

static const candle_dtype k_types[] = {CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_Q6_K};

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

static char *quantize(candle_dtype t, const float *v, int64_t n, int64_t k, size_t *row) {
    *row = candle_dtype_row_size(t, k);
    char *q = malloc(*row * (size_t)n);
    for (int64_t r = 0; r < n; r++) candle_dtype_info(t)->from_f32(v + r * k, q + (size_t)r * *row, k);
    return q;
}

/* candle_gemv_rows on N rows `pad` bytes apart beyond the row size. */
static void check_rows(candle_dtype t, int64_t N, int64_t K, size_t pad) {
    const candle_dtype_traits *wt = candle_dtype_info(t);
    size_t xb = candle_gemv_x_bytes(t, K);
    CHECK_MSG(xb > 0, "%s K %lld: no gemv kernel", wt->name, (long long)K);
    if (!xb) return;
    double *wn = malloc(sizeof(double) * (size_t)N), xn;
    float *wf = rand_rows(N, K, (uint64_t)(N * 13 + K), wn), *xf = rand_rows(1, K, (uint64_t)(K + 3), &xn);
    size_t row, xs;
    char *w = quantize(t, wf, N, K, &row), *x = quantize(wt->vec_dot_type, xf, 1, K, &xs);
    size_t ws = row + pad;
    char *wide = malloc(ws * (size_t)N);
    for (int64_t n = 0; n < N; n++) memcpy(wide + (size_t)n * ws, w + (size_t)n * row, row);
    void *xv = aligned_alloc(64, xb);
    candle_gemv_prep(t, K, xf, xv);
    CHECK_MSG(memcmp(xv, x, xs) == 0, "%s K %lld: prepared row differs from the q8_K row", wt->name, (long long)K);
    float *c = malloc(sizeof(float) * (size_t)(N + 1));
    c[N] = -7.0f;
    candle_gemv_rows(t, K, N, wide, ws, xv, c);
    int bad = c[N] != -7.0f;
    CHECK_MSG(!bad, "%s gemv N %lld K %lld: wrote past the last row", wt->name, (long long)N, (long long)K);
    for (int64_t n = 0; n < N && !bad; n++) {
        float want;
        wt->vec_dot(K, &want, w + (size_t)n * row, x);
        if (fabs((double)c[n] - want) > REL * wn[n] * xn) {
            CHECK_MSG(0, "%s gemv N %lld K %lld pad %zu: c[%lld] = %.9g, vec_dot %.9g", wt->name, (long long)N,
                      (long long)K, pad, (long long)n, c[n], want);
            bad = 1;
        }
    }
    free(wn), free(wf), free(xf), free(w), free(x), free(wide), free(xv), free(c);
}

static void test_rows(void) {
    static const int64_t Ns[] = {1, 2, 3, 4, 7, 19};
    for (int i = 0; i < 3; i++) {
        candle_dtype t = k_types[i];
        if (!candle_gemv_x_bytes(t, 256)) continue; /* no AVX2: the vec_dot path serves */
        CHECK(candle_gemv_x_bytes(t, 256) % 64 == 0);
        CHECK(candle_gemv_x_bytes(t, 288) == 0); /* not whole super-blocks */
        for (int64_t K = 256; K <= 1024; K += 256)
            for (int j = 0; j < 6; j++) {
                check_rows(t, Ns[j], K, 0);
                check_rows(t, Ns[j], K, 2 * candle_dtype_info(t)->type_size);
            }
    }
}

/* Through candle_matmul: x [1, 1, K] times the transpose of w [N, K]. */
static void check_matmul(candle_ctx *ctx, candle_dtype t, int64_t N, int64_t K) {
    const candle_dtype_traits *wt = candle_dtype_info(t);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    double *wn = malloc(sizeof(double) * (size_t)N), xn;
    float *wf = rand_rows(N, K, (uint64_t)(N + 17), wn), *xf = rand_rows(1, K, (uint64_t)(K + 9), &xn);
    int64_t wsh[2] = {N, K}, xsh[3] = {1, 1, K};
    candle_tensor *w = candle_tensor_from_f32(ctx, t, 2, wsh, wf);
    candle_tensor *xt = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 3, xsh, xf);
    candle_tensor *y = candle_matmul(ctx, xt, candle_transpose(ctx, w, 0, 1));
    CHECK_MSG(y != NULL, "%s matmul: %s", wt->name, candle_errmsg(ctx));
    if (y) {
        const cpu_fast_kernel *k = cpu_fast_kernel_for(y);
        CHECK_MSG(k == &cpu_fast_matmul_quant, "%s: kernel %s", wt->name, k ? k->name : "reference");
        size_t xs;
        char *xq = quantize(wt->vec_dot_type, xf, 1, K, &xs);
        const float *got = (const float *)tensor_ptr(y);
        int bad = 0;
        for (int64_t n = 0; n < N && !bad; n++) {
            float want;
            wt->vec_dot(K, &want, tensor_ptr(w) + n * w->stride[0], xq);
            if (fabs((double)got[n] - want) > REL * wn[n] * xn) {
                CHECK_MSG(0, "%s matmul N %lld K %lld: y[%lld] = %.9g, vec_dot %.9g", wt->name, (long long)N,
                          (long long)K, (long long)n, got[n], want);
                bad = 1;
            }
        }
        free(xq);
    }
    free(wn), free(wf), free(xf);
    candle_ctx_reset(ctx, mark);
}

static void test_matmul_threads(int threads) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    p.n_threads = threads;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
        CHECK_MSG(0, "ctx_init: %s", candle_last_errmsg());
        return;
    }
    /* N past several tasks of 32 rows with odd tails */
    static const int64_t Ns[] = {1, 33, 70, 129};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            check_matmul(ctx, k_types[i], Ns[j], 256);
            check_matmul(ctx, k_types[i], Ns[j], 1024);
        }
    candle_ctx_free(ctx);
}

int main(void) {
    cpu_set_always_parallel(true);
    test_rows();
    test_matmul_threads(1);
    test_matmul_threads(2);
    return test_done("test_gemv_kquant");
}
