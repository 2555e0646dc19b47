/* CPU settings (candle_cpu_params): defaults and their names, invalid and
 * unsupported settings refused without changing anything, what a backend
 * reports, and two backends with different settings computing side by side,
 * each with its own kernels (a quantized product on the integer kernels, its
 * activation rounded to q8_0, against one dequantized into the f32 GEMM). */
#include "test.h"

enum { K = 256, N = 64 };

static void test_names(void) {
    for (int i = 0; i < CANDLE_CPU_ISA_COUNT; i++)
        CHECK(candle_cpu_isa_from_name(candle_cpu_isa_name((candle_cpu_isa)i)) == i);
    for (int i = 0; i < CANDLE_CPU_QUANT_COUNT; i++)
        CHECK(candle_cpu_quant_from_name(candle_cpu_quant_name((candle_cpu_quant)i)) == i);
    for (int i = 0; i < CANDLE_CPU_PREFETCH_COUNT; i++)
        CHECK(candle_cpu_prefetch_from_name(candle_cpu_prefetch_name((candle_cpu_prefetch)i)) == i);
    CHECK(candle_cpu_isa_from_name("sse9") == -1 && candle_cpu_isa_from_name(NULL) == -1);
    CHECK(!strcmp(candle_cpu_isa_name((candle_cpu_isa)99), "invalid"));
}

static void test_refused(void) {
    candle_cpu_params before = candle_cpu_get_defaults();
    CHECK(before.isa != CANDLE_CPU_ISA_AUTO); /* resolved to what runs */
    candle_cpu_params p = candle_cpu_default_params();
    p.isa = (candle_cpu_isa)99;
    CHECK(candle_cpu_set_defaults(&p) == CANDLE_ERR_INVALID_ARG);
    CHECK(strstr(candle_last_errmsg(), "isa 99") != NULL);
    p = candle_cpu_default_params();
    p.qgemm_direct_max_m = 65;
    CHECK(candle_cpu_set_defaults(&p) == CANDLE_ERR_INVALID_ARG);
    p = candle_cpu_default_params();
    p.n_threads = -1;
    candle_backend *be = NULL;
    CHECK(candle_backend_cpu_init_params(&be, &p) == CANDLE_ERR_INVALID_ARG && !be);
    p = candle_cpu_default_params();
#if defined(__aarch64__)
    p.isa = CANDLE_CPU_ISA_AVX2;
#else
    p.isa = CANDLE_CPU_ISA_NEON;
#endif
    CHECK(candle_backend_cpu_init_params(&be, &p) == CANDLE_ERR_UNSUPPORTED && !be);
    CHECK_MSG(strstr(candle_last_errmsg(), "not available on this CPU") != NULL, "%s", candle_last_errmsg());
    CHECK(candle_cpu_set_defaults(&p) == CANDLE_ERR_UNSUPPORTED);
    CHECK(candle_cpu_set_defaults(NULL) == CANDLE_ERR_INVALID_ARG);
    candle_cpu_params after = candle_cpu_get_defaults();
    CHECK(after.isa == before.isa && after.quant == before.quant && after.qmm_max_m == before.qmm_max_m);
}

static candle_ctx *ctx_on(candle_backend *be) {
    candle_ctx_params cp = candle_ctx_default_params();
    cp.backend = be;
    cp.eager = true;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &cp) == CANDLE_OK);
    return ctx;
}

/* y = x w^T for a q4_0 w [N, K]; out[N]. */
static void product(candle_ctx *ctx, const float *w, const float *x, float *out) {
    candle_tensor *wq = candle_tensor_from_f32(ctx, CANDLE_DTYPE_Q4_0, 2, (int64_t[]){N, K}, w);
    candle_tensor *xt = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){1, K}, x);
    candle_tensor *y = candle_matmul(ctx, xt, candle_transpose(ctx, wq, 0, 1));
    CHECK_MSG(y && candle_tensor_to_f32(y, out) == CANDLE_OK, "%s", candle_errmsg(ctx));
}

static double max_err(const float *got, const double *want) {
    double e = 0;
    for (int n = 0; n < N; n++) e = fmax(e, fabs(got[n] - want[n]));
    return e;
}

static void test_side_by_side(void) {
    candle_cpu_params pa = candle_cpu_default_params(), pb = candle_cpu_default_params();
    pa.n_threads = pb.n_threads = 2;
    pa.qmm_max_m = 0; /* every quantized product dequantized into the f32 GEMM */
    candle_backend *a = NULL, *b = NULL;
    CHECK(candle_backend_cpu_init_params(&a, &pa) == CANDLE_OK);
    CHECK(candle_backend_cpu_init_params(&b, &pb) == CANDLE_OK);
    if (!a || !b) return;
    candle_cpu_params got;
    CHECK(candle_backend_cpu_params(a, &got) && got.qmm_max_m == 0 && got.n_threads == 2);
    CHECK(candle_backend_cpu_params(b, &got) && got.qmm_max_m == -1 && got.isa != CANDLE_CPU_ISA_AUTO);
    CHECK(!candle_backend_cpu_params(NULL, &got));

    static float w[N * K], x[K], wd[N * K];
    uint64_t s = 7;
    for (int i = 0; i < N * K; i++) w[i] = (float)((double)((s = s * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5);
    for (int i = 0; i < K; i++) x[i] = (float)((double)((s = s * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5);
    /* the weights as q4_0 holds them (the public table's reference kernels) */
    const candle_dtype_traits *q = candle_dtype_info(CANDLE_DTYPE_Q4_0);
    void *blocks = malloc(candle_dtype_row_size(CANDLE_DTYPE_Q4_0, (int64_t)N * K));
    q->from_f32(w, blocks, (int64_t)N * K);
    q->to_f32(blocks, wd, (int64_t)N * K);
    free(blocks);
    double want[N];
    for (int n = 0; n < N; n++) {
        want[n] = 0;
        for (int k = 0; k < K; k++) want[n] += (double)wd[n * K + k] * x[k];
    }
    candle_ctx *ca = ctx_on(a), *cb = ctx_on(b);
    float ya[N], yb[N], ya2[N];
    product(ca, w, x, ya);
    product(cb, w, x, yb);
    product(ca, w, x, ya2);
    double ea = max_err(ya, want), eb = max_err(yb, want);
    CHECK_MSG(ea < 1e-4, "dequantizing backend: error %g", ea);
    CHECK_MSG(eb > 10 * ea && eb < 0.1, "integer-kernel backend: error %g (the dequantizing one's %g)", eb, ea);
    CHECK_MSG(!memcmp(ya, ya2, sizeof ya), "backend a gave other bits after backend b ran");
    candle_ctx_free(ca);
    candle_ctx_free(cb);
    candle_backend_free(a);
    candle_backend_free(b);
}

/* The registry makes the CPU backend by name with its settings. */
static void test_registry(void) {
    CHECK(candle_backend_count() >= 1 && !strcmp(candle_backend_reg_name(0), "cpu"));
    CHECK(candle_backend_reg_name(candle_backend_count()) == NULL && candle_backend_reg_name(-1) == NULL);
    candle_cpu_params p = candle_cpu_default_params();
    p.n_threads = 1;
    p.isa = CANDLE_CPU_ISA_SCALAR;
    candle_backend *be = NULL;
    CHECK(candle_backend_init_by_name(&be, "cpu", &p) == CANDLE_OK && be);
    candle_cpu_params got;
    CHECK(be && candle_backend_cpu_params(be, &got) && got.isa == CANDLE_CPU_ISA_SCALAR && got.n_threads == 1);
    CHECK(!strcmp(candle_backend_name(be), "cpu"));
    candle_backend_free(be);
    be = NULL;
    CHECK(candle_backend_init_by_name(&be, "tpu", NULL) == CANDLE_ERR_UNSUPPORTED && !be);
    CHECK(strstr(candle_last_errmsg(), "'tpu'") != NULL);
}

int main(void) {
    test_names();
    test_registry();
    test_refused();
    test_side_by_side();
    return test_done("test_cpu_params");
}
