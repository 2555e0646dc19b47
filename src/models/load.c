/* Loading a decoder's weights from its source: zero-copy leaves over the
 * file where the weights are used as stored, each checked against the shape
 * the config implies. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "model-impl.h"

typedef struct loader {
    candle_model *m;
    char name[96];
} loader;

/* t on the model's backend: a backend the host cannot address computes on
 * its own copy. */
static candle_tensor *on_backend(loader *L, candle_tensor *t) {
    if (!t || L->m->backend->iface->host_visible) return t;
    candle_tensor *d = candle_tensor_new(L->m->ctx, t->dtype, t->rank, t->shape);
    if (!d || candle_tensor_copy_bytes(d, 0, t, 0, candle_tensor_nbytes(t))) return NULL;
    snprintf(d->name, sizeof d->name, "%s", t->name);
    return d;
}

/* The leaf of a tensor, or NULL (with an error when required). With order,
 * a linear in the form its products run fastest
 * (candle_weights_load_linear_split), the order its inputs take and its
 * zero-point correction over groups of *group inputs (each NULL if none). */
static candle_tensor *leaf_load(loader *L, int64_t il, const char *what, bool required, candle_tensor **order,
                                candle_tensor **corr, int64_t *group) {
    if (il >= 0) snprintf(L->name, sizeof L->name, "blk.%" PRId64 ".%s", il, what);
    else snprintf(L->name, sizeof L->name, "%s", what);
    const candle_weights *w = L->m->weights;
    int64_t i = candle_weights_find_tensor(w, L->name);
    if (i < 0) {
        if (required) {
            char src[160];
            candle_weights_src_name(w, L->name, src, sizeof src);
            cdl_set_error(L->m->ctx, CANDLE_ERR_FORMAT, "model: %s: missing tensor '%s' (%s)",
                             candle_weights_path(w), src, L->m->family->name);
        }
        return NULL;
    }
    candle_tensor *t = order ? candle_weights_load_linear_split(w, L->m->ctx, L->name, order, corr, group)
                             : candle_weights_load_tensor(w, L->m->ctx, L->name);
    if (!t) return NULL;
    bool repacked = order && (*order || *corr || t->dtype != candle_weights_tensor(w, i)->dtype);
    L->m->weight_bytes += repacked ? candle_tensor_nbytes(t) : candle_weights_tensor(w, i)->size;
    if (order && *corr) L->m->weight_bytes += candle_tensor_nbytes(*corr);
    if (order && *order && !(*order = on_backend(L, *order))) return NULL;
    if (order && *corr && !(*corr = on_backend(L, *corr))) return NULL;
    return on_backend(L, t);
}

static candle_tensor *leaf(loader *L, int64_t il, const char *what, bool required) {
    return leaf_load(L, il, what, required, NULL, NULL, NULL);
}

/* How messages call the current tensor: its name in the source's file, and
 * the file. */
static const char *where(loader *L, char *buf, size_t n) {
    const candle_weights *w = L->m->weights;
    char src[160];
    candle_weights_src_name(w, L->name, src, sizeof src);
    int64_t i = candle_weights_find_tensor(w, L->name);
    snprintf(buf, n, "%s: tensor '%s'", i >= 0 ? candle_weights_tensor(w, i)->file : "", src);
    return buf;
}

static bool shape_is(loader *L, candle_tensor *t, int64_t d0, int64_t d1) {
    if (!t) return false;
    bool ok = d1 ? t->rank == 2 && t->shape[0] == d0 && t->shape[1] == d1
                 : t->rank == 1 && t->shape[0] == d0;
    if (!ok) {
        char got[64], want[64], at[320];
        int64_t w[2] = {d0, d1};
        cdl_set_error(L->m->ctx, CANDLE_ERR_FORMAT, "model: %s has shape %s, want %s",
                         where(L, at, sizeof at), candle_shape_str(t->rank, t->shape, got, sizeof got),
                         candle_shape_str(d1 ? 2 : 1, w, want, sizeof want));
    }
    return ok;
}

/* Checked at load so that a file with, say, an integer weight is refused
 * here rather than by the first evaluation. */
static bool dtype_ok(loader *L, const candle_tensor *t, bool ok, const char *want) {
    char at[320];
    if (!ok)
        cdl_set_error(L->m->ctx, CANDLE_ERR_FORMAT, "model: %s has dtype %s, want %s",
                         where(L, at, sizeof at), candle_dtype_name(t->dtype), want);
    return ok;
}

/* Norm weights and biases act on f32 activations. */
static candle_tensor *vec(loader *L, int64_t il, const char *what, int64_t n, bool required) {
    candle_tensor *t = leaf(L, il, what, required);
    return t && shape_is(L, t, n, 0) &&
                   dtype_ok(L, t, t->dtype == CANDLE_DTYPE_F32, "f32")
               ? t
               : NULL;
}

/* Matmul takes a float or block-quantized weight. */
static bool weight_dtype_ok(loader *L, const candle_tensor *t) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    return dtype_ok(L, t, tr->is_float || (tr->is_quantized && tr->to_f32),
                    "a float or quantized type");
}

/* A float matrix in the model's weight_dtype (f16, bf16: rounded to nearest
 * even; q8_0: quantized, rows whose length is no whole number of its blocks
 * stay as stored): a copy in the model's memory, converted a row at a time. */
static candle_tensor *to_weight_dtype(loader *L, candle_tensor *t) {
    candle_model *m = L->m;
    candle_dtype want = m->weight_dtype;
    if (!t || want == CANDLE_DTYPE_F32 || t->dtype == want || !candle_dtype_info(t->dtype)->is_float ||
        !candle_tensor_is_host(t) || t->shape[1] % candle_dtype_info(want)->block_size)
        return t;
    candle_tensor *d = candle_tensor_new(m->ctx, want, t->rank, t->shape);
    float *row = malloc((size_t)t->shape[1] * sizeof *row);
    const candle_dtype_traits *from = candle_dtype_info(t->dtype), *to = candle_dtype_info(want);
    if (!d || !row || !from->to_f32 || !to->from_f32) {
        free(row);
        cdl_set_error(m->ctx, CANDLE_ERR_OOM, "out of memory: %s as %s", L->name, candle_dtype_name(want));
        return NULL;
    }
    const char *src = candle_tensor_data(t);
    char *dst = candle_tensor_data(d);
    size_t in_row = candle_dtype_row_size(t->dtype, t->shape[1]), out_row = candle_dtype_row_size(want, t->shape[1]);
    for (int64_t r = 0; r < t->shape[0]; r++) {
        from->to_f32(src + (size_t)r * in_row, row, t->shape[1]);
        to->from_f32(row, dst + (size_t)r * out_row, t->shape[1]);
    }
    free(row);
    snprintf(d->name, sizeof d->name, "%s", t->name);
    m->weight_bytes -= candle_tensor_nbytes(t);
    m->weight_bytes += candle_tensor_nbytes(d);
    return d;
}

/* A linear weight [n_out, n_in] kept as its transpose [n_in, n_out]; one
 * whose inputs come in another order (GPTQ act-order) or that comes with a
 * zero-point correction (asymmetric 4-bit as Q4_0) is listed with them in
 * m->in_orders. */
static candle_tensor *lin(loader *L, int64_t il, const char *what, int64_t n_out, int64_t n_in) {
    candle_tensor *order = NULL, *corr = NULL;
    int64_t group = 0;
    candle_tensor *t = leaf_load(L, il, what, true, &order, &corr, &group);
    if (!shape_is(L, t, n_out, n_in) || !weight_dtype_ok(L, t) || !(t = to_weight_dtype(L, t))) return NULL;
    candle_tensor *wt = candle_transpose(L->m->ctx, t, 0, 1);
    candle_tensor *ct = corr ? candle_transpose(L->m->ctx, corr, 0, 1) : NULL;
    if (corr && !ct) return NULL;
    return wt && (order || ct) && model_add_in_order(L->m, wt, order, ct, group) ? NULL : wt;
}

static bool load_attention(loader *L, layer_weights *w, int64_t il) {
    const candle_model_config *c = &L->m->cfg;
    const model_desc *o = &L->m->family->desc;
    int64_t nq = c->n_head * c->head_dim, nkv = c->n_head_kv * c->head_dim;
    if (o->fused_qkv) {
        w->wqkv = lin(L, il, "attn_qkv.weight", nq + 2 * nkv, c->n_embd);
    } else {
        w->wq = lin(L, il, "attn_q.weight", nq, c->n_embd);
        w->wk = lin(L, il, "attn_k.weight", nkv, c->n_embd);
        w->wv = lin(L, il, "attn_v.weight", nkv, c->n_embd);
    }
    if (o->qkv_bias) {
        w->bq = vec(L, il, "attn_q.bias", nq, true);
        w->bk = vec(L, il, "attn_k.bias", nkv, true);
        w->bv = vec(L, il, "attn_v.bias", nkv, true);
    }
    if (o->qk_norm) {
        w->q_norm = vec(L, il, "attn_q_norm.weight", c->head_dim, true);
        w->k_norm = vec(L, il, "attn_k_norm.weight", c->head_dim, true);
    }
    if (o->qk_norm_full) {
        w->q_norm = vec(L, il, "attn_q_norm.weight", nq, true);
        w->k_norm = vec(L, il, "attn_k_norm.weight", nkv, true);
    }
    w->wo = lin(L, il, "attn_output.weight", c->n_embd, nq);
    if (o->post_norms) w->attn_post_norm = vec(L, il, "post_attention_norm.weight", c->n_embd, true);
    return candle_errcode(L->m->ctx) == CANDLE_OK;
}

static bool has(loader *L, int64_t il, const char *what) {
    snprintf(L->name, sizeof L->name, "blk.%" PRId64 ".%s", il, what);
    return candle_weights_find_tensor(L->m->weights, L->name) >= 0;
}

/* Expert e's [n_out, n_in] weight, transposed: a view of the stacked
 * ffn_<what>_exps.weight [n_expert, n_out, n_in] when the source has it, else
 * its own tensor ffn_<what>.<e>.weight. */
static bool load_experts(loader *L, int64_t il, const char *what, int64_t n_out, int64_t n_in,
                         candle_tensor **out, candle_tensor **stacked) {
    candle_model *m = L->m;
    int64_t ne = m->cfg.n_expert;
    char name[64];
    snprintf(name, sizeof name, "ffn_%s_exps.weight", what);
    if (has(L, il, name)) {
        candle_tensor *t = leaf(L, il, name, true);
        char got[64], at[320];
        if (!t) return false;
        if (t->rank != 3 || t->shape[0] != ne || t->shape[1] != n_out || t->shape[2] != n_in) {
            cdl_set_error(m->ctx, CANDLE_ERR_FORMAT,
                             "model: %s has shape %s, want [%" PRId64 ", %" PRId64 ", %" PRId64
                             "] (expert_count, rows, columns)",
                             where(L, at, sizeof at), candle_shape_str(t->rank, t->shape, got, sizeof got),
                             ne, n_out, n_in);
            return false;
        }
        if (!weight_dtype_ok(L, t)) return false;
        *stacked = t;
        for (int64_t e = 0; e < ne; e++) {
            candle_tensor *v = candle_squeeze(m->ctx, candle_narrow(m->ctx, t, 0, e, 1), 0);
            if (!(out[e] = candle_transpose(m->ctx, v, 0, 1))) return false;
        }
        return true;
    }
    for (int64_t e = 0; e < ne; e++) {
        snprintf(name, sizeof name, "ffn_%s.%" PRId64 ".weight", what, e);
        if (!(out[e] = lin(L, il, name, n_out, n_in))) return false;
    }
    return true;
}

/* A mixture-of-experts FFN: the router, every expert (stacked or one
 * tensor each) and, where the source has one, the shared expert and its
 * gate. A layer without a router is a dense FFN (Qwen-MoE's
 * mlp_only_layers), so a model may mix both. */
static bool load_moe(loader *L, layer_weights *w, int64_t il) {
    candle_model *m = L->m;
    const candle_model_config *c = &m->cfg;
    if (c->n_expert <= 0) {
        cdl_set_error(m->ctx, CANDLE_ERR_FORMAT,
                         "model: %s: layer %" PRId64 " has a router (ffn_gate_inp.weight) but the "
                         "metadata has no %s.expert_count / expert_used_count",
                         candle_weights_path(m->weights), il, m->family->name);
        return false;
    }
    if (!(w->router = lin(L, il, "ffn_gate_inp.weight", c->n_expert, c->n_embd))) return false;
    if (!(w->exp_gate = calloc((size_t)(3 * c->n_expert), sizeof *w->exp_gate))) {
        cdl_set_error(m->ctx, CANDLE_ERR_OOM, "out of memory: expert table");
        return false;
    }
    w->exp_up = w->exp_gate + c->n_expert;
    w->exp_down = w->exp_up + c->n_expert;
    if (!load_experts(L, il, "gate", c->n_ff_exp, c->n_embd, w->exp_gate, &w->gate_exps) ||
        !load_experts(L, il, "up", c->n_ff_exp, c->n_embd, w->exp_up, &w->up_exps) ||
        !load_experts(L, il, "down", c->n_embd, c->n_ff_exp, w->exp_down, &w->down_exps))
        return false;
    /* the op takes the three stacked or none */
    if (!w->gate_exps || !w->up_exps || !w->down_exps) w->gate_exps = w->up_exps = w->down_exps = NULL;
    if (!has(L, il, "ffn_up_shexp.weight") && !has(L, il, "ffn_gate_inp_shexp.weight")) return true;
    w->sh_gate = lin(L, il, "ffn_gate_shexp.weight", c->n_ff_shexp, c->n_embd);
    w->sh_up = lin(L, il, "ffn_up_shexp.weight", c->n_ff_shexp, c->n_embd);
    w->sh_down = lin(L, il, "ffn_down_shexp.weight", c->n_embd, c->n_ff_shexp);
    if (!w->sh_gate || !w->sh_up || !w->sh_down) return false;
    /* the gate is [1, n_embd] in the directory and [n_embd] in llama.cpp's GGUF */
    if (!has(L, il, "ffn_gate_inp_shexp.weight")) return true;
    candle_tensor *g = leaf(L, il, "ffn_gate_inp_shexp.weight", true);
    if (g && g->rank == 1 && g->shape[0] == c->n_embd) {
        int64_t shape[2] = {1, c->n_embd};
        g = candle_reshape(m->ctx, g, 2, shape);
    }
    if (!shape_is(L, g, 1, c->n_embd) || !weight_dtype_ok(L, g)) return false;
    w->sh_gate_inp = candle_transpose(m->ctx, g, 0, 1);
    return w->sh_gate_inp != NULL;
}

static bool load_ffn(loader *L, layer_weights *w, int64_t il) {
    const candle_model_config *c = &L->m->cfg;
    const model_desc *o = &L->m->family->desc;
    w->ffn_norm = vec(L, il, "ffn_norm.weight", c->n_embd, true);
    if (has(L, il, "ffn_gate_inp.weight")) {
        if (o->fused_gate_up || o->post_norms) {
            cdl_set_error(L->m->ctx, CANDLE_ERR_UNSUPPORTED,
                             "model: %s: experts in a %s model are not supported",
                             candle_weights_path(L->m->weights), L->m->family->name);
            return false;
        }
        return load_moe(L, w, il) && candle_errcode(L->m->ctx) == CANDLE_OK;
    }
    if (c->n_expert > 0 && (!o->moe_dense_layers || !has(L, il, "ffn_up.weight"))) {
        char src[160];
        candle_weights_src_name(L->m->weights, "blk.0.ffn_gate_inp.weight", src, sizeof src);
        cdl_set_error(L->m->ctx, CANDLE_ERR_FORMAT,
                         "model: %s: %s.expert_count is %" PRId64 " but layer %" PRId64
                         " has no router (ffn_gate_inp.weight; '%s' for layer 0)%s",
                         candle_weights_path(L->m->weights), L->m->family->name, c->n_expert, il, src,
                         o->moe_dense_layers ? " and no dense FFN" : "");
        return false;
    }
    if (o->fused_gate_up) {
        w->w_up = lin(L, il, "ffn_up.weight", 2 * c->n_ff, c->n_embd);
    } else {
        w->w_gate = lin(L, il, "ffn_gate.weight", c->n_ff, c->n_embd);
        w->w_up = lin(L, il, "ffn_up.weight", c->n_ff, c->n_embd);
    }
    w->w_down = lin(L, il, "ffn_down.weight", c->n_embd, c->n_ff);
    if (o->post_norms) w->ffn_post_norm = vec(L, il, "post_ffw_norm.weight", c->n_embd, true);
    return candle_errcode(L->m->ctx) == CANDLE_OK;
}

candle_status decoder_check_desc(const model_family *f) {
    const model_desc *d = &f->desc;
    const char *missing = d->kind != CANDLE_MODEL_DECODER_LM ? "a model kind other than decoder-lm"
                          : d->norm != NORM_RMS              ? "LayerNorm"
                          : d->mlp != MLP_GATED              ? "a plain (ungated) MLP"
                          : d->positions != POS_ROPE         ? "positions other than RoPE"
                          : d->attention != ATTN_CAUSAL      ? "bidirectional attention"
                                                             : NULL;
    if (!missing) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "model: %s needs %s, which the decoder builder does not implement",
                            f->name, missing);
}

/* RoPE divisors where the file has them (f32 [n_rot / 2]); Phi-3's two
 * sets come together. */
static bool load_rope_factors(loader *L) {
    candle_model *m = L->m;
    int64_t half = m->cfg.n_rot / 2;
    m->rope_freqs = vec(L, -1, "rope_freqs.weight", half, false);
    m->rope_short = vec(L, -1, "rope_factors_short.weight", half, false);
    m->rope_long = vec(L, -1, "rope_factors_long.weight", half, false);
    if (candle_errcode(m->ctx)) return false;
    if (!m->rope_short != !m->rope_long || (m->rope_freqs && m->rope_long)) {
        cdl_set_error(m->ctx, CANDLE_ERR_FORMAT,
                         "model: %s: RoPE factors need both rope_factors_short.weight and "
                         "rope_factors_long.weight, and not rope_freqs.weight beside them",
                         candle_weights_path(m->weights));
        return false;
    }
    return true;
}

candle_status decoder_load_weights(candle_model *m) {
    loader L = {.m = m};
    candle_model_config *c = &m->cfg;
    if (!load_rope_factors(&L)) return candle_errcode(m->ctx);
    m->tok_embd = leaf(&L, -1, "token_embd.weight", true);
    if (!m->tok_embd) return candle_errcode(m->ctx);
    c->n_vocab = m->tok_embd->shape[0];
    if (c->n_vocab <= 0)
        return cdl_set_error(m->ctx, CANDLE_ERR_FORMAT, "model: token_embd.weight has no rows");
    if (!shape_is(&L, m->tok_embd, c->n_vocab, c->n_embd) || !weight_dtype_ok(&L, m->tok_embd))
        return candle_errcode(m->ctx);
    m->out_norm = vec(&L, -1, "output_norm.weight", c->n_embd, true);
    if (candle_weights_find_tensor(m->weights, "output.weight") >= 0)
        m->output = lin(&L, -1, "output.weight", c->n_vocab, c->n_embd);
    else /* tied to the embeddings */
        m->output = candle_transpose(m->ctx, m->tok_embd, 0, 1);
    for (int64_t il = 0; il < c->n_layer && !candle_errcode(m->ctx); il++) {
        layer_weights *w = &m->layers[il];
        w->attn_norm = vec(&L, il, "attn_norm.weight", c->n_embd, true);
        if (!load_attention(&L, w, il) || !load_ffn(&L, w, il)) break;
    }
    return candle_errcode(m->ctx);
}

/* ---- encoders (BERT) ---- */

candle_status encoder_check_desc(const model_family *f) {
    const model_desc *d = &f->desc;
    const char *missing = d->kind != CANDLE_MODEL_ENCODER   ? "a model kind other than encoder"
                          : d->norm != NORM_LAYER           ? "RMSNorm"
                          : d->positions != POS_LEARNED && d->positions != POS_ROPE &&
                                    !(d->positions == POS_RELATIVE && d->pos_table)
                              ? "positions other than learned ones, RoPE (or relative buckets beside learned ones)"
                          : d->attention != ATTN_BIDIRECTIONAL ? "causal attention"
                                                            : NULL;
    if (!missing) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "model: %s needs %s, which the encoder builder does not implement",
                            f->name, missing);
}

/* An embedding table [rows, n_embd] of any rows >= 1. */
static candle_tensor *table(loader *L, const char *what, int64_t *rows) {
    candle_tensor *t = leaf(L, -1, what, true);
    if (!t) return NULL;
    *rows = t->rank == 2 ? t->shape[0] : 0;
    return *rows > 0 && shape_is(L, t, *rows, L->m->cfg.n_embd) && weight_dtype_ok(L, t) ? t : NULL;
}

/* BERT's projections and norms all have biases; ModernBERT's have none
 * unless its config asks (attention_bias, mlp_bias, norm_bias): optional. */
static bool load_encoder_layer(loader *L, encoder_layer *w, int64_t il) {
    const candle_model_config *c = &L->m->cfg;
    const model_desc *d = &L->m->family->desc;
    int64_t e = c->n_embd;
    bool b = d->qkv_bias;
    /* NomicBERT: fused in the Hub's layout (Wqkv) and llama.cpp's, apart in transformers' */
    if (d->fused_qkv || has(L, il, "attn_qkv.weight")) {
        w->wqkv = lin(L, il, "attn_qkv.weight", 3 * e, e);
        w->bqkv = vec(L, il, "attn_qkv.bias", 3 * e, false);
    } else {
        w->wq = lin(L, il, "attn_q.weight", e, e);
        w->bq = vec(L, il, "attn_q.bias", e, b);
        w->wk = lin(L, il, "attn_k.weight", e, e);
        w->bk = vec(L, il, "attn_k.bias", e, b);
        w->wv = lin(L, il, "attn_v.weight", e, e);
        w->bv = vec(L, il, "attn_v.bias", e, b);
    }
    w->wo = lin(L, il, "attn_output.weight", e, e);
    w->bo = vec(L, il, "attn_output.bias", e, b);
    if (d->pre_norm) { /* ModernBERT: layer 0's attention sees the normalised embeddings as they are */
        w->attn_norm = vec(L, il, "attn_norm.weight", e, il > 0);
        w->attn_norm_b = vec(L, il, "attn_norm.bias", e, false);
        w->out_norm = vec(L, il, "ffn_norm.weight", e, true);
        w->out_norm_b = vec(L, il, "ffn_norm.bias", e, false);
    } else {
        w->attn_norm = vec(L, il, "attn_output_norm.weight", e, true);
        w->attn_norm_b = vec(L, il, "attn_output_norm.bias", e, true);
        w->out_norm = vec(L, il, "layer_output_norm.weight", e, true);
        w->out_norm_b = vec(L, il, "layer_output_norm.bias", e, true);
    }
    if (d->mlp == MLP_GATED && d->fused_gate_up) {
        w->w_up = lin(L, il, "ffn_up.weight", 2 * c->n_ff, e);
        w->b_up = vec(L, il, "ffn_up.bias", 2 * c->n_ff, false);
    } else {
        if (d->mlp == MLP_GATED) w->w_gate = lin(L, il, "ffn_gate.weight", c->n_ff, e);
        w->w_up = lin(L, il, "ffn_up.weight", c->n_ff, e);
        w->b_up = vec(L, il, "ffn_up.bias", c->n_ff, b);
    }
    w->w_down = lin(L, il, "ffn_down.weight", e, c->n_ff);
    w->b_down = vec(L, il, "ffn_down.bias", e, b);
    return candle_errcode(L->m->ctx) == CANDLE_OK;
}

/* MPNet's bucketed relative-position bias [n_buckets, n_head] (f32: it is
 * added to the scores). */
static bool load_rel_bias(loader *L) {
    candle_model *m = L->m;
    candle_tensor *t = leaf(L, -1, "attn_rel_b.weight", true);
    int64_t rows = t && t->rank == 2 ? t->shape[0] : 0;
    if (!t || !shape_is(L, t, rows > 0 ? rows : 1, m->cfg.n_head) ||
        !dtype_ok(L, t, t->dtype == CANDLE_DTYPE_F32, "f32"))
        return false;
    m->rel_bias = t;
    return true;
}

candle_status encoder_load_weights(candle_model *m) {
    loader L = {.m = m};
    candle_model_config *c = &m->cfg;
    int64_t n_pos, n_types;
    const model_desc *d = &m->family->desc;
    bool rope = d->positions == POS_ROPE;
    if (!(m->tok_embd = table(&L, "token_embd.weight", &c->n_vocab)) ||
        (!rope && !(m->pos_embd = table(&L, "position_embd.weight", &n_pos))) ||
        (!d->no_token_types && !(m->type_embd = table(&L, "token_types.weight", &n_types))))
        return candle_errcode(m->ctx);
    if (rope) { /* no position table: the context is context_length */
        m->embd_norm = vec(&L, -1, "token_embd_norm.weight", c->n_embd, true);
        m->embd_norm_b = vec(&L, -1, "token_embd_norm.bias", c->n_embd, false);
        if (d->pre_norm) {
            m->out_norm = vec(&L, -1, "output_norm.weight", c->n_embd, true);
            m->out_norm_b = vec(&L, -1, "output_norm.bias", c->n_embd, false);
        }
        for (int64_t il = 0; il < c->n_layer && !candle_errcode(m->ctx); il++)
            if (!load_encoder_layer(&L, &m->enc[il], il)) break;
        return candle_errcode(m->ctx);
    }
    if (d->positions == POS_RELATIVE && !load_rel_bias(&L)) return candle_errcode(m->ctx);
    if (candle_weights_get_i64(m->weights, "candle.position_offset", &m->pos_offset) &&
        (m->pos_offset < 0 || m->pos_offset >= n_pos))
        return cdl_set_error(m->ctx, CANDLE_ERR_FORMAT,
                                "model: %s: candle.position_offset %" PRId64 " leaves none of the %" PRId64
                                " position rows (config.json pad_token_id)",
                                candle_weights_path(m->weights), m->pos_offset, n_pos);
    n_pos -= m->pos_offset;
    /* positions past the table have no embedding: the context is the table */
    if (n_pos < c->n_ctx_train || c->n_ctx_train <= 0) c->n_ctx_train = n_pos;
    m->embd_norm = vec(&L, -1, "token_embd_norm.weight", c->n_embd, true);
    m->embd_norm_b = vec(&L, -1, "token_embd_norm.bias", c->n_embd, true);
    for (int64_t il = 0; il < c->n_layer && !candle_errcode(m->ctx); il++)
        if (!load_encoder_layer(&L, &m->enc[il], il)) break;
    return candle_errcode(m->ctx);
}
