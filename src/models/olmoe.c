/* OLMoE (allenai/OLMoE-1B-7B): llama's block with RMSNorm over the whole q
 * and k projections (one weight of n_head*head_dim, not one per head) and a
 * routed SwiGLU mixture in every layer: softmax over all experts, the top k
 * kept, not renormalised (norm_topk_prob false, as llama.cpp's olmoe runs
 * it; expert_weights_norm overrides). The experts' width is
 * feed_forward_length, as llama.cpp's olmoe reads it. */
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
