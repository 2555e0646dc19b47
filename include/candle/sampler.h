/* Token samplers: logit bias, penalties, an optional grammar, then top-k,
 * top-p, min-p, temperature and a seeded draw (reproducible for a seed), or
 * greedy when temp <= 0; optionally the log-probabilities of each step. */
#ifndef CANDLE_SAMPLER_H
#define CANDLE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "grammar.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_sampler_params {
    float temp;              /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off; keeps p >= min_p * p_max */
    float repeat_penalty;    /* 1: off; divides positive logits, multiplies negative */
    float presence_penalty;  /* 0: off; subtracted once per seen token */
    float frequency_penalty; /* 0: off; subtracted per occurrence */
    int32_t penalty_last_n;  /* tokens of history the penalties look at; 0 = off */
    uint64_t seed;
} candle_sampler_params;

CANDLE_API candle_sampler_params candle_sampler_default_params(void);
/* Refuse values outside the documented ranges (the CLI and the server share
 * it): CANDLE_ERR_INVALID_ARG with a message naming the field, also the
 * thread-local last error; NaN is out of every range. temp in [0, 10],
 * top_k >= 0, top_p and min_p in [0, 1], repeat_penalty in (0, 10],
 * presence/frequency penalties in [-2, 2], penalty_last_n >= 0. */
CANDLE_API candle_status candle_sampler_params_check(const candle_sampler_params *p);

typedef struct candle_sampler candle_sampler;

CANDLE_API candle_status candle_sampler_init(candle_sampler **out, int32_t n_vocab,
                                             const candle_sampler_params *p);
CANDLE_API void candle_sampler_free(candle_sampler *s);
/* Pick a token from logits[n_vocab] (left unchanged). With a grammar set,
 * only tokens the grammar allows next; -1 when it allows none (the reason in
 * candle_last_errmsg). */
CANDLE_API int32_t candle_sampler_sample(candle_sampler *s, const float *logits);
/* Constrain sampling by a grammar matcher over vocabulary v (NULL state:
 * off). The sampler does not own them and does not advance the matcher:
 * after each sampled token the caller calls candle_grammar_accept_token
 * (the matcher is per stream state, while the params are plain values).
 * Tokens at or beyond candle_grammar_vocab_n(v) are never allowed. */
CANDLE_API void candle_sampler_set_grammar(candle_sampler *s, candle_grammar_state *g,
                                           const candle_grammar_vocab *v);
/* logit_bias, as OpenAI's: bias[i] is added to the logit of tokens[i]
 * before everything else (penalties, the grammar, truncation), so -100
 * effectively bans a token and +100 all but forces it. Each token in
 * [0, n_vocab), each bias finite in [-100, 100]; a token given twice gets
 * both. The arrays are copied; n = 0 clears. Without a bias the sampler reads
 * the logits in place as before (no extra pass); with one, each sample copies
 * the logits once. */
CANDLE_API candle_status candle_sampler_set_logit_bias(candle_sampler *s, const int32_t *tokens,
                                                       const float *bias, int32_t n);

/* The most alternatives candle_sampler_sample_logprobs reports (OpenAI's
 * top_logprobs bound). */
#define CANDLE_MAX_TOP_LOGPROBS 20

typedef struct candle_token_logprob {
    int32_t token;
    float logprob; /* natural log; -INFINITY for a token the grammar or a bias removed */
} candle_token_logprob;

/* candle_sampler_sample, also reporting the sampled token's log-probability
 * in *chosen and the n_top (0..CANDLE_MAX_TOP_LOGPROBS) most likely tokens,
 * best first (ties to the lower id), in top[]; *n_top_out (may be NULL) gets
 * how many: fewer than n_top when fewer tokens have a nonzero probability.
 *
 * Which distribution (OpenAI's choice, as its API reports logprobs): the
 * log-softmax at temperature 1 over the whole vocabulary of the logits after
 * logit_bias, the repetition penalties and the grammar's mask, before top-k,
 * top-p and min-p truncation. So the numbers do not depend on temperature
 * or truncation, and greedy's token is always the top-1. (llama-server's
 * n_probs instead reports the raw logits' softmax by default, before bias and
 * grammar, or with post_sampling_probs the truncated distribution at the
 * request's temperature.)
 *
 * Cost: two passes over the logits beside sampling (max and top-n, then the
 * sum of exponentials, in double); with a grammar the full mask every step,
 * since the normaliser needs every allowed token (greedy and top-k sampling
 * otherwise skip it). candle_sampler_sample pays none of this. Returns the
 * token, or -1 as candle_sampler_sample does. */
CANDLE_API int32_t candle_sampler_sample_logprobs(candle_sampler *s, const float *logits,
                                                  int32_t n_top, candle_token_logprob *chosen,
                                                  candle_token_logprob *top, int32_t *n_top_out);
/* ---- speculative decoding (speculative.h drives these) ----
 * "The distribution" below is the one candle_sampler_sample draws from:
 * after logit_bias, penalties, the grammar, top-k/top-p/min-p and the
 * temperature; greedy's is the point mass at its token. */

/* candle_sampler_sample, also writing the distribution it drew from into
 * probs[n_vocab] (zero outside the kept tokens; probs NULL: none). A draft
 * model's sampler calls it, for the q that candle_sampler_verify needs. */
CANDLE_API int32_t candle_sampler_sample_probs(candle_sampler *s, const float *logits, float *probs);
/* Speculative rejection sampling of one drafted token against the
 * distribution p of logits: the draft is accepted with probability
 * min(1, p(draft) / q(draft)); otherwise the token returned is drawn from
 * max(0, p - q) normalised, so that it has distribution p whatever q was.
 * q: the draft's distribution [n_vocab] (the draft must have been drawn
 * from it), or NULL for a point mass at draft (prompt lookup: accepted with
 * probability p(draft), else drawn from p without the draft). Greedy: the
 * draft is accepted exactly when it is the greedy token, which is returned
 * either way. *accepted (may be NULL) says which; returns the token, or -1
 * (an invalid draft, or a grammar that allows nothing; candle_last_errmsg).
 * Draws one or two numbers from the seeded generator when sampling, none
 * when greedy. Does not record the token (candle_sampler_accept). */
CANDLE_API int32_t candle_sampler_verify(candle_sampler *s, const float *logits, int32_t draft,
                                         const float *q, bool *accepted);
/* Record a token in the penalty history (prompt and generated tokens). */
CANDLE_API void candle_sampler_accept(candle_sampler *s, int32_t token);
/* Clear the history and reseed. */
CANDLE_API void candle_sampler_reset(candle_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
