/* Chat formats: recognised from the Jinja text of tokenizer.chat_template by
 * the markers each family's template writes, rendered with plain C. */
#include <stdlib.h>
#include <string.h>

#include "candle/chat.h"
#include "candle/jinja.h"
#include "../core/core-impl.h"
#include "../core/json-impl.h"
#include "../core/strbuf-impl.h"
#include "nn-impl.h"

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
    if (tmpl && len) {
        /* A template this interpreter cannot compile still serves plain
         * chats through the family formatter; tools then take the generic
         * way. */
        candle_status js = candle_jinja_parse(tmpl, len, &t->jinja);
        if (js == CANDLE_ERR_OOM) {
            candle_chat_template_free(t);
            return js;
        }
        if (js) t->jinja = NULL;
        t->tool_format = t->jinja ? candle_tool_format_detect(tmpl, len) : CANDLE_TOOL_GENERIC;
    }
    return CANDLE_OK;
}

void candle_chat_template_free(candle_chat_template *t) {
    if (!t) return;
    free(t->default_system);
    t->default_system = NULL;
    candle_jinja_free(t->jinja);
    t->jinja = NULL;
}

typedef cdl_strbuf sbuf;

static void put_n(sbuf *b, const char *x, size_t m) { cdl_strbuf_put(b, x, m); }

static void put(sbuf *b, const char *x) {
    if (x) put_n(b, x, strlen(x));
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
    if (b.failed) {
        free(b.s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
    }
    *out = b.s;
    return CANDLE_OK;
}

/* --- conversations with tools ------------------------------------------------- */

/* s as a JSON string literal. */
static void put_json_str(sbuf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    put(b, "\"");
    for (const char *p = s, *from = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c && c != '"' && c != '\\' && c >= 0x20) continue;
        put_n(b, from, (size_t)(p - from));
        if (!c) break;
        char e[8] = {'\\', (char)c, 0};
        if (c < 0x20) {
            if (c == '\n') e[1] = 'n';
            else if (c == '\t') e[1] = 't';
            else if (c == '\r') e[1] = 'r';
            else e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15], e[6] = 0;
        }
        put(b, e);
        from = p + 1;
    }
    put(b, "\"");
}

static void put_json_opt(sbuf *b, const char *s) {
    if (s) put_json_str(b, s);
    else put(b, "null");
}

/* JSON text s is an object (arguments as the templates want them: they
 * write `arguments | tojson`). */
static bool json_is_object_text(const char *s) {
    if (!s) return false;
    json_doc *d = NULL;
    bool ok = !json_parse(&d, s, strlen(s), "arguments", NULL) && json_root(d)->type == JSON_OBJECT;
    json_free(d);
    return ok;
}

static bool has_tool_parts(const candle_chat_msg *m, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (m[i].n_tool_calls || (m[i].role && !strcmp(m[i].role, "tool"))) return true;
    return false;
}

static candle_status check_msgs(const candle_chat_msg *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "chat: messages[%zu] has no role", i);
        for (size_t k = 0; k < m[i].n_tool_calls; k++)
            if (!m[i].tool_calls[k].name)
                return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                     "chat: messages[%zu].tool_calls[%zu] has no function name", i, k);
    }
    return CANDLE_OK;
}

static candle_status render_jinja(const candle_chat_template *t, const candle_chat_msg *m, size_t n,
                                  const candle_chat_options *o, char **out) {
    sbuf b = {0};
    put(&b, "{\"messages\": [");
    for (size_t i = 0; i < n; i++) {
        put(&b, i ? ", {\"role\": " : "{\"role\": ");
        put_json_str(&b, m[i].role);
        put(&b, ", \"content\": ");
        put_json_opt(&b, m[i].content);
        if (m[i].n_tool_calls) {
            put(&b, ", \"tool_calls\": [");
            for (size_t k = 0; k < m[i].n_tool_calls; k++) {
                const candle_chat_tool_call *c = &m[i].tool_calls[k];
                put(&b, k ? ", {\"id\": " : "{\"id\": ");
                put_json_opt(&b, c->id);
                put(&b, ", \"type\": \"function\", \"function\": {\"name\": ");
                put_json_str(&b, c->name);
                put(&b, ", \"arguments\": ");
                if (json_is_object_text(c->arguments)) put(&b, c->arguments);
                else put_json_str(&b, c->arguments ? c->arguments : "");
                put(&b, "}}");
            }
            put(&b, "]");
        }
        if (m[i].tool_call_id) put(&b, ", \"tool_call_id\": "), put_json_str(&b, m[i].tool_call_id);
        if (m[i].name) put(&b, ", \"name\": "), put_json_str(&b, m[i].name);
        put(&b, "}");
    }
    put(&b, "], \"tools\": ");
    put(&b, o->tools ? o->tools : "null");
    put(&b, o->add_generation_prompt ? ", \"add_generation_prompt\": true" : ", \"add_generation_prompt\": false");
    put(&b, ", \"bos_token\": ");
    put_json_str(&b, o->bos_token ? o->bos_token : "");
    put(&b, ", \"eos_token\": ");
    put_json_str(&b, o->eos_token ? o->eos_token : "");
    put(&b, "}");
    if (b.failed) {
        free(b.s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
    }
    char *text = NULL;
    size_t len = 0;
    candle_status st = candle_jinja_render(t->jinja, b.s, b.n, NULL, &text, &len);
    free(b.s);
    if (st) return st;
    size_t bl = o->strip_bos && o->bos_token ? strlen(o->bos_token) : 0;
    if (bl && len >= bl && !memcmp(text, o->bos_token, bl)) memmove(text, text + bl, len - bl + 1);
    *out = text;
    return CANDLE_OK;
}

/* The generic way: the tools in a system message, calls and results as
 * Hermes writes them, then the family formatter. */
static candle_status render_generic(const candle_chat_template *t, const candle_chat_msg *m, size_t n,
                                    const candle_chat_options *o, char **out) {
    const size_t n0 = n;
    candle_chat_msg *mm = calloc(n0 + 1, sizeof *mm);
    char **owned = calloc(n0 + 1, sizeof *owned); /* [n0]: the system text */
    candle_status st = mm && owned ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
    size_t k = 0;
    if (!st && o->tools) {
        json_doc *d = NULL;
        size_t tl = strlen(o->tools);
        if (json_parse(&d, o->tools, tl, "tools", NULL) || json_root(d)->type != JSON_ARRAY) {
            st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "chat: tools must be a JSON array");
        } else if (json_root(d)->n) {
            sbuf b = {0};
            bool has_sys = n && !strcmp(m[0].role, "system");
            if (has_sys && m[0].content) put(&b, m[0].content), put(&b, "\n\n");
            put(&b, "You can call functions to answer. They are, as JSON:\n<tools>\n");
            const json_value *r = json_root(d);
            for (size_t i = 0; i < r->n; i++) {
                const json_value *v = json_at(r, i);
                size_t end = v->type == JSON_OBJECT ? cdl_json_span(o->tools + v->offset, tl - v->offset) : 0;
                char *c = end ? cdl_json_compact(o->tools + v->offset, end) : NULL;
                if (c) put(&b, c), put(&b, "\n");
                free(c);
            }
            put(&b, "</tools>\nTo call one, answer with only:\n<tool_call>\n{\"name\": <the function's name>, "
                    "\"arguments\": <its arguments as a JSON object>}\n</tool_call>");
            owned[n0] = b.s;
            if (b.failed) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
            mm[k].role = "system";
            mm[k++].content = b.s;
            if (has_sys) m++, n--;
        }
        json_free(d);
    }
    for (size_t i = 0; !st && i < n; i++, k++) {
        mm[k] = m[i];
        if (!strcmp(m[i].role, "tool")) {
            sbuf b = {0};
            put(&b, "<tool_response>\n");
            put(&b, m[i].content);
            put(&b, "\n</tool_response>");
            mm[k].role = "user";
            mm[k].content = owned[i] = b.s;
            if (b.failed) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
        } else if (m[i].n_tool_calls) {
            sbuf b = {0};
            put(&b, m[i].content);
            for (size_t c = 0; c < m[i].n_tool_calls; c++) {
                if (b.n) put(&b, "\n");
                put(&b, "<tool_call>\n{\"name\": ");
                put_json_str(&b, m[i].tool_calls[c].name);
                put(&b, ", \"arguments\": ");
                const char *a = m[i].tool_calls[c].arguments;
                put(&b, json_is_object_text(a) ? a : "{}");
                put(&b, "}\n</tool_call>");
            }
            mm[k].content = owned[i] = b.s;
            if (b.failed) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: chat prompt");
        }
    }
    if (!st) st = candle_chat_apply(t, mm, k, o->add_generation_prompt, out);
    for (size_t i = 0; owned && i <= n0; i++) free(owned[i]);
    free(owned);
    free(mm);
    return st;
}

candle_status candle_chat_render(const candle_chat_template *t, const candle_chat_msg *msgs, size_t n,
                                 const candle_chat_options *o, char **out) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "chat: NULL output");
    *out = NULL;
    if (!t || (!msgs && n)) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "chat: NULL argument");
    candle_chat_options def = {.add_generation_prompt = true};
    if (!o) o = &def;
    candle_status st = check_msgs(msgs, n);
    if (st) return st;
    bool tools = (o->tools && strcmp(o->tools, "[]") && strcmp(o->tools, "null")) || has_tool_parts(msgs, n);
    if (t->jinja && (o->jinja_always || (tools && t->tool_format != CANDLE_TOOL_GENERIC)))
        return render_jinja(t, msgs, n, o, out);
    if (tools) return render_generic(t, msgs, n, o, out);
    return candle_chat_apply(t, msgs, n, o->add_generation_prompt, out);
}
