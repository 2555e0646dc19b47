/* The strict JSON reader (json-impl.h): a recursive-descent parser bounded by
 * max_depth. Values are built on a stack of pending children and copied into
 * one contiguous block when their array or object closes, so lookups by
 * index are O(1). All memory is in the document's chunk list: json_free
 * releases it at once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l, newlocale */
#endif
#include "json-impl.h"

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core-impl.h"

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

struct json_doc {
    chunk *chunks;
    json_value root;
};

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    const char *what;
    int max_depth;
    json_doc *doc;
    json_value *stack; /* children of the open arrays/objects */
    size_t n_stack, cap_stack;
    bool failed;
} parser;

static bool fail(parser *p, const char *reason) {
    if (!p->failed)
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: byte %zu: %s", p->what, p->pos, reason);
    p->failed = true;
    return false;
}

static bool oom(parser *p, size_t n) {
    if (!p->failed)
        cdl_set_error(NULL, CANDLE_ERR_OOM, "%s: out of memory (%zu bytes) reading JSON",
                         p->what, n);
    p->failed = true;
    return false;
}

static void *doc_alloc(parser *p, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = p->doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 16) ? n : (1u << 16);
        c = malloc(sizeof *c + cap);
        if (!c) return oom(p, n), NULL;
        c->cap = cap;
        c->used = 0;
        c->next = p->doc->chunks;
        p->doc->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    return r;
}

static bool push(parser *p, const json_value *v) {
    if (p->n_stack == p->cap_stack) {
        size_t cap = p->cap_stack ? 2 * p->cap_stack : 64;
        json_value *s = realloc(p->stack, cap * sizeof *s);
        if (!s) return oom(p, cap * sizeof *s);
        p->stack = s;
        p->cap_stack = cap;
    }
    p->stack[p->n_stack++] = *v;
    return true;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static bool literal(parser *p, const char *word, json_type t, json_value *out) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) return fail(p, "invalid literal");
    p->pos += n;
    out->type = t;
    return true;
}

static int hex4(const unsigned char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!k || k > n) return 0;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

/* A \u escape at s[pos] (after the backslash-u), with a following low
 * surrogate for a high one. */
static bool unicode_escape(parser *p, uint32_t *cp) {
    if (p->len - p->pos < 4) return fail(p, "truncated \\u escape");
    int hi = hex4(p->s + p->pos);
    if (hi < 0) return fail(p, "invalid \\u escape");
    p->pos += 4;
    if (hi >= 0xDC00 && hi <= 0xDFFF) return fail(p, "lone low surrogate in \\u escape");
    if (hi < 0xD800 || hi > 0xDBFF) return *cp = (uint32_t)hi, true;
    if (p->len - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
        return fail(p, "high surrogate without a low one in \\u escape");
    int lo = hex4(p->s + p->pos + 2);
    if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "high surrogate without a low one in \\u escape");
    p->pos += 6;
    *cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
    return true;
}

/* A string at the opening quote; unescaped into the document (escapes only
 * shrink, so the raw length bounds the output). */
static bool string(parser *p, json_value *out) {
    size_t start = ++p->pos, end = start;
    while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->len) return fail(p, "unterminated string");
    char *o = doc_alloc(p, end - start + 1);
    if (!o) return false;
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = p->s[p->pos];
        if (c < 0x20) return fail(p, "control character in string");
        if (c != '\\') {
            size_t k = utf8_len(p->s + p->pos, end - p->pos);
            if (!k) return fail(p, "invalid UTF-8 in string");
            memcpy(o + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        c = p->s[++p->pos];
        p->pos++;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *e = c ? strchr(from, c) : NULL;
        if (e) {
            o[n++] = to[e - from];
        } else if (c == 'u') {
            uint32_t cp;
            if (!unicode_escape(p, &cp)) return false;
            n += put_utf8(o + n, cp);
        } else {
            p->pos--;
            return fail(p, "invalid escape in string");
        }
    }
    p->pos = end + 1;
    o[n] = 0;
    out->type = JSON_STRING;
    out->u.str = o;
    out->n = n;
    return true;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static bool digits(parser *p) {
    size_t s = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    return p->pos > s;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool number(parser *p, json_value *out) {
    size_t start = p->pos;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            return fail(p, "leading zero in number");
    } else if (!digits(p)) {
        return fail(p, "invalid number");
    }
    bool integral = true;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        integral = false;
        if (!digits(p)) return fail(p, "digits expected after '.'");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        integral = false;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (!digits(p)) return fail(p, "digits expected in exponent");
    }
    char buf[512];
    size_t n = p->pos - start;
    if (n >= sizeof buf) return fail(p, "number too long");
    memcpy(buf, p->s + start, n);
    buf[n] = 0;
    pthread_once(&c_locale_once, make_c_locale);
    if (!c_locale) return oom(p, sizeof(locale_t));
    out->type = JSON_NUMBER;
    out->u.num = strtod_l(buf, NULL, c_locale);
    if (integral) {
        bool neg = buf[0] == '-';
        uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        out->is_int = true;
        for (const char *c = buf + neg; *c && out->is_int; c++) {
            unsigned d = (unsigned)(*c - '0');
            if (v > (lim - d) / 10) out->is_int = false;
            else v = v * 10 + d;
        }
        if (out->is_int) out->i64 = neg ? (int64_t)(0 - v) : (int64_t)v;
    }
    return true;
}

static bool value(parser *p, json_value *out, int depth);

/* The members since `base` on the stack become out's items. */
static bool close_container(parser *p, json_value *out, size_t base, json_type t) {
    size_t k = p->n_stack - base;
    out->type = t;
    out->n = t == JSON_OBJECT ? k / 2 : k;
    if (k) {
        out->u.items = doc_alloc(p, k * sizeof(json_value));
        if (!out->u.items) return false;
        memcpy(out->u.items, p->stack + base, k * sizeof(json_value));
    }
    p->n_stack = base;
    return true;
}

static bool container(parser *p, json_value *out, int depth, bool object) {
    if (depth >= p->max_depth) return fail(p, "nesting too deep");
    char close = object ? '}' : ']';
    size_t base = p->n_stack;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return close_container(p, out, base, object ? JSON_OBJECT : JSON_ARRAY);
    }
    for (;;) {
        json_value v = {0};
        skip_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "object key expected");
            v.offset = p->pos;
            if (!string(p, &v) || !push(p, &v)) return false;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, "':' expected");
            p->pos++;
            skip_ws(p);
            memset(&v, 0, sizeof v);
        }
        if (!value(p, &v, depth + 1) || !push(p, &v)) return false;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, object ? "unterminated object" : "unterminated array");
        if (p->s[p->pos] == close) break;
        if (p->s[p->pos] != ',') return fail(p, object ? "',' or '}' expected" : "',' or ']' expected");
        p->pos++;
    }
    p->pos++;
    return close_container(p, out, base, object ? JSON_OBJECT : JSON_ARRAY);
}

static bool value(parser *p, json_value *out, int depth) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "value expected");
    out->offset = p->pos;
    switch (p->s[p->pos]) {
    case '{': return container(p, out, depth, true);
    case '[': return container(p, out, depth, false);
    case '"': return string(p, out);
    case 't': return literal(p, "true", JSON_TRUE, out);
    case 'f': return literal(p, "false", JSON_FALSE, out);
    case 'n': return literal(p, "null", JSON_NULL, out);
    default:
        if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
            return number(p, out);
        return fail(p, "value expected");
    }
}

candle_status json_parse(json_doc **out, const char *text, size_t len, const char *what,
                         const json_parse_params *pp) {
    if (!out || (!text && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "json_parse: NULL argument");
    *out = NULL;
    json_doc *d = calloc(1, sizeof *d);
    if (!d) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: JSON document");
    parser p = {.s = (const unsigned char *)text,
                .len = len,
                .what = what ? what : "JSON",
                .max_depth = pp && pp->max_depth > 0 ? pp->max_depth : 64,
                .doc = d};
    bool ok = value(&p, &d->root, 0);
    if (ok) {
        skip_ws(&p);
        if (p.pos < p.len) ok = fail(&p, "trailing bytes after the JSON value");
    }
    free(p.stack);
    if (!ok) {
        json_free(d);
        return candle_last_error();
    }
    *out = d;
    return CANDLE_OK;
}

/* Read in doubling chunks: the size is not asked of the file, so pipes and
 * files that change while read are bounded the same way. */
candle_status json_parse_file(json_doc **out, const char *path, const char *name,
                              size_t max_bytes) {
    if (!name) name = path;
    FILE *f = fopen(path, "rb");
    if (!f) return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: cannot open: %s", name, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    candle_status s = CANDLE_OK;
    for (;;) {
        if (len == cap) {
            if (cap >= max_bytes) {
                s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: larger than %zu MiB", name,
                                     max_bytes >> 20);
                break;
            }
            cap = cap ? 2 * cap : 1 << 16;
            if (cap > max_bytes) cap = max_bytes;
            char *b = realloc(buf, cap);
            if (!b) {
                s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory reading %s", name);
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            if (ferror(f)) s = cdl_set_error(NULL, CANDLE_ERR_IO, "%s: read error", name);
            break;
        }
    }
    fclose(f);
    if (!s) s = json_parse(out, buf, len, name, NULL);
    free(buf);
    return s;
}

void json_free(json_doc *d) {
    if (!d) return;
    for (chunk *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d);
}

const json_value *json_root(const json_doc *d) { return d ? &d->root : NULL; }

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++) {
        const json_value *k = &obj->u.items[2 * i];
        if (k->n == n && !memcmp(k->u.str, key, n)) return k + 1;
    }
    return NULL;
}

const json_value *json_at(const json_value *arr, size_t i) {
    return arr && arr->type == JSON_ARRAY && i < arr->n ? &arr->u.items[i] : NULL;
}

const json_value *json_obj_key(const json_value *obj, size_t i) {
    return obj && obj->type == JSON_OBJECT && i < obj->n ? &obj->u.items[2 * i] : NULL;
}

const json_value *json_obj_val(const json_value *obj, size_t i) {
    return obj && obj->type == JSON_OBJECT && i < obj->n ? &obj->u.items[2 * i + 1] : NULL;
}

bool json_as_i64(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->is_int) return false;
    *out = v->i64;
    return true;
}

bool json_as_f64(const json_value *v, double *out) {
    if (!v || v->type != JSON_NUMBER) return false;
    *out = v->u.num;
    return true;
}

bool json_as_bool(const json_value *v, bool *out) {
    if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE)) return false;
    *out = v->type == JSON_TRUE;
    return true;
}

bool json_as_str(const json_value *v, const char **s, size_t *len) {
    if (!v || v->type != JSON_STRING) return false;
    *s = v->u.str;
    if (len) *len = v->n;
    return true;
}

bool json_str_eq(const json_value *v, const char *s) {
    return v && v->type == JSON_STRING && strlen(s) == v->n && !memcmp(v->u.str, s, v->n);
}

const char *json_type_name(json_type t) {
    static const char *const names[] = {"null",   "false", "true",  "number",
                                        "string", "array", "object"};
    return (unsigned)t <= JSON_OBJECT ? names[t] : "unknown";
}
