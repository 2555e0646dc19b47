/* The f32 GEMM (fast_matmul.c) on the shapes that pick each way of
 * splitting a product between threads (M for plain B rows and tall A, N for
 * wide products and transposed or block-quantized weights), crossing the
 * blocking (MR 6, NR 16, MC 144, KC 256, NC 2048) with tails, on 1, 2 and
 * 4 threads (2-D grids of tasks), strided and offset operands, f32, f16,
 * bf16 and Q8_0 weights, and the matrix-vector path's row groups and tails,
 * against a naive double-precision product computed here. */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"

typedef struct gemm_case {
    int64_t M, K, N;
    bool weight_t;   /* b is the transpose of a row-major [N, K] weight */
    candle_dtype bt; /* b's dtype */
    mt_layout la, lb;
} gemm_case;

#define F32 CANDLE_DTYPE_F32
#define F16 CANDLE_DTYPE_F16
#define BF16 CANDLE_DTYPE_BF16
#define Q8 CANDLE_DTYPE_Q8_0

static const gemm_case cases[] = {
    /* square enough for a 2 x 2 grid on 4 threads */
    {200, 64, 260, false, F32, MT_CONTIG, MT_CONTIG},
    {210, 50, 270, true, F32, MT_CONTIG, MT_OFFSET},
    /* plain B, tall enough for M on 2 threads; K over one KC slice */
    {100, 300, 130, false, F32, MT_CONTIG, MT_CONTIG},
    {97, 257, 131, false, F32, MT_SLICED, MT_OFFSET},
    /* plain B, wide: N */
    {50, 70, 260, false, F32, MT_CONTIG, MT_CONTIG},
    {49, 33, 300, false, F32, MT_TRANSPOSED, MT_SLICED},
    /* N past one NC block, both ways */
    {60, 20, 2100, false, F32, MT_CONTIG, MT_CONTIG},
    {7, 18, 2065, false, F32, MT_OFFSET, MT_CONTIG},
    /* transposed weights: N when N > M, else M; M past MC */
    {150, 260, 200, true, F32, MT_CONTIG, MT_CONTIG},
    {200, 40, 140, true, F32, MT_SLICED, MT_CONTIG},
    {70, 100, 150, true, F16, MT_CONTIG, MT_CONTIG},
    {146, 77, 129, true, BF16, MT_OFFSET, MT_CONTIG},
    /* too small in both for a split with every thread's share of MR/NR */
    {11, 9, 40, false, F32, MT_CONTIG, MT_CONTIG},
    {66, 5, 17, true, F32, MT_CONTIG, MT_CONTIG},
    /* block-quantized weights dequantized into the GEMM (M over the integer
     * kernels' limit, lowered in main) */
    {70, 64, 150, true, Q8, MT_CONTIG, MT_CONTIG},
    {150, 96, 40, true, Q8, MT_SLICED, MT_CONTIG},
    /* ... and at matrix-vector sizes (CANDLE_QMM_MAX_M=0 sends every row
     * count here; the matrix-vector path reads plain float rows only) */
    {1, 64, 40, true, Q8, MT_CONTIG, MT_CONTIG},
    {1, 576, 70, true, Q8, MT_CONTIG, MT_CONTIG},
    {2, 1536, 2100, true, Q8, MT_CONTIG, MT_CONTIG},
    {3, 96, 33, true, Q8, MT_SLICED, MT_CONTIG},
    /* matrix-vector (M <= 4): 8- and 4-row passes, row and K tails */
    {1, 1029, 77, true, F32, MT_SLICED, MT_CONTIG},
    {3, 2051, 45, true, F32, MT_CONTIG, MT_OFFSET},
    {1, 515, 40, true, F16, MT_CONTIG, MT_CONTIG},
    {2, 300, 33, true, BF16, MT_OFFSET, MT_CONTIG},
};

/* b's logical [K, N] values: a block weight is read back by whole rows. */
static double *b_values(const candle_tensor *w, const candle_tensor *b, const gemm_case *c) {
    const candle_dtype_traits *wt = candle_dtype_info(w->dtype);
    if (!wt->is_quantized) return mt_values(b);
    double *v = malloc(sizeof(double) * (size_t)(c->K * c->N));
    float *row = malloc(sizeof(float) * (size_t)c->K);
    for (int64_t n = 0; n < c->N; n++) {
        wt->to_f32(tensor_ptr(w) + n * w->stride[0], row, c->K);
        for (int64_t k = 0; k < c->K; k++) v[k * c->N + n] = row[k];
    }
    free(row);
    return v;
}

static void check_case(candle_ctx *ctx, const gemm_case *c, int threads, uint64_t seed) {
    char what[200];
    snprintf(what, sizeof what, "M %lld K %lld N %lld %s %s a %s b %s, %d thread%s", (long long)c->M,
             (long long)c->K, (long long)c->N, c->weight_t ? "weight^T" : "plain", candle_dtype_name(c->bt),
             mt_layout_names[c->la], mt_layout_names[c->lb], threads, threads > 1 ? "s" : "");
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t as[2] = {c->M, c->K}, ws[2] = {c->N, c->K}, bs[2] = {c->K, c->N};
    candle_tensor *a = mt_input(ctx, F32, 2, as, c->la, seed, -1, 1);
    candle_tensor *w = mt_input(ctx, c->bt, 2, c->weight_t ? ws : bs, c->lb, seed + 1, -1, 1);
    candle_tensor *b = c->weight_t ? candle_transpose(ctx, w, 0, 1) : w;
    candle_tensor *y = a && b ? candle_matmul(ctx, a, b) : NULL;
    CHECK_MSG(y != NULL, "%s: %s", what, candle_errmsg(ctx));
    if (!y) {
        candle_ctx_clear_error(ctx);
        candle_ctx_reset(ctx, mark);
        return;
    }
    CHECK_MSG(cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s: fast matmul not chosen", what);
    double *av = mt_values(a), *bv = b_values(w, b, c), *got = mt_values(y);
    double *want = malloc(sizeof(double) * (size_t)(c->M * c->N));
    if (av && bv && got && want) {
        for (int64_t i = 0; i < c->M; i++)
            for (int64_t j = 0; j < c->N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < c->K; k++) acc += av[i * c->K + k] * bv[k * c->N + j];
                want[i * c->N + j] = acc;
            }
        double e = mt_nmse(got, want, c->M * c->N);
        CHECK_MSG(e <= 1e-10, "%s: nmse %g", what, e);
    } else {
        CHECK_MSG(false, "%s: values unreadable", what);
    }
    free(av);
    free(bv);
    free(got);
    free(want);
    candle_ctx_reset(ctx, mark);
}

int main(void) {
    /* every quantized product goes to the dequantizing GEMM (read once, at
     * first use) */
    setenv("CANDLE_QMM_MAX_M", "0", 1);
    cpu_set_always_parallel(true);
    /* 4 threads (oversubscribed here) take the 2-D grids */
    for (int threads = 1; threads <= 4; threads *= 2) {
        candle_ctx *ctx = NULL;
        candle_ctx_params p = candle_ctx_default_params();
        p.eager = true;
        p.n_threads = threads;
        if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
            fprintf(stderr, "ctx_init failed: %s\n", candle_last_errmsg());
            return 1;
        }
        CHECK(candle_ctx_backend(ctx)->n_threads == threads);
        uint64_t seed = 1;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(ctx, &cases[i], threads, seed += 2);
        candle_ctx_free(ctx);
    }
    return test_done("test_gemm_split");
}
