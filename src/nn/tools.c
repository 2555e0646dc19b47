/* Tool calls: format detection from the chat template's text, parsing of a
 * reply into calls, and the grammar that forces one. Replies are model
 * output (untrusted): every byte sequence parses to a result. */
#include <stdlib.h>
#include <string.h>

#include "candle/grammar.h"
#include "candle/tools.h"
#include "../core/core-impl.h"
#include "../core/json-impl.h"
#include "../core/strbuf-impl.h"
#include "nn-impl.h"

static const char *const tool_format_names[CANDLE_TOOL_FORMAT_COUNT] = {
    [CANDLE_TOOL_GENERIC] = "generic", [CANDLE_TOOL_HERMES] = "hermes",
    [CANDLE_TOOL_LLAMA3] = "llama3",   [CANDLE_TOOL_MISTRAL] = "mistral",
};

const char *candle_tool_format_name(candle_tool_format f) {
    return (unsigned)f < CANDLE_TOOL_FORMAT_COUNT ? tool_format_names[f] : "unknown";
}

static const char *find_n(const char *s, size_t len, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = 0; m <= len && i <= len - m; i++)
        if (!memcmp(s + i, pat, m)) return s + i;
    return NULL;
}

candle_tool_format candle_tool_format_detect(const char *t, size_t len) {
    /* functionary's <function=name> blocks are a format of their own, not
     * parsed here: such a template takes the generic way */
    if (!t || find_n(t, len, "<function=")) return CANDLE_TOOL_GENERIC;
    if (find_n(t, len, "<tool_call>")) return CANDLE_TOOL_HERMES;
    if (find_n(t, len, "[TOOL_CALLS]")) return CANDLE_TOOL_MISTRAL;
    if (find_n(t, len, "<|python_tag|>") ||
        (find_n(t, len, "<|start_header_id|>") && find_n(t, len, "tools") &&
         find_n(t, len, "parameters")))
        return CANDLE_TOOL_LLAMA3;
    return CANDLE_TOOL_GENERIC;
}

/* --- a growing string -------------------------------------------------------- */

typedef cdl_strbuf tbuf;

static void tb_put(tbuf *b, const char *s, size_t n) { cdl_strbuf_put(b, s, n); }
static void tb_str(tbuf *b, const char *s) { cdl_strbuf_str(b, s); }

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* --- JSON spans ------------------------------------------------------------------ */

/* The end of the JSON object or array that starts at s[0] ('{' or '['):
 * brackets matched outside strings; 0 when it does not close within n. */
static size_t json_span(const char *s, size_t n) {
    int depth = 0;
    bool str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\') i++;
            else if (c == '"') str = false;
        } else if (c == '"') {
            str = true;
        } else if (c == '{' || c == '[') {
            if (++depth > 64) return 0;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return 0;
        }
    }
    return 0;
}

/* s[0..n) (valid JSON) with the whitespace outside strings removed. */
static void put_compact(tbuf *b, const char *s, size_t n) {
    bool str = false;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\') i++;
            else if (c == '"') str = false;
        } else if (c == '"') {
            str = true;
        } else if (is_ws(c)) {
            tb_put(b, s + from, i - from);
            from = i + 1;
        }
    }
    tb_put(b, s + from, n - from);
}

char *cdl_json_compact(const char *s, size_t n) {
    tbuf b = {0};
    tb_put(&b, "", 0);
    put_compact(&b, s, n);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

size_t cdl_json_span(const char *s, size_t n) { return json_span(s, n); }

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* --- parsing ------------------------------------------------------------------------ */

typedef struct calls {
    candle_tool_calls *out;
    size_t cap;
    bool oom;
} calls;

/* The call of the JSON object text[0..n) if it is one: "name" a string and
 * "arguments" (or "parameters") an object, a string holding one, or absent.
 * false when it is not a call (or on OOM, *oom set). */
bool cdl_tool_call_read(const char *text, size_t n, candle_tool_call *k, bool *oom) {
    memset(k, 0, sizeof *k);
    json_doc *d = NULL;
    if (json_parse(&d, text, n, "tool call", NULL)) {
        json_free(d);
        return false;
    }
    const json_value *root = json_root(d);
    const json_value *name = json_get(root, "name");
    const json_value *args = json_get(root, "arguments");
    if (!args) args = json_get(root, "parameters");
    const json_value *id = json_get(root, "id");
    bool ok = root->type == JSON_OBJECT && name && name->type == JSON_STRING && name->n > 0 &&
              (!args || args->type == JSON_OBJECT || args->type == JSON_STRING);
    tbuf a = {0};
    if (ok && !args) {
        tb_str(&a, "{}");
    } else if (ok && args->type == JSON_OBJECT) {
        size_t end = json_span(text + args->offset, n - args->offset);
        ok = end > 0;
        if (ok) put_compact(&a, text + args->offset, end);
    } else if (ok) { /* a string: it must hold an object */
        json_doc *inner = NULL;
        ok = !json_parse(&inner, args->u.str, args->n, "tool call arguments", NULL) &&
             json_root(inner)->type == JSON_OBJECT;
        json_free(inner);
        if (ok) put_compact(&a, args->u.str, args->n);
    }
    if (!ok || a.failed) {
        free(a.s);
        json_free(d);
        if (ok) *oom = true;
        return false;
    }
    k->name = dup_n(name->u.str, name->n);
    k->arguments = a.s;
    bool has_id = id && id->type == JSON_STRING; /* read before d (which holds id) goes */
    k->id = has_id ? dup_n(id->u.str, id->n) : NULL;
    json_free(d);
    if (!k->name || (has_id && !k->id)) {
        free(k->name);
        free(k->arguments);
        free(k->id);
        memset(k, 0, sizeof *k);
        *oom = true;
        return false;
    }
    return true;
}

/* Adds the call of the JSON object text[0..n) if it is one (above). */
static bool add_call(calls *c, const char *text, size_t n) {
    candle_tool_call k;
    if (!cdl_tool_call_read(text, n, &k, &c->oom)) return false;
    candle_tool_calls *o = c->out;
    if (o->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4;
        candle_tool_call *nc = realloc(o->calls, cap * sizeof *nc);
        if (!nc) {
            free(k.name);
            free(k.arguments);
            free(k.id);
            c->oom = true;
            return false;
        }
        o->calls = nc;
        c->cap = cap;
    }
    o->calls[o->n++] = k;
    return true;
}

static void drop_calls(candle_tool_calls *o, size_t from) {
    for (size_t i = from; i < o->n; i++) {
        free(o->calls[i].id);
        free(o->calls[i].name);
        free(o->calls[i].arguments);
    }
    o->n = from;
}

/* Trims s[0..n) into p/q. */
static void trim(const char **s, size_t *n) {
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* The whole of text[0..n) (trimmed) as one or more JSON objects separated by
 * whitespace or ';', each a call; all or none are added. */
static bool bare_calls(calls *c, const char *text, size_t n) {
    size_t base = c->out->n, i = 0;
    trim(&text, &n);
    if (!n || text[0] != '{') return false;
    while (i < n) {
        while (i < n && (is_ws(text[i]) || text[i] == ';')) i++;
        if (i == n) break;
        size_t end = text[i] == '{' ? json_span(text + i, n - i) : 0;
        if (!end || !add_call(c, text + i, end)) {
            drop_calls(c->out, base);
            return false;
        }
        i += end;
    }
    return c->out->n > base;
}

/* A JSON array of call objects at text[0..n) (trimmed, exactly the array). */
static bool array_calls(calls *c, const char *text, size_t n) {
    size_t base = c->out->n;
    trim(&text, &n);
    if (!n || text[0] != '[' || json_span(text, n) != n) return false;
    size_t i = 1;
    for (;;) {
        while (i < n && (is_ws(text[i]) || text[i] == ',')) i++;
        if (i >= n - 1) break;
        size_t end = text[i] == '{' ? json_span(text + i, n - 1 - i) : 0;
        if (!end || !add_call(c, text + i, end)) {
            drop_calls(c->out, base);
            return false;
        }
        i += end;
    }
    return c->out->n > base;
}

/* The whole of text[0..n) (trimmed) as one Markdown ```json fence holding
 * calls (objects, or an array of them), as Qwen2.5-Coder answers a tool
 * call about 3 times in 10; the closing fence may be missing (the server
 * ends such a reply with the object). All or none are added. */
static const char json_fence[] = "```json";
static bool fenced_calls(calls *c, const char *text, size_t n) {
    size_t m = sizeof json_fence - 1;
    trim(&text, &n);
    if (n <= m || memcmp(text, json_fence, m)) return false;
    bool closed = n >= m + 3 && !memcmp(text + n - 3, "```", 3);
    const char *b = text + m;
    size_t bn = n - m - (closed ? 3 : 0);
    trim(&b, &bn);
    return bn && (b[0] == '[' ? array_calls(c, b, bn) : bare_calls(c, b, bn));
}

static void add_content(tbuf *content, const char *s, size_t n) {
    trim(&s, &n);
    if (!n) return;
    if (content->n) tb_str(content, "\n");
    tb_put(content, s, n);
}

static void parse_hermes(calls *c, tbuf *content, const char *text, size_t len) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    size_t i = 0;
    while (i < len) {
        const char *p = find_n(text + i, len - i, open);
        if (!p) break;
        size_t at = (size_t)(p - text), body = at + sizeof open - 1, cl = sizeof close - 1;
        /* the call's object ends where its braces do (a string in it may
         * hold "</tool_call>"), then the closing tag; else at the tag */
        size_t j = body, span = 0, k;
        while (j < len && is_ws(text[j])) j++;
        if (j < len && text[j] == '{') span = json_span(text + j, len - j);
        for (k = j + span; span && k < len && is_ws(text[k]); k++) {}
        bool whole = span && k + cl <= len && !memcmp(text + k, close, cl);
        const char *q = whole ? text + k : find_n(text + body, len - body, close);
        size_t end = q ? (size_t)(q - text) : len;
        size_t after = q ? end + cl : len;
        const char *b = whole ? text + j : text + body;
        size_t bn = whole ? span : end - body;
        trim(&b, &bn);
        if (bn && b[0] == '{' && json_span(b, bn) == bn && add_call(c, b, bn)) {
            add_content(content, text + i, at - i);
        } else {
            add_content(content, text + i, after - i);
        }
        i = after;
    }
    if (i < len) add_content(content, text + i, len - i);
}

candle_status candle_tool_calls_parse(candle_tool_format f, const char *text, size_t len,
                                      candle_tool_calls *out) {
    if (!out || (!text && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool calls: NULL argument");
    memset(out, 0, sizeof *out);
    if (!text) text = "";
    calls c = {.out = out};
    tbuf content = {0};
    switch (f) {
    case CANDLE_TOOL_HERMES:
    case CANDLE_TOOL_GENERIC:
        parse_hermes(&c, &content, text, len);
        break;
    case CANDLE_TOOL_LLAMA3: {
        const char *s = text;
        size_t n = len;
        trim(&s, &n);
        static const char tag[] = "<|python_tag|>";
        if (n >= sizeof tag - 1 && !memcmp(s, tag, sizeof tag - 1)) s += sizeof tag - 1, n -= sizeof tag - 1;
        if (!bare_calls(&c, s, n)) add_content(&content, text, len);
        break;
    }
    case CANDLE_TOOL_MISTRAL: {
        const char *p = find_n(text, len, "[TOOL_CALLS]");
        size_t at = p ? (size_t)(p - text) : 0, from = p ? at + 12 : 0;
        if (array_calls(&c, text + from, len - from)) add_content(&content, text, at);
        else add_content(&content, text, len);
        break;
    }
    default:
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool calls: bad format %d", (int)f);
    }
    /* Hermes-style models sometimes answer with the bare JSON of the call,
     * or with it in a ```json fence */
    if (!c.oom && out->n == 0 && (f == CANDLE_TOOL_HERMES || f == CANDLE_TOOL_GENERIC) &&
        (bare_calls(&c, text, len) || fenced_calls(&c, text, len))) {
        content.n = 0;
        if (content.s) content.s[0] = 0;
    }
    if (c.oom || content.failed) {
        free(content.s);
        candle_tool_calls_free(out);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tool calls");
    }
    if (content.n) {
        out->content = content.s;
    } else {
        free(content.s);
    }
    return CANDLE_OK;
}

void candle_tool_calls_free(candle_tool_calls *c) {
    if (!c) return;
    drop_calls(c, 0);
    free(c->calls);
    free(c->content);
    memset(c, 0, sizeof *c);
}

size_t candle_tool_call_start(candle_tool_format f, const char *text, size_t len) {
    if (!text) return 0;
    const char *open = f == CANDLE_TOOL_MISTRAL ? "[TOOL_CALLS]" : "<tool_call>";
    if (f == CANDLE_TOOL_LLAMA3 || f == CANDLE_TOOL_MISTRAL) {
        /* bare JSON (or Mistral's array without its marker) opens the reply */
        size_t i = 0;
        while (i < len && is_ws(text[i])) i++;
        if (i == len) return 0;
        if (text[i] == '{' || (f == CANDLE_TOOL_MISTRAL && text[i] == '[')) return 0;
        if (f == CANDLE_TOOL_LLAMA3) open = "<|python_tag|>";
    }
    const char *p = find_n(text, len, open);
    if (p) return (size_t)(p - text);
    /* a prefix of the opening at the end */
    size_t m = strlen(open);
    for (size_t k = m - 1; k > 0; k--)
        if (k <= len && !memcmp(text + len - k, open, k)) return len - k;
    /* Hermes-style bare JSON, or a ```json fence (or its start), as the whole reply */
    if (f == CANDLE_TOOL_HERMES || f == CANDLE_TOOL_GENERIC) {
        size_t i = 0, m = sizeof json_fence - 1;
        while (i < len && is_ws(text[i])) i++;
        if (i == len || text[i] == '{') return 0;
        if (!memcmp(text + i, json_fence, len - i < m ? len - i : m)) return 0;
    }
    return len;
}

/* --- grammar ------------------------------------------------------------------------ */

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

/* g's rules renamed with prefix: every identifier outside literals, classes,
 * repetition counts and comments. */
static void put_renamed(tbuf *b, const char *g, const char *prefix) {
    size_t n = strlen(g);
    for (size_t i = 0; i < n;) {
        char c = g[i];
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < n && g[j] != close) j += g[j] == '\\' ? 2 : 1;
            if (j > n) j = n;
            tb_put(b, g + i, (j < n ? j + 1 : n) - i);
            i = j < n ? j + 1 : n;
        } else if (c == '{' || c == '#') {
            const char *e = strchr(g + i, c == '{' ? '}' : '\n');
            size_t j = e ? (size_t)(e - g) + 1 : n;
            tb_put(b, g + i, j - i);
            i = j;
        } else if (ident_start(c)) {
            size_t j = i;
            while (j < n && ident_char(g[j])) j++;
            tb_str(b, prefix);
            tb_put(b, g + i, j - i);
            i = j;
        } else {
            tb_put(b, g + i, 1);
            i++;
        }
    }
}

/* s as the inside of a GBNF string literal that matches the JSON text of s
 * (a JSON string's contents, already JSON-escaped). */
static void put_gbnf_lit(tbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            tb_str(b, c == '"' ? "\\\\\\\"" : "\\\\\\\\"); /* JSON's \" or \\, in GBNF */
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            char e[16] = "\\\\u00";
            e[5] = hex[c >> 4];
            e[6] = hex[c & 15];
            tb_put(b, e, 7);
        } else {
            tb_put(b, s + i, 1);
        }
    }
}

candle_status candle_tool_grammar(candle_tool_format f, const char *tools_json, size_t len,
                                  const char *only, bool parallel, char **out) {
    if (!out || !tools_json)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool grammar: NULL argument");
    *out = NULL;
    if ((unsigned)f >= CANDLE_TOOL_FORMAT_COUNT)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool grammar: bad format %d", (int)f);
    json_doc *d = NULL;
    if (json_parse(&d, tools_json, len, "tools", NULL)) {
        json_free(d);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s", candle_last_errmsg());
    }
    const json_value *root = json_root(d);
    candle_status st = CANDLE_OK;
    tbuf rules = {0}, alts = {0};
    int used = 0;
    if (root->type != JSON_ARRAY || root->n == 0)
        st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tools: must be a non-empty array");
    for (size_t i = 0; !st && i < root->n; i++) {
        const json_value *t = json_at(root, i);
        const json_value *fn = json_get(t, "function");
        const json_value *name = json_get(fn, "name");
        const json_value *params = json_get(fn, "parameters");
        if (!fn || fn->type != JSON_OBJECT || !name || name->type != JSON_STRING || !name->n) {
            st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                               "tools[%zu]: needs \"function\": {\"name\": ..., \"parameters\": ...}", i);
            break;
        }
        if (only && strcmp(only, name->u.str)) continue;
        char *g = NULL;
        if (params && params->type == JSON_OBJECT) {
            size_t end = json_span(tools_json + params->offset, len - params->offset);
            st = candle_json_schema_to_gbnf(tools_json + params->offset, end, &g);
            if (st) {
                char msg[400];
                snprintf(msg, sizeof msg, "%s", candle_last_errmsg());
                st = cdl_set_error(NULL, st, "tools[%zu] (%.60s) parameters: %s", i, name->u.str, msg);
                break;
            }
        } else if (params && params->type != JSON_NULL) {
            st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tools[%zu]: \"parameters\" must be an object", i);
            break;
        } else {
            st = candle_json_schema_to_gbnf("{\"type\":\"object\"}", 17, &g);
            if (st) break;
        }
        char prefix[32];
        snprintf(prefix, sizeof prefix, "f%d-", used);
        put_renamed(&rules, g, prefix);
        candle_free(g);
        /* the call's JSON with this name, the arguments by the schema */
        char head[48];
        snprintf(head, sizeof head, "c%d ::= ", used);
        tb_str(&rules, head);
        const char *key = f == CANDLE_TOOL_LLAMA3 ? "parameters" : "arguments";
        tb_str(&rules, "\"{\\\"name\\\": \\\"");
        put_gbnf_lit(&rules, name->u.str, name->n);
        tb_str(&rules, "\\\", \\\"");
        tb_str(&rules, key);
        tb_str(&rules, "\\\": \" ");
        tb_str(&rules, prefix);
        tb_str(&rules, "root \"}\"\n");
        char alt[32];
        snprintf(alt, sizeof alt, "%sc%d", used ? " | " : "", used);
        tb_str(&alts, alt);
        used++;
    }
    json_free(d);
    if (!st && !used)
        st = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tool_choice: no function named '%.60s' in tools",
                           only ? only : "");
    tbuf g = {0};
    if (!st) {
        tb_str(&g, "call ::= ");
        tb_str(&g, alts.s);
        tb_str(&g, "\n");
        switch (f) {
        case CANDLE_TOOL_LLAMA3:
            tb_str(&g, parallel ? "root ::= call (\";\" call)*\n" : "root ::= call\n");
            break;
        case CANDLE_TOOL_MISTRAL:
            /* [TOOL_CALLS] is a control token, left out of the grammar's
             * bytes: the array alone */
            tb_str(&g, parallel ? "root ::= \"[\" call (\", \" call)* \"]\"\n" : "root ::= \"[\" call \"]\"\n");
            break;
        default:
            tb_str(&g, "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n");
            tb_str(&g, parallel ? "root ::= block (\"\\n\" block)*\n" : "root ::= block\n");
            break;
        }
        tb_put(&g, rules.s, rules.n);
    }
    free(rules.s);
    free(alts.s);
    if (!st && (g.failed || rules.failed || alts.failed)) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tool grammar");
    if (st) {
        free(g.s);
        return st;
    }
    *out = g.s;
    return CANDLE_OK;
}
