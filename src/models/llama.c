/* Llama 2/3, Mistral, TinyLlama, SmolLM2: the plain pre-norm decoder.
 * Mistral 7B v0.1 attends within a window in every layer. */
#include "model-impl.h"

static candle_status llama_config(const candle_weights *w, candle_model_config *c) {
    if (!model_cfg_get_i64(w, "llama", "attention.sliding_window", &c->n_swa)) c->n_swa = 0;
    c->swa_pattern = 0;
    return CANDLE_OK;
}

const model_family family_llama = {
    .arch = CANDLE_ARCH_LLAMA,
    .name = "llama",
    .desc = {DECODER_LM, .ffn_act = CANDLE_OP_SILU},
    .config = llama_config,
};
