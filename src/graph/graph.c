/* Graph building (topological order) and computation on a backend. */
#include <stdlib.h>
#include <string.h>

#include "graph-impl.h"

struct candle_graph {
    int n_nodes, cap;
    candle_tensor **nodes; /* topological order: inputs before users */
    int n_outs, cap_outs;
    candle_tensor **outs; /* as given to build: kept alive by the memory plan */
    /* fuse_elementwise: fused[i] marks a unary node run inside node i + 1
     * (NULL or all 0: none). Its scratch, cap_fuse entries each: tmp (the
     * candidates' map keys, then the new order), idx (map slot -> node,
     * then reader -> unary + 1) and counts (2 x cap_fuse: readers per
     * candidate, then each candidate's last reader) */
    int cap_fuse;
    bool any_fused;
    unsigned char *fused;
    candle_tensor **tmp;
    int *idx, *counts;
    /* whole_graph: the nodes handed to the backend's graph_compute */
    candle_tensor **run;
    int cap_run;
};

static bool push(candle_graph *g, candle_tensor *t) {
    if (g->n_nodes == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        candle_tensor **n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) return false;
        g->nodes = n;
        g->cap = cap;
    }
    g->nodes[g->n_nodes++] = t;
    return true;
}

/* Iterative DFS post-order; visited marks live in a growable open-addressing
 * set so descriptors stay const during the walk. Inputs may come from other
 * contexts (weights), so neither the set nor the stack can be sized from
 * this context's tensor count. */
typedef struct visit_set {
    size_t cap, n;
    candle_tensor **keys;
} visit_set;

static size_t visit_slot(size_t cap, const candle_tensor *t) {
    return (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static bool visit_grow(visit_set *s) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    candle_tensor **keys = calloc(cap, sizeof *keys);
    if (!keys) return false;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->keys[i]) continue;
        size_t k = visit_slot(cap, s->keys[i]);
        while (keys[k]) k = (k + 1) & (cap - 1);
        keys[k] = s->keys[i];
    }
    free(s->keys);
    s->keys = keys;
    s->cap = cap;
    return true;
}

/* Insert t; *fresh tells whether it was new. False on OOM. */
static bool visit_insert(visit_set *s, candle_tensor *t, bool *fresh) {
    if ((s->n + 1) * 2 > s->cap && !visit_grow(s)) return false;
    size_t k = visit_slot(s->cap, t);
    while (s->keys[k]) {
        if (s->keys[k] == t) {
            *fresh = false;
            return true;
        }
        k = (k + 1) & (s->cap - 1);
    }
    s->keys[k] = t;
    s->n++;
    *fresh = true;
    return true;
}

typedef struct frame {
    candle_tensor *t;
    int next_src;
} frame;

typedef struct frame_stack {
    frame *v;
    size_t n, cap;
} frame_stack;

static bool stack_push(frame_stack *s, candle_tensor *t) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        frame *v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (frame){t, 0};
    return true;
}

static bool set_outs(candle_graph *g, candle_tensor *const *outs, int n_outs) {
    if (n_outs > g->cap_outs) {
        candle_tensor **o = realloc(g->outs, (size_t)n_outs * sizeof *o);
        if (!o) return false;
        g->outs = o;
        g->cap_outs = n_outs;
    }
    if (n_outs) memcpy(g->outs, outs, (size_t)n_outs * sizeof *outs);
    g->n_outs = n_outs;
    return true;
}

/* Products that read the same activation (a layer's q, k and v; gate and
 * up) are independent, but the post-order puts each next to its own users.
 * Moving them together lets the backend run them as one job
 * (compute_group): for batch-1 decoding one wake-up and one activation
 * preparation instead of three. A product moves up only past nodes it does
 * not read, so the order stays topological; the memory plan, made after
 * this, sees the new lifetimes. */
#define GROUP_WINDOW 64
#define GROUP_MAX 8

static bool groupable(const candle_tensor *t) {
    return ((t->op == CANDLE_OP_MATMUL && t->n_src == 2) || t->op == CANDLE_OP_MATMUL_GROUP_CORR) && !t->computed &&
           t->src[0];
}

/* Whether t reads a node of nodes[lo, hi) that still has to run (computed
 * ones, such as a weight's transposed view, are there only as leaves). */
static bool reads_any(const candle_tensor *t, candle_tensor *const *nodes, int lo, int hi) {
    for (int s = 0; s < t->n_src; s++)
        for (int k = lo; k < hi; k++)
            if (t->src[s] && t->src[s] == nodes[k] && !nodes[k]->computed) return true;
    return false;
}

static void group_products(candle_graph *g) {
    candle_tensor **v = g->nodes;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!groupable(v[i])) continue;
        int end = i + 1, lim = i + GROUP_WINDOW < g->n_nodes ? i + GROUP_WINDOW : g->n_nodes;
        for (int j = i + 1; j < lim && end - i < GROUP_MAX; j++) {
            if (!groupable(v[j]) || v[j]->src[0] != v[i]->src[0] || reads_any(v[j], v, end, j))
                continue;
            candle_tensor *t = v[j];
            memmove(v + end + 1, v + end, (size_t)(j - end) * sizeof *v);
            v[end++] = t;
        }
        i = end - 1;
    }
}

/* A unary elementwise node (silu, gelu, ...) whose only reader is an
 * add/sub/mul/div of the same shape runs inside that node (the FFN's
 * silu(gate) * up): the backend applies the unary to a block of the row in
 * cache and the binary to the result, so the intermediate is never written
 * and read back, and the memory plan gives it no storage. The unary moves
 * down to just before its reader (nothing between reads it), where
 * fused[] marks it. Likewise a residual add into the layer_norm reading it
 * (fuse_add). Only for one-off computes (plans), like group_products;
 * the context's no_fuse turns it off (comparisons). */
/* An f32 node not yet computed nor given storage of its own (a view reads another's). */
static bool unplanned_f32(const candle_tensor *t) {
    return !t->computed && !t->storage && !t->view_src && t->dtype == CANDLE_DTYPE_F32;
}

static bool fuse_unary(const candle_tensor *t) {
    return t->op >= CANDLE_OP_NEG && t->op <= CANDLE_OP_CLAMP && unplanned_f32(t) && !t->output && t->n_src == 1 &&
           t->src[0];
}

static bool fuse_binary(const candle_tensor *t, const candle_tensor *u) {
    return t->op >= CANDLE_OP_ADD && t->op <= CANDLE_OP_DIV && unplanned_f32(t) && t->n_src == 2 &&
           (t->src[0] == u) != (t->src[1] == u) && candle_tensor_same_shape(t, u);
}

/* The other pair: an add of two operands of its own shape (a residual)
 * whose only reader is the layer_norm normalising it (post-norm encoders:
 * LN(x + attn(x))). */
static bool fuse_add(const candle_tensor *t) {
    return t->op == CANDLE_OP_ADD && unplanned_f32(t) && !t->output && t->n_src == 2 && t->src[0] && t->src[1] &&
           candle_tensor_same_shape(t, t->src[0]) && candle_tensor_same_shape(t, t->src[1]);
}

static bool fuse_norm(const candle_tensor *t, const candle_tensor *u) {
    return t->op == CANDLE_OP_LAYER_NORM && unplanned_f32(t) && t->src[0] == u && (t->n_src < 2 || t->src[1] != u) &&
           (t->n_src < 3 || t->src[2] != u);
}

/* A node that may run inside its reader, and whether reader t takes it. */
static bool fuse_first(const candle_tensor *t) { return fuse_unary(t) || fuse_add(t); }

static bool may_be_first(candle_op op) {
    return (op >= CANDLE_OP_NEG && op <= CANDLE_OP_CLAMP) || op == CANDLE_OP_ADD;
}

static bool fuse_reader(const candle_tensor *t, const candle_tensor *u) {
    return u->op == CANDLE_OP_ADD ? fuse_norm(t, u) : fuse_binary(t, u);
}

static bool fuse_grow(candle_graph *g, int n) {
    if (n <= g->cap_fuse) return true;
    int cap = g->cap_fuse ? g->cap_fuse : 64;
    while (cap < n) cap *= 2;
    unsigned char *f = realloc(g->fused, (size_t)cap);
    if (f) g->fused = f;
    candle_tensor **a = realloc(g->tmp, (size_t)cap * sizeof *a);
    if (a) g->tmp = a;
    int *x = realloc(g->idx, (size_t)cap * sizeof *x);
    if (x) g->idx = x;
    int *c = realloc(g->counts, 2 * (size_t)cap * sizeof *c);
    if (c) g->counts = c;
    if (!f || !a || !x || !c) return false;
    g->cap_fuse = cap;
    return true;
}

static void fuse_elementwise(candle_ctx *ctx, candle_graph *g) {
    int n = g->n_nodes;
    candle_backend *be = ctx->backend;
    candle_tensor **v = g->nodes;
    g->any_fused = false;
    if (!be->iface->fusable || !be->iface->compute_fused || ctx->no_fuse) return;
    /* candidates by index: a small open-addressing map (pointer -> index)
     * over the candidates only (unary and add nodes), so counting readers
     * costs a cheap op test per edge and a lookup only for edges from one */
    int n_cand = 0;
    for (int i = 0; i < n; i++) n_cand += fuse_first(v[i]);
    if (!n_cand) return;
    size_t cap = 16;
    while (cap < (size_t)n_cand * 2) cap *= 2;
    if (!fuse_grow(g, n > (int)cap ? n : (int)cap)) return;
    memset(g->fused, 0, (size_t)n);
    candle_tensor **keys = g->tmp;
    int *idx = g->idx; /* slot -> node index */
    memset(keys, 0, cap * sizeof *keys);
    for (int i = 0; i < n; i++) {
        if (!fuse_first(v[i])) continue;
        size_t k = visit_slot(cap, v[i]);
        while (keys[k]) k = (k + 1) & (cap - 1);
        keys[k] = v[i];
        idx[k] = i;
    }
    /* per candidate: readers counted (capped at 2) and the last reader */
    int *cnt = g->counts, *reader = g->counts + g->cap_fuse;
    for (int i = 0; i < n; i++) cnt[i] = 0;
    for (int i = 0; i < n; i++) {
        candle_tensor *t = v[i];
        for (int s = 0; s < t->n_src; s++) {
            candle_tensor *x = t->src[s];
            if (!x || !may_be_first((candle_op)x->op)) continue;
            for (size_t k = visit_slot(cap, x); keys[k]; k = (k + 1) & (cap - 1))
                if (keys[k] == x) {
                    int u = idx[k];
                    if (cnt[u] < 2) cnt[u]++;
                    reader[u] = i;
                    break;
                }
        }
    }
    for (int o = 0; o < g->n_outs; o++)
        for (size_t k = visit_slot(cap, g->outs[o]); keys[k]; k = (k + 1) & (cap - 1))
            if (keys[k] == g->outs[o]) {
                cnt[idx[k]] = 2;
                break;
            }
    /* which readers take a unary (fused[] marks the unary's old index for
     * now; idx[j] - 1: the unary that reader j takes) */
    for (int i = 0; i < n; i++) idx[i] = 0;
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!fuse_first(v[i]) || cnt[i] != 1) continue;
        int j = reader[i];
        /* one first per reader (silu(a) * silu(b) fuses the first), and pairs
         * only: an add that takes a unary stays out of its norm */
        if (j <= i || idx[j] || idx[i] || !fuse_reader(v[j], v[i]) || !be->iface->fusable(be, v[i], v[j]))
            continue;
        g->fused[i] = 1;
        idx[j] = i + 1;
        any = true;
    }
    if (!any) return;
    /* new order: each fused unary right before its reader (nothing between
     * reads it, so the order stays topological) */
    candle_tensor **out = g->tmp;
    unsigned char *f = g->fused;
    int m = 0;
    for (int j = 0; j < n; j++) {
        cnt[j] = 0;
        if (f[j]) continue;
        if (idx[j]) {
            cnt[m] = 1;
            out[m++] = v[idx[j] - 1];
        }
        out[m++] = v[j];
    }
    memcpy(v, out, (size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) f[i] = (unsigned char)(i < m && cnt[i] == 1);
    g->any_fused = true;
}

/* prune: do not descend into computed nodes (for a one-off compute, where
 * only what is missing matters). A one-off compute (!track) works in the
 * context's scratch graph, set and stack, so repeated steps allocate
 * nothing. */
static candle_graph *build(candle_ctx *ctx, candle_tensor *const *outs, int n_outs, bool track,
                           bool prune) {
    for (int i = 0; i < n_outs; i++)
        if (!outs[i]) {
            /* an earlier op failed and its error is recorded */
            if (!ctx->status)
                cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "graph_build: output %d is NULL", i);
            return NULL;
        }
    cdl_graph_scratch *gs = &ctx->gscratch;
    candle_graph *g = track ? calloc(1, sizeof *g) : gs->graph;
    if (!g && !track) g = gs->graph = calloc(1, sizeof *g);
    visit_set vs = {0, 0, NULL};
    frame_stack st = {NULL, 0, 0};
    if (!track) {
        vs = (visit_set){gs->cap_keys, 0, gs->keys};
        if (vs.keys) memset(vs.keys, 0, vs.cap * sizeof *vs.keys);
        st = (frame_stack){gs->stack, 0, gs->cap_stack};
    }
    bool ok = g != NULL;
    if (ok) g->n_nodes = 0;
    ok = ok && set_outs(g, outs, n_outs);
    for (int o = 0; ok && o < n_outs; o++) {
        bool fresh;
        if (!visit_insert(&vs, outs[o], &fresh)) ok = false;
        if (!ok || !fresh) continue;
        ok = stack_push(&st, outs[o]);
        while (ok && st.n) {
            frame *f = &st.v[st.n - 1];
            bool leaf = prune && f->t->computed;
            if (!leaf && f->next_src < f->t->n_src) {
                candle_tensor *s = f->t->src[f->next_src++];
                if (!s) continue;
                if (!visit_insert(&vs, s, &fresh)) ok = false;
                else if (fresh) ok = stack_push(&st, s);
            } else {
                ok = push(g, f->t);
                st.n--;
            }
        }
    }
    if (track) {
        free(vs.keys);
        free(st.v);
    } else {
        gs->keys = vs.keys;
        gs->cap_keys = vs.cap;
        gs->stack = st.v;
        gs->cap_stack = st.cap;
    }
    if (ok && !track) group_products(g);
    if (ok && !track) fuse_elementwise(ctx, g);
    if (!ok || (track && cdl_ctx_track_graph(ctx, g) != 0)) {
        if (track) cdl_graph_free_internal(g);
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: building graph");
        return NULL;
    }
    return g;
}

candle_graph *candle_graph_build(candle_ctx *ctx, candle_tensor *const *outs, int n_outs) {
    if (!ctx || !outs || n_outs < 0) return NULL;
    return build(ctx, outs, n_outs, true, false);
}

int candle_graph_n_nodes(const candle_graph *g) { return g ? g->n_nodes : 0; }
candle_tensor *candle_graph_node(const candle_graph *g, int i) {
    return g && i >= 0 && i < g->n_nodes ? g->nodes[i] : NULL;
}

bool cdl_graph_fused(const candle_graph *g, int i) {
    return g && g->any_fused && i >= 0 && i < g->n_nodes && g->fused[i];
}

void cdl_graph_free_internal(void *p) {
    candle_graph *g = p;
    if (g) {
        free(g->nodes);
        free(g->outs);
        free(g->fused);
        free(g->tmp);
        free(g->idx);
        free(g->counts);
        free(g->run);
    }
    free(g);
}

void cdl_graph_free_scratch(candle_ctx *ctx) {
    cdl_graph_scratch *gs = &ctx->gscratch;
    cdl_graph_free_internal(gs->graph);
    free(gs->keys);
    free(gs->stack);
    memset(gs, 0, sizeof *gs);
}

/* Storage bound and the op supported: t is ready for the backend. */
static candle_status prepare_node(candle_ctx *ctx, candle_tensor *t) {
    if (t->op == CANDLE_OP_NONE)
        return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                                "compute: leaf tensor '%s' has no data", t->name);
    if (t->view_src) {
        cdl_tensor_bind_view(t); /* in-place writers: copy_into */
    } else if (!t->storage) {
        candle_status s = cdl_tensor_alloc_storage(ctx, t);
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status compute_node(candle_ctx *ctx, candle_tensor *t) {
    if (t->computed) return CANDLE_OK;
    if (t->op == CANDLE_OP_VIEW) {
        cdl_tensor_bind_view(t);
        return CANDLE_OK;
    }
    candle_status s = prepare_node(ctx, t);
    if (s) return s;
    candle_backend *be = ctx->backend;
    if (cdl_sched_needed(ctx, t)) s = cdl_sched_compute(ctx, t);
    else if ((s = be->iface->compute_node(be, t))) s = cdl_set_error(ctx, s, "%s", candle_backend_errmsg(be));
    if (s) return s;
    t->computed = true;
    return CANDLE_OK;
}

static bool plans(const candle_ctx *ctx) { return !ctx->eager && !ctx->no_plan; }

/* Nodes i.. that group_products put together (or that a tracked graph
 * has next to each other) and that still have to run: their count (1 when
 * i starts no group). None reads another, so the backend may run them in
 * any order. */
static int group_at(const candle_ctx *ctx, const candle_graph *g, int i, bool plan) {
    const candle_tensor *t = g->nodes[i];
    if (!ctx->backend->iface->compute_group || !groupable(t)) return 1;
    int n = 1;
    while (i + n < g->n_nodes && n < GROUP_MAX && groupable(g->nodes[i + n]) &&
           g->nodes[i + n]->src[0] == t->src[0] && (!plan || cdl_memplan_needed(ctx, i + n)) &&
           !reads_any(g->nodes[i + n], g->nodes, i, i + n))
        n++;
    return n;
}

static candle_status compute_group(candle_ctx *ctx, candle_tensor *const *nodes, int n) {
    bool placed = false;
    for (int k = 0; k < n; k++) {
        candle_status s = prepare_node(ctx, nodes[k]);
        if (s) return s;
        placed |= cdl_sched_needed(ctx, nodes[k]);
    }
    for (int k = 0; placed && k < n; k++) {
        candle_status s = compute_node(ctx, nodes[k]);
        if (s) return s;
    }
    if (placed) return CANDLE_OK;
    candle_backend *be = ctx->backend;
    candle_status s = be->iface->compute_group(be, nodes, n);
    if (s) return cdl_set_error(ctx, s, "%s", candle_backend_errmsg(be));
    for (int k = 0; k < n; k++) nodes[k]->computed = true;
    return CANDLE_OK;
}

/* Unary u fused into binary b (fuse_elementwise): b computed straight from
 * u's input; where the backend declines at run time, the two one by one
 * (u then gets storage of its own). */
static candle_status compute_fused(candle_ctx *ctx, candle_tensor *u, candle_tensor *b) {
    candle_status s = prepare_node(ctx, b);
    if (s) return s;
    candle_backend *be = ctx->backend;
    s = cdl_sched_needed(ctx, u) || cdl_sched_needed(ctx, b) ? CANDLE_ERR_UNSUPPORTED
                                                                   : be->iface->compute_fused(be, u, b);
    if (s == CANDLE_ERR_UNSUPPORTED) {
        s = compute_node(ctx, u);
        return s ? s : compute_node(ctx, b);
    }
    if (s) return cdl_set_error(ctx, s, "%s", candle_backend_errmsg(be));
    b->computed = true;
    return CANDLE_OK;
}

/* One node, a group of independent products sharing their input, or a
 * fused unary and its reader. */
static candle_status compute_step(candle_ctx *ctx, candle_graph *g, int i, bool plan, int *n) {
    if (plan && g->any_fused && g->fused[i] && i + 1 < g->n_nodes &&
        cdl_memplan_needed(ctx, i + 1) && !g->nodes[i]->computed && !g->nodes[i + 1]->computed) {
        *n = 2;
        return compute_fused(ctx, g->nodes[i], g->nodes[i + 1]);
    }
    *n = group_at(ctx, g, i, plan);
    return *n > 1 ? compute_group(ctx, g->nodes + i, *n) : compute_node(ctx, g->nodes[i]);
}

/* The run as a whole on a backend with graph_compute: every node that must
 * run prepared, then handed over in order. *handed is false (nothing run)
 * where some node needs the scheduler's copies or fallback: the caller then
 * drives the run node by node. */
static candle_status whole_graph(candle_ctx *ctx, candle_graph *g, bool plan, bool *handed) {
    *handed = false;
    if (g->cap_run < g->n_nodes) {
        candle_tensor **r = realloc(g->run, (size_t)g->n_nodes * sizeof *r);
        if (!r) return CANDLE_OK; /* node by node needs no list */
        g->run = r;
        g->cap_run = g->n_nodes;
    }
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        candle_tensor *t = g->nodes[i];
        if ((plan && !cdl_memplan_needed(ctx, i)) || t->computed) continue;
        if (t->op == CANDLE_OP_VIEW) {
            cdl_tensor_bind_view(t);
            continue;
        }
        candle_status s = prepare_node(ctx, t);
        if (s) return s;
        if (cdl_sched_needed(ctx, t)) return CANDLE_OK;
        g->run[n++] = t;
    }
    *handed = true;
    candle_backend *be = ctx->backend;
    candle_status s = be->iface->graph_compute(be, g->run, n);
    if (s) return cdl_set_error(ctx, s, "%s", candle_backend_errmsg(be));
    for (int i = 0; i < n; i++) g->run[i]->computed = true;
    /* views took their sources' state before those ran: bound again, in order */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == CANDLE_OP_VIEW && (!plan || cdl_memplan_needed(ctx, i)))
            cdl_tensor_bind_view(g->nodes[i]);
    return CANDLE_OK;
}

candle_status candle_graph_compute(candle_ctx *ctx, candle_graph *g) {
    if (!ctx) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "graph_compute: ctx is NULL");
    if (ctx->status) return ctx->status;
    if (!g) return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "graph_compute: graph is NULL");
    bool plan = plans(ctx);
    candle_status s = plan ? cdl_memplan_bind(ctx, g->nodes, g->n_nodes, g->outs, g->n_outs,
                                                 g->any_fused ? g->fused : NULL)
                           : CANDLE_OK;
    bool prof = cdl_profile_on(), handed = false;
    if (prof) cdl_profile_graph();
    if (!s && !prof && ctx->backend->iface->graph_compute) s = whole_graph(ctx, g, plan, &handed);
    for (int i = 0, n = 1; !s && !handed && i < g->n_nodes; i += n) {
        n = 1;
        if (plan && !cdl_memplan_needed(ctx, i)) continue;
        candle_tensor *t = g->nodes[i];
        if (prof && !t->computed && t->op != CANDLE_OP_VIEW) {
            int64_t t0 = cdl_profile_now();
            s = compute_step(ctx, g, i, plan, &n);
            /* a fused pair counts as one node of the unary's op */
            bool pair = n == 2 && plan && g->any_fused && g->fused[i];
            cdl_profile_node(g->nodes + i, pair ? 1 : n, cdl_profile_now() - t0);
        } else {
            s = compute_step(ctx, g, i, plan, &n);
        }
    }
    if (!s) s = ctx->backend->iface->synchronize(ctx->backend);
    if (plan) cdl_memplan_finish(ctx, g->nodes, g->n_nodes);
    return s;
}

candle_status candle_compute(candle_ctx *ctx, candle_tensor *t) {
    if (!ctx) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "compute: ctx is NULL");
    if (!t) return ctx->status ? ctx->status : cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "compute: tensor is NULL");
    if (t->computed) return CANDLE_OK;
    candle_graph *g = build(ctx, &t, 1, false, true);
    if (!g) return ctx->status;
    return candle_graph_compute(ctx, g);
}

candle_tensor *cdl_node_finish(candle_ctx *ctx, candle_tensor *node) {
    if (!node || !ctx->eager) return node;
    /* Inputs of an eager node are usually computed, so only the node runs;
     * inputs built lazily (before set_eager, or in another context) are
     * computed first. */
    bool ready = true;
    for (int i = 0; i < node->n_src; i++)
        if (node->src[i] && !node->src[i]->computed) ready = false;
    candle_status s = ready ? compute_node(ctx, node) : candle_compute(ctx, node);
    return s ? NULL : node;
}
