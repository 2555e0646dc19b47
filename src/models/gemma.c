/* Gemma 2 and 3: embeddings scaled by sqrt(n_embd), GELU (tanh) gate, extra
 * norms after attention and FFN, sliding-window layers. Gemma 2 soft-caps
 * attention scores and logits; Gemma 3 normalises q/k heads and gives its
 * local layers their own RoPE base. Weight sources give the norm weights as
 * the (1 + w) they multiply by, so they are plain RMSNorm weights here. */
#include <math.h>
#include <stdio.h>

#include "model-impl.h"

/* Queries are scaled by 1/sqrt(query_pre_attn_scalar) where the source says
 * (config.json does); GGUF files leave it out, and llama.cpp scales the 27B
 * models by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim). */
static void query_scale(const candle_weights *w, const char *arch, candle_model_config *c,
                        int64_t n_layer_27b) {
    double scalar;
    if (model_cfg_get_f64(w, arch, "attention.query_pre_attn_scalar", &scalar) && scalar > 0)
        c->attn_scale = 1.0 / sqrt(scalar);
    else if (c->n_layer == n_layer_27b)
        c->attn_scale = 1.0 / sqrt((double)(c->n_embd / c->n_head));
}

static candle_status gemma2_config(const candle_weights *g, candle_model_config *c) {
    c->embd_scale = sqrt((double)c->n_embd);
    if (!model_cfg_get_f64(g, "gemma2", "attn_logit_softcapping", &c->attn_softcap))
        c->attn_softcap = 50;
    if (!model_cfg_get_f64(g, "gemma2", "final_logit_softcapping", &c->final_softcap))
        c->final_softcap = 30;
    if (!model_cfg_get_i64(g, "gemma2", "attention.sliding_window", &c->n_swa)) c->n_swa = 4096;
    c->swa_pattern = 2;
    query_scale(g, "gemma2", c, 46);
    return CANDLE_OK;
}

/* Gemma 3's keys under arch; causal unless <arch>.attention.causal says
 * not (the default of llama.cpp's gemma-embedding, which never is). */
static candle_status gemma3_keys(const candle_weights *g, const char *arch, bool causal, candle_model_config *c) {
    c->embd_scale = sqrt((double)c->n_embd);
    if (!model_cfg_get_f64(g, arch, "rope.freq_base", &c->rope_base)) c->rope_base = 1000000.0;
    if (!model_cfg_get_f64(g, arch, "rope.freq_base_swa", &c->rope_base_swa)) c->rope_base_swa = 10000.0;
    if (!model_cfg_get_i64(g, arch, "attention.sliding_window", &c->n_swa)) c->n_swa = 512;
    int64_t pattern;
    if (!model_cfg_get_i64(g, arch, "attention.sliding_window_pattern", &pattern)) pattern = 6;
    if (pattern <= 0 || pattern > INT32_MAX)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "model: %s.attention.sliding_window_pattern is %lld, want > 0",
                             arch, (long long)pattern);
    c->swa_pattern = (int)pattern;
    char key[64];
    snprintf(key, sizeof key, "%s.attention.causal", arch);
    candle_weights_get_bool(g, key, &causal);
    c->bidirectional = !causal;
    query_scale(g, arch, c, 62);
    return CANDLE_OK;
}

static candle_status gemma3_config(const candle_weights *g, candle_model_config *c) {
    return gemma3_keys(g, "gemma3", true, c);
}

static candle_status gemma_embedding_config(const candle_weights *g, candle_model_config *c) {
    return gemma3_keys(g, "gemma-embedding", false, c);
}

const model_family family_gemma2 = {
    .arch = CANDLE_ARCH_GEMMA2,
    .name = "gemma2",
    .desc = {DECODER_LM, .post_norms = true, .ffn_act = CANDLE_OP_GELU_TANH},
    .config = gemma2_config,
};

const model_family family_gemma3 = {
    .arch = CANDLE_ARCH_GEMMA3,
    .name = "gemma3",
    .desc = {DECODER_LM, .post_norms = true, .qk_norm = true, .ffn_act = CANDLE_OP_GELU_TANH},
    .config = gemma3_config,
};

/* llama.cpp's EmbeddingGemma: Gemma 3 under its own name, bidirectional,
 * with the Dense projections as dense_2/dense_3 (embedder.c). */
const model_family family_gemma_embedding = {
    .arch = CANDLE_ARCH_GEMMA_EMBEDDING,
    .name = "gemma-embedding",
    .desc = {DECODER_LM, .post_norms = true, .qk_norm = true, .ffn_act = CANDLE_OP_GELU_TANH},
    .config = gemma_embedding_config,
};
