/* Gemma-3-270M on the default (fast) kernels against llama.cpp on the same
 * Q4_K_M file, including a ~560-token prompt that takes the sliding-window
 * layers past their 512-token window. Both sides round activations to 8 bits
 * for the quantized matmuls, so logits agree within 1.5 (measured up to 1.2
 * on logits near 35), the top-1 token wherever llama.cpp's top two are
 * further apart, and the greedy continuation up to llama.cpp's first step
 * whose top two are closer than that. The exact comparison is
 * test_gemma3; windows are checked exactly on the tiny models. */
#include "pkg_model.h"

int main(void) {
    candle_model *m = pkg_model_load("test_gemma3_fast", "gemma3", "gemma-3-270m-q4_k_m.gguf");
    if (!m) return test_done("test_gemma3_fast");
    pkg_model_check(m, "tests/data/golden/gemma3-270m.txt", 1.5, UNDER_SANITIZER ? 1 : 3, 8, 1024);
    candle_model_free(m);
    return test_done("test_gemma3_fast");
}
