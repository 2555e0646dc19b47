/* Prometheus counters, gauges and histograms for `candle serve`. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Status codes the server answers with; the last slot counts any other. */
static const int srv_codes[SRV_N_CODES] = {200, 400, 401, 404, 405, 413, 429, 500, 503, 0};
static const char *const ep_names[SRV_EP_COUNT] = {"completions", "chat_completions", "embeddings",
                                                   "models", "rerank", "classify", "audio", "other"};
/* Seconds; wide enough for a token on a busy CPU and a long queued prefill. */
static const double seconds_le[SRV_HIST_N] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,  0.5,    1,     2.5,  5,     10,   30};
/* Token rows of a step: at most 256 (SRV_STEP_TOKENS). */
static const double rows_le[SRV_HIST_N] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
/* An encoder batch's tokens, doubling up to four times the default
 * --max-batch-tokens (SRV_MAX_BATCH_TOKENS): a budget of any size shows
 * how full its batches are, and an input over a small budget (it runs
 * alone) still lands in a bucket. */
static const double enc_tokens_le[SRV_HIST_N] = {8,   16,   32,   64,   128,   256,   512,
                                                 1024, 2048, 4096, 8192, 16384, 32768, 65536};
/* An encoder batch's inputs or requests: a request takes up to 2048 inputs
 * (SRV_MAX_INPUTS) and a batch of short inputs holds several such. */
static const double enc_count_le[SRV_HIST_N] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
static const char *const enc_kind_names[SRV_ENC_KINDS] = {"embed", "classify", "rerank"};

/* Every histogram of m, in one order (for summing and zeroing): the six
 * of requests and scheduler steps, and five per encoder kind. */
#define SRV_N_HISTS (6 + 5 * SRV_ENC_KINDS)
static void all_hists(srv_metrics *m, srv_hist *out[SRV_N_HISTS]) {
    int n = 0;
    srv_hist *one[] = {&m->ttft, &m->itl, &m->e2e, &m->step_rows, &m->step_prefill_rows, &m->step_time};
    for (size_t i = 0; i < sizeof one / sizeof *one; i++) out[n++] = one[i];
    for (int k = 0; k < SRV_ENC_KINDS; k++) {
        out[n++] = &m->enc_tokens[k];
        out[n++] = &m->enc_inputs[k];
        out[n++] = &m->enc_requests[k];
        out[n++] = &m->enc_time[k];
        out[n++] = &m->enc_queue[k];
    }
}

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    srv_hist *secs[] = {&m->ttft, &m->itl, &m->e2e, &m->step_time};
    for (size_t i = 0; i < sizeof secs / sizeof *secs; i++) secs[i]->le = seconds_le;
    m->step_rows.le = m->step_prefill_rows.le = rows_le;
    for (int k = 0; k < SRV_ENC_KINDS; k++) {
        m->enc_tokens[k].le = enc_tokens_le;
        m->enc_inputs[k].le = m->enc_requests[k].le = enc_count_le;
        m->enc_time[k].le = m->enc_queue[k].le = seconds_le;
    }
}

void srv_metrics_request(srv_metrics *m, int endpoint, int status) {
    int i = 0;
    while (i < SRV_N_CODES - 1 && srv_codes[i] != status) i++;
    if (endpoint < 0 || endpoint >= SRV_EP_COUNT) endpoint = SRV_EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint][i]++;
    pthread_mutex_unlock(&m->mu);
}

/* Under m->mu. */
static void hist_add(srv_hist *h, double value) {
    h->sum += value;
    h->count++;
    for (int i = 0; i < SRV_HIST_N; i++)
        if (value <= h->le[i]) h->bucket[i]++;
}

void srv_metrics_observe(srv_metrics *m, srv_hist *h, double value) {
    pthread_mutex_lock(&m->mu);
    hist_add(h, value);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_step(srv_metrics *m, int64_t rows, int64_t prefill_rows, double seconds) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->step_rows, (double)rows);
    hist_add(&m->step_prefill_rows, (double)prefill_rows);
    hist_add(&m->step_time, seconds);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_enc_batch(srv_metrics *m, srv_enc_kind kind, int64_t tokens, int64_t inputs, int64_t requests,
                           double seconds) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->enc_tokens[kind], (double)tokens);
    hist_add(&m->enc_inputs[kind], (double)inputs);
    hist_add(&m->enc_requests[kind], (double)requests);
    hist_add(&m->enc_time[kind], seconds);
    pthread_mutex_unlock(&m->mu);
}

static void hist_sum(srv_hist *d, const srv_hist *s) {
    d->sum += s->sum;
    d->count += s->count;
    for (int i = 0; i < SRV_HIST_N; i++) d->bucket[i] += s->bucket[i];
}

void srv_metrics_add(srv_metrics *dst, srv_metrics *src, bool gauges) {
    pthread_mutex_lock(&src->mu);
    srv_metrics s = *src;
    pthread_mutex_unlock(&src->mu);
    pthread_mutex_lock(&dst->mu);
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int i = 0; i < SRV_N_CODES; i++) dst->requests[e][i] += s.requests[e][i];
    dst->prompt_tokens += s.prompt_tokens;
    dst->gen_tokens += s.gen_tokens;
    dst->cached_tokens += s.cached_tokens;
    dst->spec_drafted += s.spec_drafted;
    dst->spec_accepted += s.spec_accepted;
    srv_hist *dh[SRV_N_HISTS], *sh[SRV_N_HISTS];
    all_hists(dst, dh);
    all_hists(&s, sh);
    for (int i = 0; i < SRV_N_HISTS; i++) hist_sum(dh[i], sh[i]);
    if (gauges) {
        dst->queue_depth += s.queue_depth;
        dst->active += s.active;
        dst->blocks_used += s.blocks_used;
        dst->blocks_reserved += s.blocks_reserved;
        dst->blocks_total += s.blocks_total;
        dst->prefill_budget += s.prefill_budget;
    }
    pthread_mutex_unlock(&dst->mu);
}

static void hist_reset(srv_hist *h) {
    const double *le = h->le;
    memset(h, 0, sizeof *h);
    h->le = le;
}

void srv_metrics_reset(srv_metrics *m) {
    pthread_mutex_lock(&m->mu);
    memset(m->requests, 0, sizeof m->requests);
    m->prompt_tokens = m->gen_tokens = m->cached_tokens = m->spec_drafted = m->spec_accepted = 0;
    srv_hist *h[SRV_N_HISTS];
    all_hists(m, h);
    for (int i = 0; i < SRV_N_HISTS; i++) hist_reset(h[i]);
    m->queue_depth = m->active = m->blocks_used = m->blocks_reserved = m->blocks_total = m->prefill_budget = 0;
    pthread_mutex_unlock(&m->mu);
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* One histogram metric: h[0..n-1], each labelled kind="kinds[i]" (kinds
 * NULL: one series, unlabelled). */
static void render_hists(sbuf *b, const char *name, const char *help, const srv_hist *h, int n,
                         const char *const *kinds) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int k = 0; k < n; k++) {
        char lb[48] = "", ls[48] = ""; /* the label before le, and alone */
        if (kinds) {
            snprintf(lb, sizeof lb, "kind=\"%s\",", kinds[k]);
            snprintf(ls, sizeof ls, "{kind=\"%s\"}", kinds[k]);
        }
        for (int i = 0; i < SRV_HIST_N; i++)
            sb_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, lb, h[k].le[i], (unsigned long long)h[k].bucket[i]);
        sb_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n%s_sum%s %.6f\n%s_count%s %llu\n", name, lb,
                  (unsigned long long)h[k].count, name, ls, h[k].sum, name, ls, (unsigned long long)h[k].count);
    }
}

static void render_hist(sbuf *b, const char *name, const char *help, const srv_hist *h) {
    render_hists(b, name, help, h, 1, NULL);
}

static void render_gauge(sbuf *b, const char *name, const char *type, const char *help,
                         long long v) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
}

char *srv_metrics_render(srv_metrics *m) {
    sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    srv_metrics s = *m; /* a consistent snapshot, rendered unlocked */
    pthread_mutex_unlock(&m->mu);
    sb_printf(&b, "# HELP candle_requests_total HTTP requests by endpoint and status.\n"
                  "# TYPE candle_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int i = 0; i < SRV_N_CODES; i++) {
            if (!s.requests[e][i]) continue;
            char code[16];
            if (srv_codes[i]) snprintf(code, sizeof code, "%d", srv_codes[i]);
            else snprintf(code, sizeof code, "other");
            sb_printf(&b, "candle_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n",
                      ep_names[e], code, (unsigned long long)s.requests[e][i]);
        }
    render_gauge(&b, "candle_prompt_tokens_total", "counter", "Prompt tokens received.",
                 (long long)s.prompt_tokens);
    render_gauge(&b, "candle_prompt_tokens_cached_total", "counter",
                 "Prompt tokens reused from the prefix cache.", (long long)s.cached_tokens);
    render_gauge(&b, "candle_generated_tokens_total", "counter", "Tokens generated.",
                 (long long)s.gen_tokens);
    render_gauge(&b, "candle_spec_drafted_tokens_total", "counter",
                 "Tokens drafted by speculative decoding (--lookup) and verified.",
                 (long long)s.spec_drafted);
    render_gauge(&b, "candle_spec_accepted_tokens_total", "counter",
                 "Drafted tokens the model kept (acceptance = accepted / drafted).",
                 (long long)s.spec_accepted);
    render_gauge(&b, "candle_queue_depth", "gauge", "Requests waiting for a slot.",
                 (long long)s.queue_depth);
    render_gauge(&b, "candle_active_sequences", "gauge", "Requests being generated.",
                 (long long)s.active);
    render_gauge(&b, "candle_kv_blocks_used", "gauge",
                 "KV cache blocks held by running sequences (shared blocks once).",
                 (long long)s.blocks_used);
    render_gauge(&b, "candle_kv_blocks_reserved", "gauge",
                 "KV cache blocks reserved for the running requests' prompt + max_tokens.",
                 (long long)s.blocks_reserved);
    render_gauge(&b, "candle_kv_blocks_total", "gauge", "KV cache blocks in the pool.",
                 (long long)s.blocks_total);
    render_hist(&b, "candle_time_to_first_token_seconds",
                "Seconds from request arrival to its first generated token.", &s.ttft);
    render_hist(&b, "candle_inter_token_latency_seconds",
                "Seconds between consecutive generated tokens of a request.", &s.itl);
    render_hist(&b, "candle_request_duration_seconds",
                "Seconds from arrival to the last token.", &s.e2e);
    render_gauge(&b, "candle_step_prefill_budget", "gauge",
                 "Prompt rows the last scheduler step could add beside its running decodes "
                 "(--itl-stretch).",
                 (long long)s.prefill_budget);
    render_hist(&b, "candle_step_rows", "Token rows of a scheduler step's batched forward.",
                &s.step_rows);
    render_hist(&b, "candle_step_prefill_rows", "Prompt-chunk rows of a scheduler step.",
                &s.step_prefill_rows);
    render_hist(&b, "candle_step_seconds",
                "Seconds a scheduler step takes: sampling, detokenizing and the forward.",
                &s.step_time);
    render_hists(&b, "candle_encoder_batch_tokens",
                 "Tokens of an encoder batch (embeddings, classify or rerank; --max-batch-tokens).", s.enc_tokens,
                 SRV_ENC_KINDS, enc_kind_names);
    render_hists(&b, "candle_encoder_batch_inputs", "Inputs (texts, or query-document pairs) of an encoder batch.",
                 s.enc_inputs, SRV_ENC_KINDS, enc_kind_names);
    render_hists(&b, "candle_encoder_batch_requests", "Requests an encoder batch took inputs from.",
                 s.enc_requests, SRV_ENC_KINDS, enc_kind_names);
    render_hists(&b, "candle_encoder_queue_seconds",
                 "Seconds an encoder request waits from its queueing to its first batch.", s.enc_queue,
                 SRV_ENC_KINDS, enc_kind_names);
    render_hists(&b, "candle_encoder_batch_seconds", "Seconds of an encoder batch's forward.", s.enc_time,
                 SRV_ENC_KINDS, enc_kind_names);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
