/* LoRA adapters over a loaded decoder model.
 *
 * An adapter is a set of low-rank pairs (A [r, in], B [out, r]) for some of
 * the model's linear weights W [out, in]. Applied with scale s, a linear
 * computes x W^T + s * m * (x A^T) B^T, where m is the adapter's own
 * multiplier (alpha / r, or alpha / sqrt(r) with rsLoRA, 1 without alpha).
 * The base weights are never copied or changed: the pairs are extra graph
 * nodes beside each adapted product, so one model serves requests with
 * different adapters, or none, at once.
 *
 * Sources:
 * - a GGUF LoRA as llama.cpp's convert_lora_to_gguf.py writes it:
 *   general.type "adapter", adapter.type "lora", adapter.lora.alpha, and
 *   tensors "<base tensor>.lora_a" [r, in] / ".lora_b" [out, r]
 *   ("blk.0.attn_q.weight.lora_a"), for the model's general.architecture;
 * - a PEFT directory: adapter_config.json (peft_type LORA, r, lora_alpha,
 *   use_rslora) and adapter_model.safetensors ("base_model.model.model.
 *   layers.0.self_attn.q_proj.lora_A.weight"), the names mapped as a
 *   Hugging Face model directory's are.
 * Llama's q/k rows are reordered between the two layouts as the weight
 * sources' "candle.rope.interleaved" says (weights.h).
 *
 * Which adapters a computation uses is a parameter of that computation
 * (candle_session_set_lora, candle_forward_input.lora, candle_batch_eval_lora),
 * never state of the model. An adapter must outlive every use of it and
 * belongs to the model it was loaded for. */
#ifndef CANDLE_LORA_H
#define CANDLE_LORA_H

#include "api.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_lora candle_lora;

/* One active adapter and the scale it is applied with (1: as trained). */
typedef struct candle_lora_use {
    const candle_lora *lora;
    float scale;
} candle_lora_use;

/* path: a GGUF LoRA file or a PEFT adapter directory. Errors (thread-local
 * last error): io/format from the files; CANDLE_ERR_FORMAT naming a tensor
 * that matches no base weight, or whose shape does not fit it;
 * CANDLE_ERR_UNSUPPORTED for an adapter of another architecture, DoRA,
 * per-module ranks, saved modules, biases, embedding or expert adapters. */
CANDLE_API candle_status candle_lora_load(candle_lora **out, const candle_model *m, const char *path);
CANDLE_API void candle_lora_free(candle_lora *l);
/* The path given to load. */
CANDLE_API const char *candle_lora_path(const candle_lora *l);
/* The model it was loaded for. */
CANDLE_API const candle_model *candle_lora_model(const candle_lora *l);
/* Adapted weights (A/B pairs), and the largest rank among them. */
CANDLE_API int64_t candle_lora_n_pairs(const candle_lora *l);
CANDLE_API int64_t candle_lora_rank(const candle_lora *l);
/* Bytes of the pairs as held (f32). */
CANDLE_API size_t candle_lora_bytes(const candle_lora *l);

/* The adapters the session's following evals use (copied; n = 0 or use
 * NULL: none). Each must be of the session's model. A KV cache filled under
 * one set holds that set's keys and values: changing it mid-sequence mixes
 * them, as llama.cpp does. */
CANDLE_API candle_status candle_session_set_lora(candle_session *s, const candle_lora_use *use, int n);

/* Do two sets apply the same adapters with the same scales in the same
 * order (so their sums round alike)? */
CANDLE_API bool candle_lora_set_equal(const candle_lora_use *a, int na, const candle_lora_use *b, int nb);

#ifdef __cplusplus
}
#endif
#endif
