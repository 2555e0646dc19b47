/* A JSON Schema "pattern" (an ECMA-262 regular expression) as GBNF that
 * generates the JSON string text of values the pattern matches.
 *
 * The regular part of the syntax is translated: literals, `.`, classes
 * ([a-z], [^...], \d \w \s and their negations), groups ((...), (?:...)),
 * alternation, the quantifiers * + ? {m} {m,} {m,n} (lazy forms generate the
 * same strings), ^ at the start and $ at the end of a top-level alternative
 * (a pattern matches anywhere unless anchored, so an unanchored side gets any
 * characters). What is not regular or not translated (backreferences,
 * lookaround, \b, anchors elsewhere) is refused, naming it.
 *
 * The generated text is JSON: a character the pattern matches comes out as
 * its JSON escape where JSON needs one (a quote, a backslash, a control
 * character). Classes and `.` do not generate control characters or the
 * quote and backslash unless they name them: the strings generated are a
 * subset of the pattern's, each of which matches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/strbuf-impl.h"
#include "nn-impl.h"

#define RX_MAX_DEPTH 32
#define RX_MAX_REPEAT 1000
#define RX_MAX_RANGES 256

typedef struct rx {
    const char *s, *p, *end;
    char *err;
    size_t errn;
    int depth;
    bool failed;
} rx;

typedef struct rx_range {
    uint32_t lo, hi;
} rx_range;

typedef struct rx_set {
    rx_range r[RX_MAX_RANGES];
    int n;
} rx_set;

static bool rx_fail(rx *r, const char *what) {
    if (!r->failed) snprintf(r->err, r->errn, "'pattern' at character %td: %s", r->p - r->s, what);
    r->failed = true;
    return false;
}

static void put(cdl_strbuf *b, const char *s) { cdl_strbuf_str(b, s); }

/* One UTF-8 character at r->p (invalid bytes taken one at a time). */
static uint32_t next_cp(rx *r) {
    const unsigned char *u = (const unsigned char *)r->p;
    size_t left = (size_t)(r->end - r->p);
    int n = u[0] < 0x80 ? 1 : (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3 : (u[0] & 0xF8) == 0xF0 ? 4 : 1;
    if ((size_t)n > left) n = 1;
    uint32_t cp = n == 1 ? u[0] : n == 2 ? u[0] & 0x1Fu : n == 3 ? u[0] & 0x0Fu : u[0] & 0x07u;
    for (int i = 1; i < n; i++) cp = cp << 6 | (u[i] & 0x3Fu);
    r->p += n;
    return cp;
}

/* cp as the GBNF literal of its JSON text. */
static void lit_cp(cdl_strbuf *b, uint32_t cp) {
    char t[24];
    if (cp == '"') put(b, "\"\\\\\\\"\""); /* JSON \" as a GBNF literal: "\\\"" */
    else if (cp == '\\') put(b, "\"\\\\\\\\\"");
    else if (cp < 0x20) {
        const char *e = cp == '\n' ? "n" : cp == '\t' ? "t" : cp == '\r' ? "r" : cp == '\b' ? "b" : cp == '\f' ? "f" : NULL;
        if (e) snprintf(t, sizeof t, "\"\\\\%s\"", e);
        else snprintf(t, sizeof t, "\"\\\\u%04x\"", (unsigned)cp);
        put(b, t);
    } else {
        snprintf(t, sizeof t, "\"\\U%08X\"", (unsigned)cp);
        put(b, t);
    }
}

static bool add_range(rx *r, rx_set *s, uint32_t lo, uint32_t hi) {
    if (s->n == RX_MAX_RANGES) return rx_fail(r, "a class of too many ranges");
    s->r[s->n++] = (rx_range){lo, hi};
    return true;
}

/* \d \w \s (negated: \D \W \S) into s; neg says which. false: not one. */
static bool class_escape(rx *r, char e, rx_set *s, bool *neg) {
    char l = (char)(e | 0x20);
    if (l != 'd' && l != 'w' && l != 's') return false;
    *neg = e != l;
    if (l == 'd') add_range(r, s, '0', '9');
    if (l == 'w') add_range(r, s, '0', '9'), add_range(r, s, 'A', 'Z'), add_range(r, s, 'a', 'z'), add_range(r, s, '_', '_');
    if (l == 's') add_range(r, s, ' ', ' '), add_range(r, s, '\t', '\r');
    return true;
}

/* The character of an escape other than a class (\n, \., \u0041, ...). */
static bool char_escape(rx *r, uint32_t *cp) {
    char e = *r->p++;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            char h = r->p < r->end ? *r->p : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
            if (d < 0) return rx_fail(r, "\\x needs 2 and \\u 4 hex digits");
            v = v << 4 | (uint32_t)d;
            r->p++;
        }
        *cp = v;
        return true;
    }
    switch (e) {
    case 'n': *cp = '\n'; return true;
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    case '0': *cp = 0; return true;
    default: break;
    }
    if (e >= '1' && e <= '9') return rx_fail(r, "backreferences are not regular (not supported)");
    if (e == 'b' || e == 'B') return rx_fail(r, "word boundaries (\\b, \\B) are not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return rx_fail(r, "an escape not supported");
    r->p--;
    *cp = next_cp(r); /* \. \* \\ \/ ...: the character itself */
    return true;
}

static bool in_set(const rx_set *s, uint32_t cp) {
    for (int i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi) return true;
    return false;
}

static void put_range(cdl_strbuf *b, uint32_t lo, uint32_t hi) {
    char t[32];
    snprintf(t, sizeof t, "\\U%08X-\\U%08X", (unsigned)lo, (unsigned)hi);
    put(b, t);
}

/* A set (neg: its complement) as GBNF: the characters JSON writes as they
 * are in one class, the quote and the backslash as their escapes (and, of
 * a positive set, the control characters). */
static void emit_set(cdl_strbuf *b, const rx_set *s, bool neg) {
    cdl_strbuf cls = {0};
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        if (neg) {
            put_range(&cls, lo, hi);
            continue;
        }
        if (lo < 0x20) lo = 0x20;
        const uint32_t cut[] = {'"', '\\', 0x110000};
        for (int k = 0; k < 3 && lo <= hi; k++) /* the range without " and \ */
            if (cut[k] >= lo) {
                uint32_t top = cut[k] - 1 < hi ? cut[k] - 1 : hi;
                if (top >= lo && cut[k] > lo) put_range(&cls, lo, top);
                lo = cut[k] + 1;
            }
    }
    put(b, "(");
    bool first = true;
    if (neg || cls.n) {
        put(b, neg ? "[^\\U00000000-\\U0000001F\\U00000022\\U0000005C" : "[");
        if (cls.s) cdl_strbuf_put(b, cls.s, cls.n);
        put(b, "]");
        first = false;
    }
    free(cls.s);
    const uint32_t specials[] = {'"', '\\'};
    for (int i = 0; i < 2; i++)
        if (in_set(s, specials[i]) != neg) {
            if (!first) put(b, " | ");
            lit_cp(b, specials[i]);
            first = false;
        }
    for (uint32_t cp = 0; !neg && cp < 0x20; cp++)
        if (in_set(s, cp)) {
            if (!first) put(b, " | ");
            lit_cp(b, cp);
            first = false;
        }
    if (first) put(b, "[^\\U00000000-\\U0010FFFF]"); /* the empty set: nothing */
    put(b, ")");
}

static bool rx_alt(rx *r, cdl_strbuf *out, bool top, bool *nullable);

/* A class after its '[' into s (neg: [^...]). */
static bool parse_class(rx *r, rx_set *s, bool *neg) {
    *neg = r->p < r->end && *r->p == '^';
    if (*neg) r->p++;
    bool first = true;
    while (r->p < r->end && (*r->p != ']' || first)) {
        first = false;
        uint32_t lo;
        if (*r->p == '\\' && r->p + 1 < r->end) {
            r->p++;
            bool n2 = false;
            rx_set tmp = {.n = 0};
            if (class_escape(r, *r->p, &tmp, &n2)) {
                r->p++;
                if (n2) return rx_fail(r, "\\D, \\W and \\S inside a class are not supported");
                for (int i = 0; i < tmp.n; i++)
                    if (!add_range(r, s, tmp.r[i].lo, tmp.r[i].hi)) return false;
                continue;
            }
            if (*r->p == 'b') { /* [\b] is a backspace */
                r->p++;
                lo = '\b';
            } else if (!char_escape(r, &lo)) return false;
        } else lo = next_cp(r);
        uint32_t hi = lo;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                if (r->p >= r->end || !char_escape(r, &hi)) return r->failed ? false : rx_fail(r, "a bad range end");
            } else hi = next_cp(r);
            if (hi < lo) return rx_fail(r, "a range out of order");
        }
        if (!add_range(r, s, lo, hi)) return false;
    }
    if (r->p >= r->end) return rx_fail(r, "an unterminated class");
    r->p++;
    return true;
}

/* One atom and its quantifier; *nullable: whether they can match nothing. */
static bool at_digit(const rx *r) { return r->p < r->end && *r->p >= '0' && *r->p <= '9'; }

static bool rx_atom(rx *r, cdl_strbuf *out, bool *nullable) {
    cdl_strbuf a = {0};
    char c = *r->p;
    bool ok = true, empty = false; /* empty: the atom can match nothing */
    if (c == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->p + 1 < r->end && r->p[1] == ':') r->p += 2;
            else ok = rx_fail(r, "lookaround and named groups are not supported");
        }
        if (ok && ++r->depth > RX_MAX_DEPTH) ok = rx_fail(r, "groups nested too deep");
        put(&a, "(");
        if (ok) ok = rx_alt(r, &a, false, &empty);
        r->depth--;
        if (ok && (r->p >= r->end || *r->p != ')')) ok = rx_fail(r, "an unclosed group");
        if (ok) r->p++;
        put(&a, ")");
    } else if (c == '[') {
        r->p++;
        rx_set s = {.n = 0};
        bool neg = false;
        ok = parse_class(r, &s, &neg);
        if (ok) emit_set(&a, &s, neg);
    } else if (c == '.') {
        r->p++;
        rx_set s = {.n = 0};
        add_range(r, &s, '\n', '\n'), add_range(r, &s, '\r', '\r'), add_range(r, &s, 0x2028, 0x2029);
        emit_set(&a, &s, true);
    } else if (c == '\\') {
        r->p++;
        if (r->p >= r->end) ok = rx_fail(r, "a trailing backslash");
        rx_set s = {.n = 0};
        bool neg = false;
        uint32_t cp;
        if (ok && class_escape(r, *r->p, &s, &neg)) {
            r->p++;
            emit_set(&a, &s, neg);
        } else if (ok && (ok = char_escape(r, &cp))) {
            lit_cp(&a, cp);
        }
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        ok = rx_fail(r, "a quantifier with nothing before it");
    } else if (c == '^' || c == '$') {
        ok = rx_fail(r, "^ and $ are supported only at the ends of the pattern's alternatives");
    } else {
        lit_cp(&a, next_cp(r));
    }
    if (!ok) {
        free(a.s);
        return false;
    }
    /* the quantifier */
    char q = r->p < r->end ? *r->p : 0;
    char rep[48] = "";
    if (q == '*' || q == '+' || q == '?') {
        rep[0] = q;
        rep[1] = 0;
        r->p++;
    } else if (q == '{') {
        const char *save = r->p;
        long m = -1, n = -1;
        char *e;
        r->p++;
        /* counts are digits: strtol alone takes a sign or spaces ({-1}) */
        m = at_digit(r) ? strtol(r->p, &e, 10) : -1;
        if (m < 0) {
            r->p = save;
            free(a.s);
            return rx_fail(r, "'{' that is not a quantifier (write \\{)");
        }
        r->p = e;
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            if (r->p < r->end && *r->p == '}') n = -2;
            else if (at_digit(r)) n = strtol(r->p, &e, 10), r->p = e;
            else n = -1;
        } else n = m;
        if (r->p >= r->end || *r->p != '}' || m > RX_MAX_REPEAT || n > RX_MAX_REPEAT || n == -1 || (n >= 0 && n < m)) {
            free(a.s);
            return rx_fail(r, "a bad {m,n} (at most 1000, n >= m)");
        }
        r->p++;
        if (n == -2) snprintf(rep, sizeof rep, "{%ld,}", m);
        else snprintf(rep, sizeof rep, "{%ld,%ld}", m, n);
    }
    /* an unbounded repeat of what can match nothing would be a rule that
     * reaches itself before a character (refused by the grammar) */
    bool unbounded = q == '*' || q == '+' || (q == '{' && rep[strlen(rep) - 2] == ',');
    if (empty && unbounded) {
        free(a.s);
        return rx_fail(r, "an unbounded repeat of a group that can match the empty string");
    }
    *nullable = empty || q == '*' || q == '?' || (q == '{' && rep[1] == '0' && rep[2] == ',');
    if (rep[0] && r->p < r->end && *r->p == '?') r->p++; /* lazy: the same strings */
    if (rep[0] && r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{')) {
        free(a.s);
        return rx_fail(r, "a quantifier after a quantifier");
    }
    if (a.s) cdl_strbuf_put(out, a.s, a.n);
    put(out, rep);
    put(out, " ");
    free(a.s);
    return !a.failed;
}

/* Alternatives up to ')' or the end; at the top, each with its anchors.
 * *nullable: whether one of them can match nothing. */
static bool rx_alt(rx *r, cdl_strbuf *out, bool top, bool *nullable) {
    put(out, "(");
    *nullable = false;
    for (;;) {
        bool start = false, end = false, all_null = true;
        if (top && r->p < r->end && *r->p == '^') start = true, r->p++;
        if (top && !start) put(out, "char* ");
        put(out, "\"\" ");
        while (r->p < r->end && *r->p != '|' && *r->p != ')') {
            if (top && *r->p == '$' && (r->p + 1 == r->end || r->p[1] == '|')) {
                end = true;
                r->p++;
                break;
            }
            bool n = false;
            if (!rx_atom(r, out, &n)) return false;
            all_null = all_null && n;
        }
        if (all_null) *nullable = true;
        if (top && !end) put(out, "char* ");
        if (top && r->p < r->end && *r->p == ')') return rx_fail(r, "an unmatched ')'");
        if (r->p < r->end && *r->p == '|') {
            r->p++;
            put(out, "| ");
            continue;
        }
        break;
    }
    put(out, ")");
    return true;
}

bool cdl_json_pattern_gbnf(const char *pattern, size_t n, cdl_strbuf *out, char *err, size_t errn) {
    rx r = {.s = pattern, .p = pattern, .end = pattern + n, .err = err, .errn = errn};
    put(out, "\"\\\"\" ");
    bool nullable;
    bool ok = rx_alt(&r, out, true, &nullable);
    put(out, " \"\\\"\" ws");
    if (ok && out->failed) return rx_fail(&r, "out of memory");
    return ok;
}
