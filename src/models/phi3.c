/* Phi-3: fused q/k/v projection and fused gate/up FFN weight. Every layer
 * attends within the sliding window when the model has one, as the
 * reference (transformers) does; llama.cpp disables it.
 * The long-context variants scale RoPE per frequency (rope_factors_short
 * and _long, with rope.scaling.attn_factor), which the decoder applies. */
#include "model-impl.h"

static candle_status phi3_config(const candle_weights *w, candle_model_config *c) {
    if (!model_cfg_get_i64(w, "phi3", "attention.sliding_window", &c->n_swa)) c->n_swa = 0;
    c->swa_pattern = 0;
    return CANDLE_OK;
}

const model_family family_phi3 = {
    .arch = CANDLE_ARCH_PHI3,
    .name = "phi3",
    .desc = {DECODER_LM, .fused_qkv = true, .fused_gate_up = true, .ffn_act = CANDLE_OP_SILU},
    .config = phi3_config,
};
