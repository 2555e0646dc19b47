/* Elementwise ops, table driven: every unary op, binary op, comparison and
 * where, over dtypes (f32, f16, bf16; i32/i64 where the op allows) and
 * layouts (contiguous, transposed, broadcast, sliced with step, offset view),
 * against a naive double-precision reference with an NMSE bound per dtype.
 * Then casts between every pair of plain dtypes with exact expectations, and
 * copy_into a strided view. */
#include <stdint.h>

#include "backend/cpu/cpu-config.h" /* cpu_dtype: the kernels the tests check */
#include "test.h"

enum { R = 3, C = 5 };

typedef enum layout { CONTIG, TRANSPOSED, STEP, OFFSET, N_LAYOUTS } layout;
static const char *layout_name[] = {"contiguous", "transposed", "sliced with step", "offset view"};

static const candle_dtype float_dtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
static const candle_dtype int_dtypes[] = {CANDLE_DTYPE_I32, CANDLE_DTYPE_I64};

static double nmse_bound(candle_dtype dt) {
    switch (dt) {
    case CANDLE_DTYPE_F32: return 1e-10;
    case CANDLE_DTYPE_F16: return 1e-5;
    case CANDLE_DTYPE_BF16: return 1e-4;
    default: return 0; /* integers: exact */
    }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(double lo, double hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

/* v as stored in dt */
static double to_dtype(candle_dtype dt, double v) {
    switch (dt) {
    case CANDLE_DTYPE_F32: return (float)v;
    case CANDLE_DTYPE_F16: return candle_f16_to_f32(candle_f32_to_f16((float)v));
    case CANDLE_DTYPE_BF16: return candle_bf16_to_f32(candle_f32_to_bf16((float)v));
    default: return round(v);
    }
}

/* An input of logical shape [rows, cols] laid out as asked; vals holds its
 * logical elements (row-major) exactly as stored. */
typedef struct input {
    candle_tensor *t;
    int rows, cols;
    double vals[R * C];
} input;

typedef double (*gen_fn)(void);

static input make_input(candle_ctx *ctx, candle_dtype dt, layout lay, int rows, int cols, gen_fn gen) {
    input in = {.rows = rows, .cols = cols};
    /* base tensor shape, and where logical (i, j) lives in it */
    int64_t br = rows, bc = cols;
    if (lay == TRANSPOSED) br = cols, bc = rows;
    if (lay == STEP) br = 2 * rows, bc = 2 * cols + 1;
    if (lay == OFFSET) br = rows + 2, bc = cols + 3;
    float base[4 * R * C + 64];
    for (int64_t k = 0; k < br * bc; k++) base[k] = (float)to_dtype(dt, gen());
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            int64_t k = lay == CONTIG       ? i * bc + j
                        : lay == TRANSPOSED ? j * bc + i
                        : lay == STEP       ? (2 * i) * bc + 1 + 2 * j
                                            : (i + 1) * bc + j + 2;
            in.vals[i * cols + j] = base[k];
        }
    candle_tensor *b = candle_tensor_from_f32(ctx, dt, 2, (int64_t[]){br, bc}, base);
    switch (lay) {
    case CONTIG: in.t = b; break;
    case TRANSPOSED: in.t = candle_transpose(ctx, b, 0, 1); break;
    case STEP: in.t = candle_slice(ctx, candle_slice(ctx, b, 0, 0, br, 2), 1, 1, bc, 2); break;
    default: in.t = candle_narrow(ctx, candle_narrow(ctx, b, 0, 1, rows), 1, 2, cols); break;
    }
    CHECK(in.t && in.t->shape[0] == rows && in.t->shape[1] == cols);
    return in;
}

/* element (i, j) of the broadcast output */
static double bval(const input *in, int i, int j) {
    return in->vals[(in->rows == 1 ? 0 : i) * in->cols + (in->cols == 1 ? 0 : j)];
}

/* got vs ref over R x C: NMSE for floats, exact for integers and bools (and
 * for ops that only move values: where, casts) */
static void compare_ex(candle_tensor *out, const double *ref, candle_dtype dt, bool exact,
                       const char *what) {
    float got[R * C];
    CHECK_MSG(out != NULL, "%s: %s", what, "NULL result");
    if (!out) return;
    CHECK_MSG(out->rank == 2 && out->shape[0] == R && out->shape[1] == C, "%s: shape", what);
    CHECK_OK(out->ctx, candle_tensor_to_f32(out, got));
    if (!exact && cpu_dtype(dt)->is_float) {
        double e = test_nmse(got, ref, R * C);
        CHECK_MSG(e <= nmse_bound(dt), "%s: nmse %g > %g", what, e, nmse_bound(dt));
    } else {
        int bad = 0;
        for (int k = 0; k < R * C; k++) bad += (double)got[k] != ref[k];
        CHECK_MSG(bad == 0, "%s: %d of %d differ (e.g. %g vs %g)", what, bad, R * C, got[0], ref[0]);
    }
}

static void compare(candle_tensor *out, const double *ref, candle_dtype dt, const char *what) {
    compare_ex(out, ref, dt, !cpu_dtype(dt)->is_float, what);
}

/* ---- unary ---- */

static double g_any(void) { return uniform(-3, 3); }
static double g_exp(void) { return uniform(-4, 4); }
static double g_pos(void) { return uniform(0.1, 4); }
static double g_int(void) { return floor(uniform(-20, 21)); }

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

typedef struct unary_case {
    candle_op op;
    gen_fn gen;
    bool ints;
    double p0, p1;
} unary_case;

static const unary_case unary_cases[] = {
    {CANDLE_OP_NEG, g_any, true, 0, 0},       {CANDLE_OP_ABS, g_any, true, 0, 0},
    {CANDLE_OP_EXP, g_exp, false, 0, 0},      {CANDLE_OP_LOG, g_pos, false, 0, 0},
    {CANDLE_OP_SQRT, g_pos, false, 0, 0},     {CANDLE_OP_RSQRT, g_pos, false, 0, 0},
    {CANDLE_OP_SIN, g_any, false, 0, 0},      {CANDLE_OP_COS, g_any, false, 0, 0},
    {CANDLE_OP_TANH, g_any, false, 0, 0},     {CANDLE_OP_SIGMOID, g_any, false, 0, 0},
    {CANDLE_OP_RELU, g_any, true, 0, 0},      {CANDLE_OP_SILU, g_any, false, 0, 0},
    {CANDLE_OP_GELU_ERF, g_any, false, 0, 0}, {CANDLE_OP_GELU_TANH, g_any, false, 0, 0},
    {CANDLE_OP_AFFINE, g_any, true, 2, -3},   {CANDLE_OP_CLAMP, g_any, true, -1.25, 2},
};

static double unary_ref(candle_op op, double x, double p0, double p1) {
    switch (op) {
    case CANDLE_OP_NEG: return -x;
    case CANDLE_OP_ABS: return fabs(x);
    case CANDLE_OP_EXP: return exp(x);
    case CANDLE_OP_LOG: return log(x);
    case CANDLE_OP_SQRT: return sqrt(x);
    case CANDLE_OP_RSQRT: return 1 / sqrt(x);
    case CANDLE_OP_SIN: return sin(x);
    case CANDLE_OP_COS: return cos(x);
    case CANDLE_OP_TANH: return tanh(x);
    case CANDLE_OP_SIGMOID: return sigmoid(x);
    case CANDLE_OP_RELU: return x > 0 ? x : 0;
    case CANDLE_OP_SILU: return x * sigmoid(x);
    case CANDLE_OP_GELU_ERF: return x * 0.5 * (1 + erf(x / sqrt(2)));
    case CANDLE_OP_GELU_TANH: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case CANDLE_OP_AFFINE: return x * p0 + p1;
    case CANDLE_OP_CLAMP: return fmin(fmax(x, p0), p1);
    default: return NAN;
    }
}

static candle_tensor *call_unary(candle_ctx *ctx, const unary_case *uc, candle_tensor *x) {
    switch (uc->op) {
    case CANDLE_OP_AFFINE: return candle_affine(ctx, x, uc->p0, uc->p1);
    case CANDLE_OP_CLAMP: return candle_clamp(ctx, x, uc->p0, uc->p1);
    case CANDLE_OP_NEG: return candle_neg(ctx, x);
    case CANDLE_OP_EXP: return candle_exp(ctx, x);
    case CANDLE_OP_GELU_ERF: return candle_gelu(ctx, x);
    case CANDLE_OP_GELU_TANH: return candle_gelu_tanh(ctx, x);
    default: return candle_unary(ctx, uc->op, x);
    }
}

static void run_unary(candle_ctx *ctx, const unary_case *uc, candle_dtype dt, layout lay) {
    bool is_int = cpu_dtype(dt)->is_int;
    input x = make_input(ctx, dt, lay, R, C, is_int ? g_int : uc->gen);
    candle_tensor *y = call_unary(ctx, uc, x.t);
    double ref[R * C];
    for (int k = 0; k < R * C; k++) {
        double r = unary_ref(uc->op, x.vals[k], uc->p0, uc->p1);
        ref[k] = is_int ? trunc(r) : r;
    }
    char what[128];
    snprintf(what, sizeof what, "%s %s %s", candle_op_name(uc->op), candle_dtype_name(dt), layout_name[lay]);
    compare(y, ref, dt, what);
    if (y) CHECK_MSG(y->dtype == dt, "%s: dtype", what);
}

static void test_unary(candle_ctx *ctx) {
    for (size_t c = 0; c < sizeof unary_cases / sizeof *unary_cases; c++) {
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            for (int d = 0; d < 3; d++) run_unary(ctx, &unary_cases[c], float_dtypes[d], (layout)lay);
            for (int d = 0; d < 2 && unary_cases[c].ints; d++)
                run_unary(ctx, &unary_cases[c], int_dtypes[d], (layout)lay);
        }
        if (!unary_cases[c].ints) { /* integers are refused with a dtype error */
            input xi = make_input(ctx, CANDLE_DTYPE_I32, CONTIG, R, C, g_int);
            CHECK(call_unary(ctx, &unary_cases[c], xi.t) == NULL);
            CHECK(candle_errcode(ctx) == CANDLE_ERR_DTYPE);
            candle_ctx_clear_error(ctx);
        }
    }
    /* broadcast input: a [1, C] row expanded to [R, C] */
    input row = make_input(ctx, CANDLE_DTYPE_F32, CONTIG, 1, C, g_any);
    candle_tensor *e = candle_expand(ctx, row.t, 2, (int64_t[]){R, C});
    candle_tensor *y = candle_tanh(ctx, e);
    double ref[R * C];
    for (int k = 0; k < R * C; k++) ref[k] = tanh(row.vals[k % C]);
    compare(y, ref, CANDLE_DTYPE_F32, "tanh f32 broadcast");
    candle_tensor *yi = candle_relu(ctx, candle_expand(ctx, make_input(ctx, CANDLE_DTYPE_I64, TRANSPOSED, R, 1, g_int).t, 2, (int64_t[]){R, C}));
    CHECK(yi != NULL);
    /* special values through the reference: log(0) = -inf, sqrt(-1) = NaN */
    float sp[3] = {0.0f, -1.0f, INFINITY};
    candle_tensor *s = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){3}, sp);
    float out[3];
    CHECK_OK(ctx, candle_tensor_to_f32(candle_log(ctx, s), out));
    CHECK(isinf(out[0]) && out[0] < 0 && isnan(out[1]) && isinf(out[2]));
    CHECK_OK(ctx, candle_tensor_to_f32(candle_sigmoid(ctx, s), out));
    CHECK(out[0] == 0.5f && out[2] == 1.0f);
}

/* ---- binary ---- */

static double g_div(void) { double v = uniform(0.5, 2); return uniform(0, 1) < 0.5 ? -v : v; }
static double g_half(void) { return 0.5 * floor(uniform(-3, 4)); } /* ties for comparisons */
static double g_base(void) { return uniform(0.5, 2.5); }
static double g_intnz(void) { double v = floor(uniform(1, 12)); return uniform(0, 1) < 0.5 ? -v : v; }

typedef struct binary_case {
    candle_op op;
    gen_fn ga, gb;
    bool ints;
    candle_tensor *(*fn)(candle_ctx *, candle_tensor *, candle_tensor *);
} binary_case;

static const binary_case binary_cases[] = {
    {CANDLE_OP_ADD, g_any, g_any, true, candle_add},
    {CANDLE_OP_SUB, g_any, g_any, true, candle_sub},
    {CANDLE_OP_MUL, g_any, g_any, true, candle_mul},
    {CANDLE_OP_DIV, g_any, g_div, true, candle_div},
    {CANDLE_OP_MAXIMUM, g_half, g_half, true, candle_maximum},
    {CANDLE_OP_MINIMUM, g_half, g_half, true, candle_minimum},
    {CANDLE_OP_POW, g_base, g_any, false, candle_pow},
    {CANDLE_OP_EQ, g_half, g_half, true, candle_eq},
    {CANDLE_OP_NE, g_half, g_half, true, candle_ne},
    {CANDLE_OP_LT, g_half, g_half, true, candle_lt},
    {CANDLE_OP_LE, g_half, g_half, true, candle_le},
    {CANDLE_OP_GT, g_half, g_half, true, candle_gt},
    {CANDLE_OP_GE, g_half, g_half, true, candle_ge},
};

static double binary_ref(candle_op op, double a, double b, bool ints) {
    switch (op) {
    case CANDLE_OP_ADD: return a + b;
    case CANDLE_OP_SUB: return a - b;
    case CANDLE_OP_MUL: return a * b;
    case CANDLE_OP_DIV: return ints ? trunc(a / b) : a / b;
    case CANDLE_OP_MAXIMUM: return fmax(a, b);
    case CANDLE_OP_MINIMUM: return fmin(a, b);
    case CANDLE_OP_POW: return pow(a, b);
    case CANDLE_OP_EQ: return a == b;
    case CANDLE_OP_NE: return a != b;
    case CANDLE_OP_LT: return a < b;
    case CANDLE_OP_LE: return a <= b;
    case CANDLE_OP_GT: return a > b;
    case CANDLE_OP_GE: return a >= b;
    default: return NAN;
    }
}

static bool is_compare(candle_op op) { return op >= CANDLE_OP_EQ && op <= CANDLE_OP_GE; }

/* shapes: 0 = both [R, C]; 1 = [R, 1] x [1, C]; 2 = [1, C] x [R, 1] */
static void run_binary(candle_ctx *ctx, const binary_case *bc, candle_dtype dt, layout la,
                       layout lb, int shapes) {
    bool is_int = cpu_dtype(dt)->is_int;
    gen_fn ga = is_int ? g_int : bc->ga, gb = is_int ? (bc->op == CANDLE_OP_DIV ? g_intnz : g_int) : bc->gb;
    if (is_int && bc->ga == g_half) ga = gb = g_half; /* small values: ties */
    int ar = R, ac = C, br = R, bcols = C;
    if (shapes == 1) ac = 1, br = 1;
    if (shapes == 2) ar = 1, bcols = 1;
    input a = make_input(ctx, dt, la, ar, ac, ga), b = make_input(ctx, dt, lb, br, bcols, gb);
    candle_tensor *y = bc->fn(ctx, a.t, b.t);
    double ref[R * C];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            ref[i * C + j] = binary_ref(bc->op, bval(&a, i, j), bval(&b, i, j), is_int);
    candle_dtype out = is_compare(bc->op) ? CANDLE_DTYPE_BOOL : dt;
    char what[160];
    snprintf(what, sizeof what, "%s %s %s x %s (shapes %d)", candle_op_name(bc->op), candle_dtype_name(dt),
             layout_name[la], layout_name[lb], shapes);
    compare(y, ref, out, what);
    if (y) CHECK_MSG(y->dtype == out, "%s: dtype %s", what, candle_dtype_name(y->dtype));
}

static void test_binary(candle_ctx *ctx) {
    candle_dtype all[5] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_I32,
                           CANDLE_DTYPE_I64};
    for (size_t c = 0; c < sizeof binary_cases / sizeof *binary_cases; c++) {
        const binary_case *bc = &binary_cases[c];
        for (int d = 0; d < 5; d++) {
            if (d >= 3 && !bc->ints) continue;
            for (int la = 0; la < N_LAYOUTS; la++) {
                run_binary(ctx, bc, all[d], (layout)la, (layout)la, 0);
                run_binary(ctx, bc, all[d], (layout)la, (layout)((la + 1) % N_LAYOUTS), 0);
                run_binary(ctx, bc, all[d], (layout)la, (layout)((la + 2) % N_LAYOUTS), 1);
                run_binary(ctx, bc, all[d], (layout)la, CONTIG, 2);
            }
        }
        if (!bc->ints) {
            input ai = make_input(ctx, CANDLE_DTYPE_I32, CONTIG, R, C, g_int);
            CHECK(bc->fn(ctx, ai.t, ai.t) == NULL && candle_errcode(ctx) == CANDLE_ERR_DTYPE);
            candle_ctx_clear_error(ctx);
        }
    }
    /* rank broadcast: [R, C] + [C] and a 0-d scalar */
    input a = make_input(ctx, CANDLE_DTYPE_F32, TRANSPOSED, R, C, g_any);
    float bv[C] = {1, 2, 3, 4, 5}, sv = 0.25f;
    candle_tensor *b = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){C}, bv);
    candle_tensor *s = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 0, NULL, &sv);
    double ref[R * C];
    for (int k = 0; k < R * C; k++) ref[k] = (a.vals[k] - bv[k % C]) * 0.25;
    compare(candle_mul(ctx, candle_sub(ctx, a.t, b), s), ref, CANDLE_DTYPE_F32, "sub/mul rank broadcast");
    compare(candle_mul(ctx, s, candle_sub(ctx, a.t, b)), ref, CANDLE_DTYPE_F32, "scalar first");
    /* NaN propagates through maximum/minimum from either side */
    float nv[2] = {NAN, 1.0f}, mv[2] = {2.0f, NAN}, out[2];
    candle_tensor *n1 = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){2}, nv);
    candle_tensor *n2 = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){2}, mv);
    CHECK_OK(ctx, candle_tensor_to_f32(candle_maximum(ctx, n1, n2), out));
    CHECK(isnan(out[0]) && isnan(out[1]));
    CHECK_OK(ctx, candle_tensor_to_f32(candle_minimum(ctx, n1, n2), out));
    CHECK(isnan(out[0]) && isnan(out[1]));
    CHECK_OK(ctx, candle_tensor_to_f32(candle_ne(ctx, n1, n1), out));
    CHECK(out[0] == 1 && out[1] == 0);
    /* integer edge cases: division by zero gives 0, wraparound */
    int32_t iv[3] = {7, INT32_MAX, -7}, jv[3] = {0, 1, 2};
    candle_tensor *ti = candle_tensor_from_i32(ctx, 1, (int64_t[]){3}, iv);
    candle_tensor *tj = candle_tensor_from_i32(ctx, 1, (int64_t[]){3}, jv);
    candle_tensor *q = candle_div(ctx, ti, tj), *w = candle_add(ctx, ti, tj);
    int32_t *qd = q ? candle_tensor_data(q) : NULL, *wd = w ? candle_tensor_data(w) : NULL;
    CHECK(qd && qd[0] == 0 && qd[1] == INT32_MAX && qd[2] == -3);
    CHECK(wd && wd[1] == INT32_MIN);
}

/* ---- where ---- */

static double g_bool(void) { return uniform(0, 1) < 0.5 ? 0 : 1; }

static void test_where(candle_ctx *ctx) {
    candle_dtype dts[5] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_I32,
                           CANDLE_DTYPE_I64};
    /* shapes of (cond, a, b): all full, then 3-way broadcast */
    const int shp[4][3][2] = {
        {{R, C}, {R, C}, {R, C}},
        {{R, 1}, {1, C}, {R, C}},
        {{1, C}, {R, 1}, {1, 1}},
        {{R, C}, {1, 1}, {R, 1}},
    };
    for (int d = 0; d < 5; d++)
        for (int lay = 0; lay < N_LAYOUTS; lay++)
            for (int s = 0; s < 4; s++) {
                bool is_int = cpu_dtype(dts[d])->is_int;
                /* cond: a bool view made from u8 values in the chosen layout */
                input cond = make_input(ctx, CANDLE_DTYPE_BOOL, (layout)lay, shp[s][0][0], shp[s][0][1], g_bool);
                input a = make_input(ctx, dts[d], (layout)((lay + 1) % N_LAYOUTS), shp[s][1][0], shp[s][1][1],
                                     is_int ? g_int : g_any);
                input b = make_input(ctx, dts[d], (layout)lay, shp[s][2][0], shp[s][2][1], is_int ? g_int : g_any);
                candle_tensor *y = candle_where(ctx, cond.t, a.t, b.t);
                double ref[R * C];
                for (int i = 0; i < R; i++)
                    for (int j = 0; j < C; j++)
                        ref[i * C + j] = bval(&cond, i, j) != 0 ? bval(&a, i, j) : bval(&b, i, j);
                char what[128];
                snprintf(what, sizeof what, "where %s %s shapes %d", candle_dtype_name(dts[d]),
                         layout_name[lay], s);
                compare_ex(y, ref, dts[d], true, what);
            }
    /* where from a comparison */
    input a = make_input(ctx, CANDLE_DTYPE_F32, STEP, R, C, g_any);
    candle_tensor *zero = candle_zeros(ctx, CANDLE_DTYPE_F32, 0, NULL);
    candle_tensor *relu = candle_where(ctx, candle_gt(ctx, a.t, zero), a.t, zero);
    double ref[R * C];
    for (int k = 0; k < R * C; k++) ref[k] = a.vals[k] > 0 ? a.vals[k] : 0;
    compare_ex(relu, ref, CANDLE_DTYPE_F32, true, "where(x > 0, x, 0)");
    /* errors: broadcast mismatch names the op */
    input bad = make_input(ctx, CANDLE_DTYPE_F32, CONTIG, 2, 2, g_any);
    CHECK(candle_where(ctx, candle_gt(ctx, a.t, zero), a.t, bad.t) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_SHAPE);
    CHECK_CONTAINS(candle_errmsg(ctx), "where: shape mismatch");
    candle_ctx_clear_error(ctx);
}

/* ---- casts ---- */

static const candle_dtype cast_dtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16,
                                           CANDLE_DTYPE_I8,  CANDLE_DTYPE_I32, CANDLE_DTYPE_I64,
                                           CANDLE_DTYPE_U8,  CANDLE_DTYPE_BOOL};

/* RNE of an exact double into `mant` fraction bits, min normal exponent emin. */
static double ref_round(double x, int mant, int emin, double maxv) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e);
    e -= 1;
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mant);
    double r = nearbyint(a / ulp) * ulp;
    if (a >= maxv + ldexp(1.0, (int)floor(log2(maxv)) - mant - 1)) r = INFINITY;
    return x < 0 ? -r : r;
}

/* A source value: exact as a double (floats) or as an int64 (integers). */
typedef struct sval {
    double f;
    int64_t i;
} sval;

static sval load(candle_dtype t, const void *p) {
    sval v = {0, 0};
    switch (t) {
    case CANDLE_DTYPE_F32: v.f = *(const float *)p; break;
    case CANDLE_DTYPE_F16: v.f = candle_f16_to_f32(*(const uint16_t *)p); break;
    case CANDLE_DTYPE_BF16: v.f = candle_bf16_to_f32(*(const uint16_t *)p); break;
    case CANDLE_DTYPE_I8: v.i = *(const int8_t *)p; break;
    case CANDLE_DTYPE_I32: v.i = *(const int32_t *)p; break;
    case CANDLE_DTYPE_I64: v.i = *(const int64_t *)p; break;
    case CANDLE_DTYPE_U8: v.i = *(const uint8_t *)p; break;
    default: v.i = *(const uint8_t *)p != 0; break;
    }
    if (!cpu_dtype(t)->is_float) v.f = (double)v.i;
    return v;
}

/* Expected bytes of casting v (of dtype src) to dst. Documented rules:
 * floats round to nearest even; float -> int truncates and saturates, NaN
 * -> 0; int -> int wraps; anything -> bool is != 0. */
static void expect_cast(candle_dtype src, sval v, candle_dtype dst, void *out) {
    bool from_int = !cpu_dtype(src)->is_float;
    if (dst == CANDLE_DTYPE_BOOL) {
        *(uint8_t *)out = from_int ? v.i != 0 : v.f != 0 || isnan(v.f);
        return;
    }
    if (cpu_dtype(dst)->is_float) {
        double x = v.f; /* exact for ints below 2^53 (the f16/bf16 cases) */
        switch (dst) {
        case CANDLE_DTYPE_F32: *(float *)out = from_int ? (float)v.i : (float)v.f; break;
        case CANDLE_DTYPE_F16: {
            double r = ref_round(x, 10, -14, 65504.0);
            *(uint16_t *)out = isnan(x) ? 0x7e00 : candle_f32_to_f16((float)r);
            break;
        }
        default: {
            double r = ref_round(x, 7, -126, 0x1.fep127);
            *(uint16_t *)out = isnan(x) ? 0x7fc0 : candle_f32_to_bf16((float)r);
            break;
        }
        }
        return;
    }
    int64_t i;
    if (from_int) {
        i = v.i;
    } else {
        double lo = dst == CANDLE_DTYPE_I8 ? -128 : dst == CANDLE_DTYPE_U8 ? 0 : dst == CANDLE_DTYPE_I32 ? -2147483648.0 : -0x1p63;
        double hi = dst == CANDLE_DTYPE_I8 ? 127 : dst == CANDLE_DTYPE_U8 ? 255 : dst == CANDLE_DTYPE_I32 ? 2147483647.0 : 0x1p63;
        double t = trunc(v.f);
        i = isnan(t) ? 0 : t <= lo ? (int64_t)lo : t >= hi ? (dst == CANDLE_DTYPE_I64 ? INT64_MAX : (int64_t)hi) : (int64_t)t;
    }
    switch (dst) {
    case CANDLE_DTYPE_I8: *(int8_t *)out = (int8_t)i; break;
    case CANDLE_DTYPE_I32: *(int32_t *)out = (int32_t)i; break;
    case CANDLE_DTYPE_I64: *(int64_t *)out = i; break;
    default: *(uint8_t *)out = (uint8_t)i; break;
    }
}

#define NF 26
#define NI 22

static void test_casts(candle_ctx *ctx) {
    const float fv[NF] = {0.0f, -0.0f, 1.5f, -2.5f, 0.49999997f, 127.9f, 128.0f, 255.5f, 256.0f,
                          -128.7f, -129.0f, 1e10f, -1e10f, 65519.99f, 65520.0f, 1.0f + 0x1p-11f,
                          1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 3 * 0x1p-25f, 0x1p-30f, 1e-40f,
                          INFINITY, -INFINITY, NAN, 3e38f, 2147483520.0f};
    const int64_t iv[NI] = {0, 1, -1, 127, 128, -128, -129, 255, 256, 300, -300, 65504, 65520,
                            100000, 16842753, /* bf16: rounding twice would go down */
                            2147483647, -2147483647 - 1, 2049, 4097, (1ll << 53) - 1,
                            (1ll << 60) + (1ll << 36) + 1, /* f32: rounding twice would go down */
                            INT64_MIN};
    for (size_t s = 0; s < sizeof cast_dtypes / sizeof *cast_dtypes; s++) {
        candle_dtype st = cast_dtypes[s];
        const candle_dtype_traits *tr = cpu_dtype(st);
        int n = tr->is_float ? NF : NI;
        candle_tensor *x = candle_tensor_new(ctx, st, 1, (int64_t[]){n});
        if (!x) continue;
        char *xd = candle_tensor_data(x);
        for (int k = 0; k < n; k++) {
            char *p = xd + k * tr->type_size;
            if (st == CANDLE_DTYPE_F32) memcpy(p, &fv[k], 4);
            else if (st == CANDLE_DTYPE_F16) *(uint16_t *)p = candle_f32_to_f16(fv[k]);
            else if (st == CANDLE_DTYPE_BF16) *(uint16_t *)p = candle_f32_to_bf16(fv[k]);
            else if (st == CANDLE_DTYPE_BOOL) *(uint8_t *)p = iv[k] != 0;
            else expect_cast(CANDLE_DTYPE_I64, (sval){(double)iv[k], iv[k]}, st, p); /* wrap in */
        }
        for (size_t d = 0; d < sizeof cast_dtypes / sizeof *cast_dtypes; d++) {
            candle_dtype dt = cast_dtypes[d];
            size_t dsz = cpu_dtype(dt)->type_size;
            candle_tensor *y = candle_cast(ctx, x, dt);
            CHECK(y && y->dtype == dt && y->storage != x->storage);
            if (!y) continue;
            const char *yd = candle_tensor_data(y);
            for (int k = 0; k < n; k++) {
                sval v = load(st, xd + k * tr->type_size);
                bool is_big = !tr->is_float && (v.i > (1ll << 53) || v.i < -(1ll << 53));
                if (is_big && (dt == CANDLE_DTYPE_F16 || dt == CANDLE_DTYPE_BF16)) {
                    /* beyond f16 range: inf; bf16: checked by value below */
                    if (dt == CANDLE_DTYPE_F16)
                        CHECK((*(const uint16_t *)(yd + k * dsz) & 0x7fff) == 0x7c00);
                    continue;
                }
                unsigned char want[8] = {0};
                expect_cast(st, v, dt, want);
                const void *got = yd + k * dsz;
                bool nan_ok = dt == CANDLE_DTYPE_F32   ? isnan(*(const float *)got) && isnan(*(float *)want)
                              : dt == CANDLE_DTYPE_F16 ? (*(const uint16_t *)got & 0x7fff) > 0x7c00 && (*(uint16_t *)want & 0x7fff) > 0x7c00
                              : dt == CANDLE_DTYPE_BF16 ? (*(const uint16_t *)got & 0x7fff) > 0x7f80 && (*(uint16_t *)want & 0x7fff) > 0x7f80
                                                        : false;
                CHECK_MSG(nan_ok || memcmp(got, want, dsz) == 0, "cast %s -> %s of element %d (%.17g / %lld)",
                          candle_dtype_name(st), candle_dtype_name(dt), k, v.f, (long long)v.i);
            }
        }
    }
    /* the double-rounding cases, spelled out */
    candle_tensor *i32 = candle_tensor_from_i32(ctx, 1, (int64_t[]){1}, (int32_t[]){16842753});
    candle_tensor *b = candle_cast(ctx, i32, CANDLE_DTYPE_BF16);
    CHECK(b && candle_bf16_to_f32(*(uint16_t *)candle_tensor_data(b)) == 16908288.0f);
    candle_tensor *i64 = candle_tensor_new(ctx, CANDLE_DTYPE_I64, 1, (int64_t[]){1});
    *(int64_t *)candle_tensor_data(i64) = (1ll << 60) + (1ll << 36) + 1;
    candle_tensor *f = candle_cast(ctx, i64, CANDLE_DTYPE_F32);
    CHECK(f && *(float *)candle_tensor_data(f) == 0x1p60f + 0x1p37f);
    /* f32 -> f16/bf16 just above a tie rounds up */
    float two[2] = {1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-11f + 0x1p-22f};
    candle_tensor *t2 = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){2}, two);
    candle_tensor *t2b = candle_cast(ctx, t2, CANDLE_DTYPE_BF16), *t2h = candle_cast(ctx, t2, CANDLE_DTYPE_F16);
    CHECK(t2b && ((uint16_t *)candle_tensor_data(t2b))[0] == 0x3f81);
    CHECK(t2h && ((uint16_t *)candle_tensor_data(t2h))[1] == 0x3c01);
    /* cast of a transposed view: layout resolved, result contiguous */
    input a = make_input(ctx, CANDLE_DTYPE_F32, TRANSPOSED, R, C, g_any);
    candle_tensor *h = candle_cast(ctx, a.t, CANDLE_DTYPE_BF16);
    double ref[R * C];
    for (int k = 0; k < R * C; k++) ref[k] = to_dtype(CANDLE_DTYPE_BF16, a.vals[k]);
    compare_ex(h, ref, CANDLE_DTYPE_BF16, true, "cast transposed f32 -> bf16");
    CHECK(h && candle_tensor_is_contiguous(h));
}

/* ---- the reference kernel's rounding into bf16 ---- */

static void test_bf16_rounding(candle_ctx *ctx) {
    /* exp(x) of bf16 inputs through the reference kernel is the double
     * result rounded to nearest even, for a spread of bf16 values in [-8, 8]
     * (the double-rounding cases this guards against are the int casts in
     * test_casts: no exp of a bf16 hits one). */
    int n = 0;
    float xs[4096];
    for (uint32_t h = 0; h < 65536 && n < 4096; h += 7) {
        float v = candle_bf16_to_f32((uint16_t)h);
        if (fabsf(v) <= 8 && !isnan(v)) xs[n++] = v;
    }
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_BF16, 1, (int64_t[]){n}, xs);
    /* a non-contiguous view keeps fast kernels out: the reference decides */
    candle_tensor *xv = candle_slice(ctx, candle_expand(ctx, candle_unsqueeze(ctx, x, 0), 2, (int64_t[]){2, n}), 0, 0, 2, 1);
    candle_tensor *y = candle_exp(ctx, candle_transpose(ctx, xv, 0, 1));
    int bad = 0;
    for (int k = 0; k < n && y; k++) {
        double v;
        candle_tensor_get_f64(y, (int64_t[]){k, 1}, &v);
        double want = ref_round(exp((double)xs[k]), 7, -126, 0x1.fep127);
        if (v != want) bad++;
    }
    CHECK_MSG(y && bad == 0, "%d of %d bf16 exp results not correctly rounded", bad, n);
}

/* ---- copy_into ---- */

static void test_copy_into(candle_ctx *ctx) {
    /* dst: a [4, 6] f16 buffer; write into rows 1..3 step 2, columns
     * transposed, from an f32 [C'] row broadcast over the rows */
    float z[24] = {0};
    candle_tensor *buf = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F16, 2, (int64_t[]){4, 6}, z);
    candle_tensor *view = candle_slice(ctx, candle_narrow(ctx, buf, 1, 1, 4), 0, 1, 4, 2); /* [2, 4] */
    float src[4] = {1.5f, -2.0f, 3.25f, 1000.1f};
    candle_tensor *s = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){4}, src);
    uint64_t allocs = candle_ctx_alloc_count(ctx);
    candle_tensor *w = candle_copy_into(ctx, view, s);
    CHECK(w && w->storage == buf->storage && candle_ctx_alloc_count(ctx) == allocs);
    float out[24];
    CHECK_OK(ctx, candle_tensor_to_f32(buf, out));
    int bad = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++) {
            bool in_view = (i == 1 || i == 3) && j >= 1 && j <= 4;
            double want = in_view ? to_dtype(CANDLE_DTYPE_F16, src[j - 1]) : 0;
            bad += out[i * 6 + j] != want;
        }
    CHECK_MSG(bad == 0, "copy_into: %d elements wrong", bad);
    /* into a transposed view, lazily: nothing happens until compute */
    candle_ctx_set_eager(ctx, false);
    candle_tensor *tv = candle_transpose(ctx, buf, 0, 1); /* [6, 4] */
    candle_tensor *ones = candle_full(ctx, CANDLE_DTYPE_BF16, 2, (int64_t[]){6, 1}, 7.0);
    candle_tensor *w2 = candle_copy_into(ctx, candle_narrow(ctx, tv, 1, 0, 1), ones);
    CHECK(w2 && !w2->computed);
    CHECK_OK(ctx, candle_tensor_to_f32(buf, out));
    CHECK(out[0] == 0); /* not yet */
    CHECK_OK(ctx, candle_compute(ctx, w2));
    CHECK_OK(ctx, candle_tensor_to_f32(buf, out));
    for (int j = 0; j < 6; j++) CHECK(out[j] == 7);
    CHECK(out[6] == 0 && out[7] == 1.5f);
    candle_ctx_set_eager(ctx, true);
    /* shape errors */
    const float five[5] = {1, 2, 3, 4, 5};
    candle_tensor *big = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){5}, five);
    CHECK(candle_copy_into(ctx, view, big) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_SHAPE);
    CHECK_CONTAINS(candle_errmsg(ctx), "copy_into: shape mismatch: dst [2, 4] src [5]");
    candle_ctx_clear_error(ctx);
}

int main(void) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    candle_ctx *ctx;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return 1;
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    test_unary(ctx);
    candle_ctx_reset(ctx, mark);
    test_binary(ctx);
    candle_ctx_reset(ctx, mark);
    test_where(ctx);
    candle_ctx_reset(ctx, mark);
    test_casts(ctx);
    test_bf16_rounding(ctx);
    test_copy_into(ctx);
    CHECK(candle_errcode(ctx) == CANDLE_OK);
    candle_ctx_free(ctx);
    return test_done("test_elementwise");
}
