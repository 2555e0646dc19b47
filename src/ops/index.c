/* Indexing ops: index_select, embedding, gather, concat, stack.
 *
 * Quantized tensors take part whole blocks at a time: index_select picks rows
 * along an outer dim and copies their blocks, concat joins along any dim (all
 * sizes are whole blocks), and embedding dequantizes the rows it picks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops-impl.h"

static bool is_index_dtype(candle_dtype t) { return t == CANDLE_DTYPE_I32 || t == CANDLE_DTYPE_I64; }

static bool check_index(candle_ctx *ctx, const char *op, const candle_tensor *idx) {
    if (is_index_dtype(idx->dtype)) return true;
    cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: index dtype must be i32 or i64, got %s", op,
                     candle_dtype_name(idx->dtype));
    return false;
}

/* Quantized rows are read a block at a time, so their blocks must be packed. */
static bool check_packed_rows(candle_ctx *ctx, const char *op, const candle_tensor *x) {
    const candle_dtype_traits *tr = candle_dtype_info(x->dtype);
    if (!tr->is_quantized || x->rank == 0 || x->stride[x->rank - 1] == (int64_t)tr->type_size)
        return true;
    cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "%s: %s input needs contiguous rows", op, tr->name);
    return false;
}

static candle_tensor *index_select_node(candle_ctx *ctx, const char *op, candle_tensor *x, int dim,
                                        candle_tensor *idx, candle_dtype out) {
    if (!op_check_device(ctx, op, x, idx) || !check_index(ctx, op, idx) ||
        !check_packed_rows(ctx, op, x))
        return NULL;
    int d = cdl_norm_dim(ctx, op, dim, x->rank);
    if (d < 0) return NULL;
    if (idx->rank != 1) {
        char a[128];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: index must be 1-D, got %s", op,
                         candle_shape_str(idx->rank, idx->shape, a, sizeof a));
        return NULL;
    }
    if (candle_dtype_info(x->dtype)->is_quantized && d == x->rank - 1) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED,
                         "%s: cannot select within %s rows (dim %d is the block dim)", op,
                         candle_dtype_name(x->dtype), dim);
        return NULL;
    }
    int64_t shape[CANDLE_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = idx->shape[0];
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_INDEX_SELECT, out, x->rank, shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = idx;
    t->n_src = 2;
    t->iparams[0] = d;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_index_select(candle_ctx *ctx, candle_tensor *x, int dim, candle_tensor *idx) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(idx);
    return index_select_node(ctx, "index_select", x, dim, idx, x->dtype);
}

candle_tensor *candle_embedding(candle_ctx *ctx, candle_tensor *table, candle_tensor *ids) {
    OP_CHECK_IN(table);
    OP_CHECK_IN(ids);
    const candle_dtype_traits *tr = candle_dtype_info(table->dtype);
    char a[128];
    if (table->rank != 2) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "embedding: table must be [V, D], got %s",
                         candle_shape_str(table->rank, table->shape, a, sizeof a));
        return NULL;
    }
    if (tr->is_int) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE,
                         "embedding: table dtype %s not supported (needs a float or quantized dtype)",
                         tr->name);
        return NULL;
    }
    if (!tr->to_f32) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "embedding: no dequantizer for %s tables",
                         tr->name);
        return NULL;
    }
    if (!check_index(ctx, "embedding", ids)) return NULL;
    if (ids->rank + 1 > CANDLE_MAX_RANK) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "embedding: ids %s: output rank would exceed %d",
                         candle_shape_str(ids->rank, ids->shape, a, sizeof a), CANDLE_MAX_RANK);
        return NULL;
    }
    /* The node sees the ids flattened; a view restores their shape. */
    int64_t n = candle_tensor_numel(ids);
    candle_tensor *flat = candle_reshape_copy(ctx, ids, 1, &n);
    candle_tensor *rows = flat ? index_select_node(ctx, "embedding", table, 0, flat, CANDLE_DTYPE_F32)
                               : NULL;
    if (!rows) return NULL;
    int64_t shape[CANDLE_MAX_RANK];
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->rank);
    shape[ids->rank] = table->shape[1];
    return candle_reshape(ctx, rows, ids->rank + 1, shape);
}

candle_tensor *candle_gather(candle_ctx *ctx, candle_tensor *x, int dim, candle_tensor *idx) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(idx);
    if (!op_check_device(ctx, "gather", x, idx) || !op_check_plain(ctx, "gather", x, false) ||
        !check_index(ctx, "gather", idx))
        return NULL;
    int d = cdl_norm_dim(ctx, "gather", dim, x->rank);
    if (d < 0) return NULL;
    char a[128], b[128];
    bool ok = idx->rank == x->rank;
    for (int i = 0; ok && i < x->rank; i++) ok = i == d || idx->shape[i] <= x->shape[i];
    if (!ok) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "gather: shape mismatch: x %s index %s (same rank, index no larger "
                         "outside dim %d)",
                         candle_shape_str(x->rank, x->shape, a, sizeof a),
                         candle_shape_str(idx->rank, idx->shape, b, sizeof b), dim);
        return NULL;
    }
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_GATHER, x->dtype, idx->rank, idx->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = idx;
    t->n_src = 2;
    t->iparams[0] = d;
    return cdl_node_finish(ctx, t);
}

/* Inputs agree in dtype, device, rank and every size but dim's. */
static bool check_concat(candle_ctx *ctx, const char *op, candle_tensor *const *xs, int n, int dim,
                         bool same_dim) {
    for (int i = 1; i < n; i++) {
        if (!op_check_device(ctx, op, xs[0], xs[i]) || !op_check_same_dtype(ctx, op, xs[0], xs[i]))
            return false;
        bool ok = xs[i]->rank == xs[0]->rank;
        for (int k = 0; ok && k < xs[0]->rank; k++)
            ok = (k == dim && !same_dim) || xs[i]->shape[k] == xs[0]->shape[k];
        if (!ok) {
            char a[128], b[128];
            cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                             "%s: shape mismatch: input 0 %s input %d %s (dim %d)", op,
                             candle_shape_str(xs[0]->rank, xs[0]->shape, a, sizeof a), i,
                             candle_shape_str(xs[i]->rank, xs[i]->shape, b, sizeof b), dim);
            return false;
        }
    }
    for (int i = 0; i < n; i++)
        if (!check_packed_rows(ctx, op, xs[i])) return false;
    return true;
}

static candle_tensor *concat_node(candle_ctx *ctx, candle_tensor *const *xs, int n, int d) {
    int64_t shape[CANDLE_MAX_RANK];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) shape[d] += xs[i]->shape[d];
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_CONCAT, xs[0]->dtype, xs[0]->rank, shape);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) t->src[i] = xs[i];
    t->n_src = n;
    t->iparams[0] = d;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_concat(candle_ctx *ctx, candle_tensor *const *xs, int n, int dim) {
    if (!ctx) return NULL;
    if (n < 1 || !xs) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "concat: needs at least one input, got %d", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) OP_CHECK_IN(xs[i]);
    int d = cdl_norm_dim(ctx, "concat", dim, xs[0]->rank);
    if (d < 0 || !check_concat(ctx, "concat", xs, n, d, false)) return NULL;
    /* A node holds CANDLE_MAX_SRC inputs; longer lists chain, each node
     * taking the previous result first. */
    candle_tensor *t = concat_node(ctx, xs, n < CANDLE_MAX_SRC ? n : CANDLE_MAX_SRC, d);
    for (int i = CANDLE_MAX_SRC; t && i < n; i += CANDLE_MAX_SRC - 1) {
        candle_tensor *part[CANDLE_MAX_SRC];
        int m = 1;
        part[0] = t;
        while (m < CANDLE_MAX_SRC && i + m - 1 < n) {
            part[m] = xs[i + m - 1];
            m++;
        }
        t = concat_node(ctx, part, m, d);
    }
    return t;
}

candle_tensor *candle_stack(candle_ctx *ctx, candle_tensor *const *xs, int n, int dim) {
    if (!ctx) return NULL;
    if (n < 1 || !xs) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "stack: needs at least one input, got %d", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) OP_CHECK_IN(xs[i]);
    int d = cdl_norm_dim(ctx, "stack", dim, xs[0]->rank + 1);
    if (d < 0 || !check_concat(ctx, "stack", xs, n, d, true)) return NULL;
    if (candle_dtype_info(xs[0]->dtype)->is_quantized && d == xs[0]->rank) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "stack: cannot stack inside %s rows",
                         candle_dtype_name(xs[0]->dtype));
        return NULL;
    }
    candle_tensor **u = malloc(sizeof *u * (size_t)n);
    if (!u) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: stack of %d inputs", n);
        return NULL;
    }
    candle_tensor *t = NULL;
    int i = 0;
    while (i < n && (u[i] = candle_unsqueeze(ctx, xs[i], d))) i++;
    if (i == n) t = candle_concat(ctx, u, n, d);
    free(u);
    return t;
}
