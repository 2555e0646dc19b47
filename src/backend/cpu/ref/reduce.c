/* Reference kernels for reductions over one dim and (log-)softmax: each
 * output element walks its line of the input along the reduced dim, in
 * double precision (int64 for integer inputs), on any strided layout. */
#include <math.h>

#include "../cpu-impl.h"

/* A line of n elements starting at p, stride bytes apart. */
typedef struct line {
    const char *p;
    int64_t n, stride;
    candle_dtype dtype;
} line;

static double line_f64(const line *l, int64_t k) { return cdl_load_f64(l->dtype, l->p + k * l->stride); }
static int64_t line_i64(const line *l, int64_t k) { return cdl_load_i64(l->dtype, l->p + k * l->stride); }

/* NaN compares as the largest value for max/argmax and the smallest for min,
 * so NaN propagates and argmax finds the first NaN, as in PyTorch. */
static bool better_f64(candle_op op, double v, double best) {
    if (isnan(best)) return false;
    if (isnan(v)) return true;
    return op == CANDLE_OP_MIN ? v < best : v > best;
}

static double reduce_f64(candle_op op, const line *l) {
    if (op == CANDLE_OP_SUM || op == CANDLE_OP_MEAN) {
        double acc = 0;
        for (int64_t k = 0; k < l->n; k++) acc += line_f64(l, k);
        return op == CANDLE_OP_MEAN ? acc / (double)l->n : acc;
    }
    int64_t arg = 0;
    double best = line_f64(l, 0);
    for (int64_t k = 1; k < l->n; k++) {
        double v = line_f64(l, k);
        if (better_f64(op, v, best)) {
            best = v;
            arg = k;
        }
    }
    return op == CANDLE_OP_ARGMAX ? (double)arg : best;
}

static int64_t reduce_i64(candle_op op, const line *l) {
    if (op == CANDLE_OP_SUM) {
        uint64_t acc = 0; /* wraps like int64 in PyTorch, without UB */
        for (int64_t k = 0; k < l->n; k++) acc += (uint64_t)line_i64(l, k);
        return (int64_t)acc;
    }
    int64_t arg = 0, best = line_i64(l, 0);
    for (int64_t k = 1; k < l->n; k++) {
        int64_t v = line_i64(l, k);
        if (op == CANDLE_OP_MIN ? v < best : v > best) {
            best = v;
            arg = k;
        }
    }
    return op == CANDLE_OP_ARGMAX ? arg : best;
}

candle_status cpu_ref_reduce(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *src = dst->src[0];
    int d = (int)dst->iparams[0];
    candle_op op = (candle_op)dst->op;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    bool ints = candle_dtype_info(src->dtype)->is_int;
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        line l = {tensor_ptr(src) + nd_offset(src->rank, idx, src->stride), src->shape[d],
                  src->stride[d], src->dtype};
        char *dp = tensor_ptr(dst) + nd_offset(dst->rank, idx, dst->stride);
        if (ints || op == CANDLE_OP_ARGMAX)
            cdl_store_i64(dst->dtype, dp, ints ? reduce_i64(op, &l) : (int64_t)reduce_f64(op, &l));
        else
            cdl_store_f64(dst->dtype, dp, reduce_f64(op, &l));
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}

/* Subtracting the line's max keeps exp() in range; a line of -inf gives NaN
 * as in PyTorch. */
candle_status cpu_ref_softmax(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *src = dst->src[0];
    int d = (int)dst->iparams[0];
    bool log_out = dst->op == CANDLE_OP_LOG_SOFTMAX;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    int64_t lines[CANDLE_MAX_RANK], idx[CANDLE_MAX_RANK] = {0};
    for (int i = 0; i < dst->rank; i++) lines[i] = i == d ? 1 : dst->shape[i];
    do {
        line l = {tensor_ptr(src) + nd_offset(src->rank, idx, src->stride), src->shape[d],
                  src->stride[d], src->dtype};
        char *dp = tensor_ptr(dst) + nd_offset(dst->rank, idx, dst->stride);
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < l.n; k++) mx = fmax(mx, line_f64(&l, k));
        for (int64_t k = 0; k < l.n; k++) sum += exp(line_f64(&l, k) - mx);
        double lse = log(sum);
        for (int64_t k = 0; k < l.n; k++) {
            double z = line_f64(&l, k) - mx;
            cdl_store_f64(dst->dtype, dp + k * dst->stride[d], log_out ? z - lse : exp(z) / sum);
        }
    } while (nd_next(dst->rank, lines, idx));
    return CANDLE_OK;
}
