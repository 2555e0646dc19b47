/* BERT (MiniLM, BGE, E5, GTE; RoBERTa and XLM-RoBERTa, whose positions start
 * at candle.position_offset): learned absolute positions and token types,
 * post-norm LayerNorm blocks with biased projections, GELU (erf) FFN,
 * bidirectional attention. MPNet: the same blocks without token types, with
 * T5-style relative position buckets (one bias table shared by all layers)
 * added to the attention scores beside the absolute positions. NomicBERT:
 * BERT's post-norm blocks with RoPE instead of a position table, SwiGLU and
 * no projection biases. ModernBERT: below. */
#include "model-impl.h"

static candle_status encoder_config(const char *arch, const candle_weights *w, candle_model_config *c) {
    if (!model_cfg_get_f64(w, arch, "attention.layer_norm_epsilon", &c->norm_eps)) c->norm_eps = 1e-12;
    c->head_dim = c->n_embd / c->n_head;
    if (c->head_dim * c->n_head != c->n_embd || c->n_head_kv != c->n_head)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s: %lld heads (%lld kv) do not split an embedding of %lld",
                                arch, (long long)c->n_head, (long long)c->n_head_kv, (long long)c->n_embd);
    return CANDLE_OK;
}

static candle_status bert_config(const candle_weights *w, candle_model_config *c) {
    return encoder_config("bert", w, c);
}

static candle_status mpnet_config(const candle_weights *w, candle_model_config *c) {
    return encoder_config("mpnet", w, c);
}

const model_family family_bert = {
    .arch = CANDLE_ARCH_BERT,
    .name = "bert",
    .desc = {.kind = CANDLE_MODEL_ENCODER,
             .norm = NORM_LAYER,
             .mlp = MLP_PLAIN,
             .ffn_act = CANDLE_OP_GELU_ERF,
             .positions = POS_LEARNED,
             .attention = ATTN_BIDIRECTIONAL,
             .qkv_bias = true},
    .config = bert_config,
};

const model_family family_mpnet = {
    .arch = CANDLE_ARCH_MPNET,
    .name = "mpnet",
    .desc = {.kind = CANDLE_MODEL_ENCODER,
             .norm = NORM_LAYER,
             .mlp = MLP_PLAIN,
             .ffn_act = CANDLE_OP_GELU_ERF,
             .positions = POS_RELATIVE,
             .pos_table = true,
             .no_token_types = true,
             .attention = ATTN_BIDIRECTIONAL,
             .qkv_bias = true},
    .config = mpnet_config,
};

/* ModernBERT: keys as hf_families.c maps them (llama.cpp's modern-bert
 * names): the local window is local_attention (a token sees the
 * local_attention / 2 keys on each side), every sliding_window_pattern-th
 * layer from layer 0 attends globally with rope.freq_base, the others
 * locally with rope.freq_base_swa. */
static candle_status modernbert_config(const candle_weights *w, candle_model_config *c) {
    const char *arch = "modern-bert";
    int64_t every = 3;
    if (!model_cfg_get_f64(w, arch, "attention.layer_norm_epsilon", &c->norm_eps)) c->norm_eps = 1e-5;
    if (!model_cfg_get_f64(w, arch, "rope.freq_base", &c->rope_base)) c->rope_base = 160000.0;
    if (!model_cfg_get_f64(w, arch, "rope.freq_base_swa", &c->rope_base_swa)) c->rope_base_swa = 10000.0;
    if (!model_cfg_get_i64(w, arch, "attention.sliding_window", &c->n_swa)) c->n_swa = 128;
    if (!model_cfg_get_i64(w, arch, "attention.sliding_window_pattern", &every)) every = 3;
    if (every <= 0 || every > 1 << 20 || c->n_swa < 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: modern-bert: global attention every %lld layers and a local window "
                                "of %lld, want positive and non-negative",
                                (long long)every, (long long)c->n_swa);
    c->swa_pattern = (int)every;
    return encoder_config(arch, w, c);
}

const model_family family_modernbert = {
    .arch = CANDLE_ARCH_MODERNBERT,
    .name = "modern-bert",
    .desc = {.kind = CANDLE_MODEL_ENCODER,
             .norm = NORM_LAYER,
             .mlp = MLP_GATED,
             .ffn_act = CANDLE_OP_GELU_ERF,
             .positions = POS_ROPE,
             .no_token_types = true,
             .attention = ATTN_BIDIRECTIONAL,
             .fused_qkv = true,
             .fused_gate_up = true,
             .pre_norm = true},
    .config = modernbert_config,
};

/* NomicBERT (nomic-embed-text v1/v1.5): RoPE base 1000 unless given. */
static candle_status nomicbert_config(const candle_weights *w, candle_model_config *c) {
    if (!model_cfg_get_f64(w, "nomic-bert", "rope.freq_base", &c->rope_base)) c->rope_base = 1000.0;
    c->rope_base_swa = c->rope_base;
    return encoder_config("nomic-bert", w, c);
}

const model_family family_nomicbert = {
    .arch = CANDLE_ARCH_NOMICBERT,
    .name = "nomic-bert",
    .desc = {.kind = CANDLE_MODEL_ENCODER,
             .norm = NORM_LAYER,
             .mlp = MLP_GATED,
             .ffn_act = CANDLE_OP_SILU,
             .positions = POS_ROPE,
             .attention = ATTN_BIDIRECTIONAL},
    .config = nomicbert_config,
};
