/* Lazy graphs: building computes nothing, topological order without
 * duplicates (diamonds, several outputs), graph and one-off computes, marks
 * and resets (memory counters return), contexts freed with live views,
 * inputs from other contexts, eager nodes over lazy inputs. */
#include "test.h"

/* The memory plan (lazy contexts) keeps only a graph's outputs; with
 * CANDLE_NO_PLAN=1 in the environment this test checks the contexts
 * without one (no_plan). */
static bool planned(void) {
    const char *e = getenv("CANDLE_NO_PLAN");
    return !(e && *e && strcmp(e, "0") != 0);
}

static candle_ctx *new_ctx(bool eager) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    p.no_plan = !planned();
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

static candle_tensor *vec(candle_ctx *ctx, int n, float start) {
    float v[64];
    for (int i = 0; i < n; i++) v[i] = start + (float)i;
    return candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){n}, v);
}

/* Every node appears once, after all of its sources that are in the graph. */
static void check_topo(const candle_graph *g, int want_nodes) {
    int n = candle_graph_n_nodes(g);
    CHECK_MSG(n == want_nodes, "%d nodes, want %d", n, want_nodes);
    for (int i = 0; i < n; i++) {
        candle_tensor *t = candle_graph_node(g, i);
        for (int j = 0; j < n; j++)
            if (j != i) CHECK(candle_graph_node(g, j) != t);
        for (int s = 0; s < t->n_src; s++) {
            int pos = -1;
            for (int j = 0; j < n; j++)
                if (candle_graph_node(g, j) == t->src[s]) pos = j;
            CHECK_MSG(pos >= 0 && pos < i, "node %d (%s) before its source", i,
                      candle_op_name((candle_op)t->op));
        }
    }
    CHECK(candle_graph_node(g, -1) == NULL && candle_graph_node(g, n) == NULL);
}

static void test_lazy_diamond(void) {
    candle_ctx *ctx = new_ctx(false);
    candle_tensor *a = vec(ctx, 4, 0.5f);
    uint64_t allocs = candle_ctx_alloc_count(ctx);
    size_t used = candle_ctx_mem_used(ctx);
    /*      a
     *     / \
     *    b   c      b = exp(a), c = neg(a)
     *     \ / |
     *      d  |     d = b + c
     *       \ |
     *        e      e = d * c */
    candle_tensor *b = candle_exp(ctx, a);
    candle_tensor *c = candle_neg(ctx, a);
    candle_tensor *d = candle_add(ctx, b, c);
    candle_tensor *e = candle_mul(ctx, d, c);
    CHECK(e && !e->computed && !d->computed && !b->storage);
    CHECK(candle_ctx_alloc_count(ctx) == allocs && candle_ctx_mem_used(ctx) == used);

    candle_graph *g = candle_graph_build(ctx, &e, 1);
    CHECK(g != NULL);
    check_topo(g, 5);
    /* several outputs sharing nodes: still each node once */
    candle_tensor *outs[4] = {e, d, b, e};
    candle_graph *g2 = candle_graph_build(ctx, outs, 4);
    check_topo(g2, 5);
    CHECK(candle_ctx_alloc_count(ctx) == allocs); /* building allocates no storage */

    CHECK_OK(ctx, candle_graph_compute(ctx, g));
    if (planned()) {
        /* one buffer: b, c, d live together; e reuses b's bytes */
        CHECK(e->computed && !d->computed && !b->computed && !c->computed && !b->storage);
        CHECK(candle_ctx_alloc_count(ctx) == allocs + 1);
        CHECK(candle_ctx_plan_bytes(ctx) == 3 * 64);
        CHECK(candle_ctx_mem_used(ctx) == used + 3 * 64);
    } else {
        CHECK(e->computed && d->computed && b->computed && c->computed);
        CHECK(candle_ctx_alloc_count(ctx) == allocs + 4);
        CHECK(candle_ctx_mem_used(ctx) == used + 4 * 16);
    }
    float out[4];
    CHECK_OK(ctx, candle_tensor_to_f32(e, out));
    for (int i = 0; i < 4; i++) {
        double x = 0.5 + i;
        CHECK_NEAR(out[i], (exp(x) - x) * -x, 1e-4 * fabs((exp(x) - x) * x));
    }
    /* computed nodes are skipped: computing again allocates nothing (planned:
     * d and b, dropped by the first run, run again around e's live bytes) */
    CHECK_OK(ctx, candle_graph_compute(ctx, g2));
    CHECK(d->computed && b->computed);
    CHECK_OK(ctx, candle_compute(ctx, e));
    CHECK(candle_ctx_alloc_count(ctx) == allocs + (planned() ? 2 : 4));

    /* broadcasting inserts expand views into the graph, each once */
    candle_tensor *row = candle_reshape(ctx, a, 2, (int64_t[]){1, 4});
    candle_tensor *col = candle_reshape(ctx, c, 2, (int64_t[]){4, 1});
    candle_tensor *outer = candle_mul(ctx, row, col);
    candle_tensor *sum = candle_add(ctx, outer, outer);
    candle_graph *g3 = candle_graph_build(ctx, &sum, 1);
    /* a, c, expand(row), expand(col), outer, sum: views of views point at
     * the tensor that owns the layout, so row and col drop out */
    check_topo(g3, 6);
    CHECK_OK(ctx, candle_graph_compute(ctx, g3));
    double v;
    CHECK_OK(ctx, candle_tensor_get_f64(sum, (int64_t[]){2, 3}, &v));
    CHECK_NEAR(v, 2 * 3.5 * -2.5, 1e-6);
    /* empty and NULL graphs */
    candle_graph *ge = candle_graph_build(ctx, NULL, 0);
    CHECK(ge == NULL);
    ge = candle_graph_build(ctx, outs, 0);
    CHECK(ge && candle_graph_n_nodes(ge) == 0);
    CHECK_OK(ctx, candle_graph_compute(ctx, ge));
    CHECK(candle_graph_compute(ctx, NULL) == CANDLE_ERR_INVALID_ARG);
    candle_ctx_clear_error(ctx);
    candle_ctx_free(ctx);
}

static void test_mark_reset(void) {
    candle_ctx *ctx = new_ctx(false);
    candle_tensor *w = vec(ctx, 16, 1.0f); /* "weights" */
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    size_t used = candle_ctx_mem_used(ctx);
    size_t peak_step = 0;
    for (int step = 0; step < 4; step++) {
        candle_tensor *x = vec(ctx, 16, (float)step);
        candle_tensor *y = candle_mul(ctx, candle_add(ctx, x, w), w);
        candle_tensor *t = candle_narrow(ctx, y, 0, 2, 4); /* a view, freed with the step */
        candle_graph *g = candle_graph_build(ctx, &t, 1); /* freed by the reset (ASan) */
        CHECK_OK(ctx, candle_graph_compute(ctx, g));
        double v;
        CHECK_OK(ctx, candle_tensor_get_f64(t, (int64_t[]){1}, &v));
        CHECK(v == (3.0 + step + 4.0) * 4.0);
        CHECK(candle_ctx_mem_used(ctx) == used + 3 * 64);
        if (step == 0) peak_step = candle_ctx_mem_peak(ctx);
        candle_ctx_reset(ctx, mark);
        /* the plan's buffer survives resets, for the next step */
        CHECK(candle_ctx_mem_used(ctx) == used + candle_ctx_plan_bytes(ctx));
        CHECK(candle_ctx_get_mark(ctx) == mark);
        CHECK(candle_ctx_mem_peak(ctx) == peak_step); /* steady state: no growth */
    }
    /* weights survive resets */
    double v;
    CHECK_OK(ctx, candle_tensor_get_f64(w, (int64_t[]){15}, &v));
    CHECK(v == 16);
    /* reset past the end and to 0 */
    candle_ctx_reset(ctx, mark + 100);
    CHECK(candle_ctx_get_mark(ctx) == mark);
    candle_ctx_reset(ctx, 0);
    CHECK(candle_ctx_mem_used(ctx) == candle_ctx_plan_bytes(ctx) && candle_ctx_get_mark(ctx) == 0);
    candle_ctx_free(ctx);
}

/* Marks inside later descriptor chunks, steps spanning several chunks. */
static void test_reset_many_chunks(void) {
    candle_ctx *ctx = new_ctx(true);
    candle_tensor *w[300];
    for (int i = 0; i < 300; i++) w[i] = vec(ctx, 2, (float)i);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    size_t used = candle_ctx_mem_used(ctx);
    CHECK(mark == 300 && used == 300 * 8);
    for (int step = 0; step < 3; step++) {
        candle_tensor *acc = w[0];
        for (int i = 1; i < 300; i++) acc = candle_add(ctx, acc, w[i]);
        double v;
        CHECK_OK(ctx, candle_tensor_get_f64(acc, (int64_t[]){1}, &v));
        CHECK(v == 299.0 * 300.0 / 2.0 + 300.0);
        CHECK(candle_ctx_mem_used(ctx) == used + 299 * 8);
        candle_ctx_reset(ctx, mark);
        CHECK(candle_ctx_mem_used(ctx) == used);
    }
    candle_ctx_reset(ctx, 100); /* into the first chunk */
    CHECK(candle_ctx_mem_used(ctx) == 100 * 8 && candle_ctx_get_mark(ctx) == 100);
    candle_ctx_free(ctx);
}

static void test_free_with_live_views(void) {
    /* Views in one context of tensors in another: either may be freed first. */
    for (int order = 0; order < 2; order++) {
        candle_ctx *wctx = new_ctx(true), *sctx = new_ctx(true);
        candle_tensor *w = vec(wctx, 8, 0.0f);
        candle_tensor *v = candle_narrow(sctx, w, 0, 4, 4);
        candle_tensor *t = candle_transpose(sctx, candle_reshape(sctx, v, 2, (int64_t[]){2, 2}), 0, 1);
        CHECK(t && t->storage == w->storage);
        if (order == 0) {
            candle_ctx_free(wctx); /* storage lives on through the views */
            double x;
            CHECK_OK(sctx, candle_tensor_get_f64(t, (int64_t[]){1, 0}, &x));
            CHECK(x == 5); /* w[4:8] as [[4, 5], [6, 7]], transposed */
            candle_ctx_free(sctx);
        } else {
            candle_ctx_free(sctx);
            CHECK(candle_ctx_mem_used(wctx) == 32);
            candle_ctx_free(wctx);
        }
    }
    /* external storage with a view outliving the tensor's context */
    float data[6] = {1, 2, 3, 4, 5, 6};
    candle_storage *s = candle_storage_external(data, sizeof data);
    candle_ctx *ctx = new_ctx(true);
    candle_tensor *x = candle_tensor_from_storage(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, 3}, s, 0);
    candle_storage_release(s); /* the tensor holds its own reference */
    candle_tensor *tt = candle_transpose(ctx, x, 0, 1);
    double v;
    CHECK_OK(ctx, candle_tensor_get_f64(tt, (int64_t[]){2, 1}, &v));
    CHECK(v == 6);
    CHECK(candle_tensor_from_storage(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){7}, x->storage, 0) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_INVALID_ARG);
    candle_ctx_free(ctx);
}

static void test_cross_context_and_eager_toggle(void) {
    /* A long lazy chain in one context computed from a small one. */
    candle_ctx *a = new_ctx(false), *b = new_ctx(false);
    candle_tensor *x = vec(a, 4, 1.0f);
    candle_tensor *y = x;
    for (int i = 0; i < 600; i++) y = candle_affine(a, y, 1.0, 0.5);
    candle_tensor *z = candle_neg(b, y);
    CHECK_OK(b, candle_compute(b, z));
    double v;
    CHECK_OK(b, candle_tensor_get_f64(z, (int64_t[]){3}, &v));
    CHECK(v == -(4.0 + 300.0));
    candle_ctx_free(b);
    candle_ctx_free(a);

    /* A context switched to eager after building lazily. */
    candle_ctx *c = new_ctx(false);
    candle_tensor *p = vec(c, 4, 0.0f);
    candle_tensor *q = candle_affine(c, p, 2.0, 1.0);
    candle_ctx_set_eager(c, true);
    CHECK(candle_ctx_is_eager(c));
    candle_tensor *r = candle_add(c, q, p); /* q was never computed */
    CHECK(r && r->computed && q->computed);
    CHECK_OK(c, candle_tensor_get_f64(r, (int64_t[]){2}, &v));
    CHECK(v == 7);
    /* eager ops compute at once */
    candle_tensor *s = candle_exp(c, p);
    CHECK(s && s->computed);
    candle_ctx_free(c);
}

/* Random DAGs built lazily: each graph holds exactly the reachable nodes in
 * a valid order, and computing it gives the model's values. */
static void test_random_dags(void) {
    enum { N_NODES = 120, W = 4 };
    uint32_t r = 99;
    int bad = 0;
    for (int trial = 0; trial < 20; trial++) {
        candle_ctx *ctx = new_ctx(false);
        candle_tensor *t[N_NODES];
        double v[N_NODES][W];
        int a_of[N_NODES], b_of[N_NODES];
        for (int i = 0; i < 3; i++) {
            t[i] = vec(ctx, W, (float)(i - 1) * 0.5f);
            for (int k = 0; k < W; k++) v[i][k] = (i - 1) * 0.5 + k;
            a_of[i] = b_of[i] = -1;
        }
        for (int i = 3; i < N_NODES; i++) {
            r = r * 1664525u + 1013904223u;
            int a = (int)((r >> 8) % (uint32_t)i), b = (int)((r >> 20) % (uint32_t)i), op = (int)(r >> 29);
            a_of[i] = a, b_of[i] = op < 4 ? b : -1;
            for (int k = 0; k < W; k++) {
                double x = v[a][k], y = v[b][k];
                v[i][k] = op == 0 ? tanh(x + y) : op == 1 ? x * y * 0.5 : op == 2 ? x - y : op == 3 ? fmax(x, y)
                        : op == 4 ? -x : op == 5 ? tanh(x) : op == 6 ? x * 0.5 + 1 : fabs(x);
            }
            candle_tensor *x = t[a], *y = t[b];
            t[i] = op == 0   ? candle_tanh(ctx, candle_add(ctx, x, y))
                   : op == 1 ? candle_scale(ctx, candle_mul(ctx, x, y), 0.5)
                   : op == 2 ? candle_sub(ctx, x, y)
                   : op == 3 ? candle_maximum(ctx, x, y)
                   : op == 4 ? candle_neg(ctx, x)
                   : op == 5 ? candle_tanh(ctx, x)
                   : op == 6 ? candle_affine(ctx, x, 0.5, 1)
                             : candle_abs(ctx, x);
        }
        int outs_i[3] = {N_NODES - 1, N_NODES / 2, N_NODES - 7};
        candle_tensor *outs[3] = {t[outs_i[0]], t[outs_i[1]], t[outs_i[2]]};
        /* reachable model nodes; ops 0 and 1 add one hidden node each */
        bool reach[N_NODES] = {false};
        int stack[N_NODES], sp = 0, want = 0;
        for (int o = 0; o < 3; o++) stack[sp++] = outs_i[o];
        while (sp) {
            int i = stack[--sp];
            if (reach[i]) continue;
            reach[i] = true;
            if (a_of[i] >= 0) stack[sp++] = a_of[i];
            if (b_of[i] >= 0) stack[sp++] = b_of[i];
        }
        for (int i = 0; i < N_NODES; i++)
            if (reach[i]) want += 1 + (i >= 3 && t[i]->op != CANDLE_OP_SUB && t[i]->op != CANDLE_OP_MAXIMUM && b_of[i] >= 0);
        candle_graph *g = candle_graph_build(ctx, outs, 3);
        check_topo(g, want);
        CHECK_OK(ctx, candle_graph_compute(ctx, g));
        for (int o = 0; o < 3; o++) {
            float got[W];
            if (candle_tensor_to_f32(outs[o], got) != CANDLE_OK) bad++;
            for (int k = 0; k < W; k++)
                bad += fabs(got[k] - v[outs_i[o]][k]) > 1e-4 * (1 + fabs(v[outs_i[o]][k]));
        }
        for (int i = 0; i < N_NODES; i++) {
            bool out = i == outs_i[0] || i == outs_i[1] || i == outs_i[2];
            CHECK(t[i]->computed == (planned() ? out : reach[i]) || i < 3);
        }
        candle_ctx_free(ctx);
    }
    CHECK_MSG(bad == 0, "%d values differ from the model", bad);
}

int main(void) {
    test_lazy_diamond();
    test_mark_reset();
    test_reset_many_chunks();
    test_free_with_live_views();
    test_cross_context_and_eager_toggle();
    test_random_dags();
    return test_done("test_graph");
}
