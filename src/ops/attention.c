/* Scaled dot-product attention (one node; the reference kernel is the ground
 * truth that fused/flash kernels are tested against).
 *
 * Node: src q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv],
 * mask? (expanded to [B, Hq, Sq, Skv]); q and the output share a float
 * dtype, k and v share one (f32 q over an f16 cache), which may be a block
 * type (a quantized cache: q8_0, q4_0) whose rows are whole contiguous
 * blocks; fparams[0] = scale (resolved, never
 * 0); iparams[0] = causal; iparams[1] = row steps (each row must have the
 * bits of the one-position step at its position, cdl_attention_rows);
 * iparams[2] = bf16 products allowed (CDL_ATTN_BF16). A query row that
 * sees no key (every score masked to -inf) outputs zeros rather than NaN. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ops-impl.h"

static bool qkv_shapes(candle_ctx *ctx, const candle_tensor *q, const candle_tensor *k,
                       const candle_tensor *v) {
    char a[128], b[128], c[128];
    bool ok = q->rank == 4 && k->rank == 4 && v->rank == 4;
    ok = ok && k->shape[0] == q->shape[0] && v->shape[0] == q->shape[0];
    ok = ok && v->shape[1] == k->shape[1] && v->shape[2] == k->shape[2];
    ok = ok && k->shape[3] == q->shape[3];
    ok = ok && k->shape[1] > 0 && q->shape[1] % k->shape[1] == 0;
    if (ok) return true;
    cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                     "attention: shape mismatch: q %s k %s v %s (want q [B, Hq, Sq, D], k [B, Hkv, "
                     "Skv, D], v [B, Hkv, Skv, Dv], Hq a multiple of Hkv)",
                     candle_shape_str(q->rank, q->shape, a, sizeof a),
                     candle_shape_str(k->rank, k->shape, b, sizeof b),
                     candle_shape_str(v->rank, v->shape, c, sizeof c));
    return false;
}

static bool check_inputs(candle_ctx *ctx, const candle_tensor *q, const candle_tensor *k,
                         const candle_tensor *v, const candle_tensor *mask) {
    if (!op_check_device(ctx, "attention", q, k) || !op_check_device(ctx, "attention", q, v) ||
        !op_check_plain(ctx, "attention", q, true) || !op_check_kv_rows(ctx, "attention", "k/v", k, false) ||
        !op_check_same_dtype(ctx, "attention", k, v))
        return false;
    /* q (and the output) may differ from k/v: f32 activations over an f16
     * KV cache. */
    /* The mask may be another float dtype: f32 masks with f16 activations. */
    return !mask || (op_check_device(ctx, "attention", q, mask) &&
                     op_check_plain(ctx, "attention", mask, true));
}

candle_tensor *cdl_attention_rows(candle_ctx *ctx, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                  candle_tensor *mask, double scale, bool causal, unsigned flags) {
    OP_CHECK_IN(q);
    OP_CHECK_IN(k);
    OP_CHECK_IN(v);
    if (!check_inputs(ctx, q, k, v, mask) || !qkv_shapes(ctx, q, k, v)) return NULL;
    int64_t sq = q->shape[2], skv = k->shape[2];
    if (causal && sq > skv) {
        cdl_set_error(ctx, CANDLE_ERR_SHAPE,
                         "attention: causal needs Sq <= Skv, got Sq %" PRId64 " Skv %" PRId64
                         " (queries would see no key)",
                         sq, skv);
        return NULL;
    }
    if (!isfinite(scale)) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "attention: invalid scale %g", scale);
        return NULL;
    }
    int64_t out[4] = {q->shape[0], q->shape[1], sq, v->shape[3]};
    int64_t scores[4] = {q->shape[0], q->shape[1], sq, skv};
    candle_tensor *m = NULL;
    if (mask) {
        bool ok = mask->rank <= 4;
        for (int i = 0; ok && i < mask->rank; i++) {
            int64_t ms = mask->shape[mask->rank - 1 - i];
            ok = ms == 1 || ms == scores[3 - i];
        }
        if (!ok) {
            char a[128], b[128];
            cdl_set_error(ctx, CANDLE_ERR_SHAPE, "attention: mask %s does not broadcast to %s",
                             candle_shape_str(mask->rank, mask->shape, a, sizeof a),
                             candle_shape_str(4, scores, b, sizeof b));
            return NULL;
        }
        if (!(m = candle_expand(ctx, mask, 4, scores))) return NULL;
    }
    candle_tensor *t = cdl_node_new(ctx, CANDLE_OP_ATTENTION, q->dtype, 4, out);
    if (!t) return NULL;
    t->src[0] = q;
    t->src[1] = k;
    t->src[2] = v;
    t->src[3] = m;
    t->n_src = m ? 4 : 3;
    t->fparams[0] = scale != 0.0 ? scale : (q->shape[3] ? 1.0 / sqrt((double)q->shape[3]) : 1.0);
    t->iparams[0] = causal;
    t->iparams[1] = (flags & CDL_ATTN_ROW_STEPS) != 0;
    t->iparams[2] = (flags & CDL_ATTN_BF16) != 0;
    return cdl_node_finish(ctx, t);
}

candle_tensor *candle_attention(candle_ctx *ctx, candle_tensor *q, candle_tensor *k,
                                candle_tensor *v, candle_tensor *mask, double scale, bool causal) {
    return cdl_attention_rows(ctx, q, k, v, mask, scale, causal, 0);
}
