/* Token samplers: penalties, then top-k, top-p, min-p, temperature and a
 * seeded draw (reproducible for a seed), or greedy when temp <= 0. */
#ifndef CANDLE_SAMPLER_H
#define CANDLE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
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

typedef struct candle_sampler candle_sampler;

CANDLE_API candle_status candle_sampler_init(candle_sampler **out, int32_t n_vocab,
                                             const candle_sampler_params *p);
CANDLE_API void candle_sampler_free(candle_sampler *s);
/* Pick a token from logits[n_vocab] (left unchanged). */
CANDLE_API int32_t candle_sampler_sample(candle_sampler *s, const float *logits);
/* Record a token in the penalty history (prompt and generated tokens). */
CANDLE_API void candle_sampler_accept(candle_sampler *s, int32_t token);
/* Clear the history and reseed. */
CANDLE_API void candle_sampler_reset(candle_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
