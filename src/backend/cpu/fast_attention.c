/* Flash attention on the CPU for f32 q/k/v (the node of candle_attention).
 *
 * Each query row walks the keys in tiles of ATTN_TILE: its scores for one
 * tile are computed, exponentiated against the running maximum, and folded
 * into a running sum and output accumulator (online softmax: when the
 * maximum grows, the old sum and accumulator are rescaled by exp(old - new)).
 * Memory is O(tile + Dv) per thread; no [Sq, Skv] score matrix exists.
 * Grouped-query heads read kv head h / (Hq / Hkv); causal rows stop at their
 * absolute position Skv - Sq + i. Threads split the B * Hq * Sq rows. A row
 * that sees no key outputs zeros, as the reference does. f16/bf16 q, k, v
 * (and output) are converted a row at a time into f32 scratch. */
#include <math.h>
#include <string.h>

#include "fast-impl.h"

#define ATTN_TILE 64

static bool is_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

static bool rows_ok(const candle_tensor *t) {
    size_t esz = t ? candle_dtype_info(t->dtype)->type_size : 0;
    return t && is_float(t->dtype) && t->rank == 4 && (t->stride[3] == (int64_t)esz || t->shape[3] == 1);
}

static bool match_attn(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_ATTENTION || !is_float(dst->dtype) || !candle_tensor_is_contiguous(dst))
        return false;
    const candle_tensor *mask = dst->n_src > 3 ? dst->src[3] : NULL;
    return rows_ok(dst->src[0]) && rows_ok(dst->src[1]) && rows_ok(dst->src[2]) &&
           (!mask || (is_float(mask->dtype) && mask->rank == 4));
}

/* Per thread: score tile, accumulator [Dv], and f32 copies of the q row
 * [D] and of one k [D] and v [Dv] row (for half-precision inputs). */
static size_t attn_thread_bytes(const candle_tensor *dst) {
    int64_t D = dst->src[0]->shape[3], Dv = dst->shape[3];
    return ((size_t)(ATTN_TILE + 2 * Dv + 2 * D) * sizeof(float) + 63) & ~(size_t)63;
}

static void plan_attn(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    const candle_tensor *k = dst->src[1];
    double work = (double)candle_tensor_numel(dst) * (double)k->shape[2];
    p->nth = cpu_tasks_for(work, 1e5, n_threads, 4);
    p->wsize = 64 + (size_t)n_threads * attn_thread_bytes(dst);
}

typedef struct attn_row {
    const float *q;
    const char *k, *v, *mask; /* k, v: rows of head hk; mask: row i or NULL */
    int64_t sk, sv, sm;       /* byte strides between keys / mask entries */
    int64_t n_keys, D, Dv;
    candle_dtype kv_dtype, mask_dtype;
    float scale;
    float *kbuf, *vbuf; /* f32 copies of one k / v row when kv are not f32 */
} attn_row;

static const float *kv_row(const cpu_simd *simd, const attn_row *r, const char *p, int64_t n, float *buf) {
    if (r->kv_dtype == CANDLE_DTYPE_F32) return (const float *)p;
    simd->to_f32(r->kv_dtype, p, buf, n);
    return buf;
}

/* One tile of keys [j0, j1) folded into (m, l, acc). */
static void fold_tile(const cpu_simd *simd, const attn_row *r, int64_t j0, int64_t j1, float *s,
                      float *m, float *l, float *acc) {
    float tmax = -INFINITY;
    for (int64_t j = j0; j < j1; j++) {
        float v = simd->dot(r->q, kv_row(simd, r, r->k + j * r->sk, r->D, r->kbuf), r->D) * r->scale;
        if (r->mask) v += (float)candle_load_f64(r->mask_dtype, r->mask + j * r->sm);
        s[j - j0] = v;
        tmax = v > tmax ? v : tmax;
    }
    if (!(tmax > -INFINITY)) return; /* every key of the tile masked (or NaN max) */
    float m_new = tmax > *m ? tmax : *m;
    if (m_new > *m) {
        float corr = expf(*m - m_new); /* 0 on the first tile */
        *l *= corr;
        for (int64_t e = 0; e < r->Dv; e++) acc[e] *= corr;
        *m = m_new;
    }
    int64_t n = j1 - j0;
    for (int64_t j = 0; j < n; j++) s[j] -= m_new;
    static const double no_params[2] = {0, 0};
    simd->unary(CANDLE_OP_EXP, s, s, n, no_params);
    for (int64_t j = 0; j < n; j++) {
        *l += s[j];
        simd->scale_axpy(acc, 1.0f, s[j], kv_row(simd, r, r->v + (j0 + j) * r->sv, r->Dv, r->vbuf), r->Dv);
    }
}

static candle_status run_attn(const cpu_task *t, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    const candle_tensor *mask = dst->n_src > 3 ? dst->src[3] : NULL;
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3];
    int64_t Skv = k->shape[2], Dv = v->shape[3], group = Hq / k->shape[1];
    bool causal = dst->iparams[0] != 0;
    float *s = cpu_thread_scratch(t, attn_thread_bytes(dst)), *acc = s + ATTN_TILE;
    float *qbuf = acc + Dv, *kbuf = qbuf + D, *vbuf = kbuf + D;
    int64_t r0, r1;
    cpu_split(B * Hq * Sq, 1, t->ith, t->nth, &r0, &r1);
    for (int64_t row = r0; row < r1; row++) {
        int64_t i = row % Sq, h = (row / Sq) % Hq, b = row / (Sq * Hq), hk = h / group;
        const char *qrow = tensor_ptr(q) + b * q->stride[0] + h * q->stride[1] + i * q->stride[2];
        if (q->dtype != CANDLE_DTYPE_F32) simd->to_f32(q->dtype, qrow, qbuf, D);
        attn_row r = {
            .q = q->dtype == CANDLE_DTYPE_F32 ? (const float *)qrow : qbuf,
            .k = tensor_ptr(k) + b * k->stride[0] + hk * k->stride[1],
            .v = tensor_ptr(v) + b * v->stride[0] + hk * v->stride[1],
            .mask = mask ? tensor_ptr(mask) + b * mask->stride[0] + h * mask->stride[1] + i * mask->stride[2] : NULL,
            .sk = k->stride[2], .sv = v->stride[2], .sm = mask ? mask->stride[3] : 0,
            .n_keys = causal ? Skv - Sq + i + 1 : Skv, .D = D, .Dv = Dv, .kv_dtype = k->dtype,
            .mask_dtype = mask ? mask->dtype : CANDLE_DTYPE_F32, .scale = (float)dst->fparams[0],
            .kbuf = kbuf, .vbuf = vbuf,
        };
        float m = -INFINITY, l = 0.0f;
        for (int64_t e = 0; e < Dv; e++) acc[e] = 0.0f;
        for (int64_t j0 = 0; j0 < r.n_keys; j0 += ATTN_TILE)
            fold_tile(simd, &r, j0, j0 + ATTN_TILE < r.n_keys ? j0 + ATTN_TILE : r.n_keys, s, &m, &l, acc);
        float inv = l > 0 ? 1.0f / l : 0.0f;
        for (int64_t e = 0; e < Dv; e++) acc[e] *= inv;
        size_t esz = candle_dtype_info(dst->dtype)->type_size;
        char *out = tensor_ptr(dst) + (size_t)(row * Dv) * esz;
        if (dst->dtype == CANDLE_DTYPE_F32) memcpy(out, acc, sizeof(float) * (size_t)Dv);
        else candle_dtype_info(dst->dtype)->from_f32(acc, out, Dv);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_attention = {"flash attention f32/f16/bf16 (online softmax, O(N) memory)", match_attn,
                                            plan_attn, run_attn};
