/* Fused elementwise chains (graph.c's fuse_elementwise): in a lazy one-off
 * compute, a unary node (silu, gelu, ...) whose only reader is an
 * add/sub/mul/div of its shape runs inside that reader (the FFN's
 * silu(gate) * up). The result must equal the two nodes computed one by one
 * (eager) bit for bit: unary and binary ops, the unary on either side,
 * contiguous rows of odd lengths (block and split bounds inside rows), a
 * sliced input (rows strided), the other operand broadcast along the row,
 * 1 and 2 threads. A unary with a second reader, or kept as an output, is
 * not fused (and keeps its values); a fused unary gets no storage from the
 * memory plan. The residual pair too: an add of two same-shape operands
 * whose only reader is a layer_norm runs inside the norm (with and without
 * its weight and bias, an operand sliced or broadcast; a second reader of
 * the sum: not fused), with the unfused bits.
 * CANDLE_CPU_REF=1 (no fast kernels): nothing is fused and the results still
 * match. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu-impl.h"
#include "core/ctx-impl.h"
#include "graph/graph-impl.h"
#include "test.h"

static candle_ctx *new_ctx(bool eager, int threads) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    p.n_threads = threads;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

static float *rand_floats(int64_t n, uint64_t seed, float scale) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = scale * (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return v;
}

static bool ref_only(void) {
    const char *e = getenv("CANDLE_CPU_REF");
    return e && *e && strcmp(e, "0") != 0;
}

static int position(const candle_graph *g, const candle_tensor *t) {
    for (int i = 0; i < candle_graph_n_nodes(g); i++)
        if (candle_graph_node(g, i) == t) return i;
    return -1;
}

typedef enum layout { CONTIG, SLICED, BCAST } layout;

static candle_tensor *unary(candle_ctx *ctx, candle_op op, candle_tensor *x) {
    switch (op) {
    case CANDLE_OP_SILU: return candle_silu(ctx, x);
    case CANDLE_OP_GELU_ERF: return candle_gelu(ctx, x);
    case CANDLE_OP_GELU_TANH: return candle_gelu_tanh(ctx, x);
    default: return candle_clamp(ctx, x, -0.25, 0.5);
    }
}

static candle_tensor *binary(candle_ctx *ctx, candle_op op, candle_tensor *a, candle_tensor *b) {
    switch (op) {
    case CANDLE_OP_ADD: return candle_add(ctx, a, b);
    case CANDLE_OP_SUB: return candle_sub(ctx, a, b);
    case CANDLE_OP_DIV: return candle_div(ctx, a, b);
    default: return candle_mul(ctx, a, b);
    }
}

/* y = bop(uop(x), o) (or bop(o, uop(x))) built in ctx from the same data;
 * *u gets the unary node. */
static candle_tensor *chain(candle_ctx *ctx, candle_op uop, candle_op bop, bool u_first,
                            layout lay, int64_t rows, int64_t cols, candle_tensor **u) {
    int64_t wide = lay == SLICED ? cols + 5 : cols;
    float *xf = rand_floats(rows * wide, 11 + (uint64_t)cols, 6.0f);
    float *of = rand_floats(rows * cols, 23 + (uint64_t)rows, 2.0f);
    /* keep divisors away from 0 */
    for (int64_t i = 0; i < rows * cols; i++) of[i] += of[i] < 0 ? -0.5f : 0.5f;
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){rows, wide}, xf);
    if (lay == SLICED) x = candle_narrow(ctx, x, 1, 3, cols);
    int64_t ocols = lay == BCAST ? 1 : cols;
    candle_tensor *o = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){rows, ocols}, of);
    free(xf);
    free(of);
    *u = unary(ctx, uop, x);
    return u_first ? binary(ctx, bop, *u, o) : binary(ctx, bop, o, *u);
}

static int first_diff(const candle_tensor *a, const candle_tensor *b, int64_t n) {
    const float *p = candle_tensor_data(a), *q = candle_tensor_data(b);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(p + i, q + i, sizeof *p)) return (int)i;
    return -1;
}

static void check_chain(candle_op uop, candle_op bop, bool u_first, layout lay, int64_t rows,
                        int64_t cols, int threads) {
    candle_ctx *lazy = new_ctx(false, threads), *eager = new_ctx(true, threads);
    if (!lazy || !eager) return;
    candle_tensor *ul, *ue;
    candle_tensor *yl = chain(lazy, uop, bop, u_first, lay, rows, cols, &ul);
    candle_tensor *ye = chain(eager, uop, bop, u_first, lay, rows, cols, &ue);
    CHECK_OK(lazy, candle_compute(lazy, yl));
    CHECK(ye && ye->computed);
    const candle_graph *g = lazy->gscratch.graph;
    int p = position(g, ul);
    /* broadcast as the first operand: the binary's fast kernel does not
     * take it, so neither does the fusion */
    bool want = !ref_only() && !(lay == BCAST && !u_first && cols > 1);
    CHECK_MSG(cdl_graph_fused(g, p) == want && (!want || position(g, yl) == p + 1),
              "%s %s u_first %d layout %d %lldx%lld: fused %d at %d (reader at %d), want %d",
              candle_op_name(uop), candle_op_name(bop), u_first, (int)lay, (long long)rows,
              (long long)cols, cdl_graph_fused(g, p), p, position(g, yl), want);
    if (want) CHECK(!ul->storage && !ul->computed); /* never stored */
    if (yl->computed && ye && ye->computed) {
        int bad = first_diff(yl, ye, rows * cols);
        CHECK_MSG(bad < 0, "%d threads, %s %s u_first %d layout %d %lldx%lld: element %d fused %.9g, "
                  "unfused %.9g", threads, candle_op_name(uop), candle_op_name(bop), u_first,
                  (int)lay, (long long)rows, (long long)cols, bad,
                  bad < 0 ? 0.0 : ((const float *)candle_tensor_data(yl))[bad],
                  bad < 0 ? 0.0 : ((const float *)candle_tensor_data(ye))[bad]);
    }
    candle_ctx_free(lazy);
    candle_ctx_free(eager);
}

/* A second reader of the unary, or the unary kept as an output: not fused,
 * and the values are the unfused ones. */
static void check_not_fused(int threads) {
    for (int kind = 0; kind < 3; kind++) {
        candle_ctx *lazy = new_ctx(false, threads), *eager = new_ctx(true, threads);
        if (!lazy || !eager) return;
        candle_tensor *ul, *ue;
        candle_tensor *yl = chain(lazy, CANDLE_OP_SILU, CANDLE_OP_MUL, true, CONTIG, 3, 577, &ul);
        candle_tensor *ye = chain(eager, CANDLE_OP_SILU, CANDLE_OP_MUL, true, CONTIG, 3, 577, &ue);
        candle_tensor *zl = yl, *ze = ye;
        if (kind == 0) { /* second reader after the first */
            zl = candle_add(lazy, yl, ul);
            ze = candle_add(eager, ye, ue);
        } else if (kind == 1) { /* second reader before the first */
            zl = candle_add(lazy, candle_scale(lazy, ul, 0.5), yl);
            ze = candle_add(eager, candle_scale(eager, ue, 0.5), ye);
        } else {
            candle_tensor_set_output(ul);
        }
        CHECK_OK(lazy, candle_compute(lazy, zl));
        const candle_graph *g = lazy->gscratch.graph;
        int p = position(g, ul);
        CHECK_MSG(p >= 0 && !cdl_graph_fused(g, p), "kind %d: unary at %d fused", kind, p);
        CHECK(zl->computed && ze && ze->computed);
        if (zl->computed && ze && ze->computed)
            CHECK_MSG(first_diff(zl, ze, 3 * 577) < 0, "kind %d: values differ", kind);
        if (kind == 2) {
            CHECK(ul->computed && ue->computed);
            if (ul->computed && ue->computed) CHECK(first_diff(ul, ue, 3 * 577) < 0);
        }
        candle_ctx_free(lazy);
        candle_ctx_free(eager);
    }
}

/* The fused unary holds no bytes: the plan of silu(x) * o needs only y
 * (x and o are leaves with data), where a tracked graph (no fusion) also
 * keeps the intermediate. */
static void check_plan_bytes(void) {
    size_t bytes[2];
    for (int tracked = 0; tracked < 2; tracked++) {
        candle_ctx *ctx = new_ctx(false, 1);
        if (!ctx) return;
        candle_tensor *u;
        candle_tensor *y = chain(ctx, CANDLE_OP_SILU, CANDLE_OP_MUL, true, CONTIG, 4, 1024, &u);
        if (tracked) {
            candle_graph *g = candle_graph_build(ctx, &y, 1);
            CHECK_OK(ctx, candle_graph_compute(ctx, g));
        } else {
            CHECK_OK(ctx, candle_compute(ctx, y));
        }
        bytes[tracked] = candle_ctx_plan_bytes(ctx);
        candle_ctx_free(ctx);
    }
    size_t y_bytes = 4 * 1024 * sizeof(float);
    if (ref_only()) CHECK(bytes[0] == bytes[1]);
    else
        CHECK_MSG(bytes[0] == y_bytes && bytes[1] == 2 * y_bytes,
                  "plan bytes fused %zu, unfused %zu (y %zu)", bytes[0], bytes[1], y_bytes);
}

/* layer_norm(x + r) (kind 0), the same with a second reader of the sum
 * (kind 1: not fused), r broadcast along the rows (kind 2: the add's view
 * of it has the sum's shape, rows read through its strides) */
static candle_tensor *add_norm(candle_ctx *ctx, int kind, bool params, layout lay, int64_t rows, int64_t cols,
                               candle_tensor **sum) {
    int64_t wide = lay == SLICED ? cols + 3 : cols;
    float *xf = rand_floats(rows * wide, 5 + (uint64_t)cols, 4.0f), *rf = rand_floats(rows * cols, 7, 1.0f);
    float *wf = rand_floats(cols, 9, 1.5f), *bf = rand_floats(cols, 13, 0.5f);
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){rows, wide}, xf);
    if (lay == SLICED) x = candle_narrow(ctx, x, 1, 2, cols);
    candle_tensor *r = kind == 2 ? candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &cols, rf)
                                 : candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){rows, cols}, rf);
    candle_tensor *w = params ? candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &cols, wf) : NULL;
    candle_tensor *b = params ? candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &cols, bf) : NULL;
    free(xf);
    free(rf);
    free(wf);
    free(bf);
    *sum = candle_add(ctx, x, r);
    candle_tensor *y = candle_layer_norm(ctx, *sum, w, b, params ? 1e-12 : 1e-5);
    return kind == 1 ? candle_add(ctx, y, *sum) : y;
}

static void check_add_norm(int kind, bool params, layout lay, int64_t rows, int64_t cols, int threads) {
    candle_ctx *lazy = new_ctx(false, threads), *eager = new_ctx(true, threads);
    if (!lazy || !eager) return;
    candle_tensor *sl, *se;
    candle_tensor *yl = add_norm(lazy, kind, params, lay, rows, cols, &sl);
    candle_tensor *ye = add_norm(eager, kind, params, lay, rows, cols, &se);
    CHECK_OK(lazy, candle_compute(lazy, yl));
    CHECK(ye && ye->computed);
    const candle_graph *g = lazy->gscratch.graph;
    int p = position(g, sl);
    bool want = !ref_only() && kind != 1;
    CHECK_MSG(p >= 0 && cdl_graph_fused(g, p) == want && (!want || position(g, yl) == p + 1),
              "add_norm kind %d params %d layout %d %lldx%lld: fused %d at %d, want %d", kind, params, (int)lay,
              (long long)rows, (long long)cols, p >= 0 && cdl_graph_fused(g, p), p, want);
    if (want) CHECK(!sl->storage && !sl->computed);
    if (yl->computed && ye && ye->computed)
        CHECK_MSG(first_diff(yl, ye, rows * cols) < 0, "add_norm kind %d params %d layout %d %lldx%lld, %d threads: "
                  "values differ", kind, params, (int)lay, (long long)rows, (long long)cols, threads);
    candle_ctx_free(lazy);
    candle_ctx_free(eager);
}

int main(void) {
    static const candle_op uops[] = {CANDLE_OP_SILU, CANDLE_OP_GELU_ERF, CANDLE_OP_GELU_TANH,
                                     CANDLE_OP_CLAMP};
    static const candle_op bops[] = {CANDLE_OP_MUL, CANDLE_OP_ADD, CANDLE_OP_SUB, CANDLE_OP_DIV};
    static const int64_t shapes[][2] = {{1, 1}, {1, 7}, {1, 576}, {3, 1537}, {2, 513}, {1, 4099},
                                        {5, 33}};
    for (int threads = 1; threads <= 2; threads++)
        for (int always = 0; always <= 1; always++) {
            cpu_set_always_parallel(always);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t a = 0; a < sizeof uops / sizeof uops[0]; a++)
                    for (size_t b = 0; b < sizeof bops / sizeof bops[0]; b++)
                        for (int first = 0; first <= 1; first++)
                            for (int lay = CONTIG; lay <= BCAST; lay++)
                                check_chain(uops[a], bops[b], first, (layout)lay, shapes[s][0],
                                            shapes[s][1], threads);
            check_not_fused(threads);
        }
    cpu_set_always_parallel(false);
    /* large enough to split across threads without forcing it */
    check_chain(CANDLE_OP_SILU, CANDLE_OP_MUL, true, CONTIG, 8, 8193, 2);
    check_chain(CANDLE_OP_GELU_TANH, CANDLE_OP_MUL, false, SLICED, 9, 4097, 2);
    check_plan_bytes();
    static const int64_t ln_shapes[][2] = {{1, 1}, {1, 7}, {3, 384}, {2, 1537}, {64, 384}};
    for (int threads = 1; threads <= 2; threads++)
        for (size_t s = 0; s < sizeof ln_shapes / sizeof ln_shapes[0]; s++)
            for (int kind = 0; kind < 3; kind++)
                for (int params = 0; params <= 1; params++)
                    for (int lay = CONTIG; lay <= SLICED; lay++)
                        check_add_norm(kind, params, (layout)lay, ln_shapes[s][0], ln_shapes[s][1], threads);
    return test_done("graph_fuse");
}
