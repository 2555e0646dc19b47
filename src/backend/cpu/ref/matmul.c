/* Reference matmul: dst [..., M, N] = a [..., M, K] x b [..., K, N], every
 * product summed in double, operands read through their strides; then
 * the bias (src[2], candle_linear) added to each row in f32.
 *
 * When b's dtype differs from a's (the weight form, see src/ops/linalg.c), b
 * is the transpose of a row-major [N, K] weight whose rows may be blocks: each
 * column of b is one weight row, dequantized whole with the dtype's to_f32.
 * Such b may have fewer batch dims than dst (aligned right) or size-1 ones. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "../cpu-impl.h"

/* Byte offset of batch index idx[0..nb) into t, whose batch dims align right
 * and broadcast where they are missing or of size 1. */
static int64_t batch_offset(const candle_tensor *t, int nb, const int64_t *idx) {
    int tb = t->rank - 2;
    int64_t off = 0;
    for (int i = 0; i < tb; i++)
        if (t->shape[i] != 1) off += idx[i + nb - tb] * t->stride[i];
    return off;
}

typedef struct mm_dims {
    int64_t M, N, K;
    int64_t a_sm, a_sk, b_sk, b_sn, d_sm, d_sn; /* byte strides */
} mm_dims;

static void mm_plain(const mm_dims *m, const candle_tensor *a, const char *pa,
                     const candle_tensor *b, const char *pb, candle_tensor *dst, char *pd) {
    for (int64_t i = 0; i < m->M; i++)
        for (int64_t j = 0; j < m->N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < m->K; k++)
                acc += cdl_load_f64(a->dtype, pa + i * m->a_sm + k * m->a_sk) *
                       cdl_load_f64(b->dtype, pb + k * m->b_sk + j * m->b_sn);
            cdl_store_f64(dst->dtype, pd + i * m->d_sm + j * m->d_sn, acc);
        }
}

/* col holds K floats: one dequantized weight row per output column. */
static void mm_weight(const mm_dims *m, const candle_tensor *a, const char *pa,
                      const candle_tensor *b, const char *pb, candle_tensor *dst, char *pd,
                      float *col) {
    candle_to_f32_fn to_f32 = candle_dtype_info(b->dtype)->to_f32;
    for (int64_t j = 0; j < m->N; j++) {
        to_f32(pb + j * m->b_sn, col, m->K);
        for (int64_t i = 0; i < m->M; i++) {
            double acc = 0;
            for (int64_t k = 0; k < m->K; k++)
                acc += cdl_load_f64(a->dtype, pa + i * m->a_sm + k * m->a_sk) * (double)col[k];
            cdl_store_f64(dst->dtype, pd + i * m->d_sm + j * m->d_sn, acc);
        }
    }
}

candle_status cpu_ref_matmul(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    int r = dst->rank, nb = r - 2;
    mm_dims m = {dst->shape[r - 2], dst->shape[r - 1], a->shape[a->rank - 1],
                 a->stride[a->rank - 2], a->stride[a->rank - 1], b->stride[b->rank - 2],
                 b->stride[b->rank - 1], dst->stride[r - 2], dst->stride[r - 1]};
    bool weight = a->dtype != b->dtype;
    if (weight && !candle_dtype_info(b->dtype)->to_f32)
        return cpu_error(task, CANDLE_ERR_UNSUPPORTED,
                         "matmul: no dequantization (to_f32) registered for %s weights",
                         candle_dtype_name(b->dtype));
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    float *col = NULL;
    if (weight && !(col = malloc(sizeof(float) * (size_t)(m.K ? m.K : 1))))
        return cpu_error(task, CANDLE_ERR_OOM, "matmul: out of memory for a weight row");
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *pa = tensor_ptr(a) + batch_offset(a, nb, idx);
        const char *pb = tensor_ptr(b) + batch_offset(b, nb, idx);
        char *pd = tensor_ptr(dst) + nd_offset(nb, idx, dst->stride);
        if (weight) mm_weight(&m, a, pa, b, pb, dst, pd, col);
        else mm_plain(&m, a, pa, b, pb, dst, pd);
    } while (nd_next(nb, dst->shape, idx));
    free(col);
    if (dst->op == CANDLE_OP_MATMUL && dst->n_src > 2 && dst->src[2] && m.N)
        cpu_matmul_bias_rows(dst, 0, candle_tensor_numel(dst) / m.N);
    return CANDLE_OK;
}

void cpu_matmul_bias_rows(candle_tensor *dst, int64_t r0, int64_t r1) {
    int64_t n = dst->shape[dst->rank - 1];
    const float *b = (const float *)tensor_ptr(dst->src[2]);
    const cpu_simd *simd = cpu_simd_get();
    for (int64_t r = r0; r < r1; r++) {
        float *row = (float *)tensor_ptr(dst) + r * n;
        simd->binary(CANDLE_OP_ADD, row, b, 1, row, n);
    }
}

/* MATMUL_GROUP_CORR: the product as MATMUL, then per output row and column
 * the correction sum_g (sum of a over group g) corr[g, n], in double. */
candle_status cpu_ref_matmul_group_corr(const cpu_task *task, candle_tensor *dst) {
    candle_status s = cpu_ref_matmul(task, dst);
    if (s || candle_tensor_numel(dst) == 0) return s;
    const candle_tensor *a = dst->src[0], *c = dst->src[2];
    int r = dst->rank;
    int64_t K = a->shape[r - 1], N = dst->shape[r - 1], G = dst->iparams[0], ng = K / G;
    double *sum = malloc((size_t)ng * sizeof *sum);
    if (!sum) return cpu_error(task, CANDLE_ERR_OOM, "matmul_group_corr: out of memory (%" PRId64 " sums)", ng);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do {
        const char *pa = tensor_ptr(a) + nd_offset(r - 1, idx, a->stride);
        char *pd = tensor_ptr(dst) + nd_offset(r - 1, idx, dst->stride);
        for (int64_t g = 0; g < ng; g++) {
            sum[g] = 0;
            for (int64_t k = g * G; k < (g + 1) * G; k++) sum[g] += cdl_load_f64(a->dtype, pa + k * a->stride[r - 1]);
        }
        for (int64_t n = 0; n < N; n++) {
            double acc = cdl_load_f64(dst->dtype, pd + n * dst->stride[r - 1]);
            for (int64_t g = 0; g < ng; g++)
                acc += sum[g] * cdl_load_f64(c->dtype, tensor_ptr(c) + g * c->stride[0] + n * c->stride[1]);
            cdl_store_f64(dst->dtype, pd + n * dst->stride[r - 1], acc);
        }
    } while (nd_next(r - 1, dst->shape, idx));
    free(sum);
    return CANDLE_OK;
}

/* Expert e's row j of a stacked weight [n_expert, rows, cols], as f32. */
static void moe_row(const candle_tensor *w, int64_t e, int64_t j, float *out) {
    const char *p = tensor_ptr(w) + e * w->stride[0] + j * w->stride[1];
    candle_dtype_info(w->dtype)->to_f32(p, out, w->shape[2]);
}

static double moe_act(int act, double g) {
    if (act == CANDLE_OP_SILU) return g / (1.0 + exp(-g));
    return 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

/* MOE_FFN, row by row and expert by expert in double, every weight row
 * dequantized whole. */
candle_status cpu_ref_moe_ffn(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0], *wt = dst->src[1], *g = dst->src[2], *u = dst->src[3],
                        *d = dst->src[4];
    int64_t n = x->shape[0], d_in = x->shape[1], ne = wt->shape[1], d_ff = g->shape[1],
            d_out = d->shape[1];
    int act = (int)dst->iparams[0];
    size_t nrow = (size_t)(d_in > d_ff ? d_in : d_ff);
    float *row = malloc(nrow * sizeof *row), *xr = malloc((size_t)d_in * sizeof *xr);
    double *h = malloc((size_t)d_ff * sizeof *h), *acc = malloc((size_t)d_out * sizeof *acc);
    if (!row || !xr || !h || !acc) {
        free(row), free(xr), free(h), free(acc);
        return cpu_error(t, CANDLE_ERR_OOM, "moe_ffn: out of memory");
    }
    for (int64_t r = 0; r < n; r++) {
        for (int64_t k = 0; k < d_in; k++)
            xr[k] = (float)cdl_load_f64(x->dtype, tensor_ptr(x) + r * x->stride[0] + k * x->stride[1]);
        for (int64_t o = 0; o < d_out; o++) acc[o] = 0;
        for (int64_t e = 0; e < ne; e++) {
            double w = cdl_load_f64(wt->dtype, tensor_ptr(wt) + r * wt->stride[0] + e * wt->stride[1]);
            if (w == 0) continue;
            for (int64_t j = 0; j < d_ff; j++) {
                double sg = 0, su = 0;
                moe_row(g, e, j, row);
                for (int64_t k = 0; k < d_in; k++) sg += (double)row[k] * xr[k];
                moe_row(u, e, j, row);
                for (int64_t k = 0; k < d_in; k++) su += (double)row[k] * xr[k];
                h[j] = moe_act(act, sg) * su;
            }
            for (int64_t o = 0; o < d_out; o++) {
                double s = 0;
                moe_row(d, e, o, row);
                for (int64_t j = 0; j < d_ff; j++) s += (double)row[j] * h[j];
                acc[o] += w * s;
            }
        }
        for (int64_t o = 0; o < d_out; o++)
            cdl_store_f64(dst->dtype, tensor_ptr(dst) + r * dst->stride[0] + o * dst->stride[1], acc[o]);
    }
    free(row), free(xr), free(h), free(acc);
    return CANDLE_OK;
}
