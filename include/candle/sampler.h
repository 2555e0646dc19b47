/* Token samplers: penalties, then top-k, top-p, min-p, temperature and a
 * seeded draw (reproducible for a seed), or greedy when temp <= 0. */
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
/* Record a token in the penalty history (prompt and generated tokens). */
CANDLE_API void candle_sampler_accept(candle_sampler *s, int32_t token);
/* Clear the history and reseed. */
CANDLE_API void candle_sampler_reset(candle_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
