/* Matrix multiplication and the linear layer.
 *
 * matmul follows torch.matmul: a [..., M, K] x b [..., K, N] -> [..., M, N],
 * batch dims broadcast, a 1-D lhs is a row [1, K] and a 1-D rhs a column
 * [K, 1] whose extra dim is dropped from the result. Operands keep their
 * strides (no copies).
 *
 * Weights: GGUF stores a linear weight as row-major w [N, K], possibly in a
 * block dtype. b = transpose(w) then has dim -2 (K) as the blocked, contiguous
 * dim (stride = block bytes) and dim -1 (N) stepping by the row size; the
 * kernel dequantizes one weight row (one column of b) at a time. That
 * "weight" form takes an f32 lhs and gives f32, for any block dtype and for
 * f16/bf16 weights. Block dtypes cannot be expand-viewed, so such b keeps its
 * own batch dims (aligned right, missing or size-1 ones broadcast) and the
 * kernel broadcasts them. */
#include <inttypes.h>
#include <stdio.h>

#include "ops-impl.h"

static void shape_mismatch(candle_ctx *ctx, const candle_tensor *a, const candle_tensor *b,
                           const char *why) {
    char sa[128], sb[128];
    cdl_set_error(ctx, CANDLE_ERR_SHAPE, "matmul: shape mismatch: lhs %s rhs %s (%s)",
                     candle_shape_str(a->rank, a->shape, sa, sizeof sa),
                     candle_shape_str(b->rank, b->shape, sb, sizeof sb), why);
}

/* The weight form (see top); false with an error when b is not usable so. */
static bool check_weight_rhs(candle_ctx *ctx, const candle_tensor *a, const candle_tensor *b) {
    const candle_dtype_traits *tb = candle_dtype_info(b->dtype);
    if (a->dtype != CANDLE_DTYPE_F32) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "matmul: %s rhs needs an f32 lhs, got %s",
                         tb->name, candle_dtype_name(a->dtype));
        return false;
    }
    if (b->rank < 2 || b->stride[b->rank - 2] != (int64_t)tb->type_size ||
        b->shape[b->rank - 2] % tb->block_size) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED,
                         "matmul: %s rhs must be the transpose of a row-major [N, K] weight "
                         "(use candle_linear, or cast it)",
                         tb->name);
        return false;
    }
    return true;
}

static bool check_dtypes(candle_ctx *ctx, const candle_tensor *a, const candle_tensor *b,
                         bool *weight_form) {
    const candle_dtype_traits *tb = candle_dtype_info(b->dtype);
    *weight_form = a->dtype != b->dtype && (tb->is_quantized || b->dtype == CANDLE_DTYPE_F16 ||
                                            b->dtype == CANDLE_DTYPE_BF16);
    if (*weight_form) return check_weight_rhs(ctx, a, b);
    return op_check_same_dtype(ctx, "matmul", a, b) && op_check_plain(ctx, "matmul", a, true);
}

/* Broadcast the batch dims (all but the last two) of a and b into out. */
static bool batch_shape(candle_ctx *ctx, const candle_tensor *a, const candle_tensor *b,
                        const candle_tensor *a0, const candle_tensor *b0, int *rank,
                        int64_t *out) {
    int ra = a->rank - 2, rb = b->rank - 2, r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t sa = ia < 0 ? 1 : a->shape[ia], sb = ib < 0 ? 1 : b->shape[ib];
        if (sa != sb && sa != 1 && sb != 1) {
            shape_mismatch(ctx, a0, b0, "batch dims do not broadcast");
            return false;
        }
        out[i] = sa == 1 ? sb : sa;
    }
    *rank = r;
    return true;
}

/* x seen with the batch dims given and its own last two dims. */
static candle_tensor *expand_batch(candle_ctx *ctx, candle_tensor *x, int nb,
                                   const int64_t *batch) {
    int64_t shape[CANDLE_MAX_RANK];
    bool same = x->rank == nb + 2;
    for (int i = 0; i < nb; i++) {
        shape[i] = batch[i];
        same = same && x->shape[i] == batch[i];
    }
    shape[nb] = x->shape[x->rank - 2];
    shape[nb + 1] = x->shape[x->rank - 1];
    return same ? x : candle_expand(ctx, x, nb + 2, shape);
}

/* The MATMUL node, with bias (f32 [N], or NULL) as its third source and
 * cdl_matmul_ex's flags. */
static candle_tensor *matmul_node(candle_ctx *ctx, candle_tensor *a, candle_tensor *b, candle_tensor *bias,
                                  unsigned flags) {
    OP_CHECK_IN(a);
    OP_CHECK_IN(b);
    if (!op_check_device(ctx, "matmul", a, b)) return NULL;
    if (a->rank < 1 || b->rank < 1) {
        shape_mismatch(ctx, a, b, "operands must be at least 1-D");
        return NULL;
    }
    bool weight_form;
    if (!check_dtypes(ctx, a, b, &weight_form)) return NULL;
    candle_tensor *a0 = a, *b0 = b;
    int64_t k_a = a->shape[a->rank - 1], k_b = b->shape[b->rank == 1 ? 0 : b->rank - 2];
    if (k_a != k_b) {
        char why[64];
        snprintf(why, sizeof why, "%" PRId64 " != %" PRId64, k_a, k_b);
        shape_mismatch(ctx, a, b, why);
        return NULL;
    }
    if (a->rank == 1 && !(a = candle_unsqueeze(ctx, a, 0))) return NULL;
    if (b->rank == 1 && !(b = candle_unsqueeze(ctx, b, 1))) return NULL;
    int nb;
    int64_t shape[CANDLE_MAX_RANK];
    if (!batch_shape(ctx, a, b, a0, b0, &nb, shape)) return NULL;
    a = expand_batch(ctx, a, nb, shape);
    if (!weight_form) b = expand_batch(ctx, b, nb, shape);
    if (!a || !b) return NULL;
    shape[nb] = a->shape[a->rank - 2];
    shape[nb + 1] = b->shape[b->rank - 1];
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_MATMUL, a->dtype, nb + 2, shape);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = bias;
    t->n_src = bias ? 3 : 2;
    t->iparams[0] = flags & (CDL_MM_FLOAT_ACT | CDL_MM_ROW_STEPS);
    t = cdl_node_finish(ctx, t);
    if (t && b0->rank == 1) t = candle_squeeze(ctx, t, -1);
    if (t && a0->rank == 1) t = candle_squeeze(ctx, t, -1 - (b0->rank != 1));
    return t;
}

candle_tensor *candle_matmul(candle_ctx *ctx, candle_tensor *a, candle_tensor *b) {
    return matmul_node(ctx, a, b, NULL, 0);
}

candle_tensor *candle_matmul_bias(candle_ctx *ctx, candle_tensor *a, candle_tensor *b, candle_tensor *bias) {
    return cdl_matmul_ex(ctx, a, b, bias, 0);
}

candle_tensor *cdl_matmul_ex(candle_ctx *ctx, candle_tensor *a, candle_tensor *b, candle_tensor *bias,
                             unsigned flags) {
    if (!bias) return matmul_node(ctx, a, b, NULL, flags);
    OP_CHECK_IN(a);
    OP_CHECK_IN(b);
    OP_CHECK_IN(bias);
    /* the node's product is f32 for f32 activations (a quantized or
     * half-precision weight included) */
    int64_t n = b->rank >= 2 ? b->shape[b->rank - 1] : -1;
    bool fused = a->rank >= 2 && b->rank >= 2 && a->dtype == CANDLE_DTYPE_F32 && bias->dtype == CANDLE_DTYPE_F32 &&
                 bias->rank == 1 && bias->shape[0] == n && candle_tensor_is_contiguous(bias) &&
                 bias->device.type == a->device.type && bias->device.index == a->device.index;
    return fused ? matmul_node(ctx, a, b, bias, flags) : candle_add(ctx, matmul_node(ctx, a, b, NULL, flags), bias);
}

candle_tensor *candle_matmul_group_corr(candle_ctx *ctx, candle_tensor *a, candle_tensor *b,
                                       candle_tensor *corr, int64_t group) {
    OP_CHECK_IN(a);
    OP_CHECK_IN(b);
    OP_CHECK_IN(corr);
    if (!op_check_device(ctx, "matmul_group_corr", a, b) || !op_check_device(ctx, "matmul_group_corr", a, corr))
        return NULL;
    bool weight_form;
    if (a->rank < 1 || b->rank != 2) {
        shape_mismatch(ctx, a, b, "group_corr: want a [..., K] and b [K, N]");
        return NULL;
    }
    if (!check_dtypes(ctx, a, b, &weight_form)) return NULL;
    if (a->dtype != CANDLE_DTYPE_F32) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "matmul_group_corr: lhs %s, want f32", candle_dtype_name(a->dtype));
        return NULL;
    }
    int64_t K = a->shape[a->rank - 1], N = b->shape[1];
    if (b->shape[0] != K || group < 1 || K % group) {
        char why[96];
        snprintf(why, sizeof why, "group_corr: K %" PRId64 " vs %" PRId64 ", group %" PRId64, K, b->shape[0],
                 group);
        shape_mismatch(ctx, a, b, why);
        return NULL;
    }
    if (corr->dtype != CANDLE_DTYPE_F32 || corr->rank != 2 || corr->shape[0] != K / group ||
        corr->shape[1] != N) {
        char sc[64];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "matmul_group_corr: corr is %s %s, want f32 [%" PRId64 ", %" PRId64 "]",
                         candle_shape_str(corr->rank, corr->shape, sc, sizeof sc), candle_dtype_name(corr->dtype),
                         K / group, N);
        return NULL;
    }
    candle_tensor *a0 = a;
    if (a->rank == 1 && !(a = candle_unsqueeze(ctx, a, 0))) return NULL;
    int64_t shape[CANDLE_MAX_RANK];
    for (int i = 0; i < a->rank - 1; i++) shape[i] = a->shape[i];
    shape[a->rank - 1] = N;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_MATMUL_GROUP_CORR, CANDLE_DTYPE_F32, a->rank, shape);
    if (!t) return NULL;
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = corr;
    t->n_src = 3;
    t->iparams[0] = group;
    t = cdl_node_finish(ctx, t);
    if (t && a0->rank == 1) t = candle_squeeze(ctx, t, 0);
    return t;
}

candle_tensor *candle_linear(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                             candle_tensor *bias) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(w);
    char sx[128], sw[128];
    if (w->rank != 2 || x->rank < 1 || x->shape[x->rank - 1] != w->shape[1]) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "linear: shape mismatch: input %s weight %s (want weight [N, %" PRId64 "])",
                         candle_shape_str(x->rank, x->shape, sx, sizeof sx),
                         candle_shape_str(w->rank, w->shape, sw, sizeof sw),
                         x->rank ? x->shape[x->rank - 1] : 0);
        return NULL;
    }
    if (!bias) return candle_matmul(ctx, x, candle_transpose(ctx, w, 0, 1));
    if (bias->rank != 1 || bias->shape[0] != w->shape[0]) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "linear: bias %s does not match weight %s",
                         candle_shape_str(bias->rank, bias->shape, sx, sizeof sx),
                         candle_shape_str(w->rank, w->shape, sw, sizeof sw));
        return NULL;
    }
    /* An f32 output (weight form) may carry an f16 bias from the same file. */
    if (bias->dtype != x->dtype && candle_dtype_info(bias->dtype)->is_float) bias = candle_cast(ctx, bias, x->dtype);
    return candle_matmul_bias(ctx, x, candle_transpose(ctx, w, 0, 1), bias);
}

/* One stacked expert weight [n_expert, rows, cols] of a float or quantized
 * dtype whose rows the CPU can dequantize. */
static bool moe_weight_ok(candle_ctx *ctx, const char *what, const candle_tensor *w, int64_t ne,
                          int64_t rows, int64_t cols) {
    char got[64];
    const candle_dtype_traits *tr = candle_dtype_info(w->dtype);
    if (w->rank != 3 || w->shape[0] != ne || w->shape[1] != rows || w->shape[2] != cols) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "moe_ffn: %s has shape %s, want [%" PRId64 ", %" PRId64 ", %" PRId64 "]",
                         what, candle_shape_str(w->rank, w->shape, got, sizeof got), ne, rows, cols);
        return false;
    }
    if (!(tr->is_float || tr->is_quantized) || !tr->to_f32 || cols % tr->block_size ||
        w->stride[2] != (int64_t)tr->type_size) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE,
                         "moe_ffn: %s of dtype %s: want float or quantized rows of whole blocks, "
                         "each row contiguous", what, tr->name);
        return false;
    }
    return true;
}

candle_tensor *candle_moe_ffn(candle_ctx *ctx, candle_tensor *x, candle_tensor *weights,
                              candle_tensor *gate, candle_tensor *up, candle_tensor *down,
                              candle_op act) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(weights);
    OP_CHECK_IN(gate);
    OP_CHECK_IN(up);
    OP_CHECK_IN(down);
    if (!op_check_device(ctx, "moe_ffn", x, weights) || !op_check_device(ctx, "moe_ffn", x, gate) ||
        !op_check_device(ctx, "moe_ffn", x, up) || !op_check_device(ctx, "moe_ffn", x, down))
        return NULL;
    if (act != CANDLE_OP_SILU && act != CANDLE_OP_GELU_TANH) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "moe_ffn: activation %s (want silu or gelu_tanh)",
                         candle_op_name(act));
        return NULL;
    }
    if (x->dtype != CANDLE_DTYPE_F32 || weights->dtype != CANDLE_DTYPE_F32 || x->rank != 2 ||
        weights->rank != 2 || weights->shape[0] != x->shape[0] || gate->rank != 3) {
        char a[64], b[64];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "moe_ffn: want x [n, d_in] f32 and weights [n, n_expert] f32, got x %s %s "
                         "and weights %s %s", candle_shape_str(x->rank, x->shape, a, sizeof a),
                         candle_dtype_name(x->dtype), candle_shape_str(weights->rank, weights->shape, b, sizeof b),
                         candle_dtype_name(weights->dtype));
        return NULL;
    }
    int64_t n = x->shape[0], d_in = x->shape[1], ne = weights->shape[1], d_ff = gate->shape[1];
    int64_t d_out = down->rank == 3 ? down->shape[1] : 0;
    if (!moe_weight_ok(ctx, "gate", gate, ne, d_ff, d_in) || !moe_weight_ok(ctx, "up", up, ne, d_ff, d_in) ||
        !moe_weight_ok(ctx, "down", down, ne, d_out, d_ff))
        return NULL;
    int64_t shape[2] = {n, d_out};
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_MOE_FFN, CANDLE_DTYPE_F32, 2, shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = weights;
    t->src[2] = gate;
    t->src[3] = up;
    t->src[4] = down;
    t->n_src = 5;
    t->iparams[0] = act;
    return cdl_node_finish(ctx, t);
}
