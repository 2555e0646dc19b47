/* SmolLM2-135M-Instruct on the default (fast) kernels against llama.cpp on
 * the same Q4_1 file. Both multiply the quantized weights by activations
 * rounded to 8 bits (Q8_1 blocks), and small differences in that rounding
 * grow over 30 layers: logits agree within 1.0 (measured up to ~0.55), the
 * top-1 token wherever llama.cpp's top two are further apart than that, and
 * the greedy continuation up to llama.cpp's first step whose top two are
 * closer than that (past a near-tie, builds and thread counts may rightly
 * part). The strict comparison is test_smollm2. */
#include "pkg_model.h"

int main(void) {
    candle_model *m =
        pkg_model_load("test_smollm2_fast", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!m) return test_done("test_smollm2_fast");
    pkg_model_check(m, "tests/data/golden/smollm2-135m.txt", 1.0, UNDER_SANITIZER ? 1 : 3, 32, 128);
    candle_model_free(m);
    return test_done("test_smollm2_fast");
}
