/* Forward workspaces (model-impl.h): a packed forward's context and host
 * buffers, kept between calls on a free list of the model.
 *
 * Each call takes a workspace of its own (the list's head, or a new one),
 * so concurrent callers never share one and the list holds as many as the
 * most calls that ever ran at once: forwards on one list, calls that only
 * tokenize on another (no context, small buffers). The lock is held only to
 * pop or push.
 *
 * Memory stays bounded: a workspace that ends a call holding more than
 * WS_KEEP_BYTES (its host buffers and its context's memory plan) is freed
 * instead of kept, so one huge request costs its memory once, not for the
 * model's life, while requests of ordinary sizes reuse theirs forever. */
#include <pthread.h>
#include <stdlib.h>

#include "candle/graph.h"
#include "model-impl.h"
#include "tokenizer/tokenizer-impl.h"

#define WS_KEEP_BYTES ((size_t)256 << 20)

struct model_ws_pool {
    pthread_mutex_t mu;
    model_ws *free[2]; /* [forward]: idle workspaces */
};

candle_status model_ws_pool_init(candle_model *m) {
    struct model_ws_pool *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->mu, NULL)) {
        free(p);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward workspaces");
    }
    m->ws_pool = p;
    return CANDLE_OK;
}

static void ws_free(model_ws *w) {
    if (!w) return;
    candle_ctx_free(w->ctx);
    tok_scratch_free(w->tok);
    for (int i = 0; i < WS_N_BUFS; i++) free(w->buf[i]);
    free(w);
}

void model_ws_pool_free(candle_model *m) {
    struct model_ws_pool *p = m->ws_pool;
    if (!p) return;
    for (int k = 0; k < 2; k++)
        for (model_ws *w = p->free[k], *n; w; w = n) {
            n = w->next;
            ws_free(w);
        }
    pthread_mutex_destroy(&p->mu);
    free(p);
    m->ws_pool = NULL;
}

model_ws *model_ws_get(const candle_model *m, bool forward) {
    struct model_ws_pool *p = m->ws_pool;
    model_ws *w = NULL;
    if (p) {
        pthread_mutex_lock(&p->mu);
        if ((w = p->free[forward])) p->free[forward] = w->next;
        pthread_mutex_unlock(&p->mu);
    }
    if (w) {
        w->next = NULL;
        return w;
    }
    w = calloc(1, sizeof *w);
    candle_ctx_params cp = candle_ctx_default_params();
    cp.backend = m->backend;
    if (!w || (forward && candle_ctx_init(&w->ctx, &cp))) {
        free(w);
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward workspace");
        return NULL;
    }
    if (forward) w->mark = candle_ctx_get_mark(w->ctx);
    return w;
}

void model_ws_put(const candle_model *m, model_ws *w) {
    if (!w) return;
    size_t held = 0;
    if (w->ctx) {
        candle_ctx_clear_error(w->ctx);
        candle_ctx_reset(w->ctx, w->mark);
        held = candle_ctx_plan_bytes(w->ctx);
    }
    for (int i = 0; i < WS_N_BUFS; i++) held += w->cap[i];
    struct model_ws_pool *p = m->ws_pool;
    if (!p || held > WS_KEEP_BYTES) {
        ws_free(w);
        return;
    }
    pthread_mutex_lock(&p->mu);
    w->next = p->free[w->ctx != NULL];
    p->free[w->ctx != NULL] = w;
    pthread_mutex_unlock(&p->mu);
}

void *model_ws_grow(model_ws *w, int slot, size_t n, size_t keep, const char *what) {
    if (!n) n = 1;
    if (n <= w->cap[slot]) return w->buf[slot];
    size_t cap = w->cap[slot] * 2 > n ? w->cap[slot] * 2 : n;
    void *b = keep ? realloc(w->buf[slot], cap) : malloc(cap);
    if (!b) {
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s", what);
        return NULL;
    }
    if (!keep) free(w->buf[slot]);
    w->buf[slot] = b;
    w->cap[slot] = cap;
    return b;
}

void *model_ws_buf(model_ws *w, int slot, size_t n, const char *what) {
    return model_ws_grow(w, slot, n, 0, what);
}
