/* Reference rotary position embedding. x [..., S, H, D]; for each row the
 * first n_dims dims form n_dims/2 pairs rotated by
 *     angle_i = (pos * sc_i) * w_i,  w_i = freq_base^(-2i / n_dims) / ff_i
 * as (x0, x1) -> m (x0 cos - x1 sin, x0 sin + x1 cos), where ff_i are the
 * optional freq_factors (src[2]), sc_i is freq_scale, or with YaRN
 * freq_scale (1 - r_i) + r_i (r_i the ramp of include/candle/ops.h, which
 * blends the interpolated and extrapolated angles the same way), and m the
 * magnitude. Pair i is (2i, 2i+1) in the interleaved mode and (i, i + n_dims/2)
 * in the half mode; dims from n_dims on pass through. iparams: mode, n_dims,
 * pos_offset; fparams: freq_base, freq_scale, ext_factor, m, ramp low, ramp
 * high (resolved by the op builder); src[1]: optional positions [S]. */
#include <math.h>

#include "../cpu-impl.h"

static double row_position(const candle_tensor *dst, int64_t s) {
    const candle_tensor *pos = dst->src[1];
    if (!pos) return (double)(dst->iparams[2] + s);
    return (double)cdl_load_i64(pos->dtype, tensor_ptr(pos) + s * pos->stride[0]);
}

void cpu_rope_pair(const candle_tensor *dst, int64_t i, double *w, double *sc) {
    const candle_tensor *ff = dst->src[2];
    double n_dims = (double)dst->iparams[1], ext = dst->fparams[2];
    *w = pow(dst->fparams[0], -2.0 * (double)i / n_dims);
    if (ff) *w /= ((const float *)tensor_ptr(ff))[i];
    *sc = dst->fparams[1];
    if (ext != 0) {
        double lo = dst->fparams[4], hi = dst->fparams[5];
        double y = ((double)i - lo) / fmax(0.001, hi - lo);
        double r = (1.0 - fmin(1.0, fmax(0.0, y))) * ext;
        *sc = *sc * (1.0 - r) + r;
    }
}

static void rope_row(const candle_tensor *dst, const char *xp, char *dp, double pos) {
    const candle_tensor *x = dst->src[0];
    int r = dst->rank;
    int64_t D = dst->shape[r - 1], n_dims = dst->iparams[1], half = n_dims / 2;
    int64_t xs = x->stride[r - 1], ds = dst->stride[r - 1];
    bool interleaved = dst->iparams[0] == CANDLE_ROPE_INTERLEAVED;
    double m = dst->fparams[3];
    for (int64_t i = 0; i < half; i++) {
        double w, sc;
        cpu_rope_pair(dst, i, &w, &sc);
        double angle = pos * sc * w;
        double c = cos(angle) * m, s = sin(angle) * m;
        int64_t k0 = interleaved ? 2 * i : i, k1 = interleaved ? 2 * i + 1 : i + half;
        double x0 = cdl_load_f64(x->dtype, xp + k0 * xs);
        double x1 = cdl_load_f64(x->dtype, xp + k1 * xs);
        cdl_store_f64(dst->dtype, dp + k0 * ds, x0 * c - x1 * s);
        cdl_store_f64(dst->dtype, dp + k1 * ds, x0 * s + x1 * c);
    }
    for (int64_t k = n_dims; k < D; k++)
        cdl_store_f64(dst->dtype, dp + k * ds, cdl_load_f64(x->dtype, xp + k * xs));
}

candle_status cpu_ref_rope(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *x = dst->src[0];
    int r = dst->rank;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *xp = tensor_ptr(x) + nd_offset(r - 1, idx, x->stride);
        char *dp = tensor_ptr(dst) + nd_offset(r - 1, idx, dst->stride);
        rope_row(dst, xp, dp, row_position(dst, idx[r - 3]));
    } while (nd_next(r - 1, dst->shape, idx));
    return CANDLE_OK;
}
