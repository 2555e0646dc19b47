/* Convolutions (PyTorch's conv1d/conv2d: cross-correlation, NCL/NCHW).
 *
 * Node params, per spatial dim s (conv1d uses s = 0 only):
 *   iparams[0 + s] stride, iparams[2 + s] padding, iparams[4 + s] dilation,
 *   iparams[6] groups. Zeros in candle_conv_params mean the defaults. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops-impl.h"

typedef struct conv_dims {
    int64_t stride[2], pad[2], dil[2], groups;
} conv_dims;

static bool resolve_params(candle_ctx *ctx, const char *op, const candle_conv_params *p, int ns,
                           conv_dims *cd) {
    candle_conv_params z = {{0, 0}, {0, 0}, {0, 0}, 0};
    if (!p) p = &z;
    for (int s = 0; s < 2; s++) {
        bool used = s < ns;
        cd->stride[s] = used && p->stride[s] ? p->stride[s] : 1;
        cd->pad[s] = used ? p->padding[s] : 0;
        cd->dil[s] = used && p->dilation[s] ? p->dilation[s] : 1;
        if (cd->stride[s] < 1 || cd->pad[s] < 0 || cd->dil[s] < 1) {
            cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                             "%s: invalid params: stride %d padding %d dilation %d", op,
                             p->stride[s], p->padding[s], p->dilation[s]);
            return false;
        }
    }
    cd->groups = p->groups ? p->groups : 1;
    if (cd->groups < 1) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: invalid groups %d", op, p->groups);
        return false;
    }
    return true;
}

static bool check_dtypes(candle_ctx *ctx, const char *op, const candle_tensor *x,
                         const candle_tensor *w, const candle_tensor *bias) {
    if (!op_check_device(ctx, op, x, w) || !op_check_plain(ctx, op, x, true) ||
        !op_check_same_dtype(ctx, op, x, w))
        return false;
    return !bias || (op_check_device(ctx, op, x, bias) && op_check_same_dtype(ctx, op, x, bias));
}

/* Channel and spatial checks; fills the output shape [N, O, spatial...]. */
static bool conv_shape(candle_ctx *ctx, const char *op, const candle_tensor *x,
                       const candle_tensor *w, const candle_tensor *bias, int ns,
                       const conv_dims *cd, int64_t *out) {
    char a[128], b[128];
    int r = ns + 2;
    if (x->rank != r || w->rank != r) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: expected rank %d input and weight, got x %s w %s",
                         op, r, candle_shape_str(x->rank, x->shape, a, sizeof a),
                         candle_shape_str(w->rank, w->shape, b, sizeof b));
        return false;
    }
    int64_t c = x->shape[1], o = w->shape[0], g = cd->groups;
    if (c % g || o % g) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "%s: channels not divisible by groups: in %" PRId64 " out %" PRId64
                         " groups %" PRId64,
                         op, c, o, g);
        return false;
    }
    if (w->shape[1] != c / g) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "%s: shape mismatch: x %s w %s (weight has %" PRId64
                         " input channels, expected %" PRId64 " = %" PRId64 " / groups %" PRId64 ")",
                         op, candle_shape_str(x->rank, x->shape, a, sizeof a),
                         candle_shape_str(w->rank, w->shape, b, sizeof b), w->shape[1], c / g, c, g);
        return false;
    }
    if (bias && (bias->rank != 1 || bias->shape[0] != o)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: bias %s does not match %" PRId64 " output channels",
                         op, candle_shape_str(bias->rank, bias->shape, a, sizeof a), o);
        return false;
    }
    out[0] = x->shape[0];
    out[1] = o;
    for (int s = 0; s < ns; s++) {
        int64_t in = x->shape[2 + s] + 2 * cd->pad[s];
        int64_t span = cd->dil[s] * (w->shape[2 + s] - 1) + 1;
        if (w->shape[2 + s] < 1 || span > in) {
            cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                             "%s: kernel larger than padded input: x %s w %s: dilated kernel %" PRId64
                             " > padded input %" PRId64 " (dim %d)",
                             op, candle_shape_str(x->rank, x->shape, a, sizeof a),
                             candle_shape_str(w->rank, w->shape, b, sizeof b), span, in, 2 + s);
            return false;
        }
        out[2 + s] = (in - span) / cd->stride[s] + 1;
    }
    return true;
}

static candle_tensor *conv_node(candle_ctx *ctx, candle_op op, candle_tensor *x, candle_tensor *w,
                                candle_tensor *bias, const candle_conv_params *p, int ns) {
    const char *name = candle_op_name(op);
    conv_dims cd;
    int64_t shape[4];
    if (!check_dtypes(ctx, name, x, w, bias) || !resolve_params(ctx, name, p, ns, &cd) ||
        !conv_shape(ctx, name, x, w, bias, ns, &cd, shape))
        return NULL;
    candle_tensor *t = cdl_node_new(ctx, op, x->dtype, ns + 2, shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = w;
    t->src[2] = bias;
    t->n_src = bias ? 3 : 2;
    for (int s = 0; s < 2; s++) {
        t->iparams[0 + s] = cd.stride[s];
        t->iparams[2 + s] = cd.pad[s];
        t->iparams[4 + s] = cd.dil[s];
    }
    t->iparams[6] = cd.groups;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_conv1d(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                             candle_tensor *bias, const candle_conv_params *p) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(w);
    return conv_node(ctx, CANDLE_OP_CONV1D, x, w, bias, p, 1);
}

candle_tensor *candle_conv2d(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                             candle_tensor *bias, const candle_conv_params *p) {
    OP_CHECK_IN(x);
    OP_CHECK_IN(w);
    return conv_node(ctx, CANDLE_OP_CONV2D, x, w, bias, p, 2);
}
