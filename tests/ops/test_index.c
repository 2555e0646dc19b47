/* index_select, embedding, gather, concat and stack against naive references
 * over dtypes, layouts, dims, index dtypes, eager and graph contexts; the
 * quantized paths (block copies, dequantizing embedding) and error cases.
 * These ops only move values, so results must match exactly. */
#include "mathtest.h"

static const candle_dtype kDtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16,
                                       CANDLE_DTYPE_I32, CANDLE_DTYPE_I64};
#define N_DTYPES (int)(sizeof kDtypes / sizeof kDtypes[0])

static void unravel(int64_t i, int rank, const int64_t *shape, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

static int64_t ravel(int rank, const int64_t *shape, const int64_t *idx) {
    int64_t st[CANDLE_MAX_RANK];
    mt_strides(rank, shape, st);
    int64_t o = 0;
    for (int d = 0; d < rank; d++) o += idx[d] * st[d];
    return o;
}

/* An index tensor of dtype dt holding vals; step 2 makes it a strided view. */
static candle_tensor *make_idx(candle_ctx *ctx, candle_dtype dt, int rank, const int64_t *shape,
                               const int64_t *vals, int step) {
    int64_t bs[CANDLE_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++) bs[i] = shape[i];
    if (step > 1) bs[0] = shape[0] * step;
    candle_tensor *t = candle_tensor_new(ctx, dt, rank, bs);
    if (!t) return NULL;
    int64_t n = mt_numel(rank, shape), inner = rank ? mt_numel(rank - 1, shape + 1) : 1;
    for (int64_t i = 0; i < mt_numel(rank, bs); i++) {
        /* Base element i holds the value of logical element (row / step). */
        int64_t row = inner ? i / inner : 0, col = inner ? i % inner : 0;
        int64_t v = row % step == 0 && n ? vals[(row / step) * inner + col] : 999;
        if (dt == CANDLE_DTYPE_I32) ((int32_t *)candle_tensor_data(t))[i] = (int32_t)v;
        else ((int64_t *)candle_tensor_data(t))[i] = v;
    }
    return step > 1 ? candle_slice(ctx, t, 0, 0, bs[0], step) : t;
}

/* Computes t in a graph context (no-op when eager) and reads it back. */
static double *result(candle_ctx *ctx, candle_tensor *t) {
    if (!t || candle_compute(ctx, t) != CANDLE_OK) return NULL;
    return mt_values(t);
}

static int count_diff(const double *got, const double *want, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !(got[i] == want[i]);
    return bad;
}

static void test_index_select(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const int64_t shape[3] = {5, 7, 3};
    uint64_t seed = 1;
    for (int di = 0; di < N_DTYPES; di++)
        for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
            for (int dim = 0; dim < 3; dim++)
                for (int it = 0; it < 2; it++) {
                    candle_dtype dt = kDtypes[di];
                    candle_dtype idt = it ? CANDLE_DTYPE_I64 : CANDLE_DTYPE_I32;
                    candle_tensor *x = mt_input(ctx, dt, 3, shape, (mt_layout)lay, seed++, -50, 50);
                    double *xv = mt_values(x);
                    int64_t vals[6];
                    for (int k = 0; k < 6; k++) vals[k] = (int64_t)(mt_rng_next(&seed) % (uint64_t)shape[dim]);
                    vals[5] = vals[0]; /* a repeat */
                    int64_t n = 6;
                    candle_tensor *idx = make_idx(ctx, idt, 1, &n, vals, lay == MT_SLICED ? 2 : 1);
                    candle_tensor *y = candle_index_select(ctx, x, dim - 3, idx);
                    int64_t os[3] = {shape[0], shape[1], shape[2]};
                    os[dim] = n;
                    double *got = result(ctx, y);
                    CHECK_MSG(got && mt_same_shape(y, 3, os) && y->dtype == dt, "%s %s dim %d: %s",
                              candle_dtype_name(dt), mt_layout_names[lay], dim, candle_errmsg(ctx));
                    if (!got || !xv) {
                        free(got);
                        free(xv);
                        continue;
                    }
                    int64_t on = mt_numel(3, os), at[3];
                    double *want = malloc(sizeof(double) * (size_t)on);
                    for (int64_t i = 0; i < on; i++) {
                        unravel(i, 3, os, at);
                        at[dim] = vals[at[dim]];
                        want[i] = xv[ravel(3, shape, at)];
                    }
                    int bad = count_diff(got, want, on);
                    CHECK_MSG(bad == 0, "index_select %s %s dim %d idx %s: %d wrong",
                              candle_dtype_name(dt), mt_layout_names[lay], dim,
                              candle_dtype_name(idt), bad);
                    free(want);
                    free(got);
                    free(xv);
                }
    /* 1-D input and an empty index. */
    int64_t n1 = 9, n0 = 0, two = 2;
    candle_tensor *x1 = mt_input(ctx, CANDLE_DTYPE_F32, 1, &n1, MT_CONTIG, 7, -1, 1);
    int64_t v2[2] = {8, 0};
    double *xv = mt_values(x1), *got = result(ctx, candle_index_select(ctx, x1, 0, make_idx(ctx, CANDLE_DTYPE_I64, 1, &two, v2, 1)));
    CHECK(got && xv && got[0] == xv[8] && got[1] == xv[0]);
    free(got);
    candle_tensor *e = candle_index_select(ctx, x1, 0, make_idx(ctx, CANDLE_DTYPE_I32, 1, &n0, v2, 1));
    CHECK(e && candle_compute(ctx, e) == CANDLE_OK && e->shape[0] == 0);
    free(xv);
    candle_ctx_free(ctx);
}

static void test_index_select_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    const int64_t shape[2] = {5, 4};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, MT_CONTIG, 3, -1, 1);
    int64_t n = 3, bad_hi[3] = {0, 5, 1}, bad_lo[3] = {-1, 0, 0};
    MT_CHECK_ERR(ctx, candle_index_select(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I32, 1, &n, bad_hi, 1)),
                 CANDLE_ERR_INVALID_ARG, "index_select: index 5 out of range for dim 0 of size 5");
    MT_CHECK_ERR(ctx, candle_index_select(ctx, x, 1, make_idx(ctx, CANDLE_DTYPE_I64, 1, &n, bad_lo, 1)),
                 CANDLE_ERR_INVALID_ARG, "index -1 out of range for dim 1 of size 4");
    candle_tensor *fidx = mt_input(ctx, CANDLE_DTYPE_F32, 1, &n, MT_CONTIG, 4, 0, 3);
    MT_CHECK_ERR(ctx, candle_index_select(ctx, x, 0, fidx), CANDLE_ERR_DTYPE,
                 "index_select: index dtype must be i32 or i64, got f32");
    int64_t s2[2] = {1, 3}, v[3] = {0, 1, 2};
    MT_CHECK_ERR(ctx, candle_index_select(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I32, 2, s2, v, 1)),
                 CANDLE_ERR_SHAPE, "index_select: index must be 1-D, got [1, 3]");
    MT_CHECK_ERR(ctx, candle_index_select(ctx, x, 2, make_idx(ctx, CANDLE_DTYPE_I32, 1, &n, v, 1)),
                 CANDLE_ERR_INVALID_ARG, "index_select: dim 2 out of range for rank 2");
    int64_t qs[2] = {3, 32};
    candle_tensor *q = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, qs);
    MT_CHECK_ERR(ctx, candle_index_select(ctx, q, 1, make_idx(ctx, CANDLE_DTYPE_I32, 1, &n, v, 1)),
                 CANDLE_ERR_UNSUPPORTED, "cannot select within q8_0 rows");
    /* In a graph the bad index is found when computing, nothing is read. */
    candle_ctx_set_eager(ctx, false);
    candle_tensor *y = candle_index_select(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I64, 1, &n, bad_hi, 1));
    CHECK(y != NULL);
    CHECK(candle_compute(ctx, y) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_errmsg(ctx), "index 5 out of range for dim 0 of size 5 (position 1)");
    CHECK(candle_index_select(ctx, NULL, 0, y) == NULL);
    candle_ctx_free(ctx);
}

static void fill_bytes(candle_tensor *t, uint64_t seed) {
    unsigned char *p = candle_tensor_data(t);
    size_t n = candle_tensor_nbytes(t);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(mt_rng_next(&seed) >> 56);
}

static void test_embedding_plain(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const candle_dtype dts[3] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    const int64_t ts[2] = {11, 6};
    const int64_t id_shapes[4][3] = {{1, 1, 1}, {5, 1, 1}, {2, 3, 1}, {2, 1, 3}};
    uint64_t seed = 40;
    for (int di = 0; di < 3; di++)
        for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
            for (int r = 0; r < 4; r++) {
                candle_tensor *tab = mt_input(ctx, dts[di], 2, ts, (mt_layout)lay, seed++, -3, 3);
                double *tv = mt_values(tab);
                int64_t n = mt_numel(r, id_shapes[r]), vals[6];
                for (int64_t k = 0; k < n; k++) vals[k] = (int64_t)(mt_rng_next(&seed) % 11);
                candle_dtype idt = r % 2 ? CANDLE_DTYPE_I32 : CANDLE_DTYPE_I64;
                candle_tensor *ids = make_idx(ctx, idt, r, id_shapes[r], vals, 1);
                if (r == 2) /* non-contiguous ids */
                    ids = candle_transpose(ctx, make_idx(ctx, idt, 2, (int64_t[]){3, 2}, vals, 1), 0, 1);
                candle_tensor *y = candle_embedding(ctx, tab, ids);
                double *got = result(ctx, y);
                int64_t os[4];
                for (int k = 0; k < r; k++) os[k] = ids ? ids->shape[k] : 0;
                os[r] = 6;
                CHECK_MSG(got && tv && mt_same_shape(y, r + 1, os) && y->dtype == CANDLE_DTYPE_F32,
                          "embedding %s %s rank %d: %s", candle_dtype_name(dts[di]),
                          mt_layout_names[lay], r, candle_errmsg(ctx));
                if (got && tv) {
                    double *iv = mt_values(ids);
                    int bad = 0;
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t j = 0; j < 6; j++)
                            bad += got[i * 6 + j] != tv[(int64_t)iv[i] * 6 + j];
                    CHECK_MSG(bad == 0, "embedding %s %s rank %d: %d wrong", candle_dtype_name(dts[di]),
                              mt_layout_names[lay], r, bad);
                    free(iv);
                }
                free(got);
                free(tv);
            }
    candle_ctx_free(ctx);
}

/* Quantized tables: embedding dequantizes exactly as the dtype's to_f32,
 * index_select copies the blocks. Random bytes are fine: comparisons are
 * bitwise. */
static void test_quantized(void) {
    candle_ctx *ctx = mt_ctx(true);
    const candle_dtype qs[4] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q6_K};
    for (int qi = 0; qi < 4; qi++) {
        const candle_dtype_traits *tr = cpu_dtype(qs[qi]);
        int64_t d = 2 * tr->block_size, shape[2] = {7, d};
        candle_tensor *full = candle_tensor_new(ctx, qs[qi], 2, shape);
        fill_bytes(full, 100 + (uint64_t)qi);
        candle_tensor *tab = candle_narrow(ctx, full, 0, 1, 6); /* an offset view */
        int64_t n = 4, vals[4] = {5, 0, 2, 5};
        candle_tensor *ids = make_idx(ctx, CANDLE_DTYPE_I32, 1, &n, vals, 1);
        size_t row = candle_dtype_row_size(qs[qi], d);
        const char *base = (const char *)candle_tensor_data(full) + row;

        candle_tensor *sel = candle_index_select(ctx, tab, 0, ids);
        CHECK_MSG(sel && sel->dtype == qs[qi], "%s index_select: %s", tr->name, candle_errmsg(ctx));
        for (int i = 0; sel && i < 4; i++)
            CHECK(memcmp((const char *)candle_tensor_data(sel) + (size_t)i * row, base + (size_t)vals[i] * row, row) == 0);

        if (!tr->to_f32) {
            MT_CHECK_ERR(ctx, candle_embedding(ctx, tab, ids), CANDLE_ERR_UNSUPPORTED,
                         "embedding: no dequantizer for");
            continue;
        }
        candle_tensor *y = candle_embedding(ctx, tab, ids);
        CHECK_MSG(y && y->dtype == CANDLE_DTYPE_F32 && y->shape[0] == 4 && y->shape[1] == d,
                  "%s embedding: %s", tr->name, candle_errmsg(ctx));
        float *want = malloc(sizeof(float) * (size_t)d);
        for (int i = 0; y && i < 4; i++) {
            tr->to_f32(base + (size_t)vals[i] * row, want, d);
            CHECK_MSG(memcmp((const float *)candle_tensor_data(y) + i * d, want, sizeof(float) * (size_t)d) == 0,
                      "%s embedding row %d", tr->name, i);
        }
        free(want);
    }
    /* Blocks join along either dim. */
    int64_t a_s[2] = {2, 64}, b_s[2] = {3, 64}, c_s[2] = {2, 32};
    candle_tensor *a = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, a_s);
    candle_tensor *b = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, b_s);
    candle_tensor *c = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, c_s);
    fill_bytes(a, 1);
    fill_bytes(b, 2);
    fill_bytes(c, 3);
    size_t blk = cpu_dtype(CANDLE_DTYPE_Q8_0)->type_size;
    candle_tensor *ab = candle_concat(ctx, (candle_tensor *[]){a, b}, 2, 0);
    CHECK(ab && ab->shape[0] == 5 && memcmp(candle_tensor_data(ab), candle_tensor_data(a), 4 * blk) == 0 &&
          memcmp((char *)candle_tensor_data(ab) + 4 * blk, candle_tensor_data(b), 6 * blk) == 0);
    candle_tensor *ac = candle_concat(ctx, (candle_tensor *[]){a, c}, 2, 1);
    CHECK(ac && ac->shape[1] == 96);
    for (int r = 0; ac && r < 2; r++) {
        const char *p = (const char *)candle_tensor_data(ac) + (size_t)r * 3 * blk;
        CHECK(memcmp(p, (char *)candle_tensor_data(a) + (size_t)r * 2 * blk, 2 * blk) == 0);
        CHECK(memcmp(p + 2 * blk, (char *)candle_tensor_data(c) + (size_t)r * blk, blk) == 0);
    }
    int64_t one = 1, v0 = 0;
    candle_tensor *i32 = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 2, a_s);
    MT_CHECK_ERR(ctx, candle_embedding(ctx, i32, make_idx(ctx, CANDLE_DTYPE_I32, 1, &one, &v0, 1)),
                 CANDLE_ERR_DTYPE, "embedding: table dtype i32 not supported");
    int64_t s3[3] = {2, 2, 2};
    candle_tensor *t3 = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 3, s3);
    MT_CHECK_ERR(ctx, candle_embedding(ctx, t3, make_idx(ctx, CANDLE_DTYPE_I32, 1, &one, &v0, 1)),
                 CANDLE_ERR_SHAPE, "embedding: table must be [V, D], got [2, 2, 2]");
    candle_ctx_free(ctx);
}

static void test_gather(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const int64_t shape[3] = {4, 5, 3};
    uint64_t seed = 300;
    for (int di = 0; di < N_DTYPES; di++)
        for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
            for (int dim = 0; dim < 3; dim++) {
                candle_dtype dt = kDtypes[di];
                candle_tensor *x = mt_input(ctx, dt, 3, shape, (mt_layout)lay, seed++, -50, 50);
                double *xv = mt_values(x);
                /* The index may be longer along dim and shorter elsewhere. */
                int64_t is[3] = {shape[0], shape[1] - 1, shape[2]};
                is[dim] = 6;
                int64_t n = mt_numel(3, is), at[3];
                int64_t *vals = malloc(sizeof(int64_t) * (size_t)n);
                for (int64_t i = 0; i < n; i++) vals[i] = (int64_t)(mt_rng_next(&seed) % (uint64_t)shape[dim]);
                candle_dtype idt = (lay + dim) % 2 ? CANDLE_DTYPE_I64 : CANDLE_DTYPE_I32;
                candle_tensor *idx = make_idx(ctx, idt, 3, is, vals, lay == MT_SLICED ? 2 : 1);
                candle_tensor *y = candle_gather(ctx, x, dim, idx);
                double *got = result(ctx, y);
                CHECK_MSG(got && xv && mt_same_shape(y, 3, is), "gather %s %s dim %d: %s",
                          candle_dtype_name(dt), mt_layout_names[lay], dim, candle_errmsg(ctx));
                if (got && xv) {
                    int bad = 0;
                    for (int64_t i = 0; i < n; i++) {
                        unravel(i, 3, is, at);
                        at[dim] = vals[i];
                        bad += got[i] != xv[ravel(3, shape, at)];
                    }
                    CHECK_MSG(bad == 0, "gather %s %s dim %d: %d wrong", candle_dtype_name(dt),
                              mt_layout_names[lay], dim, bad);
                }
                free(vals);
                free(got);
                free(xv);
            }
    candle_ctx_free(ctx);
}

static void test_gather_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    const int64_t shape[2] = {3, 4};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, shape, MT_CONTIG, 3, -1, 1);
    int64_t is[2] = {2, 2}, v[4] = {0, 1, 3, 0}, big[2] = {2, 5}, vb[10] = {0};
    MT_CHECK_ERR(ctx, candle_gather(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I64, 2, is, v, 1)),
                 CANDLE_ERR_INVALID_ARG, "gather: index 3 out of range for dim 0 of size 3");
    MT_CHECK_ERR(ctx, candle_gather(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I64, 2, big, vb, 1)),
                 CANDLE_ERR_SHAPE, "gather: shape mismatch: x [3, 4] index [2, 5]");
    MT_CHECK_ERR(ctx, candle_gather(ctx, x, 0, make_idx(ctx, CANDLE_DTYPE_I32, 1, is, v, 1)),
                 CANDLE_ERR_SHAPE, "gather: shape mismatch: x [3, 4] index [2]");
    MT_CHECK_ERR(ctx, candle_gather(ctx, x, 0, x), CANDLE_ERR_DTYPE,
                 "gather: index dtype must be i32 or i64, got f32");
    candle_ctx_free(ctx);
}

/* Reference concat of inputs along dim (all values read back). */
static double *ref_concat(candle_tensor *const *xs, int n, int dim, int64_t *os) {
    int rank = xs[0]->rank;
    for (int k = 0; k < rank; k++) os[k] = xs[0]->shape[k];
    os[dim] = 0;
    for (int i = 0; i < n; i++) os[dim] += xs[i]->shape[dim];
    double *want = malloc(sizeof(double) * (size_t)(mt_numel(rank, os) + 1));
    int64_t base = 0, at[CANDLE_MAX_RANK];
    for (int i = 0; i < n; i++) {
        double *v = mt_values(xs[i]);
        for (int64_t e = 0; v && e < candle_tensor_numel(xs[i]); e++) {
            unravel(e, rank, xs[i]->shape, at);
            at[dim] += base;
            want[ravel(rank, os, at)] = v[e];
        }
        base += xs[i]->shape[dim];
        free(v);
    }
    return want;
}

static void test_concat(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    uint64_t seed = 500;
    for (int di = 0; di < N_DTYPES; di++)
        for (int dim = 0; dim < 3; dim++) {
            candle_tensor *xs[4];
            const int64_t sizes[4] = {2, 1, 3, 0};
            for (int i = 0; i < 4; i++) {
                int64_t s[3] = {3, 4, 5};
                s[dim] = sizes[i];
                /* Each input in another layout (zero-size ones contiguous). */
                mt_layout lay = sizes[i] ? (mt_layout)((i + dim + di) % MT_LAYOUT_COUNT) : MT_CONTIG;
                xs[i] = mt_input(ctx, kDtypes[di], 3, s, lay, seed++, -50, 50);
            }
            candle_tensor *y = candle_concat(ctx, xs, 4, dim);
            int64_t os[3];
            double *want = ref_concat(xs, 4, dim, os), *got = result(ctx, y);
            CHECK_MSG(got && mt_same_shape(y, 3, os), "concat %s dim %d: %s",
                      candle_dtype_name(kDtypes[di]), dim, candle_errmsg(ctx));
            if (got)
                CHECK_MSG(count_diff(got, want, mt_numel(3, os)) == 0, "concat %s dim %d",
                          candle_dtype_name(kDtypes[di]), dim);
            free(got);
            free(want);
        }
    /* More inputs than a node holds: chained nodes of at most CANDLE_MAX_SRC. */
    enum { N = 20 };
    candle_tensor *many[N];
    for (int i = 0; i < N; i++) {
        int64_t s[2] = {2, 1 + i % 3};
        many[i] = mt_input(ctx, CANDLE_DTYPE_F32, 2, s, (mt_layout)(i % MT_LAYOUT_COUNT), seed++, -1, 1);
    }
    candle_tensor *y = candle_concat(ctx, many, N, -1);
    int64_t os[2];
    double *want = ref_concat(many, N, 1, os), *got = result(ctx, y);
    CHECK(got && mt_same_shape(y, 2, os) && y->n_src <= CANDLE_MAX_SRC);
    if (got) CHECK(count_diff(got, want, mt_numel(2, os)) == 0);
    free(got);
    free(want);
    candle_ctx_free(ctx);
}

static void test_stack(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    uint64_t seed = 700;
    const int64_t s[2] = {3, 4};
    for (int di = 0; di < N_DTYPES; di++)
        for (int dim = 0; dim <= 2; dim++)
            for (int n = 1; n <= 17; n += 8) {
                candle_tensor *xs[17];
                double *xv[17];
                for (int i = 0; i < n; i++) {
                    xs[i] = mt_input(ctx, kDtypes[di], 2, s, (mt_layout)(i % MT_LAYOUT_COUNT), seed++, -50, 50);
                    xv[i] = mt_values(xs[i]);
                }
                candle_tensor *y = candle_stack(ctx, xs, n, dim - (dim == 2 ? 3 : 0));
                int64_t os[3], at[3];
                for (int k = 0, j = 0; k < 3; k++) os[k] = k == dim ? n : s[j++];
                double *got = result(ctx, y);
                CHECK_MSG(got && mt_same_shape(y, 3, os), "stack %s dim %d n %d: %s",
                          candle_dtype_name(kDtypes[di]), dim, n, candle_errmsg(ctx));
                int bad = 0;
                for (int64_t e = 0; got && e < mt_numel(3, os); e++) {
                    unravel(e, 3, os, at);
                    int64_t src[2], which = at[dim];
                    for (int k = 0, j = 0; k < 3; k++)
                        if (k != dim) src[j++] = at[k];
                    bad += got[e] != xv[which][src[0] * s[1] + src[1]];
                }
                CHECK_MSG(bad == 0, "stack %s dim %d n %d: %d wrong", candle_dtype_name(kDtypes[di]),
                          dim, n, bad);
                free(got);
                for (int i = 0; i < n; i++) free(xv[i]);
            }
    candle_ctx_free(ctx);
}

static void test_concat_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s3[1] = {3};
    candle_tensor *a = candle_zeros(ctx, CANDLE_DTYPE_F32, 2, s23);
    candle_tensor *b = candle_zeros(ctx, CANDLE_DTYPE_F32, 2, s24);
    candle_tensor *h = candle_zeros(ctx, CANDLE_DTYPE_F16, 2, s23);
    candle_tensor *v = candle_zeros(ctx, CANDLE_DTYPE_F32, 1, s3);
    MT_CHECK_ERR(ctx, candle_concat(ctx, (candle_tensor *[]){a, b}, 2, 0), CANDLE_ERR_SHAPE,
                 "concat: shape mismatch: input 0 [2, 3] input 1 [2, 4] (dim 0)");
    MT_CHECK_ERR(ctx, candle_concat(ctx, (candle_tensor *[]){a, v}, 2, 0), CANDLE_ERR_SHAPE,
                 "concat: shape mismatch: input 0 [2, 3] input 1 [3]");
    MT_CHECK_ERR(ctx, candle_concat(ctx, (candle_tensor *[]){a, h}, 2, 0), CANDLE_ERR_DTYPE,
                 "concat: dtype mismatch: lhs f32 rhs f16");
    MT_CHECK_ERR(ctx, candle_concat(ctx, (candle_tensor *[]){a}, 0, 0), CANDLE_ERR_INVALID_ARG,
                 "concat: needs at least one input, got 0");
    MT_CHECK_ERR(ctx, candle_concat(ctx, (candle_tensor *[]){a, a}, 2, 2), CANDLE_ERR_INVALID_ARG,
                 "concat: dim 2 out of range for rank 2");
    MT_CHECK_ERR(ctx, candle_stack(ctx, (candle_tensor *[]){a, b}, 2, 1), CANDLE_ERR_SHAPE,
                 "stack: shape mismatch: input 0 [2, 3] input 1 [2, 4]");
    MT_CHECK_ERR(ctx, candle_stack(ctx, (candle_tensor *[]){a, a}, 2, 3), CANDLE_ERR_INVALID_ARG,
                 "stack: dim 3 out of range for rank 3");
    CHECK(candle_concat(ctx, (candle_tensor *[]){a, NULL}, 2, 0) == NULL && candle_errcode(ctx) == CANDLE_OK);
    candle_ctx_free(ctx);
}

int main(void) {
    for (int eager = 0; eager < 2; eager++) {
        test_index_select(eager);
        test_embedding_plain(eager);
        test_gather(eager);
        test_concat(eager);
        test_stack(eager);
    }
    test_index_select_errors();
    test_quantized();
    test_gather_errors();
    test_concat_errors();
    return test_done("test_index");
}
