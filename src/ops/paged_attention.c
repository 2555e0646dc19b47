/* Attention over a paged KV cache (one node for many sequences; see
 * candle_paged_attention). The node stores the rows' new keys and values
 * into the caches and attends through each row's block table, so a batch of
 * sequences needs neither a gather of their cached rows nor a node per
 * sequence.
 *
 * Node: src q [n, Hq, D], k [n, Hkv, D], v [n, Hkv, Dv], k_cache [P, Hkv, D],
 * v_cache [P, Hkv, Dv], table i32 [n, 1 + T]; iparams: block, window; q, k
 * and v share a float dtype, the caches share one (an f16 pool under f32
 * rows, say), a float dtype or a block type whose rows are whole contiguous
 * blocks (a q8_0 pool: rows quantized as they are stored);
 * fparams[0] = scale (resolved, never 0). Table entries are checked by the
 * kernels (they may be computed). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ops-impl.h"

#define PA "paged_attention"

static bool pa_dtypes(candle_ctx *ctx, candle_tensor *const *t, const candle_tensor *table) {
    for (int i = 0; i < 5; i++)
        if (!op_check_device(ctx, PA, t[0], t[i]) ||
            !(i < 3 ? op_check_plain(ctx, PA, t[i], true) : op_check_kv_rows(ctx, PA, "caches", t[i], true)) ||
            !op_check_same_dtype(ctx, PA, t[i < 3 ? 0 : 3], t[i]))
            return false;
    if (!op_check_device(ctx, PA, t[0], table)) return false;
    if (table->dtype != CANDLE_DTYPE_I32) {
        cdl_set_error(ctx, CANDLE_ERR_DTYPE, PA ": table dtype %s (want i32)",
                         candle_dtype_name(table->dtype));
        return false;
    }
    return true;
}

static bool pa_shapes(candle_ctx *ctx, candle_tensor *const *t, const candle_tensor *table) {
    const candle_tensor *q = t[0], *k = t[1], *v = t[2], *kc = t[3], *vc = t[4];
    bool ok = q->rank == 3 && k->rank == 3 && v->rank == 3 && kc->rank == 3 && vc->rank == 3 &&
              table->rank == 2;
    ok = ok && k->shape[0] == q->shape[0] && v->shape[0] == q->shape[0] &&
         table->shape[0] == q->shape[0] && table->shape[1] >= 2;
    ok = ok && k->shape[1] > 0 && q->shape[1] % k->shape[1] == 0 && v->shape[1] == k->shape[1] &&
         k->shape[2] == q->shape[2];
    ok = ok && kc->shape[1] == k->shape[1] && kc->shape[2] == k->shape[2] &&
         vc->shape[0] == kc->shape[0] && vc->shape[1] == v->shape[1] && vc->shape[2] == v->shape[2];
    if (ok) return true;
    char a[6][96];
    const candle_tensor *all[6] = {q, k, v, kc, vc, table};
    for (int i = 0; i < 6; i++) candle_shape_str(all[i]->rank, all[i]->shape, a[i], sizeof a[i]);
    cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                     PA ": shape mismatch: q %s k %s v %s k_cache %s v_cache %s table %s (want q "
                     "[n, Hq, D], k [n, Hkv, D], v [n, Hkv, Dv], caches [P, Hkv, D|Dv], table [n, "
                     "1 + T], Hq a multiple of Hkv)",
                     a[0], a[1], a[2], a[3], a[4], a[5]);
    return false;
}

candle_tensor *candle_paged_attention(candle_ctx *ctx, candle_tensor *q, candle_tensor *k,
                                      candle_tensor *v, candle_tensor *k_cache,
                                      candle_tensor *v_cache, candle_tensor *table, int64_t block,
                                      int64_t window, double scale) {
    OP_CHECK_IN(q);
    OP_CHECK_IN(k);
    OP_CHECK_IN(v);
    OP_CHECK_IN(k_cache);
    OP_CHECK_IN(v_cache);
    OP_CHECK_IN(table);
    candle_tensor *t5[5] = {q, k, v, k_cache, v_cache};
    if (!pa_dtypes(ctx, t5, table) || !pa_shapes(ctx, t5, table)) return NULL;
    if (block <= 0 || k_cache->shape[0] % block || window < 0) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                         PA ": block %" PRId64 " window %" PRId64 " (want block > 0 dividing the "
                         "cache's %" PRId64 " rows, window >= 0)",
                         block, window, k_cache->shape[0]);
        return NULL;
    }
    if (!isfinite(scale)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, PA ": invalid scale %g", scale);
        return NULL;
    }
    int64_t out[3] = {q->shape[0], q->shape[1], v->shape[2]};
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_PAGED_ATTENTION, q->dtype, 3, out);
    if (!t) return NULL;
    for (int i = 0; i < 5; i++) t->src[i] = t5[i];
    t->src[5] = table;
    t->n_src = 6;
    t->iparams[0] = block;
    t->iparams[1] = window;
    t->fparams[0] = scale != 0.0 ? scale : (q->shape[2] ? 1.0 / sqrt((double)q->shape[2]) : 1.0);
    return cdl_node_finish(ctx, t);
}
