/* Grouped products: in a lazy one-off compute, matmuls that read the same
 * activation are moved next to each other and run as one job (a layer's q,
 * k, v); the results must equal the same products computed one by one
 * (eager) bit for bit, for every weight type with a matrix-vector kernel,
 * mixed types in one group, row counts that are not multiples of 4 (chunk
 * bounds inside and across weights), 1 and 2 threads, and a product that
 * must not move ahead of a node it reads. Batch-1 quantized products alone
 * (eager) run through the same guided split, so both are also checked
 * against one matrix-vector kernel call over all rows. Plain-float weights
 * (f32, f16, bf16) take the same path with fast_matmul.c's dot_rows. The
 * rows are split into one range per thread (task), each taken from its
 * front and, by a thread done with its own, from its back: with 2 threads
 * each task in turn also leaves its range to the other
 * (cpu_matvecs_set_idle_owner), so the back halves down to the last
 * 16-row block are taken too. */
#include <string.h>

#include "backend/cpu/fast-impl.h"
#include "core/ctx-impl.h"
#include "backend/cpu/quant/gemv-impl.h"
#include "test.h"

#define K 256
#define MAXN 8

static candle_ctx *new_ctx(bool eager, int threads) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    p.n_threads = threads;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

static float *rand_floats(int64_t n, uint64_t seed) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return v;
}

typedef struct group_case {
    int n;
    candle_dtype t[MAXN];
    int64_t rows[MAXN];
} group_case;

/* The nodes of the last one-off compute, in run order. */
static const candle_graph *last_graph(candle_ctx *ctx) { return ctx->gscratch.graph; }

static int position(const candle_graph *g, const candle_tensor *t) {
    for (int i = 0; i < candle_graph_n_nodes(g); i++)
        if (candle_graph_node(g, i) == t) return i;
    return -1;
}

/* y_i = x w_i^T for each weight, computed lazily (grouped) and eagerly. */
static void check_group(const group_case *gc, int threads) {
    candle_ctx *lazy = new_ctx(false, threads), *eager = new_ctx(true, threads);
    if (!lazy || !eager) return;
    float *xf = rand_floats(K, 7);
    candle_tensor *xl = candle_tensor_from_f32(lazy, CANDLE_DTYPE_F32, 2, (int64_t[]){1, K}, xf);
    candle_tensor *xe = candle_tensor_from_f32(eager, CANDLE_DTYPE_F32, 2, (int64_t[]){1, K}, xf);
    candle_tensor *yl[MAXN], *ye[MAXN], *parts[MAXN];
    for (int i = 0; i < gc->n; i++) {
        float *wf = rand_floats(gc->rows[i] * K, 100 + (uint64_t)i);
        int64_t sh[2] = {gc->rows[i], K};
        candle_tensor *wl = candle_tensor_from_f32(lazy, gc->t[i], 2, sh, wf);
        candle_tensor *we = candle_tensor_from_f32(eager, gc->t[i], 2, sh, wf);
        yl[i] = candle_matmul(lazy, xl, candle_transpose(lazy, wl, 0, 1));
        ye[i] = candle_matmul(eager, xe, candle_transpose(eager, we, 0, 1));
        /* a user of each product between them in the post-order */
        parts[i] = candle_scale(lazy, yl[i], 1.0);
        candle_tensor_set_output(yl[i]); /* kept after the run for the comparison */
        free(wf);
    }
    candle_tensor *all = candle_concat(lazy, parts, gc->n, 1);
    CHECK_OK(lazy, candle_compute(lazy, all));
    const candle_graph *g = last_graph(lazy);
    int p0 = g ? position(g, yl[0]) : -1;
    for (int i = 1; i < gc->n; i++)
        CHECK_MSG(g && position(g, yl[i]) == p0 + i, "product %d at %d, first at %d", i,
                  g ? position(g, yl[i]) : -1, p0);
    for (int i = 0; i < gc->n; i++) {
        CHECK(ye[i] && yl[i]->computed);
        if (!ye[i] || !yl[i]->computed) continue;
        const float *a = candle_tensor_data(yl[i]), *b = candle_tensor_data(ye[i]);
        int bad = -1;
        for (int64_t r = 0; r < gc->rows[i] && bad < 0; r++)
            if (memcmp(a + r, b + r, sizeof *a)) bad = (int)r;
        CHECK_MSG(bad < 0, "%d threads, product %d (%s, %lld rows): row %d grouped %.9g, alone %.9g",
                  threads, i, candle_dtype_name(gc->t[i]), (long long)gc->rows[i], bad,
                  bad < 0 ? 0.0 : a[bad], bad < 0 ? 0.0 : b[bad]);
    }
    /* and the kernel called once over all rows (what the quantized matmul
     * kernel's own split computes) */
    for (int i = 0; i < gc->n; i++) {
        size_t xb = cdl_gemv_x_bytes(gc->t[i], K);
        bool plain = !candle_dtype_info(gc->t[i])->is_quantized;
        if ((!xb && !plain) || !yl[i]->computed) continue;
        const candle_tensor *w = yl[i]->src[1];
        void *xv = aligned_alloc(64, (xb + 63) & ~(size_t)63);
        float *want = malloc((size_t)gc->rows[i] * sizeof *want);
        if (plain) {
            cpu_simd_get()->dot_rows(gc->t[i], K, candle_tensor_data(w), (size_t)w->stride[1],
                                     gc->rows[i], xf, want, 1);
        } else {
            cdl_gemv_prep(gc->t[i], K, xf, xv);
            cdl_gemv_rows(gc->t[i], K, gc->rows[i], candle_tensor_data(w), (size_t)w->stride[1], xv,
                             want);
        }
        CHECK_MSG(!memcmp(want, candle_tensor_data(yl[i]), (size_t)gc->rows[i] * sizeof *want),
                  "%s %lld rows: grouped differs from one kernel call", candle_dtype_name(gc->t[i]),
                  (long long)gc->rows[i]);
        free(xv), free(want);
    }
    free(xf);
    candle_ctx_free(lazy);
    candle_ctx_free(eager);
}

/* w2 = w + w is computed in the graph after y1 = x w^T: y2 = x w2^T reads
 * it, so it must stay after it (and still be right). */
static void check_dependency(void) {
    candle_ctx *ctx = new_ctx(false, 2);
    if (!ctx) return;
    float *xf = rand_floats(K, 3), *wf = rand_floats(16 * K, 4);
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){1, K}, xf);
    candle_tensor *w = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){16, K}, wf);
    candle_tensor *y1 = candle_matmul(ctx, x, candle_transpose(ctx, w, 0, 1));
    /* reads y1 ([16, 1] broadcast over the rows) */
    candle_tensor *w2 = candle_add(ctx, w, candle_scale(ctx, candle_transpose(ctx, y1, 0, 1), 0.0));
    candle_tensor *y2 = candle_matmul(ctx, x, candle_transpose(ctx, w2, 0, 1));
    candle_tensor *sum = candle_add(ctx, y1, y2);
    candle_tensor_set_output(w2);
    CHECK_OK(ctx, candle_compute(ctx, sum));
    const candle_graph *g = last_graph(ctx);
    CHECK(g && position(g, y2) > position(g, w2));
    const float *s = candle_tensor_data(sum);
    for (int n = 0; s && n < 16; n++) {
        double want = 0;
        for (int k = 0; k < K; k++) want += 2.0 * xf[k] * wf[n * K + k];
        CHECK_NEAR(s[n], want, 1e-3);
    }
    free(xf), free(wf);
    candle_ctx_free(ctx);
}

int main(void) {
    const candle_dtype types[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0,
                                  CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_F32,
                                  CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    for (int run = 0; run < 4; run++) {
        /* 1 thread; 2 threads; 2 with the second range, then the first,
         * left to the other task */
        int threads = run ? 2 : 1;
        cpu_matvecs_set_idle_owner(run >= 2 ? run - 2 : -1);
        for (int always = 0; always <= 1; always++) {
            cpu_set_always_parallel(always);
            for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
                candle_dtype t = types[i];
                /* q, k, v like shapes, and odd row counts */
                check_group(&(group_case){3, {t, t, t}, {64, 16, 16}}, threads);
                check_group(&(group_case){3, {t, t, t}, {37, 5, 130}}, threads);
            }
            /* mixed types (a Q4_K_M-style layer) */
            check_group(&(group_case){4, {CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_K,
                                          CANDLE_DTYPE_Q5_0},
                                      {96, 33, 32, 520}},
                        threads);
            check_group(&(group_case){2, {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_0}, {1536, 1536}}, threads);
            /* plain floats beside quantized weights; f32 rows go eight at a
             * time, so odd counts put chunk bounds inside a pass unless they
             * are snapped */
            check_group(&(group_case){3, {CANDLE_DTYPE_F16, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_F32},
                                      {203, 77, 1101}},
                        threads);
            check_group(&(group_case){2, {CANDLE_DTYPE_F32, CANDLE_DTYPE_F32}, {1037, 2049}}, threads);
        }
    }
    cpu_set_always_parallel(false);
    cpu_matvecs_set_idle_owner(-1);
    check_dependency();
    return test_done("graph_group");
}
