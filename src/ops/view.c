/* Zero-copy views: they share the source's storage and differ only in
 * shape, strides and offset. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../core/ctx-impl.h"

/* A view node of x; storage is bound now if x has it, else at compute. */
static candle_tensor *view_new(candle_ctx *ctx, candle_tensor *x, int rank, const int64_t *shape,
                               const int64_t *stride, size_t view_offset) {
    candle_tensor *t = cdl_tensor_alloc_desc(ctx);
    if (!t) return NULL;
    /* Views of views point at the tensor that owns the storage layout. */
    while (x->op == CANDLE_OP_VIEW && x->view_src) {
        view_offset += x->view_offset;
        x = x->view_src;
    }
    t->op = CANDLE_OP_VIEW;
    t->dtype = x->dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->src[0] = x;
    t->n_src = 1;
    t->view_src = x;
    t->view_offset = view_offset;
    t->device = x->device;
    if (x->storage) cdl_tensor_bind_view(t);
    return t;
}

void cdl_tensor_bind_view(candle_tensor *t) {
    candle_tensor *src = t->view_src;
    if (t->storage != src->storage) {
        candle_storage_release(t->storage);
        t->storage = candle_storage_retain(src->storage);
    }
    t->offset = src->offset + t->view_offset;
    t->computed = src->computed;
}

#define CHECK_IN(x)                 \
    do {                            \
        if (!ctx || !(x)) return NULL; \
    } while (0)

int cdl_norm_dim(candle_ctx *ctx, const char *op, int dim, int rank) {
    int d = dim < 0 ? dim + rank : dim;
    if (d < 0 || d >= rank) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: dim %d out of range for rank %d", op,
                         dim, rank);
        return -1;
    }
    return d;
}

static bool is_quant(const candle_tensor *x) { return candle_dtype_info(x->dtype)->is_quantized; }

/* Resolve a -1 in a reshape target; checks the element count. */
static bool resolve_shape(candle_ctx *ctx, const char *op, const candle_tensor *x, int rank,
                          const int64_t *in, int64_t *out) {
    char a[128], b[128];
    if (rank < 0 || rank > CANDLE_MAX_RANK || (rank && !in)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: rank %d out of range (max %d)", op, rank,
                         CANDLE_MAX_RANK);
        return false;
    }
    int64_t known = 1;
    int infer = -1;
    for (int i = 0; i < rank; i++) {
        out[i] = in[i];
        if (in[i] == -1 && infer < 0) infer = i;
        else if (in[i] < 0) {
            cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: invalid target shape %s", op,
                             candle_shape_str(rank, in, a, sizeof a));
            return false;
        } else known *= in[i];
    }
    int64_t n = candle_tensor_numel(x);
    if (infer >= 0) out[infer] = known ? n / known : 0;
    int64_t got = 1;
    for (int i = 0; i < rank; i++) got *= out[i];
    if (got != n) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: cannot view %s (%" PRId64 " elements) as %s",
                         op, candle_shape_str(x->rank, x->shape, a, sizeof a), n,
                         candle_shape_str(rank, in, b, sizeof b));
        return false;
    }
    return true;
}

candle_tensor *candle_reshape(candle_ctx *ctx, candle_tensor *x, int rank, const int64_t *shape) {
    CHECK_IN(x);
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    if (!resolve_shape(ctx, "reshape", x, rank, shape, s)) return NULL;
    if (!candle_tensor_is_contiguous(x)) {
        char a[128];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "reshape: input %s is not contiguous; use candle_reshape_copy or "
                         "candle_contiguous first",
                         candle_shape_str(x->rank, x->shape, a, sizeof a));
        return NULL;
    }
    if (is_quant(x) && (rank == 0 || s[rank - 1] != x->shape[x->rank - 1])) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "reshape: %s tensors keep their row length",
                         candle_dtype_name(x->dtype));
        return NULL;
    }
    candle_contiguous_strides(x->dtype, rank, s, st);
    return view_new(ctx, x, rank, s, st, 0);
}

candle_tensor *candle_reshape_copy(candle_ctx *ctx, candle_tensor *x, int rank,
                                   const int64_t *shape) {
    CHECK_IN(x);
    return candle_reshape(ctx, candle_contiguous(ctx, x), rank, shape);
}

candle_tensor *candle_permute(candle_ctx *ctx, candle_tensor *x, const int *perm) {
    CHECK_IN(x);
    if (!perm && x->rank) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "permute: perm is NULL");
        return NULL;
    }
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    bool seen[CANDLE_MAX_RANK] = {false};
    for (int i = 0; i < x->rank; i++) {
        int d = cdl_norm_dim(ctx, "permute", perm[i], x->rank);
        if (d < 0) return NULL;
        if (seen[d]) {
            cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "permute: dim %d repeated", perm[i]);
            return NULL;
        }
        seen[d] = true;
        s[i] = x->shape[d];
        st[i] = x->stride[d];
    }
    return view_new(ctx, x, x->rank, s, st, 0);
}

candle_tensor *candle_transpose(candle_ctx *ctx, candle_tensor *x, int d0, int d1) {
    CHECK_IN(x);
    int a = cdl_norm_dim(ctx, "transpose", d0, x->rank);
    int b = cdl_norm_dim(ctx, "transpose", d1, x->rank);
    if (a < 0 || b < 0) return NULL;
    int perm[CANDLE_MAX_RANK];
    for (int i = 0; i < x->rank; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return candle_permute(ctx, x, perm);
}

candle_tensor *candle_slice(candle_ctx *ctx, candle_tensor *x, int dim, int64_t start, int64_t end,
                            int64_t step) {
    CHECK_IN(x);
    int d = cdl_norm_dim(ctx, "slice", dim, x->rank);
    if (d < 0) return NULL;
    int64_t n = x->shape[d];
    /* Python slice bounds: negative counts from the end, then clamped, so an
     * out-of-range or reversed range is empty rather than an error. */
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : (start > n ? n : start);
    end = end < start ? start : (end > n ? n : end);
    if (step < 1) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "slice: range %" PRId64 "..%" PRId64 " step %" PRId64
                         " invalid for dim %d of size %" PRId64,
                         start, end, step, dim, n);
        return NULL;
    }
    if (is_quant(x) && d == x->rank - 1 && (start != 0 || end != n || step != 1)) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "slice: cannot slice within %s rows",
                         candle_dtype_name(x->dtype));
        return NULL;
    }
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    memcpy(s, x->shape, sizeof s);
    memcpy(st, x->stride, sizeof st);
    s[d] = (end - start + step - 1) / step;
    st[d] = x->stride[d] * step;
    return view_new(ctx, x, x->rank, s, st, (size_t)(start * x->stride[d]));
}

candle_tensor *candle_narrow(candle_ctx *ctx, candle_tensor *x, int dim, int64_t start,
                             int64_t len) {
    CHECK_IN(x);
    int d = cdl_norm_dim(ctx, "narrow", dim, x->rank);
    if (d < 0) return NULL;
    if (start < 0 || len < 0 || start > x->shape[d] || len > x->shape[d] - start) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "narrow: start %" PRId64 " length %" PRId64
                         " out of range for dim %d of size %" PRId64,
                         start, len, dim, x->shape[d]);
        return NULL;
    }
    return candle_slice(ctx, x, d, start, start + len, 1);
}

candle_tensor *candle_expand(candle_ctx *ctx, candle_tensor *x, int rank, const int64_t *shape) {
    CHECK_IN(x);
    char a[128], b[128];
    if (rank < x->rank || rank > CANDLE_MAX_RANK || is_quant(x) || (rank && !shape)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "expand: cannot expand %s %s to rank %d",
                         candle_dtype_name(x->dtype), candle_shape_str(x->rank, x->shape, a, sizeof a),
                         rank);
        return NULL;
    }
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    int lead = rank - x->rank;
    for (int i = 0; i < rank; i++) {
        int64_t want = shape[i];
        int64_t have = i < lead ? 1 : x->shape[i - lead];
        int64_t hs = i < lead ? 0 : x->stride[i - lead];
        if (want == -1) want = have;
        if (have == want) {
            s[i] = have;
            st[i] = hs;
        } else if (have == 1 && want >= 0) {
            s[i] = want;
            st[i] = 0;
        } else {
            cdl_set_error(ctx, CANDLE_ERR_SHAPE, "expand: cannot broadcast %s to %s",
                             candle_shape_str(x->rank, x->shape, a, sizeof a),
                             candle_shape_str(rank, shape, b, sizeof b));
            return NULL;
        }
    }
    return view_new(ctx, x, rank, s, st, 0);
}

candle_tensor *candle_squeeze(candle_ctx *ctx, candle_tensor *x, int dim) {
    CHECK_IN(x);
    int d = cdl_norm_dim(ctx, "squeeze", dim, x->rank);
    if (d < 0) return NULL;
    if (x->shape[d] != 1) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "squeeze: dim %d has size %" PRId64 ", not 1", dim,
                         x->shape[d]);
        return NULL;
    }
    if (is_quant(x) && d == x->rank - 1) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "squeeze: cannot squeeze %s rows",
                         candle_dtype_name(x->dtype));
        return NULL;
    }
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    for (int i = 0, j = 0; i < x->rank; i++) {
        if (i == d) continue;
        s[j] = x->shape[i];
        st[j++] = x->stride[i];
    }
    return view_new(ctx, x, x->rank - 1, s, st, 0);
}

candle_tensor *candle_unsqueeze(candle_ctx *ctx, candle_tensor *x, int dim) {
    CHECK_IN(x);
    if (x->rank == CANDLE_MAX_RANK) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "unsqueeze: rank would exceed %d", CANDLE_MAX_RANK);
        return NULL;
    }
    int d = cdl_norm_dim(ctx, "unsqueeze", dim, x->rank + 1);
    if (d < 0) return NULL;
    if (is_quant(x) && d == x->rank) {
        /* the block dim must stay innermost */
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "unsqueeze: cannot add a dim after %s rows",
                         candle_dtype_name(x->dtype));
        return NULL;
    }
    int64_t s[CANDLE_MAX_RANK], st[CANDLE_MAX_RANK];
    for (int i = 0, j = 0; i <= x->rank; i++) {
        if (i == d) {
            s[i] = 1;
            st[i] = j < x->rank ? x->stride[j] * x->shape[j] : (int64_t)candle_dtype_info(x->dtype)->type_size;
            continue;
        }
        s[i] = x->shape[j];
        st[i] = x->stride[j++];
    }
    return view_new(ctx, x, x->rank + 1, s, st, 0);
}

candle_tensor *candle_as_strided(candle_ctx *ctx, candle_tensor *x, int rank, const int64_t *shape,
                                 const int64_t *stride, size_t offset) {
    CHECK_IN(x);
    if (rank < 0 || rank > CANDLE_MAX_RANK || is_quant(x)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "as_strided: invalid rank %d or dtype %s",
                         rank, candle_dtype_name(x->dtype));
        return NULL;
    }
    if (rank && (!shape || !stride)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "as_strided: shape or stride is NULL");
        return NULL;
    }
    /* The bytes the view reaches, relative to the source's first element,
     * must lie within the bytes the source itself spans. */
    int64_t esz = (int64_t)candle_dtype_info(x->dtype)->type_size;
    int64_t lo = 0, hi = 0, src_lo = 0, src_hi = 0;
    bool empty = false, src_empty = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) {
            cdl_set_error(ctx, CANDLE_ERR_SHAPE, "as_strided: negative size");
            return NULL;
        }
        if (shape[i] == 0) empty = true;
        int64_t span;
        if (__builtin_mul_overflow(shape[i] ? shape[i] - 1 : 0, stride[i], &span) ||
            __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi)) {
            cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "as_strided: extent overflows");
            return NULL;
        }
    }
    for (int i = 0; i < x->rank; i++) {
        if (x->shape[i] == 0) src_empty = true;
        int64_t span = (x->shape[i] ? x->shape[i] - 1 : 0) * x->stride[i];
        if (span < 0) src_lo += span;
        else src_hi += span;
    }
    /* off is bounded, so src - off cannot overflow where off + extent could */
    bool off_ok = offset <= (size_t)INT64_MAX / 2;
    int64_t off = off_ok ? (int64_t)offset : 0;
    if (!empty && (!off_ok || src_empty || lo < src_lo - off || hi > src_hi - off)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "as_strided: view at offset %zu spanning bytes %" PRId64 "..%" PRId64
                         " reaches outside its source's bytes %" PRId64 "..%" PRId64,
                         offset, lo, hi + esz, src_lo, src_empty ? src_lo : src_hi + esz);
        return NULL;
    }
    return view_new(ctx, x, rank, shape, stride, offset);
}
