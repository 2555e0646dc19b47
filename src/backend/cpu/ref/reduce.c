/* Reference kernels for reductions over one dim and (log-)softmax: each
 * output element walks its line of the input along the reduced dim, in
 * double precision (int64 for integer inputs), on any strided layout. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

/* Element a ranks above element b of a line: the larger number, of equal
 * ones the lower index; NaN below every number. */
static bool ranks_above(double a, int64_t ia, double b, int64_t ib) {
    if (a != a) return false;
    return b != b || a > b || (a == b && ia < ib);
}

/* Per line, the k best by k passes (k is a router's 1..8 of tens of
 * experts): each keeps the best element not yet kept. */
candle_status cpu_ref_topk_mask(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *src = dst->src[0];
    int d = (int)dst->iparams[0];
    int64_t n = src->shape[d], k = dst->iparams[1] < n ? dst->iparams[1] : n;
    double fill = dst->fparams[0];
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    bool *kept = malloc((size_t)n * sizeof *kept);
    if (!kept)
        return cpu_error(task, CANDLE_ERR_OOM, "topk_mask: out of memory for a line of %lld", (long long)n);
    int64_t lines[CANDLE_MAX_RANK], idx[CANDLE_MAX_RANK] = {0};
    for (int i = 0; i < dst->rank; i++) lines[i] = i == d ? 1 : dst->shape[i];
    do {
        line l = {tensor_ptr(src) + nd_offset(src->rank, idx, src->stride), n, src->stride[d], src->dtype};
        char *dp = tensor_ptr(dst) + nd_offset(dst->rank, idx, dst->stride);
        memset(kept, 0, (size_t)n * sizeof *kept);
        for (int64_t r = 0; r < k; r++) {
            int64_t best = -1;
            for (int64_t j = 0; j < n; j++)
                if (!kept[j] && (best < 0 || ranks_above(line_f64(&l, j), j, line_f64(&l, best), best))) best = j;
            kept[best] = true;
        }
        for (int64_t j = 0; j < n; j++) cdl_store_f64(dst->dtype, dp + j * dst->stride[d], kept[j] ? line_f64(&l, j) : fill);
    } while (nd_next(dst->rank, lines, idx));
    free(kept);
    return CANDLE_OK;
}
