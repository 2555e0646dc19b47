/* Reference kernels for elementwise ops and copies: one element at a time,
 * in double precision (int64 for integer dtypes), on any strided layout. */
#include <math.h>
#include <stdlib.h>

#include "../cpu-impl.h"

candle_status cpu_ref_copy(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *src = dst->src[0];
    const candle_dtype_traits *ts = candle_dtype_info(src->dtype), *td = candle_dtype_info(dst->dtype);
    char *d = tensor_ptr(dst);
    const char *s = tensor_ptr(src);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    if (ts->is_quantized || td->is_quantized) {
        /* Row at a time through f32; rows are contiguous (checked at build). */
        int64_t row = dst->rank ? dst->shape[dst->rank - 1] : 1;
        float *buf = malloc(sizeof(float) * (size_t)(row ? row : 1));
        if (!buf) return cpu_error(task, CANDLE_ERR_OOM, "copy: out of memory for a row buffer");
        int r = dst->rank ? dst->rank - 1 : 0;
        int64_t n_rows = row ? candle_tensor_numel(dst) / row : 0;
        for (int64_t i = 0; i < n_rows; i++) {
            const char *sp = s + nd_offset(r, idx, src->stride);
            char *dp = d + nd_offset(r, idx, dst->stride);
            if (ts->is_quantized) ts->to_f32(sp, buf, row);
            else
                for (int64_t j = 0; j < row; j++)
                    buf[j] = (float)cdl_load_f64(src->dtype, sp + j * src->stride[r]);
            if (td->is_quantized) td->from_f32(buf, dp, row);
            else
                for (int64_t j = 0; j < row; j++)
                    cdl_store_f64(dst->dtype, dp + j * dst->stride[r], buf[j]);
            nd_next(r, dst->shape, idx);
        }
        free(buf);
        return CANDLE_OK;
    }
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    /* Integer sources go through int64 so that big values round once. */
    bool ints = ts->is_int;
    do {
        const char *sp = s + nd_offset(src->rank, idx, src->stride);
        char *dp = d + nd_offset(dst->rank, idx, dst->stride);
        if (ints) cdl_store_i64(dst->dtype, dp, cdl_load_i64(src->dtype, sp));
        else cdl_store_f64(dst->dtype, dp, cdl_load_f64(src->dtype, sp));
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}

static double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double unary_f64(candle_op op, double x, const double *p) {
    switch (op) {
    case CANDLE_OP_NEG: return -x;
    case CANDLE_OP_ABS: return fabs(x);
    case CANDLE_OP_EXP: return exp(x);
    case CANDLE_OP_LOG: return log(x);
    case CANDLE_OP_SQRT: return sqrt(x);
    case CANDLE_OP_RSQRT: return 1.0 / sqrt(x);
    case CANDLE_OP_SIN: return sin(x);
    case CANDLE_OP_COS: return cos(x);
    case CANDLE_OP_TANH: return tanh(x);
    case CANDLE_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CANDLE_OP_RELU: return x > 0 ? x : 0.0;
    case CANDLE_OP_SILU: return x / (1.0 + exp(-x));
    case CANDLE_OP_GELU_ERF: return gelu_erf(x);
    case CANDLE_OP_GELU_TANH: return gelu_tanh(x);
    case CANDLE_OP_AFFINE: return x * p[0] + p[1];
    case CANDLE_OP_CLAMP: return x < p[0] ? p[0] : (x > p[1] ? p[1] : x);
    default: return NAN;
    }
}

static int64_t unary_i64(candle_op op, int64_t x, const double *p) {
    switch (op) {
    case CANDLE_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case CANDLE_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case CANDLE_OP_RELU: return x > 0 ? x : 0;
    default: return cdl_sat_i64(unary_f64(op, (double)x, p), -9.2e18, 9.2e18);
    }
}

candle_status cpu_ref_unary(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *src = dst->src[0];
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    bool ints = candle_dtype_info(dst->dtype)->is_int;
    candle_op op = (candle_op)dst->op;
    char *d = tensor_ptr(dst);
    const char *s = tensor_ptr(src);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *sp = s + nd_offset(src->rank, idx, src->stride);
        char *dp = d + nd_offset(dst->rank, idx, dst->stride);
        if (ints) cdl_store_i64(dst->dtype, dp, unary_i64(op, cdl_load_i64(src->dtype, sp), dst->fparams));
        else cdl_store_f64(dst->dtype, dp, unary_f64(op, cdl_load_f64(src->dtype, sp), dst->fparams));
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}

static double binary_f64(candle_op op, double a, double b) {
    switch (op) {
    case CANDLE_OP_ADD: return a + b;
    case CANDLE_OP_SUB: return a - b;
    case CANDLE_OP_MUL: return a * b;
    case CANDLE_OP_DIV: return a / b;
    case CANDLE_OP_MAXIMUM: return (a > b || isnan(a)) ? a : b;
    case CANDLE_OP_MINIMUM: return (a < b || isnan(a)) ? a : b;
    case CANDLE_OP_POW: return pow(a, b);
    case CANDLE_OP_EQ: return a == b;
    case CANDLE_OP_NE: return a != b;
    case CANDLE_OP_LT: return a < b;
    case CANDLE_OP_LE: return a <= b;
    case CANDLE_OP_GT: return a > b;
    case CANDLE_OP_GE: return a >= b;
    default: return NAN;
    }
}

/* Integer arithmetic wraps (two's complement) like C unsigned math and
 * PyTorch; integer division truncates, and x / 0 gives 0 instead of a trap. */
static int64_t binary_i64(candle_op op, int64_t a, int64_t b) {
    switch (op) {
    case CANDLE_OP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case CANDLE_OP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case CANDLE_OP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case CANDLE_OP_DIV: return (b == 0 || (b == -1 && a == INT64_MIN)) ? 0 : a / b;
    case CANDLE_OP_MAXIMUM: return a > b ? a : b;
    case CANDLE_OP_MINIMUM: return a < b ? a : b;
    case CANDLE_OP_EQ: return a == b;
    case CANDLE_OP_NE: return a != b;
    case CANDLE_OP_LT: return a < b;
    case CANDLE_OP_LE: return a <= b;
    case CANDLE_OP_GT: return a > b;
    case CANDLE_OP_GE: return a >= b;
    default: return 0;
    }
}

candle_status cpu_ref_binary(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    bool ints = candle_dtype_info(a->dtype)->is_int;
    candle_op op = (candle_op)dst->op;
    char *d = tensor_ptr(dst);
    const char *pa = tensor_ptr(a), *pb = tensor_ptr(b);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *ap = pa + nd_offset(a->rank, idx, a->stride);
        const char *bp = pb + nd_offset(b->rank, idx, b->stride);
        char *dp = d + nd_offset(dst->rank, idx, dst->stride);
        if (ints)
            cdl_store_i64(dst->dtype, dp,
                             binary_i64(op, cdl_load_i64(a->dtype, ap), cdl_load_i64(b->dtype, bp)));
        else
            cdl_store_f64(dst->dtype, dp,
                             binary_f64(op, cdl_load_f64(a->dtype, ap), cdl_load_f64(b->dtype, bp)));
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}

candle_status cpu_ref_where(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    const candle_tensor *c = dst->src[0], *a = dst->src[1], *b = dst->src[2];
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    size_t esz = candle_dtype_info(dst->dtype)->type_size;
    char *d = tensor_ptr(dst);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        bool cv = *(const uint8_t *)(tensor_ptr(c) + nd_offset(c->rank, idx, c->stride)) != 0;
        const candle_tensor *s = cv ? a : b;
        memcpy(d + nd_offset(dst->rank, idx, dst->stride),
               tensor_ptr(s) + nd_offset(s->rank, idx, s->stride), esz);
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}
