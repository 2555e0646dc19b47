/* Internal: which dtype each tensor of a file gets when quantizing
 * (quantize_rules.c), used by the driver (quantize.c). */
#ifndef CANDLE_QUANTIZE_IMPL_H
#define CANDLE_QUANTIZE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "candle/gguf.h"
#include "candle/weights.h"
#include "candle/quantize.h"

/* What the mixture rules need to know of the model, and the running layer
 * counters they keep as tensors are visited in file order (llama.cpp counts
 * attn_v and ffn_down tensors the same way). */
typedef struct quant_model {
    bool falcon;        /* general.architecture == "falcon": its own rules */
    bool has_output;    /* else token_embd doubles as the output (tied) */
    int64_t n_gqa;      /* query heads per kv head (1 if unknown) */
    int64_t n_expert;   /* 0 for dense models */
    int64_t n_layer;    /* {arch}.block_count, else the highest blk.N + 1 */
    int64_t n_attn_v;   /* tensors holding V projections */
    int64_t i_attn_v, i_ffn_down;
} quant_model;

void quant_model_init(quant_model *m, const candle_weights *w);

/* Whether a tensor is a weight matrix that the file type converts (else it
 * is copied unchanged: norms, biases, 1-D tensors, integer tensors). */
bool quant_is_weight(const candle_weights_tensor_info *t);

/* The dtype for weight t under ftype and p's pure and type overrides
 * (advancing m's counters). A fallback
 * for rows that do not fit the block size writes a note into note (else
 * note[0] = 0) and sets *fallback. */
candle_dtype quant_tensor_type(quant_model *m, candle_ftype ftype, const candle_quantize_params *p,
                               const candle_weights_tensor_info *t, char *note, size_t n_note,
                               bool *fallback);

/* The tokenizer.json at tokenizer_json (with tokenizer_config, which may be
 * NULL, for bos/eos names; the ids below n_vocab, or all for 0) as
 * llama.cpp's tokenizer.ggml.* keys into w,
 * where llama.cpp would tokenize with them as the file's own tokenizer
 * does (quantize_vocab.c); else nothing is written and why says what kept
 * it (why[0] == 0 when written). An unreadable file is an error. */
candle_status cquant_write_ggml_vocab(candle_gguf_writer *w, const char *tokenizer_json,
                                      const char *tokenizer_config, int64_t n_vocab, char *why, size_t n_why);
/* The same from a tokenizer.json in memory (no tokenizer_config). */
candle_status cquant_write_ggml_vocab_memory(candle_gguf_writer *w, const char *json, size_t len, char *why,
                                             size_t n_why);

#endif
