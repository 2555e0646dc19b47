/* HTTP with libmicrohttpd: one thread per connection, so a handler may block
 * while its request generates and a stream's reader callback may wait for
 * the next token. Connections reach the daemon only through the gate
 * (gate.c), once their headers are complete and valid, so idle or slow
 * clients hold no thread; every response closes its connection, so the
 * daemon never reads a second request's headers itself. Bodies are collected
 * up to --max-body each and --max-body-mem all together, within
 * --body-timeout; the API key is checked before any body is read. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

typedef struct conn_state {
    struct conn_state *next_free; /* in the pool (cs_take) */
    char *body;
    size_t len, cap; /* cap: the bytes this request's body may take (its reservation) */
    size_t buf_cap;  /* body's allocation, kept across requests (cs_take) */
    size_t reserved; /* bytes of c->body_mem this request holds */
    double body_end; /* the body's deadline (srv_now) */
    /* the access log's line, printed when the response is done */
    char method[16], path[128];
    double t0;
    int status;     /* 0: no response queued */
    int64_t tokens; /* -1: not a generation */
    srv_req *stream; /* a streamed request's (a reference): its tokens at the end */
    bool audio_upload; /* holds one of the audio uploads' places (srv_audio_admit) */
} conn_state;

typedef struct stream_state {
    srv_ctx *c;
    srv_reply rp;
    size_t sent; /* bytes of the request's text already sent */
    bool first, finished;
    int fd; /* the client socket, watched while no token comes */
    char *out; /* SSE bytes not yet handed to MHD */
    size_t out_len, out_pos;
} stream_state;

/* Finished requests' states go back to a pool with their body buffers, so
 * that a request of a size seen before allocates neither; the pool holds as
 * many as the most requests that were ever open at once. A buffer over
 * CS_KEEP_BODY is freed as soon as its request is read (body_release): the
 * memory kept outside --max-body-mem's count stays small. */
#define CS_KEEP_BODY ((size_t)16 << 10)
static pthread_mutex_t cs_mu = PTHREAD_MUTEX_INITIALIZER;
static conn_state *cs_pool;

static conn_state *cs_take(void) {
    pthread_mutex_lock(&cs_mu);
    conn_state *cs = cs_pool;
    if (cs) cs_pool = cs->next_free;
    pthread_mutex_unlock(&cs_mu);
    if (!cs) return calloc(1, sizeof *cs);
    char *body = cs->body;
    size_t buf_cap = cs->buf_cap;
    memset(cs, 0, sizeof *cs);
    cs->body = body;
    cs->buf_cap = buf_cap;
    return cs;
}

static void cs_give(conn_state *cs) {
    pthread_mutex_lock(&cs_mu);
    cs->next_free = cs_pool;
    cs_pool = cs;
    pthread_mutex_unlock(&cs_mu);
}

static void cs_pool_free(void) {
    pthread_mutex_lock(&cs_mu);
    for (conn_state *cs = cs_pool, *n; cs; cs = n) {
        n = cs->next_free;
        free(cs->body);
        free(cs);
    }
    cs_pool = NULL;
    pthread_mutex_unlock(&cs_mu);
}

static int endpoint_of(const char *url) {
    if (strstr(url, "/audio/")) return SRV_EP_AUDIO;
    if (strstr(url, "chat/completions")) return SRV_EP_CHAT;
    if (strstr(url, "completions")) return SRV_EP_COMPLETIONS;
    if (strstr(url, "embeddings")) return SRV_EP_EMBEDDINGS;
    if (strstr(url, "models")) return SRV_EP_MODELS;
    if (strstr(url, "rerank")) return SRV_EP_RERANK;
    if (strstr(url, "classify") || !strcmp(url, "/predict")) return SRV_EP_CLASSIFY;
    return SRV_EP_OTHER;
}

static enum MHD_Result send_text(srv_ctx *c, struct MHD_Connection *conn, conn_state *cs,
                                 const char *url, int status, char *body, const char *type) {
    cs->status = status;
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Connection", "close");
    if (status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    /* 499 (client gone) is nginx's, not HTTP's: nobody reads it anyway. */
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)(status == 499 ? 400 : status), resp);
    MHD_destroy_response(resp);
    srv_metrics_request(&c->metrics, endpoint_of(url), status);
    return ok;
}

static enum MHD_Result send_error(srv_ctx *c, struct MHD_Connection *conn, conn_state *cs,
                                  const char *url, int status, const char *msg, const char *code) {
    return send_text(c, conn, cs, url, status, srv_error_json(status, msg, NULL, code),
                     "application/json");
}

/* Compared in time independent of where the strings differ. */
static bool key_matches(const char *got, const char *want) {
    size_t n = strlen(want), m = got ? strlen(got) : 0;
    unsigned diff = (unsigned)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)((unsigned char)want[i] ^ (unsigned char)(i < m ? got[i] : 0));
    return diff == 0;
}

static bool authorized(srv_ctx *c, struct MHD_Connection *conn) {
    if (!c->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    return key_matches(h + 7, c->cfg.api_key);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    srv_req *r = st->rp.stream;
    for (;;) {
        if (st->out_pos < st->out_len) {
            size_t n = st->out_len - st->out_pos < max ? st->out_len - st->out_pos : max;
            memcpy(buf, st->out + st->out_pos, n);
            st->out_pos += n;
            return (ssize_t)n;
        }
        free(st->out);
        st->out = NULL;
        st->out_len = st->out_pos = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&r->mu);
        while (r->len == st->sent && !r->done) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            /* Queued or prefilling: no write would reveal a client that left. */
            if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) && srv_peer_gone(st->fd)) {
                pthread_mutex_unlock(&r->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        size_t n = r->len - st->sent;
        char *text = malloc(n + 1);
        /* An empty completion (EOS or a stop sequence first) never
         * allocated r->text: copy nothing from it then. */
        if (text && n) memcpy(text, r->text + st->sent, n);
        if (text) text[n] = 0;
        bool done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (!text) return MHD_CONTENT_READER_END_WITH_ERROR;
        st->sent += n;
        /* After done the scheduler no longer writes r: read it unlocked. */
        st->out = srv_stream_chunk(st->c, &st->rp, text, n, st->first, done ? r : NULL);
        free(text);
        if (!st->out) return MHD_CONTENT_READER_END_WITH_ERROR;
        st->out_len = strlen(st->out);
        st->first = false;
        st->finished = done;
    }
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    /* A client that left early: the scheduler frees its slot next step. */
    atomic_store(&st->rp.stream->cancelled, true);
    srv_req_unref(st->rp.stream);
    /* the stream's hold on its model (srv_handle's) */
    srv_model_release(st->c, st->rp.model);
    free(st->out);
    free(st);
}

static int client_fd(struct MHD_Connection *conn);

static enum MHD_Result send_stream(srv_ctx *c, struct MHD_Connection *conn, conn_state *cs,
                                   const char *url, srv_reply *rp) {
    stream_state *st = calloc(1, sizeof *st);
    if (!st) {
        atomic_store(&rp->stream->cancelled, true);
        srv_req_unref(rp->stream);
        srv_model_release(c, rp->model);
        return send_error(c, conn, cs, url, 500, "out of memory", NULL);
    }
    st->c = c;
    st->rp = *rp;
    st->first = true;
    st->fd = client_fd(conn);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "Connection", "close");
    cs->status = 200;
    cs->stream = rp->stream;
    atomic_fetch_add(&rp->stream->refs, 1);
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    srv_metrics_request(&c->metrics, endpoint_of(url), 200);
    return ok;
}

static int client_fd(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* --max-body-mem: request bodies in memory, all together. */
static bool body_reserve(srv_ctx *c, conn_state *cs, size_t n) {
    size_t before = atomic_fetch_add(&c->body_mem, n);
    if (before + n > c->cfg.max_body_mem) {
        atomic_fetch_sub(&c->body_mem, n);
        return false;
    }
    cs->reserved += n;
    return true;
}

/* The body's bytes and reservation; a small buffer stays for the pool. */
static void body_release(srv_ctx *c, conn_state *cs) {
    if (cs->buf_cap > CS_KEEP_BODY) {
        free(cs->body);
        cs->body = NULL;
        cs->buf_cap = 0;
    }
    cs->len = cs->cap = 0;
    atomic_fetch_sub(&c->body_mem, cs->reserved);
    cs->reserved = 0;
}

static enum MHD_Result send_busy(srv_ctx *c, struct MHD_Connection *conn, conn_state *cs, const char *url) {
    char msg[160];
    snprintf(msg, sizeof msg, "server busy: request bodies in memory at the limit of %zu bytes "
             "(--max-body-mem); retry later", c->cfg.max_body_mem);
    return send_error(c, conn, cs, url, 503, msg, "server_busy");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_ctx *c = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        /* First call, headers only: refuse before reading any body. */
        if (!(cs = cs_take())) return MHD_NO;
        *con_cls = cs;
        cs->t0 = srv_now();
        cs->tokens = -1;
        snprintf(cs->method, sizeof cs->method, "%s", method);
        snprintf(cs->path, sizeof cs->path, "%s", url);
        if (strcmp(url, "/health") && !authorized(c, conn))
            return send_error(c, conn, cs, url, 401,
                              "missing or invalid API key (Authorization: Bearer KEY)",
                              "invalid_api_key");
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0; /* digits: the gate checked */
        if (want > srv_body_limit(c, url)) {
            char msg[128];
            snprintf(msg, sizeof msg, "request body over the limit of %zu bytes", srv_body_limit(c, url));
            return send_error(c, conn, cs, url, 413, msg, "body_too_large");
        }
        if (c->audio && srv_is_audio_url(url) && !(cs->audio_upload = srv_audio_admit(c)))
            return send_error(c, conn, cs, url, 429, "too many audio uploads at once", "queue_full");
        /* A known length is reserved whole and allocated once. */
        if (want && !body_reserve(c, cs, (size_t)want + 1)) return send_busy(c, conn, cs, url);
        if (want && cs->buf_cap < cs->reserved) {
            free(cs->body);
            cs->buf_cap = 0;
            if (!(cs->body = malloc(cs->reserved))) return send_error(c, conn, cs, url, 500, "out of memory", NULL);
            cs->buf_cap = cs->reserved;
        }
        cs->cap = cs->reserved;
        /* The whole body within --body-timeout: the daemon's inactivity
         * timeout is cut to what is left at every piece (below). */
        cs->body_end = srv_now() + c->cfg.body_timeout;
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(c->cfg.body_timeout + 1));
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        double left = cs->body_end - srv_now();
        if (left <= 0) return MHD_NO; /* a body dribbled past its deadline: dropped */
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)left + 1);
        /* The gate admits a body only with its Content-Length (chunked ones
         * get 411 there), reserved and allocated whole above: the daemon
         * delivers no more than that. */
        if (cs->len + n + 1 > cs->cap) return MHD_NO;
        memcpy(cs->body + cs->len, upload_data, n);
        cs->len += n;
        return MHD_YES;
    }
    if (!strcmp(url, "/metrics")) {
        if (strcmp(method, "GET")) return send_error(c, conn, cs, url, 405, "/metrics takes GET", NULL);
        return send_text(c, conn, cs, url, 200, srv_models_metrics(c),
                         "text/plain; version=0.0.4");
    }
    /* A request may wait its turn in the queue longer than the idle timeout
     * meant for stalled uploads; the generation itself is bounded. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)3600);
    srv_reply rp;
    if (srv_audio_routes(c, url))
        srv_audio_handle(c, method, url, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
                         cs->len ? cs->body : NULL, cs->len, client_fd(conn), &rp);
    else
        srv_handle(c, method, url, cs->len ? cs->body : NULL, cs->len, client_fd(conn), &rp);
    /* The prompt is tokens now: a stream does not keep its body. */
    body_release(c, cs);
    if (rp.stream) return send_stream(c, conn, cs, url, &rp);
    cs->tokens = rp.tokens;
    return send_text(c, conn, cs, url, rp.status, rp.body,
                     rp.content_type && rp.body ? rp.content_type : "application/json");
}

/* One line per request, as llama-server's log has: method, path, status,
 * generated tokens, duration (--quiet: none; /health probes are left out). */
static void access_log(const srv_ctx *c, conn_state *cs, enum MHD_RequestTerminationCode toe) {
    if (cs->stream) {
        pthread_mutex_lock(&cs->stream->mu);
        cs->tokens = cs->stream->n_gen;
        pthread_mutex_unlock(&cs->stream->mu);
    }
    if (c->cfg.quiet || !cs->status || !strcmp(cs->path, "/health")) return;
    char method[64], path[512], tokens[32] = "";
    if (cs->tokens >= 0) snprintf(tokens, sizeof tokens, " %lld tokens", (long long)cs->tokens);
    fprintf(stderr, "candle serve: %s %s %d%s %.3f s%s\n",
            candle_escape_text(cs->method, sizeof cs->method, method, sizeof method),
            candle_escape_text(cs->path, sizeof cs->path, path, sizeof path), cs->status, tokens,
            srv_now() - cs->t0, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (client gone)");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    conn_state *cs = *con_cls;
    if (cs) {
        access_log(cls, cs, toe);
        if (cs->audio_upload) srv_audio_release(cls);
        srv_req_unref(cs->stream);
        body_release(cls, cs);
        cs_give(cs);
        *con_cls = NULL;
    }
}

/* The listening socket, non-blocking (the gate accepts from it). */
static int listen_on(srv_ctx *c) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", c->cfg.port);
    int e = getaddrinfo(c->cfg.host, port, &hints, &ai);
    if (e) {
        fprintf(stderr, "candle serve: --host %s: %s\n", c->cfg.host, gai_strerror(e));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
                        bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 1024))) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "candle serve: cannot listen on %s:%d: %s\n", c->cfg.host, c->cfg.port, strerror(err));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    c->bound_port = c->cfg.port;
    if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
        c->bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                       : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

struct MHD_Daemon *srv_http_start(srv_ctx *c) {
    int lfd = listen_on(c);
    if (lfd < 0) return NULL;
    srv_gate_params gp = {.header_timeout = c->cfg.header_timeout, .per_ip = c->cfg.per_ip,
                          .max_pending = c->cfg.max_pending, .max_conns = c->cfg.max_conns};
    if (!(c->gate = srv_gate_start(c, lfd, &gp))) {
        close(lfd);
        fprintf(stderr, "candle serve: out of memory\n");
        return NULL;
    }
    /* No listening socket of its own: the gate adds each connection and
     * bounds them, per address and in all (gate.c says why not the daemon's
     * MHD_OPTION_PER_IP_CONNECTION_LIMIT). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, c, MHD_OPTION_NOTIFY_COMPLETED, on_completed, c,
        MHD_OPTION_NOTIFY_CONNECTION, srv_gate_notify, c->gate,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)c->cfg.max_conns + 64,
        /* the gate's header block and a read buffer */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(2 * SRV_GATE_HEADER_MAX + 16384),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!d || srv_gate_run(c->gate, d)) {
        fprintf(stderr, "candle serve: cannot start the HTTP daemon on %s:%d\n", c->cfg.host, c->cfg.port);
        if (d) MHD_stop_daemon(d);
        srv_gate_free(c->gate);
        c->gate = NULL;
        return NULL;
    }
    return d;
}

void srv_http_stop(srv_ctx *c, struct MHD_Daemon *d) {
    srv_gate_stop(c->gate);
    if (d) MHD_stop_daemon(d);
    srv_gate_free(c->gate);
    c->gate = NULL;
    cs_pool_free(); /* every request is done: the daemon has stopped */
}
