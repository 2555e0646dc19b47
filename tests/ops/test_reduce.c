/* Reductions (sum, mean, max, min, argmax) and (log-)softmax against a naive
 * double-precision reference, over dtypes x layouts x dims x keepdim. */
#include "mathtest.h"

static const candle_dtype float_types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
static const candle_dtype all_types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16,
                                         CANDLE_DTYPE_I32, CANDLE_DTYPE_I64, CANDLE_DTYPE_I8,
                                         CANDLE_DTYPE_U8};
static const candle_op reduce_ops[] = {CANDLE_OP_SUM, CANDLE_OP_MEAN, CANDLE_OP_MAX, CANDLE_OP_MIN,
                                       CANDLE_OP_ARGMAX};

typedef struct shape_case {
    int rank;
    int64_t shape[4];
} shape_case;

static const shape_case shapes[] = {
    {1, {17}}, {2, {1, 4}}, {2, {5, 3}}, {3, {3, 5, 7}}, {4, {2, 3, 1, 5}},
};

/* Expected result of op over dim d of x (logical values v), keepdim layout. */
static void reduce_ref(candle_op op, int rank, const int64_t *shape, int d, const double *v,
                       double *out) {
    int64_t st[CANDLE_MAX_RANK], oshape[CANDLE_MAX_RANK], ost[CANDLE_MAX_RANK];
    mt_strides(rank, shape, st);
    for (int i = 0; i < rank; i++) oshape[i] = i == d ? 1 : shape[i];
    mt_strides(rank, oshape, ost);
    int64_t n_out = mt_numel(rank, oshape);
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base = 0, rem = o;
        for (int i = 0; i < rank; i++) {
            base += (rem / ost[i]) * st[i];
            rem %= ost[i];
        }
        double acc = 0, best = v[base];
        int64_t arg = 0;
        for (int64_t k = 0; k < shape[d]; k++) {
            double x = v[base + k * st[d]];
            acc += x;
            bool nan_wins = isnan(x) && !isnan(best);
            if (nan_wins || (!isnan(best) && (op == CANDLE_OP_MIN ? x < best : x > best))) {
                best = x;
                arg = k;
            }
        }
        switch (op) {
        case CANDLE_OP_SUM: out[o] = acc; break;
        case CANDLE_OP_MEAN: out[o] = acc / (double)shape[d]; break;
        case CANDLE_OP_ARGMAX: out[o] = (double)arg; break;
        default: out[o] = best; break;
        }
    }
}

static candle_dtype expected_dtype(candle_op op, candle_dtype in) {
    if (op == CANDLE_OP_ARGMAX) return CANDLE_DTYPE_I64;
    if (op == CANDLE_OP_SUM && cpu_dtype(in)->is_int) return CANDLE_DTYPE_I64;
    return in;
}

static void check_reduce_case(candle_ctx *ctx, candle_op op, candle_dtype dt, const shape_case *sc,
                              mt_layout lay, int dim, bool keepdim, uint64_t seed) {
    bool is_int = cpu_dtype(dt)->is_int;
    double lo = dt == CANDLE_DTYPE_U8 ? 0 : -50, hi = 50;
    candle_tensor *x = mt_input(ctx, dt, sc->rank, sc->shape, lay, seed, is_int ? lo : -2, is_int ? hi : 2);
    if (!x) return;
    int d = dim < 0 ? dim + sc->rank : dim;
    candle_tensor *y = candle_reduce(ctx, op, x, dim, keepdim);
    int64_t n = mt_numel(sc->rank, sc->shape) / sc->shape[d];
    int64_t want_shape[CANDLE_MAX_RANK];
    int want_rank = 0;
    for (int i = 0; i < sc->rank; i++)
        if (i != d || keepdim) want_shape[want_rank++] = i == d ? 1 : sc->shape[i];
    double *xv = mt_values(x), *got = mt_values(y), *ref = malloc(sizeof(double) * (size_t)n);
    CHECK_MSG(y && mt_same_shape(y, want_rank, want_shape) && y->dtype == expected_dtype(op, dt),
              "%s %s %s dim %d keepdim %d: %s", candle_op_name(op), candle_dtype_name(dt),
              mt_layout_names[lay], dim, keepdim, candle_errmsg(ctx));
    if (xv && got) {
        reduce_ref(op, sc->rank, sc->shape, d, xv, ref);
        bool exact = is_int || op == CANDLE_OP_MAX || op == CANDLE_OP_MIN || op == CANDLE_OP_ARGMAX;
        double e = mt_nmse(got, ref, n);
        CHECK_MSG(exact ? e == 0 : e <= mt_bound(dt), "%s %s %s rank %d dim %d: nmse %g",
                  candle_op_name(op), candle_dtype_name(dt), mt_layout_names[lay], sc->rank, dim, e);
    }
    free(xv);
    free(got);
    free(ref);
}

static void test_reduce_table(candle_ctx *ctx) {
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int dim = -1; dim < shapes[s].rank; dim++)
            for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++)
                for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
                    for (size_t o = 0; o < sizeof reduce_ops / sizeof reduce_ops[0]; o++) {
                        candle_op op = reduce_ops[o];
                        if (op == CANDLE_OP_MEAN && cpu_dtype(all_types[t])->is_int) continue;
                        candle_ctx_mark m = candle_ctx_get_mark(ctx);
                        check_reduce_case(ctx, op, all_types[t], &shapes[s], (mt_layout)lay, dim,
                                          (seed & 1) != 0, seed);
                        seed++;
                        candle_ctx_reset(ctx, m);
                    }
}

static void softmax_ref(bool log_out, int rank, const int64_t *shape, int d, const double *v,
                        double *out) {
    int64_t st[CANDLE_MAX_RANK], n = mt_numel(rank, shape);
    mt_strides(rank, shape, st);
    for (int64_t base = 0; base < n; base++) {
        if ((base / st[d]) % shape[d]) continue; /* visit each line once, from its start */
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < shape[d]; k++) mx = fmax(mx, v[base + k * st[d]]);
        for (int64_t k = 0; k < shape[d]; k++) sum += exp(v[base + k * st[d]] - mx);
        for (int64_t k = 0; k < shape[d]; k++) {
            double z = v[base + k * st[d]] - mx;
            out[base + k * st[d]] = log_out ? z - log(sum) : exp(z) / sum;
        }
    }
}

static void test_softmax_table(candle_ctx *ctx) {
    uint64_t seed = 1000;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int dim = -1; dim < shapes[s].rank; dim++)
            for (size_t t = 0; t < 3; t++)
                for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
                    for (int lg = 0; lg < 2; lg++) {
                        const shape_case *sc = &shapes[s];
                        candle_dtype dt = float_types[t];
                        candle_ctx_mark m = candle_ctx_get_mark(ctx);
                        /* a wide range: exp() of the raw values would overflow f32 */
                        candle_tensor *x = mt_input(ctx, dt, sc->rank, sc->shape, (mt_layout)lay,
                                                    seed++, -100, 100);
                        if (!x) continue;
                        candle_tensor *y = lg ? candle_log_softmax(ctx, x, dim) : candle_softmax(ctx, x, dim);
                        int64_t n = mt_numel(sc->rank, sc->shape);
                        double *xv = mt_values(x), *got = mt_values(y), *ref = malloc(sizeof(double) * (size_t)n);
                        CHECK_MSG(y && mt_same_shape(y, sc->rank, sc->shape) && y->dtype == dt, "%s",
                                  candle_errmsg(ctx));
                        if (xv && got) {
                            softmax_ref(lg, sc->rank, sc->shape, dim < 0 ? dim + sc->rank : dim, xv, ref);
                            double e = mt_nmse(got, ref, n);
                            CHECK_MSG(e <= mt_bound(dt), "%s %s %s rank %d dim %d: nmse %g",
                                      lg ? "log_softmax" : "softmax", candle_dtype_name(dt),
                                      mt_layout_names[lay], sc->rank, dim, e);
                        }
                        free(xv);
                        free(got);
                        free(ref);
                        candle_ctx_reset(ctx, m);
                    }
}

static candle_tensor *vec(candle_ctx *ctx, candle_dtype dt, int64_t n, const float *v) {
    return candle_tensor_from_f32(ctx, dt, 1, &n, v);
}

static double at(candle_tensor *t, int64_t i) {
    double v = -12345;
    if (t) candle_tensor_get_f64(t, t->rank ? &i : NULL, &v);
    return v;
}

static void test_special_values(candle_ctx *ctx) {
    const float nan_row[] = {1, NAN, 3, NAN, -INFINITY};
    for (size_t t = 0; t < 3; t++) {
        candle_tensor *x = vec(ctx, float_types[t], 5, nan_row);
        CHECK(at(candle_argmax(ctx, x, 0, true), 0) == 1); /* first NaN */
        CHECK(isnan(at(candle_max(ctx, x, 0, true), 0)));
        CHECK(isnan(at(candle_min(ctx, x, 0, true), 0)));
        CHECK(isnan(at(candle_sum(ctx, x, 0, true), 0)));
    }
    /* -inf entries (masked scores) get probability 0 and log-prob -inf */
    const float masked[] = {0, -INFINITY, 1};
    candle_tensor *x = vec(ctx, CANDLE_DTYPE_F32, 3, masked);
    candle_tensor *p = candle_softmax(ctx, x, 0), *lp = candle_log_softmax(ctx, x, 0);
    CHECK_NEAR(at(p, 0), 1 / (1 + exp(1.0)), 1e-7);
    CHECK(at(p, 1) == 0);
    CHECK(isinf(at(lp, 1)) && at(lp, 1) < 0);
    CHECK_NEAR(at(lp, 2), -log1p(exp(-1.0)), 1e-6);
    /* huge values: stable softmax still sums to one */
    const float big[] = {1000, 1001, 999};
    p = candle_softmax(ctx, vec(ctx, CANDLE_DTYPE_F32, 3, big), 0);
    CHECK_NEAR(at(p, 0) + at(p, 1) + at(p, 2), 1.0, 1e-6);
    CHECK_NEAR(at(p, 1), 1 / (1 + exp(-1.0) + exp(-2.0)), 1e-6);
    /* bool sums count; i64 sums do not go through double */
    const float mask[] = {1, 0, 1, 1};
    CHECK(at(candle_sum(ctx, vec(ctx, CANDLE_DTYPE_BOOL, 4, mask), 0, false), 0) == 3);
    int64_t big_i[2] = {(int64_t)1 << 60, 1};
    int64_t two = 2;
    candle_tensor *bi = candle_tensor_new(ctx, CANDLE_DTYPE_I64, 1, &two);
    memcpy(candle_tensor_data(bi), big_i, sizeof big_i);
    candle_tensor *s = candle_sum(ctx, bi, 0, false);
    CHECK(s && s->rank == 0 && *(int64_t *)candle_tensor_data(s) == ((int64_t)1 << 60) + 1);
    CHECK(at(candle_argmax(ctx, bi, -1, false), 0) == 0);
    /* empty dims: sum 0, mean NaN */
    int64_t es[2] = {2, 0};
    candle_tensor *e = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, es);
    candle_tensor *es_sum = candle_sum(ctx, e, 1, false);
    CHECK(es_sum && es_sum->rank == 1 && es_sum->shape[0] == 2 && at(es_sum, 1) == 0);
    CHECK(isnan(at(candle_mean(ctx, e, 1, false), 0)));
}

static void test_errors(candle_ctx *ctx) {
    int64_t sh[2] = {2, 3}, es[2] = {2, 0};
    candle_tensor *xf = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, sh);
    candle_tensor *xi = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 2, sh);
    candle_tensor *e = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, es);
    MT_CHECK_ERR(ctx, candle_mean(ctx, xi, 0, true), CANDLE_ERR_DTYPE,
                 "mean: dtype i32 not supported (needs f32, f16 or bf16)");
    MT_CHECK_ERR(ctx, candle_softmax(ctx, xi, 0), CANDLE_ERR_DTYPE, "softmax: dtype i32 not supported");
    MT_CHECK_ERR(ctx, candle_sum(ctx, xf, 2, true), CANDLE_ERR_INVALID_ARG,
                 "sum: dim 2 out of range for rank 2");
    MT_CHECK_ERR(ctx, candle_argmax(ctx, xf, -3, true), CANDLE_ERR_INVALID_ARG,
                 "argmax: dim -3 out of range for rank 2");
    MT_CHECK_ERR(ctx, candle_log_softmax(ctx, xf, 5), CANDLE_ERR_INVALID_ARG,
                 "log_softmax: dim 5 out of range");
    MT_CHECK_ERR(ctx, candle_max(ctx, e, 1, true), CANDLE_ERR_SHAPE,
                 "max: cannot reduce empty dim 1 of [2, 0]");
    MT_CHECK_ERR(ctx, candle_reduce(ctx, CANDLE_OP_ADD, xf, 0, true), CANDLE_ERR_INVALID_ARG,
                 "reduce: add is not a reduction");
    /* a NULL input (an earlier failure) returns NULL and records nothing new */
    candle_ctx_clear_error(ctx);
    CHECK(candle_sum(ctx, NULL, 0, true) == NULL && candle_errcode(ctx) == CANDLE_OK);
}

/* Built lazily, the node and its squeeze view get storage at compute. */
static void test_lazy(void) {
    candle_ctx *ctx = mt_ctx(false);
    const float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t sh[2] = {2, 3};
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, sh, v);
    candle_tensor *sm = candle_softmax(ctx, candle_transpose(ctx, x, 0, 1), 1);
    candle_tensor *y = candle_sum(ctx, sm, 0, false); /* [2] */
    candle_tensor *am = candle_argmax(ctx, candle_transpose(ctx, x, 0, 1), 1, false);
    CHECK(y && !y->computed && am);
    CHECK_OK(ctx, candle_compute(ctx, y));
    CHECK_OK(ctx, candle_compute(ctx, am));
    /* sm [3, 2] rows sum to 1; summing over rows gives the column sums */
    double c0 = 0;
    for (int i = 0; i < 3; i++) c0 += exp(v[i]) / (exp(v[i]) + exp(v[i + 3]));
    CHECK_NEAR(at(y, 0), c0, 1e-6);
    CHECK_NEAR(at(y, 0) + at(y, 1), 3.0, 1e-6);
    CHECK(at(am, 0) == 1 && at(am, 1) == 1 && at(am, 2) == 1);
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    candle_ctx *ctx = mt_ctx(true);
    test_reduce_table(ctx);
    test_softmax_table(ctx);
    test_special_values(ctx);
    test_errors(ctx);
    candle_ctx_free(ctx);
    test_lazy();
}

int main(void) { return mt_run_passes(run_checks, "test_reduce"); }
