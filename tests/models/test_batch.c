/* candle_batch_eval against candle_session_eval: sequences at different
 * positions, prefill chunks beside decode steps, joining and leaving
 * between steps; the logits of each must be those of its session alone. */
#include <stdio.h>
#include <stdlib.h>

#include "candle/batch.h"
#include "candle/candle.h"
#include "test.h"

#define NS 3

static void compare(const float *got, const float *ref, int64_t n, const char *what) {
    double *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++) r[i] = ref[i];
    double e = test_nmse(got, r, (long)n);
    CHECK_MSG(e < 1e-9, "%s: nmse %g", what, e);
    free(r);
}

int main(void) {
    char path[4096];
    test_path("../shared/data/models/stories260K.gguf", path, sizeof path);
    candle_model *m = NULL;
    if (!test_need_file("test_batch", path)) return test_done("test_batch");
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) return test_done("test_batch");
    int64_t nv = candle_model_get_config(m)->n_vocab;
    candle_session *s[NS], *ref[NS];
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 64;
    for (int i = 0; i < NS; i++) {
        CHECK(!candle_session_init(&s[i], m, &sp));
        CHECK(!candle_session_init(&ref[i], m, &sp));
    }
    candle_batch *b = NULL;
    CHECK(!candle_batch_init(&b, m, 1));
    float *got = malloc((size_t)(NS * nv) * sizeof *got), *want = malloc((size_t)nv * sizeof *want);
    const int32_t toks[NS][16] = {{1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140},
                                  {1, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310},
                                  {1, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27}};
    /* steps: per sequence, how many tokens (0: not in this step) */
    const int64_t plan[][NS] = {{1, 0, 0}, {4, 0, 0}, {0, 3, 0}, {1, 4, 7}, {1, 1, 1}, {0, 1, 2}, {2, 0, 1}};
    int64_t done[NS] = {0};
    for (size_t stp = 0; stp < sizeof plan / sizeof plan[0]; stp++) {
        candle_batch_seq q[NS];
        int n = 0;
        for (int i = 0; i < NS; i++)
            if (plan[stp][i]) {
                q[n] = (candle_batch_seq){s[i], toks[i] + done[i], plan[stp][i], got + n * nv, NULL, NULL, 0};
                n++;
            }
        CHECK(!candle_batch_eval(b, q, n));
        n = 0;
        for (int i = 0; i < NS; i++) {
            if (!plan[stp][i]) continue;
            CHECK(!candle_session_eval(ref[i], toks[i] + done[i], plan[stp][i], want, false));
            char what[64];
            snprintf(what, sizeof what, "step %zu seq %d", stp, i);
            compare(got + n * nv, want, nv, what);
            done[i] += plan[stp][i];
            CHECK(candle_session_pos(s[i]) == done[i]);
            n++;
        }
    }
    /* errors change nothing */
    candle_batch_seq dup[2] = {{s[0], toks[0], 1, NULL, NULL, NULL, 0}, {s[0], toks[0], 1, NULL, NULL, NULL, 0}};
    CHECK(candle_batch_eval(b, dup, 2) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_batch_errmsg(b), "share a session");
    candle_batch_seq big = {s[1], toks[1], 60, NULL, NULL, NULL, 0};
    CHECK(candle_batch_eval(b, &big, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_batch_errmsg(b), "do not fit");
    const int32_t bad = (int32_t)nv;
    candle_batch_seq badq = {s[2], &bad, 1, NULL, NULL, NULL, 0};
    CHECK(candle_batch_eval(b, &badq, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_batch_errmsg(b), "out of range");
    CHECK(candle_batch_errcode(b) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_session_pos(s[0]) == done[0] && candle_session_pos(s[1]) == done[1]);
    free(got);
    free(want);
    candle_batch_free(b);
    for (int i = 0; i < NS; i++) {
        candle_session_free(s[i]);
        candle_session_free(ref[i]);
    }
    candle_model_free(m);
    return test_done("test_batch");
}
