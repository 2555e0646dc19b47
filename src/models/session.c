/* Sessions: one sequence's KV cache and position over a shared model. Each
 * step builds its graph after the cache in the session's context and resets
 * to that mark once the logits are read. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

/* Tokens per graph: bounds the step's activations and logits. */
#define SESSION_UBATCH 512

candle_session_params candle_session_default_params(void) {
    return (candle_session_params){.n_ctx = 0, .kv_type = CANDLE_DTYPE_F32, .n_threads = 0};
}

candle_status candle_session_init(candle_session **out, const candle_model *m,
                                  const candle_session_params *p) {
    if (!out || !m)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "session_init: NULL argument");
    *out = NULL;
    if (model_need_decoder(m, "session_init")) return candle_last_error();
    candle_session_params def = candle_session_default_params();
    if (!p) p = &def;
    const candle_model_config *c = &m->cfg;
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : c->n_ctx_train;
    if (p->n_ctx < 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "session_init: n_ctx %" PRId64 " < 0",
                                p->n_ctx);
    candle_session *s = calloc(1, sizeof *s);
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: session");
    s->model = m;
    candle_ctx_params cp = candle_ctx_default_params();
    candle_status st = model_backend_for(m, p->n_threads, &s->backend, &s->owns_backend);
    cp.backend = s->backend;
    if (!st) st = candle_ctx_init(&s->ctx, &cp);
    if (!st &&
        kv_cache_init(&s->kv, s->ctx, c->n_layer, c->n_head_kv, n_ctx, c->head_dim, p->kv_type)) {
        st = cdl_set_error(NULL, candle_errcode(s->ctx), "%s", candle_errmsg(s->ctx));
    }
    if (st) {
        candle_session_free(s);
        return st;
    }
    s->mark = candle_ctx_get_mark(s->ctx);
    *out = s;
    return CANDLE_OK;
}

void candle_session_free(candle_session *s) {
    if (!s) return;
    kv_cache_free(&s->kv);
    free(s->lora);
    candle_ctx_free(s->ctx);
    if (s->owns_backend) candle_backend_free(s->backend);
    free(s);
}

int64_t candle_session_pos(const candle_session *s) { return s->pos; }

void candle_session_set_abort(candle_session *s, bool (*fn)(void *user), void *user) {
    if (!s) return;
    s->abort_fn = fn;
    s->abort_user = user;
}
int64_t candle_session_n_ctx(const candle_session *s) { return s->kv.n_ctx; }
candle_status candle_session_errcode(const candle_session *s) { return candle_errcode(s->ctx); }
const char *candle_session_errmsg(const candle_session *s) { return candle_errmsg(s->ctx); }

/* Start a call with a clean error state: an earlier failure stays readable
 * until the next call. */
static void begin(candle_session *s) { candle_ctx_clear_error(s->ctx); }

static candle_status check_tokens(candle_session *s, const int32_t *tokens, int64_t n) {
    if (n <= 0 || !tokens)
        return cdl_set_error(s->ctx, CANDLE_ERR_INVALID_ARG, "eval: no tokens (n = %" PRId64 ")",
                                n);
    if (n > s->kv.n_ctx - s->pos)
        return cdl_set_error(s->ctx, CANDLE_ERR_INVALID_ARG,
                                "eval: %" PRId64 " tokens at position %" PRId64
                                " do not fit in the context of %" PRId64
                                " (use a larger context or a context shift)",
                                n, s->pos, s->kv.n_ctx);
    int64_t n_vocab = s->model->cfg.n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return cdl_set_error(s->ctx, CANDLE_ERR_INVALID_ARG,
                                    "eval: token %d at index %" PRId64 " out of range [0, %" PRId64
                                    ")",
                                    (int)tokens[i], i, n_vocab);
    return CANDLE_OK;
}

int64_t model_first_nonfinite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return -1;
}

/* NaN or Inf logits (overflowing activations, bad weights) would be sampled
 * as plausible text or nothing: an error instead. */
static candle_status check_finite(candle_session *s, const float *out, int64_t rows, int64_t width,
                                  bool hidden) {
    int64_t at = model_first_nonfinite(out, rows * width);
    if (at < 0) return CANDLE_OK;
    return cdl_set_error(s->ctx, CANDLE_ERR_NUMERIC,
                            "eval: non-finite %s (%g at row %" PRId64 ", index %" PRId64
                            "): the model's weights or activations are NaN or Inf",
                            hidden ? "hidden states" : "logits", out[at], at / width, at % width);
}

static candle_status eval_ubatch(candle_session *s, const int32_t *tokens, int64_t n, float *out,
                                 bool all, unsigned flags) {
    bool hidden = flags & SESSION_HIDDEN;
    candle_tensor *logits = decoder_forward(s, tokens, n, all, flags);
    candle_status st = logits ? candle_compute(s->ctx, logits) : candle_errcode(s->ctx);
    if (!st && !logits) st = cdl_set_error(s->ctx, CANDLE_ERR_INTERNAL, "eval: no logits");
    if (!st && out) st = candle_tensor_to_f32(logits, out);
    int64_t width = hidden ? s->model->cfg.n_embd : s->model->cfg.n_vocab;
    if (!st && out) st = check_finite(s, out, all ? n : 1, width, hidden);
    candle_ctx_reset(s->ctx, s->mark);
    if (!st) s->pos += n;
    return st;
}

candle_status candle_session_eval(candle_session *s, const int32_t *tokens, int64_t n,
                                  float *logits, bool all_logits) {
    /* every row's logits: the caller verifies drafted tokens or scores a
     * text (where the rows' bits do not matter) */
    return session_eval_out(s, tokens, n, logits, all_logits, all_logits ? SESSION_ROW_STEPS : 0);
}

candle_status session_eval_out(candle_session *s, const int32_t *tokens, int64_t n, float *logits,
                               bool all_logits, unsigned flags) {
    bool hidden = flags & SESSION_HIDDEN;
    begin(s);
    candle_status st = check_tokens(s, tokens, n);
    int64_t width = hidden ? s->model->cfg.n_embd : s->model->cfg.n_vocab, start = s->pos;
    for (int64_t i = 0; !st && i < n; i += SESSION_UBATCH) {
        int64_t m = n - i < SESSION_UBATCH ? n - i : SESSION_UBATCH;
        bool last = i + m == n;
        float *out = NULL;
        if (logits && all_logits) out = logits + i * width;
        else if (logits && last) out = logits;
        if (s->abort_fn && s->abort_fn(s->abort_user))
            st = cdl_set_error(s->ctx, CANDLE_ERR_CANCELLED, "eval: cancelled after %" PRId64 " of %" PRId64 " tokens", i, n);
        else st = eval_ubatch(s, tokens + i, m, out, all_logits, flags);
    }
    if (st) s->pos = start; /* a failed batch leaves the cache as before */
    return st;
}

candle_status candle_session_truncate(candle_session *s, int64_t n_keep) {
    begin(s);
    if (n_keep < 0 || n_keep > s->pos)
        return cdl_set_error(s->ctx, CANDLE_ERR_INVALID_ARG,
                                "truncate: keep %" PRId64 " of %" PRId64 " positions", n_keep,
                                s->pos);
    s->pos = n_keep;
    return CANDLE_OK;
}

void candle_session_reset(candle_session *s) {
    begin(s);
    s->pos = 0;
}

/* Rows [from, from+len) of a cache tensor moved to `to`; keys re-rotated by
 * `delta` positions (rotations compose, so RoPE at -d moves p to p-d). */
static candle_tensor *move_rows(candle_session *s, candle_tensor *cache, int64_t from,
                                int64_t to, int64_t len, candle_tensor *delta) {
    candle_ctx *ctx = s->ctx;
    candle_tensor *x = candle_narrow(ctx, cache, 1, from, len); /* [Hkv, len, D] */
    if (delta) {
        /* the keys' own rotation, turned by delta at magnitude 1: they hold
         * the attention factor already (llama.cpp applies it again) */
        candle_rope_params p =
            model_rope_params(s->model, 0, model_rope_factors(s->model, s->kv.n_ctx));
        /* dynamic NTK: the keys turn at the base of the latest ones (the
         * older ones were rotated at smaller bases: no exact turn exists) */
        if (s->model->cfg.rope_dyn_factor > 0) p.freq_base = model_rope_base(s->model, s->pos);
        p.attn_factor = p.ext_factor != 0 ? 1.0 / (1.0 + 0.1 * log(1.0 / p.freq_scale)) : 1.0;
        x = candle_transpose(ctx, candle_rope(ctx, candle_transpose(ctx, x, 0, 1), delta, &p), 0, 1);
    } else { /* a fresh copy (scale by 1): source and destination rows overlap */
        x = candle_scale(ctx, x, 1.0);
    }
    return candle_copy_into(ctx, candle_narrow(ctx, cache, 1, to, len), x);
}

candle_status candle_session_shift(candle_session *s, int64_t n_keep, int64_t n_discard) {
    begin(s);
    if (n_keep < 0 || n_discard <= 0 || n_keep + n_discard > s->pos)
        return cdl_set_error(s->ctx, CANDLE_ERR_INVALID_ARG,
                                "shift: keep %" PRId64 ", discard %" PRId64 " of %" PRId64
                                " positions",
                                n_keep, n_discard, s->pos);
    const candle_model_config *c = &s->model->cfg;
    if (model_rope_per_layer(s->model))
        return cdl_set_error(s->ctx, CANDLE_ERR_UNSUPPORTED,
                                "shift: not supported for %s (per-layer RoPE)",
                                candle_arch_name(c->arch));
    int64_t len = s->pos - n_keep - n_discard;
    candle_status st = CANDLE_OK;
    if (len > 0) {
        int32_t *pos = malloc((size_t)len * sizeof *pos);
        if (!pos) return cdl_set_error(s->ctx, CANDLE_ERR_OOM, "out of memory: shift");
        for (int64_t i = 0; i < len; i++) pos[i] = (int32_t)-n_discard;
        candle_tensor *delta = candle_tensor_from_i32(s->ctx, 1, &len, pos);
        free(pos);
        for (int64_t il = 0; !st && il < c->n_layer; il++) {
            int64_t from = n_keep + n_discard;
            candle_tensor *k = move_rows(s, s->kv.k[il], from, n_keep, len, delta);
            candle_tensor *v = move_rows(s, s->kv.v[il], from, n_keep, len, NULL);
            st = k && v ? candle_compute(s->ctx, k) : candle_errcode(s->ctx);
            if (!st) st = candle_compute(s->ctx, v);
        }
        candle_ctx_reset(s->ctx, s->mark);
    }
    if (!st) s->pos = n_keep + len;
    return st;
}
