/* The generic forward on the tiny qwen2 directory (tests/data/hf): a padded
 * batch's logits match transformers' goldens row for row (a causal model's
 * prefix logits are those of the prefix), padding gives zeros, left padding
 * restarts the positions, pooled outputs reduce the hidden states, and bad
 * input is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "test.h"

#define N 16

static float *slurp_f32(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    float *buf = f ? malloc(want * sizeof *buf) : NULL;
    if (buf && fread(buf, sizeof *buf, want, f) != want) {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    return buf;
}

static bool all_zero(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0) return false;
    return true;
}

/* The golden's tokens (tests/data/hf/qwen2/golden.json). */
static const int32_t toks[N] = {113, 72, 223, 98, 108, 189, 333, 253, 307, 288, 179, 277, 81, 130, 242, 229};

int main(void) {
    char dir[1024], path[1200];
    test_path("tests/data/hf/qwen2", dir, sizeof dir);
    candle_model *m = NULL;
    if (candle_model_load(&m, dir, NULL)) {
        CHECK_MSG(false, "%s: %s", dir, candle_last_errmsg());
        return test_done("test_forward");
    }
    const candle_model_config *c = candle_model_get_config(m);
    int64_t V = c->n_vocab, E = c->n_embd;
    CHECK(c->kind == CANDLE_MODEL_DECODER_LM && !strcmp(candle_model_kind_name(c->kind), "decoder-lm"));
    snprintf(path, sizeof path, "%s/golden_logits.bin", dir);
    float *gold = slurp_f32(path, (size_t)(N * V));
    CHECK(gold != NULL);

    /* row 0: all 16 tokens; row 1: the first 10, right padded; row 2: the
     * first 10, left padded */
    int32_t tokens[3 * N];
    uint8_t mask[3 * N];
    for (int i = 0; i < N; i++) {
        tokens[i] = tokens[N + i] = toks[i];
        tokens[2 * N + i] = i < 6 ? 0 : toks[i - 6];
        mask[i] = 1;
        mask[N + i] = i < 10;
        mask[2 * N + i] = i >= 6;
    }
    candle_forward_input in = {.tokens = tokens, .mask = mask, .n_seq = 3, .n_tokens = N};
    size_t n_logits = candle_model_output_size(m, &in, CANDLE_OUTPUT_LOGITS);
    CHECK(n_logits == (size_t)(3 * N * V));
    float *logits = malloc(n_logits * sizeof *logits);
    CHECK(candle_model_forward(m, &in, CANDLE_OUTPUT_LOGITS, logits, n_logits) == CANDLE_OK);
    if (gold) {
        double e0 = test_nmse_f32(logits, gold, (size_t)(N * V));
        double e1 = test_nmse_f32(logits + N * V, gold, (size_t)(10 * V));
        double e2 = test_nmse_f32(logits + 2 * N * V + 6 * V, gold, (size_t)(10 * V));
        printf("forward logits NMSE vs transformers: full %.2e, right padded %.2e, left padded %.2e\n",
               e0, e1, e2);
        CHECK(e0 < 1e-5 && e1 < 1e-5 && e2 < 1e-5);
    }
    CHECK(all_zero(logits + N * V + 10 * V, (size_t)(6 * V)));
    CHECK(all_zero(logits + 2 * N * V, (size_t)(6 * V)));

    /* hidden states and their pools */
    size_t n_hidden = candle_model_output_size(m, &in, CANDLE_OUTPUT_HIDDEN);
    float *hidden = malloc(n_hidden * sizeof *hidden), last[3 * 64], mean[3 * 64];
    CHECK(E <= 64 && n_hidden == (size_t)(3 * N * E));
    CHECK(candle_model_forward(m, &in, CANDLE_OUTPUT_HIDDEN, hidden, n_hidden) == CANDLE_OK);
    CHECK(candle_model_forward(m, &in, CANDLE_OUTPUT_POOLED_LAST, last, 3 * 64) == CANDLE_OK);
    CHECK(candle_model_forward(m, &in, CANDLE_OUTPUT_POOLED_MEAN, mean, 3 * 64) == CANDLE_OK);
    CHECK(!memcmp(last, hidden + (N - 1) * E, (size_t)E * sizeof *last));
    CHECK(!memcmp(last + E, hidden + (N + 9) * E, (size_t)E * sizeof *last));
    CHECK(!memcmp(last + 2 * E, hidden + (3 * N - 1) * E, (size_t)E * sizeof *last));
    double worst = 0;
    for (int64_t k = 0; k < E; k++) {
        double s = 0;
        for (int r = 0; r < 10; r++) s += hidden[(N + r) * E + k];
        worst = fmax(worst, fabs(s / 10 - mean[E + k]));
    }
    CHECK_MSG(worst < 1e-5, "mean pool off by %g", worst);
    CHECK(test_nmse_f32(hidden + N * E, hidden, (size_t)(10 * E)) < 1e-10); /* a prefix's states are its own */

    /* refusals */
    uint8_t gap[N];
    for (int i = 0; i < N; i++) gap[i] = i != 4;
    candle_forward_input bad = {.tokens = toks, .mask = gap, .n_seq = 1, .n_tokens = N};
    CHECK(candle_model_forward(m, &bad, CANDLE_OUTPUT_LOGITS, logits, n_logits) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "the mask has a gap at position 4");
    memset(gap, 0, sizeof gap);
    CHECK(candle_model_forward(m, &bad, CANDLE_OUTPUT_LOGITS, logits, n_logits) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "has no tokens");
    CHECK(candle_model_forward(m, &in, CANDLE_OUTPUT_LOGITS, logits, 10) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "too small");
    int32_t oob[1] = {(int32_t)V};
    candle_forward_input one = {.tokens = oob, .n_seq = 1, .n_tokens = 1};
    CHECK(candle_model_forward(m, &one, CANDLE_OUTPUT_HIDDEN, hidden, n_hidden) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "out of range");

    free(hidden);
    free(logits);
    free(gold);
    candle_model_free(m);
    return test_done("test_forward");
}
