/* Reference kernel: scaled dot-product attention. One query row at a time:
 * its scores against every key are materialised in double, then a softmax
 * that subtracts the row maximum (so large scores do not overflow exp), then
 * the weighted sum of value rows. Keys and values of a block type (a
 * quantized KV cache) are converted a row at a time: their elements have
 * no byte address of their own. */
#include <math.h>
#include <stdlib.h>

#include "../cpu-impl.h"

typedef struct attn_args {
    const candle_tensor *q;    /* [B, Hq, Sq, D] */
    const candle_tensor *k;    /* [B, Hkv, Skv, D] */
    const candle_tensor *v;    /* [B, Hkv, Skv, Dv] */
    const candle_tensor *mask; /* NULL or expanded to [B, Hq, Sq, Skv] */
    double scale;
    bool causal;
    double *scores; /* [Skv] */
    double *acc;    /* [Dv] */
    float *row;     /* [max(D, Dv)]: one converted k or v row of a block type */
} attn_args;

static double load4(const candle_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return cdl_load_f64(t->dtype, tensor_ptr(t) + a * t->stride[0] + b * t->stride[1] +
                                         c * t->stride[2] + d * t->stride[3]);
}

/* Element e of row (a, b, c) of k or v: rows of a block type are converted
 * into `row` when e is 0 (the callers read a row's elements in order). */
static double kv_at(const candle_tensor *t, int64_t a, int64_t b, int64_t c, int64_t e, float *row) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    if (!tr->is_quantized) return load4(t, a, b, c, e);
    if (e == 0) tr->to_f32(tensor_ptr(t) + a * t->stride[0] + b * t->stride[1] + c * t->stride[2], row, t->shape[3]);
    return row[e];
}

/* Output row dst[b, h, i, :]; kv head hk serves query head h. */
static void attend_row(const attn_args *a, candle_tensor *dst, int64_t b, int64_t h, int64_t hk,
                       int64_t i) {
    int64_t skv = a->k->shape[2], d = a->q->shape[3], dv = a->v->shape[3];
    /* Causal: query i sits at absolute position skv - sq + i. */
    int64_t last = a->causal ? skv - a->q->shape[2] + i : skv - 1;
    double mx = -INFINITY;
    for (int64_t j = 0; j <= last; j++) {
        double s = 0;
        for (int64_t e = 0; e < d; e++) s += load4(a->q, b, h, i, e) * kv_at(a->k, b, hk, j, e, a->row);
        s *= a->scale;
        if (a->mask) s += load4(a->mask, b, h, i, j);
        a->scores[j] = s;
        if (s > mx) mx = s;
    }
    for (int64_t e = 0; e < dv; e++) a->acc[e] = 0;
    double sum = 0;
    if (mx > -INFINITY) { /* else no key is visible: the row stays zero */
        for (int64_t j = 0; j <= last; j++) {
            double p = exp(a->scores[j] - mx);
            sum += p;
            for (int64_t e = 0; e < dv; e++) a->acc[e] += p * kv_at(a->v, b, hk, j, e, a->row);
        }
    }
    char *out = tensor_ptr(dst) + b * dst->stride[0] + h * dst->stride[1] + i * dst->stride[2];
    for (int64_t e = 0; e < dv; e++)
        cdl_store_f64(dst->dtype, out + e * dst->stride[3], sum > 0 ? a->acc[e] / sum : 0.0);
}

candle_status cpu_ref_attention(const cpu_task *task, candle_tensor *dst) {
    attn_args a = {dst->src[0], dst->src[1], dst->src[2], dst->n_src > 3 ? dst->src[3] : NULL,
                   dst->fparams[0], dst->iparams[0] != 0, NULL, NULL, NULL};
    int64_t nb = a.q->shape[0], hq = a.q->shape[1], sq = a.q->shape[2];
    int64_t group = hq / a.k->shape[1];
    a.scores = malloc(sizeof(double) * (size_t)(a.k->shape[2] + 1));
    a.acc = malloc(sizeof(double) * (size_t)(a.v->shape[3] + 1));
    int64_t width = a.k->shape[3] > a.v->shape[3] ? a.k->shape[3] : a.v->shape[3];
    a.row = malloc(sizeof(float) * (size_t)(width + 1));
    if (!a.scores || !a.acc || !a.row) {
        free(a.scores);
        free(a.acc);
        free(a.row);
        return cpu_error(task, CANDLE_ERR_OOM, "attention: out of memory for a score row");
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < hq; h++)
            for (int64_t i = 0; i < sq; i++) attend_row(&a, dst, b, h, h / group, i);
    free(a.scores);
    free(a.acc);
    free(a.row);
    return CANDLE_OK;
}
