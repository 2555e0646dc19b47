/* The gate in front of libmicrohttpd (issue 22, findings 4 and 6).
 *
 * One thread accepts every connection and holds it in an epoll set until its
 * whole header block has arrived (read with MSG_PEEK, so nothing is
 * consumed), then hands the socket to the daemon (MHD_add_connection), whose
 * connection threads therefore only ever serve requests whose headers are
 * complete. A client that dribbles its headers costs a file descriptor and a
 * few bytes here, never a thread: /health and running streams stay served.
 *
 * The gate enforces what the daemon's thread-per-connection mode cannot:
 * - a deadline for the header block (408 after header_timeout seconds);
 * - connections per client address (429 beyond per_ip, counting both those
 *   held here and those the daemon serves);
 * - a bound on the connections held here (503 beyond max_pending) and on
 *   those in the daemon's service (503 beyond max_conns).
 * These counts are the gate's own (the daemon's notifications): the daemon's
 * per-address and total limits are released only when its polling thread
 * cleans a closed connection up, later than the close, so with them a client
 * that reconnects at once would be dropped without a reply. The daemon's
 * limit is kept above max_conns, as a backstop only.
 * And it refuses, in OpenAI's JSON shape, the malformed requests whose
 * answers libmicrohttpd 0.9.75 would write itself as HTML (or, for an invalid
 * Content-Length, with its headers sent twice): a header block over
 * SRV_GATE_HEADER_MAX (431), a request target over SRV_GATE_URI_MAX (414), an
 * HTTP version other than 1.0/1.1 (505), a malformed request line or header
 * line, an invalid or conflicting Content-Length, Transfer-Encoding beside
 * Content-Length, a Transfer-Encoding other than chunked, HTTP/1.1 without
 * one Host (400/501), and chunked bodies altogether (411): their framing is
 * only checked mid-body, by the daemon, in HTML. Every response carries Connection: close (http.c), so
 * the daemon never parses a second request's headers itself. */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

/* A connection held here: waiting for its headers, or (closing) draining
 * what its client still sends after an error reply, so that closing does not
 * reset the connection before the client has read the reply. */
typedef struct pend {
    int fd;
    int ip; /* index in the address table */
    bool closing;
    double deadline;
    struct pend *prev, *next; /* in the list of its kind, oldest first */
} pend;

typedef struct ip_entry {
    int family; /* 0: free */
    unsigned char addr[16];
    int held; /* connections from it: here and in the daemon */
} ip_entry;

typedef struct plist {
    pend *head, *tail;
    int n;
} plist;

struct srv_gate {
    srv_ctx *c;
    struct MHD_Daemon *d;
    srv_gate_params p;
    int lfd, efd, stopfd;
    pthread_t thread;
    bool running;
    bool paused; /* out of descriptors: the listening socket unwatched until resume_at */
    double resume_at;
    plist waiting, closing;
    pthread_mutex_t mu; /* ips: the daemon's threads release theirs */
    ip_entry *ips;
    int n_ips;
    int n_daemon; /* connections the daemon holds (notify: started, not closed) */
    char *buf; /* SRV_GATE_HEADER_MAX peeked bytes */
};

static void plist_add(plist *l, pend *p) {
    p->prev = l->tail;
    p->next = NULL;
    if (l->tail) l->tail->next = p;
    else l->head = p;
    l->tail = p;
    l->n++;
}

static void plist_del(plist *l, pend *p) {
    if (p->prev) p->prev->next = p->next;
    else l->head = p->next;
    if (p->next) p->next->prev = p->prev;
    else l->tail = p->prev;
    l->n--;
}

/* --- client addresses ------------------------------------------------------ */

static int addr_key(const struct sockaddr *sa, unsigned char key[16]) {
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return AF_INET;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return AF_INET6;
    }
    return AF_UNSPEC;
}

/* Under g->mu: the entry of sa, made if absent (-1: table full). A linear
 * scan: the table holds at most the open connections' addresses. */
static int ip_find(srv_gate *g, const struct sockaddr *sa, bool make) {
    unsigned char key[16];
    int fam = addr_key(sa, key), free_i = -1;
    for (int i = 0; i < g->n_ips; i++) {
        if (g->ips[i].family == fam && !memcmp(g->ips[i].addr, key, 16)) return i;
        if (!g->ips[i].family && free_i < 0) free_i = i;
    }
    if (!make || free_i < 0) return -1;
    g->ips[free_i].family = fam;
    memcpy(g->ips[free_i].addr, key, 16);
    g->ips[free_i].held = 0;
    return free_i;
}

static void ip_release(srv_gate *g, int i) {
    if (i < 0) return;
    pthread_mutex_lock(&g->mu);
    if (--g->ips[i].held <= 0) g->ips[i].family = 0;
    pthread_mutex_unlock(&g->mu);
}

/* The daemon's connections keep their address's count until they close. */
void srv_gate_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code) {
    srv_gate *g = cls;
    if (!g) return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        int i = -1;
        pthread_mutex_lock(&g->mu);
        if (ci && ci->client_addr && (i = ip_find(g, ci->client_addr, true)) >= 0) g->ips[i].held++;
        g->n_daemon++;
        pthread_mutex_unlock(&g->mu);
        *socket_context = (void *)(intptr_t)(i + 1);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        ip_release(g, (int)(intptr_t)*socket_context - 1);
        pthread_mutex_lock(&g->mu);
        g->n_daemon--;
        pthread_mutex_unlock(&g->mu);
        *socket_context = NULL;
    }
}

/* --- replies --------------------------------------------------------------- */

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* Best effort, without blocking: a client that does not read gets less. */
static void send_reply(srv_gate *g, int fd, int status, const char *code, const char *msg) {
    char *body = srv_error_json(status, msg, NULL, code);
    char head[256];
    size_t blen = body ? strlen(body) : 0;
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, reason(status), blen);
    struct iovec iov[2] = {{head, (size_t)hn}, {body, blen}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = body ? 2 : 1};
    (void)!sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(body);
    shutdown(fd, SHUT_WR);
    srv_metrics_request(&g->c->metrics, SRV_EP_OTHER, status);
    if (!g->c->cfg.quiet) fprintf(stderr, "candle serve: refused before the request: %d (%s)\n", status, code);
}

static void pend_close(srv_gate *g, pend *p) {
    plist_del(p->closing ? &g->closing : &g->waiting, p);
    epoll_ctl(g->efd, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    ip_release(g, p->ip);
    free(p);
}

/* Reply, then drain the client's bytes for a second before closing. */
static void pend_refuse(srv_gate *g, pend *p, int status, const char *code, const char *msg) {
    send_reply(g, p->fd, status, code, msg);
    plist_del(&g->waiting, p);
    p->closing = true;
    p->deadline = srv_now() + 1.0;
    plist_add(&g->closing, p);
}

static void pend_drain(srv_gate *g, pend *p) {
    for (;;) {
        ssize_t n = recv(p->fd, g->buf, SRV_GATE_HEADER_MAX, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        pend_close(g, p); /* end of stream or error */
        return;
    }
}

/* --- the header block (its parsing: gate_parse.c) --------------------------- */

static void pend_check(srv_gate *g, pend *p) {
    ssize_t n = recv(p->fd, g->buf, SRV_GATE_HEADER_MAX, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) { /* gone before its request */
        pend_close(g, p);
        return;
    }
    size_t hl = srv_gate_header_len(g->buf, (size_t)n);
    char msg[160];
    const char *code = NULL;
    if (!hl) {
        /* An overlong target is told apart from overlong headers once the
         * request line cannot be shorter. */
        const char *lf = memchr(g->buf, '\n', (size_t)n);
        if (!lf && n > SRV_GATE_URI_MAX + 64) {
            snprintf(msg, sizeof msg, "request line over %d bytes", SRV_GATE_URI_MAX + 64);
            pend_refuse(g, p, 414, "uri_too_long", msg);
        } else if (n >= SRV_GATE_HEADER_MAX) {
            snprintf(msg, sizeof msg, "request headers over the limit of %d bytes", SRV_GATE_HEADER_MAX);
            pend_refuse(g, p, 431, "header_too_large", msg);
        }
        return; /* wait for the rest */
    }
    int st = srv_gate_check(g->buf, hl, &code, msg, sizeof msg);
    if (st) {
        pend_refuse(g, p, st, code, msg);
        return;
    }
    pthread_mutex_lock(&g->mu);
    bool full = g->n_daemon >= g->p.max_conns;
    pthread_mutex_unlock(&g->mu);
    if (full) {
        snprintf(msg, sizeof msg, "server busy: %d connections in service (--max-conns); retry later",
                 g->p.max_conns);
        pend_refuse(g, p, 503, "server_busy", msg);
        return;
    }
    /* Hand it on: the daemon owns (and closes) the socket from here, and
     * counts the address again when it starts the connection. */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = p->fd;
    plist_del(&g->waiting, p);
    epoll_ctl(g->efd, EPOLL_CTL_DEL, fd, NULL);
    ip_release(g, p->ip);
    free(p);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl)) {
        close(fd); /* gone already */
        return;
    }
    /* On failure (its connection limit) the daemon has closed the socket. */
    if (MHD_add_connection(g->d, fd, (struct sockaddr *)&ss, sl) != MHD_YES && !g->c->cfg.quiet)
        fprintf(stderr, "candle serve: connection dropped: the daemon serves %d already\n", g->p.max_conns);
}

static void on_accept(srv_gate *g) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                /* The listening socket stays readable: stop watching it for
                 * a while rather than spin (the connections wait in the
                 * backlog). */
                if (!g->paused) fprintf(stderr, "candle serve: out of file descriptors: not accepting for 0.1 s\n");
                epoll_ctl(g->efd, EPOLL_CTL_DEL, g->lfd, NULL);
                g->paused = true;
                g->resume_at = srv_now() + 0.1;
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&g->mu);
        int i = ip_find(g, (struct sockaddr *)&ss, true);
        bool over_ip = i >= 0 && g->p.per_ip > 0 && g->ips[i].held >= g->p.per_ip;
        if (i >= 0 && !over_ip) g->ips[i].held++;
        pthread_mutex_unlock(&g->mu);
        pend *p = NULL;
        if (i < 0 || over_ip || g->waiting.n >= g->p.max_pending || !(p = calloc(1, sizeof *p))) {
            if (i >= 0 && !over_ip) ip_release(g, i);
            char msg[128];
            if (over_ip)
                snprintf(msg, sizeof msg, "too many connections from this address (at most %d)", g->p.per_ip);
            send_reply(g, fd, over_ip ? 429 : 503, over_ip ? "too_many_connections" : "server_busy",
                       over_ip ? msg : "too many connections waiting for their headers; retry later");
            close(fd);
            continue;
        }
        p->fd = fd;
        p->ip = i;
        p->deadline = srv_now() + g->p.header_timeout;
        plist_add(&g->waiting, p);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = p};
        if (epoll_ctl(g->efd, EPOLL_CTL_ADD, fd, &ev)) {
            pend_close(g, p);
            continue;
        }
        pend_check(g, p); /* its bytes may be there already */
    }
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        double now = srv_now(), next = -1;
        if (g->waiting.head) next = g->waiting.head->deadline;
        if (g->closing.head && (next < 0 || g->closing.head->deadline < next)) next = g->closing.head->deadline;
        if (g->paused && (next < 0 || g->resume_at < next)) next = g->resume_at;
        int ms = next < 0 ? -1 : next <= now ? 0 : (int)((next - now) * 1000) + 1;
        int n = epoll_wait(g->efd, evs, 64, ms);
        for (int k = 0; k < n; k++) {
            void *ptr = evs[k].data.ptr;
            if (ptr == &g->lfd) {
                on_accept(g);
            } else if (ptr == &g->stopfd) {
                return NULL;
            } else {
                pend *p = ptr;
                if (p->closing) pend_drain(g, p);
                else pend_check(g, p);
            }
        }
        /* Only a pend's own event frees it, so no later event of the batch
         * names a freed one. The lists are oldest first: expire from their
         * heads. */
        now = srv_now();
        while (g->waiting.head && g->waiting.head->deadline <= now) {
            char msg[128];
            snprintf(msg, sizeof msg, "request headers not complete within %g s", g->p.header_timeout);
            pend_refuse(g, g->waiting.head, 408, "request_timeout", msg);
        }
        while (g->closing.head && g->closing.head->deadline <= now) pend_close(g, g->closing.head);
        if (g->paused && g->resume_at <= now) {
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &g->lfd};
            g->paused = epoll_ctl(g->efd, EPOLL_CTL_ADD, g->lfd, &ev) != 0;
            if (g->paused) g->resume_at = now + 0.1;
        }
    }
}

srv_gate *srv_gate_start(srv_ctx *c, int lfd, const srv_gate_params *p) {
    srv_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->c = c;
    g->p = *p;
    g->lfd = lfd;
    g->n_ips = p->max_pending + p->max_conns + 16;
    g->ips = calloc((size_t)g->n_ips, sizeof *g->ips);
    g->buf = malloc(SRV_GATE_HEADER_MAX);
    g->efd = epoll_create1(EPOLL_CLOEXEC);
    g->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&g->mu, NULL);
    if (!g->ips || !g->buf || g->efd < 0 || g->stopfd < 0) {
        g->lfd = -1; /* the caller's still */
        srv_gate_free(g);
        return NULL;
    }
    return g;
}

candle_status srv_gate_run(srv_gate *g, struct MHD_Daemon *d) {
    g->d = d;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &g->lfd};
    struct epoll_event sv = {.events = EPOLLIN, .data.ptr = &g->stopfd};
    if (epoll_ctl(g->efd, EPOLL_CTL_ADD, g->lfd, &ev) || epoll_ctl(g->efd, EPOLL_CTL_ADD, g->stopfd, &sv) ||
        pthread_create(&g->thread, NULL, gate_main, g))
        return CANDLE_ERR_IO;
    g->running = true;
    return CANDLE_OK;
}

/* Stop accepting: the listening socket is closed, held connections dropped. */
void srv_gate_stop(srv_gate *g) {
    if (!g) return;
    if (g->running) {
        uint64_t one = 1;
        (void)!write(g->stopfd, &one, sizeof one);
        pthread_join(g->thread, NULL);
        g->running = false;
    }
    while (g->waiting.head) pend_close(g, g->waiting.head);
    while (g->closing.head) pend_close(g, g->closing.head);
    if (g->lfd >= 0) close(g->lfd);
    g->lfd = -1;
}

/* After the daemon is stopped (its connections closed, notify called). */
void srv_gate_free(srv_gate *g) {
    if (!g) return;
    srv_gate_stop(g);
    if (g->efd >= 0) close(g->efd);
    if (g->stopfd >= 0) close(g->stopfd);
    pthread_mutex_destroy(&g->mu);
    free(g->ips);
    free(g->buf);
    free(g);
}
