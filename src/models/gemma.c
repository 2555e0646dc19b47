/* Gemma 2 and 3: embeddings scaled by sqrt(n_embd), GELU (tanh) gate, extra
 * norms after attention and FFN, sliding-window layers. Gemma 2 soft-caps
 * attention scores and logits; Gemma 3 normalises q/k heads and gives its
 * local layers their own RoPE base. The converter already stores the norm
 * weights as (1 + w), so they are plain RMSNorm weights here. */
#include <math.h>

#include "model-impl.h"

/* The 27B models scale queries by 1/sqrt(n_embd / n_head), the others by
 * 1/sqrt(head_dim), as llama.cpp does. */
static void query_scale(candle_model_config *c, int64_t n_layer_27b) {
    if (c->n_layer == n_layer_27b) c->attn_scale = 1.0 / sqrt((double)(c->n_embd / c->n_head));
}

static candle_status gemma2_config(const candle_gguf *g, candle_model_config *c) {
    c->rope_mode = CANDLE_ROPE_HALF;
    c->embd_scale = sqrt((double)c->n_embd);
    if (!model_cfg_get_f64(g, "gemma2", "attn_logit_softcapping", &c->attn_softcap))
        c->attn_softcap = 50;
    if (!model_cfg_get_f64(g, "gemma2", "final_logit_softcapping", &c->final_softcap))
        c->final_softcap = 30;
    if (!model_cfg_get_i64(g, "gemma2", "attention.sliding_window", &c->n_swa)) c->n_swa = 4096;
    c->swa_pattern = 2;
    query_scale(c, 46);
    return CANDLE_OK;
}

static candle_status gemma3_config(const candle_gguf *g, candle_model_config *c) {
    c->rope_mode = CANDLE_ROPE_HALF;
    c->embd_scale = sqrt((double)c->n_embd);
    if (!model_cfg_get_f64(g, "gemma3", "rope.freq_base", &c->rope_base)) c->rope_base = 1000000.0;
    c->rope_base_swa = 10000.0;
    if (!model_cfg_get_i64(g, "gemma3", "attention.sliding_window", &c->n_swa)) c->n_swa = 512;
    c->swa_pattern = 6;
    query_scale(c, 62);
    return CANDLE_OK;
}

const model_family family_gemma2 = {
    .arch = CANDLE_ARCH_GEMMA2,
    .name = "gemma2",
    .opts = {.post_norms = true, .ffn_act = CANDLE_OP_GELU_TANH},
    .config = gemma2_config,
};

const model_family family_gemma3 = {
    .arch = CANDLE_ARCH_GEMMA3,
    .name = "gemma3",
    .opts = {.post_norms = true, .qk_norm = true, .ffn_act = CANDLE_OP_GELU_TANH},
    .config = gemma3_config,
};
