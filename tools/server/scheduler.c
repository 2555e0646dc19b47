/* The scheduler: one thread owns n_slots sequences of a paged KV pool and interleaves the
 * running requests at token granularity. Each iteration it admits waiting
 * requests into free slots (FIFO, while KV blocks last), then gives every
 * running slot one step: one sampled token, or a chunk of its prompt. A long
 * prompt therefore costs the others one chunk of latency per step, never its
 * whole prefill, and a request joins or leaves between any two tokens.
 *
 * A step's time grows with its token rows (on a CPU almost linearly: the
 * products are compute-bound beyond a few rows), so prompt rows added to a
 * step of running decodes stretch those requests' inter-token latency. While
 * any request decodes, a step takes at most as many prompt rows as keep its
 * estimated time within itl_stretch times that of its decodes alone (the
 * estimate is a running fit of step seconds against rows); prompts take turns
 * in order of admission, so the oldest one reaches its first token first.
 *
 * KV memory is accounted in blocks of SRV_BLOCK positions: a request
 * reserves the blocks for its prompt plus max_tokens when admitted, so a
 * running request never runs out of cache; requests that do not fit wait in
 * the bounded queue. Prompt rows are published in the pool as soon as a step
 * has computed them: a prompt takes the published rows it begins with (whole
 * blocks shared, a partly filled one copied), and one admitted beside an
 * older prompt it shares rows with waits for them rather than computing them
 * again. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "candle/batch.h"
#include "candle/kv_pool.h"
#include "candle/spec_cost.h"
#include "candle/speculative.h"
#include "server.h"

#define SRV_BLOCK CANDLE_KV_BLOCK

typedef struct srv_slot {
    candle_kv_seq kv; /* block table in the scheduler's pool */
    candle_sampler *smp;
    candle_grammar_state *gstate; /* the request's grammar matcher, or NULL */
    int64_t n_toks; /* positions in kv */
    float *logits; /* [n_vocab] after the last evaluated token */
    srv_req *req;  /* NULL: free */
    int64_t n_prefilled;
    int64_t blocks;
    candle_detok dt;
    char *pend; /* generated text held back while it may start a stop sequence */
    size_t pend_len, pend_cap;
    char *piece; /* detokenizer output buffer */
    size_t piece_cap;
    srv_lp *lpend; /* logprobs of generated tokens whose text is not emitted yet */
    size_t n_lpend, lpend_cap;
    size_t gen_off; /* bytes of text generated (emitted and held) */
    int32_t next;     /* the sampled token this step evaluates */
    int64_t step_n;   /* tokens this slot put in the step's batch */
    /* Prompt-lookup speculation (--lookup; requests without a grammar or
     * logprobs): ctx holds the prompt and the generated tokens, the last
     * one the token this step evaluates, then the step's drafted tokens;
     * logits has a row for each evaluated token of the step. */
    bool spec;
    /* grammar_lazy requests: the reply's text until a call's grammar takes
     * over, or cannot (lazy_off) */
    char *lazy;
    size_t lazy_len, lazy_cap;
    bool lazy_off;
    /* A Hermes call written as bare JSON (no <tool_call> around it): the
     * object's nesting depth and string state, so the reply ends with it. */
    bool bare, bare_str, bare_esc;
    int bare_depth;
    int32_t *ctx;       /* [n_ctx + CANDLE_SPEC_MAX_DRAFT + 1] */
    int64_t n_ctx_toks; /* tokens of ctx up to and including the last chosen one */
    int32_t step_draft; /* tokens drafted into this step */
    int32_t preset;     /* the next token, chosen by the verification (a refused draft's
                           correction), or -1: sample it from logits */
    int32_t draft_len, pause, backoff; /* the draft length's schedule (candle_spec's) */
    /* Greedy requests (a sampler that does not draw: the output does not
     * depend on the lengths) take their lengths from the cost model
     * (candle/spec_cost.h), chosen for every such slot of the step at once
     * (plan_drafts); sampled ones keep the schedule, so a seed reproduces
     * its output. */
    bool costed;
    candle_spec_accept acc; /* this request's acceptance */
    int32_t k_room;         /* the most tokens this step may draft, for plan_drafts */
    int32_t k_cost;         /* the length the cost model chose (-1: none, the warm-up's) */
    int32_t peek;           /* a lookup draft not verified, compared with the next token, or -1 */
    double d_first, d_total; /* this step's share of the draft model's seconds: round 0, all */
    int64_t d_span;          /* the tokens its round 0 caught up on */
    /* A draft model's drafting (--draft-model): dkv holds the context's
     * first dkv.pos tokens in the draft model's pool (it catches up at the
     * next draft); dsmp samples the drafts from dlogits, the draft's logits
     * after its last token, and q keeps each one's distribution for the
     * verification. */
    candle_kv_seq dkv;
    candle_sampler *dsmp;
    float *dlogits; /* [n_vocab] */
    float *q;       /* [n_draft, n_vocab] */
    int64_t draft_room; /* the most tokens this step may draft (slot_draft's room) */
    bool step_prefill;
    uint64_t admitted; /* admission number: prompts are evaluated oldest first */
} srv_slot;

/* Step seconds t against token rows x, fitted as t = a + b x by least squares
 * over exponentially decaying weights (about the last 1 / (1 - COST_DECAY)
 * steps), so the estimate follows the machine's load. */
typedef struct step_cost {
    double w, x, t, xx, xt; /* decayed sums of 1, x, t, x^2, x t */
} step_cost;

struct srv_sched {
    const candle_model *model;
    const candle_tokenizer *tok;
    srv_sched_params p;
    srv_metrics *metrics;
    int64_t n_vocab;
    candle_grammar_vocab *gvocab; /* the tokenizer's bytes for grammars, made at the first use */
    srv_slot *slots;
    int n_active;
    candle_batch *batch;      /* one forward over every running slot's tokens */
    candle_kv_pool *pool;     /* every slot's keys and values, in blocks */
    candle_batch_seq *seqs;   /* [n_slots] */
    srv_slot **seq_slot;      /* [n_slots] the slot of each seqs entry */
    srv_slot **prefilling;    /* [n_slots] scratch: slots with prompt left, by admission */
    int *group_end;           /* [n_slots] scratch: the step's runs of one LoRA set (group_by_lora) */
    step_cost cost;
    int64_t budget;           /* prompt rows the last step with decodes could take */
    uint64_t n_admitted;
    FILE *trace;              /* CANDLE_SERVE_STEPS: a line per step, or NULL */
    /* --draft-model: its forward and pool (as many blocks as the model's:
     * a request's draft positions are at most its reserved ones) */
    candle_batch *dbatch;
    candle_kv_pool *dpool;
    candle_batch_seq *dseqs;  /* [n_slots] */
    srv_slot **drafting;      /* [n_slots] scratch: the step's drafting slots */
    /* the cost model's times: decode steps' seconds against their rows, and
     * the drafts' (shared by all slots; each keeps its acceptance) */
    candle_spec_times spec_times;
    int64_t spec_steps;       /* steps that planned drafts (the warm-up's lengths vary with it) */
    int *plan_seq;            /* [n_slots] scratch: plan_drafts' slots, as indices into seqs */
    candle_spec_accept *plan_acc; /* [n_slots] scratch: their acceptance */
    int32_t *plan_max, *plan_k;   /* [n_slots] scratch: their room, their lengths */

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* new work or stop */
    pthread_cond_t idle_cv; /* nothing queued or running */
    srv_req **queue;        /* ring of queue_cap */
    int q_head, q_len;
    int64_t blocks_total, blocks_used;
    bool draining, stop;
    pthread_t thread;
};

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void srv_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

srv_req *srv_req_new(void) {
    srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancelled, false);
    r->sp = candle_sampler_default_params();
    r->n_logprobs = -1;
    return r;
}

srv_req *srv_req_choice(srv_req *r, int k) {
    srv_req *c = srv_req_new();
    if (!c) return NULL;
    c->prompt = r->prompt;
    c->n_prompt = r->n_prompt;
    c->max_tokens = r->max_tokens;
    c->sp = r->sp;
    c->sp.seed = r->sp.seed + (uint64_t)k;
    memcpy(c->stop, r->stop, sizeof c->stop);
    c->n_stop = r->n_stop;
    c->ignore_eos = r->ignore_eos;
    c->grammar = r->grammar;
    c->grammar_lazy = r->grammar_lazy; /* tool_choice auto: each choice's calls' grammar from its own opening */
    c->tools = r->tools;
    c->tool_parallel = r->tool_parallel;
    c->tool_fmt = r->tool_fmt;
    c->n_logprobs = r->n_logprobs;
    c->bias_tok = r->bias_tok;
    c->bias_val = r->bias_val;
    c->n_bias = r->n_bias;
    memcpy(c->lora, r->lora, sizeof c->lora);
    c->n_lora = r->n_lora;
    c->owner = r;
    atomic_fetch_add(&r->refs, 1);
    return c;
}

void srv_req_unref(srv_req *r) {
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
    for (int k = 0; r->choices && k < r->n_choices; k++) { /* a group: its choices go with it */
        srv_req *q = r->choices[k];
        pthread_mutex_lock(&q->mu);
        q->group = NULL;
        pthread_mutex_unlock(&q->mu);
        atomic_store(&q->cancelled, true); /* the client left before the end, or they are done */
        srv_req_unref(q);
    }
    free(r->choices);
    if (!r->owner) {
        free(r->prompt);
        for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
        candle_grammar_free(r->grammar);
        free(r->bias_tok);
        free(r->bias_val);
    }
    free(r->lp);
    free(r->text);
    candle_tool_stream_free(r->tool_stream);
    if (r->lora_release) r->lora_release(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    srv_req_unref(r->owner);
    free(r);
}

static int64_t blocks_for(int64_t positions) {
    return (positions + SRV_BLOCK - 1) / SRV_BLOCK;
}

static int64_t req_positions(const srv_sched *s, const srv_req *r) {
    int64_t n = r->n_prompt + r->max_tokens;
    return n < s->p.n_ctx ? n : s->p.n_ctx;
}

/* A debugging dump written in place: a symlink at the path is refused
 * (O_NOFOLLOW) rather than written through. */
static FILE *open_dump(const char *path) {
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

/* --- output to the request ------------------------------------------------ */

/* Under q->mu: tell q's group (a stream of several choices) of q's new
 * text, or that q is done. */
static void group_note(srv_req *q, const char *text, size_t len, bool done) {
    srv_req *g = q->group;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    if (len && g->len + len + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->len + len + 1) cap *= 2;
        char *t = realloc(g->text, cap);
        if (t) {
            g->text = t;
            g->cap = cap;
        } else if (!g->err_status) {
            g->err_status = 500;
            snprintf(g->errmsg, sizeof g->errmsg, "out of memory");
        }
    }
    if (len && g->len + len + 1 <= g->cap) {
        memcpy(g->text + g->len, text, len);
        g->len += len;
        g->text[g->len] = 0;
    }
    if (done) {
        g->n_gen += q->n_gen;
        if (q->err_status && !g->err_status) {
            g->err_status = q->err_status;
            snprintf(g->errmsg, sizeof g->errmsg, "%s", q->errmsg);
        }
        if (++g->n_done == g->n_choices) {
            g->finish = q->finish;
            g->done = true;
        }
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Under r->mu: move the slot's held logprobs entries that end within the
 * emitted text (all, with all) to the request; stopped: those that begin
 * after it (a cut stop sequence's tokens) are dropped. */
static void lp_release(srv_slot *sl, bool all, bool stopped) {
    srv_req *r = sl->req;
    size_t k = 0;
    while (k < sl->n_lpend && (all || sl->lpend[k].end <= r->len)) k++;
    size_t keep = k;
    if (stopped)
        for (keep = 0; keep < k && sl->lpend[keep].start < r->len; keep++) {
        }
    if (r->n_lp + keep > r->lp_cap) {
        size_t cap = r->lp_cap ? r->lp_cap : 64;
        while (cap < r->n_lp + keep) cap *= 2;
        srv_lp *p = realloc(r->lp, cap * sizeof *p);
        if (!p) {
            r->err_status = 500;
            snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
            return;
        }
        r->lp = p;
        r->lp_cap = cap;
    }
    for (size_t i = 0; i < keep; i++) {
        r->lp[r->n_lp] = sl->lpend[i];
        if (r->lp[r->n_lp].end > r->len) r->lp[r->n_lp].end = r->len;
        r->n_lp++;
    }
    memmove(sl->lpend, sl->lpend + k, (sl->n_lpend - k) * sizeof *sl->lpend);
    sl->n_lpend -= k;
}

static void req_emit(srv_slot *sl, const char *text, size_t len) {
    srv_req *r = sl->req;
    pthread_mutex_lock(&r->mu);
    if (r->len + len + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + len + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) {
            r->err_status = 500;
            snprintf(r->errmsg, sizeof r->errmsg, "out of memory");
            pthread_mutex_unlock(&r->mu);
            return;
        }
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    r->text[r->len] = 0;
    if (sl->n_lpend) lp_release(sl, false, false);
    group_note(r, text, len, false);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void req_finish(srv_sched *s, srv_req *r, const char *finish, int status, const char *msg) {
    double now = srv_now();
    pthread_mutex_lock(&r->mu);
    if (status && !r->err_status) {
        r->err_status = status;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
    }
    r->finish = finish;
    r->done = true;
    r->t_last = now;
    group_note(r, NULL, 0, true);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (!status) srv_metrics_observe(s->metrics, &s->metrics->e2e, now - r->t_submit);
}

/* --- stop sequences --------------------------------------------------------- */

static bool pend_append(srv_slot *sl, const char *p, size_t n) {
    if (sl->pend_len + n + 1 > sl->pend_cap) {
        size_t cap = sl->pend_cap ? sl->pend_cap : 256;
        while (cap < sl->pend_len + n + 1) cap *= 2;
        char *q = realloc(sl->pend, cap);
        if (!q) return false;
        sl->pend = q;
        sl->pend_cap = cap;
    }
    memcpy(sl->pend + sl->pend_len, p, n);
    sl->pend_len += n;
    sl->pend[sl->pend_len] = 0;
    return true;
}

/* Emit what can no longer be part of a stop sequence; true when a stop
 * sequence was found (the text before it is emitted, the rest dropped). */
static bool pend_flush(srv_slot *sl, bool final) {
    srv_req *r = sl->req;
    /* Nothing held (a token that completed no character): nothing to emit or
     * search, and pend may still be NULL. */
    if (!sl->pend_len) {
        if (final && sl->n_lpend) {
            pthread_mutex_lock(&r->mu);
            lp_release(sl, true, false);
            pthread_mutex_unlock(&r->mu);
        }
        return false;
    }
    size_t cut = sl->pend_len, hold = 0;
    bool stopped = false;
    for (int i = 0; i < r->n_stop; i++) {
        const char *hit = memmem(sl->pend, sl->pend_len, r->stop[i], strlen(r->stop[i]));
        if (hit && (size_t)(hit - sl->pend) < cut) {
            cut = (size_t)(hit - sl->pend);
            stopped = true;
        }
    }
    if (!stopped && !final) {
        /* Keep the longest tail that is a proper prefix of some stop. */
        for (int i = 0; i < r->n_stop; i++) {
            size_t sl_len = strlen(r->stop[i]);
            for (size_t k = sl_len - 1; k > hold; k--)
                if (k <= sl->pend_len && !memcmp(sl->pend + sl->pend_len - k, r->stop[i], k)) {
                    hold = k;
                    break;
                }
        }
        cut = sl->pend_len - hold;
    }
    if (cut) req_emit(sl, sl->pend, cut);
    if ((stopped || final) && sl->n_lpend) { /* before req_finish marks the request done */
        pthread_mutex_lock(&r->mu);
        lp_release(sl, true, stopped);
        pthread_mutex_unlock(&r->mu);
    }
    if (stopped || final) {
        sl->pend_len = 0;
    } else {
        memmove(sl->pend, sl->pend + cut, hold);
        sl->pend_len = hold;
    }
    return stopped;
}

/* --- slots ------------------------------------------------------------------ */

static void slot_release(srv_sched *s, srv_slot *sl) {
    candle_kv_seq_free(s->pool, &sl->kv);
    sl->n_toks = 0;
    candle_sampler_free(sl->smp);
    sl->smp = NULL;
    if (s->dpool) candle_kv_seq_free(s->dpool, &sl->dkv);
    candle_sampler_free(sl->dsmp);
    sl->dsmp = NULL;
    candle_grammar_state_free(sl->gstate);
    sl->gstate = NULL;
    srv_req_unref(sl->req);
    sl->req = NULL;
    sl->pend_len = 0;
    sl->n_lpend = 0;
    pthread_mutex_lock(&s->mu);
    s->blocks_used -= sl->blocks;
    sl->blocks = 0;
    s->n_active--;
    pthread_mutex_unlock(&s->mu);
}

static void slot_fail(srv_sched *s, srv_slot *sl, const char *what, const char *why) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", what, why);
    fprintf(stderr, "candle serve: %s\n", msg);
    req_finish(s, sl->req, NULL, 500, msg);
    slot_release(s, sl);
}

static srv_slot *free_slot(srv_sched *s) {
    for (int i = 0; i < s->p.n_slots; i++)
        if (!s->slots[i].req) return &s->slots[i];
    return NULL;
}

/* Whether the slot may still take published rows: it has computed none of
 * its own and holds whole blocks only. A request with LoRA adapters never
 * does: the published rows are the base model's keys and values (and its
 * own are not published). */
static bool slot_can_share(const srv_slot *sl) {
    return sl->req->n_lora == 0 && sl->n_prefilled == sl->req->n_cached &&
           sl->kv.pos == sl->kv.n_blocks * SRV_BLOCK;
}

/* The published blocks that continue the slot's prompt are shared instead
 * of computed; with rows, then the rows of a partly filled one are copied
 * (after which the slot takes no more). */
static void slot_share(srv_sched *s, srv_slot *sl, bool rows) {
    srv_req *r = sl->req;
    if (!slot_can_share(sl)) return;
    int64_t before = sl->kv.pos;
    int64_t keep = candle_kv_seq_share_prefix(s->pool, &sl->kv, r->prompt, r->n_prompt);
    if (rows) keep = candle_kv_seq_share_rows(s->pool, &sl->kv, r->prompt, r->n_prompt);
    if (keep == before) return;
    sl->n_toks = sl->n_prefilled = r->n_cached = keep;
    pthread_mutex_lock(&s->metrics->mu);
    s->metrics->cached_tokens += (uint64_t)(keep - before);
    pthread_mutex_unlock(&s->metrics->mu);
}

static void slot_start(srv_sched *s, srv_slot *sl, srv_req *r) {
    sl->req = r;
    if (candle_kv_seq_init(&sl->kv, s->p.n_ctx)) {
        req_finish(s, r, NULL, 500, "out of memory");
        slot_release(s, sl);
        return;
    }
    sl->n_toks = sl->n_prefilled = r->n_cached = 0;
    memset(&sl->dt, 0, sizeof sl->dt);
    sl->pend_len = 0;
    sl->n_lpend = 0;
    sl->gen_off = 0;
    if (candle_sampler_init(&sl->smp, (int32_t)s->n_vocab, &r->sp) ||
        candle_sampler_set_logit_bias(sl->smp, r->bias_tok, r->bias_val, r->n_bias)) {
        req_finish(s, r, NULL, 400, candle_last_errmsg());
        slot_release(s, sl);
        return;
    }
    sl->lazy_len = 0;
    sl->lazy_off = sl->bare = false;
    if (r->grammar &&
        ((!s->gvocab && candle_grammar_vocab_from_tokenizer(&s->gvocab, s->tok)) ||
         (!r->grammar_lazy && candle_grammar_state_init(&sl->gstate, r->grammar)))) {
        req_finish(s, r, NULL, 500, candle_last_errmsg());
        slot_release(s, sl);
        return;
    }
    if (sl->gstate) candle_sampler_set_grammar(sl->smp, sl->gstate, s->gvocab);
    for (int64_t i = 0; i < r->n_prompt; i++) candle_sampler_accept(sl->smp, r->prompt[i]);
    /* A grammar's matcher and logprobs follow the sampled tokens one at a time. */
    sl->spec = sl->ctx && !r->grammar && r->n_logprobs < 0;
    if (sl->spec) memcpy(sl->ctx, r->prompt, (size_t)r->n_prompt * sizeof *sl->ctx);
    sl->n_ctx_toks = r->n_prompt;
    sl->preset = -1;
    sl->step_draft = 0;
    sl->draft_len = s->p.n_draft;
    sl->pause = sl->backoff = 0;
    sl->draft_room = 0;
    sl->costed = sl->spec && r->sp.temp <= 0 && !s->p.draft_no_timing;
    sl->acc = (candle_spec_accept){0};
    sl->k_room = 0;
    sl->k_cost = sl->peek = -1;
    if (sl->spec && s->dpool) {
        /* the request's sampling without penalties (candle_spec's rule):
         * any draft distribution keeps the output's, and penalties would
         * need the draft's history rolled back with every refused draft */
        candle_sampler_params dp = r->sp;
        dp.penalty_last_n = 0;
        /* its own draws: the verification's acceptance draws must not be
         * the numbers the drafts were drawn with */
        dp.seed = r->sp.seed ^ 0x9e3779b97f4a7c15ull;
        if (candle_kv_seq_init(&sl->dkv, s->p.n_ctx) || candle_sampler_init(&sl->dsmp, (int32_t)s->n_vocab, &dp)) {
            req_finish(s, r, NULL, 500, "out of memory");
            slot_release(s, sl);
            return;
        }
        /* the draft model's rows of the prompt's published prefix, as the
         * target's (draft_all publishes them): a repeated prompt is not read
         * again by the draft at the first draft */
        candle_kv_seq_share_prefix(s->dpool, &sl->dkv, r->prompt, r->n_prompt);
        candle_kv_seq_share_rows(s->dpool, &sl->dkv, r->prompt, r->n_prompt);
    }
    pthread_mutex_lock(&s->metrics->mu);
    s->metrics->prompt_tokens += (uint64_t)r->n_prompt;
    pthread_mutex_unlock(&s->metrics->mu);
    slot_share(s, sl, false);
}

/* The slot's next prompt chunk, for this step's batch: at most `room` tokens. */
static void slot_prefill(srv_sched *s, srv_slot *sl, candle_batch_seq *q, int64_t room) {
    srv_req *r = sl->req;
    int64_t n = r->n_prompt - sl->n_prefilled;
    if (n > s->p.prefill_chunk) n = s->p.prefill_chunk;
    if (n > room) n = room;
    /* logits only after the prompt's last token: the output product is skipped for the rest */
    float *logits = sl->n_prefilled + n == r->n_prompt ? sl->logits : NULL;
    *q = (candle_batch_seq){NULL, r->prompt + sl->n_prefilled, n, logits, s->pool, &sl->kv, 0};
    sl->step_n = n;
    sl->step_prefill = true;
}

static void slot_note_token(srv_sched *s, srv_req *r) {
    double now = srv_now();
    pthread_mutex_lock(&r->mu);
    bool first = r->n_gen == 0;
    double prev = r->t_last;
    r->n_gen++;
    r->t_last = now;
    if (first) r->t_first = now;
    pthread_mutex_unlock(&r->mu);
    srv_metrics *m = s->metrics;
    if (first) srv_metrics_observe(m, &m->ttft, now - r->t_submit);
    else srv_metrics_observe(m, &m->itl, now - prev);
    pthread_mutex_lock(&m->mu);
    m->gen_tokens++;
    pthread_mutex_unlock(&m->mu);
}

/* A sampled token's logprobs, held until its text is emitted. */
static bool lp_hold(srv_slot *sl, const candle_token_logprob *tok, const candle_token_logprob *top,
                    int32_t n_top) {
    if (sl->n_lpend == sl->lpend_cap) {
        size_t cap = sl->lpend_cap ? 2 * sl->lpend_cap : 16;
        srv_lp *p = realloc(sl->lpend, cap * sizeof *p);
        if (!p) return false;
        sl->lpend = p;
        sl->lpend_cap = cap;
    }
    srv_lp *e = &sl->lpend[sl->n_lpend++];
    e->tok = *tok;
    e->n_top = n_top;
    memcpy(e->top, top, (size_t)n_top * sizeof *top);
    e->start = sl->gen_off;
    e->end = SIZE_MAX;
    return true;
}

/* len more bytes of generated text: they end every held token whose text
 * was not out yet (a character's first bytes end with its last). */
static void lp_advance(srv_slot *sl, size_t len) {
    if (!len) return;
    sl->gen_off += len;
    for (size_t i = sl->n_lpend; i > 0 && sl->lpend[i - 1].end == SIZE_MAX; i--)
        sl->lpend[i - 1].end = sl->gen_off;
}

static void slot_end(srv_sched *s, srv_slot *sl, const char *finish) {
    size_t len = 0;
    if (!candle_tokenizer_detok_flush(s->tok, &sl->dt, sl->piece, sl->piece_cap, &len) && len &&
        pend_append(sl, sl->piece, len))
        lp_advance(sl, len);
    if (pend_flush(sl, true)) finish = "stop";
    req_finish(s, sl->req, finish, 0, NULL);
    slot_release(s, sl);
}

/* A bare call object's next bytes: true once the object has closed. */
static bool bare_feed(srv_slot *sl, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (sl->bare_esc) sl->bare_esc = false;
        else if (sl->bare_str) sl->bare_esc = c == '\\', sl->bare_str = c != '"';
        else if (c == '"') sl->bare_str = true;
        else if (c == '{' || c == '[') sl->bare_depth++;
        else if ((c == '}' || c == ']') && --sl->bare_depth == 0) return true;
    }
    return false;
}

/* A grammar_lazy request's new text (len bytes): once the reply holds a
 * whole call opening (<tool_call>; Llama 3's <|python_tag|>; a reply that
 * opens with a brace), the calls' grammar takes over from there, the text
 * since the opening fed to its matcher. A Hermes reply that opens with a
 * brace, or with a ```json fence and a brace, is the bare call object some
 * models write (Qwen2.5-Coder): the matcher is fed the opening tag first,
 * and the reply ends with the object (bare_feed), the fence left open. Text the grammar refuses leaves the reply unconstrained.
 * false on memory. */
static bool lazy_grammar(srv_sched *s, srv_slot *sl, const char *text, size_t len) {
    srv_req *r = sl->req;
    bool llama3 = r->tool_fmt == CANDLE_TOOL_LLAMA3;
    const char *open = llama3 ? "<|python_tag|>" : "<tool_call>";
    size_t m = strlen(open), from = sl->lazy_len >= m ? sl->lazy_len - m + 1 : 0, o = SIZE_MAX;
    if (sl->lazy_len + len + 1 > sl->lazy_cap) {
        size_t cap = 2 * (sl->lazy_len + len + 1) + 64;
        char *p = realloc(sl->lazy, cap);
        if (!p) return false;
        sl->lazy = p;
        sl->lazy_cap = cap;
    }
    memcpy(sl->lazy + sl->lazy_len, text, len);
    sl->lazy_len += len;
    size_t i = 0;
    while (i < sl->lazy_len && strchr(" \t\r\n", sl->lazy[i])) i++;
    /* a reply that opens a ```json fence: its object is a bare call too */
    static const char fence[] = "```json";
    size_t fm = sizeof fence - 1, have = sl->lazy_len - i;
    if (!llama3 && have && !memcmp(sl->lazy + i, fence, have < fm ? have : fm)) {
        size_t j = i + fm;
        while (j < sl->lazy_len && strchr(" \t\r\n", sl->lazy[j])) j++;
        if (have <= fm || j == sl->lazy_len) return true; /* not yet known */
        if (sl->lazy[j] == '{') i = j;
    }
    bool bare = i < sl->lazy_len && sl->lazy[i] == '{';
    if (bare) o = i;
    for (size_t k = from; o == SIZE_MAX && k + m <= sl->lazy_len; k++)
        if (!memcmp(sl->lazy + k, open, m)) o = k;
    if (o == SIZE_MAX) return true;
    bare = bare && !llama3;
    if (candle_grammar_state_init(&sl->gstate, r->grammar)) return false;
    if ((bare && !candle_grammar_state_accept_bytes(sl->gstate, "<tool_call>\n", m + 1)) ||
        !candle_grammar_state_accept_bytes(sl->gstate, sl->lazy + o, sl->lazy_len - o)) {
        candle_grammar_state_free(sl->gstate);
        sl->gstate = NULL;
        sl->lazy_off = true;
        return true;
    }
    candle_sampler_set_grammar(sl->smp, sl->gstate, s->gvocab);
    sl->bare = bare;
    sl->bare_depth = 0;
    sl->bare_str = sl->bare_esc = false;
    if (bare) bare_feed(sl, sl->lazy + o, sl->lazy_len - o);
    return true;
}

/* A chosen token, recorded and emitted; false when it ends the request (the
 * slot is then released). ch, top: its logprobs, when the request wants them. */
static bool slot_take(srv_sched *s, srv_slot *sl, int32_t id, const candle_token_logprob *ch,
                      const candle_token_logprob *top, int32_t n_top) {
    srv_req *r = sl->req;
    candle_sampler_accept(sl->smp, id);
    if (sl->spec) sl->ctx[sl->n_ctx_toks++] = id;
    slot_note_token(s, r);
    if (!r->ignore_eos && candle_tokenizer_is_eog(s->tok, id)) {
        slot_end(s, sl, "stop");
        return false;
    }
    size_t len = 0;
    if (candle_tokenizer_detok_push(s->tok, &sl->dt, id, false, sl->piece, sl->piece_cap, &len))
        len = 0;
    if ((r->n_logprobs >= 0 && !lp_hold(sl, ch, top, n_top)) || (len && !pend_append(sl, sl->piece, len))) {
        req_finish(s, r, NULL, 500, "out of memory");
        slot_release(s, sl);
        return false;
    }
    lp_advance(sl, len);
    if (sl->bare && len && bare_feed(sl, sl->piece, len)) { /* the call object is whole */
        slot_end(s, sl, "stop");
        return false;
    }
    if (r->grammar_lazy && !sl->gstate && !sl->lazy_off) {
        /* a control token's text too: Qwen's <tool_call> is one, not printed */
        char special[64];
        size_t n = 0;
        bool ctl = candle_tokenizer_is_added(s->tok, id) &&
                   !candle_tokenizer_token_bytes(s->tok, id, true, special, sizeof special, &n);
        if (!lazy_grammar(s, sl, ctl ? special : sl->piece, ctl ? n : len)) {
            req_finish(s, r, NULL, 500, "out of memory");
            slot_release(s, sl);
            return false;
        }
    }
    if (pend_flush(sl, false)) {
        req_finish(s, r, "stop", 0, NULL);
        slot_release(s, sl);
        return false;
    }
    if (sl->gstate && candle_grammar_state_done(sl->gstate)) { /* the JSON is complete */
        slot_end(s, sl, "stop");
        return false;
    }
    if (r->n_gen >= r->max_tokens || sl->n_toks >= s->p.n_ctx) {
        slot_end(s, sl, "length");
        return false;
    }
    return true;
}

/* The tokens drafted after the slot's last chosen one into ctx (prompt
 * lookup), within the request's tokens and context left; returns how many. */
static int32_t slot_draft(srv_sched *s, srv_slot *sl, int64_t max) {
    sl->k_room = 0;
    sl->k_cost = -1;
    if (!sl->spec || max <= 0) return 0;
    if (!sl->costed && sl->pause > 0) {
        sl->pause--;
        return 0;
    }
    int64_t room = sl->req->max_tokens - sl->req->n_gen - 1, ctx_room = s->p.n_ctx - sl->n_toks - 1;
    if (ctx_room < room) room = ctx_room;
    int64_t cap = sl->costed ? s->p.n_draft : sl->draft_len; /* costed: plan_drafts chooses within n_draft */
    if (room > cap) room = cap;
    if (room > max) room = max;
    if (room <= 0) return 0;
    if (sl->costed) { /* plan_drafts chooses its length with the others' */
        sl->k_room = (int32_t)room;
        return 0;
    }
    if (s->dpool) { /* the draft model drafts for every slot at once (draft_all) */
        sl->draft_room = room;
        return 0;
    }
    return candle_spec_lookup(sl->ctx, sl->n_ctx_toks, s->p.lookup_ngram, (int32_t)room,
                              sl->ctx + sl->n_ctx_toks);
}

/* Sample a token (or take the one the last verification chose); unless that
 * ends the request, queue it, and at most max_draft tokens drafted after it,
 * for the batch. Returns whether q was filled. */
static bool slot_decode(srv_sched *s, srv_slot *sl, candle_batch_seq *q, int64_t max_draft) {
    srv_req *r = sl->req;
    candle_token_logprob ch, top[CANDLE_MAX_TOP_LOGPROBS];
    int32_t n_top = 0, id = sl->preset;
    sl->preset = -1;
    if (id < 0)
        id = r->n_logprobs >= 0
                 ? candle_sampler_sample_logprobs(sl->smp, sl->logits, r->n_logprobs, &ch, top, &n_top)
                 : candle_sampler_sample(sl->smp, sl->logits);
    /* -1: the response format's grammar allows no token */
    if (id < 0 || (sl->gstate && candle_grammar_accept_token(sl->gstate, s->gvocab, id))) {
        req_finish(s, r, NULL, 500, candle_last_errmsg());
        slot_release(s, sl);
        return false;
    }
    if (sl->peek >= 0) { /* the lookup's free acceptance sample */
        candle_spec_accept_add(&sl->acc, 1, id == sl->peek);
        sl->peek = -1;
    }
    if (!slot_take(s, sl, id, &ch, top, n_top)) return false;
    sl->next = id;
    sl->step_draft = slot_draft(s, sl, max_draft);
    const int32_t *toks = sl->spec ? sl->ctx + sl->n_ctx_toks - 1 : &sl->next;
    *q = (candle_batch_seq){NULL, toks, 1 + sl->step_draft, sl->logits, s->pool, &sl->kv,
                            1 + sl->step_draft};
    sl->step_n = 1 + sl->step_draft;
    sl->step_prefill = false;
    return true;
}

/* After the step: the drafted tokens verified in order against the logits
 * of the rows before them (candle_sampler_verify: greedy keeps exactly
 * greedy's tokens, sampling keeps the sampler's distribution), the kept
 * ones emitted, and the cache rolled back over the refused ones. The
 * refused draft's correction becomes the next token; with every draft kept,
 * the last row's logits give it. */
static void slot_verify(srv_sched *s, srv_slot *sl) {
    int32_t nd = sl->step_draft, kept = 0;
    int64_t base = sl->n_toks - nd; /* positions through this step's first token */
    size_t nv = (size_t)s->n_vocab;
    bool alive = true;
    sl->step_draft = 0;
    for (; kept < nd; kept++) {
        int32_t draft = sl->ctx[sl->n_ctx_toks], tok;
        bool ok = false;
        const float *q = sl->dsmp ? sl->q + (size_t)kept * nv : NULL; /* lookup: a point mass */
        tok = candle_sampler_verify(sl->smp, sl->logits + (size_t)kept * nv, draft, q, &ok);
        if (tok < 0) {
            slot_fail(s, sl, "verification", candle_last_errmsg());
            alive = false;
            break;
        }
        if (!ok) {
            sl->preset = tok;
            break;
        }
        sl->n_toks = base + kept; /* the positions before the draft's, as for a sampled token */
        if (!slot_take(s, sl, tok, NULL, NULL, 0)) {
            alive = false;
            kept++;
            break;
        }
    }
    pthread_mutex_lock(&s->metrics->mu);
    s->metrics->spec_drafted += (uint64_t)nd;
    s->metrics->spec_accepted += (uint64_t)kept;
    pthread_mutex_unlock(&s->metrics->mu);
    if (!alive) return;
    sl->n_toks = base + kept;
    sl->kv.pos = sl->n_toks;
    /* the draft model evaluated pending and every draft but the last: it
     * keeps those of them that were kept */
    if (sl->dsmp) sl->dkv.pos = base + (kept < nd - 1 ? kept : nd - 1);
    if (kept == nd) memmove(sl->logits, sl->logits + (size_t)nd * nv, nv * sizeof *sl->logits);
    if (sl->costed) { /* as candle_spec_step's cost-aware schedule */
        candle_spec_accept_add(&sl->acc, kept < nd ? kept + 1 : kept, kept);
        if (sl->k_cost == 0) candle_spec_probe_done(&sl->acc);
        return;
    }
    /* candle_spec's schedule: longer after a draft kept whole, shorter after
     * one refused; a refused one-token draft pauses drafting 1, 2, 4 .. 32
     * steps while none is kept. */
    if (kept == nd) {
        sl->draft_len = sl->draft_len + 2 < s->p.n_draft ? sl->draft_len + 2 : s->p.n_draft;
    } else if (sl->draft_len > 1) {
        sl->draft_len--;
    }
    if (kept > 0) sl->backoff = 0;
    else if (nd == 1) {
        sl->backoff = sl->backoff ? (sl->backoff < 32 ? 2 * sl->backoff : 32) : 1;
        sl->pause = sl->backoff;
    }
}

/* The step's draft lengths of its costed slots (those slot_draft gave
 * room), chosen together: each one's rows lengthen the step for every slot,
 * so the lengths maximise the whole step's expected tokens per second
 * (candle_spec_cost_lengths, with the other slots' rows and tokens fixed).
 * Until the times are fitted, the warm-up's short drafts; a draft model's
 * slot at length 0 probes now and then (candle_spec_probe). Then each one's prompt lookup,
 * or its room for draft_all; a lookup slot at length 0 looks one token up
 * all the same and compares it with its next token (slot_decode). */
static void plan_drafts(srv_sched *s, int nb) {
    int n = 0;
    int64_t rows = 0, rows_fixed = 0;
    double tokens_fixed = 0;
    for (int i = 0; i < nb; i++) {
        srv_slot *sl = s->seq_slot[i];
        int64_t r = s->seqs[i].n + sl->draft_room;
        rows += r;
        if (sl->k_room > 0) {
            s->plan_seq[n] = i;
            s->plan_acc[n] = sl->acc;
            s->plan_max[n++] = sl->k_room;
        } else {
            rows_fixed += r;
            tokens_fixed += 1;
        }
    }
    if (!n) return;
    bool fitted = candle_spec_cost_lengths(&s->spec_times, n, s->plan_acc, s->plan_max, rows_fixed,
                                           tokens_fixed, s->plan_k);
    int64_t left = s->p.batch_size - rows; /* the step's rows stay within batch_size */
    for (int j = 0; j < n; j++) {
        int i = s->plan_seq[j];
        srv_slot *sl = s->seq_slot[i];
        int32_t k = s->plan_max[j], k_try = candle_spec_warmup_length(s->dpool != NULL, s->spec_steps);
        if (!fitted) k = k < k_try ? k : k_try;
        else k = s->plan_k[j] == 0 && s->dpool ? candle_spec_probe(&sl->acc) : s->plan_k[j];
        if (k > left) k = left > 0 ? (int32_t)left : 0;
        left -= k;
        sl->k_cost = fitted ? s->plan_k[j] : -1;
        sl->k_room = 0;
        if (s->dpool) {
            sl->draft_room = k;
            continue;
        }
        int32_t *d = sl->ctx + sl->n_ctx_toks;
        double t0 = srv_now();
        if (k > 0) sl->step_draft = candle_spec_lookup(sl->ctx, sl->n_ctx_toks, s->p.lookup_ngram, k, d);
        else if (candle_spec_lookup(sl->ctx, sl->n_ctx_toks, s->p.lookup_ngram, 1, d) == 1) sl->peek = d[0];
        double t = srv_now() - t0;
        if (sl->step_draft) candle_spec_times_draft(&s->spec_times, sl->step_draft, 1, t, t);
        s->seqs[i].n = s->seqs[i].n_logits = sl->step_n = 1 + sl->step_draft;
    }
    s->spec_steps++;
}

/* --- draft-model drafts ------------------------------------------------------- */

/* softmax(l)[id] at temperature 1: the draft's confidence in its token (as
 * candle_spec's draft_p_min). */
static float top_prob(const float *l, int64_t n, int32_t id) {
    float mx = l[id];
    for (int64_t i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)(l[i] - mx));
    return (float)(exp((double)(l[id] - mx)) / sum);
}

/* The slot's next draft from dlogits into ctx (its distribution into q);
 * false when it drafts no more: at draft_p_min, an end of generation or
 * its room. */
static bool draft_next(srv_sched *s, srv_slot *sl) {
    size_t nv = (size_t)s->n_vocab;
    int32_t n = sl->step_draft;
    int32_t id = candle_sampler_sample_probs(sl->dsmp, sl->dlogits, sl->q + (size_t)n * nv);
    if (id < 0 || (s->p.draft_p_min > 0 && top_prob(sl->dlogits, s->n_vocab, id) < s->p.draft_p_min))
        return false;
    sl->ctx[sl->n_ctx_toks + n] = id;
    sl->step_draft++;
    return sl->step_draft < sl->draft_room && !candle_tokenizer_is_eog(s->tok, id);
}

/* Every decoding slot with draft room gets its draft model's drafts before
 * the step: round 0 evaluates the context the draft holds not yet (the
 * prompt at first, then the tokens kept since) through the pending token,
 * in forwards of at most SRV_STEP_TOKENS rows; each later round evaluates
 * the last draft of each slot still drafting, all in one forward. A
 * failed forward ends the drafting with the drafts made. */
static void draft_all(srv_sched *s, int nb) {
    int n_d = 0;
    for (int i = 0; i < nb; i++) {
        srv_slot *sl = s->seq_slot[i];
        if (sl->draft_room <= 0) continue;
        /* at least the pending token to evaluate: its logits draft */
        if (sl->dkv.pos >= sl->n_ctx_toks) sl->dkv.pos = sl->n_ctx_toks - 1;
        sl->d_span = sl->n_ctx_toks - sl->dkv.pos;
        s->drafting[n_d++] = sl;
    }
    bool left = n_d > 0;
    double t0 = srv_now();
    while (left) { /* round 0 */
        int n = 0;
        int64_t rows = 0;
        left = false;
        for (int k = 0; k < n_d; k++) {
            srv_slot *sl = s->drafting[k];
            int64_t m = sl->n_ctx_toks - sl->dkv.pos;
            if (m <= 0) continue;
            if (m > SRV_STEP_TOKENS - rows) m = SRV_STEP_TOKENS - rows, left = true;
            if (m <= 0) break;
            float *lg = sl->dkv.pos + m == sl->n_ctx_toks ? sl->dlogits : NULL;
            s->dseqs[n++] = (candle_batch_seq){NULL, sl->ctx + sl->dkv.pos, m, lg, s->dpool, &sl->dkv, 0};
            rows += m;
        }
        if (n && candle_batch_eval(s->dbatch, s->dseqs, n)) {
            fprintf(stderr, "candle serve: draft model: %s\n", candle_batch_errmsg(s->dbatch));
            n_d = 0;
            left = false;
        }
    }
    /* the cost model's draft seconds: each round's shared evenly by its slots */
    double t1 = srv_now();
    for (int k = 0; k < n_d; k++) s->drafting[k]->d_first = s->drafting[k]->d_total = (t1 - t0) / n_d;
    for (int k = 0; k < n_d; k++) { /* the prompt's rows for later requests (slot_start) */
        srv_slot *sl = s->drafting[k];
        int64_t n = sl->dkv.pos < sl->req->n_prompt ? sl->dkv.pos : sl->req->n_prompt;
        candle_kv_seq_publish(s->dpool, &sl->dkv, sl->ctx, n);
    }
    int n_left = 0;
    for (int k = 0; k < n_d; k++)
        if (draft_next(s, s->drafting[k])) s->drafting[n_left++] = s->drafting[k];
    while (n_left > 0) { /* rounds 1.. */
        t0 = srv_now();
        for (int k = 0; k < n_left; k++) {
            srv_slot *sl = s->drafting[k];
            s->dseqs[k] = (candle_batch_seq){NULL, sl->ctx + sl->n_ctx_toks + sl->step_draft - 1, 1,
                                             sl->dlogits, s->dpool, &sl->dkv, 0};
        }
        if (candle_batch_eval(s->dbatch, s->dseqs, n_left)) {
            fprintf(stderr, "candle serve: draft model: %s\n", candle_batch_errmsg(s->dbatch));
            break;
        }
        int n = 0;
        double share = (srv_now() - t0) / n_left;
        for (int k = 0; k < n_left; k++) {
            s->drafting[k]->d_total += share;
            if (draft_next(s, s->drafting[k])) s->drafting[n++] = s->drafting[k];
        }
        n_left = n;
    }
    for (int i = 0; i < nb; i++) { /* the drafts into the step's sequences */
        srv_slot *sl = s->seq_slot[i];
        if (sl->costed && sl->draft_room > 0 && sl->step_draft > 0)
            candle_spec_times_draft(&s->spec_times, sl->step_draft, sl->d_span, sl->d_first, sl->d_total);
        sl->draft_room = 0;
        s->seqs[i].n = s->seqs[i].n_logits = sl->step_n = 1 + sl->step_draft;
    }
}

/* --- step cost and the prompt budget ----------------------------------------- */

#define COST_DECAY 0.97
/* a / b before the fit has seen rows of different counts: about SmolLM2-135M's on 2
 * AVX2 threads (a step's fixed cost is that of ~2 rows). */
#define COST_OVERHEAD_ROWS 2.0
#define COST_OVERHEAD_MAX 4.0

/* Fills a and b; false while the fit is undetermined (rows that barely varied)
 * or nonsensical (b <= 0: noise). */
static bool cost_fit(const step_cost *c, double *a, double *b) {
    double var = c->w * c->xx - c->x * c->x; /* w^2 times the variance of x */
    if (c->w < 4 || var < c->w * c->w) return false;
    *b = (c->w * c->xt - c->x * c->t) / var;
    *a = (c->t - *b * c->x) / c->w;
    return *b > 0;
}

/* A step slowed down by something else (a thread descheduled, page faults on
 * the first steps) counts as at most twice the estimate, so a burst of those
 * does not swing the fit while a lasting slowdown still moves it. */
static void cost_add(step_cost *c, double x, double t) {
    double a, b;
    if (cost_fit(c, &a, &b) && t > 2 * (a + b * x)) t = 2 * (a + b * x);
    c->w = COST_DECAY * c->w + 1;
    c->x = COST_DECAY * c->x + x;
    c->t = COST_DECAY * c->t + t;
    c->xx = COST_DECAY * c->xx + x * x;
    c->xt = COST_DECAY * c->xt + x * t;
}

/* A step's fixed cost in rows' worth (a / b). Capped: steps slowed down while
 * their rows stay the same (decodes alone, a busy machine) raise the fitted
 * a, and an overestimate would let prompt rows stretch steps past the bound;
 * an underestimate only slows prompts. */
static double cost_overhead_rows(const step_cost *c) {
    double a, b;
    if (!cost_fit(c, &a, &b)) return COST_OVERHEAD_ROWS;
    double k = a / b;
    return k < 0 ? 0 : k > COST_OVERHEAD_MAX ? COST_OVERHEAD_MAX : k;
}

/* Prompt rows a step of n_dec decode rows may add: (a + b (n_dec + p)) <= stretch
 * (a + b n_dec) gives p <= (stretch - 1) (a / b + n_dec). At least one row, so
 * every prompt progresses, even when the decodes alone fill batch_size. With
 * more prompts waiting (n_pre) than requests decoding, n_pre stands for n_dec:
 * a burst that arrived just after its first request began to decode would
 * otherwise be prefilled a row or two per step while that one request streams. */
static int64_t prefill_budget(const srv_sched *s, int64_t n_dec, int64_t n_pre) {
    int64_t cap = s->p.batch_size - n_dec;
    if (cap < 1) cap = n_dec < SRV_STEP_TOKENS ? 1 : 0;
    if (n_dec == 0 || s->p.itl_stretch <= 0) return cap;
    double n = (double)(n_pre > n_dec ? n_pre : n_dec);
    double p = (s->p.itl_stretch - 1) * (cost_overhead_rows(&s->cost) + n);
    int64_t rows = p < 1 ? 1 : p > (double)cap ? cap : (int64_t)p;
    return rows < cap ? rows : cap;
}

static int by_admission(const void *x, const void *y) {
    const srv_slot *a = *(srv_slot *const *)x, *b = *(srv_slot *const *)y;
    return (a->admitted > b->admitted) - (a->admitted < b->admitted);
}

/* Does an older prompt, still being evaluated, hold rows the slot's prompt
 * begins with beyond its own? Then the slot waits for the steps that compute
 * them and shares them, instead of computing them beside (a burst of requests
 * with one system prompt, or the same prompt, computes it once). older: the
 * prompts admitted before, none of which waits for this one. */
static bool slot_waits(const srv_slot *sl, srv_slot *const *older, int n_older) {
    const srv_req *r = sl->req;
    if (!slot_can_share(sl)) return false;
    for (int j = 0; j < n_older; j++) {
        const srv_req *o = older[j]->req;
        if (o->n_lora) continue; /* publishes nothing */
        int64_t max = r->n_prompt - 1 < o->n_prompt ? r->n_prompt - 1 : o->n_prompt, L = 0;
        while (L < max && r->prompt[L] == o->prompt[L]) L++;
        if (L > sl->n_prefilled && older[j]->n_prefilled < L) return true;
    }
    return false;
}

/* Queue the oldest prompts' next chunks into seqs[nb..]: at most room rows.
 * Each first takes the whole blocks the pool now holds of it; then it waits
 * for an older one, or copies the rows of a partly filled block (which ends
 * its sharing, so not while it could still wait for more) and goes on. */
static int add_prefills(srv_sched *s, int nb, int n_pre, int64_t room, int64_t *rows) {
    qsort(s->prefilling, (size_t)n_pre, sizeof *s->prefilling, by_admission);
    *rows = 0;
    for (int k = 0; k < n_pre && *rows < room; k++) {
        srv_slot *sl = s->prefilling[k];
        slot_share(s, sl, false);
        if (slot_waits(sl, s->prefilling, k)) continue;
        slot_share(s, sl, true);
        slot_prefill(s, sl, &s->seqs[nb], room - *rows);
        *rows += sl->step_n;
        s->seq_slot[nb++] = sl;
    }
    return nb;
}

/* Requests with different LoRA adapter sets cannot share a forward (one
 * graph applies one set): the step's sequences are reordered so that each
 * set's are together, in the order their sets first appear, and each run
 * is one forward. Returns the runs; run g ends at s->group_end[g]. Without
 * adapters (or with one set) it is one run, as before. */
static int group_by_lora(srv_sched *s, int nb) {
    int n_groups = 0;
    for (int i = 0; i < nb;) {
        const srv_req *r = s->seq_slot[i]->req;
        int j = i + 1;
        for (int k = i + 1; k < nb; k++) {
            const srv_req *q = s->seq_slot[k]->req;
            if (!candle_lora_set_equal(q->lora, q->n_lora, r->lora, r->n_lora)) continue;
            candle_batch_seq tq = s->seqs[j];
            srv_slot *ts = s->seq_slot[j];
            s->seqs[j] = s->seqs[k];
            s->seq_slot[j] = s->seq_slot[k];
            s->seqs[k] = tq;
            s->seq_slot[k] = ts;
            j++;
        }
        s->group_end[n_groups++] = j;
        i = j;
    }
    return n_groups;
}

/* Sequence i of the step after its run's forward (alone: that forward
 * failed, so it is evaluated by itself: only a faulty one fails). */
static void step_done(srv_sched *s, int i, bool alone, const candle_lora_use *set, int n_set) {
    srv_slot *sl = s->seq_slot[i];
    const candle_batch_seq *q = &s->seqs[i];
    if (alone && candle_batch_eval_lora(s->batch, q, 1, set, n_set)) {
        slot_fail(s, sl, "evaluation", candle_batch_errmsg(s->batch));
        return;
    }
    sl->n_toks += sl->step_n;
    if (!sl->step_prefill && sl->step_draft) slot_verify(s, sl);
    if (sl->step_prefill) {
        /* published at once: prompts waiting for these rows share them next
         * step (a LoRA request's rows are its adapters': kept to itself) */
        sl->n_prefilled += sl->step_n;
        if (!sl->req->n_lora) candle_kv_seq_publish(s->pool, &sl->kv, sl->req->prompt, sl->n_prefilled);
    }
}

/* One step: every running slot contributes its sampled token, or a chunk
 * of its prompt within the step's budget, and a single batched forward
 * evaluates them all (one per LoRA adapter set among them). Decoding slots
 * go first: they never wait. */
static void step_all(srv_sched *s) {
    double t0 = srv_now();
    int nb = 0, n_pre = 0;
    bool streaming = false; /* some request has had its first token */
    for (int i = 0; i < s->p.n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (!sl->req) continue;
        if (atomic_load(&sl->req->cancelled)) {
            req_finish(s, sl->req, NULL, 499, "client disconnected");
            slot_release(s, sl);
        } else if (sl->n_prefilled < sl->req->n_prompt) {
            s->prefilling[n_pre++] = sl;
        } else {
            streaming |= sl->req->n_gen > 0;
        }
    }
    /* Until some request streams, prompts that are ready hold their first
     * token while others' prompts remain: a burst of arrivals is prefilled at
     * full steps rather than a budget's share of steps beside the first ones. */
    bool hold = !streaming && n_pre > 0;
    int n_ready = 0;
    for (int i = 0; i < s->p.n_slots; i++) {
        const srv_slot *sl = &s->slots[i];
        n_ready += sl->req && sl->n_prefilled >= sl->req->n_prompt && !hold;
    }
    /* decode rows: a token each, and the drafts after it while the step has
     * room for a token of every decoding slot */
    int64_t n_dec = 0, n_prompt = 0;
    for (int i = 0; i < s->p.n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (!sl->req || sl->n_prefilled < sl->req->n_prompt || hold) continue;
        n_ready--;
        if (slot_decode(s, sl, &s->seqs[nb], s->p.batch_size - n_dec - 1 - n_ready)) {
            n_dec += s->seqs[nb].n + sl->draft_room; /* a draft model's room, held for its drafts */
            s->seq_slot[nb++] = sl;
        }
    }
    plan_drafts(s, nb);
    if (s->dpool && nb) draft_all(s, nb);
    n_dec = 0;
    for (int i = 0; i < nb; i++) n_dec += s->seqs[i].n;
    int64_t room = prefill_budget(s, n_dec, n_pre);
    if (n_dec) s->budget = room;
    nb = add_prefills(s, nb, n_pre, room, &n_prompt);
    if (!nb) return;
    int n_groups = group_by_lora(s, nb);
    bool any_alone = false;
    double t_eval = 0; /* the forwards' seconds alone, for the cost model */
    for (int g = 0, i0 = 0; g < n_groups; i0 = s->group_end[g++]) {
        /* the set, copied: a failing slot releases its request */
        candle_lora_use set[SRV_MAX_LORA];
        int n_set = s->seq_slot[i0]->req->n_lora, n = s->group_end[g] - i0;
        memcpy(set, s->seq_slot[i0]->req->lora, sizeof set);
        /* Should the batch fail, each sequence alone: only a faulty one fails. */
        double te = srv_now();
        bool alone = candle_batch_eval_lora(s->batch, s->seqs + i0, n, set, n_set) != CANDLE_OK;
        t_eval += srv_now() - te;
        any_alone |= alone;
        for (int i = i0; i < i0 + n; i++) step_done(s, i, alone, set, n_set);
    }
    double dt = srv_now() - t0;
    /* the cost model fits one forward per step */
    if (!any_alone && n_groups == 1) cost_add(&s->cost, (double)(n_dec + n_prompt), dt);
    /* the draft lengths' model fits the decode steps alone: the rows a
     * verification adds are decode rows, not a prompt chunk's */
    if (s->p.n_draft && !any_alone && n_groups == 1 && !n_prompt)
        candle_spec_times_step(&s->spec_times, n_dec, t_eval);
    srv_metrics_step(s->metrics, n_dec + n_prompt, n_prompt, dt);
    if (s->trace)
        fprintf(s->trace, "%.6f %lld %lld %.6f %.2f\n", t0, (long long)n_dec, (long long)n_prompt,
                dt, cost_overhead_rows(&s->cost));
}

/* --- the loop --------------------------------------------------------------- */

/* Under s->mu: the gauges. */
static void publish(srv_sched *s) {
    srv_metrics *m = s->metrics;
    pthread_mutex_lock(&m->mu);
    m->queue_depth = s->q_len;
    m->active = s->n_active;
    m->blocks_used = candle_kv_pool_n_used(s->pool);
    m->blocks_reserved = s->blocks_used;
    m->blocks_total = s->blocks_total;
    m->prefill_budget = s->budget;
    pthread_mutex_unlock(&m->mu);
}

/* Under s->mu: move queued requests into free slots while blocks last. */
static void admit(srv_sched *s) {
    while (s->q_len > 0) {
        srv_req *r = s->queue[s->q_head];
        if (atomic_load(&r->cancelled)) {
            s->q_head = (s->q_head + 1) % s->p.queue_cap;
            s->q_len--;
            req_finish(s, r, NULL, 499, "client disconnected");
            srv_req_unref(r);
            continue;
        }
        int64_t need = blocks_for(req_positions(s, r));
        if (s->n_active >= s->p.n_slots || s->blocks_used + need > s->blocks_total) break;
        srv_slot *sl = free_slot(s);
        s->q_head = (s->q_head + 1) % s->p.queue_cap;
        s->q_len--;
        s->n_active++;
        s->blocks_used += need;
        sl->blocks = need;
        sl->admitted = s->n_admitted++;
        pthread_mutex_unlock(&s->mu);
        slot_start(s, sl, r);
        pthread_mutex_lock(&s->mu);
    }
    publish(s);
}

static void fail_all(srv_sched *s) {
    while (s->q_len > 0) {
        srv_req *r = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->p.queue_cap;
        s->q_len--;
        req_finish(s, r, NULL, 503, "server shutting down");
        srv_req_unref(r);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->p.n_slots; i++)
        if (s->slots[i].req) {
            req_finish(s, s->slots[i].req, NULL, 503, "server shutting down");
            slot_release(s, &s->slots[i]);
        }
    pthread_mutex_lock(&s->mu);
}

/* Under s->mu, woken from idle by a request: wait while more keep coming
 * (until 1 ms passes without one, SRV_GATHER_S at most), so that requests sent
 * together start together. Otherwise the first one's prompt is evaluated alone
 * (one row when it is cached), it starts to decode, and the others' prompts are
 * then evaluated within the budget beside that one decode, a few rows per step. */
#define SRV_GATHER_S 0.005
static void gather(srv_sched *s) {
    double end = srv_now() + SRV_GATHER_S;
    for (;;) {
        int before = s->q_len;
        double now = srv_now(), until = now + 0.001 < end ? now + 0.001 : end;
        if (now >= end) return;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)((until - now) * 1e9);
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        while (!s->stop && s->q_len == before && !pthread_cond_timedwait(&s->cv, &s->mu, &ts)) {
        }
        if (s->stop || s->q_len == before) return;
    }
}

static void *sched_main(void *arg) {
    srv_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        bool woken = false;
        while (!s->stop && s->n_active == 0 && s->q_len == 0) {
            publish(s);
            pthread_cond_broadcast(&s->idle_cv);
            pthread_cond_wait(&s->cv, &s->mu);
            woken = true;
        }
        if (woken) gather(s);
        if (s->stop) {
            fail_all(s);
            break;
        }
        admit(s);
        pthread_mutex_unlock(&s->mu);
        step_all(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* --- public ----------------------------------------------------------------- */

int srv_sched_submit(srv_sched *s, srv_req *r) {
    int64_t need = blocks_for(req_positions(s, r));
    pthread_mutex_lock(&s->mu);
    int status = 0;
    if (s->draining || s->stop) {
        status = 503;
        snprintf(r->errmsg, sizeof r->errmsg, "server shutting down");
    } else if (need > s->blocks_total) {
        status = 400;
        snprintf(r->errmsg, sizeof r->errmsg,
                 "request needs %lld KV cache blocks (prompt + max_tokens) but the pool "
                 "holds %lld (--kv-mem)",
                 (long long)need, (long long)s->blocks_total);
    } else if (s->q_len >= s->p.queue_cap) {
        status = 429;
        snprintf(r->errmsg, sizeof r->errmsg,
                 "server busy: %d requests already waiting; retry later", s->q_len);
    } else {
        atomic_fetch_add(&r->refs, 1);
        r->t_submit = srv_now();
        s->queue[(s->q_head + s->q_len) % s->p.queue_cap] = r;
        s->q_len++;
        pthread_mutex_lock(&s->metrics->mu);
        s->metrics->queue_depth = s->q_len;
        pthread_mutex_unlock(&s->metrics->mu);
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return status;
}

int64_t srv_sched_n_ctx(const srv_sched *s) {
    return s->p.n_ctx;
}

int srv_sched_n_slots(const srv_sched *s) {
    return s->p.n_slots;
}

void srv_sched_drain(srv_sched *s, double grace) {
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    double end = srv_now() + grace;
    while ((s->n_active > 0 || s->q_len > 0) && srv_now() < end) {
        srv_timedwait_ms(&s->idle_cv, &s->mu, 100);
    }
    pthread_mutex_unlock(&s->mu);
}

static void sched_free(srv_sched *s) {
    for (int i = 0; s->slots && i < s->p.n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        candle_kv_seq_free(s->pool, &sl->kv);
        candle_sampler_free(sl->smp);
        candle_grammar_state_free(sl->gstate);
        free(sl->logits);
        free(sl->ctx);
        free(sl->lazy);
        free(sl->pend);
        free(sl->piece);
        free(sl->lpend);
    }
    for (int i = 0; s->slots && i < s->p.n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (s->dpool) candle_kv_seq_free(s->dpool, &sl->dkv);
        candle_sampler_free(sl->dsmp);
        free(sl->dlogits);
        free(sl->q);
    }
    candle_grammar_vocab_free(s->gvocab);
    candle_batch_free(s->batch);
    candle_kv_pool_free(s->pool);
    candle_batch_free(s->dbatch);
    candle_kv_pool_free(s->dpool);
    free(s->dseqs);
    free(s->drafting);
    free(s->plan_seq);
    free(s->plan_acc);
    free(s->plan_max);
    free(s->plan_k);
    if (s->trace) fclose(s->trace);
    free(s->seqs);
    free(s->seq_slot);
    free(s->group_end);
    free(s->prefilling);
    free(s->slots);
    free(s->queue);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    free(s);
}

void srv_sched_stop(srv_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    sched_free(s);
}

candle_status srv_sched_start(srv_sched **out, const candle_model *m, const candle_tokenizer *tok,
                              const srv_sched_params *p, srv_metrics *metrics) {
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return CANDLE_ERR_OOM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    s->model = m;
    s->tok = tok;
    s->p = *p;
    s->metrics = metrics;
    const candle_model_config *c = candle_model_get_config(m);
    s->n_vocab = c->n_vocab;
    int64_t block_bytes = (int64_t)candle_kv_pool_block_bytes(m, p->kv_type);
    s->blocks_total = (int64_t)p->n_slots * blocks_for(p->n_ctx);
    if (p->kv_mem > 0 && p->kv_mem / block_bytes < s->blocks_total)
        s->blocks_total = p->kv_mem / block_bytes;
    s->slots = calloc((size_t)p->n_slots, sizeof *s->slots);
    s->queue = calloc((size_t)p->queue_cap, sizeof *s->queue);
    s->seqs = calloc((size_t)p->n_slots, sizeof *s->seqs);
    s->seq_slot = calloc((size_t)p->n_slots, sizeof *s->seq_slot);
    s->prefilling = calloc((size_t)p->n_slots, sizeof *s->prefilling);
    s->group_end = calloc((size_t)p->n_slots, sizeof *s->group_end);
    if (s->p.batch_size < 1 || s->p.batch_size > SRV_STEP_TOKENS) s->p.batch_size = SRV_STEP_TOKENS;
    bool spec = s->p.lookup_ngram > 0 || s->p.draft_model;
    if (s->p.lookup_ngram < 0) s->p.lookup_ngram = 0;
    if (!spec) s->p.n_draft = 0;
    else if (s->p.n_draft < 1 || s->p.n_draft > CANDLE_SPEC_MAX_DRAFT) s->p.n_draft = 8;
    candle_status st = s->slots && s->queue && s->seqs && s->seq_slot && s->prefilling && s->group_end
                           ? CANDLE_OK
                           : CANDLE_ERR_OOM;
    if (!st && s->blocks_total < 1) st = CANDLE_ERR_INVALID_ARG; /* serve.c checks first */
    if (!st) st = candle_batch_init(&s->batch, m, p->n_threads);
    if (!st) st = candle_kv_pool_init(&s->pool, m, s->blocks_total, p->kv_type);
    if (!st && spec) {
        s->plan_seq = calloc((size_t)p->n_slots, sizeof *s->plan_seq);
        s->plan_acc = calloc((size_t)p->n_slots, sizeof *s->plan_acc);
        s->plan_max = calloc((size_t)p->n_slots, sizeof *s->plan_max);
        s->plan_k = calloc((size_t)p->n_slots, sizeof *s->plan_k);
        if (!s->plan_seq || !s->plan_acc || !s->plan_max || !s->plan_k) st = CANDLE_ERR_OOM;
    }
    if (!st && p->draft_model) {
        s->dseqs = calloc((size_t)p->n_slots, sizeof *s->dseqs);
        s->drafting = calloc((size_t)p->n_slots, sizeof *s->drafting);
        st = s->dseqs && s->drafting ? CANDLE_OK : CANDLE_ERR_OOM;
        if (!st) st = candle_batch_init(&s->dbatch, p->draft_model, p->n_threads);
        if (!st) st = candle_kv_pool_init(&s->dpool, p->draft_model, s->blocks_total, p->kv_type);
    }
    size_t piece_cap = candle_tokenizer_detok_bufsize(tok);
    for (int i = 0; !st && i < p->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        size_t rows = spec ? 1 + (size_t)s->p.n_draft : 1;
        sl->logits = malloc(rows * (size_t)s->n_vocab * sizeof *sl->logits);
        sl->piece = malloc(piece_cap);
        sl->piece_cap = piece_cap;
        if (spec && !(sl->ctx = malloc(((size_t)s->p.n_ctx + CANDLE_SPEC_MAX_DRAFT + 1) * sizeof *sl->ctx)))
            st = CANDLE_ERR_OOM;
        if (s->dpool && (!(sl->dlogits = malloc((size_t)s->n_vocab * sizeof *sl->dlogits)) ||
                         !(sl->q = malloc((size_t)s->p.n_draft * (size_t)s->n_vocab * sizeof *sl->q))))
            st = CANDLE_ERR_OOM;
        if (!sl->logits || !sl->piece) st = CANDLE_ERR_OOM;
    }
    /* For tuning --itl-stretch: start time, decode rows, prompt rows, seconds and
     * the fitted fixed cost in rows of every step. */
    const char *trace = getenv("CANDLE_SERVE_STEPS");
    if (!st && trace && *trace && !(s->trace = open_dump(trace)))
        fprintf(stderr, "candle serve: CANDLE_SERVE_STEPS: cannot write %s\n", trace);
    if (!st && pthread_create(&s->thread, NULL, sched_main, s)) st = CANDLE_ERR_OOM;
    if (st) {
        sched_free(s);
        return st;
    }
    *out = s;
    return CANDLE_OK;
}
