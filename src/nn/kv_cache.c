/* The KV cache: one K and one V tensor per layer, [n_head_kv, n_ctx,
 * head_dim], so the first pos+S positions of a layer are a narrow view that
 * attention reads in place. f32, f16, or a block type (q8_0, q4_0: rows
 * quantized as they are written, as llama.cpp's -ctk/-ctv q8_0). */
#include <stdlib.h>
#include <string.h>

#include "nn-impl.h"

candle_status kv_check_type(candle_ctx *ctx, const char *what, candle_dtype t, int64_t head_dim, bool bf16_ok) {
    bool blocks = t == CANDLE_DTYPE_Q8_0 || t == CANDLE_DTYPE_Q4_0;
    if (t != CANDLE_DTYPE_F32 && t != CANDLE_DTYPE_F16 && !(bf16_ok && t == CANDLE_DTYPE_BF16) && !blocks)
        return cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: dtype %s (want f32, f16, %sq8_0 or q4_0)", what,
                                candle_dtype_name(t), bf16_ok ? "bf16, " : "");
    int64_t bs = candle_dtype_info(t)->block_size;
    if (blocks && head_dim % bs)
        return cdl_set_error(ctx, CANDLE_ERR_DTYPE, "%s: %s rows are blocks of %lld, head_dim %lld is not a multiple",
                                what, candle_dtype_name(t), (long long)bs, (long long)head_dim);
    return CANDLE_OK;
}

candle_status kv_cache_init(kv_cache *kv, candle_ctx *ctx, int64_t n_layer, int64_t n_head_kv,
                            int64_t n_ctx, int64_t head_dim, candle_dtype dtype) {
    memset(kv, 0, sizeof *kv);
    candle_status st = kv_check_type(ctx, "kv cache", dtype, head_dim, false);
    if (st) return st;
    *kv = (kv_cache){n_layer, n_head_kv, n_ctx, head_dim, dtype, NULL, NULL};
    kv->k = calloc((size_t)n_layer, sizeof *kv->k);
    kv->v = calloc((size_t)n_layer, sizeof *kv->v);
    if (!kv->k || !kv->v) {
        kv_cache_free(kv);
        return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: kv cache table");
    }
    int64_t shape[3] = {n_head_kv, n_ctx, head_dim};
    for (int64_t il = 0; il < n_layer; il++) {
        kv->k[il] = candle_tensor_new(ctx, dtype, 3, shape);
        kv->v[il] = candle_tensor_new(ctx, dtype, 3, shape);
        if (!kv->k[il] || !kv->v[il]) {
            kv_cache_free(kv);
            return candle_errcode(ctx);
        }
        /* Zeroed so a read past the written rows (a bug) is not random. */
        candle_status s = candle_tensor_memset_bytes(kv->k[il], 0, 0, candle_tensor_nbytes(kv->k[il]));
        if (!s) s = candle_tensor_memset_bytes(kv->v[il], 0, 0, candle_tensor_nbytes(kv->v[il]));
        if (s) {
            kv_cache_free(kv);
            return s;
        }
    }
    return CANDLE_OK;
}

void kv_cache_free(kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

bool nn_add_dependency(candle_ctx *ctx, candle_tensor *view, candle_tensor *dep) {
    if (!view || !dep) return false;
    if (view->n_src >= CANDLE_MAX_SRC) {
        cdl_set_error(ctx, CANDLE_ERR_INTERNAL, "graph: too many inputs on a view");
        return false;
    }
    view->src[view->n_src++] = dep;
    /* Not valid until dep has run: a computed node would be taken as ready
     * (and its inputs skipped) by a one-off compute. */
    view->computed = false;
    return true;
}

/* Write x [S, H, D] into cache rows pos..pos+S and view rows 0..pos+S. */
static candle_tensor *write_read(candle_ctx *ctx, candle_tensor *cache, candle_tensor *x,
                                 int64_t pos) {
    int64_t S = x->shape[0];
    candle_tensor *slot = candle_narrow(ctx, cache, 1, pos, S);
    candle_tensor *w = candle_copy_into(ctx, slot, candle_transpose(ctx, x, 0, 1));
    candle_tensor *all = candle_unsqueeze(ctx, candle_narrow(ctx, cache, 1, 0, pos + S), 0);
    return nn_add_dependency(ctx, all, w) ? all : NULL;
}

bool kv_cache_update(candle_ctx *ctx, kv_cache *kv, int64_t il, candle_tensor *k,
                     candle_tensor *v, int64_t pos, candle_tensor **k_all, candle_tensor **v_all) {
    if (!k || !v) return false;
    *k_all = write_read(ctx, kv->k[il], k, pos);
    *v_all = write_read(ctx, kv->v[il], v, pos);
    return *k_all && *v_all;
}
