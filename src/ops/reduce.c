/* Reductions over one dim and softmax. The node always keeps the reduced dim
 * (size 1) so kernels see one rank; keepdim=false is a squeeze view on top.
 *
 * Output dtypes follow PyTorch: sum of an integer or bool tensor is i64 (a sum
 * of a bool mask counts it), max/min keep the input dtype, mean needs a float
 * dtype, argmax is i64. Float results keep the input dtype. */
#include "ops-impl.h"

static bool is_reduce(candle_op op) { return op >= CANDLE_OP_SUM && op <= CANDLE_OP_ARGMAX; }

static candle_dtype reduce_dtype(candle_op op, candle_dtype in) {
    if (op == CANDLE_OP_ARGMAX) return CANDLE_DTYPE_I64;
    if (op == CANDLE_OP_SUM && candle_dtype_info(in)->is_int) return CANDLE_DTYPE_I64;
    return in;
}

candle_tensor *candle_reduce(candle_ctx *ctx, candle_op op, candle_tensor *x, int dim,
                             bool keepdim) {
    OP_CHECK_IN(x);
    if (!is_reduce(op)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "reduce: %s is not a reduction",
                         candle_op_name(op));
        return NULL;
    }
    const char *name = candle_op_name(op);
    if (!op_check_plain(ctx, name, x, op == CANDLE_OP_MEAN)) return NULL;
    int d = cdl_norm_dim(ctx, name, dim, x->rank);
    if (d < 0) return NULL;
    /* Like PyTorch: an empty sum is 0 and an empty mean NaN, but there is no
     * max of nothing. */
    if (x->shape[d] == 0 && (op == CANDLE_OP_MAX || op == CANDLE_OP_MIN || op == CANDLE_OP_ARGMAX)) {
        char b[128];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: cannot reduce empty dim %d of %s", name, dim,
                         candle_shape_str(x->rank, x->shape, b, sizeof b));
        return NULL;
    }
    int64_t shape[CANDLE_MAX_RANK];
    for (int i = 0; i < x->rank; i++) shape[i] = i == d ? 1 : x->shape[i];
    candle_tensor *t = cdl_node_new(ctx, op, reduce_dtype(op, x->dtype), x->rank, shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->n_src = 1;
    t->iparams[0] = d;
    t = cdl_node_finish(ctx, t);
    if (!t || keepdim) return t;
    return candle_squeeze(ctx, t, d);
}

candle_tensor *candle_sum(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim) {
    return candle_reduce(ctx, CANDLE_OP_SUM, x, dim, keepdim);
}
candle_tensor *candle_mean(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim) {
    return candle_reduce(ctx, CANDLE_OP_MEAN, x, dim, keepdim);
}
candle_tensor *candle_max(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim) {
    return candle_reduce(ctx, CANDLE_OP_MAX, x, dim, keepdim);
}
candle_tensor *candle_min(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim) {
    return candle_reduce(ctx, CANDLE_OP_MIN, x, dim, keepdim);
}
candle_tensor *candle_argmax(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim) {
    return candle_reduce(ctx, CANDLE_OP_ARGMAX, x, dim, keepdim);
}

static candle_tensor *softmax_node(candle_ctx *ctx, candle_op op, candle_tensor *x, int dim) {
    OP_CHECK_IN(x);
    const char *name = candle_op_name(op);
    if (!op_check_plain(ctx, name, x, true)) return NULL;
    int d = cdl_norm_dim(ctx, name, dim, x->rank);
    if (d < 0) return NULL;
    candle_tensor *t = cdl_node_new(ctx, op, x->dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->n_src = 1;
    t->iparams[0] = d;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_topk_mask(candle_ctx *ctx, candle_tensor *x, int64_t k, int dim, double fill) {
    OP_CHECK_IN(x);
    if (k < 1) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "topk_mask: k %lld (1 or more)", (long long)k);
        return NULL;
    }
    if (!op_check_plain(ctx, "topk_mask", x, true)) return NULL;
    int d = cdl_norm_dim(ctx, "topk_mask", dim, x->rank);
    if (d < 0) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_TOPK_MASK, x->dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->n_src = 1;
    t->iparams[0] = d;
    t->iparams[1] = k;
    t->fparams[0] = fill;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_softmax(candle_ctx *ctx, candle_tensor *x, int dim) {
    return softmax_node(ctx, CANDLE_OP_SOFTMAX, x, dim);
}
candle_tensor *candle_log_softmax(candle_ctx *ctx, candle_tensor *x, int dim) {
    return softmax_node(ctx, CANDLE_OP_LOG_SOFTMAX, x, dim);
}
