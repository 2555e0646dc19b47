/* Chat formats: recognised from the Jinja text of tokenizer.chat_template by
 * the markers each family's template writes, rendered with plain C. */
#include <stdlib.h>
#include <string.h>

#include "candle/chat.h"
#include "../core/core-impl.h"

static const char *const format_names[CANDLE_CHAT_FORMAT_COUNT] = {
    [CANDLE_CHAT_CHATML] = "chatml", [CANDLE_CHAT_LLAMA2] = "llama2",
    [CANDLE_CHAT_LLAMA3] = "llama3", [CANDLE_CHAT_ZEPHYR] = "zephyr",
    [CANDLE_CHAT_GEMMA] = "gemma",   [CANDLE_CHAT_PHI3] = "phi3",
};

const char *candle_chat_format_name(candle_chat_format f) {
    return (unsigned)f < CANDLE_CHAT_FORMAT_COUNT ? format_names[f] : "unknown";
}

static const char *known_names(void) { return "chatml, llama2, llama3, zephyr, gemma, phi3"; }

candle_status candle_chat_format_from_name(const char *name, candle_chat_format *out) {
    for (int i = 0; name && i < CANDLE_CHAT_FORMAT_COUNT; i++)
        if (!strcmp(name, format_names[i])) {
            *out = (candle_chat_format)i;
            return CANDLE_OK;
        }
    /* The name is cut short so that the list of known ones always fits. */
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                            "chat template: unknown format '%.40s' (known: %s)", name ? name : "",
                            known_names());
}

/* memmem on a length-bounded template (not NUL-terminated in the file). */
static const char *find(const char *s, size_t len, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = 0; m <= len && i <= len - m; i++)
        if (!memcmp(s + i, pat, m)) return s + i;
    return NULL;
}

candle_status candle_chat_format_detect(const char *t, size_t len, candle_chat_format *out) {
    if (!t || !len)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "chat template: the model has no tokenizer.chat_template; "
                                "name one (%s)",
                                known_names());
    if (find(t, len, "<|im_start|>")) *out = CANDLE_CHAT_CHATML;
    else if (find(t, len, "<|start_header_id|>")) *out = CANDLE_CHAT_LLAMA3;
    else if (find(t, len, "<start_of_turn>")) *out = CANDLE_CHAT_GEMMA;
    else if (find(t, len, "<|user|>") && find(t, len, "<|end|>")) *out = CANDLE_CHAT_PHI3;
    else if (find(t, len, "<|user|>")) *out = CANDLE_CHAT_ZEPHYR;
    else if (find(t, len, "[INST]")) *out = CANDLE_CHAT_LLAMA2;
    else {
        char head[61];
        size_t n = len < 60 ? len : 60;
        memcpy(head, t, n);
        head[n] = 0;
        for (size_t i = 0; i < n; i++)
            if (head[i] == '\n') head[i] = ' ';
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "chat template: not a known format (template starts \"%s...\"); "
                                "name one (%s)",
                                head, known_names());
    }
    return CANDLE_OK;
}

/* A system prompt written literally in a chatml template (inserted when the
 * conversation has none). Spans built from variables are skipped. */
static char *literal_system(const char *t, size_t len) {
    static const char *const starts[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (int k = 0; k < 2; k++) {
        const char *p = t, *end = t + len;
        while ((p = find(p, (size_t)(end - p), starts[k]))) {
            p += strlen(starts[k]);
            const char *q = find(p, (size_t)(end - p), "<|im_end|>");
            if (!q) break;
            if (q > p && !memchr(p, '\'', (size_t)(q - p)) && !memchr(p, '{', (size_t)(q - p)) &&
                !memchr(p, '+', (size_t)(q - p))) {
                char *s = malloc((size_t)(q - p) + 1);
                if (s) {
                    memcpy(s, p, (size_t)(q - p));
                    s[q - p] = 0;
                }
                return s;
            }
        }
    }
    return NULL;
}

candle_status candle_chat_template_init(candle_chat_template *t, const char *tmpl, size_t len,
                                        const char *name) {
    memset(t, 0, sizeof *t);
    candle_status s = name ? candle_chat_format_from_name(name, &t->format)
                           : candle_chat_format_detect(tmpl, len, &t->format);
    if (s) return s;
    if (t->format == CANDLE_CHAT_CHATML && tmpl) t->default_system = literal_system(tmpl, len);
    return CANDLE_OK;
}

void candle_chat_template_free(candle_chat_template *t) {
    if (!t) return;
    free(t->default_system);
    t->default_system = NULL;
}

/* A growing string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *x) {
    size_t m = strlen(x);
    if (b->oom) return;
    if (b->n + m + 1 > b->cap) {
        size_t cap = (b->n + m + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, x, m + 1);
    b->n += m;
}

static void put3(sbuf *b, const char *x, const char *y, const char *z) {
    put(b, x);
    put(b, y);
    put(b, z);
}

static void render_chatml(sbuf *b, const candle_chat_template *t, const candle_chat_msg *m,
                          size_t n, bool gen) {
    if (t->default_system && (n == 0 || strcmp(m[0].role, "system")))
        put3(b, "<|im_start|>system\n", t->default_system, "<|im_end|>\n");
    for (size_t i = 0; i < n; i++)
        put3(b, "<|im_start|>", m[i].role, "\n"), put3(b, m[i].content, "<|im_end|>\n", "");
    if (gen) put(b, "<|im_start|>assistant\n");
}

/* Llama 2 folds the system prompt into the first [INST]. */
static void render_llama2(sbuf *b, const candle_chat_msg *m, size_t n) {
    const char *sys = NULL;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            sys = m[i].content;
        } else if (!strcmp(m[i].role, "user")) {
            put(b, first ? "[INST] " : "<s>[INST] ");
            if (sys) put3(b, "<<SYS>>\n", sys, "\n<</SYS>>\n\n");
            put3(b, m[i].content, " [/INST]", "");
            sys = NULL;
            first = false;
        } else {
            put3(b, " ", m[i].content, " </s>");
        }
    }
}

static void render_llama3(sbuf *b, const candle_chat_msg *m, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++)
        put3(b, "<|start_header_id|>", m[i].role, "<|end_header_id|>\n\n"),
            put3(b, m[i].content, "<|eot_id|>", "");
    if (gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* <|role|>\n content END\n: zephyr ends turns with </s>, phi3 with <|end|>. */
static void render_tagged(sbuf *b, const candle_chat_msg *m, size_t n, bool gen, const char *end) {
    for (size_t i = 0; i < n; i++)
        put3(b, "<|", m[i].role, "|>\n"), put3(b, m[i].content, end, "\n");
    if (gen) put(b, "<|assistant|>\n");
}

/* Gemma has no system role: the system text opens the first user turn. */
static void render_gemma(sbuf *b, const candle_chat_msg *m, size_t n, bool gen) {
    const char *sys = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            sys = m[i].content;
            continue;
        }
        bool user = strcmp(m[i].role, "assistant") != 0;
        put3(b, "<start_of_turn>", user ? "user" : "model", "\n");
        if (sys && user) put3(b, sys, "\n\n", ""), sys = NULL;
        put3(b, m[i].content, "<end_of_turn>\n", "");
    }
    if (gen) put(b, "<start_of_turn>model\n");
}

candle_status candle_chat_apply(const candle_chat_template *t, const candle_chat_msg *msgs,
                                size_t n, bool gen, char **out) {
    *out = NULL;
    sbuf b = {0};
    put(&b, "");
    switch (t->format) {
    case CANDLE_CHAT_CHATML: render_chatml(&b, t, msgs, n, gen); break;
    case CANDLE_CHAT_LLAMA2: render_llama2(&b, msgs, n); break;
    case CANDLE_CHAT_LLAMA3: render_llama3(&b, msgs, n, gen); break;
    case CANDLE_CHAT_ZEPHYR: render_tagged(&b, msgs, n, gen, "</s>"); break;
    case CANDLE_CHAT_GEMMA: render_gemma(&b, msgs, n, gen); break;
    case CANDLE_CHAT_PHI3: render_tagged(&b, msgs, n, gen, "<|end|>"); break;
    default:
        free(b.s);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "chat template: bad format %d",
                                (int)t->format);
    }
    if (b.oom) {
        free(b.s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
    }
    *out = b.s;
    return CANDLE_OK;
}
