/* Reference kernels: conv1d and conv2d, one output element at a time in
 * double precision. conv1d runs as conv2d with a height of one. */
#include "../cpu-impl.h"

/* A conv operand seen as 4-D [A, B, H, W]; 3-D tensors get H = 1. */
typedef struct view4 {
    const char *p;
    candle_dtype dtype;
    int64_t shape[4], stride[4];
} view4;

static view4 as4(const candle_tensor *t) {
    view4 v = {tensor_ptr(t), t->dtype, {1, 1, 1, 1}, {0, 0, 0, 0}};
    int lead = 4 - t->rank; /* 1 for 3-D: H inserted at dim 2 */
    for (int i = 0, j = 0; i < 4; i++) {
        if (lead && i == 2) continue;
        v.shape[i] = t->shape[j];
        v.stride[i] = t->stride[j++];
    }
    return v;
}

static double at4(const view4 *v, int64_t a, int64_t b, int64_t h, int64_t w) {
    return cdl_load_f64(v->dtype, v->p + a * v->stride[0] + b * v->stride[1] + h * v->stride[2] +
                                         w * v->stride[3]);
}

typedef struct conv_cfg {
    int64_t stride[2], pad[2], dil[2], groups;
} conv_cfg;

/* One output element: n, o at output position (oh, ow). */
static double conv_at(const view4 *x, const view4 *w, const conv_cfg *c, int64_t n, int64_t o,
                      int64_t oh, int64_t ow) {
    int64_t cg = w->shape[1], og = w->shape[0] / c->groups, g = o / og;
    double acc = 0;
    for (int64_t ci = 0; ci < cg; ci++) {
        for (int64_t kh = 0; kh < w->shape[2]; kh++) {
            int64_t ih = oh * c->stride[0] - c->pad[0] + kh * c->dil[0];
            if (ih < 0 || ih >= x->shape[2]) continue;
            for (int64_t kw = 0; kw < w->shape[3]; kw++) {
                int64_t iw = ow * c->stride[1] - c->pad[1] + kw * c->dil[1];
                if (iw < 0 || iw >= x->shape[3]) continue;
                acc += at4(x, n, g * cg + ci, ih, iw) * at4(w, o, ci, kh, kw);
            }
        }
    }
    return acc;
}

static candle_status conv_ref(candle_tensor *dst) {
    view4 x = as4(dst->src[0]), w = as4(dst->src[1]), y = as4(dst);
    const candle_tensor *bias = dst->n_src > 2 ? dst->src[2] : NULL;
    /* Node params are per spatial dim; conv1d's only dim is the width. */
    int sw = dst->rank == 3 ? 0 : 1;
    conv_cfg c = {{1, dst->iparams[0 + sw]}, {0, dst->iparams[2 + sw]}, {1, dst->iparams[4 + sw]},
                  dst->iparams[6]};
    if (dst->rank == 4) {
        c.stride[0] = dst->iparams[0];
        c.pad[0] = dst->iparams[2];
        c.dil[0] = dst->iparams[4];
    }
    for (int64_t n = 0; n < y.shape[0]; n++)
        for (int64_t o = 0; o < y.shape[1]; o++) {
            double b = bias ? cdl_load_f64(bias->dtype, tensor_ptr(bias) + o * bias->stride[0]) : 0.0;
            for (int64_t oh = 0; oh < y.shape[2]; oh++)
                for (int64_t ow = 0; ow < y.shape[3]; ow++) {
                    char *yp = (char *)y.p + n * y.stride[0] + o * y.stride[1] + oh * y.stride[2] +
                               ow * y.stride[3];
                    cdl_store_f64(dst->dtype, yp, b + conv_at(&x, &w, &c, n, o, oh, ow));
                }
        }
    return CANDLE_OK;
}

candle_status cpu_ref_conv1d(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    return conv_ref(dst);
}

candle_status cpu_ref_conv2d(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    return conv_ref(dst);
}
