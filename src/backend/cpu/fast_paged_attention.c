/* Paged attention on the CPU for f32 rows over f32, f16, bf16 or block-type
 * (q8_0, q4_0) caches (the node of candle_paged_attention).
 *
 * Phase 0: threads split the rows and copy each row's k and v into the
 * cache row of its position. Phase 1: threads split (row, kv head) pairs;
 * the query heads of one kv group are scored together, one run of
 * consecutive positions inside a block at a time (its cache rows are
 * equally spaced), with the tile primitives of the flash kernel
 * (attention-impl.h); then an exact softmax per head (the visible positions
 * are at most the table's reach) and the weighted sum of value rows, again
 * a run at a time. f16/bf16 caches: rows are rounded as they are stored (the
 * reference's rounding), scored as they are, and their value rows read in
 * registers (accum_rows) or converted a run at a time. Block-type caches:
 * rows quantized as they are stored (the type's from_f32); q8_0 rows are
 * scored and summed as they are where the table reads them (q8_0_rows, the
 * same bits as on the rows converted), other block types' runs (at most a
 * block of rows) are converted to f32 first, keys and values alike. */
#include <math.h>
#include <string.h>

#include "attention-impl.h"
#include "fast-impl.h"
#include "paged-impl.h"

/* The flash kernel's table: AVX-512 where the cpu_simd table is "avx512"
 * (its value sums on zmm, the same bits as the AVX2 table's; the avx2 isa setting
 * keeps the AVX2 one), else AVX2, or scalar. */
static const cpu_attn_ops *attn_ops(void) {
    return cpu_attn_ops_get();
}

/* Output rows padded for the accumulate primitive. */
static int64_t ldo_of(const candle_tensor *dst) {
    return (dst->shape[2] + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
}

/* Rows whose innermost dim is contiguous: f32, or unless f32_only also
 * f16/bf16 or a block type (whole blocks: the op checked the row length). */
static bool rows_of(const candle_tensor *t, bool f32_only) {
    const candle_dtype_traits *tr = cpu_dtype(t->dtype);
    bool ok = t->dtype == CANDLE_DTYPE_F32 ||
              (!f32_only && (t->dtype == CANDLE_DTYPE_F16 || t->dtype == CANDLE_DTYPE_BF16 || tr->is_quantized));
    return ok && t->rank == 3 && (t->stride[2] == (int64_t)tr->type_size || t->shape[2] == 1);
}

static bool match_pa(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_PAGED_ATTENTION || !candle_tensor_is_contiguous(dst) || !rows_of(dst, true))
        return false;
    for (int i = 0; i < 5; i++)
        if (!rows_of(dst->src[i], i < 3)) return false;
    return true;
}

static int64_t max_keys(const candle_tensor *dst) {
    return (dst->src[5]->shape[1] - 1) * dst->iparams[0];
}

/* Per thread: scores [group][max_keys], sums [group][ldo], ones [group],
 * a block's value rows converted [block][Dv] (f16/bf16 and block-type
 * caches), and for a block-type key cache a block's key rows converted
 * [block][D]. */
static size_t pa_thread_bytes(const candle_tensor *dst) {
    int64_t g = dst->shape[1] / dst->src[1]->shape[1], nk = max_keys(dst), blk = dst->iparams[0];
    int64_t kt = cpu_dtype(dst->src[3]->dtype)->is_quantized ? blk * dst->src[0]->shape[2] : 0;
    size_t b = (size_t)(g * nk + g * ldo_of(dst) + g + blk * dst->shape[2] + kt) * sizeof(float);
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

/* n f32 values into a cache row of c's dtype. */
static void store_row(const candle_tensor *c, int64_t row, int64_t h, const float *x, int64_t n) {
    void *dst = (void *)row3(c, row, h);
    if (c->dtype == CANDLE_DTYPE_F32) memcpy(dst, x, (size_t)n * sizeof(float));
    else cpu_dtype(c->dtype)->from_f32(x, dst, n);
}

static candle_status store_rows(const cpu_task *task, candle_tensor *dst) {
    const candle_tensor *k = dst->src[1], *v = dst->src[2], *kc = dst->src[3], *vc = dst->src[4];
    int64_t r0, r1, hkv = k->shape[1];
    cpu_split(dst->shape[0], 1, task->ith, task->nth, &r0, &r1);
    for (int64_t i = r0; i < r1; i++) {
        int64_t row = pa_cache_row(dst, i, pa_pos(dst->src[5], i));
        if (row < 0) return pa_bad_table(task, dst, i);
        for (int64_t h = 0; h < hkv; h++) {
            store_row(kc, row, h, row3(k, i, h), k->shape[2]);
            store_row(vc, row, h, row3(v, i, h), v->shape[2]);
        }
    }
    return CANDLE_OK;
}

/* Positions j0..pos of table row i as runs inside one block: calls
 * fn(first position, cache row of it, length) for each; false on a bad
 * table entry. */
#define FOR_RUNS(dst, i, j0, pos, J, ROW, LEN, BODY)                          \
    for (int64_t J = (j0); J <= (pos);) {                                      \
        int64_t ROW = pa_cache_row(dst, i, J), blk_ = (dst)->iparams[0];      \
        if (ROW < 0) return false;                                             \
        int64_t LEN = blk_ - J % blk_ < (pos) - J + 1 ? blk_ - J % blk_ : (pos) - J + 1; \
        BODY;                                                                  \
        J += LEN;                                                              \
    }

/* The cache rows of a run are scattered over the pool (a block per 16
 * positions, one kv head's slice of each row): the hardware prefetchers
 * barely follow them, and the kernel waited on these loads for most of its
 * time (perf: 80% of accum's samples on the value row loads). So each run
 * asks ahead for its lines: the next run's key rows while it scores this
 * one, and this run's value rows, which the weighted sum reads after the
 * softmax. */
static inline void prefetch_rows(const candle_tensor *c, int64_t row, int64_t h, int64_t len, int64_t bytes) {
    for (int64_t r = 0; r < len; r++) attn_prefetch_row((const char *)row3(c, row + r, h), bytes);
}

/* The key rows of the run of positions j.. (up to pos) of row i, when j <= pos. */
static void prefetch_run(const candle_tensor *dst, const candle_tensor *c, int64_t i, int64_t hk, int64_t j,
                         int64_t pos, int64_t bytes) {
    int64_t blk = dst->iparams[0], row = j <= pos ? pa_cache_row(dst, i, j) : -1;
    if (row < 0) return;
    prefetch_rows(c, row, hk, blk - j % blk < pos - j + 1 ? blk - j % blk : pos - j + 1, bytes);
}

/* The scores of g query rows (q, lda floats apart) against a run's len key
 * rows (cache row `row`, kv head hk) into s: the rows as they are stored
 * where the table reads them, else converted into kt first. */
static void score_run(const cpu_attn_ops *ops, const candle_tensor *kc, int64_t row, int64_t hk, int64_t len,
                      const float *q, int64_t lda, int64_t g, int64_t D, float *s, int64_t lds, float *kt) {
    const char *k = (const char *)row3(kc, row, hk);
    if (attn_reads_rows(ops, kc->dtype)) {
        ops->scores_rows(q, lda, g, D, kc->dtype, k, kc->stride[0], len, s, lds);
    } else {
        attn_rows_f32(cpu_simd_get(), kc->dtype, k, kc->stride[0], len, D, kt);
        ops->scores_rows(q, lda, g, D, CANDLE_DTYPE_F32, (const char *)kt, D * (int64_t)sizeof(float), len, s, lds);
    }
}

/* The weighted sum of a run's len value rows (cache row `row`, kv head hk)
 * into acc: f32 rows as they are; f16/bf16 (and q8_0, see attn_reads_rows) ones
 * read by accum_rows where the table has it (the same bits), else converted
 * into vt first. */
static void accum_run(const cpu_attn_ops *ops, const candle_tensor *vc, int64_t row, int64_t hk, int64_t len,
                      const float *p, int64_t lds, int64_t g, const float *ones, int64_t Dv, float *acc,
                      int64_t ldo, float *vt) {
    if (vc->dtype == CANDLE_DTYPE_F32) {
        ops->accum(p, lds, g, ones, row3(vc, row, hk), vc->stride[0] / (int64_t)sizeof(float), len, Dv, acc, ldo);
    } else if (ops->accum_rows && attn_reads_rows(ops, vc->dtype)) {
        ops->accum_rows(p, lds, g, ones, vc->dtype, (const char *)row3(vc, row, hk), vc->stride[0], len, Dv, acc,
                        ldo);
    } else {
        attn_rows_f32(cpu_simd_get(), vc->dtype, (const char *)row3(vc, row, hk), vc->stride[0], len, Dv, vt);
        ops->accum(p, lds, g, ones, vt, Dv, len, Dv, acc, ldo);
    }
}

/* Query heads hk*g .. hk*g+g-1 of row i over positions j0..pos. */
static bool attend_group(const cpu_attn_ops *ops, candle_tensor *dst, int64_t i, int64_t hk, int64_t j0,
                         int64_t pos, float *s, float *acc, float *ones, float *vt, float *kt) {
    const candle_tensor *q = dst->src[0], *kc = dst->src[3], *vc = dst->src[4];
    int64_t D = q->shape[2], Dv = dst->shape[2], g = dst->shape[1] / kc->shape[1];
    int64_t nk = pos - j0 + 1, lds = max_keys(dst), ldo = ldo_of(dst);
    const float *qg = row3(q, i, hk * g);
    int64_t lda = q->stride[1] / (int64_t)sizeof(float);
    float scale = (float)dst->fparams[0];
    int64_t kb = (int64_t)candle_dtype_row_size(kc->dtype, D), vb = (int64_t)candle_dtype_row_size(vc->dtype, Dv);
    FOR_RUNS(dst, i, j0, pos, j, row, len,
             (prefetch_run(dst, kc, i, hk, j + len, pos, kb), prefetch_rows(vc, row, hk, len, vb),
              score_run(ops, kc, row, hk, len, qg, lda, g, D, s + (j - j0), lds, kt)));
    for (int64_t a = 0; a < g; a++) {
        float *sa = s + a * lds;
        for (int64_t j = 0; j < nk; j++) sa[j] *= scale;
        float mx = ops->max(sa, nk);
        float sum = cpu_simd_get()->exp_sum(sa, nk, mx), inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int64_t j = 0; j < nk; j++) sa[j] *= inv;
        memset(acc + a * ldo, 0, (size_t)ldo * sizeof(float));
        ones[a] = 1.0f;
    }
    FOR_RUNS(dst, i, j0, pos, j, row, len, accum_run(ops, vc, row, hk, len, s + (j - j0), lds, g, ones, Dv, acc, ldo, vt));
    for (int64_t a = 0; a < g; a++)
        memcpy((char *)tensor_ptr(dst) + (size_t)((i * dst->shape[1] + hk * g + a) * Dv) * sizeof(float),
               acc + a * ldo, (size_t)Dv * sizeof(float));
    return true;
}

static candle_status run_pa(const cpu_task *task, candle_tensor *dst) {
    if (task->phase == 0) return store_rows(task, dst);
    const cpu_attn_ops *ops = attn_ops();
    int64_t hkv = dst->src[1]->shape[1], g = dst->shape[1] / hkv;
    float *s = cpu_thread_scratch(task, pa_thread_bytes(dst)), *acc = s + g * max_keys(dst);
    float *ones = acc + g * ldo_of(dst), *vt = ones + g, *kt = vt + dst->iparams[0] * dst->shape[2];
    int64_t u0, u1;
    cpu_split(dst->shape[0] * hkv, 1, task->ith, task->nth, &u0, &u1);
    int64_t kb = (int64_t)candle_dtype_row_size(dst->src[3]->dtype, dst->src[0]->shape[2]);
    for (int64_t u = u0; u < u1; u++) {
        int64_t i = u / hkv, hk = u % hkv, pos = pa_pos(dst->src[5], i);
        if (u == u0) prefetch_run(dst, dst->src[3], i, hk, pa_first(dst, pos), pos, kb);
        if (u + 1 < u1) { /* the next group's first key rows, read right after this group */
            int64_t i1 = (u + 1) / hkv, p1 = pa_pos(dst->src[5], i1);
            if (p1 >= 0) prefetch_run(dst, dst->src[3], i1, (u + 1) % hkv, pa_first(dst, p1), p1, kb);
        }
        /* phase 0 checked pos against the table */
        if (!attend_group(ops, dst, i, hk, pa_first(dst, pos), pos, s, acc, ones, vt, kt)) return pa_bad_table(task, dst, i);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_paged_attention = {
    "paged attention f32 over f32/f16/bf16/block-type caches (k/v stored, then read through block tables)",
    match_pa, plan_pa, run_pa};
