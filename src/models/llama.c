/* Llama 2/3, Mistral, TinyLlama, SmolLM2: the plain pre-norm decoder. */
#include "model-impl.h"

static candle_status llama_config(const candle_weights *w, candle_model_config *c) {
    (void)w;
    (void)c;
    return CANDLE_OK;
}

const model_family family_llama = {
    .arch = CANDLE_ARCH_LLAMA,
    .name = "llama",
    .opts = {.ffn_act = CANDLE_OP_SILU},
    .config = llama_config,
};
