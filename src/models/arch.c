/* The supported architectures, by their general.architecture name. */
#include <string.h>

#include "model-impl.h"

static const model_family *const families[CANDLE_ARCH_COUNT] = {
    [CANDLE_ARCH_LLAMA] = &family_llama,   [CANDLE_ARCH_QWEN2] = &family_qwen2,
    [CANDLE_ARCH_QWEN3] = &family_qwen3,   [CANDLE_ARCH_GEMMA2] = &family_gemma2,
    [CANDLE_ARCH_GEMMA3] = &family_gemma3, [CANDLE_ARCH_PHI3] = &family_phi3,
    [CANDLE_ARCH_BERT] = &family_bert,     [CANDLE_ARCH_MPNET] = &family_mpnet,
    [CANDLE_ARCH_QWEN2MOE] = &family_qwen2moe, [CANDLE_ARCH_QWEN3MOE] = &family_qwen3moe,
    [CANDLE_ARCH_OLMOE] = &family_olmoe, [CANDLE_ARCH_GRANITEMOE] = &family_granitemoe,
    [CANDLE_ARCH_GRANITE] = &family_granite,
    [CANDLE_ARCH_MODERNBERT] = &family_modernbert, [CANDLE_ARCH_NOMICBERT] = &family_nomicbert,
    [CANDLE_ARCH_GEMMA_EMBEDDING] = &family_gemma_embedding,
};

const char *candle_arch_name(candle_arch a) {
    return (unsigned)a < CANDLE_ARCH_COUNT ? families[a]->name : "unknown";
}

const char *candle_model_kind_name(candle_model_kind k) {
    static const char *const names[] = {"decoder-lm", "encoder", "encoder-decoder", "vision-encoder"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}

candle_status model_family_find(const char *arch, size_t len, const model_family **out) {
    for (int i = 0; i < CANDLE_ARCH_COUNT; i++)
        if (strlen(families[i]->name) == len && !memcmp(families[i]->name, arch, len)) {
            *out = families[i];
            return CANDLE_OK;
        }
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                            "model: unknown architecture '%.*s' (supported: llama, qwen2, qwen3, "
                            "qwen2moe, qwen3moe, olmoe, granite, granitemoe, gemma2, gemma3, phi3, "
                            "bert, mpnet, modern-bert, nomic-bert, gemma-embedding)",
                            (int)(len > 64 ? 64 : len), arch);
}
