/* rms_norm and layer_norm over the last dim against a naive double-precision
 * reference: dtypes x layouts x optional weight/bias (x's dtype or f32). */
#include "mathtest.h"

static const candle_dtype float_types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

typedef struct shape_case {
    int rank;
    int64_t shape[4];
} shape_case;

static const shape_case shapes[] = {
    {1, {7}}, {2, {3, 5}}, {2, {4, 1}}, {3, {2, 3, 17}}, {4, {2, 1, 3, 8}},
};

/* rows of D values; w/b NULL when absent */
static void norm_ref(bool layer, int64_t rows, int64_t D, const double *x, const double *w,
                     const double *b, double eps, double *out) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double mean = 0, ss = 0;
        if (layer) {
            for (int64_t k = 0; k < D; k++) mean += xr[k];
            mean /= (double)D;
        }
        for (int64_t k = 0; k < D; k++) ss += (xr[k] - mean) * (xr[k] - mean);
        double inv = 1.0 / sqrt(ss / (double)D + eps);
        for (int64_t k = 0; k < D; k++)
            out[r * D + k] = (xr[k] - mean) * inv * (w ? w[k] : 1.0) + (b ? b[k] : 0.0);
    }
}

/* param: 0 none, 1 of x's dtype, 2 f32 */
static candle_tensor *param(candle_ctx *ctx, int kind, candle_dtype xdt, int64_t D, mt_layout lay,
                            uint64_t seed, double lo, double hi) {
    if (!kind) return NULL;
    return mt_input(ctx, kind == 1 ? xdt : CANDLE_DTYPE_F32, 1, &D, lay, seed, lo, hi);
}

static void check_norm_case(candle_ctx *ctx, bool layer, candle_dtype dt, const shape_case *sc,
                            mt_layout lay, int wk, int bk, uint64_t seed) {
    int64_t D = sc->shape[sc->rank - 1], n = mt_numel(sc->rank, sc->shape);
    double eps = layer ? 1e-5 : 1e-6;
    /* an offset on the inputs makes the mean matter for layer_norm */
    candle_tensor *x = mt_input(ctx, dt, sc->rank, sc->shape, lay, seed, 0.5, 3);
    if (!x) return;
    mt_layout play = lay == MT_TRANSPOSED || lay == MT_BROADCAST ? MT_SLICED : lay;
    candle_tensor *w = param(ctx, wk, dt, D, play, seed + 1, 0.5, 1.5);
    candle_tensor *b = layer ? param(ctx, bk, dt, D, play, seed + 2, -1, 1) : NULL;
    candle_tensor *y = layer ? candle_layer_norm(ctx, x, w, b, eps) : candle_rms_norm(ctx, x, w, eps);
    double *xv = mt_values(x), *wv = mt_values(w), *bv = mt_values(b), *got = mt_values(y);
    double *ref = malloc(sizeof(double) * (size_t)n);
    CHECK_MSG(got && mt_same_shape(y, sc->rank, sc->shape) && y->dtype == dt, "%s", candle_errmsg(ctx));
    if (got && xv) {
        norm_ref(layer, n / D, D, xv, wv, bv, eps, ref);
        double e = mt_nmse(got, ref, n);
        CHECK_MSG(e <= mt_bound(dt), "%s %s %s rank %d weight %d bias %d: nmse %g",
                  layer ? "layer_norm" : "rms_norm", candle_dtype_name(dt), mt_layout_names[lay],
                  sc->rank, wk, bk, e);
    }
    free(xv);
    free(wv);
    free(bv);
    free(got);
    free(ref);
}

static void test_table(candle_ctx *ctx) {
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < 3; t++)
            for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
                for (int layer = 0; layer < 2; layer++)
                    for (int wk = 0; wk < 3; wk++)
                        for (int bk = 0; bk < (layer ? 3 : 1); bk++) {
                            candle_ctx_mark m = candle_ctx_get_mark(ctx);
                            check_norm_case(ctx, layer, float_types[t], &shapes[s], (mt_layout)lay, wk,
                                            bk, seed);
                            seed += 3;
                            candle_ctx_reset(ctx, m);
                        }
}

/* A constant row has zero variance: layer_norm gives the bias, and eps keeps
 * it finite; rms_norm of zeros is zero. */
static void test_degenerate(candle_ctx *ctx) {
    const float c[4] = {2, 2, 2, 2}, z[4] = {0, 0, 0, 0}, bias[4] = {1, -1, 0.5f, 0};
    int64_t D = 4;
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &D, c);
    candle_tensor *b = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &D, bias);
    candle_tensor *y = candle_layer_norm(ctx, x, NULL, b, 1e-5);
    double v[4];
    CHECK(mt_read(y, v) && v[0] == 1 && v[1] == -1 && v[2] == 0.5 && v[3] == 0);
    y = candle_rms_norm(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &D, z), NULL, 1e-6);
    CHECK(mt_read(y, v) && v[0] == 0 && v[3] == 0);
    /* eps = 0 is allowed: a unit row stays as it is */
    const float u[4] = {1, -1, 1, -1};
    y = candle_rms_norm(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &D, u), NULL, 0);
    CHECK(mt_read(y, v) && v[0] == 1 && v[1] == -1);
}

static void test_errors(candle_ctx *ctx) {
    int64_t s23[2] = {2, 3}, d3 = 3, d4 = 4;
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, s23, MT_CONTIG, 1, -1, 1);
    candle_tensor *x16 = mt_input(ctx, CANDLE_DTYPE_F16, 2, s23, MT_CONTIG, 1, -1, 1);
    candle_tensor *w4 = mt_input(ctx, CANDLE_DTYPE_F32, 1, &d4, MT_CONTIG, 2, -1, 1);
    candle_tensor *w_bf = mt_input(ctx, CANDLE_DTYPE_BF16, 1, &d3, MT_CONTIG, 2, -1, 1);
    candle_tensor *w2d = mt_input(ctx, CANDLE_DTYPE_F32, 2, s23, MT_CONTIG, 2, -1, 1);
    MT_CHECK_ERR(ctx, candle_rms_norm(ctx, x, w4, 1e-6), CANDLE_ERR_SHAPE,
                 "rms_norm: shape mismatch: input [2, 3] weight [4] (want [3])");
    MT_CHECK_ERR(ctx, candle_layer_norm(ctx, x, NULL, w2d, 1e-5), CANDLE_ERR_SHAPE,
                 "layer_norm: shape mismatch: input [2, 3] bias [2, 3] (want [3])");
    MT_CHECK_ERR(ctx, candle_rms_norm(ctx, x16, w_bf, 1e-6), CANDLE_ERR_DTYPE,
                 "rms_norm: dtype mismatch: input f16 weight bf16 (want f16 or f32)");
    MT_CHECK_ERR(ctx, candle_layer_norm(ctx, x, w_bf, NULL, 1e-6), CANDLE_ERR_DTYPE,
                 "layer_norm: dtype mismatch: input f32 weight bf16 (want f32)");
    MT_CHECK_ERR(ctx, candle_rms_norm(ctx, x, NULL, -1), CANDLE_ERR_INVALID_ARG,
                 "rms_norm: eps -1 must be finite and >= 0");
    MT_CHECK_ERR(ctx, candle_layer_norm(ctx, x, NULL, NULL, NAN), CANDLE_ERR_INVALID_ARG,
                 "layer_norm: eps nan must be finite");
    candle_tensor *xi = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 2, s23);
    MT_CHECK_ERR(ctx, candle_rms_norm(ctx, xi, NULL, 1e-6), CANDLE_ERR_DTYPE,
                 "rms_norm: dtype i32 not supported (needs f32, f16 or bf16)");
    candle_tensor *sc = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 0, NULL);
    MT_CHECK_ERR(ctx, candle_layer_norm(ctx, sc, NULL, NULL, 1e-6), CANDLE_ERR_SHAPE,
                 "layer_norm: input must be at least 1-D");
    candle_ctx_clear_error(ctx);
    CHECK(candle_rms_norm(ctx, NULL, w4, 1e-6) == NULL && candle_errcode(ctx) == CANDLE_OK);
}

static void test_lazy(void) {
    candle_ctx *ctx = mt_ctx(false);
    int64_t s[3] = {2, 4, 6}, D = 4;
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 3, s, MT_CONTIG, 5, -1, 1);
    candle_tensor *w = mt_input(ctx, CANDLE_DTYPE_F32, 1, &D, MT_CONTIG, 6, -1, 1);
    candle_tensor *xt = candle_transpose(ctx, candle_scale(ctx, x, 3.0), 1, 2); /* [2, 6, 4] lazy */
    candle_tensor *y = candle_rms_norm(ctx, xt, w, 1e-6);
    CHECK(y && !y->computed);
    CHECK_OK(ctx, candle_compute(ctx, y));
    CHECK_OK(ctx, candle_compute(ctx, xt));
    double *xv = mt_values(xt), *wv = mt_values(w), *got = mt_values(y), ref[48];
    if (xv && wv && got) {
        norm_ref(false, 12, 4, xv, wv, NULL, 1e-6, ref);
        CHECK(mt_nmse(got, ref, 48) <= 1e-10);
    } else {
        CHECK_MSG(false, "lazy rms_norm unreadable: %s", candle_errmsg(ctx));
    }
    free(xv);
    free(wv);
    free(got);
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    candle_ctx *ctx = mt_ctx(true);
    test_table(ctx);
    test_degenerate(ctx);
    test_errors(ctx);
    candle_ctx_free(ctx);
    test_lazy();
}

int main(void) { return mt_run_passes(run_checks, "test_norm"); }
