/* Llama 2/3, Mistral, TinyLlama, SmolLM2: the plain pre-norm decoder.
 * llama.cpp's converter permutes q/k rows so that RoPE pairs are adjacent
 * (2i, 2i+1): the interleaved form. */
#include "model-impl.h"

static candle_status llama_config(const candle_gguf *g, candle_model_config *c) {
    (void)g;
    c->rope_mode = CANDLE_ROPE_INTERLEAVED;
    return CANDLE_OK;
}

const model_family family_llama = {
    .arch = CANDLE_ARCH_LLAMA,
    .name = "llama",
    .opts = {.ffn_act = CANDLE_OP_SILU},
    .config = llama_config,
};
