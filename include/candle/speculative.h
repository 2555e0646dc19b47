/* Speculative decoding for a candle_session: draft k tokens cheaply, verify
 * them with the model in one multi-token step, keep the longest accepted
 * prefix and roll the KV cache of the rest back.
 *
 * Drafts come from one of:
 * - prompt lookup (n-gram drafting, as Hugging Face's
 *   prompt_lookup_num_tokens and llama.cpp's lookup): the last n tokens of
 *   the context are searched for earlier in it (the latest match wins) and
 *   the tokens that followed them there are the draft;
 * - a draft model: a smaller model of the same vocabulary (same size, same
 *   token texts: checked at init) generating k tokens with its own session.
 *
 * Verification is candle_sampler_verify (sampler.h) at each drafted
 * position, in order, until one is refused: greedy keeps exactly the tokens
 * greedy decoding would produce from the same logits, sampling keeps the
 * sampler's distribution (rejection sampling; a lookup draft is a point
 * mass). So the output follows plain decoding's rule; what speculation
 * changes is only that the positions are evaluated in one batch. Where the
 * backend's multi-token step gives logits that differ in the last bits
 * from one-token steps (the K types' multi-row panels: see batch.h), greedy
 * may part from a plain run at a near tie, as a plain run parts from itself
 * with another batch size.
 *
 * Errors: the thread-local last error (candle_last_errmsg). */
#ifndef CANDLE_SPECULATIVE_H
#define CANDLE_SPECULATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "model.h"
#include "sampler.h"
#include "status.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most tokens one step drafts. */
#define CANDLE_SPEC_MAX_DRAFT 64

typedef struct candle_spec_params {
    /* k: the most tokens drafted per step, 1..CANDLE_SPEC_MAX_DRAFT
     * (default 8). The length adapts as Hugging Face's "heuristic"
     * schedule: +2 (up to k) after a step that kept every draft, -1 (down to
     * 1) after one that did not; a draft of one token refused pauses the
     * drafting for 1, 2, 4 ... 32 steps while no draft is kept. */
    int32_t n_draft;
    /* With a sampler that does not draw (temp 0: the output does not depend
     * on the draft lengths), choose each step's length 0..k from measured
     * times instead: the target step's seconds as a line in its rows (one-row steps apart), the
     * draft's seconds per token and the recent acceptance give the expected
     * tokens per second of each length, and the best is taken (0: a plain
     * step). A sampler that draws keeps the schedule above, so a seed
     * reproduces its output. Default true. The model is spec_cost.h's. */
    bool cost_aware;
    int32_t lookup_ngram; /* prompt lookup: n-gram size to match (>= 1, default 3) */
    /* A draft model (NULL: prompt lookup) with its session's parameters
     * (n_ctx at least the target session's) and its sampler's: those of the
     * target's sampler without penalties (any draft distribution keeps the
     * output's distribution; penalties would need the draft's history
     * rolled back with every refused draft). */
    const candle_model *draft_model;
    candle_session_params draft_session;
    candle_sampler_params draft_sampling; /* its seed is mixed with a constant: draws independent
                                             of a target sampler seeded alike */
    /* The draft model's drafting stops early at a token it gives less than
     * this probability (0: never; llama.cpp's --draft-p-min) */
    float draft_p_min;
} candle_spec_params;

CANDLE_API candle_spec_params candle_spec_default_params(void);

/* Acceptance statistics since init. */
typedef struct candle_spec_stats {
    int64_t n_steps;    /* verification steps */
    int64_t n_drafted;  /* tokens drafted (and verified) */
    int64_t n_accepted; /* drafted tokens kept */
    int64_t n_tokens;   /* tokens produced by the steps (accepted + one per step) */
} candle_spec_stats;

typedef struct candle_spec candle_spec;

/* A speculative decoder for sessions of target, whose tokenizer is tok
 * (end-of-generation tokens end a step; a draft model's vocabulary is
 * compared with it). Errors: CANDLE_ERR_INVALID_ARG for parameters out of
 * range or a draft model whose vocabulary differs (the message says how:
 * size, or the first token whose text differs). */
CANDLE_API candle_status candle_spec_init(candle_spec **out, const candle_model *target,
                                          const candle_tokenizer *tok, const candle_spec_params *p);
CANDLE_API void candle_spec_free(candle_spec *sp);
/* The tokens the target session holds (its positions 0..n-1), e.g. the
 * prompt after evaluating it. The draft model's session keeps the prefix it
 * shares with the previous context. */
CANDLE_API candle_status candle_spec_set_context(candle_spec *sp, const int32_t *tokens, int64_t n);
/* One step. pending: the token just chosen (sampled and recorded with
 * candle_sampler_accept, not yet evaluated); s holds the context given so
 * far (candle_spec_set_context and the previous steps). Drafts up to k
 * tokens, evaluates pending and them in one step, verifies them with smp
 * and writes to out (room for CANDLE_SPEC_MAX_DRAFT + 1) the accepted
 * drafts and then the next chosen token: *n_out = accepted + 1. Every token
 * written is recorded in smp (candle_sampler_accept). Afterwards s holds
 * the context, pending and the accepted drafts; the last token of out is
 * the new pending. An end-of-generation token ends the output (it is then
 * the last one). The drafts shrink to the room left in s; pending itself
 * must fit. With a grammar set on smp (candle_sampler_set_grammar), each
 * token written also advances its matcher (the caller advances it for
 * pending only, as after candle_sampler_sample), drafts the grammar refuses
 * are rejected, and a token after which the grammar admits only the end
 * ends the output, as an end of generation does. */
CANDLE_API candle_status candle_spec_step(candle_spec *sp, candle_session *s, candle_sampler *smp,
                                          int32_t pending, int32_t *out, int32_t *n_out);
CANDLE_API candle_spec_stats candle_spec_get_stats(const candle_spec *sp);

/* Prompt lookup's draft alone: the tokens that followed the latest earlier
 * occurrence of ctx's last ngram tokens, at most max of them, into draft;
 * returns how many (0: no match). */
CANDLE_API int32_t candle_spec_lookup(const int32_t *ctx, int64_t n, int32_t ngram, int32_t max,
                                      int32_t *draft);

#ifdef __cplusplus
}
#endif
#endif
