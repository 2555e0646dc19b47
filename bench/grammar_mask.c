/* Time of one grammar mask over a real vocabulary, at given points of the
 * text: the cost constrained decoding adds to a sampled (non-greedy) step.
 *
 * usage: bench_grammar_mask VOCAB.gguf GRAMMAR.gbnf [PREFIX ...]
 * (each PREFIX is text the matcher has accepted before the mask; the
 * default is the empty text). Prints the allowed count and ms per mask. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "candle/candle.h"
#include "candle/grammar.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf GRAMMAR.gbnf [PREFIX ...]\n", argv[0]);
        return 2;
    }
    candle_gguf *gg = NULL;
    candle_tokenizer *tok = NULL;
    if (candle_gguf_open(&gg, argv[1], NULL) || candle_tokenizer_from_gguf(&tok, gg)) {
        fprintf(stderr, "%s: %s\n", argv[1], candle_last_errmsg());
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    static char text[1 << 20];
    size_t n = f ? fread(text, 1, sizeof text, f) : 0;
    if (f) fclose(f);
    candle_grammar *g = NULL;
    candle_grammar_state *s = NULL;
    candle_grammar_vocab *v = NULL;
    double t0 = now();
    if (candle_grammar_vocab_from_tokenizer(&v, tok)) {
        fprintf(stderr, "vocabulary: %s\n", candle_last_errmsg());
        return 1;
    }
    double t1 = now();
    if (!f || candle_grammar_parse(&g, text, n) || candle_grammar_state_init(&s, g)) {
        fprintf(stderr, "%s: %s\n", argv[2], f ? candle_last_errmsg() : "cannot read it");
        return 1;
    }
    int32_t nv = candle_grammar_vocab_n(v);
    float *logits = malloc((size_t)nv * sizeof *logits);
    printf("vocabulary of %d tokens: trie built in %.1f ms\n", nv, (t1 - t0) * 1e3);
    const char *empty[] = {""};
    char **prefixes = argc > 3 ? argv + 3 : (char **)empty;
    int n_prefix = argc > 3 ? argc - 3 : 1;
    for (int i = 0; i < n_prefix; i++) {
        candle_grammar_state_reset(s);
        if (!candle_grammar_state_accept_bytes(s, prefixes[i], strlen(prefixes[i]))) {
            printf("'%s': not a prefix of the grammar\n", prefixes[i]);
            continue;
        }
        int reps = 20;
        int32_t allowed = 0;
        double a = now();
        for (int r = 0; r < reps; r++) {
            memset(logits, 0, (size_t)nv * sizeof *logits);
            candle_grammar_mask(s, v, logits, &allowed);
        }
        printf("after '%s': %d tokens allowed, %.2f ms per mask\n", prefixes[i], allowed,
               (now() - a) / reps * 1e3);
    }
    free(logits);
    candle_grammar_state_free(s);
    candle_grammar_vocab_free(v);
    candle_grammar_free(g);
    candle_tokenizer_free(tok);
    candle_gguf_close(gg);
    return 0;
}
