/* Reference kernel: paged attention (see candle_paged_attention). First
 * every row's k and v are stored into the caches through its block table,
 * then each query row's scores against its visible positions are
 * materialised in double, softmaxed (row maximum subtracted) and used to
 * weight the value rows. Caches of a block type (q8_0, q4_0) are stored and
 * read a row at a time through the type's own conversions (from_f32,
 * to_f32): their elements have no address of their own. */
#include <math.h>
#include <stdlib.h>

#include "../paged-impl.h"

static double load3(const candle_tensor *t, int64_t a, int64_t b, int64_t c) {
    return cdl_load_f64(t->dtype, tensor_ptr(t) + a * t->stride[0] + b * t->stride[1] + c * t->stride[2]);
}

/* Row scratch: n elements in double, and in f32 for a block type's rows. */
typedef struct pa_row {
    double *d;
    float *f;
} pa_row;

/* t[a, b, :] (n elements) into r->d. */
static const double *load_row(const candle_tensor *t, int64_t a, int64_t b, int64_t n, const pa_row *r) {
    const char *p = tensor_ptr(t) + a * t->stride[0] + b * t->stride[1];
    if (candle_dtype_info(t->dtype)->is_quantized) {
        candle_dtype_info(t->dtype)->to_f32(p, r->f, n);
        for (int64_t e = 0; e < n; e++) r->d[e] = r->f[e];
    } else {
        for (int64_t e = 0; e < n; e++) r->d[e] = cdl_load_f64(t->dtype, p + e * t->stride[2]);
    }
    return r->d;
}

/* r->d (n elements) into t[a, b, :]; a block type's row is quantized whole. */
static void store_row3(const candle_tensor *t, int64_t a, int64_t b, int64_t n, const pa_row *r) {
    char *p = tensor_ptr(t) + a * t->stride[0] + b * t->stride[1];
    if (candle_dtype_info(t->dtype)->is_quantized) {
        for (int64_t e = 0; e < n; e++) r->f[e] = (float)r->d[e]; /* k, v: a float dtype, exact */
        candle_dtype_info(t->dtype)->from_f32(r->f, p, n);
    } else {
        for (int64_t e = 0; e < n; e++) cdl_store_f64(t->dtype, p + e * t->stride[2], r->d[e]);
    }
}

static void store3(const candle_tensor *t, int64_t a, int64_t b, int64_t c, double v) {
    cdl_store_f64(t->dtype, tensor_ptr(t) + a * t->stride[0] + b * t->stride[1] + c * t->stride[2], v);
}

/* Row i's new k and v into the cache row of its position. */
static bool store_row(const candle_tensor *dst, int64_t i, const pa_row *r) {
    const candle_tensor *k = dst->src[1], *v = dst->src[2], *kc = dst->src[3], *vc = dst->src[4];
    int64_t pos = pa_pos(dst->src[5], i), row = pa_cache_row(dst, i, pos);
    if (row < 0) return false;
    for (int64_t h = 0; h < k->shape[1]; h++) {
        load_row(k, i, h, k->shape[2], r);
        store_row3(kc, row, h, k->shape[2], r);
        load_row(v, i, h, v->shape[2], r);
        store_row3(vc, row, h, v->shape[2], r);
    }
    return true;
}

/* Output row dst[i, h, :]; sc holds pos + 1 scores, acc Dv sums. */
static bool attend(candle_tensor *dst, int64_t i, int64_t h, double *sc, double *acc, const pa_row *r) {
    const candle_tensor *q = dst->src[0], *kc = dst->src[3], *vc = dst->src[4];
    int64_t d = q->shape[2], dv = dst->shape[2], hk = h / (q->shape[1] / kc->shape[1]);
    int64_t pos = pa_pos(dst->src[5], i), j0 = pa_first(dst, pos);
    double mx = -INFINITY;
    for (int64_t j = j0; j <= pos; j++) {
        int64_t row = pa_cache_row(dst, i, j);
        if (row < 0) return false;
        const double *kr = load_row(kc, row, hk, d, r);
        double s = 0;
        for (int64_t e = 0; e < d; e++) s += load3(q, i, h, e) * kr[e];
        sc[j] = s * dst->fparams[0];
        if (sc[j] > mx) mx = sc[j];
    }
    double sum = 0;
    for (int64_t e = 0; e < dv; e++) acc[e] = 0;
    for (int64_t j = j0; j <= pos; j++) {
        double p = exp(sc[j] - mx);
        const double *vr = load_row(vc, pa_cache_row(dst, i, j), hk, dv, r);
        sum += p;
        for (int64_t e = 0; e < dv; e++) acc[e] += p * vr[e];
    }
    for (int64_t e = 0; e < dv; e++) store3(dst, i, h, e, sum > 0 ? acc[e] / sum : 0.0);
    return true;
}

candle_status cpu_ref_paged_attention(const cpu_task *task, candle_tensor *dst) {
    int64_t n = dst->shape[0], hq = dst->shape[1];
    const candle_tensor *tab = dst->src[5];
    int64_t max_keys = (tab->shape[1] - 1) * dst->iparams[0];
    int64_t width = dst->src[1]->shape[2] > dst->src[2]->shape[2] ? dst->src[1]->shape[2] : dst->src[2]->shape[2];
    double *sc = malloc(sizeof(double) * (size_t)(max_keys + 1));
    double *acc = malloc(sizeof(double) * (size_t)(dst->shape[2] + 1));
    pa_row r = {malloc(sizeof(double) * (size_t)(width + 1)), malloc(sizeof(float) * (size_t)(width + 1))};
    candle_status st = CANDLE_OK;
    if (!sc || !acc || !r.d || !r.f) st = cpu_error(task, CANDLE_ERR_OOM, "paged_attention: out of memory for a score row");
    for (int64_t i = 0; !st && i < n; i++)
        if (pa_pos(tab, i) < 0 || !store_row(dst, i, &r)) st = pa_bad_table(task, dst, i);
    for (int64_t i = 0; !st && i < n; i++)
        for (int64_t h = 0; !st && h < hq; h++)
            if (!attend(dst, i, h, sc, acc, &r)) st = pa_bad_table(task, dst, i);
    free(sc);
    free(acc);
    free(r.d);
    free(r.f);
    return st;
}
