/* Model internals: the family descriptions, the weights of a decoder-only
 * transformer, the session and the shared decoder-block builder. */
#ifndef CANDLE_MODEL_IMPL_H
#define CANDLE_MODEL_IMPL_H

#include "candle/model.h"
#include "candle/lora.h"
#include "candle/weights.h"
#include "../core/core-impl.h"
#include "../nn/nn-impl.h"

/* The choices that make a transformer family, stated explicitly so that a
 * new architecture is a table entry plus only what is truly new. A block
 * builder refuses, at load, a description it does not implement (the decoder
 * builder: RMSNorm, gated MLP, RoPE, causal attention). */
typedef enum model_norm { NORM_RMS = 0, NORM_LAYER } model_norm;         /* LayerNorm: with bias */
typedef enum model_mlp { MLP_GATED = 0, MLP_PLAIN } model_mlp;           /* act(gate) * up, or act(up) */
typedef enum model_positions {
    POS_ROPE = 0,  /* rotary, pairing from the weight source (candle.rope.interleaved) */
    POS_LEARNED,   /* absolute learned embeddings */
    POS_RELATIVE,  /* relative position buckets (T5, MPNet) */
    POS_ALIBI,
} model_positions;
typedef enum model_attention {
    ATTN_CAUSAL = 0, /* sliding windows per layer come from the config */
    ATTN_BIDIRECTIONAL,
} model_attention;

typedef struct model_desc {
    candle_model_kind kind;
    model_norm norm;
    model_mlp mlp;
    candle_op ffn_act; /* SILU, GELU_TANH, ... */
    model_positions positions;
    model_attention attention;
    bool qkv_bias;      /* qwen2: biases on q, k, v */
    bool qk_norm;       /* qwen3, gemma3: RMSNorm of each q/k head */
    bool qk_norm_full;  /* olmoe: RMSNorm of the whole q / k projection, before the heads split */
    bool fused_qkv;     /* phi3: one attn_qkv weight */
    bool fused_gate_up; /* phi3: ffn_up holds gate then up */
    bool post_norms;    /* gemma2/3: norms after attention and FFN */
    bool pos_table;     /* POS_RELATIVE with learned absolute embeddings as well (MPNet) */
    bool no_token_types; /* encoders without a token-type table (MPNet) */
    bool moe_dense_layers; /* MoE models may have dense layers (Qwen-MoE's mlp_only_layers) */
    bool pre_norm;      /* encoders: LayerNorm before attention and FFN, a final norm (ModernBERT) */
} model_desc;

/* What every decoder LM family shares; the table entries add the rest. */
#define DECODER_LM                                                                     \
    .kind = CANDLE_MODEL_DECODER_LM, .norm = NORM_RMS, .mlp = MLP_GATED, .positions = POS_ROPE, \
    .attention = ATTN_CAUSAL

/* Linear weights are kept as the transposed view of the stored [out, in]
 * weight, made once at load, so steps create no views of shared tensors. */
typedef struct layer_weights {
    candle_tensor *attn_norm;      /* [n_embd] */
    candle_tensor *wq;             /* [n_embd, n_head*head_dim] */
    candle_tensor *wk;             /* [n_embd, n_head_kv*head_dim] */
    candle_tensor *wv;             /* [n_embd, n_head_kv*head_dim] */
    candle_tensor *wqkv;           /* [n_embd, (n_head+2*n_head_kv)*head_dim], phi3 */
    candle_tensor *bq, *bk, *bv;   /* [n_head*head_dim], [n_head_kv*head_dim] x2 */
    candle_tensor *q_norm;         /* [head_dim]; qk_norm_full: [n_head*head_dim] */
    candle_tensor *k_norm;         /* [head_dim]; qk_norm_full: [n_head_kv*head_dim] */
    candle_tensor *wo;             /* [n_head*head_dim, n_embd] */
    candle_tensor *attn_post_norm; /* [n_embd] */
    candle_tensor *ffn_norm;       /* [n_embd] */
    candle_tensor *w_gate;         /* [n_embd, n_ff] */
    candle_tensor *w_up;           /* [n_embd, n_ff], or [n_embd, 2*n_ff] fused */
    candle_tensor *w_down;         /* [n_ff, n_embd] */
    candle_tensor *ffn_post_norm;  /* [n_embd] */
    /* A mixture-of-experts FFN (ffn_gate_inp present): the router, and per
     * expert the transposed view of its gate/up/down weights, whether the
     * source stacks them ([n_expert, ...] ffn_*_exps, as llama.cpp writes)
     * or lists one tensor per expert (ffn_gate.E.weight, the older GGUF and
     * the Hugging Face layout). */
    candle_tensor *router;         /* [n_embd, n_expert] */
    candle_tensor **exp_gate, **exp_up, **exp_down; /* [n_expert] each */
    /* the stacked [n_expert, rows, cols] tensors when the source has them
     * (the moe_ffn op reads only the chosen experts' rows of them) */
    candle_tensor *gate_exps, *up_exps, *down_exps;
    candle_tensor *sh_gate, *sh_up, *sh_down; /* shared expert, or NULL */
    candle_tensor *sh_gate_inp;    /* [n_embd, 1]: its sigmoid gate, or NULL */
} layer_weights;

typedef struct model_family {
    candle_arch arch;
    const char *name; /* general.architecture */
    model_desc desc;
    /* Family-specific hyperparameters, after the common ones are read. */
    candle_status (*config)(const candle_weights *w, candle_model_config *c);
} model_family;

extern const model_family family_llama;  /* llama.c */
extern const model_family family_qwen2;  /* qwen.c */
extern const model_family family_qwen3;  /* qwen.c */
extern const model_family family_qwen2moe; /* qwen.c */
extern const model_family family_qwen3moe; /* qwen.c */
extern const model_family family_olmoe;    /* olmoe.c */
extern const model_family family_granitemoe; /* olmoe.c */
extern const model_family family_granite;    /* olmoe.c */
extern const model_family family_gemma2; /* gemma.c */
extern const model_family family_gemma3; /* gemma.c */
extern const model_family family_gemma_embedding; /* gemma.c */
extern const model_family family_phi3;   /* phi3.c */
extern const model_family family_bert;   /* bert.c */
extern const model_family family_mpnet;  /* bert.c */
extern const model_family family_modernbert; /* bert.c */
extern const model_family family_nomicbert; /* bert.c */

/* The family of general.architecture, or an unsupported error naming it. */
candle_status model_family_find(const char *arch, size_t len, const model_family **out);

/* One encoder block. BERT: post-norm attention and a plain GELU FFN, every
 * projection biased. ModernBERT (pre_norm): the norms come before attention
 * and FFN (layer 0 has no attention norm), fused QKV, a gated FFN, no biases
 * (NULL). Linear weights transposed as the decoder's. */
typedef struct encoder_layer {
    candle_tensor *wq, *wk, *wv;         /* [n_embd, n_embd] */
    candle_tensor *wqkv;                 /* [n_embd, 3*n_embd]: fused_qkv */
    candle_tensor *bq, *bk, *bv, *bqkv;  /* [n_embd] x3, [3*n_embd], or NULL */
    candle_tensor *wo, *bo;              /* [n_embd, n_embd], [n_embd] */
    candle_tensor *attn_norm, *attn_norm_b; /* [n_embd]: LayerNorm after (pre_norm: before) attention */
    candle_tensor *w_gate;               /* [n_embd, n_ff]: a gated FFN with separate weights */
    candle_tensor *w_up, *b_up;          /* [n_embd, n_ff] ([n_embd, 2*n_ff] fused_gate_up), [n_ff] */
    candle_tensor *w_down, *b_down;      /* [n_ff, n_embd], [n_embd] */
    candle_tensor *out_norm, *out_norm_b; /* [n_embd]: LayerNorm after (pre_norm: before) the FFN */
} encoder_layer;

struct candle_model {
    candle_model_config cfg;
    const model_family *family;
    candle_weights *weights;
    candle_ctx *ctx;          /* weight leaves and their transposed views */
    candle_tensor *tok_embd;  /* [n_vocab, n_embd] */
    candle_tensor *out_norm;  /* [n_embd] */
    candle_tensor *output;    /* [n_embd, n_vocab] (token_embd's when tied) */
    layer_weights *layers;    /* [n_layer], decoders */
    encoder_layer *enc;       /* [n_layer], encoders */
    candle_tensor *pos_embd;  /* [pos_offset + n_ctx_train, n_embd], learned positions */
    int64_t pos_offset;       /* the row of position 0 (RoBERTa: padding_idx + 1) */
    candle_tensor *type_embd; /* [n_types, n_embd], token types (NULL: none) */
    candle_tensor *rel_bias;  /* [n_buckets, n_head]: relative-position bias shared by all layers */
    candle_tensor *embd_norm, *embd_norm_b; /* [n_embd]: LayerNorm of the embeddings */
    candle_tensor *out_norm_b; /* [n_embd]: bias of the final LayerNorm (pre_norm encoders), or NULL */
    /* RoPE frequency divisors, f32 [n_rot / 2]: Llama 3.1's one set, or
     * Phi-3's short and long sets (chosen per sequence, model_rope_factors) */
    candle_tensor *rope_freqs, *rope_short, *rope_long;
    /* Linears whose products need more than h wt: inputs in another order
     * (GPTQ act-order, loaded with their inputs sorted by group) and/or a
     * zero-point correction per group (asymmetric 4-bit as Q4_0, see
     * candle_weights_load_linear_split):
     *     x w = x' wt + groupsum(x') corr,   x' = x[:, order] (or x). */
    struct model_in_order {
        const candle_tensor *wt; /* the transposed weight [n_in, n_out] */
        candle_tensor *order;    /* i32 [n_in], or NULL */
        candle_tensor *corr;     /* [n_in / group, n_out] (f32, transposed), or NULL */
        int64_t group;           /* inputs per correction group */
    } *in_orders;                /* [n_in_orders] */
    int64_t n_in_orders;
    size_t weight_bytes;
    candle_dtype weight_dtype; /* candle_model_params.weight_dtype: float matrices converted to it */
    candle_backend *backend; /* every context of the model computes on it */
    bool owns_backend;
    struct model_ws_pool *ws_pool; /* forward workspaces (workspace.c); mutable through const m */
};

struct candle_session {
    const candle_model *model;
    candle_backend *backend; /* the model's, or its own (owns_backend) */
    bool owns_backend;
    candle_ctx *ctx;       /* KV cache before `mark`, one step's graph after */
    candle_ctx_mark mark;
    kv_cache kv;
    int64_t pos;           /* positions filled in the cache */
    float *host_mask;      /* scratch for sliding-window masks */
    bool (*abort_fn)(void *user); /* candle_session_set_abort; NULL: none */
    void *abort_user;
    candle_lora_use *lora; /* [n_lora]: candle_session_set_lora's adapters */
    int n_lora;
};

/* ---- forward workspaces (workspace.c) ----
 * What one packed forward (an encoder's, a bidirectional decoder's) and the
 * encoder wrappers around it reuse from call to call so that a steady state
 * allocates nothing: a context kept at its mark (its descriptors, graph
 * scratch and memory plan survive the reset) and host buffers grown to the
 * largest request seen. The model keeps idle ones on a mutex-protected free
 * list; each caller takes its own, so the model stays shareable by threads. */
enum {
    WS_PK_RUNS,   /* forward.c: int64 ra, rb, lens [3 n_seq] */
    WS_PK_IDS,    /* int32 ids, types [2 cap] */
    WS_PK_H,      /* float [cap, n_embd] */
    WS_ENC_OFF,   /* encoder.c: rg.off [n_seq], mask/attention tables */
    WS_ENC_POS,   /* int32 rg.pos [n] */
    WS_ENC_TMP,   /* one graph input's host values, copied at once */
    WS_EMB_IN,    /* embedder.c / encoder_head.c: padded ids, types, mask */
    WS_EMB_OUT,   /* pooled states, head rows */
    WS_EMB_IDS,   /* the tokenized inputs of one chunk */
    WS_EMB_CHUNK, /* their table (embedder-impl.h: tok_chunk) */
    WS_TOK_A,     /* tokenization of one text */
    WS_TOK_B,
    WS_N_BUFS
};
typedef struct model_ws {
    struct model_ws *next; /* on the free list */
    candle_ctx *ctx;       /* NULL in a tokenizing one (model_ws_get) */
    candle_ctx_mark mark;
    void *buf[WS_N_BUFS];
    size_t cap[WS_N_BUFS];
    struct tok_scratch *tok; /* the tokenizer's scratch (tok_scratch_begin), made on first use */
} model_ws;
candle_status model_ws_pool_init(candle_model *m);
void model_ws_pool_free(candle_model *m);
/* An idle workspace of m (or a new one); NULL with the error set on OOM.
 * forward: one that runs forwards (with a context); else one that only
 * tokenizes, from a list of its own, so that callers which only tokenize
 * (a server's request threads) do not leave forward memory in many. */
model_ws *model_ws_get(const candle_model *m, bool forward);
/* Back to m's free list (NULL: nothing), unless it grew past what is kept. */
void model_ws_put(const candle_model *m, model_ws *w);
/* Buffer slot of w holding at least n bytes (its old contents are not
 * kept); NULL with an out-of-memory error naming `what` on failure. */
void *model_ws_buf(model_ws *w, int slot, size_t n, const char *what);
/* As model_ws_buf, keeping the first `keep` bytes of the slot. */
void *model_ws_grow(model_ws *w, int slot, size_t n, size_t keep, const char *what);

/* candle_model_forward in the caller's workspace (which it leaves holding
 * its own buffer slots' contents: those of WS_EMB_* stay untouched). */
candle_status model_forward_ws(const candle_model *m, model_ws *ws, const candle_forward_input *in,
                               candle_output_kind kind, float *out, size_t out_len);

/* Record that wt's inputs take `order` (or NULL) and its products the
 * correction corr (transposed, or NULL) over groups of `group` inputs (OOM
 * error on m->ctx, else OK). */
candle_status model_add_in_order(candle_model *m, const candle_tensor *wt, candle_tensor *order,
                                 candle_tensor *corr, int64_t group);
/* The last gather model_linear made, so that linears of one input and one
 * order (GPTQ act-order's q/k/v, gate/up: their Hessians are the same) read
 * one node, which the backend runs as one group of products. */
typedef struct model_gather_memo {
    const candle_tensor *h, *order;
    candle_tensor *out;
} model_gather_memo;
/* h wt for a linear's transposed weight wt, its inputs gathered into the
 * order the weight takes them in (memo: the step's, or NULL); a plain
 * product with cdl_matmul_ex's flags. */
candle_tensor *model_linear(candle_ctx *ctx, const candle_model *m, candle_tensor *h, candle_tensor *wt,
                            model_gather_memo *memo, unsigned flags);
/* model_linear plus a bias b [n_out] (NULL: none), added as the product is
 * written where the linear is a plain product (cdl_matmul_ex, with its
 * flags: CDL_MM_FLOAT_ACT). */
candle_tensor *model_linear_bias(candle_ctx *ctx, const candle_model *m, candle_tensor *h, candle_tensor *wt,
                                 candle_tensor *b, unsigned flags);

/* CANDLE_OK for a decoder LM, else an invalid-argument error naming what
 * `who` (a session, a batch, a KV pool) needs. */
candle_status model_need_decoder(const candle_model *m, const char *who);

/* The backend for a session or batch of m asking for n_threads (0: any):
 * the model's, or for another thread count on a CPU model a CPU backend with
 * the model's settings that the caller frees (*own). */
candle_status model_backend_for(const candle_model *m, int n_threads, candle_backend **out, bool *own);

/* ---- config helpers (config.c) ---- */

/* `<arch>.<key>` as an integer / float; false if absent. */
bool model_cfg_get_i64(const candle_weights *w, const char *arch, const char *key, int64_t *out);
bool model_cfg_get_f64(const candle_weights *w, const char *arch, const char *key, double *out);
/* The keys every family has, with the defaults of llama.cpp. */
candle_status model_cfg_read_common(const candle_weights *w, const char *arch, candle_model_config *c);
/* Refuses values (epsilon, RoPE base) that load but cannot evaluate. */
candle_status model_cfg_check_values(const char *arch, const candle_model_config *c);

/* ---- the decoder (decoder.c) ---- */

/* Refuses a description the decoder builder does not implement. */
candle_status decoder_check_desc(const model_family *f);
/* Load every tensor the family's blocks use; errors name a missing one. */
candle_status decoder_load_weights(candle_model *m);
candle_status encoder_load_weights(candle_model *m);
/* Bidirectional local attention (ModernBERT's, EmbeddingGemma's): key j is
 * seen from query i when |i - j| <= window / 2 ([1, 1, n, n], 0 or -inf);
 * NULL when every key of an n-token sequence is in reach. */
candle_tensor *model_local_mask(candle_ctx *ctx, model_ws *ws, int64_t window, int64_t n);
/* The last hidden states [sum(lens), n_embd] (after the final norm) of
 * n_seq sequences through a bidirectional decoder (cfg.bidirectional),
 * without a KV cache, packed as encoder_hidden_rows packs them. */
candle_tensor *decoder_hidden_bidir(candle_ctx *ctx, const candle_model *m, model_ws *ws, const int32_t *tokens,
                                    const int64_t *lens, int64_t n_seq);
/* xs[0..n) stacked along dim 0 (a batch's per-sequence attention rows), at
 * most two copies of each row: a node takes CANDLE_MAX_SRC inputs, so
 * groups of them first. Overwrites xs. */
candle_tensor *model_concat_rows(candle_ctx *ctx, candle_tensor **xs, int64_t n);
/* The attention options of a layer whose output projection is wo: bf16
 * products where that weight is bf16 (its product rounds the attention
 * rows to bf16 anyway, as the q, k, v projections rounded their input). */
static inline unsigned model_attn_flags(const candle_tensor *wo) {
    return wo && wo->dtype == CANDLE_DTYPE_BF16 ? CDL_ATTN_BF16 : 0;
}
/* Refuses a description the encoder builder does not implement. */
candle_status encoder_check_desc(const model_family *f);
/* The last hidden states [sum(lens), n_embd] of n_seq sequences through an
 * encoder, their tokens (and types, NULL: all 0) one after another:
 * sequence s is lens[s] rows, after those of the sequences before it. */
candle_tensor *encoder_hidden_rows(candle_ctx *ctx, const candle_model *m, model_ws *ws, const int32_t *tokens,
                                   const int32_t *types, const int64_t *lens, int64_t n_seq);
/* How a session step runs: SESSION_HIDDEN gives the last layer's states
 * after the final norm instead of logits; SESSION_ROW_STEPS gives every
 * row the bits the one-token step at its position would (speculative
 * decoding: verifying drafted tokens, a draft model catching up on them;
 * cdl_attention_rows). */
enum { SESSION_HIDDEN = 1, SESSION_ROW_STEPS = 2 };
/* Logits for tokens[0..n) at s->pos: [n or 1, n_vocab] f32, in s->ctx; or
 * hidden states [n or 1, n_embd] (flags). */
candle_tensor *decoder_forward(candle_session *s, const int32_t *tokens, int64_t n, bool all,
                               unsigned flags);
/* Index of the first NaN or Inf of v[0..n), or -1 (session.c). */
int64_t model_first_nonfinite(const float *v, int64_t n);
/* Evaluate as candle_session_eval does, as flags say. */
candle_status session_eval_out(candle_session *s, const int32_t *tokens, int64_t n, float *out,
                               bool all, unsigned flags);

/* One step's graph over n stacked token rows, shared by the session and
 * the batch paths; only the KV cache and attention differ, in `attend`. */
typedef struct decoder_step decoder_step;
/* Layer il's attention of q [n, n_head, head_dim] with k, v [n, n_head_kv,
 * head_dim] (after RoPE), storing k, v in the path's cache: [n, n_head*head_dim]. */
typedef candle_tensor *(*decoder_attend_fn)(decoder_step *st, candle_tensor *q, candle_tensor *k,
                                            candle_tensor *v, int64_t il);
struct decoder_step {
    candle_ctx *ctx;
    const candle_model *m;
    const candle_model_config *c;
    int64_t n;             /* token rows in this step */
    int64_t pos0;          /* position of row 0 when pos is NULL */
    candle_tensor *pos;    /* i32 [n]: each row's position, or NULL for pos0 + row */
    const char *who;       /* error message prefix */
    decoder_attend_fn attend;
    void *user;            /* the path's state for attend */
    candle_tensor *rope_ff; /* the RoPE factors of this step's sequences, or NULL */
    bool row_steps;        /* every row's logits wanted: rows as one-row steps (nn_attn_params) */
    const candle_lora_use *lora; /* [n_lora] adapters added to the linears, or NULL */
    int n_lora;
    /* dynamic NTK RoPE (rope_dyn_factor): the length each of the step's
     * sequences reaches (1 + its last position), a base each. n_seq 0: one
     * sequence of seq_len; else rows seq_rows[i] .. seq_rows[i + 1] are
     * sequence i, of seq_lens[i] */
    int64_t seq_len;
    int n_seq;
    const int64_t *seq_rows; /* [n_seq + 1] */
    const int64_t *seq_lens; /* [n_seq] */
    model_gather_memo gather; /* model_linear's */
    unsigned mm_flags;        /* the linears' cdl_matmul_ex flags (embedders: CDL_MM_FLOAT_ACT) */
};

/* ---- LoRA (lora.c) ---- */

/* The linears of a decoder layer an adapter may hold a pair for. */
typedef enum lora_slot {
    LORA_Q = 0, LORA_K, LORA_V, LORA_QKV, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_SLOTS
} lora_slot;
/* y + sum over the active adapters of s * ((h A^T) B^T) for layer il's
 * slot (il -1: the output head); y itself when none adapts it. */
candle_tensor *lora_add(candle_ctx *ctx, const candle_lora_use *use, int n, int64_t il, lora_slot slot,
                        candle_tensor *h, candle_tensor *y);
/* An invalid-argument error on ctx unless every adapter of use is m's. */
candle_status lora_check_use(candle_ctx *ctx, const candle_model *m, const candle_lora_use *use, int n,
                             const char *who);

/* The RoPE divisors a sequence of n_ctx positions uses: rope_freqs, or
 * Phi-3's long set when n_ctx exceeds the original context and its short
 * set otherwise. Like llama.cpp (n_ctx_seq > n_ctx_orig_yarn), Candle
 * switches on the sequence's capacity, not on the positions of a step as
 * transformers does (max(position_ids) + 1 of each forward): every key in a
 * cache is then rotated by one set, and a shift re-rotates it by that set.
 * For one forward over a whole prompt in a context of the prompt's length
 * both rules agree. */
candle_tensor *model_rope_factors(const candle_model *m, int64_t n_ctx);
/* The RoPE of layer il (local layers of a local/global pattern keep their
 * own base and no scaling) with divisors ff. */
candle_rope_params model_rope_params(const candle_model *m, int64_t il, candle_tensor *ff);
/* Do some layers rotate differently from others (a shift re-rotates all
 * layers' keys alike)? */
bool model_rope_per_layer(const candle_model *m);
/* The RoPE base of the global layers for a sequence of seq_len tokens:
 * rope_base, or with dynamic NTK scaling past n_ctx_train the grown one. */
double model_rope_base(const candle_model *m, int64_t seq_len);

/* Input embeddings [n, n_embd] f32, scaled as the family needs. */
candle_tensor *decoder_embed(decoder_step *st, const int32_t *tokens);
/* Every layer's attention and FFN on x [n, n_embd]. */
candle_tensor *decoder_layers(decoder_step *st, candle_tensor *x);
/* Attention of q [m, n_head, head_dim] at positions pos.. over the cached
 * k_all, v_all [1, n_head_kv, pos+m, head_dim]: [m, n_head*head_dim]. */
candle_tensor *decoder_attend_rows(decoder_step *st, candle_tensor *q, candle_tensor *k_all,
                                   candle_tensor *v_all, int64_t pos, int64_t il);
/* Logits [rows, n_vocab] of x [rows, n_embd]: final norm, output, soft-cap. */
candle_tensor *decoder_head(decoder_step *st, candle_tensor *x);
/* Is layer il a sliding-window layer? */
bool decoder_layer_is_swa(const candle_model_config *c, int64_t il);
/* Tests: batched steps gather each sequence's KV rows for the flash kernel
 * instead of the paged attention op, from now on (the two agree). */
void cdl_batch_set_gather(bool on);

#endif
