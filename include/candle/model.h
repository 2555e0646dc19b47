/* Decoder-only language models loaded from a GGUF file or a Hugging Face
 * directory (weights.h).
 *
 * Two objects with different lifetimes:
 * - candle_model: the immutable part, hyperparameters and weights that point
 *   into the GGUF mapping (zero-copy when a weight is used as stored). After
 *   load nothing writes to it, so one model can serve many sessions on many
 *   threads.
 * - candle_session: one sequence being evaluated: its KV cache, allocated once
 *   for n_ctx positions, the current position and the scratch context in
 *   which each step's graph is built and computed.
 *
 * Errors: candle_model_load reports through the thread-local last error
 * (candle_last_errmsg); session calls record it on the session, readable with
 * candle_session_errmsg. */
#ifndef CANDLE_MODEL_H
#define CANDLE_MODEL_H

#include "api.h"
#include "gguf.h"
#include "weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_arch {
    CANDLE_ARCH_LLAMA = 0, /* Llama 2/3, Mistral, TinyLlama, SmolLM2 */
    CANDLE_ARCH_QWEN2,
    CANDLE_ARCH_QWEN3,
    CANDLE_ARCH_GEMMA2,
    CANDLE_ARCH_GEMMA3,
    CANDLE_ARCH_PHI3,
    CANDLE_ARCH_BERT, /* BERT encoders: MiniLM, BGE, E5, GTE; RoBERTa, XLM-RoBERTa */
    CANDLE_ARCH_MPNET, /* MPNet encoders: all-mpnet-base-v2 */
    CANDLE_ARCH_QWEN2MOE, /* Qwen1.5/2-MoE: routed experts and a gated shared expert */
    CANDLE_ARCH_QWEN3MOE, /* Qwen3-MoE */
    CANDLE_ARCH_OLMOE, /* OLMoE: q/k RMSNorm over the whole projection, routed experts */
    CANDLE_ARCH_GRANITEMOE, /* GraniteMoE: llama with experts and Granite's four multipliers */
    CANDLE_ARCH_GRANITE, /* Granite 3.x dense: llama with the four multipliers */
    CANDLE_ARCH_MODERNBERT, /* ModernBERT encoders: RoPE, GeGLU, global/local attention */
    CANDLE_ARCH_NOMICBERT, /* NomicBERT encoders (nomic-embed-text): RoPE, SwiGLU, post-norm */
    CANDLE_ARCH_GEMMA_EMBEDDING, /* EmbeddingGemma as llama.cpp converts it: Gemma 3, bidirectional */
    CANDLE_ARCH_COUNT
} candle_arch;

/* "llama", "qwen2", ... (the GGUF general.architecture spelling). */
CANDLE_API const char *candle_arch_name(candle_arch a);

/* What a model computes, whatever its family. */
typedef enum candle_model_kind {
    CANDLE_MODEL_DECODER_LM = 0,  /* causal language model: tokens -> next-token logits */
    CANDLE_MODEL_ENCODER,         /* bidirectional text encoder: tokens -> hidden states */
    CANDLE_MODEL_ENCODER_DECODER, /* sequence to sequence (speech, text) */
    CANDLE_MODEL_VISION_ENCODER,  /* image patches -> hidden states */
} candle_model_kind;

/* "decoder-lm", "encoder", "encoder-decoder", "vision-encoder". */
CANDLE_API const char *candle_model_kind_name(candle_model_kind k);

/* Hyperparameters, from the GGUF metadata `<arch>.*` keys. */
typedef struct candle_model_config {
    candle_arch arch;
    int64_t n_vocab;
    int64_t n_ctx_train;  /* context_length */
    int64_t n_embd;       /* embedding_length */
    int64_t n_layer;      /* block_count */
    int64_t n_ff;         /* feed_forward_length */
    int64_t n_head;       /* attention.head_count */
    int64_t n_head_kv;    /* attention.head_count_kv */
    int64_t head_dim;     /* attention.key_length, else n_embd / n_head */
    int64_t n_rot;        /* rope.dimension_count, else head_dim */
    double norm_eps;      /* attention.layer_norm_rms_epsilon */
    double rope_base;     /* rope.freq_base (global layers) */
    double rope_base_swa; /* rope base of sliding-window layers */
    double rope_scale;    /* position multiplier (1 / linear or YaRN factor) */
    int rope_mode;        /* candle_rope_mode */
    /* RoPE scaling beyond the position multiplier, as candle_rope_params
     * takes it (per-pair factors, Llama 3.1's rope_freqs or Phi-3's short/long
     * sets, are tensors of the model): */
    double rope_ext_factor;  /* YaRN ramp weight (1 for YaRN, else 0) */
    double rope_attn_factor; /* the op's attn_factor (cos/sin magnitude) */
    double rope_beta_fast, rope_beta_slow; /* YaRN ramp ends */
    int64_t rope_n_ctx_orig; /* rope.scaling.original_context_length, else n_ctx_train */
    /* dynamic NTK (rope.scaling.type dynamic, transformers' "dynamic"): its
     * factor, 0 for none. A step whose sequence reaches seq_len tokens past
     * n_ctx_train rotates with the base rope_base * (factor * seq_len /
     * n_ctx_train - (factor - 1))^(n_rot / (n_rot - 2)) */
    double rope_dyn_factor;
    int64_t n_swa;        /* sliding window (keys), 0 = none */
    int swa_pattern;      /* every swa_pattern-th layer is global; 0 = all */
    double attn_scale;    /* query scale, 0 = 1/sqrt(head_dim) */
    double attn_softcap;  /* tanh soft-capping of scores, 0 = none */
    double final_softcap; /* tanh soft-capping of logits, 0 = none */
    double embd_scale;    /* input embeddings multiplied by this (1 or sqrt(n_embd)) */
    double residual_scale; /* attention and FFN outputs multiplied by this before the
                              residual add (Granite's residual_multiplier), 1 = none */
    double logit_scale;    /* logits divided by this (Granite's logits_scaling), 1 = none */
    candle_model_kind kind;
    /* Mixture of experts (Mixtral is llama with experts); 0 experts: dense. */
    int64_t n_expert;      /* expert_count */
    int64_t n_expert_used; /* expert_used_count: experts per token */
    int64_t n_ff_exp;      /* expert_feed_forward_length, else feed_forward_length */
    int64_t n_ff_shexp;    /* expert_shared_feed_forward_length, else n_ff_exp */
    bool expert_norm;      /* renormalise the chosen experts' weights to sum 1 */
    /* A decoder run without its causal mask (attention.causal false: Gemma 3
     * as EmbeddingGemma runs it): every token sees the whole sequence, and on
     * sliding-window layers the keys within n_swa / 2 of it on either side.
     * Such a model embeds (candle_model_forward, candle_encoder) and
     * generates nothing. */
    bool bidirectional;
} candle_model_config;

typedef struct candle_model candle_model;

typedef struct candle_model_params {
    int n_threads; /* 0 = default */
    bool no_mmap;  /* read the weights into memory instead of mapping */
    /* The backend the model's weights live on and its sessions, batches and KV
     * pools compute with, shared by them all (not freed by the model; it must
     * outlive them). NULL: a CPU backend of n_threads threads with the CPU
     * defaults (candle_cpu_set_defaults), made and freed by the model. A
     * backend the host cannot address gets a copy of the weights at load. */
    candle_backend *backend;
    /* Float weight matrices (the linear layers' f32, f16 or bf16 weights;
     * embedding tables, norms and quantized weights stay as stored)
     * converted at load to this dtype: CANDLE_DTYPE_BF16 or CANDLE_DTYPE_F16
     * (half the memory of f32; bf16 takes the CPU's bf16 dot products where
     * it has them, AVX512_BF16), CANDLE_DTYPE_Q8_0 (quantized: the integer
     * dot products; rows that are no whole number of blocks stay), or 0
     * (f32's value): as stored. The copies live in memory, not in the file's
     * mapping. As TEI's --dtype. */
    candle_dtype weight_dtype;
} candle_model_params;

CANDLE_API candle_model_params candle_model_default_params(void);

/* path: a GGUF file or a Hugging Face model directory (config.json +
 * safetensors). Errors: io/format from the files, CANDLE_ERR_UNSUPPORTED
 * naming an unknown architecture, CANDLE_ERR_FORMAT naming a missing key or
 * tensor. */
CANDLE_API candle_status candle_model_load(candle_model **out, const char *path,
                                           const candle_model_params *p);
CANDLE_API void candle_model_free(candle_model *m);
CANDLE_API const candle_model_config *candle_model_get_config(const candle_model *m);
/* The weights' source: metadata (chat template, ...) and tensors. */
CANDLE_API const candle_weights *candle_model_weights(const candle_model *m);
/* The tokenizer that comes with weights: a GGUF file's vocabulary or a
 * directory's tokenizer.json (tokenizer.h). */
typedef struct candle_tokenizer candle_tokenizer;
CANDLE_API candle_status candle_tokenizer_from_weights(candle_tokenizer **out,
                                                       const candle_weights *w);
/* The GGUF file of a model loaded from one, else NULL. */
CANDLE_API const candle_gguf *candle_model_gguf(const candle_model *m);
/* Bytes of weights the model uses. */
CANDLE_API size_t candle_model_weight_bytes(const candle_model *m);

/* ---- the generic forward: a batch of sequences in, states or logits out ----
 * Beside the session API, for models of every kind: each sequence is
 * evaluated on its own (no KV cache kept), padding positions give zeros. */
typedef enum candle_output_kind {
    CANDLE_OUTPUT_LOGITS = 0,  /* [n_seq, n_tokens, n_vocab]: every position */
    CANDLE_OUTPUT_HIDDEN,      /* [n_seq, n_tokens, n_embd]: last layer, after the final norm */
    CANDLE_OUTPUT_POOLED_LAST, /* [n_seq, n_embd]: the hidden state of each sequence's last token */
    CANDLE_OUTPUT_POOLED_MEAN, /* [n_seq, n_embd]: the mean of each sequence's hidden states */
    CANDLE_OUTPUT_POOLED_CLS,  /* [n_seq, n_embd]: the hidden state of each sequence's first token */
    CANDLE_OUTPUT_POOLED_MAX,  /* [n_seq, n_embd]: the elementwise max over each sequence */
} candle_output_kind;

typedef struct candle_forward_input {
    const int32_t *tokens; /* [n_seq, n_tokens] token ids (padding positions: any valid id) */
    const uint8_t *mask;   /* [n_seq, n_tokens] attention mask: 1 token, 0 padding; NULL: all
                            * tokens. A row's tokens are one run (left or right padding);
                            * positions count from 0 at the run's first token. */
    int64_t n_seq, n_tokens;
    const int32_t *type_ids; /* [n_seq, n_tokens] token types (segments) of an encoder with a
                              * token-type table, 0..rows-1; NULL: all 0. Decoders ignore it. */
    /* LoRA adapters (lora.h) applied to every sequence, n_lora of them; NULL/0: none.
     * Causal decoders only. */
    const struct candle_lora_use *lora;
    int n_lora;
} candle_forward_input;

/* Floats candle_model_forward writes for in and kind. */
CANDLE_API size_t candle_model_output_size(const candle_model *m, const candle_forward_input *in,
                                           candle_output_kind kind);
/* Evaluate in on the model's backend into out (out_len floats, at least
 * candle_model_output_size). Errors (thread-local last error):
 * CANDLE_ERR_INVALID_ARG for a short buffer, a mask with a gap or an empty
 * row, token ids out of range; the output is then unspecified. Thread-safe
 * on a shared model. */
CANDLE_API candle_status candle_model_forward(const candle_model *m, const candle_forward_input *in,
                                              candle_output_kind kind, float *out, size_t out_len);

typedef struct candle_session candle_session;

typedef struct candle_session_params {
    int64_t n_ctx;        /* positions in the KV cache; 0 = the training context */
    candle_dtype kv_type; /* f32 (default), f16, q8_0 or q4_0 (head_dim a multiple of 32) */
    int n_threads;        /* 0 = the model's backend; another count: a CPU backend of its
                           * own with that many threads (a CPU model only) */
} candle_session_params;

CANDLE_API candle_session_params candle_session_default_params(void);

CANDLE_API candle_status candle_session_init(candle_session **out, const candle_model *m,
                                             const candle_session_params *p);
CANDLE_API void candle_session_free(candle_session *s);

/* Evaluate n tokens at the current position (a prefill batch or one decode
 * step) and advance. logits (may be NULL) gets n_vocab floats for the last
 * token, or n * n_vocab (row per token) when all_logits. A batch that does
 * not fit in the cache is an invalid-argument error and changes nothing. */
CANDLE_API candle_status candle_session_eval(candle_session *s, const int32_t *tokens, int64_t n,
                                             float *logits, bool all_logits);
/* An eval runs in batches of at most 512 tokens; before each, fn(user) is
 * asked whether to stop (a Ctrl-C during a long prompt). When it says true
 * the eval returns CANDLE_ERR_CANCELLED and leaves the cache as before the
 * call, like any failed eval. fn may be called from the eval's thread only;
 * NULL removes it. */
CANDLE_API void candle_session_set_abort(candle_session *s, bool (*fn)(void *user), void *user);
CANDLE_API int64_t candle_session_pos(const candle_session *s);
CANDLE_API int64_t candle_session_n_ctx(const candle_session *s);
/* Forget the positions from n_keep on (n_keep <= pos). */
CANDLE_API candle_status candle_session_truncate(candle_session *s, int64_t n_keep);
CANDLE_API void candle_session_reset(candle_session *s);
/* Context shift: drop the n_discard positions after the first n_keep and move
 * the rest down, re-rotating the cached keys to their new positions. */
CANDLE_API candle_status candle_session_shift(candle_session *s, int64_t n_keep, int64_t n_discard);
CANDLE_API candle_status candle_session_errcode(const candle_session *s);
CANDLE_API const char *candle_session_errmsg(const candle_session *s);

#ifdef __cplusplus
}
#endif
#endif
