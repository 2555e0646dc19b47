/* OLMoE (allenai/OLMoE-1B-7B): llama's block with RMSNorm over the whole q
 * and k projections (one weight of n_head*head_dim, not one per head) and a
 * routed SwiGLU mixture in every layer: softmax over all experts, the top k
 * kept, not renormalised (norm_topk_prob false, as llama.cpp's olmoe runs
 * it; expert_weights_norm overrides). The experts' width is
 * feed_forward_length, as llama.cpp's olmoe reads it. */
#include <math.h>

#include "model-impl.h"

static candle_status olmoe_config(const candle_weights *w, candle_model_config *c) {
    c->expert_norm = false;
    candle_weights_get_bool(w, "olmoe.expert_weights_norm", &c->expert_norm);
    if (c->n_expert <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "model: olmoe.expert_count is missing");
    return CANDLE_OK;
}

const model_family family_olmoe = {
    .arch = CANDLE_ARCH_OLMOE,
    .name = "olmoe",
    .desc = {DECODER_LM, .qk_norm_full = true, .ffn_act = CANDLE_OP_SILU},
    .config = olmoe_config,
};

/* Granite 3.x (dense) and GraniteMoE (ibm-granite/granite-3.x-*-a*m): llama with a routed SwiGLU
 * mixture (top-k of the router's logits, softmaxed over the chosen: the
 * renormalised softmax) and four multipliers, in llama.cpp's keys:
 * embeddings times embedding_scale, attention and FFN outputs times
 * residual_scale before the residual adds, scores times attention.scale
 * (in place of 1/sqrt(head_dim)), logits divided by logit_scale. */
static candle_status granite_scales(const candle_weights *w, const char *arch, candle_model_config *c) {
    double v;
    if (model_cfg_get_f64(w, arch, "embedding_scale", &v)) c->embd_scale = v;
    if (model_cfg_get_f64(w, arch, "residual_scale", &v)) c->residual_scale = v;
    if (model_cfg_get_f64(w, arch, "attention.scale", &v)) c->attn_scale = v;
    if (model_cfg_get_f64(w, arch, "logit_scale", &v)) c->logit_scale = v;
    if (!(c->residual_scale > 0 && isfinite(c->residual_scale)) || !(c->logit_scale > 0 && isfinite(c->logit_scale)) ||
        !(c->attn_scale >= 0 && isfinite(c->attn_scale)))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: %s multipliers out of range: residual_scale %g, "
                                "logit_scale %g, attention.scale %g (want positive)", arch,
                                c->residual_scale, c->logit_scale, c->attn_scale);
    return CANDLE_OK;
}

static candle_status granite_config(const candle_weights *w, candle_model_config *c) {
    return granite_scales(w, "granite", c);
}

static candle_status granitemoe_config(const candle_weights *w, candle_model_config *c) {
    candle_status s = granite_scales(w, "granitemoe", c);
    if (s) return s;
    if (c->n_expert <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "model: granitemoe.expert_count is missing");
    return CANDLE_OK;
}

const model_family family_granitemoe = {
    .arch = CANDLE_ARCH_GRANITEMOE,
    .name = "granitemoe",
    .desc = {DECODER_LM, .ffn_act = CANDLE_OP_SILU},
    .config = granitemoe_config,
};

/* Granite 3.x dense models: the same multipliers on llama's block. */
const model_family family_granite = {
    .arch = CANDLE_ARCH_GRANITE,
    .name = "granite",
    .desc = {DECODER_LM, .ffn_act = CANDLE_OP_SILU},
    .config = granite_config,
};
