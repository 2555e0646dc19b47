/* The decoder block every family shares, built as a graph for one step:
 * pre-norm attention (grouped-query, RoPE, KV cache) and a gated FFN, with
 * the optional parts (biases, q/k norms, post norms, soft-capping, sliding
 * windows) switched by the family's options and config. */
#include <math.h>
#include <string.h>

#include "model-impl.h"

typedef struct step {
    candle_session *s;
    candle_ctx *ctx;
    const candle_model_config *c;
    const decoder_opts *o;
    int64_t n; /* tokens in this step */
} step;

/* Input embeddings [n, n_embd] f32: rows copied (dequantized) from the
 * table on the host, so any stored dtype works without a graph op. */
static candle_tensor *embed(step *st, const int32_t *tokens) {
    const candle_model *m = st->s->model;
    const candle_tensor *tab = m->tok_embd;
    const candle_dtype_traits *tr = candle_dtype_info(tab->dtype);
    int64_t d = st->c->n_embd, shape[2] = {st->n, d};
    candle_tensor *x = candle_tensor_new(st->ctx, CANDLE_DTYPE_F32, 2, shape);
    if (!x) return NULL;
    if (tab->dtype != CANDLE_DTYPE_F32 && !tr->to_f32) {
        candle_set_error(st->ctx, CANDLE_ERR_UNSUPPORTED,
                         "model: no conversion from %s for token embeddings", tr->name);
        return NULL;
    }
    float *out = candle_tensor_data(x);
    const char *base = candle_tensor_data(tab);
    for (int64_t i = 0; i < st->n; i++) {
        const void *row = base + tokens[i] * tab->stride[0];
        if (tab->dtype == CANDLE_DTYPE_F32) memcpy(out + i * d, row, (size_t)d * sizeof(float));
        else tr->to_f32(row, out + i * d, d);
    }
    return st->c->embd_scale != 1.0 ? candle_scale(st->ctx, x, st->c->embd_scale) : x;
}

static candle_tensor *norm(step *st, candle_tensor *x, candle_tensor *w) {
    return candle_rms_norm(st->ctx, x, w, st->c->norm_eps);
}

/* [n, H*D] -> [n, H, D], copying when the input is a slice of a fused output. */
static candle_tensor *heads(step *st, candle_tensor *x, int64_t h) {
    int64_t shape[3] = {st->n, h, st->c->head_dim};
    return candle_reshape_copy(st->ctx, x, 3, shape);
}

static candle_tensor *rope(step *st, candle_tensor *x, int64_t il) {
    bool swa = decoder_layer_is_swa(st->c, il);
    candle_rope_params p = {
        .mode = (candle_rope_mode)st->c->rope_mode,
        .n_dims = (int)st->c->n_rot,
        .freq_base = swa ? st->c->rope_base_swa : st->c->rope_base,
        .freq_scale = swa ? 1.0 : st->c->rope_scale,
        .pos_offset = st->s->pos,
    };
    return candle_rope(st->ctx, x, NULL, &p);
}

/* q, k, v as [n, heads, head_dim], biased and normalised as the family needs. */
static void qkv(step *st, const layer_weights *w, candle_tensor *h, candle_tensor **q,
                candle_tensor **k, candle_tensor **v) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    int64_t nq = c->n_head * c->head_dim, nkv = c->n_head_kv * c->head_dim;
    candle_tensor *tq, *tk, *tv;
    if (w->wqkv) {
        candle_tensor *y = candle_matmul(ctx, h, w->wqkv);
        tq = candle_narrow(ctx, y, 1, 0, nq);
        tk = candle_narrow(ctx, y, 1, nq, nkv);
        tv = candle_narrow(ctx, y, 1, nq + nkv, nkv);
    } else {
        tq = candle_matmul(ctx, h, w->wq);
        tk = candle_matmul(ctx, h, w->wk);
        tv = candle_matmul(ctx, h, w->wv);
    }
    if (w->bq) {
        tq = candle_add(ctx, tq, w->bq);
        tk = candle_add(ctx, tk, w->bk);
        tv = candle_add(ctx, tv, w->bv);
    }
    *q = heads(st, tq, c->n_head);
    *k = heads(st, tk, c->n_head_kv);
    *v = heads(st, tv, c->n_head_kv);
    if (w->q_norm) {
        *q = norm(st, *q, w->q_norm);
        *k = norm(st, *k, w->k_norm);
    }
}

static candle_tensor *attention(step *st, const layer_weights *w, candle_tensor *x, int64_t il) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    candle_tensor *q, *k, *v, *k_all, *v_all;
    qkv(st, w, norm(st, x, w->attn_norm), &q, &k, &v);
    q = rope(st, q, il);
    k = rope(st, k, il);
    if (!kv_cache_update(ctx, &st->s->kv, il, k, v, st->s->pos, &k_all, &v_all)) return NULL;
    nn_attn_params ap = {
        .scale = c->attn_scale,
        .softcap = c->attn_softcap,
        .window = decoder_layer_is_swa(c, il) ? c->n_swa : 0,
        .pos = st->s->pos,
    };
    candle_tensor *o = nn_attention(ctx, candle_unsqueeze(ctx, candle_transpose(ctx, q, 0, 1), 0),
                                    k_all, v_all, &ap); /* [1, n_head, n, head_dim] */
    int64_t flat[2] = {st->n, c->n_head * c->head_dim};
    o = candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2, flat);
    o = candle_matmul(ctx, o, w->wo);
    return w->attn_post_norm ? norm(st, o, w->attn_post_norm) : o;
}

static candle_tensor *ffn(step *st, const layer_weights *w, candle_tensor *x) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *h = norm(st, x, w->ffn_norm), *gate, *up;
    if (!w->w_gate) {
        candle_tensor *y = candle_matmul(ctx, h, w->w_up);
        gate = candle_narrow(ctx, y, 1, 0, st->c->n_ff);
        up = candle_narrow(ctx, y, 1, st->c->n_ff, st->c->n_ff);
    } else {
        gate = candle_matmul(ctx, h, w->w_gate);
        up = candle_matmul(ctx, h, w->w_up);
    }
    candle_tensor *f = candle_mul(ctx, candle_unary(ctx, st->o->ffn_act, gate), up);
    f = candle_matmul(ctx, f, w->w_down);
    return w->ffn_post_norm ? norm(st, f, w->ffn_post_norm) : f;
}

candle_tensor *decoder_forward(candle_session *s, const int32_t *tokens, int64_t n, bool all) {
    const candle_model *m = s->model;
    step st = {s, s->ctx, &m->cfg, &m->family->opts, n};
    candle_ctx *ctx = s->ctx;
    candle_tensor *x = embed(&st, tokens); /* [n, n_embd] */
    for (int64_t il = 0; il < m->cfg.n_layer && x; il++) {
        x = candle_add(ctx, x, attention(&st, &m->layers[il], x, il));
        x = candle_add(ctx, x, ffn(&st, &m->layers[il], x));
    }
    if (!all && x) x = candle_narrow(ctx, x, 0, n - 1, 1);
    candle_tensor *logits = candle_matmul(ctx, norm(&st, x, m->out_norm), m->output);
    double cap = m->cfg.final_softcap;
    if (cap > 0)
        logits = candle_scale(ctx, candle_tanh(ctx, candle_scale(ctx, logits, 1.0 / cap)), cap);
    return logits;
}
