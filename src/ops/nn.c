/* Normalisation over the last dim, and rotary position embedding. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ops-impl.h"

/* weight/bias: NULL, or [D] of x's dtype or f32 (norm weights are often kept
 * in f32 beside half-precision activations). */
static bool check_affine(candle_ctx *ctx, const char *op, const char *what,
                         const candle_tensor *x, const candle_tensor *p) {
    if (!p) return true;
    char sx[128], sp[128];
    if (!op_check_device(ctx, op, x, p)) return false;
    if (p->dtype != x->dtype && p->dtype != CANDLE_DTYPE_F32) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: dtype mismatch: input %s %s %s (want %s%s)", op,
                         candle_dtype_name(x->dtype), what, candle_dtype_name(p->dtype),
                         candle_dtype_name(x->dtype), x->dtype == CANDLE_DTYPE_F32 ? "" : " or f32");
        return false;
    }
    if (p->rank != 1 || p->shape[0] != x->shape[x->rank - 1]) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: shape mismatch: input %s %s %s (want [%" PRId64 "])",
                         op, candle_shape_str(x->rank, x->shape, sx, sizeof sx), what,
                         candle_shape_str(p->rank, p->shape, sp, sizeof sp), x->shape[x->rank - 1]);
        return false;
    }
    return true;
}

static candle_tensor *norm_node(candle_ctx *ctx, candle_op op, candle_tensor *x,
                                candle_tensor *weight, candle_tensor *bias, double eps) {
    const char *name = candle_op_name(op);
    if (!op_check_plain(ctx, name, x, true)) return NULL;
    if (x->rank < 1) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "%s: input must be at least 1-D", name);
        return NULL;
    }
    if (!(eps >= 0) || isinf(eps)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", name, eps);
        return NULL;
    }
    if (!check_affine(ctx, name, "weight", x, weight) || !check_affine(ctx, name, "bias", x, bias))
        return NULL;
    candle_tensor *t = cdl_node_new(ctx, op, x->dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = weight; /* NULL slots are skipped by the graph */
    t->src[2] = bias;
    t->n_src = op == CANDLE_OP_LAYER_NORM ? 3 : 2;
    t->fparams[0] = eps;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_rms_norm(candle_ctx *ctx, candle_tensor *x, candle_tensor *weight,
                               double eps) {
    OP_CHECK_IN(x);
    return norm_node(ctx, CANDLE_OP_RMS_NORM, x, weight, NULL, eps);
}

candle_tensor *candle_layer_norm(candle_ctx *ctx, candle_tensor *x, candle_tensor *weight,
                                 candle_tensor *bias, double eps) {
    OP_CHECK_IN(x);
    return norm_node(ctx, CANDLE_OP_LAYER_NORM, x, weight, bias, eps);
}

static bool check_rope_params(candle_ctx *ctx, const candle_tensor *x, const candle_rope_params *p,
                              int64_t *n_dims) {
    int64_t D = x->shape[x->rank - 1];
    if (!p) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "rope: params are NULL");
        return false;
    }
    if (p->mode != CANDLE_ROPE_INTERLEAVED && p->mode != CANDLE_ROPE_HALF) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "rope: unknown mode %d", (int)p->mode);
        return false;
    }
    *n_dims = p->n_dims ? p->n_dims : D;
    if (*n_dims < 0 || *n_dims > D || *n_dims % 2) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "rope: n_dims %d must be even and at most head dim %" PRId64, p->n_dims, D);
        return false;
    }
    if (!(p->freq_base > 0) || isinf(p->freq_base) || !isfinite(p->freq_scale)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "rope: freq_base %g / freq_scale %g invalid",
                         p->freq_base, p->freq_scale);
        return false;
    }
    return true;
}

static bool check_positions(candle_ctx *ctx, const candle_tensor *x, const candle_tensor *pos) {
    if (!pos) return true;
    char sx[128], sp[128];
    if (!op_check_device(ctx, "rope", x, pos)) return false;
    if (pos->dtype != CANDLE_DTYPE_I32 && pos->dtype != CANDLE_DTYPE_I64) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "rope: positions must be i32 or i64, got %s",
                         candle_dtype_name(pos->dtype));
        return false;
    }
    int64_t S = x->shape[x->rank - 3];
    if (pos->rank != 1 || pos->shape[0] != S) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "rope: shape mismatch: input %s positions %s (want [%" PRId64 "])",
                         candle_shape_str(x->rank, x->shape, sx, sizeof sx),
                         candle_shape_str(pos->rank, pos->shape, sp, sizeof sp), S);
        return false;
    }
    return true;
}

/* freq_factors: f32 [n_dims / 2], contiguous, on x's device. */
static bool check_freq_factors(candle_ctx *ctx, const candle_tensor *x, const candle_tensor *ff,
                               int64_t n_dims) {
    if (!ff) return true;
    char sf[128];
    if (!op_check_device(ctx, "rope", x, ff)) return false;
    if (ff->dtype != CANDLE_DTYPE_F32 || ff->rank != 1 || ff->shape[0] != n_dims / 2 ||
        !candle_tensor_is_contiguous(ff)) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "rope: freq_factors must be contiguous f32 [%" PRId64 "], got %s %s",
                         n_dims / 2, candle_dtype_name(ff->dtype),
                         candle_shape_str(ff->rank, ff->shape, sf, sizeof sf));
        return false;
    }
    return true;
}

/* YaRN's ramp ends (pair indices), as ggml_rope_yarn_corr_dims makes them
 * (in double here). */
static double yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, double rot, double base) {
    return (double)n_dims * log((double)n_ctx_orig / (rot * 2 * 3.14159265358979323846)) / (2 * log(base));
}

static bool check_yarn(candle_ctx *ctx, const candle_rope_params *p, int64_t n_dims, double *out) {
    double attn = p->attn_factor != 0 ? p->attn_factor : 1.0;
    out[0] = p->ext_factor;
    out[1] = attn;
    out[2] = out[3] = 0;
    if (!isfinite(p->ext_factor) || !isfinite(attn) || !isfinite(p->beta_fast) ||
        !isfinite(p->beta_slow)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "rope: ext_factor %g, attn_factor %g, "
                         "beta_fast %g, beta_slow %g must be finite",
                         p->ext_factor, p->attn_factor, p->beta_fast, p->beta_slow);
        return false;
    }
    if (p->ext_factor == 0) return true;
    double fast = p->beta_fast != 0 ? p->beta_fast : 32, slow = p->beta_slow != 0 ? p->beta_slow : 1;
    if (p->n_ctx_orig <= 0 || !(fast > 0) || !(slow > 0) || !(p->freq_scale > 0)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "rope: YaRN needs n_ctx_orig > 0 (got %" PRId64 "), positive betas "
                         "(%g, %g) and freq_scale (%g)", p->n_ctx_orig, fast, slow, p->freq_scale);
        return false;
    }
    out[1] = attn * (1.0 + 0.1 * log(1.0 / p->freq_scale));
    out[2] = fmax(0.0, floor(yarn_corr_dim(n_dims, p->n_ctx_orig, fast, p->freq_base)));
    out[3] = fmin((double)(n_dims - 1), ceil(yarn_corr_dim(n_dims, p->n_ctx_orig, slow, p->freq_base)));
    return true;
}

candle_tensor *candle_rope(candle_ctx *ctx, candle_tensor *x, candle_tensor *positions,
                           const candle_rope_params *p) {
    OP_CHECK_IN(x);
    if (!op_check_plain(ctx, "rope", x, true)) return NULL;
    if (x->rank < 3) {
        char sx[128];
        cdl_set_error(ctx, CANDLE_ERR_SHAPE, "rope: input %s must be [..., S, H, D]",
                         candle_shape_str(x->rank, x->shape, sx, sizeof sx));
        return NULL;
    }
    int64_t n_dims;
    double yarn[4];
    if (!check_rope_params(ctx, x, p, &n_dims) || !check_positions(ctx, x, positions) ||
        !check_freq_factors(ctx, x, p->freq_factors, n_dims) || !check_yarn(ctx, p, n_dims, yarn))
        return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_ROPE, x->dtype, x->rank, x->shape);
    if (!t) return NULL;
    t->src[0] = x;
    t->src[1] = positions;
    t->src[2] = p->freq_factors;
    t->n_src = p->freq_factors ? 3 : 2;
    t->iparams[0] = p->mode;
    t->iparams[1] = n_dims;
    t->iparams[2] = p->pos_offset;
    t->fparams[0] = p->freq_base;
    t->fparams[1] = p->freq_scale;
    /* resolved once here so every kernel reads the same numbers: ext_factor,
     * mscale (the magnitude, with YaRN's correction), the ramp's ends */
    memcpy(&t->fparams[2], yarn, sizeof yarn);
    return cdl_node_finish(ctx, t);
}
