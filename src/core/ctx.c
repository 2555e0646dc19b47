/* The context: descriptors, errors, memory accounting, backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx-impl.h"

/* A few freed leaf storages (backend memory and descriptor) are kept for
 * reuse (a step's input embeddings, token ids): steady-state steps then ask
 * the system for nothing. A cached block serves a request of up to its size
 * and at least half of it (the smallest such first), so inputs of lengths
 * near those seen reuse it too; when the cache is full the oldest entry
 * gives way, so sizes no longer asked for do not pin the cache. Kept only
 * while the context lives; cached bytes do not count as used. */
#define ACCT_CACHE 8
#define ACCT_CACHE_MAX_BYTES ((size_t)16 << 20)

/* Freed by whichever goes last: the context or its last storage. */
struct cdl_ctx_acct {
    size_t used;
    int refs;
    int lock;    /* guards the cache; a busy lock means "do not cache" */
    bool closed; /* the context is gone: free, do not cache */
    candle_storage *cache[ACCT_CACHE];
    size_t cache_size[ACCT_CACHE]; /* the backend block's size */
    unsigned next;                 /* the slot a full cache gives up next */
};

static void acct_release(struct cdl_ctx_acct *a) {
    if (__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) == 0) free(a);
}

static bool acct_trylock(struct cdl_ctx_acct *a) {
    return !__atomic_exchange_n(&a->lock, 1, __ATOMIC_ACQUIRE);
}
static void acct_unlock(struct cdl_ctx_acct *a) { __atomic_store_n(&a->lock, 0, __ATOMIC_RELEASE); }

static candle_storage *acct_cache_take(struct cdl_ctx_acct *a, size_t size) {
    if (!acct_trylock(a)) return NULL;
    int best = -1;
    for (int i = 0; i < ACCT_CACHE; i++)
        if (a->cache[i] && a->cache_size[i] >= size && a->cache_size[i] / 2 <= size &&
            (best < 0 || a->cache_size[i] < a->cache_size[best]))
            best = i;
    candle_storage *s = best >= 0 ? a->cache[best] : NULL;
    if (best >= 0) a->cache[best] = NULL;
    acct_unlock(a);
    return s;
}

static void free_ctx_storage(candle_storage *s);

static bool acct_cache_put(struct cdl_ctx_acct *a, candle_storage *s, size_t size) {
    if (size > ACCT_CACHE_MAX_BYTES || !acct_trylock(a)) return false;
    if (a->closed) {
        acct_unlock(a);
        return false;
    }
    int slot = -1;
    for (int i = 0; i < ACCT_CACHE && slot < 0; i++)
        if (!a->cache[i]) slot = i;
    candle_storage *old = NULL;
    if (slot < 0) {
        slot = (int)(a->next++ % ACCT_CACHE);
        old = a->cache[slot];
    }
    a->cache[slot] = s;
    a->cache_size[slot] = size;
    acct_unlock(a);
    if (old) free_ctx_storage(old);
    return true;
}

static void acct_close(struct cdl_ctx_acct *a) {
    while (!acct_trylock(a)) {
    }
    a->closed = true;
    for (int i = 0; i < ACCT_CACHE; i++) {
        if (a->cache[i]) free_ctx_storage(a->cache[i]);
        a->cache[i] = NULL;
    }
    acct_unlock(a);
}

static _Atomic bool g_default_no_plan;

void cdl_ctx_set_default_no_plan(bool on) { g_default_no_plan = on; }

candle_ctx_params candle_ctx_default_params(void) {
    return (candle_ctx_params){.backend = NULL, .eager = false, .mem_limit = 0, .n_threads = 0,
                               .no_plan = g_default_no_plan};
}

candle_status cdl_ctx_init_on(candle_ctx **out, const candle_ctx_params *p, candle_backend *be,
                                 bool owns_backend) {
    *out = NULL;
    candle_ctx *ctx = calloc(1, sizeof *ctx);
    struct cdl_ctx_acct *acct = calloc(1, sizeof *acct);
    if (!ctx || !acct) {
        free(ctx);
        free(acct);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: context");
    }
    acct->refs = 1;
    ctx->acct = acct;
    ctx->eager = p->eager;
    ctx->mem_limit = p->mem_limit;
    ctx->backend = be;
    ctx->owns_backend = owns_backend;
    ctx->no_plan = p->no_plan;
    ctx->no_fuse = p->no_fuse;
    *out = ctx;
    return CANDLE_OK;
}

static candle_tensor *desc_at(candle_ctx *ctx, size_t i) {
    cdl_desc_chunk *c = ctx->first;
    while (i >= CANDLE_CTX_CHUNK) {
        c = c->next;
        i -= CANDLE_CTX_CHUNK;
    }
    return &c->t[i];
}

static void free_graphs_from(candle_ctx *ctx, size_t mark);

void candle_ctx_reset(candle_ctx *ctx, candle_ctx_mark mark) {
    if (!ctx) return;
    free_graphs_from(ctx, mark);
    if (mark >= ctx->n_tensors) return;
    /* Start at the mark's chunk: a step's reset does not walk the weights. */
    size_t i = mark - mark % CANDLE_CTX_CHUNK;
    cdl_desc_chunk *c = ctx->first;
    for (size_t k = 0; k < mark / CANDLE_CTX_CHUNK; k++) c = c->next;
    for (; c && i < ctx->n_tensors; c = c->next) {
        for (size_t j = 0; j < CANDLE_CTX_CHUNK && i < ctx->n_tensors; j++, i++) {
            if (i < mark) continue;
            candle_storage_release(c->t[j].storage);
            c->t[j].storage = NULL;
        }
    }
    ctx->n_tensors = mark;
}

candle_ctx_mark candle_ctx_get_mark(const candle_ctx *ctx) { return ctx->n_tensors; }

void candle_ctx_free(candle_ctx *ctx) {
    if (!ctx) return;
    candle_ctx_reset(ctx, 0);
    cdl_memplan_drop_buffer(ctx);
    cdl_memplan_free_scratch(ctx);
    cdl_graph_free_scratch(ctx);
    free(ctx->graphs);
    acct_close(ctx->acct);
    acct_release(ctx->acct);
    for (cdl_desc_chunk *c = ctx->first, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    if (ctx->owns_backend) ctx->backend->iface->free(ctx->backend);
    if (ctx->fallback) ctx->fallback->iface->free(ctx->fallback);
    free(ctx);
}

candle_tensor *cdl_tensor_alloc_desc(candle_ctx *ctx) {
    if (ctx->n_tensors == ctx->n_chunks * CANDLE_CTX_CHUNK) {
        cdl_desc_chunk *c = malloc(sizeof *c);
        if (!c) {
            cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: tensor descriptors");
            return NULL;
        }
        c->next = NULL;
        if (ctx->last) ctx->last->next = c;
        else ctx->first = c;
        ctx->last = c;
        ctx->n_chunks++;
    }
    candle_tensor *t = desc_at(ctx, ctx->n_tensors++);
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->device = ctx->backend->device;
    return t;
}

/* Graph bookkeeping: each graph pointer is stored with the tensor count at
 * its creation, so a reset frees the graphs built after the mark. */
int cdl_ctx_track_graph(candle_ctx *ctx, void *g) {
    if (ctx->n_graphs == ctx->cap_graphs) {
        size_t cap = ctx->cap_graphs ? ctx->cap_graphs * 2 : 8;
        cdl_graph_slot *ng = realloc(ctx->graphs, cap * sizeof *ng);
        if (!ng) return -1;
        ctx->graphs = ng;
        ctx->cap_graphs = cap;
    }
    cdl_graph_slot *slots = ctx->graphs;
    slots[ctx->n_graphs++] = (cdl_graph_slot){ctx->n_tensors, g};
    return 0;
}

static void free_graphs_from(candle_ctx *ctx, size_t mark) {
    cdl_graph_slot *slots = ctx->graphs;
    size_t keep = 0;
    for (size_t i = 0; i < ctx->n_graphs; i++) {
        if (slots[i].mark > mark || mark == 0) cdl_graph_free_internal(slots[i].g);
        else slots[keep++] = slots[i];
    }
    ctx->n_graphs = keep;
}

bool candle_ctx_is_eager(const candle_ctx *ctx) { return ctx->eager; }
void candle_ctx_set_eager(candle_ctx *ctx, bool eager) { ctx->eager = eager; }
candle_backend *candle_ctx_backend(candle_ctx *ctx) { return ctx->backend; }
size_t candle_ctx_mem_used(const candle_ctx *ctx) {
    return __atomic_load_n(&ctx->acct->used, __ATOMIC_RELAXED);
}
size_t candle_ctx_mem_peak(const candle_ctx *ctx) { return ctx->mem_peak; }
uint64_t candle_ctx_alloc_count(const candle_ctx *ctx) { return ctx->n_allocs; }

void cdl_ctx_note_free(candle_ctx *ctx, size_t bytes) {
    __atomic_sub_fetch(&ctx->acct->used, bytes, __ATOMIC_RELAXED);
}

candle_status cdl_ctx_sys_alloc(candle_ctx *ctx, size_t size, const char *what,
                                   candle_storage **inner, struct cdl_ctx_acct **acct) {
    size_t used = candle_ctx_mem_used(ctx);
    if (ctx->mem_limit && (used > ctx->mem_limit || size > ctx->mem_limit - used)) {
        char a[32], b[32], d[16];
        return cdl_set_error(ctx, CANDLE_ERR_OOM,
                                "out of memory: requested %s, available %s on %s (%s)",
                                cdl_format_bytes(size, a, sizeof a),
                                cdl_format_bytes(used > ctx->mem_limit ? 0 : ctx->mem_limit - used, b, sizeof b),
                                candle_device_str(ctx->backend->device, d, sizeof d), what);
    }
    if (!*inner) {
        candle_status st = ctx->backend->iface->buffer_alloc(ctx->backend, size, inner);
        if (st != CANDLE_OK) return cdl_ctx_take_last_error(ctx);
        ctx->n_allocs++;
    }
    *acct = ctx->acct;
    __atomic_add_fetch(&ctx->acct->refs, 1, __ATOMIC_RELAXED);
    used = __atomic_add_fetch(&ctx->acct->used, size, __ATOMIC_RELAXED);
    if (used > ctx->mem_peak) ctx->mem_peak = used;
    return CANDLE_OK;
}

void cdl_ctx_sys_free(struct cdl_ctx_acct *acct, candle_storage *inner, size_t size) {
    __atomic_sub_fetch(&acct->used, size, __ATOMIC_RELAXED);
    candle_storage_release(inner);
    acct_release(acct);
}

/* Storage allocated for a context's tensor reports its release back. */
typedef struct ctx_storage {
    candle_storage base;
    candle_storage *inner;
    struct cdl_ctx_acct *acct;
} ctx_storage;

static void free_ctx_storage(candle_storage *s) {
    ctx_storage *cs = (ctx_storage *)s;
    candle_storage_release(cs->inner);
    free(cs);
}

/* Back into the cache (storage and descriptor both) when there is room. */
static void release_ctx_storage(candle_storage *s) {
    ctx_storage *cs = (ctx_storage *)s;
    struct cdl_ctx_acct *acct = cs->acct;
    __atomic_sub_fetch(&acct->used, cs->base.size, __ATOMIC_RELAXED);
    if (!acct_cache_put(acct, s, cs->inner->size)) free_ctx_storage(s);
    acct_release(acct);
}

candle_status cdl_tensor_alloc_storage(candle_ctx *ctx, candle_tensor *t) {
    candle_contiguous_strides(t->dtype, t->rank, t->shape, t->stride);
    size_t size = candle_tensor_nbytes(t);
    if (size == 0) size = 1; /* empty tensors still get a valid pointer */
    char what[CANDLE_MAX_NAME + 16];
    snprintf(what, sizeof what, "tensor %s",
             t->name[0]                 ? t->name
             : t->op == CANDLE_OP_NONE ? "input"
                                        : candle_op_name((candle_op)t->op));
    ctx_storage *cs = (ctx_storage *)acct_cache_take(ctx->acct, size);
    if (!cs) cs = calloc(1, sizeof *cs);
    if (!cs) return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: storage descriptor");
    candle_status st = cdl_ctx_sys_alloc(ctx, size, what, &cs->inner, &cs->acct);
    if (st != CANDLE_OK) {
        if (cs->inner) free_ctx_storage(&cs->base);
        else free(cs);
        return st;
    }
    cs->base = *cs->inner;
    cs->base.size = size;
    cs->base.refcount = 1;
    cs->base.release = release_ctx_storage;
    cs->base.owner = ctx;
    candle_storage_release(t->storage);
    t->storage = &cs->base;
    t->offset = 0;
    return CANDLE_OK;
}
