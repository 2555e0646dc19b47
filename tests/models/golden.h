/* Golden files from scripts/make_golden.py (llama.cpp): per prompt, the
 * token ids, the top-10 logits at every position and a greedy continuation.
 * check_golden runs a model over them. */
#ifndef CANDLE_TEST_GOLDEN_H
#define CANDLE_TEST_GOLDEN_H

#include "candle/model.h"
#include "test.h"

#define GOLDEN_TOPK 10
#define GOLDEN_MAX_TOK 640

typedef struct golden_prompt {
    int n;                                   /* prompt tokens */
    int32_t tokens[GOLDEN_MAX_TOK];
    int32_t top_id[GOLDEN_MAX_TOK][GOLDEN_TOPK];
    float top_logit[GOLDEN_MAX_TOK][GOLDEN_TOPK];
    int n_greedy;
    int32_t greedy[GOLDEN_MAX_TOK];
    bool has_margins;
    float margin[GOLDEN_MAX_TOK]; /* llama.cpp's top-1 minus top-2 at each greedy step */
} golden_prompt;

/* Reads up to max prompts; returns the count (0 on a read error). */
static int golden_read(const char *path, golden_prompt *g, int max) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "golden: cannot open %s\n", path);
        return 0;
    }
    static char line[1 << 16];
    int np = -1;
    while (fgets(line, sizeof line, f)) {
        golden_prompt *p = np >= 0 ? &g[np] : NULL;
        char *s = line;
        if (!strncmp(line, "prompt ", 7)) {
            if (++np >= max) break;
            memset(&g[np], 0, sizeof g[np]);
            g[np].n = atoi(line + 7);
        } else if (p && !strncmp(line, "tokens ", 7)) {
            s += 7;
            for (int i = 0; i < p->n && i < GOLDEN_MAX_TOK; i++) p->tokens[i] = (int32_t)strtol(s, &s, 10);
        } else if (p && !strncmp(line, "top ", 4)) {
            int pos = (int)strtol(s + 4, &s, 10);
            for (int k = 0; k < GOLDEN_TOPK && pos < GOLDEN_MAX_TOK; k++) {
                p->top_id[pos][k] = (int32_t)strtol(s, &s, 10);
                s++; /* ':' */
                p->top_logit[pos][k] = strtof(s, &s);
            }
        } else if (p && !strncmp(line, "greedy ", 7)) {
            p->n_greedy = (int)strtol(s + 7, &s, 10);
            for (int i = 0; i < p->n_greedy && i < GOLDEN_MAX_TOK; i++) p->greedy[i] = (int32_t)strtol(s, &s, 10);
        } else if (p && !strncmp(line, "margins ", 8)) {
            s += 8;
            p->has_margins = true;
            for (int i = 0; i < p->n_greedy && i < GOLDEN_MAX_TOK; i++) p->margin[i] = strtof(s, &s);
        }
    }
    fclose(f);
    return np < 0 ? 0 : (np >= max ? max : np + 1);
}

static int32_t argmax_f(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* Prompt logits against the golden top-10 (each within tol; the top-1 id the
 * same unless llama.cpp's top two are closer than tol), then the first
 * n_greedy tokens of the greedy continuation, token by token. When the
 * golden file has the greedy margins, the comparison stops at the first step
 * whose top two are closer than tol: past a near-tie the continuations may
 * rightly part. Returns the largest logit difference. */
static double check_golden(candle_session *s, int64_t n_vocab, const golden_prompt *p,
                           double tol, int n_greedy) {
    float *all = malloc((size_t)(p->n * n_vocab) * sizeof *all);
    double worst = 0;
    candle_session_reset(s);
    CHECK_OK(NULL, candle_session_eval(s, p->tokens, p->n, all, true));
    for (int i = 0; i < p->n; i++) {
        const float *row = all + (int64_t)i * n_vocab;
        for (int k = 0; k < GOLDEN_TOPK; k++) {
            double d = fabs((double)row[p->top_id[i][k]] - p->top_logit[i][k]);
            if (d > worst) worst = d;
            CHECK_MSG(d <= tol, "pos %d top%d id %d: %.5f vs golden %.5f", i, k, p->top_id[i][k],
                      row[p->top_id[i][k]], p->top_logit[i][k]);
        }
        int32_t top = argmax_f(row, n_vocab);
        bool tie = p->top_logit[i][0] - p->top_logit[i][1] < tol;
        CHECK_MSG(top == p->top_id[i][0] || tie, "pos %d: top-1 %d, golden %d", i, top,
                  p->top_id[i][0]);
    }
    const float *last = all + (int64_t)(p->n - 1) * n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    memcpy(logits, last, (size_t)n_vocab * sizeof *logits);
    int same = 0;
    if (n_greedy > p->n_greedy) n_greedy = p->n_greedy;
    for (int i = 0; p->has_margins && i < n_greedy; i++)
        if (p->margin[i] < tol) n_greedy = i;
    printf("  %d-token prompt: comparing %d greedy tokens\n", p->n, n_greedy);
    for (int i = 0; i < n_greedy; i++) {
        int32_t t = argmax_f(logits, n_vocab);
        if (t != p->greedy[i]) break;
        same++;
        if (i + 1 < n_greedy && candle_session_eval(s, &t, 1, logits, false)) break;
    }
    CHECK_MSG(same == n_greedy, "greedy continuation of a %d-token prompt diverges at token %d of %d",
              p->n, same, n_greedy);
    free(logits);
    free(all);
    return worst;
}

#endif
