/* Batched evaluation of several sessions in one graph: the tokens of every
 * sequence (a prefill chunk or one decode token each) are stacked into one
 * [n_tokens, n_embd] activation, so each linear layer is one matmul over
 * all of them; attention runs per sequence against that session's own KV
 * cache. Used by `candle serve` for continuous batching. Gives the same
 * logits as candle_session_eval on each session alone. */
#ifndef CANDLE_BATCH_H
#define CANDLE_BATCH_H

#include "api.h"
#include "kv_pool.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_batch candle_batch;

typedef struct candle_batch_seq {
    candle_session *sess;  /* of the batch's model; each at most once per call */
    const int32_t *tokens; /* n tokens at the session's current position */
    int64_t n;
    float *logits;         /* n_vocab floats for each of the last n_logits tokens, or NULL */
    /* Or, with sess NULL: a sequence of a paged pool. Its blocks for the new
     * positions are taken from the pool; attention gathers its keys and
     * values through the block table. */
    candle_kv_pool *pool;
    candle_kv_seq *paged;
    /* With logits: the rows whose logits are wanted, the sequence's last
     * n_logits (0 counts as 1; at most n), written to logits row after row
     * ([n_logits, n_vocab]): speculative decoding verifies drafted tokens
     * from them. On a paged sequence paged attention computes each row
     * alone, and so do the products of the legacy block types (q4_0 .. q8_0)
     * up to 256 rows: there every row's logits have the bits a one-token
     * step would give. So do q4_K and q6_K up to 12 rows of the step (q5_K
     * 32): a step with a sequence of n_logits > 1 keeps their few-row
     * kernels that far (on AVX-512 VNNI too, where plain steps take the
     * panels from 7 and 11 rows); their panels beyond sum the scales in
     * another order than the one-row kernel, so there a row may differ in
     * its last bits (greedy text then parts from one-token steps at near
     * ties). */
    int64_t n_logits;
} candle_batch_seq;

CANDLE_API candle_status candle_batch_init(candle_batch **out, const candle_model *m,
                                           int n_threads);
CANDLE_API void candle_batch_free(candle_batch *b);
/* Evaluate and advance every session; on error nothing advances (the
 * message is on the batch). */
CANDLE_API candle_status candle_batch_eval(candle_batch *b, const candle_batch_seq *seqs,
                                           int n_seqs);
/* candle_batch_eval with LoRA adapters (lora.h) applied to every sequence
 * of the call (n_lora of them; NULL/0: none, as candle_batch_eval). One
 * graph applies one set: sequences with different sets take separate calls. */
struct candle_lora_use;
CANDLE_API candle_status candle_batch_eval_lora(candle_batch *b, const candle_batch_seq *seqs, int n_seqs,
                                                const struct candle_lora_use *lora, int n_lora);
/* The status of the last candle_batch_eval (each call starts clean) and its message. */
CANDLE_API candle_status candle_batch_errcode(const candle_batch *b);
CANDLE_API const char *candle_batch_errmsg(const candle_batch *b);

#ifdef __cplusplus
}
#endif
#endif
