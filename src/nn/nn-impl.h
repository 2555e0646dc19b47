/* Building blocks the models share: the KV cache and attention with the
 * extras some families need (sliding window, soft-capped scores). */
#ifndef CANDLE_NN_IMPL_H
#define CANDLE_NN_IMPL_H

#include "../core/core-impl.h"
#include "candle/sampler.h"

/* The grammar matcher and vocabulary set on s (NULL when none): speculative
 * decoding advances the matcher by each token it outputs. */
candle_grammar_state *cdl_sampler_grammar(const candle_sampler *s, const candle_grammar_vocab **v);
/* Whether s draws at random (temp > 0): else its tokens do not depend on
 * how many drafts a speculative step verified. */
bool cdl_sampler_draws(const candle_sampler *s);

/* JSON text (tools.c, also used by chat.c's tool rendering): the length of
 * the object or array that opens s[0..n) (0 when it does not close), and a
 * malloc'ed copy of valid JSON s[0..n) without whitespace outside strings
 * (NULL on OOM). */
size_t cdl_json_span(const char *s, size_t n);
char *cdl_json_compact(const char *s, size_t n);
/* The call of the JSON object text[0..n) as candle_tool_calls_parse reads
 * one (tools.c; tools_stream.c checks each streamed call with it): *k's
 * strings malloc'ed; false when it is not a call (*oom set on memory). */
struct candle_tool_call;
bool cdl_tool_call_read(const char *text, size_t n, struct candle_tool_call *k, bool *oom);

/* Keys and values of every layer, allocated once for n_ctx positions. Keys
 * are stored already rotated (RoPE applied at their position). */
typedef struct kv_cache {
    int64_t n_layer, n_head_kv, n_ctx, head_dim;
    candle_dtype dtype;
    candle_tensor **k; /* [n_layer] of [n_head_kv, n_ctx, head_dim] */
    candle_tensor **v; /* [n_layer] of [n_head_kv, n_ctx, head_dim] */
} kv_cache;

/* A KV cache type for rows of head_dim (the session's cache and the paged
 * pool, `what` naming which in the error): f32, f16, bf16 where bf16_ok,
 * q8_0 or q4_0 with head_dim whole blocks; else a dtype error in ctx. */
candle_status kv_check_type(candle_ctx *ctx, const char *what, candle_dtype t, int64_t head_dim, bool bf16_ok);

candle_status kv_cache_init(kv_cache *kv, candle_ctx *ctx, int64_t n_layer, int64_t n_head_kv,
                            int64_t n_ctx, int64_t head_dim, candle_dtype dtype);
void kv_cache_free(kv_cache *kv); /* the tensors go with their context */

/* Write k, v ([S, n_head_kv, head_dim]) of layer il at positions
 * pos..pos+S and return views of positions 0..pos+S as [1, n_head_kv,
 * pos+S, head_dim] that are computed after the writes. */
bool kv_cache_update(candle_ctx *ctx, kv_cache *kv, int64_t il, candle_tensor *k,
                     candle_tensor *v, int64_t pos, candle_tensor **k_all, candle_tensor **v_all);

/* Make `view` depend on `dep` in the graph: a view is bound to storage, not
 * to the node that writes it, so a read of cache memory must be ordered
 * after the write explicitly. A view made from such a view points at the
 * storage owner again and needs its own dependency. */
bool nn_add_dependency(candle_ctx *ctx, candle_tensor *view, candle_tensor *dep);

typedef struct nn_attn_params {
    double scale;   /* 0 = 1/sqrt(D) */
    double softcap; /* tanh capping of scores, 0 = none */
    int64_t window; /* keys within this distance (query pos - key pos < window), 0 = all */
    int64_t pos;    /* absolute position of the first query */
    bool row_steps; /* each row as its one-position step (cdl_attention_rows) */
} nn_attn_params;

/* Causal grouped-query attention. q [1, Hq, Sq, D], k/v [1, Hkv, Skv, D]
 * with Skv = pos + Sq -> [1, Hq, Sq, D]. */
candle_tensor *nn_attention(candle_ctx *ctx, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                            const nn_attn_params *p);

/* A JSON Schema "pattern" (n bytes) as a GBNF expression of the JSON string
 * values matching it, appended to out (json_regex.c; uses json_schema.c's
 * rules char and ws); false with err set for what it does not translate. */
struct cdl_strbuf;
bool cdl_json_pattern_gbnf(const char *pattern, size_t n, struct cdl_strbuf *out, char *err, size_t errn);
/* The JSON integers in [lo, hi] (has_lo/has_hi false: that side open; lo <=
 * hi) as a GBNF expression then ws, appended to out (json_range.c). */
void cdl_json_int_range_gbnf(bool has_lo, int64_t lo, bool has_hi, int64_t hi, struct cdl_strbuf *out);
/* Numbers (no exponent) x with lo <(=) x <(=) hi, the bounds whole numbers
 * (either side open; _excl: exclusive), as GBNF; false when none are. */
bool cdl_json_num_range_gbnf(bool has_lo, int64_t lo, bool lo_excl, bool has_hi, int64_t hi, bool hi_excl,
                             struct cdl_strbuf *out);
/* The multiples of k (2..1000) as GBNF: rules s<base>..s<base+k-1> (the
 * digits after a prefix of each remainder) into rules, the integer into out. */
void cdl_json_int_multiple_gbnf(int64_t k, int base, struct cdl_strbuf *rules, struct cdl_strbuf *out);

#endif
