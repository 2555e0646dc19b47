/* Memory plan: before a graph runs, each node's lifetime (definition .. last
 * use in topological order; views and in-place writers extend their source's)
 * is laid out in one backend buffer per context by greedy best fit, and the
 * nodes are bound to refcounted regions of it. The buffer is reused by every
 * later plan and grows only when one needs more, so steady-state decoding
 * asks the system for nothing. After the run, nodes that are not outputs give
 * their regions back and read as not computed: their bytes were reused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"

#define PLAN_ALIGN 64

typedef struct region region;

/* The context holds one reference, each live region another. */
typedef struct plan_buf {
    candle_storage *inner; /* backend memory */
    size_t size;
    int refs;
    struct cdl_ctx_acct *acct;
    region *all, *free_regions; /* region descriptors, recycled */
} plan_buf;

struct region {
    candle_storage base; /* first: released through candle_storage_release */
    plan_buf *buf;
    region *next_all, *next_free;
    size_t off;
    bool live;
};

typedef struct pnode {
    int root; /* index of the node owning the storage it reads, or -1 */
    int last; /* last step that reads it (n: kept past the run) */
    int next; /* next node freed at the same step */
    bool needed; /* some output not yet computed depends on it */
    bool planned, keep;
    size_t off, size;
} pnode;

typedef struct blk {
    size_t off, size;
} blk;

typedef struct freelist {
    blk *b; /* sorted by offset, never adjacent */
    size_t n, top;
} freelist;

static void buf_unref(plan_buf *b) {
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (region *r = b->all, *n; r; r = n) {
        n = r->next_all;
        free(r);
    }
    cdl_ctx_sys_free(b->acct, b->inner, b->size);
    free(b);
}

static void region_release(candle_storage *s) {
    region *r = (region *)s;
    plan_buf *b = r->buf;
    r->live = false;
    r->next_free = b->free_regions;
    b->free_regions = r;
    buf_unref(b);
}

void cdl_memplan_drop_buffer(candle_ctx *ctx) {
    if (ctx->plan_buf) buf_unref(ctx->plan_buf);
    ctx->plan_buf = NULL;
}

void cdl_memplan_free_scratch(candle_ctx *ctx) {
    cdl_plan_scratch *p = &ctx->plan;
    free(p->nodes);
    free(p->map);
    free(p->blocks);
    free(p->pins);
    free(p->bucket);
    memset(p, 0, sizeof *p);
}

size_t candle_ctx_plan_bytes(const candle_ctx *ctx) {
    return ctx && ctx->plan_buf ? ctx->plan_buf->size : 0;
}

void candle_tensor_set_output(candle_tensor *t) {
    if (t) t->output = true;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (!q) return false;
    *p = q;
    *cap = cap2;
    return true;
}

/* ---- node -> index (open addressing; keys are the graph's nodes) ---- */

typedef struct map_ent {
    const candle_tensor *key;
    int val;
} map_ent;

static size_t map_slot(size_t cap, const candle_tensor *t) {
    return (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static int map_get(const map_ent *m, size_t cap, const candle_tensor *t) {
    for (size_t k = map_slot(cap, t); m[k].key; k = (k + 1) & (cap - 1))
        if (m[k].key == t) return m[k].val;
    return -1;
}

static void map_put(map_ent *m, size_t cap, const candle_tensor *t, int v) {
    size_t k = map_slot(cap, t);
    while (m[k].key && m[k].key != t) k = (k + 1) & (cap - 1);
    m[k] = (map_ent){t, v};
}

/* ---- free list over offsets: best fit, else the end ---- */

static void fl_remove(freelist *fl, size_t i) {
    memmove(fl->b + i, fl->b + i + 1, (fl->n - i - 1) * sizeof *fl->b);
    fl->n--;
}

static size_t fl_alloc(freelist *fl, size_t need) {
    size_t best = fl->n;
    for (size_t i = 0; i < fl->n; i++)
        if (fl->b[i].size >= need && (best == fl->n || fl->b[i].size < fl->b[best].size)) best = i;
    if (best < fl->n) {
        size_t off = fl->b[best].off;
        fl->b[best].off += need;
        fl->b[best].size -= need;
        if (!fl->b[best].size) fl_remove(fl, best);
        return off;
    }
    /* a free tail grows into the space above it */
    if (fl->n && fl->b[fl->n - 1].off + fl->b[fl->n - 1].size == fl->top) {
        size_t off = fl->b[fl->n - 1].off;
        fl_remove(fl, fl->n - 1);
        fl->top = off + need;
        return off;
    }
    size_t off = fl->top;
    fl->top += need;
    return off;
}

/* The caller guarantees room for one more block. */
static void fl_free(freelist *fl, size_t off, size_t size) {
    size_t i = 0;
    while (i < fl->n && fl->b[i].off < off) i++;
    bool left = i > 0 && fl->b[i - 1].off + fl->b[i - 1].size == off;
    bool right = i < fl->n && off + size == fl->b[i].off;
    if (left && right) {
        fl->b[i - 1].size += size + fl->b[i].size;
        fl_remove(fl, i);
    } else if (left) {
        fl->b[i - 1].size += size;
    } else if (right) {
        fl->b[i].off = off;
        fl->b[i].size += size;
    } else {
        memmove(fl->b + i + 1, fl->b + i, (fl->n - i) * sizeof *fl->b);
        fl->b[i] = (blk){off, size};
        fl->n++;
    }
}

/* ---- lifetimes ---- */

static candle_tensor *storage_root(candle_tensor *t) {
    while (t->view_src) t = t->view_src;
    return t;
}

static bool wants_plan(const candle_ctx *ctx, const candle_tensor *t) {
    return t->op != CANDLE_OP_NONE && t->op != CANDLE_OP_VIEW && !t->view_src && !t->computed &&
           !t->storage && t->ctx == ctx;
}

static void keep_alive(pnode *pn, const map_ent *map, size_t cap, const candle_tensor *t, int n) {
    int j = map_get(map, cap, t);
    if (j < 0) return;
    pn[j].keep = true;
    if (pn[j].root >= 0) {
        pn[pn[j].root].keep = true;
        pn[pn[j].root].last = n;
    }
}

/* Nodes that only computed outputs depend on are left alone (a graph run
 * again after its outputs: the dropped intermediates stay dropped). */
static void mark_needed(candle_tensor *const *nodes, int n, candle_tensor *const *outs,
                        int n_outs, pnode *pn, const map_ent *map, size_t cap) {
    for (int o = 0; o < n_outs; o++) {
        int j = map_get(map, cap, outs[o]);
        if (j >= 0) pn[j].needed = true;
    }
    for (int i = n - 1; i >= 0; i--) {
        if (!pn[i].needed || nodes[i]->computed) continue;
        for (int s = 0; s < nodes[i]->n_src; s++) {
            int j = nodes[i]->src[s] ? map_get(map, cap, nodes[i]->src[s]) : -1;
            if (j >= 0) pn[j].needed = true;
        }
    }
}

/* Fill pn[] for the graph; false if nothing needs planning. */
static bool lifetimes(candle_ctx *ctx, candle_tensor *const *nodes, int n,
                      candle_tensor *const *outs, int n_outs, const unsigned char *fused,
                      pnode *pn, map_ent *map, size_t cap) {
    bool any = false;
    for (int i = 0; i < n; i++) map_put(map, cap, nodes[i], i);
    for (int i = 0; i < n; i++)
        pn[i] = (pnode){.root = map_get(map, cap, storage_root(nodes[i])), .last = -1, .next = -1};
    mark_needed(nodes, n, outs, n_outs, pn, map, cap);
    for (int i = 0; i < n; i++) {
        candle_tensor *t = nodes[i];
        /* a unary fused into node i + 1 never holds its result */
        pn[i].planned = pn[i].needed && wants_plan(ctx, t) && !(fused && fused[i]);
        if (pn[i].planned) {
            candle_contiguous_strides(t->dtype, t->rank, t->shape, t->stride);
            size_t sz = candle_tensor_nbytes(t);
            pn[i].size = ((sz ? sz : 1) + PLAN_ALIGN - 1) & ~(size_t)(PLAN_ALIGN - 1);
            any = true;
        }
    }
    for (int i = 0; i < n; i++) {
        candle_tensor *t = nodes[i];
        if (!pn[i].needed) continue;
        /* a fused unary's inputs are read by the fused step, which runs
         * with node i + 1 (whose output then never shares their bytes) */
        int at = fused && fused[i] ? i + 1 : i;
        for (int s = 0; s < t->n_src; s++) {
            int j = t->src[s] ? map_get(map, cap, t->src[s]) : -1;
            int r = j >= 0 ? pn[j].root : -1;
            if (r >= 0 && pn[r].last < at) pn[r].last = at;
        }
        if (pn[i].root >= 0 && pn[pn[i].root].last < i) pn[pn[i].root].last = i;
    }
    for (int o = 0; o < n_outs; o++) keep_alive(pn, map, cap, outs[o], n);
    for (int i = 0; i < n; i++)
        if (nodes[i]->output) keep_alive(pn, map, cap, nodes[i], n);
    return any;
}

/* Offsets for the planned nodes around the pinned blocks (regions of the
 * buffer still held from earlier runs); returns the bytes needed. */
static bool assign(cdl_plan_scratch *ps, pnode *pn, int n, const blk *pins, size_t n_pins,
                   size_t *need) {
    int *bucket = ps->bucket;
    size_t max_blocks = (size_t)n + n_pins + 2;
    if (!grow(&ps->blocks, &ps->cap_blocks, max_blocks, sizeof(blk))) return false;
    freelist fl = {ps->blocks, 0, 0};
    for (size_t k = 0; k < n_pins; k++) {
        if (pins[k].off > fl.top) fl_free(&fl, fl.top, pins[k].off - fl.top);
        if (pins[k].off + pins[k].size > fl.top) fl.top = pins[k].off + pins[k].size;
    }
    for (int i = 0; i < n; i++) bucket[i] = -1;
    for (int i = 0; i < n; i++)
        if (pn[i].planned && pn[i].last < n) {
            int at = pn[i].last < i ? i : pn[i].last;
            pn[i].next = bucket[at];
            bucket[at] = i;
        }
    for (int i = 0; i < n; i++) {
        if (pn[i].planned) pn[i].off = fl_alloc(&fl, pn[i].size);
        /* freed after the step: a node never shares bytes with its inputs */
        for (int j = bucket[i]; j >= 0; j = pn[j].next) fl_free(&fl, pn[j].off, pn[j].size);
    }
    *need = fl.top;
    return true;
}

static int cmp_blk(const void *a, const void *b) {
    const blk *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Regions of the current buffer still held (earlier outputs), sorted. */
static bool collect_pins(cdl_plan_scratch *ps, const plan_buf *b, size_t *n_pins) {
    size_t k = 0;
    for (const region *r = b ? b->all : NULL; r; r = r->next_all) {
        if (!r->live) continue;
        if (!grow(&ps->pins, &ps->cap_pins, k + 1, sizeof(blk))) return false;
        ((blk *)ps->pins)[k++] = (blk){r->off, r->base.size};
    }
    if (k > 1) qsort(ps->pins, k, sizeof(blk), cmp_blk);
    *n_pins = k;
    return true;
}

/* A buffer of at least need bytes, growing by half again so that a slowly
 * growing plan (attention over a longer cache) reallocates rarely. */
static candle_status new_buffer(candle_ctx *ctx, size_t need, int n_planned, const char *first) {
    size_t old = ctx->plan_buf ? ctx->plan_buf->size : 0;
    cdl_memplan_drop_buffer(ctx);
    size_t size = old + old / 2 > need ? old + old / 2 : need;
    size_t used = candle_ctx_mem_used(ctx);
    if (ctx->mem_limit && (used > ctx->mem_limit || size > ctx->mem_limit - used)) size = need;
    plan_buf *b = calloc(1, sizeof *b);
    if (!b) return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: memory plan");
    char what[CANDLE_MAX_NAME + 48];
    if (n_planned == 1) snprintf(what, sizeof what, "tensor %s", first);
    else snprintf(what, sizeof what, "memory plan of %d tensors", n_planned);
    candle_status st = cdl_ctx_sys_alloc(ctx, size, what, &b->inner, &b->acct);
    if (st) {
        free(b);
        return st;
    }
    b->size = size;
    b->refs = 1;
    ctx->plan_buf = b;
    return CANDLE_OK;
}

static candle_status bind(candle_ctx *ctx, candle_tensor *t, const pnode *p) {
    plan_buf *b = ctx->plan_buf;
    region *r = b->free_regions;
    if (r) {
        b->free_regions = r->next_free;
    } else {
        r = calloc(1, sizeof *r);
        if (!r) return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: memory plan");
        r->buf = b;
        r->next_all = b->all;
        b->all = r;
    }
    r->base = *b->inner;
    r->base.data = (char *)b->inner->data + p->off;
    r->base.size = p->size;
    r->base.refcount = 1;
    r->base.kind = CANDLE_STORAGE_ARENA;
    r->base.release = region_release;
    r->base.owner = b;
    r->off = p->off;
    r->live = true;
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    t->storage = &r->base;
    t->offset = 0;
    return CANDLE_OK;
}

static const char *node_label(const candle_tensor *t) {
    return t->name[0] ? t->name : candle_op_name((candle_op)t->op);
}

candle_status cdl_memplan_bind(candle_ctx *ctx, candle_tensor *const *nodes, int n,
                                  candle_tensor *const *outs, int n_outs,
                                  const unsigned char *fused) {
    cdl_plan_scratch *ps = &ctx->plan;
    ps->n_nodes = 0;
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    if (!grow(&ps->nodes, &ps->cap_nodes, (size_t)n + 1, sizeof(pnode)) ||
        !grow(&ps->bucket, &ps->cap_bucket, (size_t)n + 1, sizeof(int)) ||
        !grow(&ps->map, &ps->cap_map, cap, sizeof(map_ent)))
        return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: memory plan");
    pnode *pn = ps->nodes;
    memset(ps->map, 0, cap * sizeof(map_ent));
    bool any = lifetimes(ctx, nodes, n, outs, n_outs, fused, pn, ps->map, cap);
    ps->n_nodes = n;
    if (!any) return CANDLE_OK;
    size_t n_pins = 0, need = 0;
    bool ok = collect_pins(ps, ctx->plan_buf, &n_pins) && assign(ps, pn, n, ps->pins, n_pins, &need);
    if (ok && (!ctx->plan_buf || need > ctx->plan_buf->size)) {
        /* a fresh buffer holds no earlier regions: plan it without pins */
        ok = assign(ps, pn, n, NULL, 0, &need);
        int n_planned = 0, first = -1;
        for (int i = 0; ok && i < n; i++)
            if (pn[i].planned && n_planned++ == 0) first = i;
        if (ok) {
            candle_status st = new_buffer(ctx, need, n_planned, node_label(nodes[first]));
            if (st) {
                ps->n_nodes = 0;
                return st;
            }
        }
    }
    if (!ok) {
        ps->n_nodes = 0;
        return cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: memory plan");
    }
    for (int i = 0; i < n; i++)
        if (pn[i].planned) {
            candle_status st = bind(ctx, nodes[i], &pn[i]);
            if (st) return st;
        }
    return CANDLE_OK;
}

bool cdl_memplan_needed(const candle_ctx *ctx, int i) {
    const cdl_plan_scratch *ps = &ctx->plan;
    return i >= ps->n_nodes || ((const pnode *)ps->nodes)[i].needed;
}

/* Nodes whose bytes the plan reused (not outputs, nor read through one)
 * drop their regions and read as not computed, so a later graph that needs
 * them computes them again rather than reading stale bytes. After a failed
 * run the outputs that did not finish go too. */
void cdl_memplan_finish(candle_ctx *ctx, candle_tensor *const *nodes, int n) {
    cdl_plan_scratch *ps = &ctx->plan;
    if (ps->n_nodes != n) return;
    pnode *pn = ps->nodes;
    for (int i = 0; i < n; i++) {
        int r = pn[i].root;
        if (r < 0 || !pn[r].planned) continue;
        candle_tensor *t = nodes[i];
        if (pn[r].keep && nodes[r]->computed) continue;
        candle_storage_release(t->storage);
        t->storage = NULL;
        t->computed = false;
    }
    ps->n_nodes = 0;
}
