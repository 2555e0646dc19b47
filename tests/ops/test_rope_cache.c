/* The fast rope's per-thread angle cache (fast_rope.c) against the
 * reference kernel: Gemma 3's two bases alternating in one graph, prefill
 * lengths crossing the cache's anchors, decoding walks forwards, backwards
 * and across anchors, negative and huge positions, sets too large for the
 * cache, both pairings. Results must not depend on the thread count (the
 * angles of a position are the same bits whichever thread made them). */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "ref-node.h"

/* Far tighter than f32's general bound: only float rounding of cos, sin
 * and the rotation separates the kernels (3e-15 measured), so an angle off
 * by 1e-6 (5e-13) fails. */
#define ROPE_NMSE 1e-13

static void check_ref(candle_ctx *ctx, const candle_tensor *y, const char *what) {
    CHECK_MSG(y && y->computed, "%s: %s", what, candle_errmsg(ctx));
    if (!y || !y->computed) return;
    CHECK_MSG(cpu_fast_kernel_for(y) == &cpu_fast_rope, "%s: fast rope not chosen", what);
    candle_tensor *r = ref_of(ctx, y, cpu_ref_rope);
    double *got = mt_values(y), *want = r ? mt_values(r) : NULL;
    if (got && want) {
        double e = mt_nmse(got, want, candle_tensor_numel(y));
        CHECK_MSG(e <= ROPE_NMSE, "%s: nmse %g", what, e);
    }
    free(got);
    free(want);
}

static candle_tensor *rope_at(candle_ctx *ctx, candle_tensor *x, candle_tensor *pos, candle_rope_mode mode,
                              int n_dims, double base, int64_t offset) {
    candle_rope_params p = {.mode = mode, .n_dims = n_dims, .freq_base = base, .freq_scale = 1.0,
                            .pos_offset = offset};
    return candle_rope(ctx, x, pos, &p);
}

/* Gemma 3's layers: five local (base 1e4) then a global one (base 1e6),
 * q [S, 4, 256] and k [S, 1, 256], all in one lazy graph; S = 70 from
 * position 45 crosses two anchors. Returns the outputs' values, one block
 * per node, for the thread-count comparison. */
#define G_LAYERS 7
#define G_S 70
static float *gemma_graph(int n_threads, bool interleaved) {
    candle_ctx *ctx = mt_ctx_threads(false, n_threads);
    int64_t qs[3] = {G_S, 4, 256}, ks[3] = {G_S, 1, 256};
    candle_tensor *xq = mt_input(ctx, CANDLE_DTYPE_F32, 3, qs, MT_CONTIG, 5, -2, 2);
    candle_tensor *xk = mt_input(ctx, CANDLE_DTYPE_F32, 3, ks, MT_CONTIG, 6, -2, 2);
    candle_rope_mode mode = interleaved ? CANDLE_ROPE_INTERLEAVED : CANDLE_ROPE_HALF;
    candle_tensor *outs[2 * G_LAYERS];
    for (int il = 0; il < G_LAYERS; il++) {
        double base = il % 6 == 5 ? 1e6 : 1e4;
        outs[2 * il] = rope_at(ctx, xq, NULL, mode, 0, base, 45);
        outs[2 * il + 1] = rope_at(ctx, xk, NULL, mode, 0, base, 45);
    }
    candle_graph *g = candle_graph_build(ctx, outs, 2 * G_LAYERS);
    CHECK_OK(ctx, g ? candle_graph_compute(ctx, g) : candle_errcode(ctx));
    size_t per = (size_t)(G_S * 5 * 256);
    float *all = calloc(per * G_LAYERS, sizeof(float));
    for (int i = 0; i < 2 * G_LAYERS && all; i++) {
        char what[96];
        snprintf(what, sizeof what, "gemma graph x%d %s node %d", n_threads, interleaved ? "pairs" : "half", i);
        check_ref(ctx, outs[i], what);
        if (outs[i] && outs[i]->computed)
            memcpy(all + (size_t)(i / 2) * per + (i % 2 ? (size_t)(G_S * 4 * 256) : 0), candle_tensor_data(outs[i]),
                   candle_tensor_nbytes(outs[i]));
    }
    candle_ctx_free(ctx);
    return all;
}

static void test_gemma_graph(void) {
    for (int inter = 0; inter < 2; inter++) {
        float *one = gemma_graph(1, inter);
        cpu_set_always_parallel(true);
        float *two = gemma_graph(2, inter);
        cpu_set_always_parallel(false);
        size_t n = (size_t)(G_S * 5 * 256) * G_LAYERS;
        CHECK_MSG(one && two && !memcmp(one, two, n * sizeof(float)), "gemma graph %s: 1 and 2 threads differ",
                  inter ? "pairs" : "half");
        free(one);
        free(two);
    }
}

/* One position at a time, the two bases alternating, as decoding walks:
 * forwards over three anchors, then back and across them in jumps. */
static void test_decode_walk(void) {
    candle_ctx *ctx = mt_ctx_threads(true, 1);
    int64_t s[3] = {1, 4, 256};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 3, s, MT_CONTIG, 7, -2, 2);
    static const int64_t jumps[] = {63, 31, 32, 5, 96, 95, 0, -1, -3, -40, 100031, 100032, 100000, 2147483647};
    int n_walk = 100, n_jump = (int)(sizeof jumps / sizeof jumps[0]);
    for (int i = 0; i < n_walk + n_jump; i++) {
        int64_t p = i < n_walk ? i : jumps[i - n_walk];
        for (int b = 0; b < 2; b++) {
            candle_ctx_mark m = candle_ctx_get_mark(ctx);
            char what[96];
            snprintf(what, sizeof what, "decode walk pos %lld base %s", (long long)p, b ? "1e6" : "1e4");
            check_ref(ctx, rope_at(ctx, x, NULL, CANDLE_ROPE_HALF, 0, b ? 1e6 : 1e4, p), what);
            candle_ctx_reset(ctx, m);
        }
    }
    candle_ctx_free(ctx);
}

/* Explicit positions out of order (each a seek from wherever the last one
 * left the thread's set), three sets in turn (more than the cache keeps),
 * partial rotary dims, and sets too large for the cache (n_dims > 256). */
static void test_positions_and_sets(int n_threads) {
    candle_ctx *ctx = mt_ctx_threads(true, n_threads);
    int32_t pos[9] = {40, 3, 3, 200, -5, 31, 32, 64, 1000};
    int64_t np = 9;
    candle_tensor *pt = candle_tensor_from_i32(ctx, 1, &np, pos);
    static const struct {
        int64_t D;
        int n_dims;
    } sets[] = {{256, 0}, {300, 256}, {300, 260}, {320, 0}, {10, 6}, {2, 0}};
    static const double bases[] = {1e4, 1e6, 5e5};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++)
        for (int mode = 0; mode < 2; mode++)
            for (int b = 0; b < 3; b++) {
                candle_ctx_mark m = candle_ctx_get_mark(ctx);
                int64_t s[4] = {2, 9, 3, sets[si].D};
                candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 4, s, MT_OFFSET, 8 + si, -2, 2);
                char what[128];
                snprintf(what, sizeof what, "positions x%d D %lld n_dims %d mode %d base %g", n_threads,
                         (long long)sets[si].D, sets[si].n_dims, mode, bases[b]);
                check_ref(ctx, rope_at(ctx, x, pt, (candle_rope_mode)mode, sets[si].n_dims, bases[b], 0), what);
                candle_ctx_reset(ctx, m);
            }
    candle_ctx_free(ctx);
}

int main(void) {
    test_gemma_graph();
    test_decode_walk();
    test_positions_and_sets(1);
    cpu_set_always_parallel(true);
    test_positions_and_sets(2);
    cpu_set_always_parallel(false);
    return test_done("test_rope_cache");
}
