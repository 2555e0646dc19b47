/* The paged KV cache against the contiguous one: sequences evaluated by
 * candle_batch_eval through block tables (chunks crossing block edges,
 * decode steps, sequences side by side) give the logits of
 * candle_session_eval; a prompt sharing a published prefix reuses its
 * blocks (reference-counted) and still gives the same logits; blocks go
 * back to the free list and the pool refuses what it cannot hold. An f16
 * pool against a session's f16 cache the same way, and (SmolLM2-135M, whose
 * head_dim 64 is whole q8_0 blocks; skipped without it) q8_0 and q4_0 pools
 * against sessions with q8_0 and q4_0 caches, rows of a partly filled block
 * copied (candle_kv_seq_share_rows) included. ctest runs this twice: on the
 * paged attention op, and with CANDLE_BATCH_GATHER=1 on the gather path
 * (test_kv_pool_gather). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/batch.h"
#include "candle/candle.h"
#include "candle/kv_pool.h"
#include "models/kv_pool-impl.h"
#include "pkg_model.h"
#include "test.h"

#define NT 40

/* Logits within nmse 1e-9 (f32 caches: summation order only), or tol. */
static double g_tol = 1e-9;

static void compare(const float *got, const float *ref, int64_t n, const char *what) {
    double *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++) r[i] = ref[i];
    double e = test_nmse(got, r, (long)n);
    CHECK_MSG(e < g_tol, "%s: nmse %g", what, e);
    free(r);
}

/* Evaluate toks[from..to) of a paged sequence in chunks of `chunk` and of a
 * reference session, comparing the last logits of each chunk. */
static void run(candle_batch *b, candle_kv_pool *pool, candle_kv_seq *ps, candle_session *ref,
                const int32_t *toks, int64_t from, int64_t to, int64_t chunk, int64_t nv,
                const char *name) {
    float *got = malloc((size_t)nv * sizeof *got), *want = malloc((size_t)nv * sizeof *want);
    for (int64_t i = from; i < to; i += chunk) {
        int64_t n = to - i < chunk ? to - i : chunk;
        candle_batch_seq q = {.pool = pool, .paged = ps, .tokens = toks + i, .n = n, .logits = got};
        CHECK(!candle_batch_eval(b, &q, 1));
        CHECK(!candle_session_eval(ref, toks + i, n, want, false));
        char what[96];
        snprintf(what, sizeof what, "%s: tokens %lld..%lld", name, (long long)i, (long long)(i + n));
        compare(got, want, nv, what);
    }
    free(got);
    free(want);
}

/* Rows of layer il's keys and values at positions 0..n that differ, byte
 * for byte, between the pool (through s's table) and session r's cache. */
static int64_t rows_differ(const candle_kv_pool *p, const candle_kv_seq *s, const candle_session *r, int64_t il,
                           int64_t n) {
    const candle_model_config *c = candle_model_get_config(p->model);
    size_t row = candle_dtype_row_size(p->k[il]->dtype, c->head_dim);
    const char *pk = candle_tensor_data(p->k[il]), *pv = candle_tensor_data(p->v[il]);
    const char *sk = candle_tensor_data(r->kv.k[il]), *sv = candle_tensor_data(r->kv.v[il]);
    int64_t bad = 0;
    for (int64_t j = 0; j < n; j++)
        for (int64_t h = 0; h < c->n_head_kv; h++) {
            /* pool [rows, Hkv, D], session [Hkv, n_ctx, D] */
            int64_t pr = (int64_t)s->blocks[j / CANDLE_KV_BLOCK] * CANDLE_KV_BLOCK + j % CANDLE_KV_BLOCK;
            size_t po = (size_t)(pr * c->n_head_kv + h) * row, so = (size_t)(h * r->kv.n_ctx + j) * row;
            bad += memcmp(pk + po, sk + so, row) != 0 || memcmp(pv + po, sv + so, row) != 0;
        }
    return bad;
}

/* A block-type pool of SmolLM2-135M against sessions whose KV caches have
 * the same type: sequence a in chunks across block edges, then decoding;
 * e shares a's two published blocks and copies the three published rows of
 * its third, then evaluates its own tokens in a block of its own (table
 * 0, 1, 3: not one run, so the gather path selects its rows). */
static void check_block_pool(candle_model *m, candle_dtype t, double tol) {
    const candle_model_config *c = candle_model_get_config(m);
    int64_t nv = c->n_vocab;
    char name[64];
    int32_t a[NT], e[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (int32_t)(1 + (i * 37) % 500);
        e[i] = i < 35 ? a[i] : (int32_t)(300 + i);
    }
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 64;
    sp.kv_type = t;
    candle_session *ra = NULL, *re = NULL;
    candle_batch *b = NULL;
    candle_kv_pool *pool = NULL;
    CHECK(!candle_session_init(&ra, m, &sp) && !candle_session_init(&re, m, &sp));
    CHECK(!candle_batch_init(&b, m, 1));
    CHECK_MSG(!candle_kv_pool_init(&pool, m, 8, t), "%s", candle_last_errmsg());
    if (!ra || !re || !b || !pool) goto done;
    g_tol = tol;
    candle_kv_seq sa, se;
    CHECK(!candle_kv_seq_init(&sa, 64) && !candle_kv_seq_init(&se, 64));
    snprintf(name, sizeof name, "smollm2 a prefill, %s pool", candle_dtype_name(t));
    run(b, pool, &sa, ra, a, 0, 35, 7, nv, name);
    snprintf(name, sizeof name, "smollm2 a decode, %s pool", candle_dtype_name(t));
    run(b, pool, &sa, ra, a, 35, NT, 1, nv, name);
    candle_kv_seq_publish(pool, &sa, a, 35);
    CHECK(candle_kv_seq_share_prefix(pool, &se, e, NT) == 32);
    int64_t rows = candle_kv_seq_share_rows(pool, &se, e, NT);
    CHECK_MSG(rows == 35 && se.n_blocks == 3 && se.blocks[2] == 3, "shared rows %lld, block %d", (long long)rows,
              se.n_blocks == 3 ? se.blocks[2] : -1);
    CHECK(!candle_session_eval(re, e, 35, NULL, false));
    snprintf(name, sizeof name, "smollm2 e after copied rows, %s pool", candle_dtype_name(t));
    run(b, pool, &se, re, e, 35, NT, 2, nv, name);
    /* layer 0's rows come from the same projections on both sides: the
     * same blocks, stored through the table and copied, byte for byte */
    int64_t da = rows_differ(pool, &sa, ra, 0, NT), de = rows_differ(pool, &se, re, 0, NT);
    CHECK_MSG(da == 0 && de == 0, "%s pool: layer 0 rows differ from the session's: a %lld, e %lld",
              candle_dtype_name(t), (long long)da, (long long)de);
    candle_kv_seq_free(pool, &sa);
    candle_kv_seq_free(pool, &se);
    g_tol = 1e-9;
done:
    candle_kv_pool_free(pool);
    candle_batch_free(b);
    candle_session_free(ra);
    candle_session_free(re);
}

/* CTest runs this file twice: CANDLE_BATCH_GATHER=1 is the gather path's pass. */
static bool gather_pass(void) {
    const char *gather = getenv("CANDLE_BATCH_GATHER");
    return gather && *gather && strcmp(gather, "0");
}

/* Speculative verification's rows (candle_batch_seq.n_logits): k tokens in
 * one step give every row the bits of k one-token steps, on the paged op
 * (attention per row; the quantized products, up to 256 rows, too). */
static void check_rows_as_steps(candle_model *m) {
    enum { P = 20, K = 6 };
    int64_t nv = candle_model_get_config(m)->n_vocab;
    int32_t t[P + K];
    for (int i = 0; i < P + K; i++) t[i] = (int32_t)(3 + (i * 53) % 900);
    candle_batch *b = NULL;
    candle_kv_pool *pool = NULL;
    CHECK(!candle_batch_init(&b, m, 2));
    CHECK(!candle_kv_pool_init(&pool, m, 8, CANDLE_DTYPE_F32));
    candle_kv_seq one, many;
    CHECK(!candle_kv_seq_init(&one, 64) && !candle_kv_seq_init(&many, 64));
    float *a = malloc((size_t)(K * nv) * sizeof *a), *r = malloc((size_t)(K * nv) * sizeof *r);
    if (!b || !pool || !a || !r) goto done;
    candle_batch_seq q = {.pool = pool, .paged = &one, .tokens = t, .n = P};
    CHECK(!candle_batch_eval(b, &q, 1));
    q.paged = &many;
    CHECK(!candle_batch_eval(b, &q, 1));
    for (int i = 0; i < K; i++) {
        q = (candle_batch_seq){.pool = pool, .paged = &one, .tokens = t + P + i, .n = 1, .logits = a + i * nv};
        CHECK(!candle_batch_eval(b, &q, 1));
    }
    q = (candle_batch_seq){.pool = pool, .paged = &many, .tokens = t + P, .n = K, .logits = r, .n_logits = K};
    CHECK(!candle_batch_eval(b, &q, 1));
    for (int i = 0; i < K; i++)
        CHECK_MSG(!memcmp(a + i * nv, r + i * nv, (size_t)nv * sizeof *a),
                  "row %d of a %d-token step differs from its one-token step", i, K);
    CHECK(one.pos == P + K && many.pos == P + K);
    q.n_logits = K + 1;
    CHECK(candle_batch_eval(b, &q, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_batch_errmsg(b), "logits of 7 rows wanted, it has 6");
done:
    free(a);
    free(r);
    candle_kv_seq_free(pool, &one);
    candle_kv_seq_free(pool, &many);
    candle_kv_pool_free(pool);
    candle_batch_free(b);
}

static void test_block_pools(void) {
    candle_model *m = pkg_model_load("test_kv_pool", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!m) return;
    /* a row of 64 elements: 256 bytes in f32, two blocks of 34 in q8_0
     * (17/64 of f32), two of 18 in q4_0 (9/64) */
    const candle_model_config *c = candle_model_get_config(m);
    CHECK(c->head_dim == 64);
    size_t f32 = candle_kv_pool_block_bytes(m, CANDLE_DTYPE_F32);
    CHECK(candle_kv_pool_block_bytes(m, CANDLE_DTYPE_Q8_0) * 64 == f32 * 17);
    CHECK(candle_kv_pool_block_bytes(m, CANDLE_DTYPE_Q4_0) * 64 == f32 * 9);
    /* Tolerances, measured: on the gather path the pool's rows go to the
     * session's own flash kernel and the logits are the same bits (nmse 0),
     * so any difference is a storage bug. The paged op sums in another
     * order, and this model's int8-quantized activations amplify the last
     * bits: an f32 pool against an f32 session already differs by up to
     * 1.3e-3, q8_0 by up to 1.5e-3 (bound 1e-2; a kernel that left one key
     * row of each run unconverted gave 0.18), q4_0 by up to 0.22 (a flipped
     * 4-bit rounding moves a key by 1/16 of its block's range; bound 1, the
     * exact checks are layer 0's bytes here and test_paged_attention). */
    bool gathered = gather_pass();
    check_block_pool(m, CANDLE_DTYPE_Q8_0, gathered ? 1e-12 : 1e-2);
    check_block_pool(m, CANDLE_DTYPE_Q4_0, gathered ? 1e-12 : 1.0);
    if (!gathered) check_rows_as_steps(m);
    candle_model_free(m);
}

int main(void) {
    cdl_batch_set_gather(gather_pass());
    char path[4096];
    test_path("../shared/data/models/stories260K.gguf", path, sizeof path);
    candle_model *m = NULL;
    if (!test_need_file("test_kv_pool", path)) return test_done("test_kv_pool");
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) return test_done("test_kv_pool");
    int64_t nv = candle_model_get_config(m)->n_vocab;
    int32_t a[NT], d[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (int32_t)(1 + (i * 37) % 500);
        d[i] = i < 35 ? a[i] : (int32_t)(400 + i); /* shares a's first 35 tokens */
    }
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 64;
    candle_session *ra = NULL, *rd = NULL, *rb = NULL;
    CHECK(!candle_session_init(&ra, m, &sp) && !candle_session_init(&rd, m, &sp) &&
          !candle_session_init(&rb, m, &sp));
    candle_batch *b = NULL;
    candle_kv_pool *pool = NULL;
    CHECK(!candle_batch_init(&b, m, 1));
    CHECK(!candle_kv_pool_init(&pool, m, 8, CANDLE_DTYPE_F32));
    candle_kv_seq sa, sd, sb;
    CHECK(!candle_kv_seq_init(&sa, 64) && !candle_kv_seq_init(&sd, 64) && !candle_kv_seq_init(&sb, 64));

    /* chunks of 7 cross block edges; then decode steps */
    run(b, pool, &sa, ra, a, 0, 35, 7, nv, "a prefill");
    run(b, pool, &sa, ra, a, 35, NT, 1, nv, "a decode");
    CHECK(candle_kv_pool_n_used(pool) == 3); /* 40 positions */
    candle_kv_seq_publish(pool, &sa, a, 35);

    /* d shares a's two full blocks (32 positions), evaluates the rest. a's
     * table is blocks 0,1,2 (one run: read in place); d's is 0,1,3 (gathered
     * through the table): both read paths are compared. */
    int64_t shared = candle_kv_seq_share_prefix(pool, &sd, d, NT);
    CHECK_MSG(shared == 32, "shared %lld", (long long)shared);
    CHECK(candle_kv_pool_n_used(pool) == 3);
    CHECK(!candle_session_eval(rd, d, 32, NULL, false));
    run(b, pool, &sd, rd, d, 32, NT, 3, nv, "d after shared prefix");
    CHECK(candle_kv_pool_n_used(pool) == 4);

    /* two paged sequences and a session in one batch */
    float *got = malloc((size_t)(3 * nv) * sizeof *got), *want = malloc((size_t)nv * sizeof *want);
    candle_batch_seq q[3] = {
        {.pool = pool, .paged = &sa, .tokens = a + 5, .n = 1, .logits = got},
        {.sess = rb, .tokens = a, .n = 9, .logits = got + nv},
        {.pool = pool, .paged = &sd, .tokens = d + 7, .n = 2, .logits = got + 2 * nv}};
    CHECK(!candle_batch_eval(b, q, 3));
    CHECK(!candle_session_eval(ra, a + 5, 1, want, false));
    compare(got, want, nv, "mixed: a");
    CHECK(!candle_session_eval(rd, d + 7, 2, want, false));
    compare(got + 2 * nv, want, nv, "mixed: d");
    CHECK(sa.pos == NT + 1 && sd.pos == NT + 2 && candle_session_pos(rb) == 9);

    /* the pool refuses what it cannot hold, without changing the sequence */
    candle_kv_seq sc;
    CHECK(!candle_kv_seq_init(&sc, 200));
    int32_t many[200] = {0};
    candle_batch_seq big = {.pool = pool, .paged = &sc, .tokens = many, .n = 150, .logits = NULL};
    CHECK(candle_batch_eval(b, &big, 1) == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_batch_errmsg(b), "blocks needed");
    CHECK(sc.pos == 0);

    /* freeing returns blocks; a's published prefix stays shareable */
    candle_kv_seq_free(pool, &sa);
    candle_kv_seq_free(pool, &sd);
    candle_kv_seq_free(pool, &sc);
    candle_kv_seq_free(pool, &sb);
    CHECK(candle_kv_pool_n_used(pool) == 0);
    candle_kv_seq se;
    CHECK(!candle_kv_seq_init(&se, 64));
    CHECK(candle_kv_seq_share_prefix(pool, &se, a, 35) == 32);
    CHECK(candle_kv_pool_n_used(pool) == 2);
    candle_kv_seq_free(pool, &se);

    free(got);
    free(want);
    candle_kv_pool_free(pool);
    /* an f16 pool: half the bytes a block, the batch path end to end, the
     * logits of the session's f16 cache within 1e-6 (measured up to 5e-8;
     * against the f32 session up to 2e-7: test_paged_attention checks the
     * stored rows' rounding exactly); other dtypes are refused */
    g_tol = 1e-6;
    CHECK(candle_kv_pool_block_bytes(m, CANDLE_DTYPE_F16) * 2 == candle_kv_pool_block_bytes(m, CANDLE_DTYPE_F32));
    candle_kv_pool *p16 = NULL;
    CHECK(!candle_kv_pool_init(&p16, m, 8, CANDLE_DTYPE_F16));
    candle_kv_seq s16;
    CHECK(!candle_kv_seq_init(&s16, 64));
    sp.kv_type = CANDLE_DTYPE_F16;
    candle_session *r16 = NULL;
    CHECK(!candle_session_init(&r16, m, &sp));
    run(b, p16, &s16, r16, a, 0, 35, 7, nv, "a prefill, f16 pool");
    run(b, p16, &s16, r16, a, 35, NT, 1, nv, "a decode, f16 pool");
    candle_kv_seq_free(p16, &s16);
    candle_session_free(r16);
    candle_kv_pool_free(p16);
    /* stories260K's head_dim 8 is no whole q8_0 block: refused, with a
     * block size still counted (rounded up to one block a row: 34 bytes for
     * f32's 32, never 0) */
    candle_kv_pool *pq = NULL;
    CHECK(candle_kv_pool_init(&pq, m, 8, CANDLE_DTYPE_Q8_0) == CANDLE_ERR_DTYPE && !pq);
    CHECK_CONTAINS(candle_last_errmsg(), "kv pool: q8_0 rows are blocks of 32, head_dim 8 is not a multiple");
    CHECK(candle_kv_pool_block_bytes(m, CANDLE_DTYPE_Q8_0) * 32 == candle_kv_pool_block_bytes(m, CANDLE_DTYPE_F32) * 34);
    CHECK(candle_kv_pool_init(&pq, m, 8, CANDLE_DTYPE_Q4_K) == CANDLE_ERR_DTYPE && !pq);
    CHECK_CONTAINS(candle_last_errmsg(), "kv pool: dtype q4_k (want f32, f16, bf16, q8_0 or q4_0)");
    candle_batch_free(b);
    candle_session_free(ra);
    candle_session_free(rd);
    candle_session_free(rb);
    candle_model_free(m);
    test_block_pools();
    return test_done(gather_pass() ? "test_kv_pool (gather path)" : "test_kv_pool");
}
