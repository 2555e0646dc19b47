/* Attention for the decoder: the fused kernel when it can do the job, an
 * explicit matmul/softmax chain when scores are soft-capped (Gemma 2). */
#include <math.h>
#include <stdlib.h>

#include "nn-impl.h"

/* Additive mask [Sq, Skv]: causal, and within the window when there is one. */
static candle_tensor *window_mask(candle_ctx *ctx, int64_t sq, int64_t skv, int64_t pos,
                                  int64_t window) {
    float *m = malloc((size_t)(sq * skv) * sizeof *m);
    if (!m) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: attention mask [%lld, %lld]",
                         (long long)sq, (long long)skv);
        return NULL;
    }
    for (int64_t i = 0; i < sq; i++)
        for (int64_t j = 0; j < skv; j++) {
            int64_t d = pos + i - j;
            m[i * skv + j] = d >= 0 && (window <= 0 || d < window) ? 0.0f : -INFINITY;
        }
    int64_t shape[2] = {sq, skv};
    candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, shape, m);
    free(m);
    return t;
}

static candle_tensor *softcapped(candle_ctx *ctx, candle_tensor *q, candle_tensor *k,
                                 candle_tensor *v, double scale, const nn_attn_params *p) {
    int64_t hq = q->shape[1], sq = q->shape[2], d = q->shape[3];
    int64_t hkv = k->shape[1], skv = k->shape[2], g = hq / hkv;
    /* Query heads of one KV group are consecutive, so they stack as rows. */
    int64_t qs[3] = {hkv, g * sq, d};
    candle_tensor *qg = candle_reshape_copy(ctx, q, 3, qs);
    /* Views of views point at the cache itself: keep them ordered after the
     * cache writes that k and v depend on. */
    candle_tensor *kt = candle_transpose(ctx, candle_squeeze(ctx, k, 0), 1, 2);
    candle_tensor *v3 = candle_squeeze(ctx, v, 0);
    if (!nn_add_dependency(ctx, kt, k) || !nn_add_dependency(ctx, v3, v)) return NULL;
    /* An f16 cache: K^T is a weight-form rhs as it is; V is not, so it is
     * converted (Gemma 2 only; the fused kernel reads f16 directly). */
    if (v3 && v3->dtype != q->dtype) v3 = candle_cast(ctx, v3, q->dtype);
    candle_tensor *sc = candle_matmul(ctx, qg, kt); /* [hkv, g*sq, skv] */
    sc = candle_affine(ctx, candle_tanh(ctx, candle_scale(ctx, sc, scale / p->softcap)),
                       p->softcap, 0.0);
    int64_t s4[4] = {hkv, g, sq, skv};
    sc = candle_add(ctx, candle_reshape(ctx, sc, 4, s4),
                    window_mask(ctx, sq, skv, p->pos, p->window));
    candle_tensor *pr = candle_reshape(ctx, candle_softmax(ctx, sc, -1), 3, (int64_t[]){hkv, g * sq, skv});
    candle_tensor *o = candle_matmul(ctx, pr, v3); /* [hkv, g*sq, d] */
    return candle_reshape(ctx, o, 4, (int64_t[]){1, hq, sq, d});
}

candle_tensor *nn_attention(candle_ctx *ctx, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                            const nn_attn_params *p) {
    if (!q || !k || !v) return NULL;
    double scale = p->scale > 0 ? p->scale : 1.0 / sqrt((double)q->shape[3]);
    if (p->softcap > 0) return softcapped(ctx, q, k, v, scale, p);
    int64_t sq = q->shape[2], skv = k->shape[2];
    candle_tensor *mask = NULL;
    if (p->window > 0 && p->pos + sq > p->window) {
        mask = window_mask(ctx, sq, skv, p->pos, p->window);
        if (!mask) return NULL;
    }
    return cdl_attention_rows(ctx, q, k, v, mask, scale, true, p->row_steps ? CDL_ATTN_ROW_STEPS : 0);
}
