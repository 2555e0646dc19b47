/* matmul and linear against a naive double-precision reference: float dtypes
 * x operand layouts x broadcast batches, torch-style 1-D operands, weights in
 * other dtypes (f16/bf16 now, Q8_0 once it can be quantized), errors. */
#include "backend/cpu/cpu-impl.h"
#include "mathtest.h"

static const candle_dtype float_types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

/* ---- reference ---- */

typedef struct mat {
    int rank;
    int64_t shape[CANDLE_MAX_RANK];
    double *v; /* row-major logical values */
} mat;

/* out = a x b with torch.matmul semantics; returns false on a shape misfit. */
static bool matmul_ref(const mat *a0, const mat *b0, mat *out) {
    mat a = *a0, b = *b0;
    if (a.rank == 1) {
        a.rank = 2;
        a.shape[0] = 1;
        a.shape[1] = a0->shape[0];
    }
    if (b.rank == 1) {
        b.rank = 2;
        b.shape[1] = 1;
    }
    int na = a.rank - 2, nb = b.rank - 2, n = na > nb ? na : nb;
    int64_t M = a.shape[na], K = a.shape[na + 1], N = b.shape[nb + 1];
    if (b.shape[nb] != K) return false;
    int64_t batch[CANDLE_MAX_RANK], nbatch = 1;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia < 0 ? 1 : a.shape[ia], sb = ib < 0 ? 1 : b.shape[ib];
        if (sa != sb && sa != 1 && sb != 1) return false;
        batch[i] = sa == 1 ? sb : sa;
        nbatch *= batch[i];
    }
    out->v = malloc(sizeof(double) * (size_t)(nbatch * M * N + 1));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        /* batch offsets of a and b, broadcasting their size-1 dims */
        int64_t rem = bi, oa = 0, ob = 0, ma = M * K, mb = K * N;
        for (int i = n - 1; i >= 0; i--) {
            int64_t j = rem % batch[i];
            rem /= batch[i];
            int ia = i - (n - na), ib = i - (n - nb);
            if (ia >= 0) {
                if (a.shape[ia] != 1) oa += j * ma;
                ma *= a.shape[ia];
            }
            if (ib >= 0) {
                if (b.shape[ib] != 1) ob += j * mb;
                mb *= b.shape[ib];
            }
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += a.v[oa + i * K + k] * b.v[ob + k * N + j];
                out->v[bi * M * N + i * N + j] = acc;
            }
    }
    out->rank = 0;
    for (int i = 0; i < n; i++) out->shape[out->rank++] = batch[i];
    if (a0->rank != 1) out->shape[out->rank++] = M;
    if (b0->rank != 1) out->shape[out->rank++] = N;
    return true;
}

/* The values of transpose(w, -1, -2) read from w itself: block dtypes can
 * only be read back along their rows. */
static mat mat_of_weight_t(candle_ctx *ctx, candle_tensor *w) {
    mat m = {0, {0}, NULL};
    /* a cast dequantizes whole rows: reading block elements one by one would
     * dequantize a block per element */
    double *v = mt_values(cpu_dtype(w->dtype)->is_quantized ? candle_cast(ctx, w, CANDLE_DTYPE_F32) : w);
    if (!v) return m;
    int r = w->rank;
    int64_t N = w->shape[r - 2], K = w->shape[r - 1], nb = candle_tensor_numel(w) / (N * K > 0 ? N * K : 1);
    m.rank = r;
    memcpy(m.shape, w->shape, sizeof m.shape);
    m.shape[r - 2] = K;
    m.shape[r - 1] = N;
    m.v = malloc(sizeof(double) * (size_t)(nb * N * K + 1));
    for (int64_t b = 0; b < nb; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) m.v[b * N * K + k * N + n] = v[b * N * K + n * K + k];
    free(v);
    return m;
}

static mat mat_of(const candle_tensor *t) {
    mat m = {0, {0}, NULL};
    if (!t) return m;
    m.rank = t->rank;
    memcpy(m.shape, t->shape, sizeof m.shape);
    m.v = mt_values(t);
    return m;
}

/* m with every value replaced by its magnitude (a copy). */
static mat mat_abs(const mat *m) {
    mat r = *m;
    int64_t n = 1;
    for (int i = 0; i < m->rank; i++) n *= m->shape[i];
    r.v = m->v ? malloc(sizeof(double) * (size_t)(n + 1)) : NULL;
    if (r.v)
        for (int64_t i = 0; i < n; i++) r.v[i] = fabs(m->v[i]);
    return r;
}

/* The error of got against the exact products ref, normalized by the
 * products of magnitudes mag (sum_k |a_ik| |b_kj|) rather than by ref itself:
 * rounding errors scale with the magnitudes, so a near-cancelling dot (ref
 * much smaller than mag) is not held to a tighter bound than the others. */
static double product_err(const double *got, const double *ref, const double *mag, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = got[i] - ref[i];
        num += d * d;
        den += mag[i] * mag[i];
    }
    if (isnan(num)) return INFINITY;
    return den == 0 ? num : num / den;
}

/* y (computed) against the reference product of a and b (their values);
 * b_is_wt: b is given as the weight w of b = transpose(w). When check_bound
 * is set, also checks that the bound rejects a wrong result: each output
 * with its largest product term dropped, and the largest output moved by
 * 1e-4 of its magnitude (a wrong f32 kernel is off by far more). */
static void check_product_bound(candle_ctx *ctx, const candle_tensor *a, candle_tensor *b, bool b_is_wt,
                                const candle_tensor *y, candle_dtype out_dt, double bound, const char *what,
                                bool check_bound) {
    mat ma = mat_of(a), mb = b_is_wt ? mat_of_weight_t(ctx, b) : mat_of(b), ref = {0, {0}, NULL};
    mat aa = mat_abs(&ma), ab = mat_abs(&mb), mag = {0, {0}, NULL};
    bool ok = ma.v && mb.v && aa.v && ab.v && matmul_ref(&ma, &mb, &ref) && matmul_ref(&aa, &ab, &mag);
    CHECK_MSG(ok && y && mt_same_shape(y, ref.rank, ref.shape) && y->dtype == out_dt, "%s: %s", what,
              candle_errmsg(ctx));
    double *got = ok ? mt_values(y) : NULL;
    int64_t n = y ? candle_tensor_numel(y) : 0;
    if (got && ok && y && mt_same_shape(y, ref.rank, ref.shape)) {
        double e = product_err(got, ref.v, mag.v, n);
        CHECK_MSG(e <= bound, "%s: error %g (squared, relative to sum |a||b|)", what, e);
        if (check_bound && ma.rank == 2 && mb.rank == 2) { /* plain [M, K] x [K, N] */
            int64_t M = ma.shape[0], K = ma.shape[1], N = mb.shape[1], big = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    if (mag.v[i * N + j] > mag.v[big]) big = i * N + j;
                    double term = 0, keep = got[i * N + j];
                    for (int64_t k = 0; k < K; k++)
                        if (fabs(ma.v[i * K + k] * mb.v[k * N + j]) > fabs(term)) term = ma.v[i * K + k] * mb.v[k * N + j];
                    got[i * N + j] = ref.v[i * N + j] - term;
                    double w = product_err(got, ref.v, mag.v, n);
                    CHECK_MSG(w > bound, "%s: output %lld without its largest term passes (%g)", what,
                              (long long)(i * N + j), w);
                    got[i * N + j] = keep;
                }
            got[big] = ref.v[big] + 1e-4 * mag.v[big];
            double w = product_err(got, ref.v, mag.v, n);
            CHECK_MSG(w > bound, "%s: an error of 1e-4 passes (%g)", what, w);
        }
    }
    free(got);
    free(ma.v);
    free(mb.v);
    free(aa.v);
    free(ab.v);
    free(ref.v);
    free(mag.v);
}

static void check_product_m(candle_ctx *ctx, const candle_tensor *a, candle_tensor *b, bool b_is_wt,
                            const candle_tensor *y, candle_dtype out_dt, double bound, const char *what) {
    check_product_bound(ctx, a, b, b_is_wt, y, out_dt, bound, what, false);
}

static void check_product(candle_ctx *ctx, const candle_tensor *a, candle_tensor *b,
                          const candle_tensor *y, candle_dtype out_dt, double bound,
                          const char *what) {
    check_product_m(ctx, a, b, false, y, out_dt, bound, what);
}

/* ---- same-dtype products over layouts ---- */

typedef struct mm_case {
    int ra, rb;
    int64_t a[4], b[4];
} mm_case;

static const mm_case cases[] = {
    {2, 2, {3, 5}, {5, 7}},
    {2, 2, {1, 9}, {9, 1}},
    {2, 2, {4, 1}, {1, 3}},             /* K = 1 */
    {3, 3, {2, 3, 4}, {2, 4, 5}},       /* equal batches */
    {4, 3, {2, 1, 3, 4}, {3, 4, 5}},    /* broadcast batch both ways */
    {3, 2, {4, 3, 6}, {6, 2}},          /* rank-2 rhs broadcast over a batch */
    {2, 4, {5, 3}, {2, 2, 3, 3}},       /* rank-2 lhs broadcast */
};

static void test_layouts(candle_ctx *ctx) {
    uint64_t seed = 7;
    char what[160];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t t = 0; t < 3; t++)
            for (int la = 0; la < MT_LAYOUT_COUNT; la++)
                for (int lb = 0; lb < MT_LAYOUT_COUNT; lb++) {
                    const mm_case *mc = &cases[c];
                    candle_dtype dt = float_types[t];
                    candle_ctx_mark m = candle_ctx_get_mark(ctx);
                    candle_tensor *a = mt_input(ctx, dt, mc->ra, mc->a, (mt_layout)la, seed++, -1, 1);
                    candle_tensor *b = mt_input(ctx, dt, mc->rb, mc->b, (mt_layout)lb, seed++, -1, 1);
                    snprintf(what, sizeof what, "case %zu %s lhs %s rhs %s", c, candle_dtype_name(dt),
                             mt_layout_names[la], mt_layout_names[lb]);
                    /* the f32 bound itself (f16's and bf16's are loose enough
                     * to pass a dropped small term) */
                    check_product_bound(ctx, a, b, false, candle_matmul(ctx, a, b), dt, mt_bound(dt), what,
                                        dt == CANDLE_DTYPE_F32);
                    candle_ctx_reset(ctx, m);
                }
}

/* torch.matmul's 1-D rules: a row on the left, a column on the right. */
static void test_vectors(candle_ctx *ctx) {
    static const mm_case vcases[] = {
        {1, 2, {5}, {5, 3}}, {2, 1, {4, 5}, {5}}, {1, 1, {7}, {7}}, {1, 3, {3}, {2, 3, 4}},
        {3, 1, {2, 4, 3}, {3}},
    };
    char what[64];
    for (size_t c = 0; c < sizeof vcases / sizeof vcases[0]; c++)
        for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++) {
            const mm_case *mc = &vcases[c];
            candle_tensor *a = mt_input(ctx, CANDLE_DTYPE_F32, mc->ra, mc->a, (mt_layout)lay, c, -1, 1);
            candle_tensor *b = mt_input(ctx, CANDLE_DTYPE_F32, mc->rb, mc->b, MT_SLICED, c + 99, -1, 1);
            if (!a) continue;
            snprintf(what, sizeof what, "vector case %zu lhs %s", c, mt_layout_names[lay]);
            check_product(ctx, a, b, candle_matmul(ctx, a, b), CANDLE_DTYPE_F32, 1e-10, what);
        }
}

/* ---- weights in another dtype: b = transpose(w), w [..., N, K] row-major ---- */

/* w [N, K] (or [B, N, K]) as a plain leaf, a row-narrowed view, or every
 * other row: all keep whole contiguous rows. */
static candle_tensor *weight_view(candle_ctx *ctx, candle_dtype dt, int rank, const int64_t *shape,
                                  int form, uint64_t seed) {
    int64_t s[3];
    memcpy(s, shape, sizeof(int64_t) * (size_t)rank);
    int r = rank - 2; /* the N dim */
    if (form == 1) s[r] += 3;
    if (form == 2) s[r] = 2 * s[r];
    int64_t n = mt_numel(rank, s);
    float *v = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = (float)mt_uniform(&seed, -1, 1);
    candle_tensor *w = candle_tensor_from_f32(ctx, dt, rank, s, v);
    free(v);
    if (form == 1) return candle_narrow(ctx, w, r, 2, shape[r]);
    if (form == 2) return candle_slice(ctx, w, r, 1, s[r], 2);
    return w;
}

/* Fast kernels may round the activations to the weight's vec_dot_type (8-bit
 * blocks, as llama.cpp does): NMSE about 1e-5, noisy on a few outputs. An
 * indexing mistake still gives about 1. The reference dequantizes exactly. */
static double weight_bound(candle_dtype wdt) {
    if (mt_ref_mode()) return 1e-10;
    return cpu_dtype(wdt)->is_quantized ? 1e-3 : 1e-6;
}

/* thorough: every x shape and layout; otherwise a few, for the slow-to-read
 * 256-element block dtypes. */
static void check_weight_dtype(candle_ctx *ctx, candle_dtype wdt, int64_t K, bool thorough) {
    static const int64_t xs[][3] = {{3, 0, 0}, {1, 0, 0}, {2, 3, 0}};
    static const int xr[] = {2, 2, 3};
    char what[128];
    uint64_t seed = 500;
    for (int form = 0; form < 3; form++)
        for (int xc = 0; xc < 3; xc++)
            for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++) {
                if (!thorough && (xc != 2 || lay > MT_TRANSPOSED)) continue;
                candle_ctx_mark m = candle_ctx_get_mark(ctx);
                int64_t wshape[2] = {5, K}, xshape[3];
                memcpy(xshape, xs[xc], sizeof xshape);
                xshape[xr[xc] - 1] = K;
                candle_tensor *w = weight_view(ctx, wdt, 2, wshape, form, seed++);
                candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, xr[xc], xshape, (mt_layout)lay, seed++, -1, 1);
                if (!x) continue;
                candle_tensor *wt = candle_transpose(ctx, w, -1, -2);
                snprintf(what, sizeof what, "%s weight form %d x case %d %s", candle_dtype_name(wdt),
                         form, xc, mt_layout_names[lay]);
                check_product_m(ctx, x, w, true, candle_matmul(ctx, x, wt), CANDLE_DTYPE_F32, weight_bound(wdt), what);
                check_product_m(ctx, x, w, true, candle_linear(ctx, x, w, NULL), CANDLE_DTYPE_F32, weight_bound(wdt), what);
                candle_ctx_reset(ctx, m);
            }
    /* batched weights [B, N, K] against x [B, M, K] */
    int64_t wshape[3] = {2, 4, K}, xshape[3] = {2, 3, K};
    candle_tensor *w = weight_view(ctx, wdt, 3, wshape, 0, 99);
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 3, xshape, MT_TRANSPOSED, 98, -1, 1);
    candle_tensor *wt = candle_transpose(ctx, w, -1, -2);
    check_product_m(ctx, x, w, true, candle_matmul(ctx, x, wt), CANDLE_DTYPE_F32, weight_bound(wdt), "batched weights");
    /* a size-1 batch dim of the weight broadcasts (block dtypes cannot be expand-viewed) */
    int64_t w1shape[3] = {1, 4, K};
    w = weight_view(ctx, wdt, 3, w1shape, 1, 97);
    wt = candle_transpose(ctx, w, -1, -2);
    check_product_m(ctx, x, w, true, candle_matmul(ctx, x, wt), CANDLE_DTYPE_F32, weight_bound(wdt), "size-1 weight batch");
}

static void test_weights(candle_ctx *ctx) {
    check_weight_dtype(ctx, CANDLE_DTYPE_F16, 7, true);
    check_weight_dtype(ctx, CANDLE_DTYPE_BF16, 7, true);
    bool missing_checked = false;
    for (int d = CANDLE_DTYPE_Q4_0; d < CANDLE_DTYPE_COUNT; d++) {
        const candle_dtype_traits *tr = cpu_dtype((candle_dtype)d);
        if (tr->from_f32 && tr->to_f32) {
            candle_ctx_mark m = candle_ctx_get_mark(ctx);
            check_weight_dtype(ctx, (candle_dtype)d, 2 * tr->block_size, d == CANDLE_DTYPE_Q8_0);
            candle_ctx_reset(ctx, m);
            continue;
        }
        if (d == CANDLE_DTYPE_Q8_0)
            printf("test_matmul: note: Q8_0 weight case skipped (no Q8_0 quantizer registered yet)\n");
        if (tr->to_f32 || missing_checked) continue;
        /* a block dtype without a dequantizer fails at compute with a clear message */
        int64_t ws[2] = {2, tr->block_size}, xs[2] = {1, tr->block_size};
        candle_tensor *w = candle_tensor_new(ctx, (candle_dtype)d, 2, ws);
        candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, xs, MT_CONTIG, 1, -1, 1);
        char want[96];
        snprintf(want, sizeof want, "matmul: no dequantization (to_f32) registered for %s", tr->name);
        MT_CHECK_ERR(ctx, candle_linear(ctx, x, w, NULL), CANDLE_ERR_UNSUPPORTED, want);
        missing_checked = true;
    }
}

/* bias added after the product, cast to the output dtype when it differs */
static void test_linear_bias(candle_ctx *ctx) {
    const candle_dtype wd[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    for (size_t t = 0; t < 3; t++)
        for (int same = 0; same < 2; same++) {
            candle_dtype xdt = same ? wd[t] : CANDLE_DTYPE_F32;
            int64_t xs[3] = {2, 3, 6}, ws[2] = {4, 6}, bs[1] = {4};
            candle_tensor *x = mt_input(ctx, xdt, 3, xs, MT_OFFSET, 11 + t, -1, 1);
            candle_tensor *w = mt_input(ctx, wd[t], 2, ws, MT_CONTIG, 12 + t, -1, 1);
            candle_tensor *b = mt_input(ctx, wd[t], 1, bs, MT_SLICED, 13 + t, -1, 1);
            candle_tensor *y = candle_linear(ctx, x, w, b);
            double *xv = mt_values(x), *wv = mt_values(w), *bv = mt_values(b), *got = mt_values(y);
            double ref[24];
            for (int r = 0; r < 6; r++)
                for (int n = 0; n < 4; n++) {
                    double acc = bv ? bv[n] : 0;
                    for (int k = 0; k < 6; k++) acc += xv ? xv[r * 6 + k] * wv[n * 6 + k] : 0;
                    ref[r * 4 + n] = acc;
                }
            int64_t ys[3] = {2, 3, 4};
            CHECK_MSG(got && mt_same_shape(y, 3, ys) && y->dtype == xdt, "linear bias: %s",
                      candle_errmsg(ctx));
            /* the product and the bias add each round to the output dtype */
            if (got) CHECK_MSG(mt_nmse(got, ref, 24) <= 2 * mt_bound(xdt), "linear %s bias nmse %g",
                               candle_dtype_name(wd[t]), mt_nmse(got, ref, 24));
            free(xv);
            free(wv);
            free(bv);
            free(got);
        }
}

/* candle_matmul_bias is one node (the bias its third source) for f32
 * activations, and its output is candle_add(candle_matmul(a, b), bias) bit
 * for bit on every path a product takes: matrix-vector rows (M 1, 3), dot
 * tiles (M 9), the weight-row tiles with the bias added as C leaves their
 * transposed scratch (M 40, 200 bf16), the packed GEMM (M 300 f32, 600),
 * the integer kernels and the batch-1 matvec job (q8_0, q4_0), eager and
 * built as a graph. */
static void test_bias_paths(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const candle_dtype wd[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_Q8_0,
                               CANDLE_DTYPE_Q4_0};
    const int64_t ms[] = {1, 3, 9, 40, 200, 300, 600};
    int64_t K = 320, N = 200, bs[1] = {N};
    for (size_t t = 0; t < sizeof wd / sizeof wd[0]; t++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            candle_ctx_mark mark = candle_ctx_get_mark(ctx);
            int64_t as[2] = {ms[i], K}, ws[2] = {N, K};
            candle_tensor *a = mt_input(ctx, CANDLE_DTYPE_F32, 2, as, i % 2 ? MT_OFFSET : MT_CONTIG, 40 + i, -1, 1);
            candle_tensor *w = mt_input(ctx, wd[t], 2, ws, MT_CONTIG, 50 + t, -1, 1);
            candle_tensor *b = mt_input(ctx, CANDLE_DTYPE_F32, 1, bs, MT_CONTIG, 60 + t, -1, 1);
            candle_tensor *wt = candle_transpose(ctx, w, 0, 1);
            candle_tensor *y = candle_matmul_bias(ctx, a, wt, b), *ref = candle_add(ctx, candle_matmul(ctx, a, wt), b);
            CHECK_MSG(y && ref && y->op == CANDLE_OP_MATMUL && y->n_src == 3 && y->src[2] == b, "bias node: %s",
                      candle_errmsg(ctx));
            if (!eager && y && ref) {
                CHECK_OK(ctx, candle_compute(ctx, y));
                CHECK_OK(ctx, candle_compute(ctx, ref));
            }
            double *got = mt_values(y), *want = mt_values(ref);
            int64_t n = ms[i] * N;
            CHECK_MSG(got && want && memcmp(got, want, sizeof(double) * (size_t)n) == 0,
                      "matmul_bias %s M %lld (%s): not the matmul + add bits", candle_dtype_name(wd[t]),
                      (long long)ms[i], eager ? "eager" : "graph");
            free(got);
            free(want);
            candle_ctx_reset(ctx, mark);
        }
    /* f16 activations: the add (an f16 product) */
    int64_t as[2] = {3, 8}, ws[2] = {8, 5}, b5[1] = {5};
    candle_tensor *y = candle_matmul_bias(ctx, mt_input(ctx, CANDLE_DTYPE_F16, 2, as, MT_CONTIG, 1, -1, 1),
                                          mt_input(ctx, CANDLE_DTYPE_F16, 2, ws, MT_CONTIG, 2, -1, 1),
                                          mt_input(ctx, CANDLE_DTYPE_F16, 1, b5, MT_CONTIG, 3, -1, 1));
    CHECK_MSG(y && y->op == CANDLE_OP_ADD && y->dtype == CANDLE_DTYPE_F16, "f16 matmul_bias: %s", candle_errmsg(ctx));
    candle_ctx_free(ctx);
}

static candle_tensor *tensor(candle_ctx *ctx, candle_dtype dt, int rank, const int64_t *shape) {
    return mt_input(ctx, dt, rank, shape, MT_CONTIG, 3, -1, 1);
}

static void test_errors(candle_ctx *ctx) {
    int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s35[2] = {3, 5}, s234[3] = {2, 3, 4}, s345[3] = {3, 4, 5};
    candle_tensor *a = tensor(ctx, CANDLE_DTYPE_F32, 2, s23), *b = tensor(ctx, CANDLE_DTYPE_F32, 2, s45);
    MT_CHECK_ERR(ctx, candle_matmul(ctx, a, b), CANDLE_ERR_SHAPE,
                 "matmul: shape mismatch: lhs [2, 3] rhs [4, 5] (3 != 4)");
    MT_CHECK_ERR(ctx, candle_matmul(ctx, tensor(ctx, CANDLE_DTYPE_F32, 3, s234),
                                    tensor(ctx, CANDLE_DTYPE_F32, 3, s345)),
                 CANDLE_ERR_SHAPE,
                 "matmul: shape mismatch: lhs [2, 3, 4] rhs [3, 4, 5] (batch dims do not broadcast)");
    int64_t k4 = 4;
    MT_CHECK_ERR(ctx, candle_matmul(ctx, a, tensor(ctx, CANDLE_DTYPE_F32, 1, &k4)), CANDLE_ERR_SHAPE,
                 "matmul: shape mismatch: lhs [2, 3] rhs [4] (3 != 4)");
    candle_tensor *scalar = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 0, NULL);
    MT_CHECK_ERR(ctx, candle_matmul(ctx, scalar, b), CANDLE_ERR_SHAPE,
                 "matmul: shape mismatch: lhs [] rhs [4, 5] (operands must be at least 1-D)");
    candle_tensor *a16 = tensor(ctx, CANDLE_DTYPE_F16, 2, s23);
    MT_CHECK_ERR(ctx, candle_matmul(ctx, a16, tensor(ctx, CANDLE_DTYPE_F32, 2, s35)), CANDLE_ERR_DTYPE,
                 "matmul: dtype mismatch: lhs f16 rhs f32");
    MT_CHECK_ERR(ctx, candle_matmul(ctx, a16, tensor(ctx, CANDLE_DTYPE_BF16, 2, s35)), CANDLE_ERR_DTYPE,
                 "matmul: bf16 rhs needs an f32 lhs, got f16");
    MT_CHECK_ERR(ctx, candle_matmul(ctx, tensor(ctx, CANDLE_DTYPE_I32, 2, s23),
                                    tensor(ctx, CANDLE_DTYPE_I32, 2, s35)),
                 CANDLE_ERR_DTYPE, "matmul: dtype i32 not supported (needs f32, f16 or bf16)");
    /* an f16 rhs whose rows are not the K dim is not a weight */
    MT_CHECK_ERR(ctx, candle_matmul(ctx, a, tensor(ctx, CANDLE_DTYPE_F16, 2, s35)), CANDLE_ERR_UNSUPPORTED,
                 "matmul: f16 rhs must be the transpose of a row-major [N, K] weight");
    candle_tensor *w = tensor(ctx, CANDLE_DTYPE_F32, 2, s45);
    MT_CHECK_ERR(ctx, candle_linear(ctx, a, w, NULL), CANDLE_ERR_SHAPE,
                 "linear: shape mismatch: input [2, 3] weight [4, 5] (want weight [N, 3])");
    MT_CHECK_ERR(ctx, candle_linear(ctx, a, tensor(ctx, CANDLE_DTYPE_F32, 1, &k4), NULL), CANDLE_ERR_SHAPE,
                 "linear: shape mismatch: input [2, 3] weight [4]");
    MT_CHECK_ERR(ctx, candle_linear(ctx, a, tensor(ctx, CANDLE_DTYPE_F32, 2, s23), tensor(ctx, CANDLE_DTYPE_F32, 1, &k4)),
                 CANDLE_ERR_SHAPE, "linear: bias [4] does not match weight [2, 3]");
    /* matmul_group_corr: b [K, N] = [4, 5]; corr [K / group, N] f32 */
    int64_t s24[2] = {2, 4}, s25[2] = {2, 5}, s15[2] = {1, 5};
    candle_tensor *a4 = tensor(ctx, CANDLE_DTYPE_F32, 2, s24), *c25 = tensor(ctx, CANDLE_DTYPE_F32, 2, s25);
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, a4, b, tensor(ctx, CANDLE_DTYPE_F32, 2, s15), 2), CANDLE_ERR_SHAPE,
                 "matmul_group_corr: corr is [1, 5] f32, want f32 [2, 5]");
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, a4, b, tensor(ctx, CANDLE_DTYPE_F16, 2, s25), 2), CANDLE_ERR_SHAPE,
                 "matmul_group_corr: corr is [2, 5] f16, want f32 [2, 5]");
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, a4, b, c25, 3), CANDLE_ERR_SHAPE, "K 4 vs 4, group 3");
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, a, b, c25, 2), CANDLE_ERR_SHAPE, "K 3 vs 4, group 2");
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, a4, tensor(ctx, CANDLE_DTYPE_F32, 3, s345), c25, 2),
                 CANDLE_ERR_SHAPE, "want a [..., K] and b [K, N]");
    MT_CHECK_ERR(ctx, candle_matmul_group_corr(ctx, tensor(ctx, CANDLE_DTYPE_F16, 2, s24),
                                               tensor(ctx, CANDLE_DTYPE_F16, 2, s45), c25, 2),
                 CANDLE_ERR_DTYPE, "matmul_group_corr: lhs f16, want f32");
    CHECK(candle_matmul_group_corr(ctx, a4, b, c25, 2) != NULL);
    candle_ctx_clear_error(ctx);
    CHECK(candle_matmul(ctx, NULL, b) == NULL && candle_errcode(ctx) == CANDLE_OK);
}

/* Lazily built: the transpose and expand views bind at compute. */
static void test_lazy(void) {
    candle_ctx *ctx = mt_ctx(false);
    int64_t xs[2] = {4, 3}, bs[3] = {2, 4, 5};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, xs, MT_CONTIG, 1, -1, 1);
    candle_tensor *b = mt_input(ctx, CANDLE_DTYPE_F32, 3, bs, MT_CONTIG, 2, -1, 1);
    candle_tensor *a = candle_transpose(ctx, candle_scale(ctx, x, 2.0), 0, 1); /* [3, 4] */
    candle_tensor *y = candle_matmul(ctx, a, b);
    CHECK(y && !y->computed);
    /* strided operands are read in place: the graph holds no copy */
    candle_graph *g = candle_graph_build(ctx, &y, 1);
    for (int i = 0; i < candle_graph_n_nodes(g); i++)
        CHECK(candle_graph_node(g, i)->op != CANDLE_OP_COPY);
    CHECK(candle_graph_n_nodes(g) >= 5); /* x, b, scale, transpose, expand, matmul */
    CHECK_OK(ctx, candle_compute(ctx, y));
    CHECK_OK(ctx, candle_compute(ctx, a));
    check_product(ctx, a, b, y, CANDLE_DTYPE_F32, 1e-10, "lazy");
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    candle_ctx *ctx = mt_ctx(true);
    test_layouts(ctx);
    test_vectors(ctx);
    test_weights(ctx);
    test_linear_bias(ctx);
    test_errors(ctx);
    candle_ctx_free(ctx);
    test_lazy();
    /* the AVX2 table's transposed scratch too (its own write-out) */
    static const char *const isas[] = {"avx2", "auto"};
    for (int i = 0; i < 2; i++)
        if (cpu_simd_force(isas[i])) {
            test_bias_paths(true);
            test_bias_paths(false);
        }
    cpu_simd_force("auto");
}

int main(void) { return mt_run_passes(run_checks, "test_matmul"); }
