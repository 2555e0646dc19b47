/* SmolLM2-135M-Instruct (Llama architecture, Q4_1 weights, Q8_0 tied
 * embeddings) on the reference kernels against llama.cpp running the same
 * weights dequantized to F32 (scripts/make_golden.py --dequantize): both
 * then compute in f32 from identical weights, so logits agree to 1e-3, the
 * top-1 token at every position and the first 16 tokens of the greedy
 * continuations are identical. test_smollm2_fast covers the fast kernels
 * (32-token continuations) against llama.cpp on the Q4_1 file itself. */
#include "pkg_model.h"

static void check_config(const candle_model *m) {
    const candle_model_config *c = candle_model_get_config(m);
    CHECK(c->arch == CANDLE_ARCH_LLAMA && c->n_layer == 30 && c->n_embd == 576);
    CHECK(c->n_head == 9 && c->n_head_kv == 3 && c->head_dim == 64 && c->n_vocab == 49152);
    CHECK(c->rope_mode == CANDLE_ROPE_INTERLEAVED);
    CHECK_NEAR(c->rope_base, 100000.0, 1e-6);
}

int main(void) {
    /* the reference kernels in the backends of the contexts made from now on */
    candle_cpu_params cpu = candle_cpu_get_defaults();
    cpu.reference_only = true;
    CHECK(candle_cpu_set_defaults(&cpu) == CANDLE_OK);
    candle_model *m = pkg_model_load("test_smollm2", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!m) return test_done("test_smollm2");
    check_config(m);
    /* Under a sanitizer the reference kernels are slow: one prompt, fewer tokens. */
    const char *golden = "tests/data/golden/smollm2-135m-f32.txt";
    if (UNDER_SANITIZER) pkg_model_check(m, golden, 1e-3, 1, 4, 128);
    else pkg_model_check(m, golden, 1e-3, 3, 16, 128);
    candle_model_free(m);
    return test_done("test_smollm2");
}
