/* The cost model that chooses speculative decoding's draft lengths, shared
 * by candle_spec (speculative.h, cost_aware) and callers that batch several
 * sequences' verification rows into one step (candle serve's scheduler).
 *
 * Only for samplers that do not draw (temp 0): the output then does not
 * depend on the lengths, so they may follow the measured times. What it
 * measures:
 * - candle_spec_times: a step's seconds as a line in its rows (a step of
 *   one sequence, or of every sequence a batch verifies together), fitted by
 *   least squares with older steps decayed, one-row steps apart (their mean);
 *   while recent steps have all had one row count the last slope fitted
 *   stands. And a draft's seconds: its
 *   first token (a draft model's catching up on the tokens kept since its
 *   last draft included, when that is a drafting step's: see
 *   candle_spec_times_draft) and each one after.
 * - candle_spec_accept: one sequence's decayed acceptance: drafts kept of
 *   those verified up to the first refused one, and the probes of a draft
 *   model at length 0 (its acceptance is only seen by drafting).
 * A length-k draft whose first token is kept with probability a1 and each
 * later one, after a kept one, with a2 gives 1 + a1 (1 + a2 + .. a2^(k-1))
 * tokens (candle_spec_accept_tokens); the lengths chosen maximise the
 * expected tokens per second of the whole step.
 *
 * The structs are plain values (zero-initialise them: {0}) so that a caller
 * can keep one per sequence; change them only through these calls. */
#ifndef CANDLE_SPEC_COST_H
#define CANDLE_SPEC_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Least squares of a step's seconds t against its rows r, older steps decayed. */
typedef struct candle_spec_line {
    double w, sr, st, srr, srt; /* decayed sums of 1, r, t, r^2, r t */
    double r_lo, r_hi;          /* the fewest and most rows among the recent steps */
    double b;                   /* the last slope fitted (seconds per row), once fitted */
    bool fitted;
    int64_t n;                  /* steps measured */
} candle_spec_line;

typedef struct candle_spec_times {
    /* every step's line, and that of the steps of two rows or more: a step
     * of one row is a matrix-vector product, cheaper per row than a
     * multi-row one, so a single line through both overprices long drafts
     * (on AVX-512 a step of two rows cost 1.9 of one, of nine 3.2) */
    candle_spec_line all, multi;
    double w1, st1; /* decayed over every step: the weight and seconds of one-row steps */
    double draft_first, draft_next; /* a draft's seconds: its first token, each one after */
    bool first_guessed;             /* draft_first from a long catch-up: the next steady draft replaces it */
} candle_spec_times;

typedef struct candle_spec_accept {
    /* decayed: of the drafts' first tokens, those verified and kept; of the
     * tokens after a kept one, likewise (apart: a copied span is kept whole
     * or refused at its first token, so the first is the likelier refusal) */
    double first_tried, first_kept, next_tried, next_kept;
    int32_t probe_wait, probe_gap; /* a draft model at length 0: steps to the next one-token probe */
} candle_spec_accept;

/* A step of `rows` rows took secs seconds (the step's evaluation alone). */
CANDLE_API void candle_spec_times_step(candle_spec_times *t, int64_t rows, double secs);
/* The seconds a step of `rows` rows is expected to take: the recent
 * one-row steps' mean for one row; for more, the multi-row steps' line
 * while there are recent ones (its slope at most every step's line's),
 * else every step's line. 0 before every step's line is fitted. */
CANDLE_API double candle_spec_times_estimate(const candle_spec_times *t, int64_t rows);
/* A draft of nd >= 1 tokens took `total` seconds, `first` of them to its
 * first token, for which the draft model evaluated `span` tokens (its
 * catching up: the pending token and those kept since its last draft, 1 for
 * prompt lookup). A catch-up longer than CANDLE_SPEC_STEADY_SPAN (the
 * prompt, or the tokens of a pause at length 0) is paid once, not per
 * drafting step: while no first token's seconds are known it guesses them
 * (its seconds per token times 2), and the next steady draft's replace the
 * guess. */
#define CANDLE_SPEC_STEADY_SPAN 8
CANDLE_API void candle_spec_times_draft(candle_spec_times *t, int32_t nd, int64_t span, double first,
                                        double total);
/* tried drafts verified (up to and including the first refused), kept of them accepted. */
CANDLE_API void candle_spec_accept_add(candle_spec_accept *a, int32_t tried, int32_t kept);
/* The expected tokens of a step drafting k (the kept drafts and the one after). */
CANDLE_API double candle_spec_accept_tokens(const candle_spec_accept *a, int32_t k);

/* The draft lengths of n sequences verified in one step: k[i] in
 * 0..k_max[i], chosen to maximise the step's expected tokens per second,
 * where the step also holds rows_fixed other rows that give tokens_fixed
 * tokens (sequences that do not draft by this model: 0 and 0 without any).
 * One sequence (n 1, nothing fixed) gets the length of the most tokens per
 * second of its own steps. Returns false (k untouched) until the times
 * have told two row counts apart: candle_spec_warmup_length then. */
CANDLE_API bool candle_spec_cost_lengths(const candle_spec_times *t, int32_t n, const candle_spec_accept *acc,
                                         const int32_t *k_max, int64_t rows_fixed, double tokens_fixed,
                                         int32_t *k);
/* A length for the steps before the fit: short drafts of changing length
 * (a draft model's: none or one), so that two row counts are timed soon
 * without paying for long refused drafts. step: a count of the steps. */
CANDLE_API int32_t candle_spec_warmup_length(bool draft_model, int64_t step);
/* A draft model's sequence at length 0: whether to draft one token this
 * step all the same (a probe, 8, 16 .. 256 steps apart;
 * its acceptance is only seen by drafting); counts the wait down when not.
 * Prompt lookup needs none: at length 0 its draft is looked up and compared
 * with the next token, free. */
CANDLE_API bool candle_spec_probe(candle_spec_accept *a);
/* After a probe, kept or refused: the wait doubles (8, 16 .. 256 steps). */
CANDLE_API void candle_spec_probe_done(candle_spec_accept *a);

#ifdef __cplusplus
}
#endif
#endif
