/* The encoder block builder (BERT, MPNet, ModernBERT): the graph of a batch
 * of sequences, embeddings to the last hidden states. The sequences' token
 * rows are packed one after another, so no padding is ever computed: every
 * row-wise step (projections, norms, activations) runs once over all of
 * them, and attention runs per sequence, every token of a sequence
 * attending to every token of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

static candle_tensor *layer_norm(const candle_model *m, candle_ctx *ctx, candle_tensor *x,
                                 candle_tensor *w, candle_tensor *b) {
    return candle_layer_norm(ctx, x, w, b, m->cfg.norm_eps);
}

/* The encoders' products keep their activations float: quantized weights
 * are dequantized rather than the activations rounded to 8-bit blocks
 * (embeddings are compared by cosine; notes/issue-19.md). */
#define ENC_MM CDL_MM_FLOAT_ACT

/* [n, H*D] -> [n, H, D] */
static candle_tensor *split_heads(candle_ctx *ctx, const candle_model_config *c, candle_tensor *x, int64_t n) {
    int64_t shape[3] = {n, c->n_head, c->head_dim};
    return candle_reshape_copy(ctx, x, 3, shape);
}

/* [n, H, D] -> [1, H, n, D] */
static candle_tensor *heads_first(candle_ctx *ctx, candle_tensor *h) {
    return candle_unsqueeze(ctx, candle_transpose(ctx, h, 0, 1), 0);
}

/* The packed sequences: sequence s is rows [off[s], off[s] + len[s]) of
 * the n rows. */
typedef struct ragged {
    int64_t n_seq, n;
    const int64_t *len; /* [n_seq] */
    int64_t *off;       /* [n_seq] */
    int32_t *pos;       /* [n]: each row's position in its sequence */
} ragged;

/* One layer's attention context: each sequence's additive mask
 * (relative-position bias or the local window), and for RoPE models the
 * base of its rotation. */
typedef struct attn_args {
    candle_tensor **bias; /* [n_seq]: broadcasts to [1, H, len, len], or NULL */
    double rope_base;     /* 0: no RoPE */
    candle_tensor *pos;   /* i32 [n]: the rows' positions for RoPE; NULL: one sequence */
    candle_tensor **out;  /* [n_seq] scratch: each sequence's attention rows */
} attn_args;

/* Attention of one sequence's q, k, v [len, H, D] -> [len, H*D]. */
static candle_tensor *attend(candle_ctx *ctx, const candle_model *m, const encoder_layer *w, candle_tensor *q,
                             candle_tensor *k, candle_tensor *v, candle_tensor *bias) {
    int64_t len = q->shape[0];
    candle_tensor *o = cdl_attention_rows(ctx, heads_first(ctx, q), heads_first(ctx, k), heads_first(ctx, v), bias,
                                          0, false, model_attn_flags(w->wo)); /* [1, H, len, D] */
    int64_t flat[2] = {len, m->cfg.n_embd};
    return candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2, flat);
}

candle_tensor *model_concat_rows(candle_ctx *ctx, candle_tensor **xs, int64_t n) {
    while (n > 1) {
        int64_t groups = 0;
        for (int64_t i = 0; i < n; i += CANDLE_MAX_SRC) {
            int64_t m = n - i < CANDLE_MAX_SRC ? n - i : CANDLE_MAX_SRC;
            xs[groups++] = m == 1 ? xs[i] : candle_concat(ctx, xs + i, (int)m, 0);
        }
        n = groups;
    }
    return xs[0];
}

static candle_tensor *self_attention(candle_ctx *ctx, const candle_model *m, const encoder_layer *w,
                                     candle_tensor *x, const attn_args *a, const ragged *rg) {
    int64_t n = rg->n;
    const candle_model_config *c = &m->cfg;
    candle_tensor *tq, *tk, *tv;
    if (w->wqkv) {
        candle_tensor *y = model_linear_bias(ctx, m, x, w->wqkv, w->bqkv, ENC_MM); /* [n, 3*n_embd]: q, k, v */
        tq = candle_narrow(ctx, y, 1, 0, c->n_embd);
        tk = candle_narrow(ctx, y, 1, c->n_embd, c->n_embd);
        tv = candle_narrow(ctx, y, 1, 2 * c->n_embd, c->n_embd);
    } else {
        tq = model_linear_bias(ctx, m, x, w->wq, w->bq, ENC_MM);
        tk = model_linear_bias(ctx, m, x, w->wk, w->bk, ENC_MM);
        tv = model_linear_bias(ctx, m, x, w->wv, w->bv, ENC_MM);
    }
    candle_tensor *q = split_heads(ctx, c, tq, n), *k = split_heads(ctx, c, tk, n);
    if (a->rope_base > 0) {
        candle_rope_params p = {.mode = (candle_rope_mode)c->rope_mode, .n_dims = (int)c->n_rot,
                                .freq_base = a->rope_base, .freq_scale = 1.0};
        q = candle_rope(ctx, q, a->pos, &p);
        k = candle_rope(ctx, k, a->pos, &p);
    }
    candle_tensor *v = split_heads(ctx, c, tv, n), *o;
    if (rg->n_seq == 1) {
        o = attend(ctx, m, w, q, k, v, a->bias[0]);
    } else {
        for (int64_t s = 0; s < rg->n_seq; s++) {
            int64_t off = rg->off[s], len = rg->len[s];
            a->out[s] = attend(ctx, m, w, candle_narrow(ctx, q, 0, off, len), candle_narrow(ctx, k, 0, off, len),
                               candle_narrow(ctx, v, 0, off, len), a->bias[s]);
        }
        o = model_concat_rows(ctx, a->out, rg->n_seq);
    }
    return model_linear_bias(ctx, m, o, w->wo, w->bo, ENC_MM);
}

/* Plain: act(up x); fused gated (ModernBERT's Wi): act(first half) * second half. */
static candle_tensor *ffn(candle_ctx *ctx, const candle_model *m, const encoder_layer *w, candle_tensor *x) {
    candle_op act = m->family->desc.ffn_act;
    candle_tensor *h = model_linear_bias(ctx, m, x, w->w_up, w->b_up, ENC_MM);
    if (w->w_gate) { /* SwiGLU (NomicBERT): act(gate x) * up x */
        h = candle_mul(ctx, candle_unary(ctx, act, model_linear_bias(ctx, m, x, w->w_gate, NULL, ENC_MM)), h);
    } else if (m->family->desc.mlp == MLP_GATED) {
        int64_t f = m->cfg.n_ff;
        h = candle_mul(ctx, candle_unary(ctx, act, candle_narrow(ctx, h, 1, 0, f)), candle_narrow(ctx, h, 1, f, f));
    } else {
        h = candle_unary(ctx, act, h);
    }
    return model_linear_bias(ctx, m, h, w->w_down, w->b_down, ENC_MM);
}

/* token + position + type embeddings (types NULL: all 0), normalised: [n, n_embd] */
static candle_tensor *embed(candle_ctx *ctx, const candle_model *m, model_ws *ws, const int32_t *tokens,
                            const int32_t *types_in, const ragged *rg) {
    int64_t n = rg->n;
    int32_t *pos = model_ws_buf(ws, WS_ENC_TMP, (size_t)n * 2 * sizeof *pos, "encoder positions");
    if (!pos) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: encoder positions");
        return NULL;
    }
    int32_t *types = pos + n;
    for (int64_t i = 0; i < n; i++) {
        pos[i] = (int32_t)(m->pos_offset + rg->pos[i]);
        types[i] = types_in ? types_in[i] : 0;
    }
    candle_tensor *t = candle_tensor_from_i32(ctx, 1, &n, tokens);
    candle_tensor *p = candle_tensor_from_i32(ctx, 1, &n, pos);
    candle_tensor *ty = candle_tensor_from_i32(ctx, 1, &n, types);
    candle_tensor *x = candle_embedding(ctx, m->tok_embd, t);
    if (m->pos_embd) x = candle_add(ctx, x, candle_embedding(ctx, m->pos_embd, p));
    if (m->type_embd) x = candle_add(ctx, x, candle_embedding(ctx, m->type_embd, ty));
    return layer_norm(m, ctx, x, m->embd_norm, m->embd_norm_b);
}

/* T5's bidirectional bucket of key j - query i as MPNet computes it (32
 * buckets, max distance 128 whatever the table holds), in float32 like
 * torch so that the boundaries fall where they do there. */
static int32_t rel_bucket(int64_t rel) {
    const int64_t half = 16, exact = 8;
    int64_t n = -rel, ret = n < 0 ? half : 0;
    n = n < 0 ? -n : n;
    if (n < exact) return (int32_t)(ret + n);
    float big = logf((float)n / (float)exact) / (float)log(128.0 / (double)exact) * (float)(half - exact);
    int64_t v = exact + (int64_t)big;
    return (int32_t)(ret + (v < half - 1 ? v : half - 1));
}

/* The relative-position bias [1, H, n, n] added to every layer's scores. */
static candle_tensor *position_bias(candle_ctx *ctx, const candle_model *m, model_ws *ws, int64_t n) {
    int64_t nn = n * n, rows = m->rel_bias->shape[0];
    int32_t *idx = model_ws_buf(ws, WS_ENC_TMP, (size_t)nn * sizeof *idx, "position buckets");
    if (!idx) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: position buckets");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t b = rel_bucket(j - i);
            idx[i * n + j] = b < rows ? b : (int32_t)rows - 1; /* a table of fewer than 32 rows */
        }
    candle_tensor *t = candle_tensor_from_i32(ctx, 1, &nn, idx);
    int64_t shape[3] = {n, n, m->cfg.n_head};
    candle_tensor *b = candle_reshape_copy(ctx, candle_embedding(ctx, m->rel_bias, t), 3, shape); /* [q, k, H] */
    b = candle_transpose(ctx, candle_transpose(ctx, b, 0, 2), 1, 2);                              /* [H, q, k] */
    int64_t out[4] = {1, m->cfg.n_head, n, n};
    return candle_reshape_copy(ctx, b, 4, out);
}

candle_tensor *model_local_mask(candle_ctx *ctx, model_ws *ws, int64_t window, int64_t n) {
    int64_t half = window / 2;
    if (n <= half + 1) return NULL;
    float *v = model_ws_buf(ws, WS_ENC_TMP, (size_t)(n * n) * sizeof *v, "local attention mask");
    if (!v) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: local attention mask");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) v[i * n + j] = (j - i > half || i - j > half) ? -INFINITY : 0.0f;
    int64_t shape[4] = {1, 1, n, n};
    return candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 4, shape, v);
}

/* Pre-norm blocks (ModernBERT): x + attn(LN(x)), x + ffn(LN(x)), a final
 * LayerNorm; layer il attends globally when il % swa_pattern == 0, else
 * within the local masks. */
static candle_tensor *prenorm_layers(candle_ctx *ctx, const candle_model *m, candle_tensor *x, const ragged *rg,
                                     attn_args *global, attn_args *local) {
    const candle_model_config *c = &m->cfg;
    for (int64_t il = 0; il < c->n_layer && x; il++) {
        const encoder_layer *w = &m->enc[il];
        attn_args *a = c->n_swa <= 0 || il % c->swa_pattern == 0 ? global : local;
        candle_tensor *h = w->attn_norm ? layer_norm(m, ctx, x, w->attn_norm, w->attn_norm_b) : x;
        x = candle_add(ctx, x, self_attention(ctx, m, w, h, a, rg));
        x = candle_add(ctx, x, ffn(ctx, m, w, layer_norm(m, ctx, x, w->out_norm, w->out_norm_b)));
    }
    return x ? layer_norm(m, ctx, x, m->out_norm, m->out_norm_b) : NULL;
}

/* Post-norm blocks (BERT, MPNet, NomicBERT). */
static candle_tensor *postnorm_layers(candle_ctx *ctx, const candle_model *m, candle_tensor *x, const ragged *rg,
                                      attn_args *a) {
    for (int64_t il = 0; il < m->cfg.n_layer && x; il++) {
        const encoder_layer *w = &m->enc[il];
        x = layer_norm(m, ctx, candle_add(ctx, x, self_attention(ctx, m, w, x, a, rg)), w->attn_norm,
                       w->attn_norm_b);
        x = layer_norm(m, ctx, candle_add(ctx, x, ffn(ctx, m, w, x)), w->out_norm, w->out_norm_b);
    }
    return x;
}

/* Each sequence's mask: MPNet's relative-position bias (rel) or the local
 * window (ModernBERT); sequences of one length share it. */
static void masks_of(candle_ctx *ctx, const candle_model *m, model_ws *ws, const ragged *rg, bool rel,
                     candle_tensor **out) {
    for (int64_t s = 0; s < rg->n_seq && !candle_errcode(ctx); s++) {
        int64_t same = s - 1;
        while (same >= 0 && rg->len[same] != rg->len[s]) same--;
        out[s] = same >= 0 ? out[same]
                 : rel     ? position_bias(ctx, m, ws, rg->len[s])
                           : model_local_mask(ctx, ws, m->cfg.n_swa, rg->len[s]);
    }
}

candle_tensor *encoder_hidden_rows(candle_ctx *ctx, const candle_model *m, model_ws *ws, const int32_t *tokens,
                                   const int32_t *types, const int64_t *lens, int64_t n_seq) {
    ragged rg = {.n_seq = n_seq, .len = lens};
    for (int64_t s = 0; s < n_seq; s++) {
        if (lens[s] <= 0 || lens[s] > m->cfg.n_ctx_train) {
            cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                          "encoder: sequence %lld: %lld tokens (the model takes 1 to %lld: truncate the input)",
                          (long long)s, (long long)lens[s], (long long)m->cfg.n_ctx_train);
            return NULL;
        }
        rg.n += lens[s];
    }
    const model_desc *d = &m->family->desc;
    bool local = d->pre_norm && m->cfg.n_swa > 0;
    /* rg.off [n_seq], then tab (pointers of the same size): [0, n_seq):
     * masks of the global or post-norm layers, [n_seq, 2 n_seq): of the
     * local layers, [2 n_seq, 3 n_seq): attention rows */
    rg.off = model_ws_buf(ws, WS_ENC_OFF, (size_t)(4 * n_seq) * sizeof *rg.off, "sequence offsets");
    rg.pos = model_ws_buf(ws, WS_ENC_POS, (size_t)rg.n * sizeof *rg.pos, "positions");
    if (!rg.off || !rg.pos) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: a batch of %lld sequences", (long long)n_seq);
        return NULL;
    }
    candle_tensor **tab = (candle_tensor **)(void *)(rg.off + n_seq);
    memset(tab, 0, (size_t)(3 * n_seq) * sizeof *tab);
    for (int64_t s = 0, i = 0; s < n_seq; s++) {
        rg.off[s] = i;
        for (int64_t j = 0; j < lens[s]; j++) rg.pos[i++] = (int32_t)j;
    }
    attn_args a = {tab, d->positions == POS_ROPE || d->pre_norm ? m->cfg.rope_base : 0, NULL, tab + 2 * n_seq};
    attn_args al = {tab + n_seq, m->cfg.rope_base_swa, NULL, tab + 2 * n_seq};
    if (a.rope_base > 0 && n_seq > 1) a.pos = al.pos = candle_tensor_from_i32(ctx, 1, &rg.n, rg.pos);
    if (m->rel_bias) masks_of(ctx, m, ws, &rg, true, a.bias);
    if (local) masks_of(ctx, m, ws, &rg, false, al.bias);
    if (candle_errcode(ctx)) return NULL;
    candle_tensor *x = embed(ctx, m, ws, tokens, types, &rg);
    return d->pre_norm ? prenorm_layers(ctx, m, x, &rg, &a, &al) : postnorm_layers(ctx, m, x, &rg, &a);
}
