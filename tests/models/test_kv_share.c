/* Sharing published rows of the paged KV pool, as `candle serve` does for
 * prompts that arrive together: rows published while a prompt is still
 * being evaluated (a partly filled block), a share extended on a sequence
 * that already holds shared blocks, the rows of a partial block copied into
 * a block of the sharer's own (also when the source is a free block that is
 * handed back as the copy), two continuations of one prefix; and a batch whose
 * sequences skip their logits (prompt chunks that are not a prompt's last).
 * Every shared sequence's logits equal those of a contiguous session that
 * evaluated all of its tokens. */
#include <stdio.h>
#include <stdlib.h>

#include "candle/batch.h"
#include "candle/candle.h"
#include "candle/kv_pool.h"
#include "test.h"

#define NT 48

static candle_model *model;
static candle_batch *batch;
static int64_t nv;

static void compare(const float *got, const float *ref, const char *what) {
    double *r = malloc((size_t)nv * sizeof *r);
    for (int64_t i = 0; i < nv; i++) r[i] = ref[i];
    double e = test_nmse(got, r, (long)nv);
    CHECK_MSG(e < 1e-9, "%s: nmse %g", what, e);
    free(r);
}

/* Evaluate toks[from..to) of a paged sequence in one chunk, and all of
 * toks[0..to) in a fresh session; the last logits must agree. */
static void check_rest(candle_kv_pool *pool, candle_kv_seq *ps, const int32_t *toks, int64_t from,
                       int64_t to, const char *what) {
    float *got = malloc((size_t)nv * sizeof *got), *want = malloc((size_t)nv * sizeof *want);
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 64;
    candle_session *ref = NULL;
    CHECK(!candle_session_init(&ref, model, &sp));
    candle_batch_seq q = {.pool = pool, .paged = ps, .tokens = toks + from, .n = to - from,
                          .logits = got};
    CHECK(ps->pos == from);
    CHECK_MSG(!candle_batch_eval(batch, &q, 1), "%s: %s", what, candle_batch_errmsg(batch));
    CHECK(!candle_session_eval(ref, toks, to, want, false));
    compare(got, want, what);
    candle_session_free(ref);
    free(got);
    free(want);
}

/* Evaluate toks[from..to) in chunks of `chunk`, publishing after each. */
static void prefill(candle_kv_pool *pool, candle_kv_seq *ps, const int32_t *toks, int64_t from,
                    int64_t to, int64_t chunk) {
    for (int64_t i = from; i < to; i += chunk) {
        int64_t n = to - i < chunk ? to - i : chunk;
        candle_batch_seq q = {.pool = pool, .paged = ps, .tokens = toks + i, .n = n};
        CHECK(!candle_batch_eval(batch, &q, 1));
        candle_kv_seq_publish(pool, ps, toks, i + n);
    }
}

static void test_in_flight(candle_kv_pool *pool, const int32_t *a, const int32_t *b) {
    candle_kv_seq sa, sb, sc, sd;
    CHECK(!candle_kv_seq_init(&sa, 64) && !candle_kv_seq_init(&sb, 64) &&
          !candle_kv_seq_init(&sc, 64) && !candle_kv_seq_init(&sd, 64));
    /* a's first chunk: 10 rows of block 0, published partly filled */
    prefill(pool, &sa, a, 0, 10, 10);
    CHECK(candle_kv_seq_share_prefix(pool, &sc, b, NT) == 0);
    CHECK_MSG(candle_kv_seq_share_rows(pool, &sc, b, NT) == 10, "pos %lld", (long long)sc.pos);
    CHECK(candle_kv_pool_n_used(pool) == 2); /* the rows were copied: a block of c's own */
    check_rest(pool, &sc, b, 10, 20, "c after 10 copied rows");
    /* a goes on to 20 (block 1 partly filled): d shares block 0 ... */
    prefill(pool, &sa, a, 10, 20, 10);
    CHECK(candle_kv_seq_share_prefix(pool, &sd, b, NT) == 16);
    /* ... and once a reaches 37, block 1 too (a share extended), and copies
     * block 2's 5 rows: b = a's first 37 tokens, then others */
    prefill(pool, &sa, a, 20, 37, 17);
    CHECK(candle_kv_seq_share_prefix(pool, &sd, b, NT) == 32);
    CHECK(candle_kv_seq_share_rows(pool, &sd, b, NT) == 37);
    CHECK(sd.n_blocks == 3 && sd.blocks[0] == sa.blocks[0] && sd.blocks[1] == sa.blocks[1] &&
          sd.blocks[2] != sa.blocks[2]);
    /* nothing more to take once a block is partly filled */
    CHECK(candle_kv_seq_share_prefix(pool, &sd, b, NT) == 37);
    CHECK(candle_kv_seq_share_rows(pool, &sd, b, NT) == 37);
    check_rest(pool, &sd, b, 37, NT, "d after 32 shared and 5 copied rows");
    /* the last token is always left to evaluate */
    candle_kv_seq se;
    CHECK(!candle_kv_seq_init(&se, 64));
    CHECK(candle_kv_seq_share_prefix(pool, &se, a, 37) == 32);
    CHECK(candle_kv_seq_share_rows(pool, &se, a, 37) == 36);
    check_rest(pool, &se, a, 36, 37, "e: 36 of its 37 tokens shared");
    candle_kv_seq_free(pool, &se);
    candle_kv_seq_free(pool, &sa);
    candle_kv_seq_free(pool, &sb);
    candle_kv_seq_free(pool, &sc);
    candle_kv_seq_free(pool, &sd);
    CHECK(candle_kv_pool_n_used(pool) == 0);
}

/* A freed source block handed back by the free list as the copy keeps its
 * rows; b's duplicate of them is not the one shared. */
static void test_free_source(const int32_t *a) {
    candle_kv_pool *pool = NULL;
    CHECK(!candle_kv_pool_init(&pool, model, 2, CANDLE_DTYPE_F32));
    candle_kv_seq sa, sb, sc;
    CHECK(!candle_kv_seq_init(&sa, 32) && !candle_kv_seq_init(&sb, 32) && !candle_kv_seq_init(&sc, 32));
    prefill(pool, &sa, a, 0, 12, 12);
    prefill(pool, &sb, a, 0, 12, 12); /* same rows, computed again */
    candle_kv_seq_free(pool, &sa);      /* a's block: the oldest free one */
    CHECK(candle_kv_seq_share_rows(pool, &sc, a, 13) == 12);
    CHECK(sc.blocks[0] != sb.blocks[0]); /* a's block, not b's duplicate */
    check_rest(pool, &sc, a, 12, 13, "rows of a free block");
    candle_kv_seq_free(pool, &sb);
    candle_kv_seq_free(pool, &sc);
    candle_kv_pool_free(pool);
}

/* Two continuations of one prefix published side by side; once one's block
 * is handed out again, only the other is found. */
static void test_two_continuations(const int32_t *a) {
    candle_kv_pool *pool = NULL;
    CHECK(!candle_kv_pool_init(&pool, model, 4, CANDLE_DTYPE_F32));
    int32_t y[20];
    for (int i = 0; i < 20; i++) y[i] = i < 16 ? a[i] : (int32_t)(200 + i);
    candle_kv_seq sx, sy, sz, sv, su;
    CHECK(!candle_kv_seq_init(&sx, 32) && !candle_kv_seq_init(&sy, 32) &&
          !candle_kv_seq_init(&sz, 32) && !candle_kv_seq_init(&sv, 32) && !candle_kv_seq_init(&su, 32));
    prefill(pool, &sx, a, 0, 20, 20);
    CHECK(candle_kv_seq_share_prefix(pool, &sy, y, 20) == 16);
    CHECK(candle_kv_seq_share_rows(pool, &sy, y, 20) == 16); /* no rows of x's match */
    prefill(pool, &sy, y, 16, 20, 4);
    candle_kv_seq_free(pool, &sx);
    CHECK(candle_kv_seq_share_prefix(pool, &sz, a, 20) == 16);
    CHECK(candle_kv_seq_share_rows(pool, &sz, a, 20) == 19);
    check_rest(pool, &sz, a, 19, 20, "x's continuation");
    candle_kv_seq_free(pool, &sz);
    int32_t many[32] = {0};
    candle_batch_seq q = {.pool = pool, .paged = &sv, .tokens = many, .n = 32};
    CHECK(!candle_batch_eval(batch, &q, 1)); /* takes both free blocks: x's rows are gone */
    candle_kv_seq_free(pool, &sv);
    CHECK(candle_kv_seq_share_prefix(pool, &su, y, 20) == 16);
    CHECK(candle_kv_seq_share_rows(pool, &su, y, 20) == 19);
    check_rest(pool, &su, y, 19, 20, "y's continuation");
    candle_kv_seq_free(pool, &su);
    CHECK(!candle_kv_seq_init(&su, 32));
    CHECK(candle_kv_seq_share_prefix(pool, &su, a, 20) == 16);
    CHECK(candle_kv_seq_share_rows(pool, &su, a, 20) == 16);
    candle_kv_seq_free(pool, &su);
    candle_kv_seq_free(pool, &sy);
    candle_kv_pool_free(pool);
}

/* Sequences without logits in a batch: the others get theirs, and the keys
 * and values of all are written. */
static void test_no_logits(candle_kv_pool *pool, const int32_t *a, const int32_t *b) {
    candle_kv_seq sa, sb;
    CHECK(!candle_kv_seq_init(&sa, 64) && !candle_kv_seq_init(&sb, 64));
    float *got = malloc((size_t)(2 * nv) * sizeof *got);
    candle_batch_seq q[2] = {{.pool = pool, .paged = &sa, .tokens = a, .n = 9},
                             {.pool = pool, .paged = &sb, .tokens = b, .n = 7}};
    CHECK(!candle_batch_eval(batch, q, 2)); /* none wants logits */
    q[0] = (candle_batch_seq){.pool = pool, .paged = &sa, .tokens = a + 9, .n = 3, .logits = got};
    q[1] = (candle_batch_seq){.pool = pool, .paged = &sb, .tokens = b + 7, .n = 2};
    CHECK(!candle_batch_eval(batch, q, 2)); /* the first only */
    float *want = malloc((size_t)nv * sizeof *want);
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 64;
    candle_session *ref = NULL;
    CHECK(!candle_session_init(&ref, model, &sp));
    CHECK(!candle_session_eval(ref, a, 12, want, false));
    compare(got, want, "logits beside a sequence without");
    candle_session_free(ref);
    check_rest(pool, &sb, b, 9, 10, "after steps without logits");
    candle_kv_seq_free(pool, &sa);
    candle_kv_seq_free(pool, &sb);
    free(got);
    free(want);
}

int main(void) {
    char path[4096];
    test_path("../shared/data/models/stories260K.gguf", path, sizeof path);
    if (!test_need_file("test_kv_share", path)) return test_done("test_kv_share");
    CHECK_OK(NULL, candle_model_load(&model, path, NULL));
    if (!model) return test_done("test_kv_share");
    nv = candle_model_get_config(model)->n_vocab;
    int32_t a[NT], b[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (int32_t)(1 + (i * 37) % 500);
        b[i] = i < 37 ? a[i] : (int32_t)(300 + i);
    }
    candle_kv_pool *pool = NULL;
    CHECK(!candle_batch_init(&batch, model, 1));
    CHECK(!candle_kv_pool_init(&pool, model, 16, CANDLE_DTYPE_F32));
    test_in_flight(pool, a, b);
    test_free_source(a);
    test_two_continuations(a);
    test_no_logits(pool, a, b);
    candle_kv_pool_free(pool);
    candle_batch_free(batch);
    candle_model_free(model);
    return test_done("test_kv_share");
}
