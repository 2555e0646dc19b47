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

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    srv_hist *secs[] = {&m->ttft, &m->itl, &m->e2e, &m->step_time};
    for (size_t i = 0; i < sizeof secs / sizeof *secs; i++) secs[i]->le = seconds_le;
    m->step_rows.le = m->step_prefill_rows.le = rows_le;
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

static void render_hist(sbuf *b, const char *name, const char *help, const srv_hist *h) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < SRV_HIST_N; i++)
        sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i],
                  (unsigned long long)h->bucket[i]);
    sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
              (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
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
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
