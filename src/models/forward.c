/* The generic forward (model.h): the sequences of a padded batch, each one's
 * run of tokens found from the mask. A causal decoder evaluates each on its
 * own over one scratch session; an encoder or a bidirectional decoder packs
 * the runs of consecutive sequences into one graph (encoder_hidden_rows,
 * decoder_hidden_bidir), no padding computed. Pooled outputs reduce the
 * hidden states of each run. */
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
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                    "forward: sequence %" PRId64 ": the mask has a gap at position %" PRId64
                                    " (its tokens must be one run, left or right padded)", i, *b);
    if (*a == *b)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: sequence %" PRId64 " has no tokens", i);
    return CANDLE_OK;
}

static candle_status check_input(const candle_model *m, const candle_forward_input *in,
                                 candle_output_kind kind, const float *out, size_t out_len) {
    if (!m || !in || !in->tokens || !out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: NULL argument");
    if (in->n_seq <= 0 || in->n_tokens <= 0 || in->n_tokens > INT64_MAX / in->n_seq)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "forward: %" PRId64 " sequences of %" PRId64 " tokens", in->n_seq,
                                in->n_tokens);
    if ((unsigned)kind > CANDLE_OUTPUT_POOLED_MAX)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: unknown output kind %d", (int)kind);
    if (kind == CANDLE_OUTPUT_LOGITS && (m->cfg.kind != CANDLE_MODEL_DECODER_LM || m->cfg.bidirectional))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "forward: %s (%s) has no logits",
                                m->cfg.bidirectional ? "a bidirectional decoder" : "an encoder", m->family->name);
    size_t need = candle_model_output_size(m, in, kind);
    if (out_len < need)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "forward: output of %zu floats too small, need %zu", out_len, need);
    return CANDLE_OK;
}

/* Pool rows [n, w] of h into dst [w]. */
static void pool(const float *h, int64_t n, int64_t w, candle_output_kind kind, float *dst) {
    if (kind == CANDLE_OUTPUT_POOLED_LAST || kind == CANDLE_OUTPUT_POOLED_CLS) {
        memcpy(dst, h + (kind == CANDLE_OUTPUT_POOLED_LAST ? n - 1 : 0) * w, (size_t)w * sizeof *dst);
        return;
    }
    for (int64_t k = 0; k < w; k++) {
        double acc = kind == CANDLE_OUTPUT_POOLED_MAX ? h[k] : 0;
        for (int64_t r = 0; r < n; r++)
            acc = kind == CANDLE_OUTPUT_POOLED_MAX ? (h[r * w + k] > acc ? h[r * w + k] : acc) : acc + h[r * w + k];
        dst[k] = (float)(kind == CANDLE_OUTPUT_POOLED_MAX ? acc : acc / (double)n);
    }
}

/* Where sequences are evaluated: a decoder's session or an encoder's
 * context (the workspace's, kept between calls). */
typedef struct runner {
    const candle_model *m;
    candle_session *s;
    model_ws *ws;
    candle_ctx *ctx;
    candle_ctx_mark mark;
} runner;

static candle_status runner_init(runner *r, const candle_model *m, model_ws *ws, int64_t n_tokens) {
    r->m = m;
    r->ws = ws;
    if (m->cfg.kind == CANDLE_MODEL_DECODER_LM && !m->cfg.bidirectional) {
        candle_session_params sp = candle_session_default_params();
        sp.n_ctx = n_tokens;
        return candle_session_init(&r->s, m, &sp);
    }
    r->ctx = ws->ctx;
    r->mark = ws->mark;
    return CANDLE_OK;
}

static void runner_free(runner *r) { candle_session_free(r->s); }

/* An encoder's ids and token types in range (an embedding lookup does not check). */
static candle_status check_ids(const candle_model *m, const int32_t *tokens, const int32_t *types, int64_t n) {
    int64_t n_types = m->type_embd ? m->type_embd->shape[0] : 1;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->cfg.n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                    "token %d at index %" PRId64 " out of range [0, %" PRId64 ")",
                                    (int)tokens[i], i, m->cfg.n_vocab);
        if (types && (types[i] < 0 || types[i] >= n_types))
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                    "token type %d at index %" PRId64 " out of range [0, %" PRId64 ")",
                                    (int)types[i], i, n_types);
    }
    return CANDLE_OK;
}

/* A causal decoder's tokens[0..n)'s logits [n, n_vocab] or last hidden
 * states [n, n_embd] into dst, through the scratch session. */
static candle_status run_rows(runner *r, const int32_t *tokens, int64_t n, bool logits, float *dst) {
    candle_session_reset(r->s);
    candle_status st = session_eval_out(r->s, tokens, n, dst, true, logits ? 0 : SESSION_HIDDEN);
    return st ? cdl_set_error(NULL, st, "%s", candle_session_errmsg(r->s)) : CANDLE_OK;
}

static candle_status forward_seq(runner *r, const candle_forward_input *in, int64_t i, int64_t a, int64_t b,
                                 candle_output_kind kind, float *out, float *scratch) {
    int64_t w = out_width(r->m, kind);
    bool rows = kind == CANDLE_OUTPUT_LOGITS || kind == CANDLE_OUTPUT_HIDDEN;
    float *dst = rows ? out + (size_t)(i * in->n_tokens) * (size_t)w : scratch;
    if (rows) memset(dst, 0, (size_t)(in->n_tokens * w) * sizeof *dst);
    candle_status st = run_rows(r, in->tokens + i * in->n_tokens + a, b - a, kind == CANDLE_OUTPUT_LOGITS,
                                rows ? dst + a * w : dst);
    if (st) return cdl_set_error(NULL, st, "forward: sequence %" PRId64 ": %s", i, candle_last_errmsg());
    if (!rows) pool(scratch, b - a, w, kind, out + (size_t)i * (size_t)w);
    return CANDLE_OK;
}

/* An encoder's (or a bidirectional decoder's) graph takes the runs of
 * consecutive sequences up to this many tokens (or one longer run): their
 * row-wise products then have enough rows to be efficient, which a batch
 * of short inputs alone lacks. */
#define FORWARD_PACK_TOKENS 8192

/* What a packed encoder step needs: the runs [ra, rb) of every sequence,
 * and room for one step's tokens, types, lengths and hidden states. */
typedef struct packer {
    int64_t *ra, *rb; /* [n_seq] */
    int64_t *lens;    /* [n_seq] */
    int32_t *ids, *types; /* [cap] */
    float *h;         /* [cap, n_embd] */
    int64_t cap;
} packer;

/* Sequences [i0, i1) (their runs at most pk->cap tokens) in one graph. */
static candle_status forward_packed(runner *r, const candle_forward_input *in, packer *pk, int64_t i0, int64_t i1,
                                    candle_output_kind kind, float *out) {
    int64_t n = 0, w = r->m->cfg.n_embd;
    for (int64_t i = i0; i < i1; i++) {
        int64_t len = pk->rb[i] - pk->ra[i];
        const int32_t *t = in->tokens + i * in->n_tokens + pk->ra[i];
        const int32_t *ty = in->type_ids ? in->type_ids + i * in->n_tokens + pk->ra[i] : NULL;
        candle_status st = check_ids(r->m, t, ty, len);
        if (st) return cdl_set_error(NULL, st, "forward: sequence %" PRId64 ": %s", i, candle_last_errmsg());
        memcpy(pk->ids + n, t, (size_t)len * sizeof *t);
        if (ty) memcpy(pk->types + n, ty, (size_t)len * sizeof *ty);
        pk->lens[i - i0] = len;
        n += len;
    }
    candle_tensor *h = r->m->cfg.kind == CANDLE_MODEL_DECODER_LM
                           ? decoder_hidden_bidir(r->ctx, r->m, r->ws, pk->ids, pk->lens, i1 - i0)
                           : encoder_hidden_rows(r->ctx, r->m, r->ws, pk->ids, in->type_ids ? pk->types : NULL,
                                                 pk->lens, i1 - i0);
    candle_status st = h ? candle_compute(r->ctx, h) : candle_errcode(r->ctx);
    if (!st) st = candle_tensor_to_f32(h, pk->h);
    if (st) st = cdl_set_error(NULL, st, "forward: sequences %" PRId64 "..%" PRId64 ": %s", i0, i1 - 1,
                               candle_errmsg(r->ctx));
    candle_ctx_clear_error(r->ctx);
    candle_ctx_reset(r->ctx, r->mark);
    if (st) return st;
    bool rows = kind == CANDLE_OUTPUT_HIDDEN;
    for (int64_t i = i0, off = 0; i < i1; off += pk->lens[i - i0], i++) {
        const float *hs = pk->h + (size_t)(off * w);
        if (!rows) {
            pool(hs, pk->lens[i - i0], w, kind, out + (size_t)i * (size_t)w);
            continue;
        }
        float *dst = out + (size_t)(i * in->n_tokens) * (size_t)w;
        memset(dst, 0, (size_t)(in->n_tokens * w) * sizeof *dst);
        memcpy(dst + pk->ra[i] * w, hs, (size_t)(pk->lens[i - i0] * w) * sizeof *dst);
    }
    return CANDLE_OK;
}

/* The runs of every sequence, and (packs) room for the largest packed
 * step, in the workspace's buffers. */
static candle_status packer_init(packer *pk, const candle_model *m, model_ws *ws, const candle_forward_input *in,
                                 bool packs) {
    size_t ns = (size_t)in->n_seq;
    if (!(pk->ra = model_ws_buf(ws, WS_PK_RUNS, 3 * ns * sizeof *pk->ra, "forward runs"))) return candle_last_error();
    pk->rb = pk->ra + ns;
    pk->lens = pk->rb + ns;
    int64_t total = 0;
    for (int64_t i = 0; i < in->n_seq; i++) {
        candle_status st = find_run(in, i, &pk->ra[i], &pk->rb[i]);
        if (st) return st;
        total += pk->rb[i] - pk->ra[i];
    }
    if (!packs) return CANDLE_OK;
    int64_t most = in->n_tokens > FORWARD_PACK_TOKENS ? in->n_tokens : FORWARD_PACK_TOKENS;
    pk->cap = total < most ? total : most;
    pk->ids = model_ws_buf(ws, WS_PK_IDS, 2 * (size_t)pk->cap * sizeof *pk->ids, "forward ids");
    pk->types = pk->ids ? pk->ids + pk->cap : NULL;
    pk->h = model_ws_buf(ws, WS_PK_H, (size_t)(pk->cap * m->cfg.n_embd) * sizeof *pk->h, "forward states");
    if (!pk->ids || !pk->h)
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward states of %" PRId64 " tokens", pk->cap);
    return CANDLE_OK;
}

candle_status model_forward_ws(const candle_model *m, model_ws *ws, const candle_forward_input *in,
                               candle_output_kind kind, float *out, size_t out_len) {
    candle_status st = check_input(m, in, kind, out, out_len);
    if (st) return st;
    runner r = {0};
    packer pk = {0};
    float *scratch = NULL;
    /* an encoder or a bidirectional decoder: no session (runner_init) */
    bool packs = m->cfg.kind != CANDLE_MODEL_DECODER_LM || m->cfg.bidirectional;
    if (in->n_lora && packs)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "forward: LoRA adapters on %s (%s): causal decoders only",
                             m->cfg.bidirectional ? "a bidirectional decoder" : "an encoder", m->family->name);
    if ((st = runner_init(&r, m, ws, in->n_tokens)) || (st = packer_init(&pk, m, ws, in, packs)) ||
        (r.s && (st = candle_session_set_lora(r.s, in->lora, in->n_lora)) &&
         cdl_set_error(NULL, st, "forward: %s", candle_session_errmsg(r.s)))) {
        runner_free(&r);
        return st;
    }
    if (!packs && kind != CANDLE_OUTPUT_LOGITS && kind != CANDLE_OUTPUT_HIDDEN) {
        scratch = malloc((size_t)(in->n_tokens * m->cfg.n_embd) * sizeof *scratch);
        if (!scratch) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward states");
    }
    for (int64_t i = 0; !st && i < in->n_seq;) {
        if (!packs) {
            st = forward_seq(&r, in, i, pk.ra[i], pk.rb[i], kind, out, scratch);
            i++;
            continue;
        }
        int64_t j = i, n = 0;
        while (j < in->n_seq && (j == i || n + pk.rb[j] - pk.ra[j] <= pk.cap)) n += pk.rb[j] - pk.ra[j], j++;
        st = forward_packed(&r, in, &pk, i, j, kind, out);
        i = j;
    }
    free(scratch);
    runner_free(&r);
    return st;
}

candle_status candle_model_forward(const candle_model *m, const candle_forward_input *in,
                                   candle_output_kind kind, float *out, size_t out_len) {
    candle_status st = check_input(m, in, kind, out, out_len);
    if (st) return st;
    model_ws *ws = model_ws_get(m, true);
    if (!ws) return candle_last_error();
    st = model_forward_ws(m, ws, in, kind, out, out_len);
    model_ws_put(m, ws);
    return st;
}
