/* JSON Schema to GBNF for the basic subset: type (one or a list), properties
 * with required, enum, const, items with minItems/maxItems, minLength/
 * maxLength of strings, pattern (json_regex.c), minimum/maximum and the
 * exclusive forms on integers and (whole bounds) numbers, multipleOf on
 * integers (json_range.c), anyOf/oneOf, $ref into the document's $defs or
 * definitions, string formats date, time, date-time, uuid. Objects carry only their declared
 * properties (required ones first, in order, then the optional ones), which
 * satisfies the schema whatever additionalProperties says. A keyword that
 * would constrain the value but is not enforced here is refused by name, so
 * a schema is never silently loosened. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/grammar.h"
#include "../core/core-impl.h"
#include "../core/json-impl.h"
#include "../core/strbuf-impl.h"
#include "nn-impl.h"

#define SCHEMA_MAX_OUT (4u << 20) /* bytes of grammar text */
#define SCHEMA_MAX_DEPTH 32

typedef cdl_strbuf sbuf;

/* failed: out of memory or past SCHEMA_MAX_OUT */
static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > SCHEMA_MAX_OUT) b->failed = true;
    cdl_strbuf_put(b, s, n);
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...) CANDLE_PRINTF(2, 3);
static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

#define SCHEMA_MAX_DEFS 256

typedef struct conv {
    sbuf rules; /* the generated rules, one a line */
    int n_rules;
    const json_value *root;
    /* $ref targets: rule dK is defs[K], generated after the schema that
     * refers to it, so definitions may refer to each other recursively */
    const json_value *defs[SCHEMA_MAX_DEFS];
    int n_defs;
    char err[200];
    bool failed;
} conv;

static bool refuse(conv *c, const json_value *at, const char *fmt, ...) CANDLE_PRINTF(3, 4);
static bool refuse(conv *c, const json_value *at, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "json schema: byte %zu: %s", at ? at->offset : (size_t)0, what);
    return false;
}

/* Bytes as the inside of a GBNF "literal". */
static void gbnf_escape(sbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sb_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7F) {
            sb_fmt(b, "\\x%02X", ch);
        } else {
            sb_put(b, (const char *)&ch, 1);
        }
    }
}

/* v in compact JSON (as a generated value is written). */
static void json_write(sbuf *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: sb_str(b, "null"); break;
    case JSON_TRUE: sb_str(b, "true"); break;
    case JSON_FALSE: sb_str(b, "false"); break;
    case JSON_NUMBER:
        if (v->is_int) sb_fmt(b, "%lld", (long long)v->i64);
        else sb_fmt(b, "%.17g", v->u.num);
        break;
    case JSON_STRING:
        sb_str(b, "\"");
        for (size_t i = 0; i < v->n; i++) {
            unsigned char ch = (unsigned char)v->u.str[i];
            if (ch == '"' || ch == '\\') {
                char e[2] = {'\\', (char)ch};
                sb_put(b, e, 2);
            } else if (ch < 0x20) {
                sb_fmt(b, "\\u%04x", ch);
            } else {
                sb_put(b, (const char *)&ch, 1);
            }
        }
        sb_str(b, "\"");
        break;
    case JSON_ARRAY:
        sb_str(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            json_write(b, &v->u.items[i]);
        }
        sb_str(b, "]");
        break;
    case JSON_OBJECT:
        sb_str(b, "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            json_write(b, &v->u.items[2 * i]);
            sb_str(b, ":");
            json_write(b, &v->u.items[2 * i + 1]);
        }
        sb_str(b, "}");
        break;
    }
}

/* A GBNF literal matching exactly v's compact JSON, then ws. */
static void literal(sbuf *out, const json_value *v) {
    sbuf j = {0};
    json_write(&j, v);
    sb_str(out, "\"");
    if (j.s) gbnf_escape(out, j.s, j.n);
    sb_str(out, "\" ws");
    if (j.failed) out->failed = true;
    free(j.s);
}

static const char *const annotations[] = {"title", "description", "$schema", "$id", "$comment",
                                          "default", "examples", "readOnly", "writeOnly",
                                          "deprecated", "additionalProperties", "strict",
                                          "$defs", "definitions"};
static const char *const handled[] = {"type", "properties", "required", "enum", "const", "items",
                                      "minItems", "maxItems", "minLength", "maxLength", "anyOf",
                                      "oneOf", "format", "$ref", "pattern", "minimum", "maximum",
                                      "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

static bool in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static int gen(conv *c, const json_value *s, int depth);

static bool has_bounds(const json_value *s) {
    for (int i = 0; i < 4; i++)
        if (json_get(s, bounds[i])) return true;
    return false;
}

static bool str_eq(const json_value *a, const json_value *b) {
    return a && b && a->type == JSON_STRING && b->type == JSON_STRING && a->n == b->n &&
           !memcmp(a->u.str, b->u.str, a->n);
}

/* A new rule "sN ::= body"; returns N. */
static int emit(conv *c, const sbuf *body) {
    int id = c->n_rules++;
    sb_fmt(&c->rules, "s%d ::= ", id);
    if (body->s) sb_put(&c->rules, body->s, body->n);
    sb_str(&c->rules, "\n");
    return id;
}

static bool count_kw(conv *c, const json_value *s, const char *key, int64_t *out) {
    const json_value *v = json_get(s, key);
    if (!v) return true;
    if (!json_as_i64(v, out) || *out < 0 || *out > 4096)
        return refuse(c, v, "'%s' must be an integer from 0 to 4096", key);
    return true;
}

/* multipleOf on an integer that every integer meets: 1/n (0.5, 0.25, 1). */
static bool multiple_of_one(const json_value *s) {
    double k;
    if (!json_as_f64(json_get(s, "multipleOf"), &k) || !(k > 0) || k > 1) return false;
    double inv = 1 / k;
    return fabs(inv - round(inv)) < 1e-9 * inv;
}

/* The integer multiples of a whole multipleOf up to 1000 (a k-state
 * automaton over the digits); beside bounds it is refused (the product of
 * the two is not built). */
static bool gen_multiple(conv *c, const json_value *s, sbuf *b) {
    const json_value *v = json_get(s, "multipleOf");
    double k;
    if (!json_as_f64(v, &k) || !(k > 0)) return refuse(c, v, "'multipleOf' must be a number above 0");
    if (k != floor(k)) return refuse(c, v, "'multipleOf' on 'integer' must be a whole number (or 1/n) to be enforced");
    if (k > 1000) return refuse(c, v, "'multipleOf' above 1000 is not supported");
    if (has_bounds(s)) return refuse(c, v, "'multipleOf' beside minimum/maximum is not supported");
    int base = c->n_rules;
    c->n_rules += (int)k;
    cdl_json_int_multiple_gbnf((int64_t)k, base, &c->rules, b);
    return true;
}

/* Bound keyword i's value v (bounds[i]) into *x: a number within +-9e15. */
static bool bound_value(conv *c, const json_value *v, int i, double *x) {
    if (!json_as_f64(v, x) || *x != *x || *x < -9.0e15 || *x > 9.0e15)
        return refuse(c, v, "'%s' must be a number within +-9e15", bounds[i]);
    return true;
}

/* minimum/maximum (and the exclusive forms) on a number: whole bounds only;
 * the tighter of each side. The numbers are written without an exponent. */
static bool gen_number_bounds(conv *c, const json_value *s, sbuf *b) {
    bool has_lo = false, has_hi = false, lo_x = false, hi_x = false;
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        const json_value *v = json_get(s, bounds[i]);
        double x;
        if (!v) continue;
        if (!bound_value(c, v, i, &x)) return false;
        if (x != floor(x))
            return refuse(c, v, "'%s' on type 'number' must be a whole number to be enforced", bounds[i]);
        int64_t k = (int64_t)x;
        bool excl = i >= 2, low = i == 0 || i == 2;
        if (low && (!has_lo || k > lo || (k == lo && excl))) lo = k, lo_x = excl, has_lo = true;
        if (!low && (!has_hi || k < hi || (k == hi && excl))) hi = k, hi_x = excl, has_hi = true;
    }
    if (!cdl_json_num_range_gbnf(has_lo, lo, lo_x, has_hi, hi, hi_x, b))
        return refuse(c, s, "no number between the bounds");
    return true;
}

static bool gen_type(conv *c, const json_value *s, const char *type, sbuf *b, int depth) {
    if (!strcmp(type, "string") && json_get(s, "format")) {
        const json_value *f = json_get(s, "format");
        static const char *const formats[][2] = {
            {"date", "\"\\\"\" date \"\\\"\" ws"},
            {"time", "\"\\\"\" time \"\\\"\" ws"},
            {"date-time", "\"\\\"\" date \"T\" time \"\\\"\" ws"},
            {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\" ws"}};
        if (json_get(s, "minLength") || json_get(s, "maxLength") || json_get(s, "pattern"))
            return refuse(c, f, "'format' with minLength/maxLength/pattern is not supported");
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (json_str_eq(f, formats[i][0])) {
                sb_str(b, formats[i][1]);
                return true;
            }
        return refuse(c, f, "keyword 'format' is not supported for this value (date, time, "
                            "date-time and uuid are)");
    } else if (!strcmp(type, "string") && json_get(s, "pattern")) {
        const json_value *pat = json_get(s, "pattern");
        const char *ps;
        size_t pn;
        char err[160];
        if (!json_as_str(pat, &ps, &pn)) return refuse(c, pat, "'pattern' must be a string");
        if (json_get(s, "minLength") || json_get(s, "maxLength"))
            return refuse(c, pat, "'pattern' with minLength/maxLength is not supported");
        if (!cdl_json_pattern_gbnf(ps, pn, b, err, sizeof err)) return refuse(c, pat, "%s", err);
    } else if (!strcmp(type, "string")) {
        int64_t lo = 0, hi = -1;
        if (!count_kw(c, s, "minLength", &lo) || !count_kw(c, s, "maxLength", &hi)) return false;
        if (hi >= 0 && hi < lo) return refuse(c, s, "maxLength below minLength");
        if (lo == 0 && hi < 0) sb_str(b, "string");
        else if (hi < 0) sb_fmt(b, "\"\\\"\" char{%lld,} \"\\\"\" ws", (long long)lo);
        else sb_fmt(b, "\"\\\"\" char{%lld,%lld} \"\\\"\" ws", (long long)lo, (long long)hi);
    } else if (!strcmp(type, "integer") && json_get(s, "multipleOf") && !multiple_of_one(s)) {
        return gen_multiple(c, s, b);
    } else if (!strcmp(type, "number") && json_get(s, "multipleOf")) {
        return refuse(c, json_get(s, "multipleOf"), "'multipleOf' on type 'number' is not supported (on 'integer' it is)");
    } else if (!strcmp(type, "integer") && has_bounds(s)) {
        bool has_lo = false, has_hi = false;
        int64_t lo = 0, hi = 0;
        for (int i = 0; i < 4; i++) {
            const json_value *v = json_get(s, bounds[i]);
            double x;
            if (!v) continue;
            if (!bound_value(c, v, i, &x)) return false;
            /* the integers the bound allows: minimum ceil, exclusive the next one */
            int64_t k = i == 0 ? (int64_t)ceil(x) : i == 1 ? (int64_t)floor(x) : i == 2 ? (int64_t)floor(x) + 1
                                                                                      : (int64_t)ceil(x) - 1;
            if (i == 0 || i == 2) lo = has_lo && lo > k ? lo : k, has_lo = true;
            else hi = has_hi && hi < k ? hi : k, has_hi = true;
        }
        if (has_lo && has_hi && lo > hi) return refuse(c, s, "no integer between the bounds");
        cdl_json_int_range_gbnf(has_lo, lo, has_hi, hi, b);
    } else if (!strcmp(type, "number") && has_bounds(s)) {
        return gen_number_bounds(c, s, b);
    } else if (!strcmp(type, "integer") || !strcmp(type, "number") || !strcmp(type, "boolean") ||
               !strcmp(type, "null")) {
        sb_str(b, type);
    } else if (!strcmp(type, "array")) {
        int64_t lo = 0, hi = -1;
        if (!count_kw(c, s, "minItems", &lo) || !count_kw(c, s, "maxItems", &hi)) return false;
        if (hi >= 0 && hi < lo) return refuse(c, s, "maxItems below minItems");
        const json_value *items = json_get(s, "items");
        char item[32] = "value";
        if (items) {
            int id = gen(c, items, depth + 1);
            if (id < 0) return false;
            snprintf(item, sizeof item, "s%d", id);
        }
        if (hi == 0) {
            sb_str(b, "\"[\" ws \"]\" ws");
        } else {
            sb_str(b, "\"[\" ws ");
            if (lo == 0) sb_str(b, "(");
            sb_fmt(b, "%s (\",\" ws %s)", item, item);
            if (hi < 0) sb_fmt(b, "{%lld,}", (long long)(lo > 0 ? lo - 1 : 0));
            else sb_fmt(b, "{%lld,%lld}", (long long)(lo > 0 ? lo - 1 : 0), (long long)hi - 1);
            if (lo == 0) sb_str(b, ")?");
            sb_str(b, " \"]\" ws");
        }
    } else if (!strcmp(type, "object")) {
        const json_value *props = json_get(s, "properties");
        if (!props) {
            sb_str(b, "object");
            return true;
        }
        if (props->type != JSON_OBJECT) return refuse(c, props, "'properties' must be an object");
        const json_value *req = json_get(s, "required");
        if (req && req->type != JSON_ARRAY) return refuse(c, req, "'required' must be an array");
        size_t n = props->n, n_req = 0;
        int *ids = malloc((n ? n : 1) * sizeof *ids);
        bool *is_req = calloc(n ? n : 1, sizeof *is_req);
        if (!ids || !is_req) {
            free(ids), free(is_req);
            return refuse(c, s, "out of memory");
        }
        for (size_t i = 0; req && i < req->n; i++) {
            bool found = false;
            for (size_t k = 0; k < n; k++)
                if (str_eq(&req->u.items[i], json_obj_key(props, k))) is_req[k] = found = true;
            if (!found) {
                free(ids), free(is_req);
                return refuse(c, &req->u.items[i], "a required property not in 'properties'");
            }
        }
        for (size_t k = 0; k < n; k++) {
            n_req += is_req[k];
            if ((ids[k] = gen(c, json_obj_val(props, k), depth + 1)) < 0) {
                free(ids), free(is_req);
                return false;
            }
        }
        /* kv: "\"key\"" ws ":" ws sN */
        sbuf *kv = calloc(n ? n : 1, sizeof *kv);
        for (size_t k = 0; kv && k < n; k++) {
            const json_value *key = json_obj_key(props, k);
            sb_str(&kv[k], "\"");
            sbuf j = {0};
            json_write(&j, key);
            if (j.s) gbnf_escape(&kv[k], j.s, j.n);
            free(j.s);
            sb_fmt(&kv[k], "\" ws \":\" ws s%d", ids[k]);
        }
        if (!kv) {
            free(ids), free(is_req);
            return refuse(c, s, "out of memory");
        }
        sb_str(b, "\"{\" ws ");
        bool first = true;
        for (size_t k = 0; k < n; k++) /* the required ones, in order */
            if (is_req[k]) {
                if (!first) sb_str(b, "\",\" ws ");
                sb_put(b, kv[k].s, kv[k].n);
                sb_str(b, " ");
                first = false;
            }
        size_t n_opt = n - n_req;
        size_t *opt = malloc((n_opt ? n_opt : 1) * sizeof *opt), m = 0;
        for (size_t k = 0; opt && k < n; k++)
            if (!is_req[k]) opt[m++] = k;
        if (opt && n_opt) {
            if (!first) { /* after a required one: each optional one with its comma */
                for (size_t i = 0; i < n_opt; i++) {
                    sb_str(b, "(\",\" ws ");
                    sb_put(b, kv[opt[i]].s, kv[opt[i]].n);
                    sb_str(b, ")? ");
                }
            } else { /* F_i ::= kv_i ("," kv_j)?... | F_{i+1} | (empty) */
                for (size_t i = 0; i < n_opt; i++) {
                    sb_str(b, "(");
                    sb_put(b, kv[opt[i]].s, kv[opt[i]].n);
                    for (size_t j = i + 1; j < n_opt; j++) {
                        sb_str(b, " (\",\" ws ");
                        sb_put(b, kv[opt[j]].s, kv[opt[j]].n);
                        sb_str(b, ")?");
                    }
                    sb_str(b, " | ");
                }
                sb_str(b, "\"\"");
                for (size_t i = 0; i < n_opt; i++) sb_str(b, ")");
                sb_str(b, " ");
            }
        }
        sb_str(b, "\"}\" ws");
        for (size_t k = 0; k < n; k++) free(kv[k].s);
        free(kv), free(opt), free(ids), free(is_req);
    } else {
        return refuse(c, s, "unknown type '%s'", type);
    }
    return true;
}

/* The rule for schema s: its number, or -1 after refuse(). */
static int gen(conv *c, const json_value *s, int depth) {
    if (c->failed) return -1;
    if (depth > SCHEMA_MAX_DEPTH) return refuse(c, s, "schemas nested deeper than %d", SCHEMA_MAX_DEPTH), -1;
    sbuf b = {0};
    if (s->type == JSON_TRUE) {
        sb_str(&b, "value");
        int id = emit(c, &b);
        free(b.s);
        return id;
    }
    if (s->type != JSON_OBJECT) return refuse(c, s, "a schema must be an object or true"), -1;
    for (size_t i = 0; i < s->n; i++) {
        const char *k = json_obj_key(s, i)->u.str;
        if (!in_list(k, handled, sizeof handled / sizeof handled[0]) &&
            !in_list(k, annotations, sizeof annotations / sizeof annotations[0]))
            return refuse(c, json_obj_val(s, i), "keyword '%s' is not supported (it cannot be enforced)", k), -1;
    }
    const json_value *v;
    if ((v = json_get(s, "$ref"))) {
        const char *r;
        size_t rl;
        const json_value *target = NULL;
        if (!json_as_str(v, &r, &rl)) return refuse(c, v, "'$ref' must be a string"), -1;
        for (size_t i = 0; i < s->n; i++) {
            const char *k = json_obj_key(s, i)->u.str;
            if (strcmp(k, "$ref") && in_list(k, handled, sizeof handled / sizeof handled[0]))
                return refuse(c, v, "keyword '%s' beside '$ref' is not supported", k), -1;
        }
        if (!strcmp(r, "#")) target = c->root;
        else if (!strncmp(r, "#/$defs/", 8)) target = json_get(json_get(c->root, "$defs"), r + 8);
        else if (!strncmp(r, "#/definitions/", 14)) target = json_get(json_get(c->root, "definitions"), r + 14);
        else return refuse(c, v, "'$ref' to '%.60s': only #, #/$defs/NAME and #/definitions/NAME are supported", r), -1;
        if (!target) return refuse(c, v, "'$ref' to '%.60s': no such definition", r), -1;
        int k = 0;
        while (k < c->n_defs && c->defs[k] != target) k++;
        if (k == c->n_defs) {
            if (c->n_defs == SCHEMA_MAX_DEFS) return refuse(c, v, "more than %d definitions", SCHEMA_MAX_DEFS), -1;
            c->defs[c->n_defs++] = target;
        }
        sb_fmt(&b, "d%d", k);
    } else if ((v = json_get(s, "const"))) {
        literal(&b, v);
    } else if ((v = json_get(s, "enum"))) {
        if (v->type != JSON_ARRAY || v->n == 0) return refuse(c, v, "'enum' must be a non-empty array"), -1;
        sb_str(&b, "(");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(&b, " | ");
            literal(&b, &v->u.items[i]);
        }
        sb_str(&b, ")");
    } else if ((v = json_get(s, "anyOf")) || (v = json_get(s, "oneOf"))) {
        /* oneOf as anyOf: exclusivity is not enforced */
        if (v->type != JSON_ARRAY || v->n == 0) return refuse(c, v, "anyOf/oneOf must be a non-empty array"), -1;
        if (json_get(s, "type")) return refuse(c, v, "anyOf/oneOf beside 'type' is not supported"), -1;
        sb_str(&b, "(");
        for (size_t i = 0; i < v->n; i++) {
            int id = gen(c, &v->u.items[i], depth + 1);
            if (id < 0) {
                free(b.s);
                return -1;
            }
            sb_fmt(&b, "%ss%d", i ? " | " : "", id);
        }
        sb_str(&b, ")");
    } else if ((v = json_get(s, "type"))) {
        if (v->type == JSON_STRING) {
            gen_type(c, s, v->u.str, &b, depth);
        } else if (v->type == JSON_ARRAY && v->n > 0) {
            sb_str(&b, "(");
            for (size_t i = 0; i < v->n && !c->failed; i++) {
                if (v->u.items[i].type != JSON_STRING) {
                    refuse(c, &v->u.items[i], "'type' entries must be strings");
                    break;
                }
                if (i) sb_str(&b, " | ");
                gen_type(c, s, v->u.items[i].u.str, &b, depth);
            }
            sb_str(&b, ")");
        } else {
            refuse(c, v, "'type' must be a string or a non-empty array of strings");
        }
    } else if ((v = json_get(s, "pattern"))) {
        refuse(c, v, "'pattern' needs \"type\": \"string\" beside it");
    } else if (has_bounds(s)) {
        refuse(c, s, "minimum/maximum need \"type\": \"integer\" or \"number\" beside them");
    } else if ((v = json_get(s, "multipleOf"))) {
        refuse(c, v, "'multipleOf' needs \"type\": \"integer\" beside it");
    } else {
        sb_str(&b, "value");
    }
    if (b.failed) refuse(c, s, "the grammar is too large");
    if (c->failed) {
        free(b.s);
        return -1;
    }
    int id = emit(c, &b);
    free(b.s);
    return id;
}

static const char basics[] =
    "value   ::= object | array | string | number | boolean | null\n"
    "object  ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
    "array   ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n"
    "string  ::= \"\\\"\" char* \"\\\"\" ws\n"
    "char    ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "number  ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,4})? ws\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) ws\n"
    "boolean ::= (\"true\" | \"false\") ws\n"
    "null    ::= \"null\" ws\n"
    "date    ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])\n"
    "time    ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "ws      ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

candle_status candle_json_schema_to_gbnf(const char *schema, size_t len, char **out) {
    if (!out || (!schema && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "json schema: NULL argument");
    *out = NULL;
    json_doc *d = NULL;
    json_parse_params jp = {.max_depth = 2 * SCHEMA_MAX_DEPTH + 8};
    if (json_parse(&d, schema, len, "json schema", &jp)) {
        json_free(d);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s", candle_last_errmsg());
    }
    conv c = {.root = json_root(d)};
    int root = gen(&c, json_root(d), 0);
    for (int k = 0; root >= 0 && k < c.n_defs; k++) { /* n_defs grows as bodies refer to more */
        int id = gen(&c, c.defs[k], 1);
        if (id < 0) root = -1;
        else sb_fmt(&c.rules, "d%d ::= s%d\n", k, id);
    }
    json_free(d);
    sbuf g = {0};
    if (root >= 0) {
        sb_fmt(&g, "root ::= s%d\n", root);
        if (c.rules.s) sb_put(&g, c.rules.s, c.rules.n);
        sb_str(&g, basics);
        if (c.rules.failed || g.failed) refuse(&c, NULL, "the grammar is too large");
    }
    free(c.rules.s);
    if (c.failed) {
        free(g.s);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s", c.err);
    }
    *out = g.s;
    return CANDLE_OK;
}
