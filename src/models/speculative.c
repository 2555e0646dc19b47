/* Speculative decoding: prompt-lookup or draft-model drafts, verified by one
 * multi-token session step (candle_session_eval with every row's logits)
 * and candle_sampler_verify; refused positions are dropped with
 * candle_session_truncate. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "candle/spec_cost.h"
#include "candle/speculative.h"
#include "model-impl.h"
#include "../nn/nn-impl.h"

struct candle_spec {
    const candle_model *target;
    const candle_tokenizer *tok;
    candle_spec_params p;
    int64_t n_vocab;
    int32_t *ctx; /* [cap] the tokens the target session holds, then pending */
    int64_t n_ctx, cap;
    int32_t batch[CANDLE_SPEC_MAX_DRAFT + 1]; /* pending, then the drafts */
    float *rows;     /* [(n_draft + 1) * n_vocab] the target's logits of the batch */
    candle_session *dsess;   /* the draft model's session, or NULL */
    candle_sampler *dsmp;    /* its sampler */
    float *q;        /* [n_draft * n_vocab] the draft's distributions */
    float *dlogits;  /* [n_vocab] the draft's last logits */
    int32_t k_cur; /* this step's draft length: n_draft, adapted to the acceptance */
    int32_t skip, backoff; /* steps left without drafting, and the next such pause */
    candle_spec_times times; /* the cost-aware schedule's measurements (spec_cost.h) */
    candle_spec_accept acc;
    double t_first; /* seconds of the draft model's catching up in this step's draft */
    int64_t t_span; /* the tokens it caught up on */
    candle_spec_stats st;
};


candle_spec_params candle_spec_default_params(void) {
    candle_spec_params p = {.n_draft = 8, .lookup_ngram = 3, .cost_aware = true};
    p.draft_session = candle_session_default_params();
    p.draft_sampling = candle_sampler_default_params();
    return p;
}

int32_t candle_spec_lookup(const int32_t *ctx, int64_t n, int32_t ngram, int32_t max, int32_t *draft) {
    if (!ctx || ngram < 1 || max < 1 || n <= ngram) return 0;
    const int32_t *tail = ctx + n - ngram;
    /* the latest match: near text is the likeliest to repeat (an edit of
     * code just quoted, a list being continued) */
    for (int64_t j = n - ngram - 1; j >= 0; j--) {
        if (ctx[j] != tail[0] || memcmp(ctx + j, tail, (size_t)ngram * sizeof *ctx)) continue;
        int64_t from = j + ngram, k = n - from < max ? n - from : max;
        memcpy(draft, ctx + from, (size_t)k * sizeof *draft);
        return (int32_t)k;
    }
    return 0;
}

/* The draft's vocabulary must be the target's, token for token: a draft
 * token id is verified as the target's token of that id. */
static candle_status check_vocab(const candle_tokenizer *t, const candle_model *tm,
                                 const candle_model *dm) {
    int64_t nt = candle_model_get_config(tm)->n_vocab, nd = candle_model_get_config(dm)->n_vocab;
    if (nt != nd)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "speculative: the draft model's vocabulary has %" PRId64
                             " tokens, the model's %" PRId64 ": they must be the same vocabulary",
                             nd, nt);
    candle_tokenizer *d = NULL;
    if (candle_tokenizer_from_weights(&d, candle_model_weights(dm)))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "speculative: the draft model's tokenizer: %s",
                             candle_last_errmsg());
    candle_status st = CANDLE_OK;
    int32_t n = candle_tokenizer_n_vocab(t);
    if (n != candle_tokenizer_n_vocab(d))
        st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                           "speculative: the draft model's tokenizer has %d tokens, the model's %d",
                           (int)candle_tokenizer_n_vocab(d), (int)n);
    char a[512], b[512];
    for (int32_t i = 0; !st && i < n; i++) {
        size_t la = 0, lb = 0;
        candle_status sa = candle_tokenizer_token_bytes(t, i, true, a, sizeof a, &la);
        candle_status sb = candle_tokenizer_token_bytes(d, i, true, b, sizeof b, &lb);
        bool same = sa == sb && la == lb && (la > sizeof a || !memcmp(a, b, la));
        if (!same || candle_tokenizer_is_eog(t, i) != candle_tokenizer_is_eog(d, i))
            st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                               "speculative: token %d differs between the model and the draft "
                               "model: they must share one vocabulary",
                               (int)i);
    }
    candle_tokenizer_free(d);
    return st;
}

candle_status candle_spec_init(candle_spec **out, const candle_model *target, const candle_tokenizer *tok,
                               const candle_spec_params *p) {
    if (!out || !target || !tok)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "speculative: NULL argument");
    *out = NULL;
    candle_spec_params def = candle_spec_default_params();
    if (!p) p = &def;
    if (p->n_draft < 1 || p->n_draft > CANDLE_SPEC_MAX_DRAFT)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "speculative: draft length %d is not in [1, %d]", (int)p->n_draft,
                             CANDLE_SPEC_MAX_DRAFT);
    if (!p->draft_model && p->lookup_ngram < 1)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "speculative: lookup n-gram size %d must be at least 1",
                             (int)p->lookup_ngram);
    if (!(p->draft_p_min >= 0 && p->draft_p_min <= 1))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "speculative: draft p-min %g is not in [0, 1]", (double)p->draft_p_min);
    if (p->draft_model && check_vocab(tok, target, p->draft_model)) return candle_last_error();
    candle_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: speculative");
    sp->target = target;
    sp->tok = tok;
    sp->p = *p;
    sp->k_cur = p->n_draft;
    sp->n_vocab = candle_model_get_config(target)->n_vocab;
    size_t nv = (size_t)sp->n_vocab;
    sp->rows = malloc((size_t)(p->n_draft + 1) * nv * sizeof *sp->rows);
    candle_status st = sp->rows ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: speculative");
    if (!st && p->draft_model) {
        candle_sampler_params dp = p->draft_sampling;
        dp.penalty_last_n = 0;
        /* The draft's draws must not repeat the target sampler's (given the
         * same params, as candle run does, they would: the acceptance test's
         * uniforms would then track the draws they judge). */
        dp.seed ^= 0x9e3779b97f4a7c15ull;
        sp->q = malloc((size_t)p->n_draft * nv * sizeof *sp->q);
        sp->dlogits = malloc(nv * sizeof *sp->dlogits);
        if (!sp->q || !sp->dlogits) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: speculative");
        if (!st) st = candle_session_init(&sp->dsess, p->draft_model, &p->draft_session);
        if (!st) st = candle_sampler_init(&sp->dsmp, (int32_t)sp->n_vocab, &dp);
    }
    if (st) {
        candle_spec_free(sp);
        return st;
    }
    *out = sp;
    return CANDLE_OK;
}

void candle_spec_free(candle_spec *sp) {
    if (!sp) return;
    free(sp->ctx);
    free(sp->rows);
    free(sp->q);
    free(sp->dlogits);
    candle_session_free(sp->dsess);
    candle_sampler_free(sp->dsmp);
    free(sp);
}

candle_spec_stats candle_spec_get_stats(const candle_spec *sp) {
    return sp ? sp->st : (candle_spec_stats){0};
}

static candle_status reserve(candle_spec *sp, int64_t n) {
    if (n <= sp->cap) return CANDLE_OK;
    int64_t cap = sp->cap ? sp->cap : 256;
    while (cap < n) cap *= 2;
    int32_t *c = realloc(sp->ctx, (size_t)cap * sizeof *c);
    if (!c) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: speculative context");
    sp->ctx = c;
    sp->cap = cap;
    return CANDLE_OK;
}

static candle_status session_fail(candle_session *s, const char *what) {
    return cdl_set_error(NULL, candle_session_errcode(s), "speculative: %s: %s", what,
                         candle_session_errmsg(s));
}

candle_status candle_spec_set_context(candle_spec *sp, const int32_t *tokens, int64_t n) {
    if (!sp || n < 0 || (n > 0 && !tokens))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "speculative: bad context");
    if (reserve(sp, n + CANDLE_SPEC_MAX_DRAFT + 1)) return candle_last_error();
    int64_t same = 0;
    while (same < n && same < sp->n_ctx && sp->ctx[same] == tokens[same]) same++;
    if (sp->dsess && candle_session_pos(sp->dsess) > same) candle_session_truncate(sp->dsess, same);
    memcpy(sp->ctx, tokens, (size_t)n * sizeof *tokens);
    sp->n_ctx = n;
    /* the draft model reads the prompt now, as the model did, rather than
     * inside the first step */
    candle_session *ds = sp->dsess;
    int64_t dpos = ds ? candle_session_pos(ds) : 0;
    if (ds && n > dpos && n <= candle_session_n_ctx(ds) &&
        candle_session_eval(ds, sp->ctx + dpos, n - dpos, NULL, false))
        return session_fail(ds, "draft model");
    return CANDLE_OK;
}

/* softmax(l)[id] at temperature 1: the draft's confidence in its token. */
static float top_prob(const float *l, int64_t n, int32_t id) {
    float mx = l[id];
    for (int64_t i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)(l[i] - mx));
    return (float)(exp((double)(l[id] - mx)) / sum);
}

/* The draft model's k tokens after the context (which ends with pending):
 * its session catches up on the context, then one step per drafted token
 * but the last. Returns how many were drafted, or -1. */
static int32_t draft_model(candle_spec *sp, int32_t k, int32_t *draft) {
    candle_session *ds = sp->dsess;
    int64_t dpos = candle_session_pos(ds), nv = sp->n_vocab;
    if (dpos >= sp->n_ctx) { /* cannot happen after set_context; keep the last token to evaluate */
        candle_session_truncate(ds, sp->n_ctx - 1);
        dpos = sp->n_ctx - 1;
    }
    int64_t room = candle_session_n_ctx(ds) - sp->n_ctx;
    if (room < 0) return 0; /* the draft's context is full: no drafts */
    if (k > room + 1) k = (int32_t)(room + 1);
    /* the rows the model verified in a row step: the same kind of step */
    double t0 = cdl_now_s();
    if (session_eval_out(ds, sp->ctx + dpos, sp->n_ctx - dpos, sp->dlogits, false, SESSION_ROW_STEPS)) {
        session_fail(ds, "draft model");
        return -1;
    }
    sp->t_first = cdl_now_s() - t0;
    sp->t_span = sp->n_ctx - dpos;
    int32_t n = 0;
    while (n < k) {
        float *q = sp->q + (size_t)n * (size_t)nv;
        int32_t id = candle_sampler_sample_probs(sp->dsmp, sp->dlogits, q);
        if (id < 0) return -1;
        if (sp->p.draft_p_min > 0 && top_prob(sp->dlogits, nv, id) < sp->p.draft_p_min) break;
        draft[n++] = id;
        if (n == k || candle_tokenizer_is_eog(sp->tok, id)) break;
        if (candle_session_eval(ds, &id, 1, sp->dlogits, false)) {
            session_fail(ds, "draft model");
            return -1;
        }
    }
    return n;
}

/* An output token into the sampler's history and its grammar's matcher;
 * *end: nothing may follow it (an end of generation, or a grammar that
 * admits only the end). */
static candle_status record(candle_sampler *smp, candle_grammar_state *gs, const candle_grammar_vocab *gv,
                            const candle_tokenizer *tok, int32_t id, bool *end) {
    candle_sampler_accept(smp, id);
    *end = candle_tokenizer_is_eog(tok, id);
    if (!gs || *end) return CANDLE_OK;
    if (candle_grammar_accept_token(gs, gv, id)) return candle_last_error();
    *end = candle_grammar_state_done(gs);
    return CANDLE_OK;
}

/* A step that failed after its evaluation: s and the context as before it
 * (the sampler keeps what it recorded). */
static candle_status undo(candle_spec *sp, candle_session *s, int64_t pos) {
    candle_status st = candle_last_error();
    candle_session_truncate(s, pos);
    sp->n_ctx = pos;
    if (sp->dsess && candle_session_pos(sp->dsess) > pos) candle_session_truncate(sp->dsess, pos);
    return st;
}

candle_status candle_spec_step(candle_spec *sp, candle_session *s, candle_sampler *smp, int32_t pending,
                               int32_t *out, int32_t *n_out) {
    if (!sp || !s || !smp || !out || !n_out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "speculative: NULL argument");
    *n_out = 0;
    const candle_grammar_vocab *gv = NULL;
    candle_grammar_state *gs = cdl_sampler_grammar(smp, &gv);
    int64_t pos = candle_session_pos(s), nv = sp->n_vocab;
    if (pos != sp->n_ctx)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                             "speculative: the session holds %" PRId64 " positions, the context %" PRId64
                             " tokens (candle_spec_set_context after changing the session)",
                             pos, sp->n_ctx);
    if (reserve(sp, sp->n_ctx + CANDLE_SPEC_MAX_DRAFT + 2)) return candle_last_error();
    sp->ctx[sp->n_ctx++] = pending;
    int64_t room = candle_session_n_ctx(s) - pos - 1; /* positions after pending */
    bool costed = sp->p.cost_aware && !cdl_sampler_draws(smp);
    int32_t k_cost = -1; /* stays -1 until the cost model has fitted */
    if (costed) candle_spec_cost_lengths(&sp->times, 1, &sp->acc, &sp->p.n_draft, 0, 0, &k_cost);
    int32_t k = k_cost >= 0 ? k_cost : sp->k_cur;
    k = k < room ? k : (int32_t)(room > 0 ? room : 0);
    int32_t nd = 0, peek = -1; /* peek: a lookup draft not verified, compared with the output instead */
    if (k_cost < 0 && costed) {
        int32_t k_try = candle_spec_warmup_length(sp->dsess != NULL, sp->st.n_steps);
        k = k < k_try ? k : k_try;
    } else if (k_cost < 0 && sp->skip > 0) {
        sp->skip--;
        k = 0;
    } else if (k_cost == 0 && sp->dsess) {
        k = candle_spec_probe(&sp->acc) && room > 0 ? 1 : 0;
    }
    int32_t *draft = sp->batch + 1;
    double t0 = cdl_now_s();
    if (k > 0 && sp->dsess) nd = draft_model(sp, k, draft);
    else if (k > 0) nd = candle_spec_lookup(sp->ctx, sp->n_ctx, sp->p.lookup_ngram, k, draft);
    else if (costed && !sp->dsess && candle_spec_lookup(sp->ctx, sp->n_ctx, sp->p.lookup_ngram, 1, draft) == 1)
        peek = draft[0];
    if (nd < 0) {
        sp->n_ctx--;
        return candle_last_error();
    }
    double t1 = cdl_now_s();
    sp->batch[0] = pending;
    if (candle_session_eval(s, sp->batch, nd + 1, sp->rows, nd > 0)) {
        sp->n_ctx--;
        return session_fail(s, "eval");
    }
    if (costed) candle_spec_times_step(&sp->times, nd + 1, cdl_now_s() - t1);
    if (costed && nd > 0)
        candle_spec_times_draft(&sp->times, nd, sp->dsess ? sp->t_span : 1, sp->dsess ? sp->t_first : t1 - t0,
                                t1 - t0);
    /* row i: the distribution after batch[i], which verifies draft[i] */
    int32_t n = 0, acc = 0, i = 0;
    bool end = false;
    for (; i < nd; i++) {
        bool ok = false;
        const float *q = sp->q ? sp->q + (size_t)i * (size_t)nv : NULL;
        int32_t id = candle_sampler_verify(smp, sp->rows + (size_t)i * (size_t)nv, draft[i], q, &ok);
        if (id < 0) return undo(sp, s, pos);
        out[n++] = id;
        if (record(smp, gs, gv, sp->tok, id, &end)) return undo(sp, s, pos);
        acc += ok;
        if (!ok || end) break; /* an accepted end is the output's last: not kept in s */
    }
    if (i == nd && !end) { /* every draft kept: the last row gives one more */
        int32_t id = candle_sampler_sample(smp, sp->rows + (size_t)nd * (size_t)nv);
        if (id < 0) return undo(sp, s, pos);
        out[n++] = id;
        if (record(smp, gs, gv, sp->tok, id, &end)) return undo(sp, s, pos);
    }
    int32_t kept = n - 1; /* drafts kept in s: all of out but its last */
    if (candle_session_truncate(s, pos + 1 + kept)) return session_fail(s, "truncate");
    memcpy(sp->ctx + sp->n_ctx, out, (size_t)kept * sizeof *out);
    sp->n_ctx += kept;
    if (sp->dsess && candle_session_pos(sp->dsess) > sp->n_ctx)
        candle_session_truncate(sp->dsess, sp->n_ctx);
    if (costed && nd > 0) candle_spec_accept_add(&sp->acc, acc < nd ? acc + 1 : acc, acc);
    else if (costed && peek >= 0) candle_spec_accept_add(&sp->acc, 1, out[0] == peek);
    if (costed && k_cost == 0 && nd > 0) candle_spec_probe_done(&sp->acc);
    /* Hugging Face's "heuristic" schedule: longer after a step that kept
     * every draft, shorter after one that did not, since each drafted row
     * costs a share of a step whether kept or not. Drafts of one token that
     * keep failing (prompt lookup on text that does not repeat) pause the
     * drafting for 1, 2, 4 ... 32 steps, until one is kept again. */
    if (nd > 0 && acc == nd) {
        sp->k_cur = sp->k_cur + 2 < sp->p.n_draft ? sp->k_cur + 2 : sp->p.n_draft;
        sp->backoff = 0;
    } else if (nd > 0 && (acc > 0 || sp->k_cur > 1)) {
        sp->k_cur = sp->k_cur > 1 ? sp->k_cur - 1 : 1;
        if (acc > 0) sp->backoff = 0;
    } else if (nd > 0) {
        sp->backoff = sp->backoff ? (sp->backoff < 32 ? 2 * sp->backoff : 32) : 1;
        sp->skip = sp->backoff;
    }
    sp->st.n_steps++;
    sp->st.n_drafted += nd;
    sp->st.n_accepted += acc;
    sp->st.n_tokens += n;
    *n_out = n;
    return CANDLE_OK;
}
