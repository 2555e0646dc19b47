/* libFuzzer target for chat templates: an input is
 *   [u8 flags][template] \0 [format name] \0 [role] \0 [content] \0 [role] ...
 * (flags bit 0 add_generation_prompt, bit 1 force the named format). The
 * template text goes through format detection and system-prompt extraction,
 * the messages through rendering. Beyond "no crash":
 * - init succeeds or fails with the documented kinds, and a detected format
 *   agrees with the markers the template holds;
 * - an extracted default system prompt is literal text of the template,
 *   between "<|im_start|>system\n" and "<|im_end|>";
 * - rendering is deterministic, holds every user message's content, and is
 *   no longer than the messages plus a bounded framing per message.
 * Seeds: tests/fuzz/gen_chat_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "fuzz-check.h"

#define MAX_MSGS 64

static bool has(const char *s, size_t n, const char *pat) {
    return memmem(s, n, pat, strlen(pat)) != NULL;
}

/* The format the detector must pick, by the order its header documents. */
static int expected_format(const char *s, size_t n) {
    if (has(s, n, "<|im_start|>")) return CANDLE_CHAT_CHATML;
    if (has(s, n, "<|start_header_id|>")) return CANDLE_CHAT_LLAMA3;
    if (has(s, n, "<start_of_turn>")) return CANDLE_CHAT_GEMMA;
    if (has(s, n, "<|user|>")) return has(s, n, "<|end|>") ? CANDLE_CHAT_PHI3 : CANDLE_CHAT_ZEPHYR;
    if (has(s, n, "[INST]")) return CANDLE_CHAT_LLAMA2;
    return -1;
}

static void check_system(const char *tmpl, size_t len, const char *sys) {
    size_t n = strlen(sys);
    check(n > 0 && !strchr(sys, '{') && !strchr(sys, '\'') && !strchr(sys, '+'));
    bool found = false;
    static const char *const starts[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (int k = 0; k < 2 && !found; k++) {
        size_t m = strlen(starts[k]);
        for (const char *p = tmpl; !found && (p = memmem(p, len - (size_t)(p - tmpl), starts[k], m));
             p++) {
            size_t rest = len - (size_t)(p + m - tmpl);
            found = rest >= n + 10 && !memcmp(p + m, sys, n) && !memcmp(p + m + n, "<|im_end|>", 10);
        }
    }
    check(found);
}

static void render(const candle_chat_template *t, const candle_chat_msg *m, size_t n, bool gen) {
    char *a = NULL, *b = NULL;
    check(candle_chat_apply(t, m, n, gen, &a) == CANDLE_OK && a);
    check(candle_chat_apply(t, m, n, gen, &b) == CANDLE_OK && b && !strcmp(a, b));
    size_t bound = 64 + (t->default_system ? strlen(t->default_system) : 0);
    for (size_t i = 0; i < n; i++) {
        /* llama2 and gemma may write the system text a second time */
        bound += 64 + strlen(m[i].role) + 2 * strlen(m[i].content);
        if (!strcmp(m[i].role, "user")) check(strstr(a, m[i].content));
    }
    check(strlen(a) <= bound);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t flags = data[0];
    char *buf = malloc(size); /* fields NUL-terminated in place */
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    const char *field[2 + 2 * MAX_MSGS];
    size_t n_field = 0, lens[2 + 2 * MAX_MSGS];
    for (size_t i = 0, start = 0; i < size && n_field < 2 + 2 * MAX_MSGS; i++) {
        if (i == size - 1 || buf[i] == 0) {
            field[n_field] = buf + start;
            lens[n_field++] = i - start;
            start = i + 1;
        }
    }
    const char *tmpl = field[0];
    size_t tlen = lens[0];
    const char *name = (flags & 2) && n_field > 1 ? field[1] : NULL;

    candle_chat_template t;
    candle_status s = candle_chat_template_init(&t, tmpl, tlen, name);
    if (name) {
        candle_chat_format f;
        check((s == CANDLE_OK) == (candle_chat_format_from_name(name, &f) == CANDLE_OK));
        if (s != CANDLE_OK) check(s == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "chatml"));
    } else {
        int want = expected_format(tmpl, tlen);
        check((s == CANDLE_OK) == (want >= 0));
        if (s == CANDLE_OK) check((int)t.format == want);
        else check(s == CANDLE_ERR_UNSUPPORTED && strstr(candle_last_errmsg(), "name one"));
    }
    if (s == CANDLE_OK) {
        const char *fname = candle_chat_format_name(t.format);
        candle_chat_format back;
        check(candle_chat_format_from_name(fname, &back) == CANDLE_OK && back == t.format);
        if (t.default_system) {
            check(t.format == CANDLE_CHAT_CHATML);
            check_system(tmpl, tlen, t.default_system);
        }
        candle_chat_msg msgs[MAX_MSGS];
        size_t n = 0;
        for (size_t i = 2; i + 1 < n_field; i += 2) msgs[n++] = (candle_chat_msg){.role = field[i], .content = field[i + 1]};
        render(&t, msgs, n, flags & 1);
        candle_chat_template_free(&t);
        check(t.default_system == NULL);
    }
    /* an out-of-range format is refused, not rendered */
    candle_chat_template bad = {.format = CANDLE_CHAT_FORMAT_COUNT};
    char *out = (char *)1;
    check(candle_chat_apply(&bad, NULL, 0, true, &out) == CANDLE_ERR_INVALID_ARG && !out);
    free(buf);
    return 0;
}
