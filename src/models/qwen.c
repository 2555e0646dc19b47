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
