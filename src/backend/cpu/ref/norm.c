/* Reference kernels for RMSNorm and LayerNorm over the last dim, one row at
 * a time in double precision, on any strided layout. The optional weight and
 * bias (src[1], src[2], NULL when absent) are [D] of x's dtype or f32. */
#include <math.h>

#include "../cpu-impl.h"

/* Element k of an optional [D] parameter; `none` when it is absent. */
static double param_at(const candle_tensor *p, int64_t k, double none) {
    if (!p) return none;
    return cdl_load_f64(p->dtype, tensor_ptr(p) + k * p->stride[0]);
}

typedef double (*row_fn)(const candle_tensor *dst, const char *xp, int64_t xs, int64_t D,
                         double *shift);

/* rms_norm: y = x / sqrt(mean(x^2) + eps) * w */
static double rms_scale(const candle_tensor *dst, const char *xp, int64_t xs, int64_t D,
                        double *shift) {
    const candle_tensor *x = dst->src[0];
    double ss = 0;
    for (int64_t k = 0; k < D; k++) {
        double v = cdl_load_f64(x->dtype, xp + k * xs);
        ss += v * v;
    }
    *shift = 0;
    return 1.0 / sqrt(ss / (double)D + dst->fparams[0]);
}

/* layer_norm: y = (x - mean) / sqrt(var + eps) * w + b, var biased as in PyTorch */
static double ln_scale(const candle_tensor *dst, const char *xp, int64_t xs, int64_t D,
                       double *shift) {
    const candle_tensor *x = dst->src[0];
    double sum = 0, ss = 0;
    for (int64_t k = 0; k < D; k++) sum += cdl_load_f64(x->dtype, xp + k * xs);
    double mean = sum / (double)D;
    for (int64_t k = 0; k < D; k++) {
        double v = cdl_load_f64(x->dtype, xp + k * xs) - mean;
        ss += v * v;
    }
    *shift = mean;
    return 1.0 / sqrt(ss / (double)D + dst->fparams[0]);
}

static candle_status norm_rows(candle_tensor *dst, row_fn scale_of) {
    const candle_tensor *x = dst->src[0], *w = dst->src[1];
    const candle_tensor *b = dst->op == CANDLE_OP_LAYER_NORM ? dst->src[2] : NULL;
    int r = dst->rank;
    int64_t D = dst->shape[r - 1], xs = x->stride[r - 1], ds = dst->stride[r - 1];
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *xp = tensor_ptr(x) + nd_offset(r - 1, idx, x->stride);
        char *dp = tensor_ptr(dst) + nd_offset(r - 1, idx, dst->stride);
        double shift, scale = scale_of(dst, xp, xs, D, &shift);
        for (int64_t k = 0; k < D; k++) {
            double v = (cdl_load_f64(x->dtype, xp + k * xs) - shift) * scale;
            cdl_store_f64(dst->dtype, dp + k * ds, v * param_at(w, k, 1.0) + param_at(b, k, 0.0));
        }
    } while (nd_next(r - 1, dst->shape, idx));
    return CANDLE_OK;
}

candle_status cpu_ref_rms_norm(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    return norm_rows(dst, rms_scale);
}

candle_status cpu_ref_layer_norm(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    return norm_rows(dst, ln_scale);
}
