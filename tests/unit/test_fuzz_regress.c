/* Regressions found by the libFuzzer targets in tests/fuzz (one function
 * per finding, named after the target that found it). */
#include "test.h"
#include "candle/chat.h"

/* fuzz_chat: a long unknown format name pushed the list of known names out
 * of the error message (cut at CANDLE_ERRMSG_MAX). */
static void chat_long_unknown_name(void) {
    char name[600];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = 0;
    candle_chat_format f;
    CHECK(candle_chat_format_from_name(name, &f) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "(known: chatml, llama2, llama3, zephyr, gemma, phi3)");
    candle_chat_template t;
    CHECK(candle_chat_template_init(&t, "<|im_start|>", 12, name) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "phi3)");
}

int main(void) {
    chat_long_unknown_name();
    return test_done("test_fuzz_regress");
}
