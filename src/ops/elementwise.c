/* Elementwise ops: unary, binary with NumPy broadcasting, comparisons,
 * where, copies and casts. Broadcast inputs become expand views, so the
 * kernels only ever see operands of the output's shape. */
#include <stdio.h>
#include <string.h>

#include "ops-impl.h"

bool op_check_device(candle_ctx *ctx, const char *op, const candle_tensor *a,
                     const candle_tensor *b) {
    if (a->device.type == b->device.type && a->device.index == b->device.index) return true;
    char da[16], db[16];
    cdl_set_error(ctx, CANDLE_ERR_DEVICE, "%s: device mismatch: lhs %s rhs %s", op,
                     candle_device_str(a->device, da, sizeof da),
                     candle_device_str(b->device, db, sizeof db));
    return false;
}

bool op_check_same_dtype(candle_ctx *ctx, const char *op, const candle_tensor *a,
                         const candle_tensor *b) {
    if (a->dtype == b->dtype) return true;
    cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: dtype mismatch: lhs %s rhs %s", op,
                     candle_dtype_name(a->dtype), candle_dtype_name(b->dtype));
    return false;
}

bool op_check_plain(candle_ctx *ctx, const char *op, const candle_tensor *a, bool float_only) {
    const candle_dtype_traits *tr = candle_dtype_info(a->dtype);
    if (!tr->is_quantized && (!float_only || tr->is_float)) return true;
    cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: dtype %s not supported (%s)", op, tr->name,
                     float_only ? "needs f32, f16 or bf16" : "dequantize first");
    return false;
}

bool op_check_block_rows(candle_ctx *ctx, const char *op, const char *what, const candle_tensor *t,
                         bool from_f32) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    int64_t n = t->rank ? t->shape[t->rank - 1] : 0;
    bool conv = from_f32 ? tr->from_f32 != NULL : tr->to_f32 != NULL;
    if (tr->is_quantized && conv && t->rank && n % tr->block_size == 0 &&
        (n == 0 || t->stride[t->rank - 1] == (int64_t)tr->type_size))
        return true;
    cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: %s %s need rows of whole %lld-element blocks, contiguous (row of %lld)",
                     op, tr->name, what, (long long)tr->block_size, (long long)n);
    return false;
}

bool op_check_kv_rows(candle_ctx *ctx, const char *op, const char *what, const candle_tensor *t, bool written) {
    if (!candle_dtype_info(t->dtype)->is_quantized) return op_check_plain(ctx, op, t, true);
    return op_check_block_rows(ctx, op, what, t, false) && (!written || op_check_block_rows(ctx, op, what, t, true));
}

bool op_broadcast_shape(candle_ctx *ctx, const char *op, candle_tensor *const *xs, int n,
                        int *rank, int64_t *shape) {
    int r = 0;
    for (int i = 0; i < n; i++)
        if (xs[i]->rank > r) r = xs[i]->rank;
    for (int d = 0; d < r; d++) {
        int64_t s = 1;
        for (int i = 0; i < n; i++) {
            int k = d - (r - xs[i]->rank);
            int64_t v = k < 0 ? 1 : xs[i]->shape[k];
            if (v == s || v == 1) continue;
            if (s != 1) {
                char a[128], b[128];
                cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                                 "%s: shape mismatch: lhs %s rhs %s (cannot broadcast)", op,
                                 candle_shape_str(xs[0]->rank, xs[0]->shape, a, sizeof a),
                                 candle_shape_str(xs[i]->rank, xs[i]->shape, b, sizeof b));
                return false;
            }
            s = v;
        }
        shape[d] = s;
    }
    *rank = r;
    return true;
}

/* An operand seen through an expand view when its shape differs. */
static candle_tensor *as_shape(candle_ctx *ctx, candle_tensor *x, int rank, const int64_t *shape) {
    if (x->rank == rank) {
        bool same = true;
        for (int i = 0; i < rank; i++) same = same && x->shape[i] == shape[i];
        if (same) return x;
    }
    return candle_expand(ctx, x, rank, shape);
}

static bool is_unary(candle_op op) { return op >= CANDLE_OP_NEG && op <= CANDLE_OP_CLAMP; }
static bool is_compare(candle_op op) { return op >= CANDLE_OP_EQ && op <= CANDLE_OP_GE; }

static candle_tensor *unary_node(candle_ctx *ctx, candle_op op, candle_tensor *x, double p0,
                                 double p1) {
    OP_CHECK_IN(x);
    if (!is_unary(op)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "unary: %s is not a unary op",
                         candle_op_name(op));
        return NULL;
    }
    bool int_ok = op == CANDLE_OP_NEG || op == CANDLE_OP_ABS || op == CANDLE_OP_RELU ||
                  op == CANDLE_OP_AFFINE || op == CANDLE_OP_CLAMP;
    if (!op_check_plain(ctx, candle_op_name(op), x, !int_ok)) return NULL;
    candle_tensor *t = cdl_node_new(ctx, op, x->dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->n_src = 1;
    t->fparams[0] = p0;
    t->fparams[1] = p1;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_unary(candle_ctx *ctx, candle_op op, candle_tensor *x) {
    return unary_node(ctx, op, x, 0, 0);
}

#define UNARY_FN(fn, OP) \
    candle_tensor *candle_##fn(candle_ctx *ctx, candle_tensor *x) { return unary_node(ctx, OP, x, 0, 0); }
UNARY_FN(neg, CANDLE_OP_NEG)
UNARY_FN(abs, CANDLE_OP_ABS)
UNARY_FN(exp, CANDLE_OP_EXP)
UNARY_FN(log, CANDLE_OP_LOG)
UNARY_FN(sqrt, CANDLE_OP_SQRT)
UNARY_FN(rsqrt, CANDLE_OP_RSQRT)
UNARY_FN(sin, CANDLE_OP_SIN)
UNARY_FN(cos, CANDLE_OP_COS)
UNARY_FN(tanh, CANDLE_OP_TANH)
UNARY_FN(sigmoid, CANDLE_OP_SIGMOID)
UNARY_FN(relu, CANDLE_OP_RELU)
UNARY_FN(silu, CANDLE_OP_SILU)
UNARY_FN(gelu, CANDLE_OP_GELU_ERF)
UNARY_FN(gelu_tanh, CANDLE_OP_GELU_TANH)

candle_tensor *candle_affine(candle_ctx *ctx, candle_tensor *x, double mul, double add) {
    return unary_node(ctx, CANDLE_OP_AFFINE, x, mul, add);
}
candle_tensor *candle_scale(candle_ctx *ctx, candle_tensor *x, double s) {
    return unary_node(ctx, CANDLE_OP_AFFINE, x, s, 0.0);
}
candle_tensor *candle_clamp(candle_ctx *ctx, candle_tensor *x, double lo, double hi) {
    if (ctx && x && lo > hi) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "clamp: min %g > max %g", lo, hi);
        return NULL;
    }
    return unary_node(ctx, CANDLE_OP_CLAMP, x, lo, hi);
}

candle_tensor *candle_binary(candle_ctx *ctx, candle_op op, candle_tensor *a, candle_tensor *b) {
    OP_CHECK_IN(a);
    OP_CHECK_IN(b);
    const char *name = candle_op_name(op);
    if (!(op >= CANDLE_OP_ADD && op <= CANDLE_OP_GE)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "binary: %s is not a binary op", name);
        return NULL;
    }
    if (!op_check_device(ctx, name, a, b) || !op_check_same_dtype(ctx, name, a, b) ||
        !op_check_plain(ctx, name, a, op == CANDLE_OP_POW))
        return NULL;
    candle_tensor *xs[2] = {a, b};
    int rank;
    int64_t shape[CANDLE_MAX_RANK];
    if (!op_broadcast_shape(ctx, name, xs, 2, &rank, shape)) return NULL;
    candle_tensor *ea = as_shape(ctx, a, rank, shape), *eb = as_shape(ctx, b, rank, shape);
    if (!ea || !eb) return NULL;
    candle_dtype out = is_compare(op) ? CANDLE_DTYPE_BOOL : a->dtype;
    candle_tensor *t = cdl_node_new(ctx, op, out, rank, shape);
    if (!t) return NULL;
    t->src[0] = ea;
    t->src[1] = eb;
    t->n_src = 2;
    return cdl_node_finish(ctx, t);
}

#define BINARY_FN(fn, OP)                                                           \
    candle_tensor *candle_##fn(candle_ctx *ctx, candle_tensor *a, candle_tensor *b) { \
        return candle_binary(ctx, OP, a, b);                                          \
    }
BINARY_FN(add, CANDLE_OP_ADD)
BINARY_FN(sub, CANDLE_OP_SUB)
BINARY_FN(mul, CANDLE_OP_MUL)
BINARY_FN(div, CANDLE_OP_DIV)
BINARY_FN(maximum, CANDLE_OP_MAXIMUM)
BINARY_FN(minimum, CANDLE_OP_MINIMUM)
BINARY_FN(pow, CANDLE_OP_POW)
BINARY_FN(eq, CANDLE_OP_EQ)
BINARY_FN(ne, CANDLE_OP_NE)
BINARY_FN(lt, CANDLE_OP_LT)
BINARY_FN(le, CANDLE_OP_LE)
BINARY_FN(gt, CANDLE_OP_GT)
BINARY_FN(ge, CANDLE_OP_GE)

candle_tensor *candle_where(candle_ctx *ctx, candle_tensor *cond, candle_tensor *a,
                            candle_tensor *b) {
    OP_CHECK_IN(cond);
    OP_CHECK_IN(a);
    OP_CHECK_IN(b);
    if (cond->dtype != CANDLE_DTYPE_BOOL) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "where: condition must be bool, got %s",
                         candle_dtype_name(cond->dtype));
        return NULL;
    }
    if (!op_check_device(ctx, "where", cond, a) || !op_check_device(ctx, "where", a, b) ||
        !op_check_same_dtype(ctx, "where", a, b) || !op_check_plain(ctx, "where", a, false))
        return NULL;
    candle_tensor *xs[3] = {cond, a, b};
    int rank;
    int64_t shape[CANDLE_MAX_RANK];
    if (!op_broadcast_shape(ctx, "where", xs, 3, &rank, shape)) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_WHERE, a->dtype, rank, shape);
    if (!t) return NULL;
    for (int i = 0; i < 3; i++)
        if (!(t->src[i] = as_shape(ctx, xs[i], rank, shape))) return NULL;
    t->n_src = 3;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_cast(candle_ctx *ctx, candle_tensor *x, candle_dtype dtype) {
    OP_CHECK_IN(x);
    if ((unsigned)dtype >= CANDLE_DTYPE_COUNT) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "cast: invalid dtype %d", (int)dtype);
        return NULL;
    }
    const candle_dtype_traits *src = candle_dtype_info(x->dtype), *dst = candle_dtype_info(dtype);
    if ((src->is_quantized && !src->to_f32) || (dst->is_quantized && !dst->from_f32)) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "cast: %s -> %s not supported", src->name,
                         dst->name);
        return NULL;
    }
    if ((src->is_quantized || dst->is_quantized) && x->rank > 0 &&
        x->stride[x->rank - 1] != (int64_t)src->type_size) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED,
                         "cast: %s -> %s needs contiguous rows", src->name, dst->name);
        return NULL;
    }
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_COPY, dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->n_src = 1;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_contiguous(candle_ctx *ctx, candle_tensor *x) {
    OP_CHECK_IN(x);
    if (candle_tensor_is_contiguous(x)) return x;
    return candle_cast(ctx, x, x->dtype);
}

candle_tensor *candle_copy_into(candle_ctx *ctx, candle_tensor *dst, candle_tensor *src) {
    OP_CHECK_IN(dst);
    OP_CHECK_IN(src);
    /* a destination of a block type (a quantized KV cache) takes whole rows,
     * which its from_f32 writes a row at a time */
    bool dst_ok = !candle_dtype_info(dst->dtype)->is_quantized ||
                  op_check_block_rows(ctx, "copy_into", "destinations", dst, true);
    if (!op_check_device(ctx, "copy_into", dst, src) || !dst_ok ||
        !op_check_plain(ctx, "copy_into", src, false))
        return NULL;
    bool fits = src->rank <= dst->rank;
    for (int i = 1; fits && i <= src->rank; i++) {
        int64_t have = src->shape[src->rank - i], want = dst->shape[dst->rank - i];
        fits = have == want || have == 1;
    }
    if (!fits) {
        char a[128], b[128];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "copy_into: shape mismatch: dst %s src %s (src must broadcast to dst)",
                         candle_shape_str(dst->rank, dst->shape, a, sizeof a),
                         candle_shape_str(src->rank, src->shape, b, sizeof b));
        return NULL;
    }
    candle_tensor *s = as_shape(ctx, src, dst->rank, dst->shape);
    if (!s) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_COPY, dst->dtype, dst->rank, dst->shape);
    if (!t) return NULL;
    /* t writes through dst's layout into the storage dst views. */
    memcpy(t->stride, dst->stride, sizeof t->stride);
    t->view_src = dst->op == CANDLE_OP_VIEW && dst->view_src ? dst->view_src : dst;
    t->view_offset = dst->op == CANDLE_OP_VIEW && dst->view_src ? dst->view_offset : 0;
    t->src[0] = s;
    t->src[1] = dst; /* ordering: dst's producer runs first */
    t->n_src = 2;
    return cdl_node_finish(ctx, t);
}
