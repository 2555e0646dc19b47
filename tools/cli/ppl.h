/* The chunked evaluation `candle perplexity` and its KL-divergence mode
 * share (cmd_run.c), and that mode (cmd_kld.c). */
#ifndef CANDLE_CLI_PPL_H
#define CANDLE_CLI_PPL_H

#include "gen.h"

/* n tokens in chunks of n_ctx: *n_chunk chunks of *len tokens (one chunk of
 * all n when n < n_ctx). */
void ppl_layout(int64_t n, int64_t n_ctx, int64_t *n_chunk, int64_t *len);

/* Called at each scored position with its logits[n_vocab], the text's next
 * token and -log p(next); nonzero stops the evaluation with that code. */
typedef int (*ppl_row_fn)(void *ctx, const float *logits, int32_t next, double nll);

/* Evaluate n_chunk chunks of len tokens of ids (each from a fresh context,
 * its first token the BOS when the text starts with one), score positions
 * len/2 .. len-2 of each, call fn (may be NULL) there, and print PPL = x on
 * stdout. 0, or 1 after a message. */
int ppl_eval(gen *g, const int32_t *ids, int64_t n_chunk, int64_t len, ppl_row_fn fn, void *ctx);

/* --kl-divergence-base FILE without --kl-divergence: ppl_eval, saving every
 * scored distribution to path. */
int kld_save(gen *g, const char *path, const int32_t *ids, int64_t n, int64_t n_chunk, int64_t len);
/* --kl-divergence: text is -f's contents or NULL. */
int kld_compare(cli_args *a, const char *text);

#endif
