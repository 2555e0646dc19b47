/* The generic forward (model.h): each sequence of a padded batch evaluated
 * on its own over one scratch session, its run of tokens found from the
 * mask; pooled outputs reduce the hidden states of that run. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

static int64_t out_width(const candle_model *m, candle_output_kind kind) {
    return kind == CANDLE_OUTPUT_LOGITS ? m->cfg.n_vocab : m->cfg.n_embd;
}

size_t candle_model_output_size(const candle_model *m, const candle_forward_input *in,
                                candle_output_kind kind) {
    if (!m || !in || in->n_seq <= 0 || in->n_tokens <= 0) return 0;
    size_t rows = (size_t)in->n_seq;
    if (kind == CANDLE_OUTPUT_LOGITS || kind == CANDLE_OUTPUT_HIDDEN) rows *= (size_t)in->n_tokens;
    return rows * (size_t)out_width(m, kind);
}

/* Row i's run of tokens [*a, *b): the mask's ones, which must be contiguous. */
static candle_status find_run(const candle_forward_input *in, int64_t i, int64_t *a, int64_t *b) {
    const uint8_t *mask = in->mask ? in->mask + i * in->n_tokens : NULL;
    *a = 0;
    *b = in->n_tokens;
    if (!mask) return CANDLE_OK;
    while (*a < in->n_tokens && !mask[*a]) (*a)++;
    *b = *a;
    while (*b < in->n_tokens && mask[*b]) (*b)++;
    for (int64_t j = *b; j < in->n_tokens; j++)
        if (mask[j])
            return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                    "forward: sequence %" PRId64 ": the mask has a gap at position %" PRId64
                                    " (its tokens must be one run, left or right padded)", i, *b);
    if (*a == *b)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: sequence %" PRId64 " has no tokens", i);
    return CANDLE_OK;
}

static candle_status check_input(const candle_model *m, const candle_forward_input *in,
                                 candle_output_kind kind, const float *out, size_t out_len) {
    if (!m || !in || !in->tokens || !out)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: NULL argument");
    if (in->n_seq <= 0 || in->n_tokens <= 0 || in->n_tokens > INT64_MAX / in->n_seq)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "forward: %" PRId64 " sequences of %" PRId64 " tokens", in->n_seq,
                                in->n_tokens);
    if ((unsigned)kind > CANDLE_OUTPUT_POOLED_MEAN)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: unknown output kind %d", (int)kind);
    size_t need = candle_model_output_size(m, in, kind);
    if (out_len < need)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "forward: output of %zu floats too small, need %zu", out_len, need);
    return CANDLE_OK;
}

/* Pool rows [n, w] of h into dst [w]. */
static void pool(const float *h, int64_t n, int64_t w, candle_output_kind kind, float *dst) {
    if (kind == CANDLE_OUTPUT_POOLED_LAST) {
        memcpy(dst, h + (n - 1) * w, (size_t)w * sizeof *dst);
        return;
    }
    for (int64_t k = 0; k < w; k++) {
        double sum = 0;
        for (int64_t r = 0; r < n; r++) sum += h[r * w + k];
        dst[k] = (float)(sum / (double)n);
    }
}

static candle_status forward_seq(candle_session *s, const candle_forward_input *in, int64_t i,
                                 candle_output_kind kind, float *out, float *scratch) {
    int64_t a, b, w = out_width(s->model, kind);
    candle_status st = find_run(in, i, &a, &b);
    if (st) return st;
    bool rows = kind == CANDLE_OUTPUT_LOGITS || kind == CANDLE_OUTPUT_HIDDEN;
    float *dst = rows ? out + (size_t)(i * in->n_tokens) * (size_t)w : scratch;
    if (rows) memset(dst, 0, (size_t)(in->n_tokens * w) * sizeof *dst);
    candle_session_reset(s);
    st = session_eval_out(s, in->tokens + i * in->n_tokens + a, b - a, rows ? dst + a * w : dst,
                          true, kind != CANDLE_OUTPUT_LOGITS);
    if (st) return candle_set_error(NULL, st, "forward: sequence %" PRId64 ": %s", i, candle_session_errmsg(s));
    if (!rows) pool(scratch, b - a, w, kind, out + (size_t)i * (size_t)w);
    return CANDLE_OK;
}

candle_status candle_model_forward(const candle_model *m, const candle_forward_input *in,
                                   candle_output_kind kind, float *out, size_t out_len) {
    candle_status st = check_input(m, in, kind, out, out_len);
    if (st) return st;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = in->n_tokens;
    candle_session *s = NULL;
    float *scratch = NULL;
    if ((st = candle_session_init(&s, m, &sp))) return st;
    if (kind == CANDLE_OUTPUT_POOLED_LAST || kind == CANDLE_OUTPUT_POOLED_MEAN) {
        scratch = malloc((size_t)(in->n_tokens * m->cfg.n_embd) * sizeof *scratch);
        if (!scratch) st = candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward states");
    }
    for (int64_t i = 0; !st && i < in->n_seq; i++) st = forward_seq(s, in, i, kind, out, scratch);
    free(scratch);
    candle_session_free(s);
    return st;
}
