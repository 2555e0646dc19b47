/* Batched decoder step over several sessions (see candle/batch.h). The
 * per-token parts (embeddings, norms, q/k/v/o and FFN matmuls, RoPE with a
 * position per row) run on the stacked rows; the KV writes and attention
 * run per sequence on narrow views of the stacked q/k/v. It mirrors
 * decoder.c's block; the test checks it against candle_session_eval. */
#include <stdlib.h>
#include <string.h>

#include "candle/batch.h"
#include "kv_pool-impl.h"
#include "model-impl.h"

struct candle_batch {
    const candle_model *model;
    candle_ctx *ctx; /* one step's graph; reset after each */
    candle_ctx_mark mark;
};

typedef struct bstep {
    candle_ctx *ctx;
    const candle_model *m;
    const candle_model_config *c;
    const candle_batch_seq *seqs;
    int n_seqs;
    int64_t n;              /* stacked tokens */
    candle_tensor *pos;     /* i32 [n]: each row's position */
} bstep;

candle_status candle_batch_init(candle_batch **out, const candle_model *m, int n_threads) {
    *out = NULL;
    candle_batch *b = calloc(1, sizeof *b);
    if (!b) return candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: batch");
    b->model = m;
    candle_ctx_params cp = candle_ctx_default_params();
    cp.n_threads = n_threads > 0 ? n_threads : m->n_threads;
    candle_status st = candle_ctx_init(&b->ctx, &cp);
    if (st) {
        free(b);
        return st;
    }
    b->mark = candle_ctx_get_mark(b->ctx);
    *out = b;
    return CANDLE_OK;
}

void candle_batch_free(candle_batch *b) {
    if (!b) return;
    candle_ctx_free(b->ctx);
    free(b);
}

const char *candle_batch_errmsg(const candle_batch *b) {
    return candle_errmsg(b->ctx);
}

static candle_tensor *embed(bstep *st, const int32_t *ids) {
    const candle_tensor *tab = st->m->tok_embd;
    const candle_dtype_traits *tr = candle_dtype_info(tab->dtype);
    int64_t d = st->c->n_embd, shape[2] = {st->n, d};
    if (tab->dtype != CANDLE_DTYPE_F32 && !tr->to_f32) {
        candle_set_error(st->ctx, CANDLE_ERR_UNSUPPORTED,
                         "batch: no conversion from %s for token embeddings", tr->name);
        return NULL;
    }
    candle_tensor *x = candle_tensor_new(st->ctx, CANDLE_DTYPE_F32, 2, shape);
    if (!x) return NULL;
    float *out = candle_tensor_data(x);
    const char *base = candle_tensor_data(tab);
    for (int64_t i = 0; i < st->n; i++) {
        const void *row = base + ids[i] * tab->stride[0];
        if (tab->dtype == CANDLE_DTYPE_F32) memcpy(out + i * d, row, (size_t)d * sizeof(float));
        else tr->to_f32(row, out + i * d, d);
    }
    return st->c->embd_scale != 1.0 ? candle_scale(st->ctx, x, st->c->embd_scale) : x;
}

static candle_tensor *norm(bstep *st, candle_tensor *x, candle_tensor *w) {
    return candle_rms_norm(st->ctx, x, w, st->c->norm_eps);
}

static candle_tensor *heads(bstep *st, candle_tensor *x, int64_t h) {
    int64_t shape[3] = {st->n, h, st->c->head_dim};
    return candle_reshape_copy(st->ctx, x, 3, shape);
}

static candle_tensor *rope(bstep *st, candle_tensor *x, int64_t il) {
    bool swa = decoder_layer_is_swa(st->c, il);
    candle_rope_params p = {
        .mode = (candle_rope_mode)st->c->rope_mode,
        .n_dims = (int)st->c->n_rot,
        .freq_base = swa ? st->c->rope_base_swa : st->c->rope_base,
        .freq_scale = swa ? 1.0 : st->c->rope_scale,
    };
    return candle_rope(st->ctx, x, st->pos, &p);
}

static void qkv(bstep *st, const layer_weights *w, candle_tensor *h, candle_tensor **q,
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

/* Write x [n, Hkv, D] into the pool rows of positions pos..pos+n, one
 * copy per run inside a block, each ordered after the one before; then
 * gather rows 0..pos+n through the block table as [1, Hkv, pos+n, D]. */
static candle_tensor *paged_update(bstep *st, const candle_batch_seq *sq, candle_tensor *pool,
                                   candle_tensor *x) {
    candle_ctx *ctx = st->ctx;
    const candle_kv_seq *ps = sq->paged;
    candle_tensor *last = NULL;
    for (int64_t t = 0; t < sq->n;) {
        int64_t p = ps->pos + t, off = p % CANDLE_KV_BLOCK;
        int64_t len = CANDLE_KV_BLOCK - off < sq->n - t ? CANDLE_KV_BLOCK - off : sq->n - t;
        int64_t row = (int64_t)ps->blocks[p / CANDLE_KV_BLOCK] * CANDLE_KV_BLOCK + off;
        candle_tensor *dst = candle_narrow(ctx, pool, 0, row, len);
        if (last && !nn_add_dependency(ctx, dst, last)) return NULL;
        last = candle_copy_into(ctx, dst, candle_narrow(ctx, x, 0, t, len));
        if (!last) return NULL;
        t += len;
    }
    int64_t total = ps->pos + sq->n, nb = (total + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK;
    bool run = true; /* blocks b, b+1, ...: the rows are one slice of the pool */
    for (int64_t i = 1; run && i < nb; i++) run = ps->blocks[i] == ps->blocks[0] + i;
    if (run) {
        candle_tensor *all =
            candle_narrow(ctx, pool, 0, (int64_t)ps->blocks[0] * CANDLE_KV_BLOCK, total);
        /* the dependency goes on the final view: views of views lose it */
        all = candle_unsqueeze(ctx, candle_transpose(ctx, all, 0, 1), 0);
        return nn_add_dependency(ctx, all, last) ? all : NULL;
    }
    int32_t *rows = malloc((size_t)total * sizeof *rows);
    if (!rows) {
        candle_set_error(ctx, CANDLE_ERR_OOM, "out of memory: block table rows");
        return NULL;
    }
    for (int64_t j = 0; j < total; j++)
        rows[j] = ps->blocks[j / CANDLE_KV_BLOCK] * CANDLE_KV_BLOCK + (int32_t)(j % CANDLE_KV_BLOCK);
    candle_tensor *idx = candle_tensor_from_i32(ctx, 1, &total, rows);
    free(rows);
    candle_tensor *all = candle_narrow(ctx, pool, 0, 0, pool->shape[0]);
    if (!idx || !nn_add_dependency(ctx, all, last)) return NULL;
    candle_tensor *g = candle_index_select(ctx, all, 0, idx); /* [total, Hkv, D] */
    return candle_unsqueeze(ctx, candle_transpose(ctx, g, 0, 1), 0);
}

/* Attention of one sequence: rows off..off+n of the stacked q, k, v. */
static candle_tensor *attend_one(bstep *st, const candle_batch_seq *sq, int64_t off,
                                 candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                 int64_t il) {
    candle_ctx *ctx = st->ctx;
    const candle_model_config *c = st->c;
    candle_tensor *k_all, *v_all;
    candle_tensor *ki = candle_narrow(ctx, k, 0, off, sq->n);
    candle_tensor *vi = candle_narrow(ctx, v, 0, off, sq->n);
    candle_tensor *qi = candle_narrow(ctx, q, 0, off, sq->n);
    int64_t pos = sq->paged ? sq->paged->pos : sq->sess->pos;
    if (sq->paged) {
        k_all = paged_update(st, sq, sq->pool->k[il], ki);
        v_all = paged_update(st, sq, sq->pool->v[il], vi);
        if (!k_all || !v_all) return NULL;
    } else if (!kv_cache_update(ctx, &sq->sess->kv, il, ki, vi, pos, &k_all, &v_all)) {
        return NULL;
    }
    nn_attn_params ap = {
        .scale = c->attn_scale,
        .softcap = c->attn_softcap,
        .window = decoder_layer_is_swa(c, il) ? c->n_swa : 0,
        .pos = pos,
    };
    candle_tensor *o = nn_attention(ctx, candle_unsqueeze(ctx, candle_transpose(ctx, qi, 0, 1), 0),
                                    k_all, v_all, &ap); /* [1, n_head, n, head_dim] */
    int64_t flat[2] = {sq->n, c->n_head * c->head_dim};
    return candle_reshape_copy(ctx, candle_transpose(ctx, candle_squeeze(ctx, o, 0), 0, 1), 2,
                               flat);
}

static candle_tensor *attention(bstep *st, const layer_weights *w, candle_tensor *x, int64_t il) {
    candle_ctx *ctx = st->ctx;
    candle_tensor *q, *k, *v;
    qkv(st, w, norm(st, x, w->attn_norm), &q, &k, &v);
    q = rope(st, q, il);
    k = rope(st, k, il);
    if (!q || !k || !v) return NULL;
    candle_tensor **outs = calloc((size_t)st->n_seqs, sizeof *outs);
    if (!outs) {
        candle_set_error(ctx, CANDLE_ERR_OOM, "out of memory: batch attention");
        return NULL;
    }
    candle_tensor *o = NULL;
    int64_t off = 0;
    int i;
    for (i = 0; i < st->n_seqs; i++) {
        outs[i] = attend_one(st, &st->seqs[i], off, q, k, v, il);
        if (!outs[i]) break;
        off += st->seqs[i].n;
    }
    if (i == st->n_seqs)
        o = st->n_seqs == 1 ? outs[0] : candle_concat(ctx, outs, st->n_seqs, 0);
    free(outs);
    o = candle_matmul(ctx, o, w->wo);
    return w->attn_post_norm ? norm(st, o, w->attn_post_norm) : o;
}

static candle_tensor *ffn(bstep *st, const layer_weights *w, candle_tensor *x) {
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
    candle_tensor *f = candle_mul(ctx, candle_unary(ctx, st->m->family->opts.ffn_act, gate), up);
    f = candle_matmul(ctx, f, w->w_down);
    return w->ffn_post_norm ? norm(st, f, w->ffn_post_norm) : f;
}

/* Logits [n_seqs, n_vocab] of each sequence's last row. */
static candle_tensor *forward(bstep *st, const int32_t *ids) {
    candle_ctx *ctx = st->ctx;
    const candle_model *m = st->m;
    candle_tensor *x = embed(st, ids);
    for (int64_t il = 0; il < st->c->n_layer && x; il++) {
        x = candle_add(ctx, x, attention(st, &m->layers[il], x, il));
        x = candle_add(ctx, x, ffn(st, &m->layers[il], x));
    }
    if (!x) return NULL;
    int32_t *last = malloc((size_t)st->n_seqs * sizeof *last);
    if (!last) {
        candle_set_error(ctx, CANDLE_ERR_OOM, "out of memory: batch");
        return NULL;
    }
    int64_t off = 0, ns = st->n_seqs;
    for (int i = 0; i < st->n_seqs; i++) {
        off += st->seqs[i].n;
        last[i] = (int32_t)(off - 1);
    }
    candle_tensor *idx = candle_tensor_from_i32(ctx, 1, &ns, last);
    free(last);
    x = candle_index_select(ctx, x, 0, idx);
    candle_tensor *logits = candle_matmul(ctx, norm(st, x, m->out_norm), m->output);
    double cap = st->c->final_softcap;
    if (cap > 0)
        logits = candle_scale(ctx, candle_tanh(ctx, candle_scale(ctx, logits, 1.0 / cap)), cap);
    return logits;
}

static bool valid_tokens(candle_batch *b, const candle_batch_seq *q, int i) {
    int64_t n_vocab = b->model->cfg.n_vocab;
    for (int64_t t = 0; t < q->n; t++)
        if (q->tokens[t] < 0 || q->tokens[t] >= n_vocab) {
            candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                             "batch: sequence %d: token %d out of range [0, %lld)", i,
                             (int)q->tokens[t], (long long)n_vocab);
            return false;
        }
    return true;
}

/* Validate every sequence, then take the paged ones' new blocks. */
static candle_status check(candle_batch *b, const candle_batch_seq *seqs, int n_seqs,
                           int64_t *total) {
    int64_t n = 0;
    if (n_seqs <= 0 || !seqs)
        return candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG, "batch: no sequences");
    for (int i = 0; i < n_seqs; i++) {
        const candle_batch_seq *q = &seqs[i];
        bool paged = q->paged != NULL;
        if (paged ? q->sess || !q->pool || q->pool->model != b->model
                  : !q->sess || q->sess->model != b->model)
            return candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: needs a session, or a paged sequence "
                                    "and its pool, of this model", i);
        if (q->n <= 0 || !q->tokens)
            return candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: no tokens", i);
        int64_t pos = paged ? q->paged->pos : q->sess->pos;
        int64_t n_ctx = paged ? q->paged->n_ctx : q->sess->kv.n_ctx;
        if (q->n > n_ctx - pos)
            return candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: %lld tokens at position %lld do not fit "
                                    "in its context of %lld",
                                    i, (long long)q->n, (long long)pos, (long long)n_ctx);
        for (int j = 0; j < i; j++)
            if (paged ? seqs[j].paged == q->paged : seqs[j].sess == q->sess)
                return candle_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                        "batch: sequences %d and %d share a session", j, i);
        if (!valid_tokens(b, q, i)) return candle_errcode(b->ctx);
        n += q->n;
    }
    for (int i = 0; i < n_seqs; i++)
        if (seqs[i].paged && candle_kv_seq_reserve(seqs[i].pool, seqs[i].paged, seqs[i].n))
            return candle_set_error(b->ctx, candle_last_error(), "batch: sequence %d: %s", i,
                                    candle_last_errmsg());
    *total = n;
    return CANDLE_OK;
}

candle_status candle_batch_eval(candle_batch *b, const candle_batch_seq *seqs, int n_seqs) {
    candle_ctx_clear_error(b->ctx);
    int64_t n = 0;
    candle_status st = check(b, seqs, n_seqs, &n);
    if (st) return st;
    int32_t *ids = malloc((size_t)n * sizeof *ids), *pos = malloc((size_t)n * sizeof *pos);
    float *out = malloc((size_t)n_seqs * (size_t)b->model->cfg.n_vocab * sizeof *out);
    if (!ids || !pos || !out) {
        free(ids);
        free(pos);
        free(out);
        return candle_set_error(b->ctx, CANDLE_ERR_OOM, "out of memory: batch of %lld tokens",
                                (long long)n);
    }
    int64_t off = 0;
    for (int i = 0; i < n_seqs; i++) {
        memcpy(ids + off, seqs[i].tokens, (size_t)seqs[i].n * sizeof *ids);
        int64_t p0 = seqs[i].paged ? seqs[i].paged->pos : seqs[i].sess->pos;
        for (int64_t t = 0; t < seqs[i].n; t++) pos[off + t] = (int32_t)(p0 + t);
        off += seqs[i].n;
    }
    bstep bs = {b->ctx, b->model, &b->model->cfg, seqs, n_seqs, n, NULL};
    bs.pos = candle_tensor_from_i32(b->ctx, 1, &n, pos);
    candle_tensor *logits = bs.pos ? forward(&bs, ids) : NULL;
    st = logits ? candle_compute(b->ctx, logits) : candle_errcode(b->ctx);
    if (!st && !logits) st = candle_set_error(b->ctx, CANDLE_ERR_INTERNAL, "batch: no logits");
    if (!st) st = candle_tensor_to_f32(logits, out);
    candle_ctx_reset(b->ctx, b->mark);
    if (!st) {
        size_t nv = (size_t)b->model->cfg.n_vocab;
        for (int i = 0; i < n_seqs; i++) {
            if (seqs[i].logits) memcpy(seqs[i].logits, out + (size_t)i * nv, nv * sizeof *out);
            if (seqs[i].paged) seqs[i].paged->pos += seqs[i].n;
            else seqs[i].sess->pos += seqs[i].n;
        }
    }
    free(ids);
    free(pos);
    free(out);
    return st;
}
