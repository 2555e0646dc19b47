/* Memory plan: lifetimes on diamonds, views and in-place writers keeping
 * their source alive, outputs (given and marked) preserved, reuse of freed
 * bytes (a chain of N elementwise ops needs two tensors, not N), results
 * bit-identical to no_plan, OOM under a limit, and a decode loop
 * (stories260K) that asks the system for nothing once warm. */
#include <unistd.h>

#include "models/model-impl.h"
#include "test.h"

static candle_ctx *new_ctx(bool plan, size_t limit) {
    candle_ctx_params p = candle_ctx_default_params();
    p.mem_limit = limit;
    p.no_plan = !plan;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

/* n floats start, start + step, ... */
static candle_tensor *ramp(candle_ctx *ctx, int64_t n, float start, float step) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = start + step * (float)i;
    candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &n, v);
    free(v);
    return t;
}

static double at(const candle_tensor *t, int64_t i) {
    double v = NAN;
    if (candle_tensor_get_f64(t, &i, &v) != CANDLE_OK) return NAN;
    return v;
}

static void test_diamond(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *a = ramp(ctx, 16, 0.25f, 0.5f); /* 64 bytes */
    uint64_t allocs = candle_ctx_alloc_count(ctx);
    /* b = exp(a), c = neg(a), d = b + c, e = d * c, f = e - b: b lives to
     * f and d, c are read by e, so e needs a fourth block; f reuses one. */
    candle_tensor *b = candle_exp(ctx, a), *c = candle_neg(ctx, a);
    candle_tensor *d = candle_add(ctx, b, c), *e = candle_mul(ctx, d, c);
    candle_tensor *f = candle_sub(ctx, e, b);
    CHECK_OK(ctx, candle_compute(ctx, f));
    CHECK(candle_ctx_alloc_count(ctx) == allocs + 1);
    CHECK_MSG(candle_ctx_plan_bytes(ctx) == 4 * 64, "%zu", candle_ctx_plan_bytes(ctx));
    CHECK(f->computed && f->storage && f->storage->kind == CANDLE_STORAGE_ARENA);
    CHECK(!b->computed && !b->storage && !e->storage);
    int bad = 0;
    for (int i = 0; i < 16; i++) {
        double x = 0.25 + 0.5 * i, want = (exp(x) - x) * -x - exp(x);
        bad += fabs(at(f, i) - want) > 1e-5 * (1 + fabs(want));
    }
    CHECK_MSG(bad == 0, "%d values wrong", bad);
    /* an intermediate asked for again is computed again, around f */
    CHECK_OK(ctx, candle_compute(ctx, d));
    CHECK(fabs(at(d, 3) - (exp(1.75) - 1.75)) < 1e-5 && fabs(at(f, 0) - ((exp(0.25) - 0.25) * -0.25 - exp(0.25))) < 1e-5);
    candle_ctx_free(ctx);
}

/* A view read late keeps its source's bytes; a view as output keeps its
 * source after the run. */
static void test_views(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *a = ramp(ctx, 64, -1.0f, 0.03125f);
    candle_tensor *x = candle_exp(ctx, a);
    candle_tensor *xv = candle_narrow(ctx, x, 0, 32, 32); /* read at the end only */
    candle_tensor *y = candle_narrow(ctx, a, 0, 0, 32);
    for (int i = 0; i < 6; i++) y = candle_affine(ctx, y, 0.5, 1.0); /* would reuse x's bytes */
    candle_tensor *out = candle_add(ctx, y, xv);
    CHECK_OK(ctx, candle_compute(ctx, out));
    int bad = 0;
    for (int i = 0; i < 32; i++) {
        double yi = -1.0 + 0.03125 * i;
        for (int k = 0; k < 6; k++) yi = yi * 0.5 + 1.0;
        double want = yi + exp(-1.0 + 0.03125 * (32 + i));
        bad += fabs(at(out, i) - want) > 1e-5 * (1 + fabs(want));
    }
    CHECK_MSG(bad == 0, "%d values wrong", bad);
    CHECK(!x->computed && !xv->storage);

    /* the output is a view of an intermediate: the intermediate stays */
    candle_tensor *z = candle_exp(ctx, candle_neg(ctx, a));
    candle_tensor *zt = candle_reshape(ctx, z, 2, (int64_t[]){8, 8});
    zt = candle_transpose(ctx, zt, 0, 1);
    candle_tensor *later = candle_tanh(ctx, candle_tanh(ctx, candle_tanh(ctx, zt)));
    candle_tensor *outs[2] = {later, zt};
    candle_graph *g = candle_graph_build(ctx, outs, 2);
    CHECK_OK(ctx, candle_graph_compute(ctx, g));
    CHECK(z->computed && zt->computed);
    CHECK(fabs(at(z, 9) - exp(-(-1.0 + 0.03125 * 9))) < 1e-6);
    double v = NAN;
    CHECK_OK(ctx, candle_tensor_get_f64(zt, (int64_t[]){1, 2}, &v)); /* z[2*8+1] */
    CHECK(fabs(v - exp(-(-1.0 + 0.03125 * 17))) < 1e-6);
    candle_ctx_free(ctx);
}

/* Outputs given to the graph and marked ones keep their data; the bytes of
 * the others are reused within the run. */
static void test_outputs(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *a = ramp(ctx, 256, 0.0f, 0.01f);
    candle_tensor *h1 = candle_scale(ctx, a, 2.0);
    candle_tensor *h2 = candle_scale(ctx, h1, 3.0);
    candle_tensor *h3 = candle_scale(ctx, h2, 5.0);
    candle_tensor *h4 = candle_scale(ctx, h3, 7.0);
    candle_tensor_set_output(h2);
    CHECK_OK(ctx, candle_compute(ctx, h4));
    CHECK(h2->computed && !h1->computed && !h3->computed && h4->computed);
    CHECK(h2->storage != h4->storage && h2->storage && h4->storage);
    CHECK(fabs(at(h2, 100) - 6.0) < 1e-5 && fabs(at(h4, 100) - 210.0) < 1e-4);
    /* h2 and h4 are live: a new graph is planned around them */
    candle_tensor *k = candle_scale(ctx, candle_scale(ctx, a, -1.0), -1.0);
    CHECK_OK(ctx, candle_compute(ctx, k));
    CHECK(fabs(at(h2, 100) - 6.0) < 1e-5 && fabs(at(h4, 100) - 210.0) < 1e-4 && fabs(at(k, 100) - 1.0) < 1e-6);
    /* a graph whose outputs are computed runs nothing (h1, h3 stay dropped) */
    uint64_t allocs = candle_ctx_alloc_count(ctx);
    candle_graph *g = candle_graph_build(ctx, &h4, 1);
    CHECK(candle_graph_n_nodes(g) == 5);
    CHECK_OK(ctx, candle_graph_compute(ctx, g));
    CHECK(!h1->computed && !h3->computed && h4->computed && candle_ctx_alloc_count(ctx) == allocs);
    candle_ctx_free(ctx);
}

/* The buffer survives resets; tensors made after the mark give their
 * regions back, so the next step plans into the same bytes. */
static void test_reset(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *w = ramp(ctx, 128, 1.0f, 0.0f);
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    size_t used = candle_ctx_mem_used(ctx), plan = 0;
    uint64_t allocs = 0;
    for (int step = 0; step < 4; step++) {
        candle_tensor *x = ramp(ctx, 128, (float)step, 1.0f);
        candle_tensor *y = candle_mul(ctx, candle_exp(ctx, candle_neg(ctx, x)), w);
        CHECK_OK(ctx, candle_compute(ctx, y));
        CHECK(fabs(at(y, 5) - exp(-(step + 5.0))) < 1e-9);
        if (step == 0) {
            plan = candle_ctx_plan_bytes(ctx);
            allocs = candle_ctx_alloc_count(ctx);
        }
        candle_ctx_reset(ctx, mark);
        CHECK(candle_ctx_plan_bytes(ctx) == plan && plan == 2 * 512);
        CHECK(candle_ctx_mem_used(ctx) == used + plan);
    }
    CHECK(candle_ctx_alloc_count(ctx) == allocs); /* input leaves come back from the cache */
    CHECK(at(w, 127) == 1.0);
    candle_ctx_free(ctx);
}

/* copy_into writes into its destination and needs no bytes of its own; into
 * an intermediate, it keeps the intermediate alive while it is read. */
static void test_copy_into(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *cache = ramp(ctx, 32, 0.0f, 0.0f); /* a leaf, like a KV cache */
    candle_tensor *a = ramp(ctx, 8, 1.0f, 1.0f);
    candle_tensor *w = candle_copy_into(ctx, candle_narrow(ctx, cache, 0, 8, 8), candle_exp(ctx, a));
    CHECK_OK(ctx, candle_compute(ctx, w));
    CHECK(candle_ctx_plan_bytes(ctx) == 64); /* only exp(a) */
    CHECK(cache->storage->kind != CANDLE_STORAGE_ARENA);
    CHECK(fabs(at(cache, 10) - exp(3.0)) < 1e-4 && at(cache, 7) == 0 && at(cache, 16) == 0);

    candle_tensor *t = candle_scale(ctx, a, 10.0);
    candle_tensor *wt = candle_copy_into(ctx, candle_narrow(ctx, t, 0, 0, 4),
                                         candle_narrow(ctx, candle_neg(ctx, a), 0, 0, 4));
    candle_tensor *th = candle_narrow(ctx, candle_tanh(ctx, candle_tanh(ctx, a)), 0, 0, 4);
    candle_tensor *r = candle_add(ctx, th, wt); /* tanh(tanh(a[:4])) - a[:4] */
    CHECK_OK(ctx, candle_compute(ctx, r));
    CHECK(fabs(at(r, 2) - (tanh(tanh(3.0)) - 3.0)) < 1e-5);
    CHECK(!t->storage && !wt->computed);
    candle_ctx_free(ctx);
}

/* Each op frees its input after running: two tensors' worth, not N. */
static void test_chain_reuse(void) {
    enum { N = 50, LEN = 1024 };
    for (int plan = 0; plan < 2; plan++) {
        candle_ctx *ctx = new_ctx(plan, 0);
        candle_tensor *x = ramp(ctx, LEN, 0.0f, 1.0f / LEN);
        size_t used0 = candle_ctx_mem_used(ctx);
        candle_tensor *y = x;
        for (int i = 0; i < N; i++) y = candle_affine(ctx, y, 1.0, 0.5);
        CHECK_OK(ctx, candle_compute(ctx, y));
        CHECK(fabs(at(y, LEN - 1) - ((LEN - 1.0) / LEN + N * 0.5)) < 1e-4);
        size_t peak = candle_ctx_mem_peak(ctx) - used0;
        if (plan) CHECK_MSG(peak == 2 * LEN * 4 && candle_ctx_plan_bytes(ctx) == 2 * LEN * 4, "peak %zu", peak);
        else CHECK_MSG(peak == (size_t)N * LEN * 4, "peak %zu", peak);
        candle_ctx_free(ctx);
    }
}

/* Random DAGs over several widths: the plan gives the same bits as
 * per-node storage, and repeated steps after a reset allocate nothing. */
static void random_dag(candle_ctx *ctx, uint32_t seed, int n, float *out, int64_t w) {
    candle_tensor *t[96];
    uint32_t r = seed;
    for (int i = 0; i < 3; i++) t[i] = ramp(ctx, w, (float)i - 1.0f, 0.125f);
    for (int i = 3; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        candle_tensor *x = t[(r >> 8) % (uint32_t)i], *y = t[(r >> 20) % (uint32_t)i];
        int op = (int)(r >> 29);
        t[i] = op == 0   ? candle_tanh(ctx, candle_add(ctx, x, y))
               : op == 1 ? candle_mul(ctx, x, candle_tanh(ctx, y))
               : op == 2 ? candle_sub(ctx, x, y)
               : op == 3 ? candle_narrow(ctx, candle_concat(ctx, (candle_tensor *[]){x, y}, 2, 0), 0, w / 2, w)
               : op == 4 ? candle_neg(ctx, x)
               : op == 5 ? candle_tanh(ctx, x)
               : op == 6 ? candle_affine(ctx, x, 0.5, 1)
                         : candle_abs(ctx, x);
    }
    candle_tensor *outs[2] = {t[n - 1], t[n / 2]};
    candle_graph *g = candle_graph_build(ctx, outs, 2);
    CHECK_OK(ctx, candle_graph_compute(ctx, g));
    CHECK_OK(ctx, candle_tensor_to_f32(outs[0], out));
    CHECK_OK(ctx, candle_tensor_to_f32(outs[1], out + w));
}

static void test_same_as_no_plan(void) {
    enum { W = 64, NODES = 96 };
    float got[2 * W], want[2 * W];
    int bad = 0;
    for (uint32_t seed = 1; seed <= 10; seed++) {
        candle_ctx *p = new_ctx(true, 0), *q = new_ctx(false, 0);
        candle_ctx_mark mark = candle_ctx_get_mark(p);
        uint64_t allocs = 0;
        for (int step = 0; step < 3; step++) {
            random_dag(p, seed, NODES, got, W);
            if (step == 0) allocs = candle_ctx_alloc_count(p);
            candle_ctx_reset(p, mark);
        }
        CHECK_MSG(candle_ctx_alloc_count(p) == allocs, "seed %u: %llu allocations after the first step",
                  seed, (unsigned long long)(candle_ctx_alloc_count(p) - allocs));
        random_dag(q, seed, NODES, want, W);
        bad += memcmp(got, want, sizeof got) != 0;
        candle_ctx_free(p);
        candle_ctx_free(q);
    }
    CHECK_MSG(bad == 0, "%d graphs differ from no_plan", bad);
}

static void test_oom(void) {
    candle_ctx *ctx = new_ctx(true, 1 << 20);
    candle_tensor *a = ramp(ctx, 128 * 1024, 0.0f, 1e-6f); /* 512 KiB of 1 MiB */
    candle_tensor *y = candle_exp(ctx, candle_exp(ctx, candle_exp(ctx, a)));
    /* 2 x 512 KiB: exp(a) runs inside the add (graph.c's fuse_elementwise),
     * neg(a) and z are stored; 3 x 512 KiB where nothing fuses (reference
     * kernels only) */
    candle_tensor *z = candle_add(ctx, candle_exp(ctx, a), candle_neg(ctx, a));
    CHECK(candle_compute(ctx, z) == CANDLE_ERR_OOM);
    const char *ref = getenv("CANDLE_CPU_REF");
    CHECK_CONTAINS(candle_errmsg(ctx),
                   ref && *ref && strcmp(ref, "0")
                       ? "out of memory: requested 1.50 MiB, available 512.00 KiB on cpu (memory plan of 3 tensors)"
                       : "out of memory: requested 1.00 MiB, available 512.00 KiB on cpu (memory plan of 2 tensors)");
    CHECK(!z->computed && candle_ctx_plan_bytes(ctx) == 0 && candle_ctx_mem_used(ctx) == 512 * 1024);
    candle_ctx_clear_error(ctx);
    /* a chain needs two at a time: still too much; one op fits exactly */
    CHECK(candle_compute(ctx, y) == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_errmsg(ctx), "requested 1.00 MiB, available 512.00 KiB");
    candle_ctx_clear_error(ctx);
    candle_tensor *e = candle_exp(ctx, a);
    CHECK_OK(ctx, candle_compute(ctx, e));
    CHECK(candle_ctx_mem_used(ctx) == 1 << 20 && fabs(at(e, 1000) - exp(1e-3)) < 1e-6);
    candle_ctx_free(ctx);
}

/* ---- stories260K: a real decode loop ---- */

static const char *stories_path(char *buf, size_t n) {
    return test_path("../shared/data/models/stories260K.gguf", buf, n);
}

enum { DECODE_STEPS = 48, WARM_STEPS = 8 };

/* Greedy decoding; allocs[i]: the session's system allocations after step i. */
static int decode(const candle_model *m, bool plan, int32_t *toks, float *last_logits,
                  uint64_t *allocs) {
    const candle_model_config *c = candle_model_get_config(m);
    cdl_ctx_set_default_no_plan(!plan);
    candle_session *s = NULL;
    candle_status st = candle_session_init(&s, m, &(candle_session_params){.n_ctx = 128});
    cdl_ctx_set_default_no_plan(false);
    CHECK_OK(NULL, st);
    if (st) return 1;
    float *logits = malloc((size_t)c->n_vocab * sizeof *logits);
    int32_t prompt[4] = {1, 403, 407, 261};
    CHECK_OK(NULL, candle_session_eval(s, prompt, 4, logits, false));
    for (int i = 0; i < DECODE_STEPS; i++) {
        int32_t best = 0;
        for (int64_t v = 1; v < c->n_vocab; v++)
            if (logits[v] > logits[best]) best = (int32_t)v;
        toks[i] = best;
        CHECK_OK(NULL, candle_session_eval(s, &best, 1, logits, false));
        allocs[i] = candle_ctx_alloc_count(s->ctx);
    }
    memcpy(last_logits, logits, (size_t)c->n_vocab * sizeof *logits);
    free(logits);
    candle_session_free(s);
    return 0;
}

static void test_decode_loop(void) {
    char path[1024];
    candle_model *m = NULL;
    if (!test_need_file("test_memplan decode loop", stories_path(path, sizeof path))) return;
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) return;
    int64_t nv = candle_model_get_config(m)->n_vocab;
    int32_t tp[DECODE_STEPS], tn[DECODE_STEPS];
    uint64_t ap[DECODE_STEPS], an[DECODE_STEPS];
    float *lp = malloc((size_t)nv * sizeof *lp), *ln = malloc((size_t)nv * sizeof *ln);
    if (!decode(m, true, tp, lp, ap) && !decode(m, false, tn, ln, an)) {
        CHECK(memcmp(tp, tn, sizeof tp) == 0);
        CHECK_MSG(memcmp(lp, ln, (size_t)nv * sizeof *lp) == 0, "logits differ from no_plan");
        uint64_t extra = ap[DECODE_STEPS - 1] - ap[WARM_STEPS - 1];
        CHECK_MSG(extra == 0, "%llu system allocations in %d warm decode steps",
                  (unsigned long long)extra, DECODE_STEPS - WARM_STEPS);
        /* without the plan every node allocates, every step */
        CHECK(an[DECODE_STEPS - 1] - an[WARM_STEPS - 1] >= (uint64_t)(DECODE_STEPS - WARM_STEPS) * 10);
        printf("test_memplan: stories260K: %llu allocations in %d warm decode steps (per-node: %llu)\n",
               (unsigned long long)extra, DECODE_STEPS - WARM_STEPS,
               (unsigned long long)(an[DECODE_STEPS - 1] - an[WARM_STEPS - 1]));
    }
    free(lp);
    free(ln);
    candle_model_free(m);
}

int main(void) {
    test_diamond();
    test_views();
    test_outputs();
    test_reset();
    test_copy_into();
    test_chain_reuse();
    test_same_as_no_plan();
    test_oom();
    test_decode_loop();
    return test_done("test_memplan");
}
