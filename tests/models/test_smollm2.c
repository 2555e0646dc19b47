/* SmolLM2-135M-Instruct (Llama architecture, Q4_1 weights, Q8_0 tied
 * embeddings) on the reference kernels against llama.cpp running the same
 * weights dequantized to F32 (scripts/make_golden.py --dequantize): both
 * then compute in f32 from identical weights, so logits agree to 1e-3, the
 * top-1 token at every position and the 32-token greedy continuations are
 * identical. test_smollm2_fast covers the fast kernels against llama.cpp on
 * the Q4_1 file itself. */
#include "smollm2.h"

int main(void) {
    /* Read once per process by the CPU backend, before any context exists. */
    setenv("CANDLE_CPU_REF", "1", 1);
    candle_model *m = smollm2_load("test_smollm2");
    if (!m) return test_done("test_smollm2");
    /* Under a sanitizer the reference kernels are slow: one prompt, fewer tokens. */
    if (UNDER_SANITIZER) smollm2_check(m, "tests/data/golden/smollm2-135m-f32.txt", 1e-3, 1, 4);
    else smollm2_check(m, "tests/data/golden/smollm2-135m-f32.txt", 1e-3, 3, GOLDEN_MAX_TOK);
    candle_model_free(m);
    return test_done("test_smollm2");
}
