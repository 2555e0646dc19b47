/* The model, tokenizer, session and sampler a generation command uses. */
#ifndef CANDLE_CLI_GEN_H
#define CANDLE_CLI_GEN_H

#include <signal.h>

#include "args.h"
#include "candle/candle.h"
#include "candle/model.h"
#include "candle/speculative.h"

typedef struct gen {
    const char *cmd;
    candle_model *model;
    candle_tokenizer *tok;
    candle_session *sess;
    candle_sampler *smp;
    candle_grammar *grammar; /* --grammar / --grammar-text; NULL: none */
    candle_grammar_vocab *gvocab;
    candle_grammar_state *gstate;
    candle_model *draft; /* --draft-model, or NULL */
    candle_spec *spec;   /* speculative decoding (--draft-model, --lookup), or NULL */
    candle_lora *lora[CLI_MAX_LORA]; /* --lora / --lora-scaled adapters, [n_lora] */
    int n_lora;
    float *logits; /* [n_vocab] of the last evaluated token */
    int64_t n_vocab;
    double t_load; /* seconds */
    /* Set (by run's and chat's SIGINT handler) to stop gen_stream between
     * tokens and a prompt's evaluation between its batches; NULL: never.
     * gen_set_stop sets it. */
    volatile sig_atomic_t *stop;
    bool eval_cancelled; /* the last gen_eval was stopped by it */
    enum { GEN_EOG, GEN_LIMIT, GEN_GRAMMAR, GEN_CTX_FULL, GEN_STOPPED } why; /* of the last gen_stream */
    bool line_open; /* the last text written to stdout does not end in a newline */
} gen;

/* Load everything; on failure print "candle CMD: why" and return 1. */
int gen_open(gen *g, const char *cmd, const cli_args *a, int64_t default_ctx);
void gen_close(gen *g);
/* Tokenize into a malloc'ed array; prints an error and returns 1 on failure. */
int gen_tokenize(gen *g, const char *text, bool add_special, bool parse_special, int32_t **ids,
                 int64_t *n);
/* Print an error with the session's message and return 1. */
int gen_fail(gen *g, const char *what);
/* Stop generation and prompt evaluation once *flag is set. */
void gen_set_stop(gen *g, volatile sig_atomic_t *flag);
/* Evaluate tokens; with ctx_shift, make room first by dropping the older
 * half of the context (after n_keep positions). Stopped by g->stop, it
 * returns 0 with eval_cancelled set and the session as before (the next
 * gen_stream stops at once). */
int gen_eval(gen *g, const int32_t *ids, int64_t n, bool ctx_shift, int64_t n_keep);
/* With speculative decoding, the session now holds ids[0..n) (the prompt). */
int gen_spec_context(gen *g, const int32_t *ids, int64_t n);
/* Sample, stream and evaluate up to n_predict tokens (-1: until the end of
 * generation or a full context). With a grammar, each call starts it over
 * and stops once the grammar admits nothing more. *n_out gets the count; when text is not
 * NULL the generated text is appended to a malloc'ed string there. */
int gen_stream(gen *g, const cli_args *a, int64_t n_predict, int64_t n_keep, int64_t *n_out,
               char **text);

#endif
