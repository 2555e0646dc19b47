/* Graph building (topological order) and computation on a backend. */
#include <stdlib.h>
#include <string.h>

#include "../core/ctx-impl.h"

struct candle_graph {
    int n_nodes, cap;
    candle_tensor **nodes; /* topological order: inputs before users */
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

/* Iterative DFS post-order; visited marks live in a small open-addressing
 * set so descriptors stay const during the walk. */
typedef struct visit_set {
    size_t cap;
    candle_tensor **keys;
} visit_set;

static bool visit_insert(visit_set *s, candle_tensor *t, bool *fresh) {
    if (s->cap == 0) return false;
    size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < s->cap; i++) {
        size_t k = (h + i) & (s->cap - 1);
        if (s->keys[k] == t) {
            *fresh = false;
            return true;
        }
        if (!s->keys[k]) {
            s->keys[k] = t;
            *fresh = true;
            return true;
        }
    }
    return false;
}

typedef struct frame {
    candle_tensor *t;
    int next_src;
} frame;

static candle_graph *build(candle_ctx *ctx, candle_tensor *const *outs, int n_outs, bool track) {
    for (int i = 0; i < n_outs; i++)
        if (!outs[i]) return NULL; /* an earlier op failed; its error is recorded */
    candle_graph *g = calloc(1, sizeof *g);
    size_t cap = 64;
    while (cap < 4 * ctx->n_tensors + 64) cap *= 2;
    visit_set vs = {cap, calloc(cap, sizeof(candle_tensor *))};
    size_t stack_cap = ctx->n_tensors + 16;
    frame *stack = malloc(stack_cap * sizeof *stack);
    bool ok = g && vs.keys && stack;
    for (int o = 0; ok && o < n_outs; o++) {
        bool fresh;
        if (!visit_insert(&vs, outs[o], &fresh)) ok = false;
        if (!ok || !fresh) continue;
        size_t sp = 0;
        stack[sp++] = (frame){outs[o], 0};
        while (ok && sp) {
            frame *f = &stack[sp - 1];
            if (f->next_src < f->t->n_src) {
                candle_tensor *s = f->t->src[f->next_src++];
                if (!s) continue;
                if (!visit_insert(&vs, s, &fresh)) ok = false;
                else if (fresh) {
                    if (sp == stack_cap) ok = false;
                    else stack[sp++] = (frame){s, 0};
                }
            } else {
                ok = push(g, f->t);
                sp--;
            }
        }
    }
    free(vs.keys);
    free(stack);
    if (!ok || (track && candle_ctx_track_graph(ctx, g) != 0)) {
        if (g) free(g->nodes);
        free(g);
        candle_set_error(ctx, CANDLE_ERR_OOM, "out of memory: building graph");
        return NULL;
    }
    return g;
}

candle_graph *candle_graph_build(candle_ctx *ctx, candle_tensor *const *outs, int n_outs) {
    if (!ctx || !outs || n_outs < 0) return NULL;
    return build(ctx, outs, n_outs, true);
}

int candle_graph_n_nodes(const candle_graph *g) { return g ? g->n_nodes : 0; }
candle_tensor *candle_graph_node(const candle_graph *g, int i) {
    return g && i >= 0 && i < g->n_nodes ? g->nodes[i] : NULL;
}

void candle_graph_free_internal(void *p) {
    candle_graph *g = p;
    if (g) free(g->nodes);
    free(g);
}

static candle_status compute_node(candle_ctx *ctx, candle_tensor *t) {
    if (t->computed) return CANDLE_OK;
    if (t->op == CANDLE_OP_VIEW) {
        candle_tensor_bind_view(t);
        return CANDLE_OK;
    }
    if (t->op == CANDLE_OP_NONE)
        return candle_set_error(ctx, CANDLE_ERR_INVALID_ARG,
                                "compute: leaf tensor '%s' has no data", t->name);
    if (t->view_src) {
        candle_tensor_bind_view(t); /* in-place writers: copy_into */
    } else if (!t->storage) {
        candle_status s = candle_tensor_alloc_storage(ctx, t);
        if (s) return s;
    }
    candle_backend *be = ctx->backend;
    if (!be->iface->supports_op(be, t)) {
        char b[128];
        return candle_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "%s: not supported on %s for %s %s",
                                candle_op_name((candle_op)t->op), be->iface->name,
                                candle_dtype_name(t->dtype),
                                candle_shape_str(t->rank, t->shape, b, sizeof b));
    }
    candle_status s = be->iface->compute_node(be, t);
    if (s) return candle_set_error(ctx, s, "%s", be->errmsg);
    t->computed = true;
    return CANDLE_OK;
}

candle_status candle_graph_compute(candle_ctx *ctx, candle_graph *g) {
    if (!ctx) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "graph_compute: ctx is NULL");
    if (ctx->status) return ctx->status;
    if (!g) return candle_set_error(ctx, CANDLE_ERR_INVALID_ARG, "graph_compute: graph is NULL");
    for (int i = 0; i < g->n_nodes; i++) {
        candle_status s = compute_node(ctx, g->nodes[i]);
        if (s) return s;
    }
    return ctx->backend->iface->synchronize(ctx->backend);
}

candle_status candle_compute(candle_ctx *ctx, candle_tensor *t) {
    if (!ctx) return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "compute: ctx is NULL");
    if (!t) return ctx->status ? ctx->status : candle_set_error(ctx, CANDLE_ERR_INVALID_ARG, "compute: tensor is NULL");
    if (t->computed) return CANDLE_OK;
    candle_graph *g = build(ctx, &t, 1, false);
    if (!g) return ctx->status;
    candle_status s = candle_graph_compute(ctx, g);
    candle_graph_free_internal(g);
    return s;
}

candle_tensor *candle_node_finish(candle_ctx *ctx, candle_tensor *node) {
    if (!node || !ctx->eager) return node;
    /* Inputs of an eager node are computed, so only the node itself runs. */
    candle_status s = compute_node(ctx, node);
    return s ? NULL : node;
}
