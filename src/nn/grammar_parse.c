/* GBNF parser: llama.cpp's grammar syntax (rules `name ::= ...`, `|`,
 * grouping, `* + ? {m} {m,} {m,n}`, "literals" and [classes] with escapes,
 * `.`, # comments) compiled into the flat form of grammar-impl.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar-impl.h"
#include "../core/core-impl.h"

typedef struct gvec {
    gelem *v;
    uint32_t n, cap;
} gvec;

typedef struct prule {
    char *name;
    gvec body;
    bool defined;
    const char *first_ref; /* where it was first referenced (for "undefined") */
} prule;

typedef struct parser {
    const char *src, *p, *end;
    prule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *ranges;
    uint32_t n_ranges, cap_ranges;
    uint64_t n_elems; /* over all rules, for the limit */
    uint32_t *names; /* [NAME_SLOTS] open-addressing table of rule index + 1 */
    const char *rule_name; /* the rule being parsed, for messages */
    int depth;
    bool failed;
    char msg[256];
} parser;

static void where(const parser *P, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *q = P->src; q < at && q < P->end; q++) {
        if (*q == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

/* Record the first error only; the parse unwinds on P->failed. */
static bool fail(parser *P, const char *at, const char *fmt, ...) {
    if (P->failed) return false;
    P->failed = true;
    int line, col;
    where(P, at, &line, &col);
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (P->rule_name)
        snprintf(P->msg, sizeof P->msg, "grammar: %d:%d: in rule '%s': %s", line, col,
                 P->rule_name, what);
    else
        snprintf(P->msg, sizeof P->msg, "grammar: %d:%d: %s", line, col, what);
    return false;
}

static bool push(parser *P, gvec *v, gelem e) {
    if (++P->n_elems > GRAMMAR_MAX_ELEMS)
        return fail(P, P->p, "the grammar is too large (over %u elements)", GRAMMAR_MAX_ELEMS);
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 16;
        gelem *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return fail(P, P->p, "out of memory");
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = e;
    return true;
}

static bool push_range(parser *P, uint32_t lo, uint32_t hi) {
    if (P->n_ranges + 2 > P->cap_ranges) {
        uint32_t cap = P->cap_ranges ? 2 * P->cap_ranges : 64;
        if (cap > 2 * GRAMMAR_MAX_ELEMS) return fail(P, P->p, "too many character ranges");
        uint32_t *nr = realloc(P->ranges, cap * sizeof *nr);
        if (!nr) return fail(P, P->p, "out of memory");
        P->ranges = nr;
        P->cap_ranges = cap;
    }
    P->ranges[P->n_ranges++] = lo;
    P->ranges[P->n_ranges++] = hi;
    return true;
}

#define NAME_SLOTS 65536 /* a power of two above 2 * GRAMMAR_MAX_RULES */

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A rule by name (len bytes), added undefined when new. */
static int64_t rule_id(parser *P, const char *name, size_t len) {
    if (!P->names && !(P->names = calloc(NAME_SLOTS, sizeof *P->names))) {
        fail(P, P->p, "out of memory");
        return -1;
    }
    uint32_t slot = name_hash(name, len) & (NAME_SLOTS - 1);
    for (; P->names[slot]; slot = (slot + 1) & (NAME_SLOTS - 1)) {
        const char *rn = P->rules[P->names[slot] - 1].name;
        if (strlen(rn) == len && !memcmp(rn, name, len)) return P->names[slot] - 1;
    }
    if (P->n_rules >= GRAMMAR_MAX_RULES) {
        fail(P, P->p, "too many rules (over %d)", GRAMMAR_MAX_RULES);
        return -1;
    }
    if (P->n_rules == P->cap_rules) {
        uint32_t cap = P->cap_rules ? 2 * P->cap_rules : 32;
        prule *nr = realloc(P->rules, cap * sizeof *nr);
        if (!nr) {
            fail(P, P->p, "out of memory");
            return -1;
        }
        P->rules = nr;
        P->cap_rules = cap;
    }
    prule *r = &P->rules[P->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) {
        fail(P, P->p, "out of memory");
        return -1;
    }
    memcpy(r->name, name, len);
    r->name[len] = 0;
    P->names[slot] = P->n_rules + 1;
    return P->n_rules++;
}

/* A generated rule (groups, repetitions): "parent-N", defined. */
static int64_t new_rule(parser *P) {
    char name[128];
    for (uint32_t k = P->n_rules;; k++) { /* a name no rule has yet */
        snprintf(name, sizeof name, "%.100s-%u", P->rule_name ? P->rule_name : "g", k);
        uint32_t before = P->n_rules;
        int64_t id = rule_id(P, name, strlen(name));
        if (id < 0) return id;
        if ((uint32_t)id == before) {
            P->rules[id].defined = true;
            return id;
        }
    }
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static void skip_space(parser *P, bool newline_ok) {
    while (P->p < P->end) {
        char c = *P->p;
        if (c == ' ' || c == '\t') {
            P->p++;
        } else if (c == '#') {
            while (P->p < P->end && *P->p != '\n') P->p++;
        } else if (newline_ok && (c == '\r' || c == '\n')) {
            P->p++;
        } else {
            break;
        }
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 encoded code point of the source; false on invalid UTF-8. */
static bool decode_utf8(parser *P, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)P->p;
    size_t left = (size_t)(P->end - P->p);
    unsigned char b = s[0];
    int n;
    uint32_t v, min;
    if (b < 0x80) {
        n = 1, v = b, min = 0;
    } else if ((b & 0xE0) == 0xC0) {
        n = 2, v = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
        n = 3, v = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
        n = 4, v = b & 0x07, min = 0x10000;
    } else {
        return fail(P, P->p, "invalid UTF-8 in the grammar");
    }
    if ((size_t)n > left) return fail(P, P->p, "invalid UTF-8 in the grammar");
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail(P, P->p, "invalid UTF-8 in the grammar");
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail(P, P->p, "invalid UTF-8 in the grammar");
    P->p += n;
    *cp = v;
    return true;
}

/* A character of a literal or class, escapes decoded. */
static bool parse_char(parser *P, uint32_t *cp) {
    if (P->p >= P->end) return fail(P, P->p, "unexpected end of the grammar");
    if (*P->p != '\\') return decode_utf8(P, cp);
    const char *at = P->p;
    if (P->p + 1 >= P->end) return fail(P, at, "unexpected end of the grammar after '\\'");
    char e = P->p[1];
    P->p += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = P->p < P->end ? hexval(*P->p) : -1;
            if (h < 0) return fail(P, at, "escape \\%c needs %d hex digits", e, digits);
            v = v << 4 | (uint32_t)h;
            P->p++;
        }
        if (v > 0x10FFFF) return fail(P, at, "escape is beyond U+10FFFF");
        *cp = v;
        return true;
    }
    switch (e) {
    case 'n': *cp = '\n'; return true;
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
        *cp = (unsigned char)e;
        return true;
    default:
        return fail(P, at, "unknown escape '\\%c'", e);
    }
}

static bool parse_alternates(parser *P, gvec *out, bool nested);

/* Wrap out->v[from .. n) into a new rule; out keeps one reference to it. */
static bool wrap(parser *P, gvec *out, uint32_t from, int64_t *id) {
    *id = new_rule(P);
    if (*id < 0) return false;
    gvec *body = &P->rules[*id].body;
    for (uint32_t i = from; i < out->n; i++)
        if (!push(P, body, out->v[i])) return false;
    if (!push(P, body, (gelem){GE_END, 0, 0, 0})) return false;
    P->n_elems -= out->n - from;
    out->n = from;
    return true;
}

/* X{min,max} (max < 0: unbounded) on the elements out->v[from .. n). */
static bool repeat(parser *P, gvec *out, uint32_t from, long min, long max, const char *at) {
    if (out->n == from) return fail(P, at, "a repetition needs something before it");
    if (min > GRAMMAR_MAX_REPEAT || max > GRAMMAR_MAX_REPEAT)
        return fail(P, at, "a repetition count over %d", GRAMMAR_MAX_REPEAT);
    if (max >= 0 && max < min) return fail(P, at, "repetition {%ld,%ld}: max below min", min, max);
    gelem x = out->v[from];
    if (out->n - from > 1) {
        int64_t id;
        if (!wrap(P, out, from, &id)) return false;
        x = (gelem){GE_REF, 0, (uint32_t)id, 0};
    } else {
        out->n = from;
        P->n_elems--;
    }
    for (long i = 0; i < min; i++)
        if (!push(P, out, x)) return false;
    if (max < 0) { /* R ::= x R | (empty) */
        int64_t r = new_rule(P);
        if (r < 0) return false;
        gvec *b = &P->rules[r].body;
        if (!push(P, b, x) || !push(P, b, (gelem){GE_REF, 0, (uint32_t)r, 0}) ||
            !push(P, b, (gelem){GE_ALT, 0, 0, 0}) || !push(P, b, (gelem){GE_END, 0, 0, 0}))
            return false;
        return push(P, out, (gelem){GE_REF, 0, (uint32_t)r, 0});
    }
    /* max - min optional copies, nested: R_k ::= x R_{k-1} | (empty) */
    int64_t prev = -1;
    for (long k = 0; k < max - min; k++) {
        int64_t r = new_rule(P);
        if (r < 0) return false;
        gvec *b = &P->rules[r].body;
        if (!push(P, b, x) || (prev >= 0 && !push(P, b, (gelem){GE_REF, 0, (uint32_t)prev, 0})) ||
            !push(P, b, (gelem){GE_ALT, 0, 0, 0}) || !push(P, b, (gelem){GE_END, 0, 0, 0}))
            return false;
        prev = r;
    }
    return prev < 0 || push(P, out, (gelem){GE_REF, 0, (uint32_t)prev, 0});
}

static bool parse_count(parser *P, long *v) {
    const char *at = P->p;
    long n = 0;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') return fail(P, at, "expected a number");
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        n = n * 10 + (*P->p++ - '0');
        if (n > GRAMMAR_MAX_REPEAT) return fail(P, at, "a repetition count over %d", GRAMMAR_MAX_REPEAT);
    }
    *v = n;
    return true;
}

static bool parse_sequence(parser *P, gvec *out, bool nested) {
    uint32_t last = UINT32_MAX; /* where the last element started */
    while (P->p < P->end && !P->failed) {
        const char *at = P->p;
        char c = *P->p;
        if (c == '"') {
            P->p++;
            last = out->n;
            while (P->p < P->end && *P->p != '"') {
                uint32_t cp;
                if (!parse_char(P, &cp)) return false;
                uint32_t ri = P->n_ranges / 2;
                if (!push_range(P, cp, cp) || !push(P, out, (gelem){GE_CHARS, 0, ri, 1}))
                    return false;
            }
            if (P->p >= P->end) return fail(P, at, "unterminated string literal");
            P->p++;
            if (out->n == last) last = UINT32_MAX; /* "" matches the empty text */
        } else if (c == '[') {
            P->p++;
            bool neg = P->p < P->end && *P->p == '^';
            if (neg) P->p++;
            uint32_t ri = P->n_ranges / 2;
            while (P->p < P->end && *P->p != ']') {
                uint32_t lo, hi;
                if (!parse_char(P, &lo)) return false;
                hi = lo;
                if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
                    const char *rat = P->p;
                    P->p++;
                    if (!parse_char(P, &hi)) return false;
                    if (hi < lo) return fail(P, rat, "character range with its end below its start");
                }
                if (!push_range(P, lo, hi)) return false;
            }
            if (P->p >= P->end) return fail(P, at, "unterminated character class");
            P->p++;
            last = out->n;
            if (!push(P, out, (gelem){GE_CHARS, neg, ri, P->n_ranges / 2 - ri})) return false;
        } else if (c == '.') {
            P->p++;
            last = out->n;
            if (!push(P, out, (gelem){GE_ANY, 0, 0, 0})) return false;
        } else if (is_word(c)) {
            const char *s = P->p;
            while (P->p < P->end && is_word(*P->p)) P->p++;
            const char *e = P->p;
            skip_space(P, nested);
            if (P->end - P->p >= 3 && !memcmp(P->p, "::=", 3)) {
                if (nested) return fail(P, s, "a rule definition inside parentheses (missing ')'?)");
                P->p = s; /* the next rule starts here: this sequence is over */
                return true;
            }
            P->p = e;
            int64_t id = rule_id(P, s, (size_t)(e - s));
            if (id < 0) return false;
            if (!P->rules[id].first_ref) P->rules[id].first_ref = s;
            last = out->n;
            if (!push(P, out, (gelem){GE_REF, 0, (uint32_t)id, 0})) return false;
        } else if (c == '(') {
            if (++P->depth > GRAMMAR_MAX_NEST)
                return fail(P, at, "parentheses nested deeper than %d", GRAMMAR_MAX_NEST);
            P->p++;
            skip_space(P, true);
            int64_t id = new_rule(P);
            if (id < 0) return false;
            gvec body = {0};
            bool ok = parse_alternates(P, &body, true) && push(P, &body, (gelem){GE_END, 0, 0, 0});
            P->rules[id].body = body;
            if (!ok) return false;
            if (P->p >= P->end || *P->p != ')') return fail(P, at, "unclosed '('");
            P->p++;
            P->depth--;
            last = out->n;
            if (!push(P, out, (gelem){GE_REF, 0, (uint32_t)id, 0})) return false;
        } else if (c == '*' || c == '+' || c == '?') {
            P->p++;
            if (last == UINT32_MAX) return fail(P, at, "'%c' needs something before it", c);
            if (!repeat(P, out, last, c == '+', c == '?' ? 1 : -1, at)) return false;
            last = UINT32_MAX;
        } else if (c == '{') {
            P->p++;
            if (last == UINT32_MAX) return fail(P, at, "'{' needs something before it");
            long min, max;
            skip_space(P, false);
            if (!parse_count(P, &min)) return false;
            skip_space(P, false);
            max = min;
            if (P->p < P->end && *P->p == ',') {
                P->p++;
                skip_space(P, false);
                max = -1;
                if (P->p < P->end && *P->p != '}' && !parse_count(P, &max)) return false;
                skip_space(P, false);
            }
            if (P->p >= P->end || *P->p != '}') return fail(P, at, "expected '}'");
            P->p++;
            if (!repeat(P, out, last, min, max, at)) return false;
            last = UINT32_MAX;
        } else {
            break;
        }
        skip_space(P, nested);
    }
    return !P->failed;
}

static bool parse_alternates(parser *P, gvec *out, bool nested) {
    if (!parse_sequence(P, out, nested)) return false;
    while (P->p < P->end && *P->p == '|') {
        P->p++;
        if (!push(P, out, (gelem){GE_ALT, 0, 0, 0})) return false;
        skip_space(P, true);
        if (!parse_sequence(P, out, nested)) return false;
    }
    return true;
}

static bool parse_rule(parser *P) {
    const char *s = P->p;
    while (P->p < P->end && is_word(*P->p)) P->p++;
    if (P->p == s) return fail(P, s, "expected a rule name");
    int64_t id = rule_id(P, s, (size_t)(P->p - s));
    if (id < 0) return false;
    if (P->rules[id].defined) {
        P->rule_name = P->rules[id].name;
        return fail(P, s, "rule '%s' is defined twice", P->rules[id].name);
    }
    P->rules[id].defined = true;
    P->rule_name = P->rules[id].name;
    skip_space(P, false);
    if (P->end - P->p < 3 || memcmp(P->p, "::=", 3)) return fail(P, P->p, "expected '::='");
    P->p += 3;
    skip_space(P, true);
    gvec body = {0};
    bool ok = parse_alternates(P, &body, false) && push(P, &body, (gelem){GE_END, 0, 0, 0});
    P->rules[id].body = body; /* rules may have moved while parsing */
    if (!ok) return false;
    if (P->p < P->end && *P->p != '\n' && *P->p != '\r' && !is_word(*P->p))
        return fail(P, P->p, "unexpected '%c'", *P->p);
    P->rule_name = NULL;
    skip_space(P, true);
    return true;
}

/* Rules that can match the empty text, to a fixed point. */
static void find_nullable(const parser *P, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < P->n_rules; r++) {
            if (nullable[r]) continue;
            const gvec *b = &P->rules[r].body;
            bool alt_ok = true;
            for (uint32_t i = 0; i < b->n; i++) {
                const gelem *e = &b->v[i];
                if (e->type == GE_ALT || e->type == GE_END) {
                    if (alt_ok) {
                        nullable[r] = changed = true;
                        break;
                    }
                    alt_ok = true;
                } else if (e->type != GE_REF || !nullable[e->a]) {
                    alt_ok = false;
                }
            }
        }
    }
}

/* Left recursion (a rule reaching itself before consuming a character)
 * would make the matcher's expansion endless: refuse it, as llama.cpp does.
 * Iterative depth-first search over the "may start with" edges. */
static bool check_left_recursion(parser *P, const bool *nullable) {
    uint32_t n = P->n_rules;
    uint8_t *color = calloc(n, 1);
    uint32_t *stk = malloc((size_t)n * sizeof *stk), *pos = malloc((size_t)n * sizeof *pos);
    bool *lnull = malloc((size_t)n * sizeof *lnull);
    if (!color || !stk || !pos || !lnull) {
        free(color), free(stk), free(pos), free(lnull);
        return fail(P, P->end, "out of memory");
    }
    bool ok = true;
    for (uint32_t start = 0; start < n && ok; start++) {
        if (color[start]) continue;
        uint32_t sp = 0;
        stk[sp] = start, pos[sp] = 0, lnull[sp] = true, sp++;
        color[start] = 1;
        while (sp && ok) {
            uint32_t r = stk[sp - 1];
            const gvec *b = &P->rules[r].body;
            int64_t next = -1;
            while (pos[sp - 1] < b->n) { /* the next left edge from pos */
                const gelem *e = &b->v[pos[sp - 1]++];
                if (e->type == GE_ALT || e->type == GE_END) {
                    lnull[sp - 1] = true;
                    continue;
                }
                bool left = lnull[sp - 1]; /* all before e in its alternative can be empty */
                lnull[sp - 1] = left && e->type == GE_REF && nullable[e->a];
                if (left && e->type == GE_REF) {
                    next = e->a;
                    break;
                }
            }
            if (next < 0) {
                color[r] = 2;
                sp--;
            } else if (color[next] == 1) {
                P->rule_name = P->rules[next].name;
                ok = fail(P, P->rules[next].first_ref ? P->rules[next].first_ref : P->end,
                          "left recursion (rule '%s' can reach itself before matching a "
                          "character)", P->rules[next].name);
            } else if (color[next] == 0) {
                color[next] = 1;
                stk[sp] = (uint32_t)next, pos[sp] = 0, lnull[sp] = true, sp++;
            }
        }
    }
    free(color), free(stk), free(pos), free(lnull);
    return ok;
}

static void parser_free(parser *P) {
    for (uint32_t i = 0; i < P->n_rules; i++) {
        free(P->rules[i].name);
        free(P->rules[i].body.v);
    }
    free(P->rules);
    free(P->ranges);
    free(P->names);
}

/* Where each rule's alternatives start, so the matcher need not scan. */
static bool index_alternatives(candle_grammar *g) {
    uint32_t n_alts = g->n_rules;
    for (uint32_t i = 0; i < g->n_el; i++) n_alts += g->el[i].type == GE_ALT;
    g->alt_off = malloc(((size_t)g->n_rules + 1) * sizeof *g->alt_off);
    g->alts = malloc((size_t)n_alts * sizeof *g->alts);
    if (!g->alt_off || !g->alts) return false;
    uint32_t k = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        g->alt_off[r] = k;
        uint32_t pos = g->rule_start[r];
        g->alts[k++] = pos;
        for (; g->el[pos].type != GE_END; pos++)
            if (g->el[pos].type == GE_ALT) g->alts[k++] = pos + 1;
    }
    g->alt_off[g->n_rules] = k;
    return true;
}

void candle_grammar_free(candle_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->rule_start);
    free(g->alt_off);
    free(g->alts);
    free(g->ranges);
    free(g);
}

int32_t candle_grammar_n_rules(const candle_grammar *g) { return g ? (int32_t)g->n_rules : 0; }

candle_status candle_grammar_parse(candle_grammar **out, const char *text, size_t len) {
    if (!out || (!text && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar: NULL argument");
    *out = NULL;
    parser P = {.src = text, .p = text, .end = text + len};
    skip_space(&P, true);
    while (P.p < P.end && !P.failed) parse_rule(&P);
    int64_t root = -1;
    if (!P.failed) {
        for (uint32_t i = 0; i < P.n_rules; i++)
            if (!strcmp(P.rules[i].name, "root")) root = i;
        if (root < 0 || !P.rules[root].defined) fail(&P, P.end, "no rule 'root' (the start rule)");
    }
    for (uint32_t i = 0; i < P.n_rules && !P.failed; i++)
        if (!P.rules[i].defined) {
            P.rule_name = NULL;
            fail(&P, P.rules[i].first_ref ? P.rules[i].first_ref : P.end,
                 "undefined rule '%s'", P.rules[i].name);
        }
    if (!P.failed) {
        bool *nullable = calloc(P.n_rules, 1);
        if (!nullable) fail(&P, P.end, "out of memory");
        else {
            find_nullable(&P, nullable);
            check_left_recursion(&P, nullable);
            free(nullable);
        }
    }
    candle_grammar *g = NULL;
    if (!P.failed) {
        g = calloc(1, sizeof *g);
        uint64_t n_el = 0;
        for (uint32_t i = 0; i < P.n_rules; i++) n_el += P.rules[i].body.n;
        if (g) {
            g->el = malloc((size_t)(n_el + 1) * sizeof *g->el);
            g->rule_start = malloc((size_t)P.n_rules * sizeof *g->rule_start);
            g->ranges = malloc(((size_t)P.n_ranges + 2) * sizeof *g->ranges);
        }
        if (!g || !g->el || !g->rule_start || !g->ranges) {
            candle_grammar_free(g);
            g = NULL;
            fail(&P, P.end, "out of memory");
        } else {
            for (uint32_t i = 0; i < P.n_rules; i++) {
                g->rule_start[i] = g->n_el;
                memcpy(g->el + g->n_el, P.rules[i].body.v, P.rules[i].body.n * sizeof *g->el);
                g->n_el += P.rules[i].body.n;
            }
            g->el[g->n_el] = (gelem){GE_END, 0, 0, 0}; /* a sentinel past the last rule */
            if (P.n_ranges) memcpy(g->ranges, P.ranges, P.n_ranges * sizeof *g->ranges);
            g->n_ranges = P.n_ranges;
            g->n_rules = P.n_rules;
            g->root = (uint32_t)root;
            if (!index_alternatives(g)) {
                candle_grammar_free(g);
                g = NULL;
                fail(&P, P.end, "out of memory");
            }
        }
    }
    parser_free(&P);
    if (P.failed) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s", P.msg);
    *out = g;
    return CANDLE_OK;
}
