/* Streaming text generation against the public API only (what an embedding
 * program sees after `make install`):
 *
 *   generate MODEL.gguf PROMPT [N]
 *
 * loads a GGUF model, tokenizes PROMPT (with the model's BOS), evaluates it,
 * then picks N tokens (default 32) greedily, printing each piece of text as
 * soon as it is complete UTF-8. Stops early at an end-of-generation token or
 * when the context is full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"

typedef struct generator {
    candle_model *model;
    candle_tokenizer *tok;
    candle_session *sess;
    candle_sampler *smp;
    float *logits; /* [n_vocab] of the last evaluated token */
    char *piece;   /* detokenizer output, candle_tokenizer_detok_bufsize bytes */
    size_t piece_cap;
} generator;

static void generator_free(generator *g) {
    free(g->piece);
    free(g->logits);
    candle_sampler_free(g->smp);
    candle_session_free(g->sess);
    candle_tokenizer_free(g->tok);
    candle_model_free(g->model);
}

static int generator_init(generator *g, const char *path) {
    memset(g, 0, sizeof *g);
    candle_model_params mp = candle_model_default_params();
    if (candle_model_load(&g->model, path, &mp) != CANDLE_OK) {
        fprintf(stderr, "generate: %s: %s\n", path, candle_last_errmsg());
        return 1;
    }
    if (candle_tokenizer_from_weights(&g->tok, candle_model_weights(g->model)) != CANDLE_OK) {
        fprintf(stderr, "generate: tokenizer: %s\n", candle_last_errmsg());
        return 1;
    }
    /* A small context: the prompt and N tokens, not the training context's
     * KV cache (which can be large for big models). */
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 512;
    candle_sampler_params smp = candle_sampler_default_params();
    smp.temp = 0; /* greedy: the same text every run */
    int32_t n_vocab = candle_tokenizer_n_vocab(g->tok);
    if (candle_session_init(&g->sess, g->model, &sp) != CANDLE_OK ||
        candle_sampler_init(&g->smp, n_vocab, &smp) != CANDLE_OK) {
        fprintf(stderr, "generate: %s\n", candle_last_errmsg());
        return 1;
    }
    g->logits = malloc((size_t)n_vocab * sizeof *g->logits);
    g->piece_cap = candle_tokenizer_detok_bufsize(g->tok);
    g->piece = malloc(g->piece_cap);
    if (!g->logits || !g->piece) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }
    return 0;
}

/* Tokenize and evaluate the prompt; the logits then predict the first
 * generated token. */
static int generator_prompt(generator *g, const char *prompt) {
    size_t len = strlen(prompt);
    int64_t cap = (int64_t)len + 8, n = 0; /* a token is at least a byte, plus BOS/EOS */
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return 1;
    int rc = 0;
    if (candle_tokenizer_encode(g->tok, prompt, len, true, false, ids, cap, &n) != CANDLE_OK ||
        n > cap) {
        fprintf(stderr, "generate: tokenize: %s\n", candle_last_errmsg());
        rc = 1;
    } else if (n > candle_session_n_ctx(g->sess)) {
        fprintf(stderr, "generate: the prompt's %lld tokens do not fit the context\n",
                (long long)n);
        rc = 1;
    } else if (candle_session_eval(g->sess, ids, n, g->logits, false) != CANDLE_OK) {
        fprintf(stderr, "generate: eval: %s\n", candle_session_errmsg(g->sess));
        rc = 1;
    }
    free(ids);
    return rc;
}

static int generator_run(generator *g, long n_predict) {
    candle_detok detok = {0}; /* a continuation of the prompt: keep its spaces */
    size_t len;
    for (long i = 0; i < n_predict; i++) {
        int32_t id = candle_sampler_sample(g->smp, g->logits);
        if (candle_tokenizer_is_eog(g->tok, id)) break;
        candle_sampler_accept(g->smp, id);
        if (candle_tokenizer_detok_push(g->tok, &detok, id, false, g->piece, g->piece_cap, &len) ==
            CANDLE_OK) {
            fwrite(g->piece, 1, len, stdout);
            fflush(stdout); /* streaming: show each piece as it comes */
        }
        if (i + 1 == n_predict || candle_session_pos(g->sess) >= candle_session_n_ctx(g->sess))
            break;
        if (candle_session_eval(g->sess, &id, 1, g->logits, false) != CANDLE_OK) {
            fprintf(stderr, "\ngenerate: eval: %s\n", candle_session_errmsg(g->sess));
            return 1;
        }
    }
    if (candle_tokenizer_detok_flush(g->tok, &detok, g->piece, g->piece_cap, &len) == CANDLE_OK)
        fwrite(g->piece, 1, len, stdout);
    putchar('\n');
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n(candle %s)\n", argv[0],
                candle_version());
        return 2;
    }
    long n_predict = 32;
    if (argc == 4) {
        char *end;
        n_predict = strtol(argv[3], &end, 10);
        if (*end || n_predict < 0) {
            fprintf(stderr, "generate: N must be a count of tokens, not '%s'\n", argv[3]);
            return 2;
        }
    }
    generator g;
    int rc = generator_init(&g, argv[1]) || generator_prompt(&g, argv[2]) ||
             generator_run(&g, n_predict);
    generator_free(&g);
    return rc;
}
