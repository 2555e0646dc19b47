/* Paged attention on the CPU for f32 rows (the node of
 * candle_paged_attention).
 *
 * Phase 0: threads split the rows and copy each row's k and v into the
 * cache row of its position. Phase 1: threads split (row, kv head) pairs;
 * the query heads of one kv group share each key and value row as it is
 * read through the block table: all scores of the group first (the visible
 * positions are at most the table's reach), then an exact softmax per head
 * and the weighted sum of value rows. */
#include <math.h>
#include <string.h>

#include "fast-impl.h"
#include "paged-impl.h"

/* Rows whose innermost dim is contiguous f32. */
static bool f32_rows(const candle_tensor *t) {
    return t->dtype == CANDLE_DTYPE_F32 && t->rank == 3 && (t->stride[2] == 4 || t->shape[2] == 1);
}

static bool match_pa(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_PAGED_ATTENTION || !candle_tensor_is_contiguous(dst) || !f32_rows(dst))
        return false;
    for (int i = 0; i < 5; i++)
        if (!f32_rows(dst->src[i])) return false;
    return true;
}

static int64_t max_keys(const candle_tensor *dst) {
    return (dst->src[5]->shape[1] - 1) * dst->iparams[0];
}

/* Per thread: cache rows [max_keys] (int64), scores [group][max_keys], sums
 * [group][Dv]. */
static size_t pa_thread_bytes(const candle_tensor *dst) {
    int64_t g = dst->shape[1] / dst->src[1]->shape[1], nk = max_keys(dst);
    size_t b = (size_t)nk * 8 + (size_t)(g * nk + g * dst->shape[2]) * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

static void plan_pa(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    double work = (double)candle_tensor_numel(dst) * (double)max_keys(dst);
    p->nth = cpu_tasks_for(work, 1e5, n_threads, 4);
    p->n_phases = 2;
    p->wsize = 64 + (size_t)n_threads * pa_thread_bytes(dst);
}

static const float *row3(const candle_tensor *t, int64_t a, int64_t b) {
    return (const float *)(tensor_ptr(t) + a * t->stride[0] + b * t->stride[1]);
}

static candle_status store_rows(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *k = dst->src[1], *v = dst->src[2], *kc = dst->src[3], *vc = dst->src[4];
    int64_t r0, r1, hkv = k->shape[1];
    cpu_split(dst->shape[0], 1, task->ith, task->nth, &r0, &r1);
    for (int64_t i = r0; i < r1; i++) {
        int64_t row = pa_cache_row(dst, i, pa_pos(dst->src[5], i));
        if (row < 0) return pa_bad_table(task, dst, i);
        for (int64_t h = 0; h < hkv; h++) {
            memcpy((void *)row3(kc, row, h), row3(k, i, h), (size_t)k->shape[2] * sizeof(float));
            memcpy((void *)row3(vc, row, h), row3(v, i, h), (size_t)v->shape[2] * sizeof(float));
        }
    }
    return CANDLE_OK;
}

/* Query heads hk*g .. hk*g+g-1 of row i; rows[j - j0] are the cache rows. */
static void attend_group(const cpu_simd *simd, candle_tensor *dst, int64_t i, int64_t hk,
                         const int64_t *rows, int64_t nk, float *s, float *acc) {
    const candle_tensor *q = dst->src[0], *kc = dst->src[3], *vc = dst->src[4];
    int64_t D = q->shape[2], Dv = dst->shape[2], g = dst->shape[1] / kc->shape[1];
    float scale = (float)dst->fparams[0];
    for (int64_t j = 0; j < nk; j++) {
        const float *kr = row3(kc, rows[j], hk);
        for (int64_t a = 0; a < g; a++) s[a * nk + j] = simd->dot(row3(q, i, hk * g + a), kr, D) * scale;
    }
    static const double no_params[2] = {0, 0};
    for (int64_t a = 0; a < g; a++) {
        float *sa = s + a * nk, mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < nk; j++) mx = sa[j] > mx ? sa[j] : mx;
        for (int64_t j = 0; j < nk; j++) sa[j] -= mx;
        simd->unary(CANDLE_OP_EXP, sa, sa, nk, no_params);
        for (int64_t j = 0; j < nk; j++) sum += sa[j];
        float inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int64_t j = 0; j < nk; j++) sa[j] *= inv;
        memset(acc + a * Dv, 0, (size_t)Dv * sizeof(float));
    }
    for (int64_t j = 0; j < nk; j++) {
        const float *vr = row3(vc, rows[j], hk);
        for (int64_t a = 0; a < g; a++) simd->scale_axpy(acc + a * Dv, 1.0f, s[a * nk + j], vr, Dv);
    }
    for (int64_t a = 0; a < g; a++)
        memcpy((char *)tensor_ptr(dst) + (size_t)((i * dst->shape[1] + hk * g + a) * Dv) * sizeof(float),
               acc + a * Dv, (size_t)Dv * sizeof(float));
}

static candle_status run_pa(const cpu_task *task, candle_tensor *dst) {
    if (task->phase == 0) return store_rows(task, dst);
    const cpu_simd *simd = cpu_simd_get();
    int64_t hkv = dst->src[1]->shape[1], nmax = max_keys(dst);
    int64_t g = dst->shape[1] / hkv;
    int64_t *rows = cpu_thread_scratch(task, pa_thread_bytes(dst));
    float *s = (float *)(rows + nmax), *acc = s + g * nmax;
    int64_t u0, u1;
    cpu_split(dst->shape[0] * hkv, 1, task->ith, task->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t i = u / hkv, hk = u % hkv, pos = pa_pos(dst->src[5], i), j0 = pa_first(dst, pos);
        /* phase 0 checked pos against the table */
        for (int64_t j = j0; j <= pos; j++)
            if ((rows[j - j0] = pa_cache_row(dst, i, j)) < 0) return pa_bad_table(task, dst, i);
        attend_group(simd, dst, i, hk, rows, pos - j0 + 1, s, acc);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_paged_attention = {
    "paged attention f32 (k/v stored, then read through block tables)", match_pa, plan_pa, run_pa};
