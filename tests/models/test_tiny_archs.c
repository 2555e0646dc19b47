/* Every architecture on a tiny random-weight model (scripts/make_tiny_models.py:
 * F32, two to six layers, sliding windows of 4 tokens, so the prompts pass
 * them) against llama.cpp's logits and greedy continuations on the same
 * files: qwen2 (q/k/v biases, untied output), qwen3 (q/k norms, head_dim !=
 * n_embd/n_head), gemma2 (soft-capped scores and logits, post norms,
 * alternating windows), gemma3 (q/k norms, window pattern 5:1 with a local
 * RoPE base), phi3 (fused qkv and gate/up). */
#include "golden.h"

/* Logit tolerance: f32 on both sides; llama.cpp's CPU GELU (gemma) goes
 * through an f16 lookup table, which moves logits by ~1e-3. */
typedef struct arch_case {
    const char *name;
    candle_arch arch;
    double tol;
} arch_case;

/* An f16 KV cache (`--kv-f16`) runs every family (the fused kernel reads it
 * directly; Gemma 2's soft-capped path converts V) and moves the prompt's
 * last logits by f16 rounding only. */
static void kv_f16_matches(const candle_model *m, const golden_prompt *p, const char *name) {
    int64_t nv = candle_model_get_config(m)->n_vocab;
    float *ref = malloc((size_t)nv * sizeof *ref), *got = malloc((size_t)nv * sizeof *got);
    candle_session *s32 = NULL, *s16 = NULL;
    CHECK_OK(NULL, candle_session_init(&s32, m, &(candle_session_params){.n_ctx = 64}));
    CHECK_OK(NULL, candle_session_init(&s16, m, &(candle_session_params){.n_ctx = 64, .kv_type = CANDLE_DTYPE_F16}));
    CHECK_OK(NULL, candle_session_eval(s32, p->tokens, p->n, ref, false));
    CHECK_MSG(candle_session_eval(s16, p->tokens, p->n, got, false) == CANDLE_OK, "%s --kv-f16: %s", name,
              candle_session_errmsg(s16));
    double d = 0, mx = 0;
    for (int64_t i = 0; i < nv; i++) {
        d = fmax(d, fabs(got[i] - ref[i]));
        mx = fmax(mx, fabs(ref[i]));
    }
    CHECK_MSG(d < 5e-3 * mx, "%s: f16 KV cache moves logits by %g (max |logit| %g)", name, d, mx);
    candle_session_free(s32);
    candle_session_free(s16);
    free(ref);
    free(got);
}

static void run_case(const arch_case *a) {
    char path[512], rel[128], gpath[512];
    snprintf(rel, sizeof rel, "tests/data/tiny/%s.gguf", a->name);
    candle_model *m = NULL;
    CHECK_OK(NULL, candle_model_load(&m, test_path(rel, path, sizeof path), NULL));
    if (!m) {
        fprintf(stderr, "%s: %s\n", a->name, candle_last_errmsg());
        return;
    }
    CHECK_MSG(candle_model_get_config(m)->arch == a->arch, "%s: arch %s", a->name,
              candle_arch_name(candle_model_get_config(m)->arch));
    static golden_prompt gp[2];
    snprintf(rel, sizeof rel, "tests/data/golden/tiny-%s.txt", a->name);
    int n = golden_read(test_path(rel, gpath, sizeof gpath), gp, 2);
    CHECK(n == 2);
    candle_session *s = NULL;
    CHECK_OK(NULL, candle_session_init(&s, m, &(candle_session_params){.n_ctx = 64}));
    for (int i = 0; s && i < n; i++) {
        double worst = check_golden(s, candle_model_get_config(m)->n_vocab, &gp[i], a->tol, 16);
        printf("%s prompt %d: max |logit - llama.cpp| = %.2e\n", a->name, i, worst);
    }
    candle_session_free(s);
    kv_f16_matches(m, &gp[0], a->name);
    candle_model_free(m);
}

int main(void) {
    static const arch_case cases[] = {
        {"qwen2", CANDLE_ARCH_QWEN2, 1e-4},   {"qwen3", CANDLE_ARCH_QWEN3, 1e-4},
        {"gemma2", CANDLE_ARCH_GEMMA2, 5e-3}, {"gemma3", CANDLE_ARCH_GEMMA3, 5e-3},
        {"phi3", CANDLE_ARCH_PHI3, 1e-4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    return test_done("test_tiny_archs");
}
