/* candle_session_set_abort (issue 22: Ctrl-C during a long prompt): the
 * callback is asked before each batch of at most 512 tokens; when it says
 * stop, the eval is CANDLE_ERR_CANCELLED, naming how far it got, and leaves
 * the cache as before; without it (or when it says go on) the logits are
 * those of an eval without a callback. tests/data/tiny/qwen2.gguf. */
#include "test.h"

typedef struct counter {
    int calls, stop_at; /* stop at call number stop_at (1-based); 0: never */
} counter;

static bool ask(void *user) {
    counter *c = user;
    c->calls++;
    return c->stop_at && c->calls >= c->stop_at;
}

int main(void) {
    char path[1024];
    test_path("tests/data/tiny/qwen2.gguf", path, sizeof path);
    if (!test_need_file("test_session_abort", path)) return test_done("test_session_abort");
    candle_model *m = NULL;
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) return test_done("test_session_abort");
    int64_t nv = candle_model_get_config(m)->n_vocab, n = 1300; /* three batches: 512, 512, 276 */
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 2048;
    candle_session *s = NULL;
    CHECK_OK(NULL, candle_session_init(&s, m, &sp));
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    float *want = malloc((size_t)nv * sizeof *want), *got = malloc((size_t)nv * sizeof *got);
    if (!s || !toks || !want || !got) return test_done("test_session_abort");
    for (int64_t i = 0; i < n; i++) toks[i] = (int32_t)(1 + (i * 37) % (nv - 1));
    CHECK_OK(NULL, candle_session_eval(s, toks, n, want, false));
    CHECK(candle_session_pos(s) == n);
    candle_session_reset(s);

    /* stopped before the second batch: nothing kept */
    counter c = {0, 2};
    candle_session_set_abort(s, ask, &c);
    CHECK(candle_session_eval(s, toks, n, got, false) == CANDLE_ERR_CANCELLED);
    CHECK_CONTAINS(candle_session_errmsg(s), "cancelled after 512 of 1300 tokens");
    CHECK(c.calls == 2 && candle_session_pos(s) == 0);
    /* before the first: the same */
    c = (counter){0, 1};
    CHECK(candle_session_eval(s, toks, n, got, false) == CANDLE_ERR_CANCELLED);
    CHECK(c.calls == 1 && candle_session_pos(s) == 0);
    /* a callback that says go on: asked once a batch, the same logits */
    c = (counter){0, 0};
    CHECK_OK(NULL, candle_session_eval(s, toks, n, got, false));
    CHECK(c.calls == 3 && candle_session_pos(s) == n);
    CHECK(!memcmp(got, want, (size_t)nv * sizeof *got));
    /* removed: not asked */
    candle_session_reset(s);
    candle_session_set_abort(s, NULL, NULL);
    c = (counter){0, 1};
    CHECK_OK(NULL, candle_session_eval(s, toks, 4, got, false));
    CHECK(c.calls == 0);
    CHECK(!strcmp(candle_status_name(CANDLE_ERR_CANCELLED), "cancelled"));
    free(toks);
    free(want);
    free(got);
    candle_session_free(s);
    candle_model_free(m);
    return test_done("test_session_abort");
}
