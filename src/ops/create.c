/* Creation ops: nodes with no inputs (arange, full, rand). Their values are
 * written by the kernel when the node is computed, so a graph can hold them
 * like any other node. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ops-impl.h"

static bool check_plain_dtype(candle_ctx *ctx, const char *op, candle_dtype dtype, bool float_only) {
    if ((unsigned)dtype >= CANDLE_DTYPE_COUNT) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
        return false;
    }
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    if (!tr->is_quantized && (!float_only || tr->is_float)) return true;
    cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: dtype %s not supported (%s)", op, tr->name,
                     float_only ? "needs f32, f16 or bf16" : "needs a plain dtype");
    return false;
}

candle_tensor *candle_arange(candle_ctx *ctx, candle_dtype dtype, double start, double end,
                             double step) {
    if (!ctx || !check_plain_dtype(ctx, "arange", dtype, false)) return NULL;
    if (!isfinite(start) || !isfinite(end) || !isfinite(step) || step == 0.0) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "arange: invalid range %g..%g step %g",
                         start, end, step);
        return NULL;
    }
    if ((end - start) * step < 0) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         "arange: step %g has the wrong sign for %g..%g", step, start, end);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > (double)(INT64_C(1) << 40)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "arange: %g..%g step %g has too many elements",
                         start, end, step);
        return NULL;
    }
    int64_t n = (int64_t)count;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_ARANGE, dtype, 1, &n);
    if (!t) return NULL;
    t->fparams[0] = start;
    t->fparams[1] = step;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_full(candle_ctx *ctx, candle_dtype dtype, int rank, const int64_t *shape,
                           double value) {
    if (!ctx || !check_plain_dtype(ctx, "full", dtype, false)) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_FILL, dtype, rank, shape);
    if (!t) return NULL;
    t->fparams[0] = value;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_zeros(candle_ctx *ctx, candle_dtype dtype, int rank, const int64_t *shape) {
    return candle_full(ctx, dtype, rank, shape, 0.0);
}

candle_tensor *candle_ones(candle_ctx *ctx, candle_dtype dtype, int rank, const int64_t *shape) {
    return candle_full(ctx, dtype, rank, shape, 1.0);
}

static candle_tensor *rand_node(candle_ctx *ctx, const char *op, candle_dtype dtype, int rank,
                                const int64_t *shape, uint64_t seed, int dist, double a, double b) {
    if (!ctx || !check_plain_dtype(ctx, op, dtype, true)) return NULL;
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_RAND, dtype, rank, shape);
    if (!t) return NULL;
    t->iparams[0] = (int64_t)seed; /* the kernel reads the bits back as uint64_t */
    t->iparams[1] = dist;
    t->fparams[0] = a;
    t->fparams[1] = b;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_rand(candle_ctx *ctx, candle_dtype dtype, int rank, const int64_t *shape,
                           uint64_t seed, double lo, double hi) {
    if (ctx && !(isfinite(lo) && isfinite(hi) && lo < hi)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "rand: invalid range [%g, %g)", lo, hi);
        return NULL;
    }
    return rand_node(ctx, "rand", dtype, rank, shape, seed, 0, lo, hi);
}

candle_tensor *candle_randn(candle_ctx *ctx, candle_dtype dtype, int rank, const int64_t *shape,
                            uint64_t seed, double mean, double std) {
    if (ctx && !(isfinite(mean) && isfinite(std) && std >= 0)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "randn: invalid mean %g std %g", mean, std);
        return NULL;
    }
    return rand_node(ctx, "randn", dtype, rank, shape, seed, 1, mean, std);
}
