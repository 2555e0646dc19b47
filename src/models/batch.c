/* Batched decoder step over several sessions (see candle/batch.h). The
 * per-token parts (embeddings, norms, q/k/v/o and FFN matmuls, RoPE with a
 * position per row) run on the stacked rows; the KV writes and attention
 * run per sequence on narrow views of the stacked q/k/v. The blocks are
 * decoder.c's; the test checks it against candle_session_eval. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "candle/batch.h"
#include "kv_pool-impl.h"
#include "model-impl.h"

struct candle_batch {
    const candle_model *model;
    candle_backend *backend; /* the model's, or its own (owns_backend) */
    bool owns_backend;
    candle_ctx *ctx; /* one step's graph; reset after each */
    candle_ctx_mark mark;
};

/* decoder_step.user of a batch step: the stacked sequences, in row order. */
typedef struct bseqs {
    const candle_batch_seq *seqs;
    int n_seqs;
    candle_tensor *table; /* [n, 1 + T] i32 when every sequence is paged: one
                             paged attention node per layer serves them all */
} bseqs;

candle_status candle_batch_init(candle_batch **out, const candle_model *m, int n_threads) {
    *out = NULL;
    if (model_need_decoder(m, "batch_init")) return candle_last_error();
    candle_batch *b = calloc(1, sizeof *b);
    if (!b) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: batch");
    b->model = m;
    candle_ctx_params cp = candle_ctx_default_params();
    candle_status st = model_backend_for(m, n_threads, &b->backend, &b->owns_backend);
    cp.backend = b->backend;
    if (!st) st = candle_ctx_init(&b->ctx, &cp);
    if (st) {
        candle_batch_free(b);
        return st;
    }
    b->mark = candle_ctx_get_mark(b->ctx);
    *out = b;
    return CANDLE_OK;
}

void candle_batch_free(candle_batch *b) {
    if (!b) return;
    candle_ctx_free(b->ctx);
    if (b->owns_backend) candle_backend_free(b->backend);
    free(b);
}

candle_status candle_batch_errcode(const candle_batch *b) { return b ? candle_errcode(b->ctx) : CANDLE_ERR_INVALID_ARG; }

const char *candle_batch_errmsg(const candle_batch *b) { return b ? candle_errmsg(b->ctx) : "batch is NULL"; }

/* Write x [n, Hkv, D] into the pool rows of positions pos..pos+n, one
 * copy per run inside a block, each ordered after the one before; then
 * gather rows 0..pos+n through the block table as [1, Hkv, pos+n, D]. */
static candle_tensor *paged_update(decoder_step *st, const candle_batch_seq *sq, candle_tensor *pool,
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
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: block table rows");
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
static candle_tensor *attend_one(decoder_step *st, const candle_batch_seq *sq, int64_t off,
                                 candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                 int64_t il) {
    candle_ctx *ctx = st->ctx;
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
    return qi ? decoder_attend_rows(st, qi, k_all, v_all, pos, il) : NULL;
}

/* Every row's attention in one node, through the block tables. */
static candle_tensor *paged_attend(decoder_step *st, candle_tensor *q, candle_tensor *k,
                                   candle_tensor *v, int64_t il) {
    const bseqs *bs = st->user;
    const candle_model_config *c = st->c;
    const candle_kv_pool *pool = bs->seqs[0].pool;
    int64_t window = decoder_layer_is_swa(c, il) ? c->n_swa : 0;
    candle_tensor *o = candle_paged_attention(st->ctx, q, k, v, pool->k[il], pool->v[il], bs->table,
                                              CANDLE_KV_BLOCK, window,
                                              c->attn_scale > 0 ? c->attn_scale : 0.0);
    int64_t flat[2] = {q->shape[0], c->n_head * c->head_dim};
    return candle_reshape(st->ctx, o, 2, flat);
}

/* Each sequence's attention, stacked back as [n, n_head*head_dim]. */
static candle_tensor *batch_attend(decoder_step *st, candle_tensor *q, candle_tensor *k,
                                   candle_tensor *v, int64_t il) {
    const bseqs *bs = st->user;
    if (bs->table) return paged_attend(st, q, k, v, il);
    candle_tensor **outs = calloc((size_t)bs->n_seqs, sizeof *outs);
    if (!outs) {
        cdl_set_error(st->ctx, CANDLE_ERR_OOM, "out of memory: batch attention");
        return NULL;
    }
    candle_tensor *o = NULL;
    int64_t off = 0;
    int i;
    for (i = 0; i < bs->n_seqs; i++) {
        outs[i] = attend_one(st, &bs->seqs[i], off, q, k, v, il);
        if (!outs[i]) break;
        off += bs->seqs[i].n;
    }
    if (i == bs->n_seqs)
        o = bs->n_seqs == 1 ? outs[0] : candle_concat(st->ctx, outs, bs->n_seqs, 0);
    free(outs);
    return o;
}

/* Rows of logits a sequence wants (0: none). */
static int64_t n_out_rows(const candle_batch_seq *q) {
    return !q->logits ? 0 : q->n_logits > 1 ? q->n_logits : 1;
}

/* Logits [k, n_vocab] of the rows the sequences want, each one's last
 * n_out_rows (the output product costs a row more than a layer: a prompt
 * chunk that is not its prompt's last skips it); with k = 0, the last
 * layer's rows, computed for the keys and values they write. */
static candle_tensor *forward(decoder_step *st, const int32_t *ids) {
    candle_ctx *ctx = st->ctx;
    const bseqs *bs = st->user;
    candle_tensor *x = decoder_layers(st, decoder_embed(st, ids)); /* [n, n_embd] */
    if (!x) return NULL;
    int64_t off = 0, k = 0;
    for (int i = 0; i < bs->n_seqs; i++) k += n_out_rows(&bs->seqs[i]);
    int32_t *last = malloc((size_t)(k ? k : 1) * sizeof *last);
    if (!last) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: batch");
        return NULL;
    }
    k = 0;
    for (int i = 0; i < bs->n_seqs; i++) {
        off += bs->seqs[i].n;
        for (int64_t r = n_out_rows(&bs->seqs[i]); r > 0; r--) last[k++] = (int32_t)(off - r);
    }
    candle_tensor *idx = k ? candle_tensor_from_i32(ctx, 1, &k, last) : NULL;
    free(last);
    return k ? decoder_head(st, candle_index_select(ctx, x, 0, idx)) : x;
}

static bool valid_tokens(candle_batch *b, const candle_batch_seq *q, int i) {
    int64_t n_vocab = b->model->cfg.n_vocab;
    for (int64_t t = 0; t < q->n; t++)
        if (q->tokens[t] < 0 || q->tokens[t] >= n_vocab) {
            cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
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
        return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG, "batch: no sequences");
    for (int i = 0; i < n_seqs; i++) {
        const candle_batch_seq *q = &seqs[i];
        bool paged = q->paged != NULL;
        if (paged ? q->sess || !q->pool || q->pool->model != b->model
                  : !q->sess || q->sess->model != b->model)
            return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: needs a session, or a paged sequence "
                                    "and its pool, of this model", i);
        if (q->n <= 0 || !q->tokens)
            return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: no tokens", i);
        if (q->n_logits < 0 || q->n_logits > q->n)
            return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: logits of %lld rows wanted, it has %lld", i,
                                    (long long)q->n_logits, (long long)q->n);
        int64_t pos = paged ? q->paged->pos : q->sess->pos;
        int64_t n_ctx = paged ? q->paged->n_ctx : q->sess->kv.n_ctx;
        if (q->n > n_ctx - pos)
            return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                    "batch: sequence %d: %lld tokens at position %lld do not fit "
                                    "in its context of %lld",
                                    i, (long long)q->n, (long long)pos, (long long)n_ctx);
        for (int j = 0; j < i; j++)
            if (paged ? seqs[j].paged == q->paged : seqs[j].sess == q->sess)
                return cdl_set_error(b->ctx, CANDLE_ERR_INVALID_ARG,
                                        "batch: sequences %d and %d share a session", j, i);
        if (!valid_tokens(b, q, i)) return candle_errcode(b->ctx);
        n += q->n;
    }
    for (int i = 0; i < n_seqs; i++)
        if (seqs[i].paged && candle_kv_seq_reserve(seqs[i].pool, seqs[i].paged, seqs[i].n))
            return cdl_set_error(b->ctx, candle_last_error(), "batch: sequence %d: %s", i,
                                    candle_last_errmsg());
    *total = n;
    return CANDLE_OK;
}

static _Atomic bool g_gather;

void cdl_batch_set_gather(bool on) { g_gather = on; }

/* The one-node path needs every sequence paged in one pool, and attention
 * without soft-capped scores (those take the explicit chain per sequence).
 * cdl_batch_set_gather keeps the per-sequence gather (comparisons). */
static bool use_paged_op(const candle_batch *b, const candle_batch_seq *seqs, int n_seqs) {
    if (g_gather || b->model->cfg.attn_softcap > 0) return false;
    for (int i = 0; i < n_seqs; i++)
        if (!seqs[i].paged || seqs[i].pool != seqs[0].pool) return false;
    return true;
}

/* Row t of the step: its position, then its sequence's block ids (the
 * blocks are reserved by then); unused entries 0. */
static candle_tensor *block_table(candle_ctx *ctx, const candle_batch_seq *seqs, int n_seqs,
                                  int64_t n) {
    int64_t T = 1;
    for (int i = 0; i < n_seqs; i++)
        if (seqs[i].paged->n_blocks > T) T = seqs[i].paged->n_blocks;
    int64_t shape[2] = {n, 1 + T};
    int32_t *tab = calloc((size_t)(n * (1 + T)), sizeof *tab);
    if (!tab) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: block table of %lld rows",
                         (long long)n);
        return NULL;
    }
    int64_t r = 0;
    for (int i = 0; i < n_seqs; i++) {
        const candle_kv_seq *ps = seqs[i].paged;
        for (int64_t t = 0; t < seqs[i].n; t++, r++) {
            tab[r * (1 + T)] = (int32_t)(ps->pos + t);
            memcpy(tab + r * (1 + T) + 1, ps->blocks, (size_t)ps->n_blocks * sizeof *tab);
        }
    }
    candle_tensor *t = candle_tensor_from_i32(ctx, 2, shape, tab);
    free(tab);
    return t;
}

/* The one RoPE factor set of the step's rows: sequences whose capacities
 * fall on both sides of Phi-3's original context would need two. */
static bool rope_factors(candle_batch *b, const candle_batch_seq *seqs, int n_seqs,
                         candle_tensor **out) {
    for (int i = 0; i < n_seqs; i++) {
        int64_t n_ctx = seqs[i].paged ? seqs[i].paged->n_ctx : seqs[i].sess->kv.n_ctx;
        candle_tensor *ff = model_rope_factors(b->model, n_ctx);
        if (i && ff != *out) {
            cdl_set_error(b->ctx, CANDLE_ERR_UNSUPPORTED,
                             "batch: sequences 0 and %d use different RoPE factors (contexts on "
                             "both sides of the original context %lld)",
                             i, (long long)b->model->cfg.rope_n_ctx_orig);
            return false;
        }
        *out = ff;
    }
    return true;
}

/* Dynamic NTK RoPE: each sequence rotates at the base of the length it
 * reaches, and rows whose logits verify drafted tokens each at the base of
 * a one-token step there, so that speculation gives plain decoding's bits
 * (decoder_step's seq_rows/seq_lens, *buf to free). */
static bool dyn_ranges(candle_batch *b, const candle_batch_seq *seqs, int n_seqs, const int32_t *pos,
                       decoder_step *ds, int64_t **buf) {
    *buf = NULL;
    if (!(b->model->cfg.rope_dyn_factor > 0)) return true;
    int64_t n_ranges = 0;
    for (int i = 0; i < n_seqs; i++) n_ranges += n_out_rows(&seqs[i]) > 1 ? seqs[i].n : 1;
    if (n_ranges > INT32_MAX || !(*buf = malloc((size_t)(2 * n_ranges + 1) * sizeof **buf))) {
        cdl_set_error(b->ctx, CANDLE_ERR_OOM, "out of memory: RoPE of %lld ranges", (long long)n_ranges);
        return false;
    }
    int64_t *rows = *buf, *lens = *buf + n_ranges + 1, r = 0, off = 0;
    for (int i = 0; i < n_seqs; i++) {
        bool each = n_out_rows(&seqs[i]) > 1;
        for (int64_t t = 0; t < (each ? seqs[i].n : 1); t++, r++) {
            rows[r] = off + t;
            lens[r] = each ? pos[off + t] + 1 : pos[off + seqs[i].n - 1] + 1;
        }
        off += seqs[i].n;
    }
    rows[r] = off;
    ds->n_seq = (int)n_ranges;
    ds->seq_rows = rows;
    ds->seq_lens = lens;
    return true;
}

candle_status candle_batch_eval(candle_batch *b, const candle_batch_seq *seqs, int n_seqs) {
    return candle_batch_eval_lora(b, seqs, n_seqs, NULL, 0);
}

candle_status candle_batch_eval_lora(candle_batch *b, const candle_batch_seq *seqs, int n_seqs,
                                     const candle_lora_use *lora, int n_lora) {
    candle_ctx_clear_error(b->ctx);
    int64_t n = 0;
    if (lora_check_use(b->ctx, b->model, lora, n_lora, "batch")) return candle_errcode(b->ctx);
    candle_status st = check(b, seqs, n_seqs, &n);
    if (st) return st;
    int32_t *ids = malloc((size_t)n * sizeof *ids), *pos = malloc((size_t)n * sizeof *pos);
    float *out = NULL; /* the logits as f32, when the graph's are not plain f32 */
    if (!ids || !pos) {
        free(ids);
        free(pos);
        return cdl_set_error(b->ctx, CANDLE_ERR_OOM, "out of memory: batch of %lld tokens",
                                (long long)n);
    }
    int64_t off = 0;
    for (int i = 0; i < n_seqs; i++) {
        memcpy(ids + off, seqs[i].tokens, (size_t)seqs[i].n * sizeof *ids);
        int64_t p0 = seqs[i].paged ? seqs[i].paged->pos : seqs[i].sess->pos;
        for (int64_t t = 0; t < seqs[i].n; t++) pos[off + t] = (int32_t)(p0 + t);
        off += seqs[i].n;
    }
    bseqs bq = {seqs, n_seqs, NULL};
    /* a step that verifies drafted tokens (a sequence wants several rows'
     * logits) keeps every row's one-row bits in its products (the
     * attention does on paged sequences) */
    bool verifies = false;
    for (int i = 0; i < n_seqs; i++) verifies |= seqs[i].logits && seqs[i].n_logits > 1;
    decoder_step ds = {b->ctx, b->model, &b->model->cfg, n, 0, NULL, "batch", batch_attend, &bq,
                       NULL, false, n_lora ? lora : NULL, n_lora, 0, 0, NULL, NULL, {0},
                       verifies ? CDL_MM_ROW_STEPS : 0};
    int64_t *dyn = NULL;
    if (!rope_factors(b, seqs, n_seqs, &ds.rope_ff) || !dyn_ranges(b, seqs, n_seqs, pos, &ds, &dyn)) {
        free(ids);
        free(pos);
        return candle_errcode(b->ctx);
    }
    ds.pos = candle_tensor_from_i32(b->ctx, 1, &n, pos);
    bool ok = ds.pos && (!use_paged_op(b, seqs, n_seqs) || (bq.table = block_table(b->ctx, seqs, n_seqs, n)));
    candle_tensor *logits = ok ? forward(&ds, ids) : NULL;
    free(dyn);
    st = logits ? candle_compute(b->ctx, logits) : candle_errcode(b->ctx);
    if (!st && !logits) st = cdl_set_error(b->ctx, CANDLE_ERR_INTERNAL, "batch: no logits");
    int64_t n_out = 0;
    for (int i = 0; i < n_seqs; i++) n_out += n_out_rows(&seqs[i]);
    /* plain f32 host logits go straight to each sequence (a copy of 16 x 196 KiB less per step) */
    const float *all = out;
    if (st || !n_out) {
        /* nothing to hand out */
    } else if (logits->dtype == CANDLE_DTYPE_F32 && candle_tensor_is_contiguous(logits) &&
               candle_tensor_is_host(logits)) {
        all = candle_tensor_data(logits);
    } else if (!(out = malloc((size_t)n_out * (size_t)b->model->cfg.n_vocab * sizeof *out))) {
        st = cdl_set_error(b->ctx, CANDLE_ERR_OOM, "out of memory: logits of %lld rows", (long long)n_out);
    } else {
        st = candle_tensor_to_f32(logits, out);
    }
    if (out) all = out;
    /* as the session path (session.c check_finite): NaN or Inf logits are an
     * error, not text */
    int64_t bad = st || !n_out ? -1 : model_first_nonfinite(all, (int64_t)n_out * b->model->cfg.n_vocab);
    if (bad >= 0)
        st = cdl_set_error(b->ctx, CANDLE_ERR_NUMERIC,
                              "batch: non-finite logits (%g at output row %lld, index %lld): the "
                              "model's weights or activations are NaN or Inf",
                              all[bad], (long long)(bad / b->model->cfg.n_vocab),
                              (long long)(bad % b->model->cfg.n_vocab));
    if (!st) {
        size_t nv = (size_t)b->model->cfg.n_vocab, k = 0;
        for (int i = 0; i < n_seqs; i++) {
            size_t r = (size_t)n_out_rows(&seqs[i]);
            if (r) memcpy(seqs[i].logits, all + k * nv, r * nv * sizeof *all);
            k += r;
            if (seqs[i].paged) seqs[i].paged->pos += seqs[i].n;
            else seqs[i].sess->pos += seqs[i].n;
        }
    }
    candle_ctx_reset(b->ctx, b->mark);
    free(ids);
    free(pos);
    free(out);
    return st;
}
