/* The goldens of the tiny Hugging Face models (scripts/gen_hf_moe_goldens.py,
 * scripts/gen_hf_family_goldens.py): golden.json's N_TOK token ids and
 * golden_logits.bin, transformers' logits [N_TOK, n_vocab] at every position.
 * The including test defines N_TOK before including this. */
#ifndef CANDLE_TEST_HF_GOLDEN_H
#define CANDLE_TEST_HF_GOLDEN_H

#include <stdlib.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

#ifndef N_TOK
#error "define N_TOK (the goldens' token count) before including hf_golden.h"
#endif

typedef struct golden {
    int32_t tokens[N_TOK];
    int64_t n_vocab;
    float *logits; /* [N_TOK, n_vocab] */
} golden;

static bool read_golden(const char *dir, golden *g) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%s/golden.json", dir);
    char *text = test_read_file(path, &n);
    json_doc *d = NULL;
    bool ok = text && !json_parse(&d, text, n, path, NULL);
    const json_value *toks = json_get(json_root(d), "tokens");
    ok = ok && toks && toks->n == N_TOK && json_as_i64(json_get(json_root(d), "n_vocab"), &g->n_vocab);
    for (size_t i = 0; ok && i < N_TOK; i++) {
        int64_t t;
        ok = json_as_i64(json_at(toks, i), &t);
        g->tokens[i] = (int32_t)t;
    }
    json_free(d);
    free(text);
    snprintf(path, sizeof path, "%s/golden_logits.bin", dir);
    g->logits = ok ? (float *)test_read_file(path, &n) : NULL;
    ok = g->logits && n == (size_t)(N_TOK * g->n_vocab) * sizeof(float);
    CHECK_MSG(ok, "%s: unreadable golden", dir);
    return ok;
}

/* All positions' logits of the golden tokens: in one prefill, or fed one
 * token per evaluation (decode steps). */
static float *run(candle_model *m, const golden *g, bool one_by_one) {
    candle_session *s = NULL;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_TOK;
    float *lg = malloc((size_t)(N_TOK * g->n_vocab) * sizeof *lg);
    bool ok = lg && !candle_session_init(&s, m, &sp);
    if (!one_by_one) ok = ok && !candle_session_eval(s, g->tokens, N_TOK, lg, true);
    for (int i = 0; one_by_one && ok && i < N_TOK; i++)
        ok = !candle_session_eval(s, g->tokens + i, 1, lg + i * g->n_vocab, false);
    CHECK_MSG(ok, "session: %s", s ? candle_session_errmsg(s) : candle_last_errmsg());
    candle_session_free(s);
    if (!ok) free(lg);
    return ok ? lg : NULL;
}

#endif
