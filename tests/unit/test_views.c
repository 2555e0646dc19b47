/* Views: reshape (-1), transpose, permute, narrow, slice (step, negative
 * bounds), expand, squeeze, unsqueeze, as_strided. Each is proved zero-copy
 * (same storage, no allocation, writes visible through the view) and checked
 * element by element against index arithmetic on the source. */
#include "test.h"

static candle_ctx *new_ctx(bool eager) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

/* x[i] = i for a [2, 3, 4] f32 tensor */
static candle_tensor *iota(candle_ctx *ctx, candle_dtype dt, int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)i;
    candle_tensor *t = candle_tensor_from_f32(ctx, dt, rank, shape, v);
    free(v);
    return t;
}

static double at(const candle_tensor *t, const int64_t *idx) {
    double v = NAN;
    candle_tensor_get_f64(t, idx, &v);
    return v;
}

/* v is a zero-copy view of x: same storage, nothing allocated. */
static void check_zero_copy(candle_ctx *ctx, const candle_tensor *x, const candle_tensor *v,
                            uint64_t allocs_before) {
    CHECK(v != NULL);
    if (!v) return;
    CHECK(v->storage == x->storage);
    CHECK(candle_ctx_alloc_count(ctx) == allocs_before);
}

/* Every element of v equals x at map(idx). */
typedef void (*index_map)(const int64_t *vi, int64_t *xi, const void *arg);

static void check_elems(const candle_tensor *x, const candle_tensor *v, index_map map,
                        const void *arg) {
    if (!v) return;
    int64_t idx[CANDLE_MAX_RANK] = {0}, xi[CANDLE_MAX_RANK];
    int64_t n = candle_tensor_numel(v);
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
        map(idx, xi, arg);
        if (at(v, idx) != at(x, xi)) bad++;
        for (int d = v->rank - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) break;
            idx[d] = 0;
        }
    }
    CHECK_MSG(bad == 0, "%d elements differ", bad);
}

static void map_transpose_02(const int64_t *v, int64_t *x, const void *a) {
    (void)a;
    x[0] = v[2], x[1] = v[1], x[2] = v[0];
}
static void map_permute_201(const int64_t *v, int64_t *x, const void *a) {
    (void)a; /* v = x.permute(2, 0, 1): v[i][j][k] = x[j][k][i] */
    x[0] = v[1], x[1] = v[2], x[2] = v[0];
}
static void map_slice1(const int64_t *v, int64_t *x, const void *a) {
    const int64_t *p = a; /* dim 2: start p[0], step p[1] */
    x[0] = v[0], x[1] = v[1], x[2] = p[0] + v[2] * p[1];
}
static void map_expand(const int64_t *v, int64_t *x, const void *a) {
    (void)a; /* [3, 1] expanded to [2, 3, 4] */
    x[0] = v[1], x[1] = 0;
}
static void map_flat(const int64_t *v, int64_t *x, const void *a) {
    const int64_t *shape = a; /* v is a reshape of x [2, 3, 4]: flat index */
    int64_t flat = 0;
    for (int d = 0; d < (int)shape[0]; d++) flat = flat * shape[1 + d] + v[d];
    x[2] = flat % 4, x[1] = flat / 4 % 3, x[0] = flat / 12;
}

static void test_each_view(candle_dtype dt) {
    candle_ctx *ctx = new_ctx(true);
    const int64_t shape[3] = {2, 3, 4};
    candle_tensor *x = iota(ctx, dt, 3, shape);
    uint64_t n0 = candle_ctx_alloc_count(ctx);

    /* reshape with -1, rank up and down */
    candle_tensor *r = candle_reshape(ctx, x, 2, (int64_t[]){-1, 6});
    check_zero_copy(ctx, x, r, n0);
    CHECK(r && r->shape[0] == 4 && r->shape[1] == 6 && candle_tensor_is_contiguous(r));
    check_elems(x, r, map_flat, (int64_t[]){2, 4, 6});
    candle_tensor *r4 = candle_reshape(ctx, x, 4, (int64_t[]){2, 2, -1, 3});
    check_zero_copy(ctx, x, r4, n0);
    check_elems(x, r4, map_flat, (int64_t[]){4, 2, 2, 2, 3});
    candle_tensor *r0 = candle_reshape(ctx, candle_narrow(ctx, r, 0, 1, 1), 1, (int64_t[]){-1});
    CHECK(r0 && r0->shape[0] == 6 && at(r0, (int64_t[]){5}) == 11);

    /* transpose and permute: strides swap, no copy */
    candle_tensor *t = candle_transpose(ctx, x, 0, -1);
    check_zero_copy(ctx, x, t, n0);
    CHECK(t && t->shape[0] == 4 && t->shape[2] == 2 && !candle_tensor_is_contiguous(t));
    check_elems(x, t, map_transpose_02, NULL);
    candle_tensor *p = candle_permute(ctx, x, (int[]){2, 0, 1});
    check_zero_copy(ctx, x, p, n0);
    check_elems(x, p, map_permute_201, NULL);

    /* slice with step, negative bounds, clamped and empty ranges */
    candle_tensor *s = candle_slice(ctx, x, -1, 1, 4, 2); /* 1, 3 */
    check_zero_copy(ctx, x, s, n0);
    CHECK(s && s->shape[2] == 2);
    check_elems(x, s, map_slice1, (int64_t[]){1, 2});
    candle_tensor *s2 = candle_slice(ctx, x, 2, -3, -1, 1); /* 1, 2 */
    CHECK(s2 && s2->shape[2] == 2);
    check_elems(x, s2, map_slice1, (int64_t[]){1, 1});
    candle_tensor *s3 = candle_slice(ctx, x, 2, 0, 100, 3); /* 0, 3 */
    CHECK(s3 && s3->shape[2] == 2);
    check_elems(x, s3, map_slice1, (int64_t[]){0, 3});
    candle_tensor *s4 = candle_slice(ctx, x, 2, 3, 1, 1); /* empty */
    CHECK(s4 && s4->shape[2] == 0 && candle_tensor_numel(s4) == 0);
    CHECK(candle_slice(ctx, x, 2, 0, 4, 0) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_errmsg(ctx), "step 0");
    candle_ctx_clear_error(ctx);
    /* narrow then slice: offsets add up */
    candle_tensor *n = candle_narrow(ctx, x, 1, 1, 2);
    check_zero_copy(ctx, x, n, n0);
    candle_tensor *ns = candle_slice(ctx, n, 2, 1, 4, 2);
    CHECK(ns && at(ns, (int64_t[]){1, 1, 1}) == 12 + 8 + 3);

    /* expand: stride 0, shared elements */
    candle_tensor *col = candle_narrow(ctx, candle_reshape(ctx, x, 2, (int64_t[]){6, 4}), 0, 0, 3);
    candle_tensor *col1 = candle_narrow(ctx, col, 1, 0, 1); /* [3, 1]: x[0][k][0]... */
    candle_tensor *e = candle_expand(ctx, col1, 3, (int64_t[]){2, -1, 4});
    check_zero_copy(ctx, x, e, n0);
    CHECK(e && e->stride[0] == 0 && e->stride[2] == 0);
    /* col1[k][0] is row k of the [6, 4] view, = x.flat[4k] */
    if (e) CHECK(at(e, (int64_t[]){1, 2, 3}) == 8);
    check_elems(col1, e, map_expand, NULL);

    /* squeeze / unsqueeze */
    candle_tensor *u = candle_unsqueeze(ctx, x, 1);
    check_zero_copy(ctx, x, u, n0);
    CHECK(u && u->rank == 4 && u->shape[1] == 1 && candle_tensor_is_contiguous(u));
    candle_tensor *ue = candle_unsqueeze(ctx, x, -1);
    CHECK(ue && ue->rank == 4 && ue->shape[3] == 1);
    candle_tensor *sq = candle_squeeze(ctx, u, 1);
    check_zero_copy(ctx, x, sq, n0);
    CHECK(sq && candle_tensor_same_shape(sq, x));
    if (sq) CHECK(at(sq, (int64_t[]){1, 2, 3}) == 23);

    /* as_strided: a sliding window [3, 2] over row 0 (overlapping rows) */
    int64_t es = (int64_t)candle_dtype_info(dt)->type_size;
    candle_tensor *w = candle_as_strided(ctx, x, 2, (int64_t[]){3, 2}, (int64_t[]){es, es}, (size_t)es);
    check_zero_copy(ctx, x, w, n0);
    if (w) CHECK(at(w, (int64_t[]){2, 1}) == 4);
    CHECK(candle_as_strided(ctx, x, 1, (int64_t[]){24}, (int64_t[]){es}, (size_t)es) == NULL);
    char want[160];
    snprintf(want, sizeof want,
             "as_strided: view at offset %d spanning bytes 0..%d reaches outside its source's bytes 0..%d",
             (int)es, (int)(24 * es), (int)(24 * es));
    CHECK_CONTAINS(candle_errmsg(ctx), want);
    candle_ctx_clear_error(ctx);
    CHECK(candle_as_strided(ctx, x, 2, (int64_t[]){INT64_MAX / 2, 4}, (int64_t[]){8, es}, 0) == NULL);
    CHECK_CONTAINS(candle_errmsg(ctx), "as_strided: extent overflows");
    candle_ctx_clear_error(ctx);
    CHECK(candle_as_strided(ctx, x, 1, (int64_t[]){2}, (int64_t[]){es}, SIZE_MAX - 3) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_INVALID_ARG);
    candle_ctx_clear_error(ctx);
    /* a 0-d view of one element */
    candle_tensor *e0 = candle_as_strided(ctx, x, 0, NULL, NULL, (size_t)(5 * es));
    if (e0) CHECK(e0->rank == 0 && at(e0, NULL) == 5);
    CHECK(e0 != NULL);
    candle_tensor *s0 = candle_reshape(ctx, candle_narrow(ctx, r, 1, 2, 1), 0, NULL);
    CHECK(s0 == NULL); /* [4, 1] has 4 elements */
    candle_ctx_clear_error(ctx);
    /* negative strides: a reversed row inside the source is fine */
    candle_tensor *rev = candle_as_strided(ctx, x, 1, (int64_t[]){4}, (int64_t[]){-es}, (size_t)(3 * es));
    if (rev) CHECK(at(rev, (int64_t[]){0}) == 3 && at(rev, (int64_t[]){3}) == 0);
    CHECK(candle_as_strided(ctx, x, 1, (int64_t[]){4}, (int64_t[]){-es}, (size_t)(2 * es)) == NULL);
    candle_ctx_clear_error(ctx);
    CHECK(candle_as_strided(ctx, x, 1, (int64_t[]){0}, (int64_t[]){es}, 1000) != NULL); /* empty */
    /* as_strided on a narrowed view is bounded by the view, not the storage */
    candle_tensor *first = candle_narrow(ctx, x, 0, 0, 1); /* spans 12 of the 24 */
    CHECK(candle_as_strided(ctx, first, 1, (int64_t[]){12}, (int64_t[]){es}, 0) != NULL);
    CHECK(candle_as_strided(ctx, first, 1, (int64_t[]){13}, (int64_t[]){es}, 0) == NULL);
    candle_ctx_clear_error(ctx);

    /* zero copy both ways: writes to x show through every view */
    candle_tensor *one = candle_full(ctx, dt, 0, NULL, 99.0);
    uint64_t before = candle_ctx_alloc_count(ctx);
    candle_tensor *dst = candle_narrow(ctx, candle_narrow(ctx, candle_narrow(ctx, x, 0, 1, 1), 1, 2, 1), 2, 3, 1);
    candle_tensor *wr = candle_copy_into(ctx, dst, one);
    CHECK(wr != NULL);
    CHECK(candle_ctx_alloc_count(ctx) == before); /* copy_into writes in place */
    if (t) CHECK(at(t, (int64_t[]){3, 2, 1}) == 99);
    if (r) CHECK(at(r, (int64_t[]){3, 5}) == 99);
    if (p) CHECK(at(p, (int64_t[]){3, 1, 2}) == 99);
    CHECK(candle_errcode(ctx) == CANDLE_OK);
    candle_ctx_free(ctx);
}

static void test_contiguous_and_reshape_errors(void) {
    candle_ctx *ctx = new_ctx(true);
    candle_tensor *x = iota(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){3, 4});
    uint64_t n0 = candle_ctx_alloc_count(ctx);
    /* contiguous of a contiguous tensor (or of size-1 dims) is itself */
    CHECK(candle_contiguous(ctx, x) == x);
    candle_tensor *u = candle_unsqueeze(ctx, x, 0);
    CHECK(candle_contiguous(ctx, u) == u);
    CHECK(candle_ctx_alloc_count(ctx) == n0);
    /* a transposed tensor: reshape is an error, contiguous copies once */
    candle_tensor *t = candle_transpose(ctx, x, 0, 1);
    CHECK(candle_reshape(ctx, t, 1, (int64_t[]){12}) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_SHAPE);
    CHECK_CONTAINS(candle_errmsg(ctx), "reshape: input [4, 3] is not contiguous");
    candle_ctx_clear_error(ctx);
    candle_tensor *c = candle_contiguous(ctx, t);
    CHECK(c && c != t && c->storage != x->storage && candle_tensor_is_contiguous(c));
    CHECK(candle_ctx_alloc_count(ctx) == n0 + 1);
    float out[12];
    CHECK_OK(ctx, candle_tensor_to_f32(c, out));
    CHECK(out[0] == 0 && out[1] == 4 && out[2] == 8 && out[3] == 1 && out[11] == 11);
    candle_tensor *rc = candle_reshape_copy(ctx, t, 1, (int64_t[]){-1});
    CHECK(rc && rc->rank == 1 && candle_ctx_alloc_count(ctx) == n0 + 2);
    CHECK_OK(ctx, candle_tensor_to_f32(rc, out));
    CHECK(out[1] == 4 && out[4] == 5);
    /* reshape_copy of a contiguous tensor copies nothing */
    CHECK(candle_reshape_copy(ctx, x, 1, (int64_t[]){12})->storage == x->storage);
    /* two -1s, negative sizes */
    CHECK(candle_reshape(ctx, x, 2, (int64_t[]){-1, -1}) == NULL);
    CHECK_CONTAINS(candle_errmsg(ctx), "reshape: invalid target shape [-1, -1]");
    candle_ctx_clear_error(ctx);
    /* a step slice is not contiguous either */
    candle_tensor *s = candle_slice(ctx, x, 1, 0, 4, 2);
    CHECK(s && !candle_tensor_is_contiguous(s));
    CHECK(candle_reshape(ctx, s, 1, (int64_t[]){6}) == NULL);
    candle_ctx_clear_error(ctx);
    /* quantized: rows stay whole */
    candle_tensor *q = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, (int64_t[]){4, 64});
    CHECK(q != NULL);
    CHECK(candle_reshape(ctx, q, 2, (int64_t[]){2, 128}) == NULL);
    candle_ctx_clear_error(ctx);
    CHECK(candle_narrow(ctx, q, 0, 1, 2) != NULL); /* row selection is fine */
    CHECK(candle_narrow(ctx, q, 1, 0, 32) == NULL);
    candle_ctx_clear_error(ctx);
    CHECK(candle_narrow(ctx, x, 0, 1, INT64_MAX) == NULL); /* no overflow in start + len */
    CHECK(candle_errcode(ctx) == CANDLE_ERR_INVALID_ARG);
    candle_ctx_clear_error(ctx);
    CHECK(candle_unsqueeze(ctx, q, 2) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_UNSUPPORTED);
    candle_ctx_clear_error(ctx);
    candle_tensor *q3 = candle_unsqueeze(ctx, q, 0);
    CHECK(q3 && q3->rank == 3 && candle_tensor_is_contiguous(q3));
    CHECK(candle_expand(ctx, q, 2, (int64_t[]){4, 64}) == NULL);
    candle_ctx_clear_error(ctx);
    candle_ctx_free(ctx);
}

static void test_lazy_views(void) {
    candle_ctx *ctx = new_ctx(false);
    candle_tensor *x = iota(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, 3});
    candle_tensor *y = candle_affine(ctx, x, 2.0, 1.0); /* not computed yet */
    CHECK(y && !y->computed && y->storage == NULL);
    candle_tensor *t = candle_transpose(ctx, y, 0, 1);
    candle_tensor *r = candle_reshape(ctx, y, 1, (int64_t[]){6});
    candle_tensor *s = candle_slice(ctx, t, 0, 1, 3, 1); /* view of a view */
    CHECK(t && r && s && !t->storage && !s->storage);
    CHECK(candle_tensor_data(t) == NULL);
    float out[6];
    CHECK(candle_tensor_to_f32(t, out) != CANDLE_OK);
    candle_ctx_clear_error(ctx);
    /* computing one view computes its source and binds the view */
    CHECK_OK(ctx, candle_compute(ctx, s));
    CHECK(y->computed && s->computed && s->storage == y->storage);
    CHECK_OK(ctx, candle_tensor_to_f32(s, out)); /* s[i][j] = y[j][i+1] */
    CHECK(out[0] == 3 && out[1] == 9 && out[2] == 5 && out[3] == 11);
    /* the sibling views bind on their own compute, without recomputing y */
    uint64_t n = candle_ctx_alloc_count(ctx);
    CHECK_OK(ctx, candle_compute(ctx, r));
    CHECK(r->storage == y->storage && candle_ctx_alloc_count(ctx) == n);
    CHECK_OK(ctx, candle_tensor_to_f32(r, out));
    CHECK(out[5] == 11);
    /* a consumer of a view binds it as part of its graph */
    candle_tensor *z = candle_add(ctx, t, t);
    CHECK_OK(ctx, candle_compute(ctx, z));
    CHECK_OK(ctx, candle_tensor_to_f32(z, out));
    CHECK(out[1] == 14); /* z[0][1] = 2 * y[1][0] = 2 * 7 */
    candle_ctx_free(ctx);
}

/* ---- random chains of views against a dense model ---- */

typedef struct dense {
    int rank;
    int64_t shape[CANDLE_MAX_RANK];
    double v[4096];
} dense;

typedef enum vop { V_PERMUTE, V_SLICE, V_UNSQUEEZE, V_SQUEEZE, V_EXPAND, V_RESHAPE, V_COUNT } vop;

typedef struct vparams {
    vop op;
    int perm[CANDLE_MAX_RANK]; /* permute */
    int dim;                   /* slice, unsqueeze, squeeze, expand */
    int64_t start, step;       /* slice (start already clamped) */
} vparams;

static int64_t numel_of(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

/* out = the view of in described by p (out->rank/shape set by the caller). */
static void dense_apply(const dense *in, dense *out, const vparams *p) {
    int64_t idx[CANDLE_MAX_RANK] = {0}, src[CANDLE_MAX_RANK];
    int64_t n = numel_of(out->rank, out->shape);
    for (int64_t k = 0; k < n; k++) {
        switch (p->op) {
        case V_PERMUTE:
            for (int i = 0; i < in->rank; i++) src[p->perm[i]] = idx[i];
            break;
        case V_SLICE:
            memcpy(src, idx, sizeof src);
            src[p->dim] = p->start + idx[p->dim] * p->step;
            break;
        case V_UNSQUEEZE:
            for (int i = 0, j = 0; i < out->rank; i++)
                if (i != p->dim) src[j++] = idx[i];
            break;
        case V_SQUEEZE:
            for (int i = 0, j = 0; i < in->rank; i++) src[i] = i == p->dim ? 0 : idx[j++];
            break;
        case V_EXPAND:
            memcpy(src, idx, sizeof src);
            src[p->dim] = 0;
            break;
        default: /* reshape: same flat position */
            break;
        }
        int64_t flat = k;
        if (p->op != V_RESHAPE) {
            flat = 0;
            for (int i = 0; i < in->rank; i++) flat = flat * in->shape[i] + src[i];
        }
        out->v[k] = in->v[flat];
        for (int d = out->rank - 1; d >= 0; d--) {
            if (++idx[d] < out->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static uint32_t vrng = 7;
static int applied[V_COUNT]; /* ops that took effect, so the test cannot pass idle */
static int rnd(int n) {
    vrng = vrng * 1664525u + 1013904223u;
    return (int)((vrng >> 8) % (uint32_t)n);
}

/* One random view op on t (and its model); NULL when the op failed. */
static candle_tensor *random_view(candle_ctx *ctx, candle_tensor *t, dense *m) {
    dense *out = malloc(sizeof *out);
    vparams p = {.op = (vop)rnd(V_COUNT)};
    candle_tensor *r = NULL;
    out->rank = m->rank;
    memcpy(out->shape, m->shape, sizeof out->shape);
    int d = m->rank ? rnd(m->rank) : 0;
    if (m->rank == 0 && p.op != V_UNSQUEEZE && p.op != V_RESHAPE) p.op = V_UNSQUEEZE;
    switch (p.op) {
    case V_PERMUTE:
        for (int i = 0; i < m->rank; i++) p.perm[i] = i;
        for (int i = m->rank - 1; i > 0; i--) {
            int j = rnd(i + 1), tmp = p.perm[i];
            p.perm[i] = p.perm[j], p.perm[j] = tmp;
        }
        for (int i = 0; i < m->rank; i++) out->shape[i] = m->shape[p.perm[i]];
        r = candle_permute(ctx, t, p.perm);
        break;
    case V_SLICE: {
        int64_t n = m->shape[d], start = rnd((int)n + 1) - (rnd(2) ? n : 0);
        int64_t end = rnd((int)n + 2) - (rnd(3) == 0 ? n : 0), step = 1 + rnd(3);
        r = candle_slice(ctx, t, rnd(2) ? d : d - m->rank, start, end, step);
        int64_t s0 = start < 0 ? start + n : start, e0 = end < 0 ? end + n : end;
        s0 = s0 < 0 ? 0 : s0 > n ? n : s0;
        e0 = e0 < s0 ? s0 : e0 > n ? n : e0;
        p.dim = d, p.start = s0, p.step = step;
        out->shape[d] = (e0 - s0 + step - 1) / step;
        break;
    }
    case V_UNSQUEEZE:
        if (m->rank == CANDLE_MAX_RANK) break;
        p.dim = rnd(m->rank + 1);
        out->rank = m->rank + 1;
        for (int i = 0, j = 0; i < out->rank; i++) out->shape[i] = i == p.dim ? 1 : m->shape[j++];
        r = candle_unsqueeze(ctx, t, p.dim);
        break;
    case V_SQUEEZE:
    case V_EXPAND:
        for (int k = 0; k < m->rank && m->shape[d] != 1; k++) d = (d + 1) % m->rank;
        if (m->shape[d] != 1) break;
        p.dim = d;
        if (p.op == V_SQUEEZE) {
            out->rank = m->rank - 1;
            for (int i = 0, j = 0; i < m->rank; i++)
                if (i != d) out->shape[j++] = m->shape[i];
            r = candle_squeeze(ctx, t, d);
        } else {
            out->shape[d] = 2 + rnd(2);
            if (numel_of(out->rank, out->shape) > 4096) break;
            int64_t want[CANDLE_MAX_RANK];
            for (int i = 0; i < m->rank; i++) want[i] = i == d ? out->shape[d] : -1;
            r = candle_expand(ctx, t, m->rank, want);
        }
        break;
    default: { /* reshape: split or merge the first two dims */
        int64_t n = numel_of(m->rank, m->shape);
        out->rank = m->rank >= 2 && rnd(2) ? m->rank - 1 : (m->rank < CANDLE_MAX_RANK ? m->rank + 1 : m->rank);
        if (out->rank == m->rank - 1) {
            out->shape[0] = m->shape[0] * m->shape[1];
            for (int i = 1; i < out->rank; i++) out->shape[i] = m->shape[i + 1];
        } else if (out->rank == m->rank + 1) {
            out->shape[0] = 1;
            for (int i = 1; i < out->rank; i++) out->shape[i] = m->shape[i - 1];
        }
        (void)n;
        bool contiguous = candle_tensor_is_contiguous(t);
        r = candle_reshape(ctx, t, out->rank, out->shape);
        CHECK(contiguous == (r != NULL));
        if (!r) {
            candle_ctx_clear_error(ctx);
            r = candle_reshape_copy(ctx, t, out->rank, out->shape);
        }
        break;
    }
    }
    if (r) {
        CHECK_MSG(r->rank == out->rank && memcmp(r->shape, out->shape, sizeof(int64_t) * (size_t)r->rank) == 0,
                  "op %d: shape differs from the model", (int)p.op);
        dense_apply(m, out, &p);
        *m = *out;
        applied[p.op]++;
    }
    free(out);
    return r ? r : t;
}

static void test_random_view_chains(void) {
    candle_ctx *ctx = new_ctx(true);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int bad_chains = 0;
    for (int chain = 0; chain < 300; chain++) {
        dense *m = malloc(sizeof *m);
        m->rank = 1 + rnd(4);
        for (int i = 0; i < m->rank; i++) m->shape[i] = 1 + rnd(5);
        int64_t n = numel_of(m->rank, m->shape);
        float *v = malloc(sizeof(float) * (size_t)n);
        for (int64_t k = 0; k < n; k++) v[k] = (float)k, m->v[k] = (double)k;
        candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, m->rank, m->shape, v);
        free(v);
        for (int step = 0; step < 8; step++) t = random_view(ctx, t, m);
        CHECK_MSG(candle_errcode(ctx) == CANDLE_OK, "chain %d: %s", chain, candle_errmsg(ctx));
        candle_ctx_clear_error(ctx);
        /* element access through the view and through a contiguous copy */
        candle_tensor *c = candle_contiguous(ctx, t);
        int64_t cnt = numel_of(m->rank, m->shape);
        float *got = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
        float *got2 = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
        bool ok = c && candle_tensor_to_f32(t, got) == CANDLE_OK && candle_tensor_to_f32(c, got2) == CANDLE_OK;
        for (int64_t k = 0; ok && k < cnt; k++) ok = got[k] == m->v[k] && got2[k] == m->v[k];
        bad_chains += !ok;
        free(got);
        free(got2);
        free(m);
        candle_ctx_reset(ctx, mark);
    }
    CHECK_MSG(bad_chains == 0, "%d of 300 random view chains differ from the model", bad_chains);
    for (int op = 0; op < V_COUNT; op++) CHECK_MSG(applied[op] > 50, "op %d applied %d times", op, applied[op]);
    CHECK(candle_ctx_mem_used(ctx) == 0);
    candle_ctx_free(ctx);
}

int main(void) {
    test_each_view(CANDLE_DTYPE_F32);
    test_each_view(CANDLE_DTYPE_F16);
    test_each_view(CANDLE_DTYPE_I32);
    test_contiguous_and_reshape_errors();
    test_lazy_views();
    test_random_view_chains();
    return test_done("test_views");
}
