/* Shared by the fast matmul tests (test_gemm_split.c, test_dense_gemm.c):
 * one product of a case's shape and layouts through candle_matmul, which
 * must take the fast f32 GEMM (fast_matmul.c), against a naive
 * double-precision product computed here. */
#ifndef CANDLE_TESTS_GEMM_CHECK_H
#define CANDLE_TESTS_GEMM_CHECK_H

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"

#define F32 CANDLE_DTYPE_F32
#define F16 CANDLE_DTYPE_F16
#define BF16 CANDLE_DTYPE_BF16
#define Q8 CANDLE_DTYPE_Q8_0

typedef struct gemm_case {
    int64_t M, K, N;
    bool weight_t;   /* b is the transpose of a row-major [N, K] weight */
    candle_dtype bt; /* b's dtype */
    mt_layout la, lb;
} gemm_case;

/* b's logical [K, N] values: a block weight is read back by whole rows. */
static double *gemm_b_values(const candle_tensor *w, const candle_tensor *b, const gemm_case *c) {
    const candle_dtype_traits *wt = cpu_dtype(w->dtype);
    if (!wt->is_quantized) return mt_values(b);
    double *v = malloc(sizeof(double) * (size_t)(c->K * c->N));
    float *row = malloc(sizeof(float) * (size_t)c->K);
    if (v && row)
        for (int64_t n = 0; n < c->N; n++) {
            wt->to_f32(tensor_ptr(w) + n * w->stride[0], row, c->K);
            for (int64_t k = 0; k < c->K; k++) v[k * c->N + n] = row[k];
        }
    free(row);
    return v;
}

/* label (the table, the thread count) starts each failure message. */
/* want[M, N] = a[M, K] b[K, N] in double */
static void gemm_ref(const double *a, const double *b, int64_t M, int64_t K, int64_t N, double *want) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += a[i * K + k] * b[k * N + j];
            want[i * N + j] = acc;
        }
}

static void gemm_check(candle_ctx *ctx, const gemm_case *c, const char *label, uint64_t seed) {
    char what[240];
    snprintf(what, sizeof what, "%s: M %lld K %lld N %lld %s %s a %s b %s", label, (long long)c->M,
             (long long)c->K, (long long)c->N, c->weight_t ? "weight^T" : "plain", candle_dtype_name(c->bt),
             mt_layout_names[c->la], mt_layout_names[c->lb]);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t as[2] = {c->M, c->K}, ws[2] = {c->N, c->K}, bs[2] = {c->K, c->N};
    candle_tensor *a = mt_input(ctx, F32, 2, as, c->la, seed, -1, 1);
    candle_tensor *w = mt_input(ctx, c->bt, 2, c->weight_t ? ws : bs, c->lb, seed + 1, -1, 1);
    candle_tensor *b = c->weight_t && w ? candle_transpose(ctx, w, 0, 1) : w;
    candle_tensor *y = a && b ? candle_matmul(ctx, a, b) : NULL;
    CHECK_MSG(y != NULL, "%s: %s", what, candle_errmsg(ctx));
    if (!y) {
        candle_ctx_clear_error(ctx);
        candle_ctx_reset(ctx, mark);
        return;
    }
    CHECK_MSG(cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s: fast matmul not chosen", what);
    double *av = mt_values(a), *bv = gemm_b_values(w, b, c), *got = mt_values(y);
    double *want = malloc(sizeof(double) * (size_t)(c->M * c->N));
    if (av && bv && got && want) {
        gemm_ref(av, bv, c->M, c->K, c->N, want);
        /* inputs are exact in their dtypes: only f32 accumulation rounding */
        double e = mt_nmse(got, want, c->M * c->N);
        if (c->bt == BF16 && e > 1e-10) {
            /* bf16 dot products (AVX512_BF16) round the activations to bf16
             * first: then exact against those, and near the exact product */
            for (int64_t i = 0; i < c->M * c->K; i++) av[i] = candle_bf16_to_f32(candle_f32_to_bf16((float)av[i]));
            double *want_r = malloc(sizeof(double) * (size_t)(c->M * c->N));
            if (want_r) gemm_ref(av, bv, c->M, c->K, c->N, want_r);
            double er = want_r ? mt_nmse(got, want_r, c->M * c->N) : 1;
            CHECK_MSG(er <= 1e-10 && e <= 1e-5, "%s: nmse %g (%g against bf16-rounded activations)", what, e, er);
            free(want_r);
        } else {
            CHECK_MSG(e <= 1e-10, "%s: nmse %g", what, e);
        }
    } else {
        CHECK_MSG(false, "%s: values unreadable", what);
    }
    free(av);
    free(bv);
    free(got);
    free(want);
    candle_ctx_reset(ctx, mark);
}

#endif
