/* libFuzzer target for the server's request handling: srv_handle()
 * (tools/server/handlers.c: routing, JSON parsing, option and prompt
 * validation, chat rendering) and the scheduler it submits to
 * (tools/server/scheduler.c: admission, prefill, sampling, stop sequences,
 * cancellation), on the tiny random-weight qwen2 model of tests/data/tiny
 * (path compiled in) with a 96-token context, so that every generation is
 * at most a few dozen tokens. No HTTP: the handler is called directly, and
 * a stream is drained (or abandoned) the way tools/server/http.c does it.
 * An input is
 *   [u8 route][u8 client][body]
 * route: bits 0-2 the URL (table urls[]; the unknown one, with a body that
 * begins with '/', is "/x" and the body's bytes up to a NUL or newline),
 * bits 3-4 the method (POST, POST, GET, DELETE), bits 5-7 the chat template
 * (table chats[]; the last one: none, so chat requests are refused).
 * client: bits 0-2 for a stream, the number of chunks read before the
 * client goes away (0: reads to the end); bit 3: the client's socket is
 * closed before the request (a non-streamed request may then end 499);
 * bit 4: a stream is sent twice, the second before the first is read, so
 * both run at once (the second sharing the first's prompt rows).
 * Beyond "no crash", for every reply:
 * - the status is one the route documents (200, 400, 404, 405; 499 only
 *   for a client that left): never 500, 429 or 503 from one request at a
 *   time on an idle server; /health is "ok", and 503 with an error while
 *   the server shuts down;
 * - the body is well-formed JSON; an error has OpenAI's shape
 *   {"error": {"message": non-empty, "type" (by status), "param", "code"}};
 * - a completion's usage adds up: total = prompt + completion, at least one
 *   token generated, cached < prompt, prompt + completion within the
 *   context, completion = the effective max_tokens when it ends "length"
 *   and at most that when "stop"; a token-id prompt counts its ids; the
 *   text holds none of the stop sequences;
 * - a stream is a sequence of `data: JSON` events (the first chat chunk
 *   with the role), its texts concatenated equal the request's text, the
 *   last chunk has the finish reason, the usage chunk (when asked for)
 *   adds up as above, and [DONE] closes it;
 * - two greedy streams of one request at once give the same text;
 * - nothing leaks (ASan/LSan) once the scheduler is idle again: each input
 *   waits for that, so requests never overlap.
 * Seeds: tests/fuzz/gen_server_corpus.py. Built with -DCANDLE_FUZZ=ON when
 * jansson is installed. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "candle/candle.h"
#include "server.h"
#include "fuzz-check.h"

#define N_CTX 96
#define MODEL_NAME "tiny-qwen2"

static const char *const urls[8] = {"/v1/completions", "/v1/chat/completions", "/completions",
                                    "/chat/completions", "/v1/embeddings", "/v1/models",
                                    "/health", "/v1/nothing"};
static const char *const methods[4] = {"POST", "POST", "GET", "DELETE"};
/* Chat formats by name; the first from a Qwen-style Jinja text (chatml with
 * its literal default system prompt), the last none. */
static const char *const chats[8] = {NULL, "chatml", "llama2", "llama3", "zephyr", "gemma", "phi3",
                                     ""};
static const char qwen_tmpl[] =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
    "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\n"
    "You are Qwen, a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages "
    "%}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static candle_model *model;
static candle_tokenizer *tok;
static srv_sched *sched;
static srv_metrics metrics;
static srv_ctx ctxs[8]; /* one per chats[] entry, sharing model and scheduler */
static bool verbose;    /* FUZZ_VERBOSE=1: each reply, to see the seeds reach a generation */

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = CANDLE_FUZZ_SERVER_MODEL;
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    candle_model_params mp = {.n_threads = 1};
    if (candle_model_load(&model, path, &mp) ||
        candle_tokenizer_from_gguf(&tok, candle_model_gguf(model))) {
        fprintf(stderr, "fuzz_server: %s: %s\n", path, candle_last_errmsg());
        exit(1);
    }
    srv_metrics_init(&metrics);
    srv_sched_params sp = {.n_slots = 2, .n_ctx = N_CTX, .queue_cap = 4, .prefill_chunk = 16,
                           .batch_size = 32, .itl_stretch = 1.5, .n_threads = 1};
    if (srv_sched_start(&sched, model, tok, &sp, &metrics)) {
        fprintf(stderr, "fuzz_server: scheduler: %s\n", candle_last_errmsg());
        exit(1);
    }
    for (int i = 0; i < 8; i++) {
        srv_ctx *c = &ctxs[i];
        c->cfg = (srv_config){.host = "127.0.0.1", .max_body = 1 << 20};
        /* one model, borrowed by every context's registry */
        srv_models_init(c, &(srv_load_params){.parallel = 2});
        srv_model *e = srv_model_adopt(c, MODEL_NAME, SRV_KIND_DECODER);
        check(e);
        e->model = model;
        e->tok = tok;
        e->sched = sched;
        e->max_tokens_limit = N_CTX;
        atomic_init(&c->shutting_down, false);
        atomic_init(&c->next_id, 0);
        if (chats[i] && !*chats[i]) continue;
        e->have_chat = !candle_chat_template_init(&e->chat, chats[i] ? NULL : qwen_tmpl,
                                                  chats[i] ? 0 : strlen(qwen_tmpl), chats[i]);
        check(e->have_chat);
    }
    check(ctxs[0].models[0]->chat.default_system != NULL);
    return 0;
}

/* Until the scheduler has nothing queued or running (it publishes both
 * gauges when it goes idle; a submission raises queue_depth at once). */
static void wait_idle(void) {
    for (long i = 0;; i++) {
        pthread_mutex_lock(&metrics.mu);
        bool idle = metrics.active == 0 && metrics.queue_depth == 0;
        pthread_mutex_unlock(&metrics.mu);
        if (idle) return;
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* OpenAI's error shape, with the type srv_error_json gives the status. */
static void check_error(json_t *j, int status) {
    check(json_is_object(j) && json_object_size(j) == 1);
    json_t *e = json_object_get(j, "error");
    check(json_is_object(e));
    json_t *msg = json_object_get(e, "message"), *type = json_object_get(e, "type");
    json_t *param = json_object_get(e, "param"), *code = json_object_get(e, "code");
    check(json_is_string(msg) && json_string_length(msg) > 0);
    const char *want = status == 401   ? "authentication_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                       : status == 404 ? "not_found_error"
                                       : "invalid_request_error";
    check(json_is_string(type) && !strcmp(json_string_value(type), want));
    check(!param || json_is_string(param) || json_is_null(param));
    check(!code || json_is_string(code) || json_is_null(code));
}

static const char *error_code(json_t *j) {
    json_t *c = json_object_get(json_object_get(j, "error"), "code");
    return json_is_string(c) ? json_string_value(c) : "";
}

/* What the request asked for, read back from its body (which parsed, or it
 * would not have run). */
typedef struct asked {
    json_int_t max_tokens;   /* 0: none */
    json_int_t n_ids;        /* a token-id prompt's length, or -1 */
    json_t *stop;            /* array or string or NULL (borrowed) */
    json_int_t n;            /* choices */
    int n_logprobs;          /* alternatives asked per token, -1: no logprobs */
} asked;

static void read_asked(json_t *o, asked *a) {
    a->max_tokens = 0;
    json_t *m = json_object_get(o, "max_tokens"), *mc = json_object_get(o, "max_completion_tokens");
    if (json_is_integer(m)) a->max_tokens = json_integer_value(m);
    if (json_is_integer(mc)) a->max_tokens = json_integer_value(mc);
    json_t *p = json_object_get(o, "prompt");
    a->n_ids = json_is_array(p) && json_is_integer(json_array_get(p, 0))
                   ? (json_int_t)json_array_size(p)
                   : -1;
    a->stop = json_object_get(o, "stop");
    json_t *n = json_object_get(o, "n"), *lp = json_object_get(o, "logprobs");
    a->n = json_is_integer(n) ? json_integer_value(n) : 1;
    json_t *top = json_object_get(o, "top_logprobs");
    a->n_logprobs = json_is_integer(lp) ? (int)json_integer_value(lp)
                    : json_is_true(lp) ? (json_is_integer(top) ? (int)json_integer_value(top) : 0)
                                       : -1;
}

/* A logprob: a number <= 0 (-9999 for a removed token). */
static void check_lp(json_t *v) {
    check(json_is_number(v) && json_number_value(v) <= 0);
}

/* A choice's logprobs against the request and the choice's text (len bytes);
 * entries at most tokens. */
static void check_logprobs(json_t *lp, bool chat, const asked *a, size_t len, json_int_t tokens) {
    if (a->n_logprobs < 0) {
        check(!lp || json_is_null(lp));
        return;
    }
    size_t i, k;
    json_t *e, *t;
    if (chat) {
        json_t *content = json_object_get(lp, "content");
        check(json_is_array(content) && (json_int_t)json_array_size(content) <= tokens);
        json_array_foreach(content, i, e) {
            check(json_is_string(json_object_get(e, "token")) && json_is_array(json_object_get(e, "bytes")));
            check_lp(json_object_get(e, "logprob"));
            json_t *top = json_object_get(e, "top_logprobs");
            check(json_is_array(top) && json_array_size(top) <= (size_t)a->n_logprobs);
            double prev = 0;
            json_array_foreach(top, k, t) {
                check_lp(json_object_get(t, "logprob"));
                double v = json_number_value(json_object_get(t, "logprob"));
                check(v <= prev); /* best first */
                prev = v;
            }
        }
        return;
    }
    json_t *toks = json_object_get(lp, "tokens"), *lps = json_object_get(lp, "token_logprobs");
    json_t *tops = json_object_get(lp, "top_logprobs"), *offs = json_object_get(lp, "text_offset");
    check(json_is_array(toks) && json_is_array(lps) && json_is_array(tops) && json_is_array(offs));
    size_t n = json_array_size(toks);
    check(json_array_size(lps) == n && json_array_size(tops) == n && json_array_size(offs) == n &&
          (json_int_t)n <= tokens);
    json_int_t prev = 0;
    for (i = 0; i < n; i++) {
        check(json_is_string(json_array_get(toks, i)));
        check_lp(json_array_get(lps, i));
        check(json_is_object(json_array_get(tops, i)) &&
              json_object_size(json_array_get(tops, i)) <= (size_t)a->n_logprobs);
        json_t *o = json_array_get(offs, i);
        check(json_is_integer(o) && json_integer_value(o) >= prev && (size_t)json_integer_value(o) <= len);
        prev = json_integer_value(o);
    }
}

/* The usage object against the request and its text. */
static void check_usage(json_t *u, const asked *a, const char *finish) {
    check(json_is_object(u));
    json_t *pt = json_object_get(u, "prompt_tokens"), *ct = json_object_get(u, "completion_tokens");
    json_t *tt = json_object_get(u, "total_tokens");
    json_t *cached = json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    check(json_is_integer(pt) && json_is_integer(ct) && json_is_integer(tt) &&
          json_is_integer(cached));
    json_int_t p = json_integer_value(pt), n = json_integer_value(ct), k = json_integer_value(cached);
    check(json_integer_value(tt) == p + n);
    check(p >= 1 && p < N_CTX && n >= a->n && n <= (N_CTX - p) * a->n); /* n choices: their tokens summed */
    check(k >= 0 && k < p);
    if (a->n_ids >= 0) check(p == a->n_ids);
    json_int_t eff = !a->max_tokens || p + a->max_tokens > N_CTX ? N_CTX - p : a->max_tokens;
    check(n <= eff * a->n);
    check(finish && (!strcmp(finish, "stop") || !strcmp(finish, "length")));
    if (!strcmp(finish, "length") && a->n == 1) check(n == eff);
}

static void check_no_stop(const char *text, size_t len, json_t *stop) {
    size_t i;
    json_t *s;
    if (json_is_string(stop)) {
        check(!memmem(text, len, json_string_value(stop), json_string_length(stop)));
    } else if (json_is_array(stop)) {
        json_array_foreach(stop, i, s) if (json_is_string(s))
            check(!memmem(text, len, json_string_value(s), json_string_length(s)));
    }
}

static void check_completion(json_t *j, bool chat, const srv_reply *rp, const asked *a) {
    check(json_is_object(j));
    json_t *id = json_object_get(j, "id"), *obj = json_object_get(j, "object");
    check(json_is_string(id) && !strcmp(json_string_value(id), rp->id));
    check(json_is_string(obj) &&
          !strcmp(json_string_value(obj), chat ? "chat.completion" : "text_completion"));
    json_t *model_name = json_object_get(j, "model");
    check(json_is_string(model_name) && !strcmp(json_string_value(model_name), MODEL_NAME));
    json_t *choices = json_object_get(j, "choices");
    check(json_is_array(choices) && (json_int_t)json_array_size(choices) == a->n);
    json_t *u = json_object_get(j, "usage");
    json_int_t tokens = json_integer_value(json_object_get(u, "completion_tokens"));
    for (size_t i = 0; i < json_array_size(choices); i++) {
        json_t *c = json_array_get(choices, i), *text;
        check(json_integer_value(json_object_get(c, "index")) == (json_int_t)i);
        if (chat) {
            json_t *msg = json_object_get(c, "message");
            check(json_is_string(json_object_get(msg, "role")) &&
                  !strcmp(json_string_value(json_object_get(msg, "role")), "assistant"));
            text = json_object_get(msg, "content");
        } else {
            text = json_object_get(c, "text");
        }
        check(json_is_string(text));
        json_t *fin = json_object_get(c, "finish_reason");
        check(json_is_string(fin));
        check_usage(u, a, json_string_value(fin));
        check_no_stop(json_string_value(text), json_string_length(text), a->stop);
        check_logprobs(json_object_get(c, "logprobs"), chat, a, json_string_length(text), tokens);
    }
}

/* A growing byte string. */
typedef struct buf {
    char *s;
    size_t n;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    char *p = realloc(b->s, b->n + n + 1);
    check(p);
    memcpy(p + b->n, s, n);
    b->n += n;
    p[b->n] = 0;
    b->s = p;
}

/* One chunk of srv_stream_chunk output: whole events, each a JSON object or
 * [DONE] (after which nothing may come). */
typedef struct stream_seen {
    /* per choice index (n > 1 streams them interleaved) */
    buf text[SRV_MAX_CHOICES];      /* the chunks' texts, concatenated */
    int n_chunks[SRV_MAX_CHOICES];  /* choice-bearing chunks */
    char finish[SRV_MAX_CHOICES][16];
    int n_finished;
    bool done, error, have_usage;
    json_t *usage;      /* the usage chunk's (owned), or NULL */
    asked a;            /* the request's fields */
    size_t n_lp;        /* logprobs entries streamed */
} stream_seen;

static void check_events(const char *sse, const srv_reply *rp, stream_seen *st) {
    const char *p = sse;
    while (*p) {
        check(!st->done);
        check(!strncmp(p, "data: ", 6));
        p += 6;
        const char *end = strstr(p, "\n\n");
        check(end);
        if (end - p == 6 && !strncmp(p, "[DONE]", 6)) {
            st->done = true;
            p = end + 2;
            continue;
        }
        json_error_t err;
        json_t *j = json_loadb(p, (size_t)(end - p), JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
        if (!j) fprintf(stderr, "bad event JSON: %s: %.*s\n", err.text, (int)(end - p), p);
        check(j && json_is_object(j));
        check(st->n_finished < st->a.n || json_object_get(j, "usage") || json_object_get(j, "error"));
        if (json_object_get(j, "error")) {
            check_error(j, 500); /* the type only matters for the shape here */
            st->error = true;
        } else {
            json_t *id = json_object_get(j, "id"), *obj = json_object_get(j, "object");
            check(json_is_string(id) && !strcmp(json_string_value(id), rp->id));
            check(json_is_string(obj) &&
                  !strcmp(json_string_value(obj),
                          rp->chat ? "chat.completion.chunk" : "text_completion"));
            json_t *choices = json_object_get(j, "choices");
            check(json_is_array(choices));
            if (json_object_get(j, "usage")) {
                check(rp->include_usage && !st->usage && json_array_size(choices) == 0);
                check(st->n_finished == st->a.n);
                st->usage = json_incref(json_object_get(j, "usage"));
            } else {
                check(json_array_size(choices) == 1);
                json_t *c = json_array_get(choices, 0), *t;
                json_int_t k = json_integer_value(json_object_get(c, "index"));
                check(json_is_integer(json_object_get(c, "index")) && k >= 0 && k < st->a.n);
                check(!st->finish[k][0]); /* nothing of a choice after its end */
                if (rp->chat) {
                    json_t *d = json_object_get(c, "delta");
                    check(json_is_object(d));
                    json_t *role = json_object_get(d, "role");
                    check(!role == (st->n_chunks[k] > 0)); /* the role in each choice's first chunk only */
                    t = json_object_get(d, "content");
                } else {
                    t = json_object_get(c, "text");
                }
                json_t *fin = json_object_get(c, "finish_reason");
                if (json_is_string(fin)) {
                    snprintf(st->finish[k], sizeof st->finish[k], "%s", json_string_value(fin));
                    st->n_finished++;
                    check(!t || json_string_length(t) == 0);
                } else {
                    check(json_is_null(fin) && json_is_string(t));
                    /* each text chunk carries its own tokens' logprobs */
                    json_t *lp = json_object_get(c, "logprobs");
                    if (json_string_length(t) || !json_is_null(lp)) /* null: a chunk of no token */
                        check_logprobs(lp, rp->chat, &st->a, SIZE_MAX, INT64_MAX);
                    st->n_lp += json_array_size(json_object_get(lp, rp->chat ? "content" : "tokens"));
                }
                if (t) buf_add(&st->text[k], json_string_value(t), json_string_length(t));
                st->n_chunks[k]++;
            }
        }
        json_decref(j);
        p = end + 2;
    }
}

/* As http.c's stream_read: wait for new text or the end, turn it into SSE
 * chunks; after `leave_after` chunks (0: never) the client goes away, as
 * its stream_free does. */
static buf drain_stream(srv_ctx *c, srv_reply *rp, int leave_after, json_t *req) {
    srv_req *r = rp->stream;
    stream_seen st = {0};
    read_asked(req, &st.a);
    size_t sent = 0;
    bool first = true, finished = false;
    for (int k = 0; !finished; k++) {
        if (leave_after && k == leave_after) break;
        pthread_mutex_lock(&r->mu);
        while (r->len == sent && !r->done) pthread_cond_wait(&r->cv, &r->mu);
        size_t n = r->len - sent;
        char *text = malloc(n + 1);
        check(text);
        if (n) memcpy(text, r->text + sent, n);
        bool done = r->done;
        pthread_mutex_unlock(&r->mu);
        sent += n;
        char *sse = srv_stream_chunk(c, rp, text, n, first, done ? r : NULL);
        check(sse);
        /* http.c sends strlen(out) bytes: no NUL inside */
        check_events(sse, rp, &st);
        free(sse);
        free(text);
        first = false;
        finished = done;
    }
    if (finished) {
        check(st.done);
        check(!r->err_status && !st.error); /* one request at a time, nobody left */
        check(st.n_finished == st.a.n && (r->choices ? r->n_choices : 1) == st.a.n);
        check(!rp->include_usage == !st.usage);
        size_t n_lp = 0;
        for (int k = 0; k < st.a.n; k++) { /* each choice's chunks spell its text */
            const srv_req *q = r->choices ? r->choices[k] : r;
            check(st.text[k].n == q->len && (!q->len || !memcmp(st.text[k].s, q->text, q->len)));
            check(!strcmp(st.finish[k], q->finish));
            if (st.usage) check_usage(st.usage, &st.a, st.finish[k]);
            check_no_stop(q->text ? q->text : "", q->len, st.a.stop);
            check(q->n_gen >= 1 && (json_int_t)q->n_lp <= q->n_gen && (st.a.n_logprobs >= 0 || !q->n_lp));
            n_lp += q->n_lp;
        }
        /* every entry streamed once, none for tokens not generated */
        check(st.n_lp == n_lp);
    }
    atomic_store(&r->cancelled, true);
    srv_req_unref(r);
    srv_model_release(c, rp->model); /* as http.c does at a stream's end */
    json_decref(st.usage);
    buf all = {0}; /* the choices' texts one after the other */
    for (int k = 0; k < SRV_MAX_CHOICES; k++) {
        if (finished && k < st.a.n) buf_add(&all, st.text[k].s ? st.text[k].s : "", st.text[k].n);
        free(st.text[k].s);
    }
    return all;
}

/* Greedy: the text does not depend on the sampler's draws. */
static bool greedy(json_t *req) {
    json_t *t = json_object_get(req, "temperature");
    return json_is_number(t) && json_number_value(t) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t route = data[0], client = data[1];
    const char *url = urls[route & 7], *method = methods[(route >> 3) & 3];
    srv_ctx *c = &ctxs[route >> 5];
    const char *body = (const char *)data + 2;
    size_t len = size - 2;
    char url_buf[1100];
    if ((route & 7) == 7 && len && body[0] == '/') {
        /* an unknown endpoint of any bytes (up to a NUL or newline), as
         * libmicrohttpd hands over a percent-decoded URL */
        size_t n = 2;
        memcpy(url_buf, "/x", 2);
        for (size_t i = 1; i < len && n < sizeof url_buf - 1 && body[i] && body[i] != '\n'; i++)
            url_buf[n++] = body[i];
        url_buf[n] = 0;
        url = url_buf;
    }
    int fd = -1, pair[2] = {-1, -1};
    if (client & 8) {
        check(!socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
        close(pair[1]);
        fd = pair[0];
    }

    srv_reply rp;
    srv_handle(c, method, url, body, len, fd, &rp);

    int kind = route & 7; /* 0-3 generation, 4 embeddings, 5 models, 6 health, 7 none */
    bool gen = kind <= 3, chat = kind == 1 || kind == 3, post = !strcmp(method, "POST");
    json_t *req = post ? json_loadb(len ? body : "", len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (verbose)
        fprintf(stderr, "%s %s: %d %.300s\n", method, url, rp.status,
                rp.stream ? "(stream)" : rp.body ? rp.body : "(null)");
    if (rp.stream) {
        check(gen && post && rp.status == 200 && !rp.body && rp.chat == chat);
        if (client & 16) {
            /* The same request again while the first streams: both run at
             * once, the second shares the first's published prompt rows. */
            srv_reply rp2;
            srv_handle(c, method, url, body, len, -1, &rp2);
            check(rp2.stream && rp2.status == 200);
            buf t1 = drain_stream(c, &rp, client & 7, req);
            buf t2 = drain_stream(c, &rp2, 0, req);
            check(t2.s);
            /* a greedy request's text does not depend on who shares its steps */
            if (t1.s && greedy(req)) {
                bool same = t1.n == t2.n && !memcmp(t1.s, t2.s, t1.n);
                if (!same) fprintf(stderr, "greedy texts differ:\n%s\n%s\n", t1.s, t2.s);
                check(same);
            }
            free(t1.s);
            free(t2.s);
        } else {
            free(drain_stream(c, &rp, client & 7, req).s);
        }
    } else {
        check(rp.body);
        json_error_t err;
        json_t *j = json_loads(rp.body, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
        if (!j) fprintf(stderr, "bad reply JSON (%d): %s: %s\n", rp.status, err.text, rp.body);
        check(j);
        if (rp.status != 200) check_error(j, rp.status);
        if (kind == 7) {
            check(rp.status == 404 && !strcmp(error_code(j), "not_found"));
        } else if (kind >= 5) {
            check(rp.status == (strcmp(method, "GET") ? 405 : 200));
            if (kind == 5 && rp.status == 200) {
                json_t *d = json_array_get(json_object_get(j, "data"), 0);
                check(!strcmp(json_string_value(json_object_get(d, "id")), MODEL_NAME));
                check(json_integer_value(json_object_get(json_object_get(d, "meta"), "n_ctx")) ==
                      N_CTX);
            }
            if (kind == 6 && rp.status == 200) {
                check(!strcmp(json_string_value(json_object_get(j, "status")), "ok"));
                /* while shutting down: 503 in OpenAI's error shape */
                srv_reply down;
                atomic_store(&c->shutting_down, true);
                srv_handle(c, method, url, body, len, fd, &down);
                atomic_store(&c->shutting_down, false);
                json_t *dj = down.body ? json_loads(down.body, 0, NULL) : NULL;
                check(down.status == 503 && dj);
                check_error(dj, 503);
                check(!strcmp(error_code(dj), "shutting_down"));
                json_decref(dj);
                free(down.body);
            }
        } else if (!post) {
            check(rp.status == 405 && !strcmp(error_code(j), "method_not_allowed"));
        } else if (!req || !json_is_object(req)) {
            check(rp.status == 400 && !strcmp(error_code(j), "invalid_json"));
        } else if (kind == 4) {
            check(rp.status == 400 && !strcmp(error_code(j), "model_not_supported"));
        } else {
            if (rp.status == 499) check(fd >= 0);
            else check(rp.status == 200 || rp.status == 400);
            if (chat && !c->models[0]->have_chat) check(rp.status == 400);
            if (rp.status == 200) {
                asked a;
                read_asked(req, &a);
                check_completion(j, chat, &rp, &a);
            }
        }
        json_decref(j);
        free(rp.body);
    }
    json_decref(req);
    wait_idle();
    if (fd >= 0) close(fd);
    return 0;
}
