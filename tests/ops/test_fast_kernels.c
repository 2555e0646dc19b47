/* Every fast CPU kernel against its reference kernel (src/backend/cpu/ref/),
 * run on the same node: odd sizes and tails, unaligned and strided inputs,
 * both primitive tables (scalar and, where the CPU has it, AVX2) and 1 and 2
 * threads (with every op split across the threads, however small). Each case
 * also checks that the fast kernel, not the reference, computed it. */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "ref-node.h"

static candle_ctx *ctx_threads(int n) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    p.n_threads = n;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
        fprintf(stderr, "ctx_init failed: %s\n", candle_last_errmsg());
        exit(1);
    }
    return ctx;
}

static const char *g_cfg = ""; /* "avx2 x2" etc., for messages */

/* y matches the reference within bound and, when want_fast, came from a
 * fast kernel (layouts a fast kernel declines run the reference twice). */
static void check_vs_ref(candle_ctx *ctx, const candle_tensor *y, cpu_kernel_fn ref, double bound,
                         bool want_fast, const char *what) {
    CHECK_MSG(y != NULL, "%s [%s]: %s", what, g_cfg, candle_errmsg(ctx));
    if (!y) {
        candle_ctx_clear_error(ctx);
        return;
    }
    if (want_fast) CHECK_MSG(cpu_fast_kernel_for(y) != NULL, "%s [%s]: no fast kernel chosen", what, g_cfg);
    candle_tensor *r = ref_of(ctx, y, ref);
    double *got = mt_values(y), *want = r ? mt_values(r) : NULL;
    if (got && want) {
        double e = mt_nmse(got, want, candle_tensor_numel(y));
        CHECK_MSG(e <= bound, "%s [%s]: nmse %g > %g", what, g_cfg, e, bound);
    }
    free(got);
    free(want);
}

static void check_fast(candle_ctx *ctx, const candle_tensor *y, cpu_kernel_fn ref, double bound,
                       const char *what) {
    check_vs_ref(ctx, y, ref, bound, true, what);
}

/* ---- matmul ---- */

typedef struct mm_case {
    int64_t M, K, N;
} mm_case;

/* Crossing the blocking boundaries: MR 6, NR 16, MC 144, KC 256, the
 * matrix-vector limit M <= 4, the dot-tile path (M <= 64, 4 x 3 tiles, K in
 * chunks of 1024). */
static const mm_case mm_cases[] = {
    {1, 1, 1},    {1, 7, 5},     {1, 64, 33},   {2, 33, 17},  {3, 17, 19},   {4, 100, 37},
    {5, 300, 70}, {6, 16, 16},   {7, 257, 33},  {13, 31, 47}, {37, 513, 29}, {64, 64, 64},
    {150, 260, 40}, {9, 0, 5},     {6, 1100, 7},  {65, 40, 20},
};

/* a [M, K] in layout la; b as the transpose of a [N, K] weight (wt) or a
 * plain [K, N] (in layout lb). */
static void check_matmul_f32(candle_ctx *ctx, const mm_case *c, mt_layout la, bool wt, mt_layout lb,
                             candle_dtype bdt, uint64_t seed) {
    char what[160];
    int64_t as[2] = {c->M, c->K}, ws[2] = {c->N, c->K}, bs[2] = {c->K, c->N};
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    candle_tensor *a = mt_input(ctx, CANDLE_DTYPE_F32, 2, as, la, seed, -1, 1);
    candle_tensor *b = wt ? candle_transpose(ctx, mt_input(ctx, bdt, 2, ws, lb, seed + 1, -1, 1), 0, 1)
                          : mt_input(ctx, bdt, 2, bs, lb, seed + 1, -1, 1);
    snprintf(what, sizeof what, "matmul M %lld K %lld N %lld a %s b %s %s %s", (long long)c->M,
             (long long)c->K, (long long)c->N, mt_layout_names[la], wt ? "weight^T" : "plain",
             mt_layout_names[lb], candle_dtype_name(bdt));
    /* bf16 dot products (AVX512_BF16) round the activations to bf16:
     * test_dense_gemm checks them exactly against that */
    double bound = bdt == CANDLE_DTYPE_BF16 && cpu_simd_get()->gemm_bf16_ukr2 ? 1e-5 : 1e-10;
    if (a && b) check_fast(ctx, candle_matmul(ctx, a, b), cpu_ref_matmul, bound, what);
    candle_ctx_reset(ctx, mark);
}

static void test_matmul(candle_ctx *ctx) {
    static const mt_layout lays[] = {MT_CONTIG, MT_TRANSPOSED, MT_SLICED, MT_OFFSET};
    uint64_t seed = 1;
    /* every layout of one operand with the other contiguous (the large
     * cases, slow in the reference, only in two layouts) */
    for (size_t i = 0; i < sizeof mm_cases / sizeof mm_cases[0]; i++)
        for (int la = 0; la < 4; la++)
            for (int lb = 0; lb < 4; lb++) {
                const mm_case *c = &mm_cases[i];
                if ((la && lb) || (c->M * c->K * c->N > 100000 && lb + la > 1)) continue;
                check_matmul_f32(ctx, &mm_cases[i], lays[la], true, lays[lb], CANDLE_DTYPE_F32, seed += 2);
                check_matmul_f32(ctx, &mm_cases[i], lays[la], false, lays[lb], CANDLE_DTYPE_F32, seed += 2);
            }
    /* f16 / bf16 weights (the weight form: f32 activations, f32 result) */
    for (size_t i = 0; i < sizeof mm_cases / sizeof mm_cases[0]; i++)
        for (int lb = 0; lb < 4; lb += 3) {
            check_matmul_f32(ctx, &mm_cases[i], MT_CONTIG, true, lays[lb], CANDLE_DTYPE_F16, seed += 2);
            check_matmul_f32(ctx, &mm_cases[i], MT_TRANSPOSED, true, lays[lb], CANDLE_DTYPE_BF16, seed += 2);
        }
    /* batched, with a broadcast batch dim on either side */
    int64_t a3[3] = {3, 5, 40}, b3[3] = {1, 40, 21}, a4[3] = {1, 2, 24}, b4[3] = {4, 24, 18};
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    check_fast(ctx, candle_matmul(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 3, a3, MT_CONTIG, 7, -1, 1),
                                  mt_input(ctx, CANDLE_DTYPE_F32, 3, b3, MT_BROADCAST, 8, -1, 1)),
               cpu_ref_matmul, 1e-10, "batched matmul, b broadcast");
    check_fast(ctx, candle_matmul(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 3, a4, MT_BROADCAST, 9, -1, 1),
                                  mt_input(ctx, CANDLE_DTYPE_F32, 3, b4, MT_TRANSPOSED, 10, -1, 1)),
               cpu_ref_matmul, 1e-10, "batched matmul, a broadcast");
    /* a batched f16 weight [2, N, K] against x [2, 1, K] (matrix-vector per batch) */
    int64_t w5[3] = {2, 37, 70}, x5[3] = {2, 1, 70};
    check_fast(ctx, candle_matmul(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 3, x5, MT_CONTIG, 11, -1, 1),
                                  candle_transpose(ctx, mt_input(ctx, CANDLE_DTYPE_F16, 3, w5, MT_CONTIG, 12, -1, 1), -1, -2)),
               cpu_ref_matmul, 1e-10, "batched f16 weights");
    candle_ctx_reset(ctx, mark);
}

/* ---- quantized weights ---- */

/* x quantized to the weight's vec_dot_type and back: the exact input the
 * fast path multiplies, so its result can be checked tightly. */
static double *x_as_quantized(const candle_tensor *x, candle_dtype vdt, int64_t M, int64_t K) {
    const candle_dtype_traits *vt = cpu_dtype(vdt);
    double *xv = mt_values(x);
    float *row = malloc(sizeof(float) * (size_t)K), *back = malloc(sizeof(float) * (size_t)K);
    void *q = malloc(candle_dtype_row_size(vdt, K));
    for (int64_t m = 0; xv && m < M; m++) {
        for (int64_t k = 0; k < K; k++) row[k] = (float)xv[m * K + k];
        vt->from_f32(row, q, K);
        vt->to_f32(q, back, K);
        for (int64_t k = 0; k < K; k++) xv[m * K + k] = back[k];
    }
    free(row);
    free(back);
    free(q);
    return xv;
}

static void check_quant(candle_ctx *ctx, candle_dtype wdt, int64_t M, int64_t N, int64_t K, mt_layout lx) {
    const candle_dtype_traits *wt = cpu_dtype(wdt);
    const candle_dtype_traits *vt = cpu_dtype(wt->vec_dot_type);
    if (!wt->vec_dot || !wt->to_f32 || !wt->from_f32 || !vt->from_f32 || !vt->to_f32) return;
    char what[128];
    snprintf(what, sizeof what, "%s weight M %lld N %lld K %lld x %s", wt->name, (long long)M,
             (long long)N, (long long)K, mt_layout_names[lx]);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t ws[2] = {N, K}, xs[2] = {M, K};
    candle_tensor *w = mt_input(ctx, wdt, 2, ws, MT_CONTIG, (uint64_t)(M * 31 + N), -1, 1);
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, xs, lx, (uint64_t)(K + 5), -1, 1);
    candle_tensor *y = candle_matmul(ctx, x, candle_transpose(ctx, w, 0, 1));
    if (M > cpu_qmm_max_m(wdt)) {
        /* prefill: weights dequantized into the f32 GEMM, exact up to f32 sums */
        CHECK_MSG(y && cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s [%s]: dequantizing GEMM not chosen (%s)",
                  what, g_cfg, candle_errmsg(ctx));
        check_fast(ctx, y, cpu_ref_matmul, 1e-10, what);
        candle_ctx_reset(ctx, mark);
        return;
    }
    CHECK_MSG(y && cpu_fast_kernel_for(y) == &cpu_fast_matmul_quant, "%s [%s]: quantized path not chosen (%s)",
              what, g_cfg, candle_errmsg(ctx));
    /* against the product of dequantized w and quantized-dequantized x */
    double *got = mt_values(y), *xv = x_as_quantized(x, wt->vec_dot_type, M, K);
    float *wrow = malloc(sizeof(float) * (size_t)K);
    double *want = malloc(sizeof(double) * (size_t)(M * N));
    for (int64_t n = 0; n < N && xv; n++) {
        wt->to_f32(tensor_ptr(w) + n * w->stride[0], wrow, K);
        for (int64_t m = 0; m < M; m++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += xv[m * K + k] * wrow[k];
            want[m * N + n] = acc;
        }
    }
    if (got && xv) {
        /* q8_1 also carries each block's sum, rounded to f16, which the
         * q4_1/q5_1 dot products use for the weight's offset term */
        double bound = wt->vec_dot_type == CANDLE_DTYPE_Q8_1 ? 1e-5 : 1e-8;
        double e = mt_nmse(got, want, M * N);
        CHECK_MSG(e <= bound, "%s [%s]: nmse %g vs quantized-x product", what, g_cfg, e);
    }
    /* and near the reference kernel (which keeps x in f32): q8 rounding only */
    if (y) check_fast(ctx, y, cpu_ref_matmul, 1e-3, what);
    free(got);
    free(xv);
    free(wrow);
    free(want);
    candle_ctx_reset(ctx, mark);
}

static void test_quant(candle_ctx *ctx) {
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        int64_t bs = cpu_dtype((candle_dtype)t)->block_size;
        int64_t K = bs >= 256 ? 256 : 2 * bs + bs; /* several blocks, an odd count for small blocks */
        check_quant(ctx, (candle_dtype)t, 1, 37, K, MT_CONTIG);
        check_quant(ctx, (candle_dtype)t, 4, 19, K, MT_OFFSET);
        check_quant(ctx, (candle_dtype)t, 3, 8, K, MT_TRANSPOSED);
        check_quant(ctx, (candle_dtype)t, 5, 19, K, MT_OFFSET);
        check_quant(ctx, (candle_dtype)t, 13, 37, 2 * K, MT_TRANSPOSED);
        check_quant(ctx, (candle_dtype)t, 6, 5, 1280, MT_CONTIG); /* dot tiles, K over one chunk */
    }
}

/* ---- elementwise, softmax, norms, rope ---- */

/* GELU (erf)'s contract on x86: 0.5 x (1 + erf(x / sqrt 2)) with erf within
 * 3.4e-7 absolute (a rational fit), so |y - ref| <= 1.7e-7 |x| plus the
 * rounding of the products. Between x = -4.24 and 0 the error is absolute,
 * as in PyTorch's f32 form, not relative (below, erfc keeps the digits), so
 * nmse over a row of such values alone would say nothing. */
static void check_gelu(candle_ctx *ctx, const candle_tensor *x, const candle_tensor *y, const char *what) {
    candle_tensor *r = ref_of(ctx, y, cpu_ref_unary);
    double *in = mt_values(x), *got = mt_values(y), *want = r ? mt_values(r) : NULL;
    int64_t n = candle_tensor_numel(y), bad = 0;
    for (int64_t k = 0; in && got && want && k < n; k++)
        bad += !(fabs(got[k] - want[k]) <= 2e-7 * fabs(in[k]) + 2.4e-7 * fabs(want[k]));
    CHECK_MSG(in && got && want && bad == 0, "%s [%s]: %lld of %lld outside the bound", what, g_cfg,
              (long long)bad, (long long)n);
    free(in);
    free(got);
    free(want);
}

static const int64_t row_sizes[] = {1, 7, 8, 9, 33, 100};

static void test_unary(candle_ctx *ctx) {
    char what[96];
    for (int op = CANDLE_OP_NEG; op <= CANDLE_OP_CLAMP; op++)
        for (size_t i = 0; i < sizeof row_sizes / sizeof row_sizes[0]; i++)
            for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++) {
                if (lay == MT_TRANSPOSED) continue; /* last dim strided: reference only */
                bool pos = op == CANDLE_OP_LOG || op == CANDLE_OP_SQRT || op == CANDLE_OP_RSQRT;
                int64_t shape[2] = {5, row_sizes[i]};
                candle_ctx_mark mark = candle_ctx_get_mark(ctx);
                candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, (mt_layout)lay,
                                            (uint64_t)(op * 100 + (int)i), pos ? 0.01 : -6, 6);
                candle_tensor *y = op == CANDLE_OP_AFFINE ? candle_affine(ctx, x, 1.5, -0.25)
                                   : op == CANDLE_OP_CLAMP ? candle_clamp(ctx, x, -0.5, 2.0)
                                                           : candle_unary(ctx, (candle_op)op, x);
                snprintf(what, sizeof what, "%s n %lld %s", candle_op_name((candle_op)op),
                         (long long)row_sizes[i], mt_layout_names[lay]);
                if (op == CANDLE_OP_GELU_ERF) check_gelu(ctx, x, y, what);
                else check_vs_ref(ctx, y, cpu_ref_unary, 1e-10, lay != MT_SLICED, what);
                candle_ctx_reset(ctx, mark);
            }
    /* GELU (erf) over [-10, 10] in steps of 0.01 and at its special values */
    {
        candle_ctx_mark mark = candle_ctx_get_mark(ctx);
        int64_t n = 2001;
        float xs[2001];
        for (int64_t k = 0; k < n; k++) xs[k] = (float)(k - 1000) / 100.0f;
        candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &n, xs);
        check_gelu(ctx, x, candle_gelu(ctx, x), "gelu over [-10, 10]");
        static const float sp[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 100.0f, -100.0f, 3e38f};
        int64_t ns = (int64_t)(sizeof sp / sizeof sp[0]);
        float out[sizeof sp / sizeof sp[0]];
        candle_tensor *y = candle_gelu(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &ns, sp));
        CHECK(y && candle_tensor_to_f32(y, out) == CANDLE_OK);
        if (y) {
            CHECK_MSG(out[0] == INFINITY && isnan(out[2]) && out[3] == 0 && out[4] == 0 && out[5] == 100.0f &&
                          out[6] <= 0 && out[6] > -1e-30f && out[7] == 3e38f,
                      "gelu specials [%s]: %g %g %g %g %g %g %g %g", g_cfg, out[0], out[1], out[2], out[3], out[4],
                      out[5], out[6], out[7]);
        }
        candle_ctx_reset(ctx, mark);
    }
    /* exp at the edges of its range */
    static const float xs[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, 88.7f, 89.0f, -87.0f, -100.0f, 1e-8f,
                               INFINITY, -INFINITY, NAN, 20.5f, -20.5f, 0.34657359f, -0.34657359f};
    int64_t n = (int64_t)(sizeof xs / sizeof xs[0]);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    candle_tensor *y = candle_exp(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &n, xs));
    float out[sizeof xs / sizeof xs[0]];
    CHECK(y && candle_tensor_to_f32(y, out) == CANDLE_OK);
    for (int64_t i = 0; y && i < n; i++) {
        double want = exp((double)xs[i]);
        if (isnan(xs[i])) CHECK_MSG(isnan(out[i]), "exp(nan) = %g", out[i]);
        else if (isinf(want) || want > 3.4e38) CHECK_MSG(isinf(out[i]) || out[i] > 3.3e38f, "exp(%g) = %g", xs[i], out[i]);
        else if (want < 1.2e-38) CHECK_MSG(out[i] < 1.2e-38f && out[i] >= 0, "exp(%g) = %g", xs[i], out[i]);
        else CHECK_MSG(fabs(out[i] - want) <= 4e-7 * want, "exp(%g) = %.9g, want %.9g", xs[i], out[i], want);
    }
    candle_ctx_reset(ctx, mark);
}

/* sigmoid, silu and gelu (tanh) across their range: both tails, zero,
 * infinities and NaN, within 1e-6 relative (or 1e-30 absolute) of the
 * double formulas. */
static void test_sigmoid_family(candle_ctx *ctx) {
    static const float xs[] = {-150.0f, -100.0f, -88.0f, -40.0f, -20.0f, -9.0f, -1.0f, -1e-8f, -0.0f, 0.0f, 1e-8f,
                               0.5f, 3.0f, 9.0f, 20.0f, 40.0f, 88.0f, 100.0f, INFINITY, -INFINITY, NAN};
    static const candle_op ops[] = {CANDLE_OP_SIGMOID, CANDLE_OP_SILU, CANDLE_OP_GELU_TANH};
    int64_t n = (int64_t)(sizeof xs / sizeof xs[0]);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        candle_ctx_mark mark = candle_ctx_get_mark(ctx);
        candle_tensor *y = candle_unary(ctx, ops[o], candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &n, xs));
        float out[sizeof xs / sizeof xs[0]];
        CHECK(y && candle_tensor_to_f32(y, out) == CANDLE_OK);
        for (int64_t i = 0; y && i < n; i++) {
            double x = xs[i], sig = 1.0 / (1.0 + exp(-x));
            double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
            double want = ops[o] == CANDLE_OP_SIGMOID ? sig
                          : ops[o] == CANDLE_OP_SILU  ? x / (1.0 + exp(-x))
                                                      : x / (1.0 + exp(-2.0 * u)); /* no cancellation */
            if (isinf(x)) want = ops[o] == CANDLE_OP_SIGMOID ? (x > 0 ? 1.0 : 0.0) : (x > 0 ? x : NAN);
            bool ok = isnan(want) ? isnan(out[i])
                                  : (want == out[i] || fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-30);
            CHECK_MSG(ok, "%s(%g) = %.9g, want %.9g [%s]", candle_op_name(ops[o]), x, out[i], want, g_cfg);
        }
        candle_ctx_reset(ctx, mark);
    }
}

static void test_binary(candle_ctx *ctx) {
    char what[96];
    for (int op = CANDLE_OP_ADD; op <= CANDLE_OP_POW; op++)
        for (size_t i = 0; i < sizeof row_sizes / sizeof row_sizes[0]; i++)
            for (int form = 0; form < 4; form++) {
                int64_t shape[2] = {6, row_sizes[i]}, row[1] = {row_sizes[i]}, col[2] = {6, 1};
                bool pos = op == CANDLE_OP_POW || op == CANDLE_OP_DIV;
                candle_ctx_mark mark = candle_ctx_get_mark(ctx);
                candle_tensor *a = mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, form == 3 ? MT_SLICED : MT_CONTIG,
                                            (uint64_t)(op + 7 * (int)i), pos ? 0.1 : -3, 3);
                candle_tensor *b = form == 1   ? mt_input(ctx, CANDLE_DTYPE_F32, 1, row, MT_CONTIG, 3, pos ? 0.1 : -3, 3)
                                   : form == 2 ? mt_input(ctx, CANDLE_DTYPE_F32, 2, col, MT_CONTIG, 4, pos ? 0.1 : -3, 3)
                                               : mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, form == 3 ? MT_OFFSET : MT_CONTIG, 5,
                                                          pos ? 0.1 : -3, 3);
                snprintf(what, sizeof what, "%s n %lld form %d", candle_op_name((candle_op)op),
                         (long long)row_sizes[i], form);
                check_vs_ref(ctx, candle_binary(ctx, (candle_op)op, a, b), cpu_ref_binary, 1e-10, form != 3, what);
                candle_ctx_reset(ctx, mark);
            }
}

static void test_softmax_norm(candle_ctx *ctx) {
    char what[96];
    static const int64_t sizes[] = {1, 5, 8, 17, 100, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++) {
            if (lay == MT_TRANSPOSED) continue;
            int64_t shape[2] = {4, sizes[i]}, wshape[1] = {sizes[i]};
            candle_ctx_mark mark = candle_ctx_get_mark(ctx);
            candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, (mt_layout)lay, 40 + i, -8, 8);
            snprintf(what, sizeof what, "softmax n %lld %s", (long long)sizes[i], mt_layout_names[lay]);
            bool fast = lay != MT_SLICED;
            check_vs_ref(ctx, candle_softmax(ctx, x, -1), cpu_ref_softmax, 1e-10, fast, what);
            check_vs_ref(ctx, candle_log_softmax(ctx, x, 1), cpu_ref_softmax, 1e-10, fast, what);
            snprintf(what, sizeof what, "rms_norm n %lld %s", (long long)sizes[i], mt_layout_names[lay]);
            candle_tensor *w = mt_input(ctx, CANDLE_DTYPE_F32, 1, wshape, MT_CONTIG, 50 + i, -2, 2);
            check_vs_ref(ctx, candle_rms_norm(ctx, x, w, 1e-5), cpu_ref_rms_norm, 1e-10, fast, what);
            check_vs_ref(ctx, candle_rms_norm(ctx, x, NULL, 1e-6), cpu_ref_rms_norm, 1e-10, fast, what);
            snprintf(what, sizeof what, "layer_norm n %lld %s", (long long)sizes[i], mt_layout_names[lay]);
            candle_tensor *bias = mt_input(ctx, CANDLE_DTYPE_F32, 1, wshape, MT_CONTIG, 60 + i, -1, 1);
            check_vs_ref(ctx, candle_layer_norm(ctx, x, w, bias, 1e-12), cpu_ref_layer_norm, 1e-10, fast, what);
            check_vs_ref(ctx, candle_layer_norm(ctx, x, NULL, NULL, 1e-5), cpu_ref_layer_norm, 1e-10, fast, what);
            candle_ctx_reset(ctx, mark);
        }
    /* masked entries (-inf) in a softmax row */
    float v[6] = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f, 3.0f};
    int64_t s6[2] = {2, 3};
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, s6, v);
    check_fast(ctx, candle_softmax(ctx, x, -1), cpu_ref_softmax, 1e-10, "softmax with -inf");
    candle_ctx_reset(ctx, mark);
}

/* scaled: 0 plain, 1 freq factors, 2 YaRN, 3 both (with attn_factor). */
static void test_rope(candle_ctx *ctx) {
    char what[96];
    int32_t pos[5] = {7, 0, 3, 100, 2};
    static const float ff[6] = {1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 0.75f};
    for (int scaled = 0; scaled < 4; scaled++)
        for (int mode = 0; mode < 2; mode++)
            for (int nd = 0; nd < 2; nd++)
                for (int use_pos = 0; use_pos < 2; use_pos++) {
                    int64_t shape[4] = {2, 5, 3, 12}, ps[1] = {5}, nf = nd ? 4 : 6;
                    candle_rope_params p = {.mode = (candle_rope_mode)mode, .n_dims = nd ? 8 : 0,
                                            .freq_base = 10000.0, .freq_scale = 0.5,
                                            .pos_offset = 11};
                    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
                    if (scaled & 1) p.freq_factors = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &nf, ff);
                    if (scaled & 2) {
                        p.ext_factor = 1.0;
                        p.n_ctx_orig = 16;
                        p.beta_fast = 8;
                        p.attn_factor = scaled == 3 ? 0.9 : 0;
                    }
                    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 4, shape, use_pos ? MT_OFFSET : MT_CONTIG, 60, -1, 1);
                    candle_tensor *pt = use_pos ? candle_tensor_from_i32(ctx, 1, ps, pos) : NULL;
                    snprintf(what, sizeof what, "rope mode %d n_dims %d positions %d scaled %d",
                             mode, p.n_dims, use_pos, scaled);
                    check_fast(ctx, candle_rope(ctx, x, pt, &p), cpu_ref_rope, 1e-10, what);
                    candle_ctx_reset(ctx, mark);
                }
}

/* ---- attention ---- */

typedef struct attn_case {
    int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
    bool causal, mask, strided_kv;
} attn_case;

static void check_attention(candle_ctx *ctx, const attn_case *c, candle_dtype dt, uint64_t seed) {
    char what[160];
    snprintf(what, sizeof what, "attention %s B %lld Hq %lld Hkv %lld Sq %lld Skv %lld D %lld Dv %lld%s%s%s",
             candle_dtype_name(dt), (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Skv, (long long)c->D, (long long)c->Dv, c->causal ? " causal" : "",
             c->mask ? " mask" : "", c->strided_kv ? " cache view" : "");
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t qs[4] = {c->B, c->Hq, c->Sq, c->D};
    int64_t extra = c->strided_kv ? 5 : 0; /* a KV cache longer than its filled part */
    int64_t ks[4] = {c->B, c->Hkv, c->Skv + extra, c->D}, vs[4] = {c->B, c->Hkv, c->Skv + extra, c->Dv};
    candle_tensor *q = mt_input(ctx, dt, 4, qs, MT_CONTIG, seed, -2, 2);
    candle_tensor *k = mt_input(ctx, dt, 4, ks, MT_CONTIG, seed + 1, -2, 2);
    candle_tensor *v = mt_input(ctx, dt, 4, vs, MT_CONTIG, seed + 2, -2, 2);
    if (c->strided_kv) {
        k = candle_narrow(ctx, k, 2, 0, c->Skv);
        v = candle_narrow(ctx, v, 2, 0, c->Skv);
    }
    candle_tensor *mask = NULL;
    if (c->mask) {
        /* [Sq, Skv] with -inf holes, and one query row fully masked */
        int64_t ms[2] = {c->Sq, c->Skv};
        float *mv = malloc(sizeof(float) * (size_t)(c->Sq * c->Skv));
        uint64_t s = seed + 3;
        for (int64_t i = 0; i < c->Sq * c->Skv; i++) {
            double u = mt_uniform(&s, 0, 1);
            mv[i] = u < 0.2 ? -INFINITY : (float)(u - 0.5);
        }
        for (int64_t j = 0; j < c->Skv; j++) mv[j] = -INFINITY;
        mask = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, ms, mv);
        free(mv);
    }
    check_fast(ctx, candle_attention(ctx, q, k, v, mask, 0.0, c->causal), cpu_ref_attention, mt_bound(dt), what);
    candle_ctx_reset(ctx, mark);
}

static void test_attention(candle_ctx *ctx) {
    static const attn_case cases[] = {
        {1, 1, 1, 1, 1, 8, 8, false, false, false},
        {1, 4, 4, 3, 3, 16, 16, true, false, false},
        {2, 6, 2, 5, 70, 12, 9, false, false, true},   /* GQA, Dv != D, keys over a tile */
        {1, 6, 3, 1, 150, 64, 64, true, false, true},  /* decoding step against a cache */
        {1, 4, 2, 40, 130, 32, 32, true, false, false}, /* causal prefill after context */
        {2, 2, 1, 7, 65, 20, 20, false, true, false},  /* additive mask, one row all -inf */
        {1, 3, 3, 9, 9, 17, 5, true, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_attention(ctx, &cases[i], CANDLE_DTYPE_F32, 70 + 10 * i);
        if (i % 2) check_attention(ctx, &cases[i], i % 4 == 1 ? CANDLE_DTYPE_F16 : CANDLE_DTYPE_BF16, 71 + 10 * i);
    }
}

static void run_all(const char *isa, int threads) {
    static char cfg[32];
    snprintf(cfg, sizeof cfg, "%s x%d", isa, threads);
    g_cfg = cfg;
    if (!cpu_simd_force(isa)) return;
    candle_ctx *ctx = ctx_threads(threads);
    CHECK(candle_ctx_backend(ctx)->n_threads == threads);
    test_matmul(ctx);
    test_quant(ctx);
    test_unary(ctx);
    test_sigmoid_family(ctx);
    test_binary(ctx);
    test_softmax_norm(ctx);
    test_rope(ctx);
    test_attention(ctx);
    candle_ctx_free(ctx);
}

int main(void) {
    cpu_set_always_parallel(true);
    const char *best = cpu_simd_get()->name;
    /* tables this CPU lacks are skipped (cpu_simd_force fails) */
    static const char *const isas[] = {"scalar", "avx2", "avx512", "neon"};
    /* 1 and 2 threads on the table this CPU uses; 2 threads (every split
     * exercised) on the others, which share the drivers */
    for (int i = 0; i < 4; i++)
        for (int t = 1; t <= 2; t++)
            if (t == 2 || !strcmp(isas[i], best)) run_all(isas[i], t);
    cpu_simd_force("auto");
    /* the info text names the features and the chosen kernels */
    char info[2048];
    candle_cpu_info(info, sizeof info);
#if defined(__aarch64__)
    CHECK_CONTAINS(info, "neon");
    CHECK_CONTAINS(info, "dotprod");
#else
    CHECK_CONTAINS(info, "avx2");
#endif
    CHECK_CONTAINS(info, "kernel: matmul");
    CHECK_CONTAINS(info, cpu_simd_get()->name);
    return test_done("test_fast_kernels");
}
