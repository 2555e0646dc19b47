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

/* fuzz_ct2: an empty tensor ([0, 65536, 65536]) whose other dimensions
 * multiply past 2^32 overflowed the stride computation (UBSan). */
static void ct2_empty_huge_dims(void) {
    static const unsigned char file[] = {
        6, 0, 0, 0,                                              /* version */
        12, 0, 'W', 'h', 'i', 's', 'p', 'e', 'r', 'S', 'p', 'e', 'c', 0, /* spec */
        1, 0, 0, 0,                                              /* revision */
        1, 0, 0, 0,                                              /* variables */
        2, 0, 'a', 0, 3,                                         /* name, rank */
        0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0,                      /* [0, 65536, 65536] */
        0, 0, 0, 0, 0,                                           /* f32, 0 bytes */
        0, 0, 0, 0,                                              /* aliases */
    };
    candle_ct2 *m = NULL;
    CHECK(candle_ct2_open_memory(&m, file, sizeof file, "x.bin") == CANDLE_ERR_FORMAT && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "dimensions multiply past 2^32 elements");
    candle_ct2_close(m);
}

int main(void) {
    chat_long_unknown_name();
    ct2_empty_huge_dims();
    return test_done("test_fuzz_regress");
}
