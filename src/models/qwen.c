/* Qwen 2 (biases on q/k/v) and Qwen 3 (RMSNorm on each q/k head), SwiGLU. */
#include "model-impl.h"

static candle_status qwen_config(const candle_weights *w, candle_model_config *c) {
    (void)w;
    (void)c;
    return CANDLE_OK;
}

const model_family family_qwen2 = {
    .arch = CANDLE_ARCH_QWEN2,
    .name = "qwen2",
    .desc = {DECODER_LM, .qkv_bias = true, .ffn_act = CANDLE_OP_SILU},
    .config = qwen_config,
};

const model_family family_qwen3 = {
    .arch = CANDLE_ARCH_QWEN3,
    .name = "qwen3",
    .desc = {DECODER_LM, .qk_norm = true, .ffn_act = CANDLE_OP_SILU},
    .config = qwen_config,
};

/* The MoE variants route each token to expert_used_count of expert_count
 * experts; Qwen2-MoE adds a shared expert behind a sigmoid gate and, as its
 * config's norm_topk_prob defaults to false, keeps the chosen experts'
 * softmax weights as they are (expert_weights_norm overrides either). */
static candle_status qwen2moe_config(const candle_weights *w, candle_model_config *c) {
    c->expert_norm = false;
    candle_weights_get_bool(w, "qwen2moe.expert_weights_norm", &c->expert_norm);
    return CANDLE_OK;
}

const model_family family_qwen2moe = {
    .arch = CANDLE_ARCH_QWEN2MOE,
    .name = "qwen2moe",
    .desc = {DECODER_LM, .qkv_bias = true, .ffn_act = CANDLE_OP_SILU, .moe_dense_layers = true},
    .config = qwen2moe_config,
};

const model_family family_qwen3moe = {
    .arch = CANDLE_ARCH_QWEN3MOE,
    .name = "qwen3moe",
    .desc = {DECODER_LM, .qk_norm = true, .ffn_act = CANDLE_OP_SILU, .moe_dense_layers = true},
    .config = qwen_config,
};
