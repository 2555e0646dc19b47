/* The decoder block every family shares, built as a graph for one step:
 * pre-norm attention (grouped-query, RoPE, KV cache) and a gated FFN, with
 * the optional parts (biases, q/k norms, post norms, soft-capping, sliding
 * windows) switched by the family's options and config. The session path
 * (decoder_forward) and the batch path (batch.c) build the same blocks and
 * differ only in the attention's KV cache, through decoder_step.attend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

/* The table's rows as an embedding op on the model's backend (any stored
 * dtype, dequantized to f32). */
candle_tensor *decoder_embed(decoder_step *st, const int32_t *tokens) {
    int64_t n = st->n;
    candle_tensor *ids = candle_tensor_from_i32(st->ctx, 1, &n, tokens);
    candle_tensor *x = candle_embedding(st->ctx, st->m->tok_embd, ids); /* [n, n_embd] */
    return x && st->c->embd_scale != 1.0 ? candle_scale(st->ctx, x, st->c->embd_scale) : x;
}

static candle_tensor *norm(decoder_step *st, candle_tensor *x, candle_tensor *w) {
    return candle_rms_norm(st->ctx, x, w, st->c->norm_eps);
}

/* [n, H*D] -> [n, H, D], copying when the input is a slice of a fused output. */
static candle_tensor *heads(decoder_step *st, candle_tensor *x, int64_t h) {
    int64_t shape[3] = {st->n, h, st->c->head_dim};
    return candle_reshape_copy(st->ctx, x, 3, shape);
}

candle_tensor *model_rope_factors(const candle_model *m, int64_t n_ctx) {
    if (m->rope_freqs || !m->rope_long) return m->rope_freqs;
    return n_ctx > m->cfg.rope_n_ctx_orig ? m->rope_long : m->rope_short;
}

/* Gemma's local layers (sliding-window layers of an interleaved pattern)
 * take their own base and none of the global layers' scaling; Phi-3's
 * sliding window covers every layer, and all of them are scaled. */
static bool rope_local(const candle_model_config *c, int64_t il) {
    return c->swa_pattern > 0 && decoder_layer_is_swa(c, il);
}

candle_rope_params model_rope_params(const candle_model *m, int64_t il, candle_tensor *ff) {
    const candle_model_config *c = &m->cfg;
    candle_rope_params p = {.mode = (candle_rope_mode)c->rope_mode, .n_dims = (int)c->n_rot};
    if (rope_local(c, il)) {
        p.freq_base = c->rope_base_swa;
        p.freq_scale = 1.0;
        return p;
    }
    p.freq_base = c->rope_base;
    p.freq_scale = c->rope_scale;
    p.freq_factors = ff;
    p.ext_factor = c->rope_ext_factor;
    p.attn_factor = c->rope_attn_factor;
    p.beta_fast = c->rope_beta_fast;
    p.beta_slow = c->rope_beta_slow;
    p.n_ctx_orig = c->rope_n_ctx_orig;
    return p;
}

bool model_rope_per_layer(const candle_model *m) {
    const candle_model_config *c = &m->cfg;
    bool scaled = c->rope_scale != 1.0 || c->rope_ext_factor != 0 || c->rope_attn_factor != 1.0 ||
                  m->rope_freqs || m->rope_long;
    return c->n_swa > 0 && c->swa_pattern > 0 && (c->rope_base_swa != c->rope_base || scaled);
}

double model_rope_base(const candle_model *m, int64_t seq_len) {
    const candle_model_config *c = &m->cfg;
    double f = c->rope_dyn_factor, n = (double)c->n_ctx_train, d = (double)c->n_rot;
    if (!(f > 0) || seq_len <= c->n_ctx_train || c->n_ctx_train <= 0) return c->rope_base;
    return c->rope_base * pow(f * (double)seq_len / n - (f - 1), d / (d - 2));
}

/* x rotated; with dynamic NTK each sequence of the step at the base of its
 * length, as transformers grows it per forward (the cached keys keep the
 * base they were rotated with, as its cache does). */
static candle_tensor *rope(decoder_step *st, candle_tensor *x, int64_t il) {
    candle_rope_params p = model_rope_params(st->m, il, st->rope_ff);
    p.pos_offset = st->pos0;
    if (!(st->c->rope_dyn_factor > 0) || rope_local(st->c, il)) return candle_rope(st->ctx, x, st->pos, &p);
    if (!st->n_seq) {
        p.freq_base = model_rope_base(st->m, st->seq_len);
        return candle_rope(st->ctx, x, st->pos, &p);
    }
    bool one_base = true;
    for (int i = 0; i < st->n_seq; i++)
        one_base = one_base && model_rope_base(st->m, st->seq_lens[i]) == st->c->rope_base;
    if (one_base) return candle_rope(st->ctx, x, st->pos, &p);
    candle_tensor **parts = malloc((size_t)st->n_seq * sizeof *parts), *y = NULL;
    if (!parts) {
        cdl_set_error(st->ctx, CANDLE_ERR_OOM, "out of memory: RoPE of %d sequences", st->n_seq);
        return NULL;
    }
    bool ok = true;
    for (int i = 0; ok && i < st->n_seq; i++) {
        int64_t r0 = st->seq_rows[i], rows = st->seq_rows[i + 1] - r0;
        p.freq_base = model_rope_base(st->m, st->seq_lens[i]);
        p.pos_offset = st->pos0 + r0; /* where positions are implicit */
        parts[i] = candle_rope(st->ctx, candle_narrow(st->ctx, x, 0, r0, rows),
                               st->pos ? candle_narrow(st->ctx, st->pos, 0, r0, rows) : NULL, &p);
        ok = parts[i] != NULL;
    }
    if (ok) y = model_concat_rows(st->ctx, parts, st->n_seq);
    free(parts);
    return y;
}

/* h w, plus the active LoRA adapters' products for layer il's slot; no
 * extra node without adapters. */
static candle_tensor *proj(decoder_step *st, candle_tensor *h, candle_tensor *w, int64_t il,
                           lora_slot slot) {
    candle_tensor *y = model_linear(st->ctx, st->m, h, w, &st->gather, st->mm_flags);
    return st->n_lora ? lora_add(st->ctx, st->lora, st->n_lora, il, slot, h, y) : y;
}

/* q, k, v as [n, heads, head_dim], biased and normalised as the family needs. */
static void qkv(decoder_step *st, const layer_weights *w, candle_tensor *h, int64_t il,
                candle_tensor **q, candle_tensor **k, candle_tensor **v) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    int64_t nq = c->n_head * c->head_dim, nkv = c->n_head_kv * c->head_dim;
    candle_tensor *tq, *tk, *tv;
    if (w->wqkv) {
        candle_tensor *y = proj(st, h, w->wqkv, il, LORA_QKV);
        tq = candle_narrow(ctx, y, 1, 0, nq);
        tk = candle_narrow(ctx, y, 1, nq, nkv);
        tv = candle_narrow(ctx, y, 1, nq + nkv, nkv);
    } else {
        tq = proj(st, h, w->wq, il, LORA_Q);
        tk = proj(st, h, w->wk, il, LORA_K);
        tv = proj(st, h, w->wv, il, LORA_V);
    }
    if (w->bq) {
        tq = candle_add(ctx, tq, w->bq);
        tk = candle_add(ctx, tk, w->bk);
        tv = candle_add(ctx, tv, w->bv);
    }
    if (st->m->family->desc.qk_norm_full) { /* OLMoE: over all heads at once */
        tq = norm(st, tq, w->q_norm);
        tk = norm(st, tk, w->k_norm);
    }
    *q = heads(st, tq, c->n_head);
    *k = heads(st, tk, c->n_head_kv);
    *v = heads(st, tv, c->n_head_kv);
    if (w->q_norm && !st->m->family->desc.qk_norm_full) {
        *q = norm(st, *q, w->q_norm);
        *k = norm(st, *k, w->k_norm);
    }
}

candle_tensor *decoder_attend_rows(decoder_step *st, candle_tensor *q, candle_tensor *k_all,
                                   candle_tensor *v_all, int64_t pos, int64_t il) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    nn_attn_params ap = {
        .scale = c->attn_scale,
        .softcap = c->attn_softcap,
        .window = decoder_layer_is_swa(c, il) ? c->n_swa : 0,
        .pos = pos,
        .row_steps = st->row_steps,
    };
    candle_tensor *o = nn_attention(ctx, candle_unsqueeze(ctx, candle_transpose(ctx, q, 0, 1), 0),
                                    k_all, v_all, &ap); /* [1, n_head, m, head_dim] */
    int64_t flat[2] = {q->shape[0], c->n_head * c->head_dim};
    return candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2,
                               flat);
}

static candle_tensor *attention(decoder_step *st, const layer_weights *w, candle_tensor *x,
                                int64_t il) {
    candle_tensor *q, *k, *v;
    qkv(st, w, norm(st, x, w->attn_norm), il, &q, &k, &v);
    q = rope(st, q, il);
    k = rope(st, k, il);
    candle_tensor *o = q && k && v ? st->attend(st, q, k, v, il) : NULL;
    o = proj(st, o, w->wo, il, LORA_O);
    return w->attn_post_norm ? norm(st, o, w->attn_post_norm) : o;
}

/* act(h gate) * (h up), down: one expert's (or a dense) gated FFN. */
static candle_tensor *glu(decoder_step *st, candle_tensor *h, candle_tensor *gate,
                          candle_tensor *up, candle_tensor *down) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *f = candle_mul(ctx, candle_unary(ctx, st->m->family->desc.ffn_act,
                                                    model_linear(ctx, st->m, h, gate, &st->gather, st->mm_flags)),
                                  model_linear(ctx, st->m, h, up, &st->gather, st->mm_flags));
    return model_linear(ctx, st->m, f, down, &st->gather, st->mm_flags);
}

/* Each row's weights over the experts [n, n_expert]: the router's softmax
 * over all experts, kept for the n_expert_used largest (of equal ones the
 * lower index) and zero elsewhere, then (expert_norm) divided by their sum
 * -- Mixtral's and Qwen-MoE's order. */
static candle_tensor *route(decoder_step *st, const layer_weights *w, candle_tensor *h) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    candle_tensor *p = candle_softmax(ctx, model_linear(ctx, st->m, h, w->router, &st->gather, st->mm_flags), 1);
    candle_tensor *wt = candle_topk_mask(ctx, p, c->n_expert_used, 1, 0.0);
    return c->expert_norm ? candle_div(ctx, wt, candle_sum(ctx, wt, 1, true)) : wt;
}

/* The mixture: each row's chosen experts weighted by their routing
 * weights, plus the shared expert scaled by its sigmoid gate. Stacked
 * experts go to the moe_ffn op, which multiplies only the rows routed to
 * each expert; one tensor per expert (older GGUF files) is computed for
 * every row and weighted by zero where not chosen. */
static candle_tensor *moe(decoder_step *st, const layer_weights *w, candle_tensor *h) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *wt = route(st, w, h), *out = NULL;
    if (w->gate_exps && wt)
        out = candle_moe_ffn(ctx, h, wt, w->gate_exps, w->up_exps, w->down_exps,
                             st->m->family->desc.ffn_act);
    for (int64_t e = 0; !w->gate_exps && e < st->c->n_expert && wt; e++) {
        candle_tensor *y = glu(st, h, w->exp_gate[e], w->exp_up[e], w->exp_down[e]);
        y = candle_mul(ctx, y, candle_narrow(ctx, wt, 1, e, 1));
        out = out ? candle_add(ctx, out, y) : y;
    }
    if (w->sh_up && out) {
        candle_tensor *y = glu(st, h, w->sh_gate, w->sh_up, w->sh_down);
        if (w->sh_gate_inp) y = candle_mul(ctx, y, candle_sigmoid(ctx, model_linear(ctx, st->m, h, w->sh_gate_inp, &st->gather, st->mm_flags)));
        out = candle_add(ctx, out, y);
    }
    return out;
}

static candle_tensor *ffn(decoder_step *st, const layer_weights *w, candle_tensor *x, int64_t il) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *h = norm(st, x, w->ffn_norm), *gate, *up;
    if (w->router) return moe(st, w, h);
    if (!w->w_gate) {
        candle_tensor *y = proj(st, h, w->w_up, il, LORA_UP);
        gate = candle_narrow(ctx, y, 1, 0, st->c->n_ff);
        up = candle_narrow(ctx, y, 1, st->c->n_ff, st->c->n_ff);
    } else {
        gate = proj(st, h, w->w_gate, il, LORA_GATE);
        up = proj(st, h, w->w_up, il, LORA_UP);
    }
    candle_tensor *f = candle_mul(ctx, candle_unary(ctx, st->m->family->desc.ffn_act, gate), up);
    f = proj(st, f, w->w_down, il, LORA_DOWN);
    return w->ffn_post_norm ? norm(st, f, w->ffn_post_norm) : f;
}

candle_tensor *decoder_layers(decoder_step *st, candle_tensor *x) {
    const layer_weights *lw = st->m->layers;
    double r = st->c->residual_scale;
    bool scaled = r != 1.0 && r != 0.0; /* Granite */
    for (int64_t il = 0; il < st->c->n_layer && x; il++) {
        candle_tensor *a = attention(st, &lw[il], x, il);
        x = candle_add(st->ctx, x, scaled ? candle_scale(st->ctx, a, r) : a);
        candle_tensor *f = ffn(st, &lw[il], x, il);
        x = candle_add(st->ctx, x, scaled ? candle_scale(st->ctx, f, r) : f);
    }
    return x;
}

candle_tensor *decoder_head(decoder_step *st, candle_tensor *x) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *logits = proj(st, norm(st, x, st->m->out_norm), st->m->output, -1, LORA_Q);
    double cap = st->c->final_softcap, ls = st->c->logit_scale;
    if (ls != 1.0 && ls != 0.0) logits = candle_scale(ctx, logits, 1.0 / ls);
    if (cap > 0)
        logits = candle_scale(ctx, candle_tanh(ctx, candle_scale(ctx, logits, 1.0 / cap)), cap);
    return logits;
}

/* The session's contiguous KV cache, filled at pos0.. */
static candle_tensor *session_attend(decoder_step *st, candle_tensor *q, candle_tensor *k,
                                     candle_tensor *v, int64_t il) {
    candle_session *s = st->user;
    candle_tensor *k_all, *v_all;
    if (!kv_cache_update(st->ctx, &s->kv, il, k, v, st->pos0, &k_all, &v_all)) return NULL;
    return decoder_attend_rows(st, q, k_all, v_all, st->pos0, il);
}

candle_tensor *decoder_forward(candle_session *s, const int32_t *tokens, int64_t n, bool all,
                               unsigned flags) {
    const candle_model *m = s->model;
    decoder_step st = {s->ctx, m, &m->cfg, n, s->pos, NULL, "model", session_attend, s,
                       model_rope_factors(m, s->kv.n_ctx), (flags & SESSION_ROW_STEPS) != 0,
                       s->lora, s->n_lora, s->pos + n, 0, NULL, NULL, {0},
                       (flags & SESSION_ROW_STEPS) ? CDL_MM_ROW_STEPS : 0};
    /* rows as one-row steps rotate as one-row steps would */
    int64_t *dyn = NULL;
    if (m->cfg.rope_dyn_factor > 0 && st.row_steps && n > 1) {
        if (!(dyn = malloc((size_t)(2 * n + 1) * sizeof *dyn))) {
            cdl_set_error(s->ctx, CANDLE_ERR_OOM, "out of memory: RoPE of %lld rows", (long long)n);
            return NULL;
        }
        for (int64_t r = 0; r <= n; r++) dyn[r] = r;
        for (int64_t r = 0; r < n; r++) dyn[n + 1 + r] = s->pos + r + 1;
        st.n_seq = (int)n;
        st.seq_rows = dyn;
        st.seq_lens = dyn + n + 1;
    }
    candle_tensor *x = decoder_layers(&st, decoder_embed(&st, tokens)); /* [n, n_embd] */
    free(dyn);
    if (!all && x) x = candle_narrow(s->ctx, x, 0, n - 1, 1);
    return flags & SESSION_HIDDEN ? norm(&st, x, m->out_norm) : decoder_head(&st, x);
}

/* The packed sequences of a bidirectional step (decoder_hidden_bidir):
 * sequence s is rows [off[s], off[s] + len[s]). */
typedef struct bidir_seqs {
    int64_t n_seq;
    const int64_t *len, *off;
    candle_tensor **local; /* [n_seq]: each one's local mask, or NULL */
    candle_tensor **out;   /* [n_seq] scratch: each one's attention rows */
} bidir_seqs;

/* Attention of one sequence's q [len, n_head, D], k, v [len, n_head_kv, D]
 * -> [len, n_head*head_dim]. */
static candle_tensor *bidir_one(decoder_step *st, int64_t il, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                candle_tensor *mask) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    candle_tensor *o = cdl_attention_rows(ctx, candle_unsqueeze(ctx, candle_transpose(ctx, q, 0, 1), 0),
                                          candle_unsqueeze(ctx, candle_transpose(ctx, k, 0, 1), 0),
                                          candle_unsqueeze(ctx, candle_transpose(ctx, v, 0, 1), 0), mask,
                                          c->attn_scale, false, model_attn_flags(st->m->layers[il].wo));
    /* [1, n_head, len, head_dim] */
    int64_t flat[2] = {q->shape[0], c->n_head * c->head_dim};
    return candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2, flat);
}

/* Without a cache: every row attends to every row of its sequence, within
 * the local mask on sliding-window layers. */
static candle_tensor *bidir_attend(decoder_step *st, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                   int64_t il) {
    const bidir_seqs *bs = st->user;
    bool local = decoder_layer_is_swa(st->c, il);
    if (bs->n_seq == 1) return bidir_one(st, il, q, k, v, local ? bs->local[0] : NULL);
    for (int64_t s = 0; s < bs->n_seq; s++) {
        int64_t off = bs->off[s], len = bs->len[s];
        bs->out[s] = bidir_one(st, il, candle_narrow(st->ctx, q, 0, off, len), candle_narrow(st->ctx, k, 0, off, len),
                               candle_narrow(st->ctx, v, 0, off, len), local ? bs->local[s] : NULL);
    }
    return model_concat_rows(st->ctx, bs->out, bs->n_seq);
}

candle_tensor *decoder_hidden_bidir(candle_ctx *ctx, const candle_model *m, model_ws *ws, const int32_t *tokens,
                                    const int64_t *lens, int64_t n_seq) {
    const candle_model_config *c = &m->cfg;
    int64_t n = 0;
    for (int64_t s = 0; s < n_seq; s++) {
        if (lens[s] <= 0 || lens[s] > c->n_ctx_train) {
            cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                          "%s: sequence %lld: %lld tokens (the model takes 1 to %lld: truncate the input)",
                          m->family->name, (long long)s, (long long)lens[s], (long long)c->n_ctx_train);
            return NULL;
        }
        n += lens[s];
    }
    if (c->attn_softcap > 0) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "%s: bidirectional attention with soft-capped scores",
                         m->family->name);
        return NULL;
    }
    /* off [n_seq], then tab [2 n_seq] (pointers of the same size) */
    int64_t *off = model_ws_buf(ws, WS_ENC_OFF, (size_t)(3 * n_seq) * sizeof *off, "sequence offsets");
    int32_t *pos = model_ws_buf(ws, WS_ENC_POS, (size_t)n * sizeof *pos, "positions");
    candle_tensor **tab = off ? (candle_tensor **)(void *)(off + n_seq) : NULL, *x = NULL;
    if (!off || !pos) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: a batch of %lld sequences", (long long)n_seq);
        return NULL;
    }
    memset(tab, 0, (size_t)(2 * n_seq) * sizeof *tab);
    for (int64_t s = 0, i = 0; s < n_seq; s++) {
        off[s] = i;
        for (int64_t j = 0; j < lens[s]; j++) pos[i++] = (int32_t)j;
        int64_t same = s - 1; /* sequences of one length share a mask */
        while (same >= 0 && lens[same] != lens[s]) same--;
        if (c->n_swa > 0) tab[s] = same >= 0 ? tab[same] : model_local_mask(ctx, ws, c->n_swa, lens[s]);
    }
    if (candle_errcode(ctx)) return NULL;
    bidir_seqs bs = {n_seq, lens, off, tab, tab + n_seq};
    decoder_step st = {ctx, m, c, n, 0, n_seq > 1 ? candle_tensor_from_i32(ctx, 1, &n, pos) : NULL, "model",
                       bidir_attend, &bs, model_rope_factors(m, c->n_ctx_train), false, NULL, 0,
                       0, 0, NULL, NULL, {0}, CDL_MM_FLOAT_ACT}; /* inputs fit n_ctx_train: no dynamic RoPE growth */
    x = decoder_layers(&st, decoder_embed(&st, tokens));
    return x ? norm(&st, x, m->out_norm) : NULL;
}
