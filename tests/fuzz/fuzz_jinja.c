/* libFuzzer target for the Jinja2 interpreter: an input is
 *   [template text] \0 [JSON context]
 * (no \0: all template, rendered on a fixed chat context). Beyond "no crash":
 * - a refused template or render has a message starting "jinja" (the
 *   context's JSON errors name "jinja context");
 * - the limits hold: output within max_output, and a refusal of a template
 *   the first render accepted never happens on a second, identical render
 *   (rendering is deterministic and leaves the template unchanged);
 * - the output is NUL-terminated at its reported length.
 * Seeds: tests/fuzz/gen_jinja_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "candle/candle.h"
#include "candle/jinja.h"
#include "fuzz-check.h"

static const char default_ctx[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]}, {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    const char *ctx = nul ? (const char *)nul + 1 : default_ctx;
    size_t clen = nul ? size - tlen - 1 : strlen(default_ctx);
    candle_jinja *t = NULL;
    if (candle_jinja_parse((const char *)data, tlen, &t)) {
        check(t == NULL && !strncmp(candle_last_errmsg(), "jinja", 5));
        return 0;
    }
    /* small limits, so that a hostile template is stopped quickly */
    candle_jinja_limits lim = {.max_output = 1 << 16, .max_memory = 8 << 20, .max_iterations = 20000, .max_depth = 16};
    char *out = NULL;
    size_t n = 0;
    candle_status st = candle_jinja_render(t, ctx, clen, &lim, &out, &n);
    if (st) {
        check(out == NULL && !strncmp(candle_last_errmsg(), "jinja", 5));
    } else {
        check(out != NULL && n <= lim.max_output && out[n] == 0);
        char *again = NULL;
        size_t n2 = 0;
        candle_status st2 = candle_jinja_render(t, ctx, clen, &lim, &again, &n2);
        /* strftime_now may differ across a second boundary: compare lengths only when it is used */
        bool clock = memmem(data, tlen, "strftime_now", 12) != NULL;
        check(st2 == CANDLE_OK && (clock || (n2 == n && !memcmp(out, again, n))));
        candle_free(again);
    }
    candle_free(out);
    candle_jinja_free(t);
    return 0;
}
