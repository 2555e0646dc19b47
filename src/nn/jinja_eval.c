/* Jinja2 subset: the evaluator. Values live in an arena per render (capped:
 * max_memory); errors unwind with longjmp to candle_jinja_render, which owns
 * every allocation (the arena, the output buffers, the scope stack), so no
 * path leaks. Semantics follow jinja2 as transformers configures it:
 * undefined names print as nothing and fail when used further, strings and
 * numbers print as Python's str(), tojson is json.dumps(ensure_ascii=False). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja-impl.h"
#include "../core/core-impl.h"
#include "../core/json-impl.h"

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_LOOP } vt;

typedef struct jv jv;
typedef struct jlist { jv *v; size_t n; } jlist;
typedef struct jdict { jv *k, *v; size_t n, cap; bool ns; } jdict;
typedef struct jloop { jlist *items; size_t i; } jloop;

struct jv {
    vt t;
    bool safe; /* V_STR: markupsafe's Markup (the safe filter): + escapes a plain operand */
    size_t n;  /* V_STR bytes */
    union {
        int64_t i; /* V_BOOL, V_INT */
        double f;
        const char *s; /* V_STR; V_UNDEF: the name, for messages (may be NULL) */
        jlist *l;
        jdict *d;
        const jnode *mac;
        jloop *lp;
    } u;
};

typedef struct var { const char *name; jv v; } var;

typedef struct obuf { char *p; size_t n, cap; } obuf;

typedef struct ev {
    jj_arena a;
    jmp_buf jb;
    candle_status err;
    char msg[400];
    obuf *out;
    obuf *bufs[JJ_MAX_NEST * 2 + 8]; /* every buffer made, freed at the end */
    int nbufs;
    size_t max_out;
    size_t live; /* bytes in all live buffers */
    uint64_t iters, max_iters;
    int depth, max_depth;
    var *vars;
    size_t nvars, capvars;
    size_t frames[JJ_MAX_NEST * 4 + 64];
    int nframes;
    size_t macro_base; /* lookups inside a macro see [macro_base, n) and the globals */
    int ctl;           /* 1 break, 2 continue */
} ev;

static const jv UNDEF = {.t = V_UNDEF};
static const jv NONE = {.t = V_NONE};

_Noreturn static void efail(ev *e, candle_status st, int line, int col, const char *fmt, ...) {
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    e->err = st;
    if (line > 0) snprintf(e->msg, sizeof e->msg, "jinja: line %d, column %d: %s", line, col, m);
    else snprintf(e->msg, sizeof e->msg, "jinja: %s", m);
    longjmp(e->jb, 1);
}
#define XFAIL(x, ...) efail(e, CANDLE_ERR_INVALID_ARG, (x)->line, (x)->col, __VA_ARGS__)

static void *al(ev *e, size_t n) {
    void *p = cdl_jj_alloc(&e->a, n);
    if (!p)
        efail(e, CANDLE_ERR_INVALID_ARG, 0, 0, "memory limit of %zu bytes reached while rendering", e->a.cap);
    return p;
}

static jv mkstr(ev *e, const char *s, size_t n) {
    char *d = al(e, n + 1);
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return (jv){.t = V_STR, .n = n, .u.s = d};
}
static jv cstr(const char *s) { return (jv){.t = V_STR, .n = strlen(s), .u.s = s}; }
static jv mkint(int64_t i) { return (jv){.t = V_INT, .u.i = i}; }
static jv mkbool(bool b) { return (jv){.t = V_BOOL, .u.i = b}; }
static jv mkfloat(double f) { return (jv){.t = V_FLOAT, .u.f = f}; }
static jv mklist(ev *e, size_t n) {
    jlist *l = al(e, sizeof *l);
    l->v = n ? al(e, n * sizeof *l->v) : NULL;
    l->n = n;
    return (jv){.t = V_LIST, .u.l = l};
}
static jv mkdict(ev *e, size_t cap) {
    jdict *d = al(e, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = al(e, d->cap * sizeof *d->k);
    d->v = al(e, d->cap * sizeof *d->v);
    return (jv){.t = V_DICT, .u.d = d};
}


static jv *dict_find(jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == V_STR && d->k[i].n == n && !memcmp(d->k[i].u.s, k, n)) return &d->v[i];
    return NULL;
}

static bool veq(const jv *a, const jv *b);

static jv *dict_findv(jdict *d, const jv *k) {
    for (size_t i = 0; i < d->n; i++)
        if (veq(&d->k[i], k)) return &d->v[i];
    return NULL;
}

static void dict_set(ev *e, jdict *d, jv k, jv v) {
    jv *o = dict_findv(d, &k);
    if (o) {
        *o = v;
        return;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap * 2;
        jv *nk = al(e, nc * sizeof *nk), *nv = al(e, nc * sizeof *nv);
        memcpy(nk, d->k, d->n * sizeof *nk);
        memcpy(nv, d->v, d->n * sizeof *nv);
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

static bool truthy(const jv *v) {
    switch (v->t) {
    case V_UNDEF: case V_NONE: return false;
    case V_BOOL: case V_INT: return v->u.i != 0;
    case V_FLOAT: return v->u.f != 0;
    case V_STR: return v->n > 0;
    case V_LIST: return v->u.l->n > 0;
    case V_DICT: return v->u.d->n > 0;
    default: return true;
    }
}

static bool isnum(const jv *v) { return v->t == V_INT || v->t == V_BOOL || v->t == V_FLOAT; }
static double numf(const jv *v) { return v->t == V_FLOAT ? v->u.f : (double)v->u.i; }

static bool veq(const jv *a, const jv *b) {
    if (isnum(a) && isnum(b)) {
        if (a->t != V_FLOAT && b->t != V_FLOAT) return a->u.i == b->u.i;
        return numf(a) == numf(b);
    }
    if (a->t != b->t) return false;
    switch (a->t) {
    case V_UNDEF: case V_NONE: return true;
    case V_STR: return a->n == b->n && !memcmp(a->u.s, b->u.s, a->n);
    case V_LIST:
        if (a->u.l->n != b->u.l->n) return false;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!veq(&a->u.l->v[i], &b->u.l->v[i])) return false;
        return true;
    case V_DICT:
        if (a->u.d->n != b->u.d->n) return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            jv *o = dict_findv(b->u.d, &a->u.d->k[i]);
            if (!o || !veq(&a->u.d->v[i], o)) return false;
        }
        return true;
    case V_MACRO: return a->u.mac == b->u.mac;
    case V_LOOP: return a->u.lp == b->u.lp;
    default: return false;
    }
}

static const char *tname(const jv *v) {
    static const char *const n[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "macro", "LoopContext"};
    if (v->t == V_DICT && v->u.d->ns) return "Namespace";
    return n[v->t];
}

/* ---- text building ---- */

static void ob_put(ev *e, obuf *b, const char *s, size_t n) {
    if (!n) return;
    /* every live buffer counts: captures (macro calls, set blocks, tojson)
     * cannot hold more than the output may */
    if (n > e->max_out || e->live > e->max_out - n)
        efail(e, CANDLE_ERR_INVALID_ARG, 0, 0, "output limit of %zu bytes reached", e->max_out);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) efail(e, CANDLE_ERR_OOM, 0, 0, "out of memory");
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    e->live += n;
    b->p[b->n] = 0;
}
static void ob_puts(ev *e, obuf *b, const char *s) { ob_put(e, b, s, strlen(s)); }

static obuf *ob_new(ev *e) {
    if (e->nbufs == (int)(sizeof e->bufs / sizeof e->bufs[0]))
        efail(e, CANDLE_ERR_INVALID_ARG, 0, 0, "too many nested captures");
    obuf *b = calloc(1, sizeof *b);
    if (!b) efail(e, CANDLE_ERR_OOM, 0, 0, "out of memory");
    e->bufs[e->nbufs++] = b;
    return b;
}
/* The last buffer made, into the arena as a string, and freed. */
static jv ob_take(ev *e, obuf *b) {
    jv s = mkstr(e, b->p ? b->p : "", b->n);
    if (e->nbufs && e->bufs[e->nbufs - 1] == b) {
        e->nbufs--;
        e->live -= b->n;
        free(b->p);
        free(b);
    }
    return s;
}

/* Python's repr of a float. */
static void fmt_float(double f, char *buf, size_t n) {
    if (isnan(f)) { snprintf(buf, n, "nan"); return; }
    if (isinf(f)) { snprintf(buf, n, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { snprintf(buf, n, signbit(f) ? "-0.0" : "0.0"); return; }
    char m[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(m, sizeof m, "%.*e", prec - 1, f);
        if (strtod(m, NULL) == f) break;
    }
    /* m: [-]d.ddde[+-]XX */
    char digits[24];
    int nd = 0, exp = 0;
    bool neg = m[0] == '-';
    const char *q = m + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    if (*q == 'e') exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = buf;
    size_t left = n;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (exp >= -5 + 1 && exp < 16) {
        if (exp < 0) {
            PUT("0.");
            for (int k = 0; k < -exp - 1; k++) PUT("0");
            PUT("%s", digits);
        } else {
            for (int k = 0; k <= exp; k++) PUT("%c", k < nd ? digits[k] : '0');
            PUT(".");
            if (nd > exp + 1) PUT("%s", digits + exp + 1);
            else PUT("0");
        }
    } else {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef PUT
}

static void put_repr(ev *e, obuf *b, const jv *v);

static void put_pystr(ev *e, obuf *b, const jv *v) {
    bool sq = memchr(v->u.s, '\'', v->n) != NULL, dq = memchr(v->u.s, '"', v->n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    ob_put(e, b, &q, 1);
    for (size_t i = 0; i < v->n; i++) {
        unsigned char c = (unsigned char)v->u.s[i];
        char t[8];
        if (c == '\\') ob_puts(e, b, "\\\\");
        else if (c == (unsigned char)q) { t[0] = '\\'; t[1] = q; ob_put(e, b, t, 2); }
        else if (c == '\n') ob_puts(e, b, "\\n");
        else if (c == '\r') ob_puts(e, b, "\\r");
        else if (c == '\t') ob_puts(e, b, "\\t");
        else if (c < 32 || c == 127) { snprintf(t, sizeof t, "\\x%02x", c); ob_puts(e, b, t); }
        else ob_put(e, b, (const char *)&c, 1);
    }
    ob_put(e, b, &q, 1);
}

/* str(v) as Python prints it. */
static void put_str(ev *e, obuf *b, const jv *v) {
    char t[64];
    switch (v->t) {
    case V_UNDEF: return;
    case V_NONE: ob_puts(e, b, "None"); return;
    case V_BOOL: ob_puts(e, b, v->u.i ? "True" : "False"); return;
    case V_INT: snprintf(t, sizeof t, "%lld", (long long)v->u.i); ob_puts(e, b, t); return;
    case V_FLOAT: fmt_float(v->u.f, t, sizeof t); ob_puts(e, b, t); return;
    case V_STR: ob_put(e, b, v->u.s, v->n); return;
    default: put_repr(e, b, v);
    }
}

static void put_repr(ev *e, obuf *b, const jv *v) {
    switch (v->t) {
    case V_STR: put_pystr(e, b, v); return;
    case V_LIST:
        ob_puts(e, b, "[");
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i) ob_puts(e, b, ", ");
            put_repr(e, b, &v->u.l->v[i]);
        }
        ob_puts(e, b, "]");
        return;
    case V_DICT:
        if (v->u.d->ns) { ob_puts(e, b, "<Namespace>"); return; }
        ob_puts(e, b, "{");
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i) ob_puts(e, b, ", ");
            put_repr(e, b, &v->u.d->k[i]);
            ob_puts(e, b, ": ");
            put_repr(e, b, &v->u.d->v[i]);
        }
        ob_puts(e, b, "}");
        return;
    case V_MACRO: ob_puts(e, b, "<Macro>"); return;
    case V_LOOP: ob_puts(e, b, "<LoopContext>"); return;
    default: put_str(e, b, v);
    }
}

static jv to_str(ev *e, const jv *v) {
    if (v->t == V_STR) return *v;
    obuf *b = ob_new(e);
    put_str(e, b, v);
    return ob_take(e, b);
}

/* json.dumps(v, ensure_ascii=False, indent=indent) */
static void put_json(ev *e, obuf *b, const jv *v, int indent, int level, bool sort, const jx *at) {
    char t[64];
    if (level > JJ_MAX_NEST) XFAIL(at, "tojson: nested deeper than %d", JJ_MAX_NEST);
    switch (v->t) {
    case V_NONE: ob_puts(e, b, "null"); return;
    case V_BOOL: ob_puts(e, b, v->u.i ? "true" : "false"); return;
    case V_INT: case V_FLOAT:
        if (v->t == V_FLOAT && (isnan(v->u.f) || isinf(v->u.f))) {
            ob_puts(e, b, isnan(v->u.f) ? "NaN" : v->u.f < 0 ? "-Infinity" : "Infinity");
            return;
        }
        put_str(e, b, v);
        return;
    case V_STR:
        ob_puts(e, b, "\"");
        for (size_t i = 0; i < v->n; i++) {
            unsigned char c = (unsigned char)v->u.s[i];
            if (c == '"') ob_puts(e, b, "\\\"");
            else if (c == '\\') ob_puts(e, b, "\\\\");
            else if (c == '\n') ob_puts(e, b, "\\n");
            else if (c == '\r') ob_puts(e, b, "\\r");
            else if (c == '\t') ob_puts(e, b, "\\t");
            else if (c == '\b') ob_puts(e, b, "\\b");
            else if (c == '\f') ob_puts(e, b, "\\f");
            else if (c < 32) { snprintf(t, sizeof t, "\\u%04x", c); ob_puts(e, b, t); }
            else ob_put(e, b, (const char *)&c, 1);
        }
        ob_puts(e, b, "\"");
        return;
    case V_LIST: case V_DICT: {
        bool d = v->t == V_DICT;
        size_t n = d ? v->u.d->n : v->u.l->n;
        ob_puts(e, b, d ? "{" : "[");
        if (n == 0) { ob_puts(e, b, d ? "}" : "]"); return; }
        size_t *ord = NULL;
        if (d && sort) {
            ord = al(e, n * sizeof *ord);
            for (size_t i = 0; i < n; i++) ord[i] = i;
            for (size_t i = 1; i < n; i++) /* insertion sort by key bytes */
                for (size_t j = i; j > 0; j--) {
                    const jv *x = &v->u.d->k[ord[j - 1]], *y = &v->u.d->k[ord[j]];
                    size_t m = x->n < y->n ? x->n : y->n;
                    int c = memcmp(x->u.s, y->u.s, m);
                    if (c > 0 || (c == 0 && x->n > y->n)) { size_t s = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = s; }
                    else break;
                }
        }
        for (size_t i = 0; i < n; i++) {
            size_t k = ord ? ord[i] : i;
            if (i) ob_puts(e, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) {
                ob_puts(e, b, "\n");
                for (int s = 0; s < indent * (level + 1); s++) ob_puts(e, b, " ");
            }
            if (d) {
                const jv *key = &v->u.d->k[k];
                if (key->t == V_STR) put_json(e, b, key, indent, level + 1, sort, at);
                else {
                    jv ks = to_str(e, key);
                    ob_puts(e, b, "\"");
                    ob_put(e, b, ks.u.s, ks.n);
                    ob_puts(e, b, "\"");
                }
                ob_puts(e, b, ": ");
                put_json(e, b, &v->u.d->v[k], indent, level + 1, sort, at);
            } else put_json(e, b, &v->u.l->v[k], indent, level + 1, sort, at);
        }
        if (indent >= 0) {
            ob_puts(e, b, "\n");
            for (int s = 0; s < indent * level; s++) ob_puts(e, b, " ");
        }
        ob_puts(e, b, d ? "}" : "]");
        return;
    }
    default: XFAIL(at, "tojson: a %s is not JSON serializable", tname(v));
    }
}

/* ---- scopes ---- */

static void push_frame(ev *e, const jx *at) {
    if (e->nframes == (int)(sizeof e->frames / sizeof e->frames[0]))
        efail(e, CANDLE_ERR_INVALID_ARG, at ? at->line : 0, at ? at->col : 0, "scopes nested too deeply");
    e->frames[e->nframes++] = e->nvars;
}
static void pop_frame(ev *e) { e->nvars = e->frames[--e->nframes]; }

static jv *lookup(ev *e, const char *name) {
    for (size_t i = e->nvars; i-- > e->macro_base;)
        if (!strcmp(e->vars[i].name, name)) return &e->vars[i].v;
    if (e->macro_base) {
        size_t gend = e->nframes > 1 ? e->frames[1] : e->nvars;
        for (size_t i = gend; i-- > 0;)
            if (!strcmp(e->vars[i].name, name)) return &e->vars[i].v;
    }
    return NULL;
}

static void set_var(ev *e, const char *name, jv v) {
    size_t top = e->nframes ? e->frames[e->nframes - 1] : 0;
    for (size_t i = e->nvars; i-- > top;)
        if (!strcmp(e->vars[i].name, name)) { e->vars[i].v = v; return; }
    if (e->nvars == e->capvars) {
        size_t nc = e->capvars ? e->capvars * 2 : 64;
        var *nv = realloc(e->vars, nc * sizeof *nv);
        if (!nv) efail(e, CANDLE_ERR_OOM, 0, 0, "out of memory");
        e->vars = nv;
        e->capvars = nc;
    }
    e->vars[e->nvars].name = name;
    e->vars[e->nvars++].v = v;
}

static void tick(ev *e, int line, int col) {
    if (++e->iters > e->max_iters)
        efail(e, CANDLE_ERR_INVALID_ARG, line, col, "iteration limit of %llu reached (loop iterations and macro calls)",
              (unsigned long long)e->max_iters);
}

/* ---- strings ---- */

static size_t u8len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Code point boundaries of s: offs[0..count] */
static size_t *cp_offsets(ev *e, const jv *s, size_t *count) {
    size_t *o = al(e, (s->n + 1) * sizeof *o), k = 0;
    for (size_t i = 0; i < s->n;) {
        o[k++] = i;
        size_t l = u8len((unsigned char)s->u.s[i]);
        i = i + l > s->n ? s->n : i + l;
    }
    o[k] = s->n;
    *count = k;
    return o;
}

static bool isspace_b(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static jv strip(const jv *s, const jv *chars, int which) {
    size_t b = 0, en = s->n;
    bool set = chars && chars->t == V_STR;
#define STRIPPED(c) (set ? memchr(chars->u.s, (c), chars->n) != NULL : isspace_b(c))
    if (which & 1) while (b < en && STRIPPED(s->u.s[b])) b++;
    if (which & 2) while (en > b && STRIPPED(s->u.s[en - 1])) en--;
#undef STRIPPED
    return (jv){.t = V_STR, .n = en - b, .u.s = s->u.s + b};
}

static jv str_case(ev *e, const jv *s, int mode) { /* 0 lower 1 upper 2 capitalize 3 title */
    jv r = mkstr(e, s->u.s, s->n);
    char *d = (char *)r.u.s;
    bool start = true;
    for (size_t i = 0; i < r.n; i++) {
        char c = d[i];
        bool up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && start);
        if (up && c >= 'a' && c <= 'z') d[i] = (char)(c - 32);
        else if (!up && mode != 1 && c >= 'A' && c <= 'Z') d[i] = (char)(c + 32);
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (unsigned char)c >= 0x80;
        start = !alpha && !(c >= '0' && c <= '9') ? true : false;
        if (mode == 3 && (c >= '0' && c <= '9')) start = false;
    }
    return r;
}

static jv str_replace(ev *e, const jv *s, const jv *old, const jv *nw, int64_t count, const jx *at) {
    if (old->t != V_STR || nw->t != V_STR) XFAIL(at, "replace() needs strings");
    obuf *b = ob_new(e);
    size_t i = 0;
    int64_t done = 0;
    if (old->n == 0) {
        /* Python inserts the replacement between every character */
        for (; i <= s->n && (count < 0 || done < count); done++) {
            ob_put(e, b, nw->u.s, nw->n);
            if (i == s->n) { i++; break; }
            size_t l = u8len((unsigned char)s->u.s[i]);
            if (i + l > s->n) l = s->n - i;
            ob_put(e, b, s->u.s + i, l);
            i += l;
        }
        if (i <= s->n) ob_put(e, b, s->u.s + i, s->n - i);
        return ob_take(e, b);
    }
    while (i < s->n) {
        if ((count < 0 || done < count) && s->n - i >= old->n && !memcmp(s->u.s + i, old->u.s, old->n)) {
            ob_put(e, b, nw->u.s, nw->n);
            i += old->n;
            done++;
        } else ob_put(e, b, s->u.s + i++, 1);
    }
    return ob_take(e, b);
}

static jv str_split(ev *e, const jv *s, const jv *sep, int64_t maxsplit, const jx *at) {
    jv parts[1];
    (void)parts;
    size_t cap = 8, n = 0;
    jv *v = al(e, cap * sizeof *v);
#define ADD(x) do { if (n == cap) { jv *nv_ = al(e, cap * 2 * sizeof *nv_); memcpy(nv_, v, n * sizeof *v); v = nv_; cap *= 2; } v[n++] = (x); } while (0)
    if (!sep || sep->t == V_NONE || sep->t == V_UNDEF) {
        size_t i = 0;
        for (;;) {
            while (i < s->n && isspace_b(s->u.s[i])) i++;
            if (i >= s->n) break;
            if (maxsplit >= 0 && (int64_t)n >= maxsplit) {
                size_t en = s->n;
                while (en > i && isspace_b(s->u.s[en - 1])) en--;
                ADD(((jv){.t = V_STR, .n = en - i, .u.s = s->u.s + i}));
                break;
            }
            size_t b = i;
            while (i < s->n && !isspace_b(s->u.s[i])) i++;
            ADD(((jv){.t = V_STR, .n = i - b, .u.s = s->u.s + b}));
        }
    } else {
        if (sep->t != V_STR) XFAIL(at, "split() needs a string separator");
        if (sep->n == 0) XFAIL(at, "split(): empty separator");
        size_t b = 0, i = 0;
        while (i + sep->n <= s->n) {
            if ((maxsplit < 0 || (int64_t)n < maxsplit) && !memcmp(s->u.s + i, sep->u.s, sep->n)) {
                ADD(((jv){.t = V_STR, .n = i - b, .u.s = s->u.s + b}));
                i += sep->n;
                b = i;
            } else i++;
        }
        ADD(((jv){.t = V_STR, .n = s->n - b, .u.s = s->u.s + b}));
    }
#undef ADD
    jv r = mklist(e, 0);
    r.u.l->v = v;
    r.u.l->n = n;
    return r;
}

/* ---- evaluation ---- */

static jv eval(ev *e, const jx *x);
static void render_body(ev *e, const jbody *b);

/* A call's arguments. Kept small: it sits on the C stack once per nested call. */
#define JJ_MAX_ARGS 8
typedef struct args {
    jv pos[JJ_MAX_ARGS];
    int npos;
    const char *kwn[JJ_MAX_ARGS];
    jv kwv[JJ_MAX_ARGS];
    int nkw;
} args;

static void eval_args(ev *e, const jx *x, int from, args *a) {
    a->npos = a->nkw = 0;
    for (int i = from; i < x->nkid; i++) {
        jv v = eval(e, x->kid[i]);
        if (x->kw && x->kw[i]) {
            if (a->nkw == JJ_MAX_ARGS) XFAIL(x, "more than %d keyword arguments", JJ_MAX_ARGS);
            a->kwn[a->nkw] = x->kw[i];
            a->kwv[a->nkw++] = v;
        } else {
            if (a->npos == JJ_MAX_ARGS) XFAIL(x, "more than %d arguments", JJ_MAX_ARGS);
            a->pos[a->npos++] = v;
        }
    }
}

/* Argument i by position, or by its keyword name; NULL when absent. */
static const jv *arg(const args *a, int i, const char *name) {
    if (i >= 0 && i < a->npos) return &a->pos[i];
    for (int k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return &a->kwv[k];
    return NULL;
}

static int64_t want_int(ev *e, const jv *v, const jx *at, const char *what) {
    if (v->t == V_INT || v->t == V_BOOL) return v->u.i;
    XFAIL(at, "%s: an integer is needed, not %s", what, tname(v));
}

static jv getattr_v(ev *e, const jv *o, const char *name, size_t n, const jx *at) {
    if (o->t == V_UNDEF) {
        if (o->u.s) XFAIL(at, "'%s' is undefined", o->u.s);
        XFAIL(at, "undefined value has no attribute '%s'", name);
    }
    if (o->t == V_DICT) {
        jv *v = dict_find(o->u.d, name, n);
        return v ? *v : UNDEF;
    }
    if (o->t == V_LOOP) {
        jloop *l = o->u.lp;
        int64_t i = (int64_t)l->i, len = (int64_t)l->items->n;
        if (!strcmp(name, "index")) return mkint(i + 1);
        if (!strcmp(name, "index0")) return mkint(i);
        if (!strcmp(name, "revindex")) return mkint(len - i);
        if (!strcmp(name, "revindex0")) return mkint(len - i - 1);
        if (!strcmp(name, "first")) return mkbool(i == 0);
        if (!strcmp(name, "last")) return mkbool(i == len - 1);
        if (!strcmp(name, "length")) return mkint(len);
        if (!strcmp(name, "depth")) return mkint(1);
        if (!strcmp(name, "depth0")) return mkint(0);
        if (!strcmp(name, "previtem")) return i > 0 ? l->items->v[i - 1] : UNDEF;
        if (!strcmp(name, "nextitem")) return i + 1 < len ? l->items->v[i + 1] : UNDEF;
    }
    return UNDEF;
}

static int64_t py_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

static jv getitem(ev *e, const jv *o, const jv *k, const jx *at) {
    if (o->t == V_UNDEF) {
        if (o->u.s) XFAIL(at, "'%s' is undefined", o->u.s);
        XFAIL(at, "undefined value is not subscriptable");
    }
    if (o->t == V_DICT) {
        jv *v = dict_findv(o->u.d, k);
        return v ? *v : UNDEF;
    }
    if (o->t == V_LIST && (k->t == V_INT || k->t == V_BOOL)) {
        int64_t i = py_index(k->u.i, (int64_t)o->u.l->n);
        return i >= 0 && i < (int64_t)o->u.l->n ? o->u.l->v[i] : UNDEF;
    }
    if (o->t == V_STR && (k->t == V_INT || k->t == V_BOOL)) {
        size_t cnt, *off = cp_offsets(e, o, &cnt);
        int64_t i = py_index(k->u.i, (int64_t)cnt);
        if (i < 0 || i >= (int64_t)cnt) return UNDEF;
        return (jv){.t = V_STR, .n = off[i + 1] - off[i], .u.s = o->u.s + off[i]};
    }
    if (o->t == V_STR) return UNDEF;
    if (o->t == V_LIST && k->t == V_STR) return UNDEF;
    if (o->t == V_LOOP && k->t == V_STR) return getattr_v(e, o, k->u.s, k->n, at);
    if (o->t == V_NONE) return UNDEF;
    XFAIL(at, "a %s cannot be indexed by a %s", tname(o), tname(k));
}

static jv slice(ev *e, const jv *o, const jx *x) {
    jv a = x->kid[1] ? eval(e, x->kid[1]) : NONE, b = x->kid[2] ? eval(e, x->kid[2]) : NONE,
       c = x->kid[3] ? eval(e, x->kid[3]) : NONE;
    int64_t step = c.t == V_NONE ? 1 : want_int(e, &c, x, "slice step");
    if (step == 0) XFAIL(x, "slice step cannot be zero");
    size_t cnt = 0, *off = NULL;
    if (o->t == V_STR) off = cp_offsets(e, o, &cnt);
    else if (o->t == V_LIST) cnt = o->u.l->n;
    else if (o->t == V_UNDEF) return UNDEF;
    else XFAIL(x, "a %s cannot be sliced", tname(o));
    int64_t n = (int64_t)cnt, lo, hi;
    if (step > 0) {
        lo = a.t == V_NONE ? 0 : py_index(want_int(e, &a, x, "slice start"), n);
        hi = b.t == V_NONE ? n : py_index(want_int(e, &b, x, "slice end"), n);
        if (lo < 0) lo = 0;
        if (hi > n) hi = n;
    } else {
        lo = a.t == V_NONE ? n - 1 : py_index(want_int(e, &a, x, "slice start"), n);
        hi = b.t == V_NONE ? -1 : py_index(want_int(e, &b, x, "slice end"), n);
        if (lo >= n) lo = n - 1;
        if (hi < -1) hi = -1;
    }
    if (o->t == V_LIST) {
        size_t m = 0;
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) m++;
        jv r = mklist(e, m);
        m = 0;
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) r.u.l->v[m++] = o->u.l->v[i];
        return r;
    }
    if (step == 1) {
        if (hi <= lo) return cstr("");
        return (jv){.t = V_STR, .n = off[hi] - off[lo], .u.s = o->u.s + off[lo]};
    }
    obuf *buf = ob_new(e);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) ob_put(e, buf, o->u.s + off[i], off[i + 1] - off[i]);
    return ob_take(e, buf);
}

/* The items a for loop or a filter walks. */
static jlist *iter_items(ev *e, const jv *v, const jx *at) {
    static jlist empty;
    switch (v->t) {
    case V_UNDEF: return &empty;
    case V_LIST: return v->u.l;
    case V_DICT: {
        jv r = mklist(e, v->u.d->n);
        memcpy(r.u.l->v, v->u.d->k, v->u.d->n * sizeof(jv));
        return r.u.l;
    }
    case V_STR: {
        size_t cnt, *off = cp_offsets(e, v, &cnt);
        jv r = mklist(e, cnt);
        for (size_t i = 0; i < cnt; i++) r.u.l->v[i] = (jv){.t = V_STR, .n = off[i + 1] - off[i], .u.s = v->u.s + off[i]};
        return r.u.l;
    }
    default: XFAIL(at, "a %s is not iterable", tname(v));
    }
}

/* markupsafe.escape */
static jv html_escape(ev *e, const jv *v) {
    if (v->t == V_STR && v->safe) return *v;
    jv s = to_str(e, v);
    obuf *b = ob_new(e);
    for (size_t i = 0; i < s.n; i++) {
        char c = s.u.s[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
        if (r) ob_puts(e, b, r);
        else ob_put(e, b, &c, 1);
    }
    jv r = ob_take(e, b);
    r.safe = true;
    return r;
}

static bool run_test(ev *e, const char *name, const jv *v, const args *a, const jx *at);
static jv apply_filter(ev *e, const char *name, const jv *v, const args *a, const jx *at);

static jv binop(ev *e, int op, jv l, jv r, const jx *x) {
    if (op == JOP_CONCAT) {
        jv ls = to_str(e, &l), rs = to_str(e, &r);
        if (ls.n + rs.n < ls.n) XFAIL(x, "string too long");
        char *d = al(e, ls.n + rs.n + 1);
        memcpy(d, ls.u.s, ls.n);
        memcpy(d + ls.n, rs.u.s, rs.n);
        d[ls.n + rs.n] = 0;
        return (jv){.t = V_STR, .n = ls.n + rs.n, .u.s = d};
    }
    if (op >= JOP_EQ) {
        if (op == JOP_EQ) return mkbool(veq(&l, &r));
        if (op == JOP_NE) return mkbool(!veq(&l, &r));
        if (op == JOP_IN || op == JOP_NOTIN) {
            bool in = false;
            if (r.t == V_STR) {
                if (l.t != V_STR) XFAIL(x, "'in <string>' needs a string on the left, not %s", tname(&l));
                if (l.n == 0) in = true;
                for (size_t i = 0; !in && l.n <= r.n && i <= r.n - l.n; i++) in = !memcmp(r.u.s + i, l.u.s, l.n);
            } else if (r.t == V_DICT) in = dict_findv(r.u.d, &l) != NULL;
            else if (r.t == V_LIST) {
                for (size_t i = 0; !in && i < r.u.l->n; i++) in = veq(&l, &r.u.l->v[i]);
            } else if (r.t != V_UNDEF) XFAIL(x, "'in' needs a container on the right, not %s", tname(&r));
            return mkbool(op == JOP_IN ? in : !in);
        }
        int c;
        if (isnum(&l) && isnum(&r)) {
            double a = numf(&l), b = numf(&r);
            if (l.t != V_FLOAT && r.t != V_FLOAT) c = l.u.i < r.u.i ? -1 : l.u.i > r.u.i;
            else c = a < b ? -1 : a > b ? 1 : 0;
            if (isnan(a) || isnan(b)) return mkbool(false);
        } else if (l.t == V_STR && r.t == V_STR) {
            size_t m = l.n < r.n ? l.n : r.n;
            c = memcmp(l.u.s, r.u.s, m);
            if (!c) c = l.n < r.n ? -1 : l.n > r.n;
        } else XFAIL(x, "cannot compare %s with %s", tname(&l), tname(&r));
        return mkbool(op == JOP_LT ? c < 0 : op == JOP_LE ? c <= 0 : op == JOP_GT ? c > 0 : c >= 0);
    }
    if (op == JOP_ADD && l.t == V_STR && r.t == V_STR) {
        bool safe = l.safe || r.safe; /* Markup + str escapes the str, both ways */
        if (safe) {
            l = html_escape(e, &l);
            r = html_escape(e, &r);
        }
        jv c = binop(e, JOP_CONCAT, l, r, x);
        c.safe = safe;
        return c;
    }
    if (op == JOP_ADD && l.t == V_LIST && r.t == V_LIST) {
        jv o = mklist(e, l.u.l->n + r.u.l->n);
        if (l.u.l->n) memcpy(o.u.l->v, l.u.l->v, l.u.l->n * sizeof(jv));
        if (r.u.l->n) memcpy(o.u.l->v + l.u.l->n, r.u.l->v, r.u.l->n * sizeof(jv));
        return o;
    }
    if (op == JOP_MUL && (l.t == V_STR || l.t == V_LIST) && (r.t == V_INT || r.t == V_BOOL)) {
        int64_t k = r.u.i < 0 ? 0 : r.u.i;
        size_t unit = l.t == V_STR ? l.n : l.u.l->n * sizeof(jv);
        if (unit && (uint64_t)k > (e->a.cap ? e->a.cap : SIZE_MAX) / unit) XFAIL(x, "repetition too large");
        if (l.t == V_STR) {
            obuf *b = ob_new(e);
            for (int64_t i = 0; i < k; i++) ob_put(e, b, l.u.s, l.n);
            return ob_take(e, b);
        }
        jv o = mklist(e, l.u.l->n * (size_t)k);
        for (int64_t i = 0; l.u.l->n && i < k; i++) memcpy(o.u.l->v + i * l.u.l->n, l.u.l->v, l.u.l->n * sizeof(jv));
        return o;
    }
    if (!isnum(&l) || !isnum(&r))
        XFAIL(x, "unsupported operand types for arithmetic: %s and %s", tname(&l), tname(&r));
    bool fl = l.t == V_FLOAT || r.t == V_FLOAT;
    int64_t a = l.u.i, b = r.u.i, res;
    double fa = numf(&l), fb = numf(&r);
    switch (op) {
    case JOP_ADD:
        if (fl) return mkfloat(fa + fb);
        if (__builtin_add_overflow(a, b, &res)) XFAIL(x, "integer overflow");
        return mkint(res);
    case JOP_SUB:
        if (fl) return mkfloat(fa - fb);
        if (__builtin_sub_overflow(a, b, &res)) XFAIL(x, "integer overflow");
        return mkint(res);
    case JOP_MUL:
        if (fl) return mkfloat(fa * fb);
        if (__builtin_mul_overflow(a, b, &res)) XFAIL(x, "integer overflow");
        return mkint(res);
    case JOP_DIV:
        if (fb == 0) XFAIL(x, "division by zero");
        return mkfloat(fa / fb);
    case JOP_FLOORDIV: case JOP_MOD:
        if (fl) {
            if (fb == 0) XFAIL(x, "division by zero");
            double m = fmod(fa, fb);
            if (m != 0 && ((m < 0) != (fb < 0))) m += fb;
            return op == JOP_MOD ? mkfloat(m) : mkfloat(floor(fa / fb));
        }
        if (b == 0) XFAIL(x, "division by zero");
        if (a == INT64_MIN && b == -1) XFAIL(x, "integer overflow");
        {
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) { q--; m += b; }
            return op == JOP_MOD ? mkint(m) : mkint(q);
        }
    case JOP_POW:
        if (!fl && b >= 0) {
            int64_t r2 = 1;
            for (int64_t i = 0; i < b; i++) {
                if (__builtin_mul_overflow(r2, a, &r2)) XFAIL(x, "integer overflow");
                if (r2 == 0 || r2 == 1 || (r2 == -1 && i > 64)) { if (r2 == -1) r2 = (b % 2) ? -1 : 1; break; }
            }
            return mkint(r2);
        }
        return mkfloat(pow(fa, fb));
    }
    XFAIL(x, "bad operator");
}

static jv call_macro(ev *e, const jnode *m, const args *a, const jx *at) {
    tick(e, at->line, at->col);
    if (e->depth >= e->max_depth) XFAIL(at, "macro calls nested deeper than %d", e->max_depth);
    if (a->npos > m->nparams) XFAIL(at, "macro '%s' takes %d arguments, %d given", m->vars[0], m->nparams, a->npos);
    for (int k = 0; k < a->nkw; k++) {
        bool found = false;
        for (int i = 0; i < m->nparams; i++) found |= !strcmp(m->params[i], a->kwn[k]);
        if (!found) XFAIL(at, "macro '%s' has no parameter '%s'", m->vars[0], a->kwn[k]);
    }
    size_t saved_base = e->macro_base;
    int saved_frames = e->nframes;
    obuf *saved_out = e->out;
    /* parameter values are computed in the caller's scope, defaults in the macro's */
    push_frame(e, at);
    size_t base = e->nvars;
    e->macro_base = base;
    for (int i = 0; i < m->nparams; i++) {
        const jv *v = arg(a, i, m->params[i]);
        jv val = v ? *v : m->defaults[i] ? eval(e, m->defaults[i]) : (jv){.t = V_UNDEF, .u.s = m->params[i]};
        set_var(e, m->params[i], val);
    }
    e->depth++;
    obuf *b = ob_new(e);
    e->out = b;
    render_body(e, &m->body);
    e->ctl = 0;
    e->depth--;
    e->out = saved_out;
    jv r = ob_take(e, b);
    e->nframes = saved_frames + 1;
    pop_frame(e);
    e->macro_base = saved_base;
    return r;
}

static jv call_method(ev *e, const jv *o, const jx *attr, const args *a, const jx *x, bool *done) {
    const char *n = attr->name;
    *done = true;
    if (o->t == V_STR) {
        if (!strcmp(n, "strip")) return strip(o, arg(a, 0, "chars"), 3);
        if (!strcmp(n, "lstrip")) return strip(o, arg(a, 0, "chars"), 1);
        if (!strcmp(n, "rstrip")) return strip(o, arg(a, 0, "chars"), 2);
        if (!strcmp(n, "upper")) return str_case(e, o, 1);
        if (!strcmp(n, "lower")) return str_case(e, o, 0);
        if (!strcmp(n, "capitalize")) return str_case(e, o, 2);
        if (!strcmp(n, "title")) return str_case(e, o, 3);
        if (!strcmp(n, "startswith") || !strcmp(n, "endswith")) {
            const jv *p = arg(a, 0, NULL);
            if (!p) XFAIL(x, "%s() needs an argument", n);
            bool ends = n[0] == 'e';
            size_t cnt = p->t == V_LIST ? p->u.l->n : 1;
            for (size_t i = 0; i < cnt; i++) {
                const jv *q = p->t == V_LIST ? &p->u.l->v[i] : p;
                if (q->t != V_STR) XFAIL(x, "%s() needs a string, not %s", n, tname(q));
                if (q->n <= o->n && !memcmp(o->u.s + (ends ? o->n - q->n : 0), q->u.s, q->n)) return mkbool(true);
            }
            return mkbool(false);
        }
        if (!strcmp(n, "split")) {
            const jv *mx = arg(a, 1, "maxsplit");
            return str_split(e, o, arg(a, 0, "sep"), mx ? want_int(e, mx, x, "maxsplit") : -1, x);
        }
        if (!strcmp(n, "replace")) {
            const jv *p = arg(a, 0, NULL), *q = arg(a, 1, NULL), *c = arg(a, 2, "count");
            if (!p || !q) XFAIL(x, "replace() needs two arguments");
            return str_replace(e, o, p, q, c ? want_int(e, c, x, "count") : -1, x);
        }
        if (!strcmp(n, "find") || !strcmp(n, "count")) {
            const jv *p = arg(a, 0, NULL);
            if (!p || p->t != V_STR) XFAIL(x, "%s() needs a string", n);
            int64_t cnt = 0;
            for (size_t i = 0; p->n <= o->n && i <= o->n - p->n;) {
                if (!memcmp(o->u.s + i, p->u.s, p->n)) {
                    if (n[0] == 'f') {
                        int64_t cp = 0;
                        for (size_t k = 0; k < i; k++) cp += ((unsigned char)o->u.s[k] & 0xC0) != 0x80;
                        return mkint(cp);
                    }
                    cnt++;
                    i += p->n ? p->n : 1;
                } else i++;
            }
            return mkint(n[0] == 'f' ? -1 : cnt);
        }
        if (!strcmp(n, "format")) { /* {} {0} {name}, {{ }}; no format specs */
            obuf *b = ob_new(e);
            int auto_i = 0;
            for (size_t i = 0; i < o->n; i++) {
                char c = o->u.s[i];
                if ((c == '{' || c == '}') && i + 1 < o->n && o->u.s[i + 1] == c) {
                    ob_put(e, b, &c, 1);
                    i++;
                    continue;
                }
                if (c == '}') XFAIL(x, "format(): single '}'");
                if (c != '{') {
                    ob_put(e, b, &c, 1);
                    continue;
                }
                size_t j = i + 1;
                while (j < o->n && o->u.s[j] != '}' && o->u.s[j] != ':' && o->u.s[j] != '!') j++;
                if (j >= o->n || o->u.s[j] != '}') XFAIL(x, "format(): only {}, {N} and {name} fields are supported");
                const jv *val;
                char key[64];
                size_t kl = j - i - 1;
                if (kl >= sizeof key) XFAIL(x, "format(): field name too long");
                memcpy(key, o->u.s + i + 1, kl);
                key[kl] = 0;
                if (kl == 0) val = arg(a, auto_i++, NULL);
                else if (key[0] >= '0' && key[0] <= '9') val = arg(a, atoi(key), NULL);
                else {
                    val = NULL;
                    for (int k = 0; k < a->nkw; k++)
                        if (!strcmp(a->kwn[k], key)) val = &a->kwv[k];
                }
                if (!val) XFAIL(x, "format(): no argument for field '{%s}'", key);
                put_str(e, b, val);
                i = j;
            }
            return ob_take(e, b);
        }
        if (!strcmp(n, "join")) {
            const jv *l = arg(a, 0, NULL);
            if (!l) XFAIL(x, "join() needs an argument");
            jlist *it = iter_items(e, l, x);
            obuf *b = ob_new(e);
            for (size_t i = 0; i < it->n; i++) {
                if (it->v[i].t != V_STR) XFAIL(x, "join(): item %zu is a %s, not a string", i, tname(&it->v[i]));
                if (i) ob_put(e, b, o->u.s, o->n);
                ob_put(e, b, it->v[i].u.s, it->v[i].n);
            }
            return ob_take(e, b);
        }
    } else if (o->t == V_DICT && !o->u.d->ns) {
        jdict *d = o->u.d;
        if (!strcmp(n, "items") || !strcmp(n, "keys") || !strcmp(n, "values")) {
            jv r = mklist(e, d->n);
            for (size_t i = 0; i < d->n; i++) {
                if (n[0] == 'k') r.u.l->v[i] = d->k[i];
                else if (n[0] == 'v') r.u.l->v[i] = d->v[i];
                else {
                    jv pr = mklist(e, 2);
                    pr.u.l->v[0] = d->k[i];
                    pr.u.l->v[1] = d->v[i];
                    r.u.l->v[i] = pr;
                }
            }
            return r;
        }
        if (!strcmp(n, "get")) {
            const jv *k = arg(a, 0, "key"), *df = arg(a, 1, "default");
            if (!k) XFAIL(x, "get() needs a key");
            jv *v = dict_findv(d, k);
            return v ? *v : df ? *df : NONE;
        }
    } else if (o->t == V_LOOP && !strcmp(n, "cycle")) {
        if (a->npos == 0) XFAIL(x, "loop.cycle() needs arguments");
        return a->pos[o->u.lp->i % (size_t)a->npos];
    }
    *done = false;
    return UNDEF;
}

static jv call_builtin(ev *e, const char *n, const args *a, const jx *x, bool *done) {
    *done = true;
    if (!strcmp(n, "raise_exception")) {
        const jv *m = arg(a, 0, NULL);
        jv s = m ? to_str(e, m) : cstr("");
        char buf[240];
        candle_escape_text(s.u.s, s.n, buf, sizeof buf);
        efail(e, CANDLE_ERR_INVALID_ARG, x->line, x->col, "the template raised an exception: %s", buf);
    }
    if (!strcmp(n, "namespace") || !strcmp(n, "dict")) {
        jv d = mkdict(e, (size_t)a->nkw + 4);
        d.u.d->ns = n[0] == 'n';
        if (a->npos > 0) {
            if (a->pos[0].t != V_DICT) XFAIL(x, "%s() takes keyword arguments or a dict", n);
            for (size_t i = 0; i < a->pos[0].u.d->n; i++) dict_set(e, d.u.d, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]);
        }
        for (int k = 0; k < a->nkw; k++) dict_set(e, d.u.d, cstr(a->kwn[k]), a->kwv[k]);
        return d;
    }
    if (!strcmp(n, "range")) {
        int64_t lo = 0, hi, st = 1;
        if (a->npos == 1) hi = want_int(e, &a->pos[0], x, "range");
        else if (a->npos == 2 || a->npos == 3) {
            lo = want_int(e, &a->pos[0], x, "range");
            hi = want_int(e, &a->pos[1], x, "range");
            if (a->npos == 3) st = want_int(e, &a->pos[2], x, "range");
        } else XFAIL(x, "range() takes 1 to 3 arguments");
        if (st == 0) XFAIL(x, "range() step cannot be zero");
        double cnt = st > 0 ? ceil(((double)hi - (double)lo) / (double)st) : ceil(((double)lo - (double)hi) / (double)-st);
        if (cnt < 0) cnt = 0;
        if (cnt > (double)e->max_iters) XFAIL(x, "range() of %.0f items is over the iteration limit", cnt);
        jv r = mklist(e, (size_t)cnt);
        for (size_t i = 0; i < (size_t)cnt; i++) r.u.l->v[i] = mkint(lo + (int64_t)i * st);
        return r;
    }
    if (!strcmp(n, "strftime_now")) {
        const jv *f = arg(a, 0, NULL);
        if (!f || f->t != V_STR) XFAIL(x, "strftime_now() needs a format string");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[256];
        size_t m = strftime(buf, sizeof buf, f->u.s, &tmv);
        return mkstr(e, buf, m);
    }
    *done = false;
    return UNDEF;
}

static bool is_builtin(const char *n) {
    static const char *const names[] = {"raise_exception", "namespace", "dict", "range", "strftime_now"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(n, names[i])) return true;
    return false;
}

__attribute__((noinline)) static jv eval_call(ev *e, const jx *x) {
    args a;
    const jx *fn = x->kid[0];
    if (fn->kind == JX_ATTR) {
        jv o = eval(e, fn->kid[0]);
        if (o.t == V_UNDEF) getattr_v(e, &o, fn->name, fn->len, fn); /* fails */
        eval_args(e, x, 1, &a);
        bool done;
        jv r = call_method(e, &o, fn, &a, x, &done);
        if (done) return r;
        jv f = getattr_v(e, &o, fn->name, fn->len, fn);
        if (f.t == V_MACRO) return call_macro(e, f.u.mac, &a, x);
        XFAIL(x, "a %s has no method '%s'", tname(&o), fn->name);
    }
    if (fn->kind == JX_NAME && !lookup(e, fn->name)) {
        eval_args(e, x, 1, &a);
        bool done;
        jv r = call_builtin(e, fn->name, &a, x, &done);
        if (done) return r;
        XFAIL(x, "'%s' is undefined", fn->name);
    }
    jv f = eval(e, fn);
    eval_args(e, x, 1, &a);
    if (f.t == V_MACRO) return call_macro(e, f.u.mac, &a, x);
    XFAIL(x, "a %s is not callable", tname(&f));
}

/* Out of eval, so that eval's own frame (one per level of an expression)
 * holds no argument lists. */
__attribute__((noinline)) static jv eval_filter(ev *e, const jx *x) {
    jv v = eval(e, x->kid[0]);
    args a;
    eval_args(e, x, 1, &a);
    return apply_filter(e, x->name, &v, &a, x);
}

__attribute__((noinline)) static jv eval_test(ev *e, const jx *x) {
    jv v;
    if (x->kid[0]->kind == JX_NAME && (!strcmp(x->name, "defined") || !strcmp(x->name, "undefined"))) {
        jv *p = lookup(e, x->kid[0]->name);
        v = p ? *p : UNDEF;
        if (!p && is_builtin(x->kid[0]->name)) v = mkbool(true); /* globals are defined */
    } else v = eval(e, x->kid[0]);
    args a;
    eval_args(e, x, 1, &a);
    bool r = run_test(e, x->name, &v, &a, x);
    return mkbool(x->op ? !r : r);
}

static jv eval(ev *e, const jx *x) {
    switch (x->kind) {
    case JX_STR: return (jv){.t = V_STR, .n = x->len, .u.s = x->name};
    case JX_INT: return mkint(x->i);
    case JX_FLOAT: return mkfloat(x->f);
    case JX_BOOL: return mkbool(x->i != 0);
    case JX_NONE: return NONE;
    case JX_NAME: {
        jv *v = lookup(e, x->name);
        if (v) return *v;
        return (jv){.t = V_UNDEF, .u.s = x->name};
    }
    case JX_ATTR: {
        jv o = eval(e, x->kid[0]);
        return getattr_v(e, &o, x->name, x->len, x);
    }
    case JX_INDEX: {
        jv o = eval(e, x->kid[0]), k = eval(e, x->kid[1]);
        return getitem(e, &o, &k, x);
    }
    case JX_SLICE: {
        jv o = eval(e, x->kid[0]);
        return slice(e, &o, x);
    }
    case JX_CALL: return eval_call(e, x);
    case JX_FILTER: return eval_filter(e, x);
    case JX_TEST: return eval_test(e, x);
    case JX_BIN: {
        jv l = eval(e, x->kid[0]), r = eval(e, x->kid[1]);
        return binop(e, x->op, l, r, x);
    }
    case JX_NEG: case JX_POS: {
        jv v = eval(e, x->kid[0]);
        if (!isnum(&v)) XFAIL(x, "bad operand type for unary %c: %s", x->kind == JX_NEG ? '-' : '+', tname(&v));
        if (x->kind == JX_POS) return v.t == V_BOOL ? mkint(v.u.i) : v;
        if (v.t == V_FLOAT) return mkfloat(-v.u.f);
        if (v.u.i == INT64_MIN) XFAIL(x, "integer overflow");
        return mkint(-v.u.i);
    }
    case JX_NOT: {
        jv v = eval(e, x->kid[0]);
        return mkbool(!truthy(&v));
    }
    case JX_AND: case JX_OR: {
        jv l = eval(e, x->kid[0]);
        if (truthy(&l) == (x->kind == JX_OR)) return l;
        return eval(e, x->kid[1]);
    }
    case JX_COND: {
        jv c = eval(e, x->kid[0]);
        if (truthy(&c)) return eval(e, x->kid[1]);
        return x->kid[2] ? eval(e, x->kid[2]) : UNDEF;
    }
    case JX_LIST: {
        jv r = mklist(e, (size_t)x->nkid);
        for (int i = 0; i < x->nkid; i++) r.u.l->v[i] = eval(e, x->kid[i]);
        return r;
    }
    case JX_DICT: {
        jv d = mkdict(e, (size_t)x->nkid / 2 + 1);
        for (int i = 0; i + 1 < x->nkid; i += 2) {
            jv k = eval(e, x->kid[i]), v = eval(e, x->kid[i + 1]);
            dict_set(e, d.u.d, k, v);
        }
        return d;
    }
    }
    XFAIL(x, "bad expression");
}

/* ---- tests and filters ---- */

static bool run_test(ev *e, const char *n, const jv *v, const args *a, const jx *x) {
    const jv *p = arg(a, 0, NULL);
    if (!strcmp(n, "defined")) return v->t != V_UNDEF;
    if (!strcmp(n, "undefined")) return v->t == V_UNDEF;
    if (!strcmp(n, "none")) return v->t == V_NONE;
    if (!strcmp(n, "string")) return v->t == V_STR;
    if (!strcmp(n, "mapping")) return v->t == V_DICT;
    if (!strcmp(n, "iterable")) return v->t == V_LIST || v->t == V_DICT || v->t == V_STR || v->t == V_UNDEF;
    if (!strcmp(n, "sequence")) return v->t == V_LIST || v->t == V_DICT || v->t == V_STR;
    if (!strcmp(n, "number")) return isnum(v);
    if (!strcmp(n, "integer")) return v->t == V_INT;
    if (!strcmp(n, "float")) return v->t == V_FLOAT;
    if (!strcmp(n, "boolean")) return v->t == V_BOOL;
    if (!strcmp(n, "true")) return v->t == V_BOOL && v->u.i;
    if (!strcmp(n, "false")) return v->t == V_BOOL && !v->u.i;
    if (!strcmp(n, "callable")) return v->t == V_MACRO;
    if (!strcmp(n, "lower") || !strcmp(n, "upper")) {
        if (v->t != V_STR) return false;
        jv c = str_case(e, v, n[0] == 'u');
        return c.n == v->n && !memcmp(c.u.s, v->u.s, v->n);
    }
    if (!strcmp(n, "even") || !strcmp(n, "odd")) {
        int64_t i = want_int(e, v, x, n);
        return ((i % 2) != 0) == (n[0] == 'o');
    }
    if (!p) XFAIL(x, "test '%s' is unknown or needs an argument", n);
    if (!strcmp(n, "divisibleby")) {
        int64_t d = want_int(e, p, x, n), i = want_int(e, v, x, n);
        if (d == 0) XFAIL(x, "divisibleby 0");
        return d == -1 || i % d == 0;
    }
    if (!strcmp(n, "eq") || !strcmp(n, "equalto") || !strcmp(n, "==") || !strcmp(n, "sameas")) return veq(v, p);
    if (!strcmp(n, "ne") || !strcmp(n, "!=")) return !veq(v, p);
    if (!strcmp(n, "lt") || !strcmp(n, "lessthan")) return truthy(&(jv){.t = V_BOOL, .u.i = binop(e, JOP_LT, *v, *p, x).u.i});
    if (!strcmp(n, "gt") || !strcmp(n, "greaterthan")) return binop(e, JOP_GT, *v, *p, x).u.i;
    if (!strcmp(n, "le")) return binop(e, JOP_LE, *v, *p, x).u.i;
    if (!strcmp(n, "ge")) return binop(e, JOP_GE, *v, *p, x).u.i;
    if (!strcmp(n, "in")) return binop(e, JOP_IN, *v, *p, x).u.i;
    XFAIL(x, "unknown test '%s'", n);
}

/* Item attribute for selectattr/map: "a.b" walks nested dicts. */
static jv attr_path(ev *e, const jv *v, const jv *path, const jx *x) {
    if (path->t == V_INT) return getitem(e, v, path, x);
    if (path->t != V_STR) XFAIL(x, "attribute name must be a string");
    jv cur = *v;
    size_t b = 0;
    for (size_t i = 0; i <= path->n; i++)
        if (i == path->n || path->u.s[i] == '.') {
            if (cur.t == V_UNDEF) return UNDEF;
            cur = getattr_v(e, &cur, path->u.s + b, i - b, x);
            b = i + 1;
        }
    return cur;
}

static int64_t length_of(const jv *v) {
    switch (v->t) {
    case V_STR: {
        int64_t c = 0;
        for (size_t i = 0; i < v->n; i++) c += ((unsigned char)v->u.s[i] & 0xC0) != 0x80;
        return c;
    }
    case V_LIST: return (int64_t)v->u.l->n;
    case V_DICT: return (int64_t)v->u.d->n;
    case V_UNDEF: return 0;
    default: return -1;
    }
}

static jv apply_filter(ev *e, const char *n, const jv *v, const args *a, const jx *x) {
    const jv *p0 = arg(a, 0, NULL);
    if (!strcmp(n, "safe")) {
        jv r = to_str(e, v);
        r.safe = true;
        return r;
    }
    if (!strcmp(n, "escape") || !strcmp(n, "e")) return html_escape(e, v);
    if (!strcmp(n, "trim")) {
        jv s = to_str(e, v);
        return strip(&s, arg(a, 0, "chars"), 3);
    }
    if (!strcmp(n, "length") || !strcmp(n, "count")) {
        int64_t l = length_of(v);
        if (l < 0) XFAIL(x, "a %s has no length", tname(v));
        return mkint(l);
    }
    if (!strcmp(n, "upper") || !strcmp(n, "lower") || !strcmp(n, "capitalize") || !strcmp(n, "title")) {
        jv s = to_str(e, v);
        return str_case(e, &s, n[0] == 'l' ? 0 : n[0] == 'u' ? 1 : n[0] == 'c' ? 2 : 3);
    }
    if (!strcmp(n, "string")) return to_str(e, v);
    if (!strcmp(n, "tojson")) {
        const jv *ind = arg(a, 0, "indent"), *sk = arg(a, -1, "sort_keys");
        int indent = -1;
        if (ind && ind->t != V_NONE) {
            int64_t i = want_int(e, ind, x, "tojson indent");
            indent = i < 0 ? 0 : i > 64 ? 64 : (int)i;
        }
        obuf *b = ob_new(e);
        put_json(e, b, v, indent, 0, sk && truthy(sk), x);
        return ob_take(e, b);
    }
    if (!strcmp(n, "default") || !strcmp(n, "d")) {
        const jv *bo = arg(a, 1, "boolean");
        bool use = v->t == V_UNDEF || (bo && truthy(bo) && !truthy(v));
        return use ? (p0 ? *p0 : cstr("")) : *v;
    }
    if (!strcmp(n, "first") || !strcmp(n, "last")) {
        jlist *it = iter_items(e, v, x);
        if (!it->n) return UNDEF;
        return n[0] == 'f' ? it->v[0] : it->v[it->n - 1];
    }
    if (!strcmp(n, "list")) {
        jlist *it = iter_items(e, v, x);
        jv r = mklist(e, it->n);
        if (it->n) memcpy(r.u.l->v, it->v, it->n * sizeof(jv));
        return r;
    }
    if (!strcmp(n, "reverse")) {
        if (v->t == V_STR) {
            jx fake = *x;
            (void)fake;
            jlist *it = iter_items(e, v, x);
            obuf *b = ob_new(e);
            for (size_t i = it->n; i-- > 0;) ob_put(e, b, it->v[i].u.s, it->v[i].n);
            return ob_take(e, b);
        }
        jlist *it = iter_items(e, v, x);
        jv r = mklist(e, it->n);
        for (size_t i = 0; i < it->n; i++) r.u.l->v[i] = it->v[it->n - 1 - i];
        return r;
    }
    if (!strcmp(n, "items")) {
        if (v->t == V_UNDEF) return mklist(e, 0);
        if (v->t != V_DICT) XFAIL(x, "items: a %s is not a mapping", tname(v));
        bool done;
        jx at = {.name = "items"};
        args none = {0};
        return call_method(e, v, &at, &none, x, &done);
    }
    if (!strcmp(n, "join")) {
        const jv *sep = arg(a, 0, "d"), *at = arg(a, 1, "attribute");
        jlist *it = iter_items(e, v, x);
        obuf *b = ob_new(e);
        for (size_t i = 0; i < it->n; i++) {
            if (i && sep) {
                jv s = to_str(e, sep);
                ob_put(e, b, s.u.s, s.n);
            }
            jv item = at ? attr_path(e, &it->v[i], at, x) : it->v[i];
            put_str(e, b, &item);
        }
        return ob_take(e, b);
    }
    if (!strcmp(n, "selectattr") || !strcmp(n, "rejectattr") || !strcmp(n, "select") || !strcmp(n, "reject")) {
        bool attr = strlen(n) > 6, keep = n[0] == 's';
        jlist *it = truthy(v) ? iter_items(e, v, x) : mklist(e, 0).u.l; /* jinja2: "if seq:" */
        const jv *an = attr ? arg(a, 0, NULL) : NULL;
        if (attr && !an) XFAIL(x, "%s needs an attribute name", n);
        const jv *tn = arg(a, attr ? 1 : 0, NULL);
        if (tn && tn->t != V_STR) XFAIL(x, "%s: the test name must be a string", n);
        args ta = {0};
        for (int i = attr ? 2 : 1; i < a->npos; i++) ta.pos[ta.npos++] = a->pos[i];
        jv r = mklist(e, it->n);
        size_t m = 0;
        for (size_t i = 0; i < it->n; i++) {
            jv item = attr ? attr_path(e, &it->v[i], an, x) : it->v[i];
            bool t = tn ? run_test(e, tn->u.s, &item, &ta, x) : truthy(&item);
            if (t == keep) r.u.l->v[m++] = it->v[i];
        }
        r.u.l->n = m;
        return r;
    }
    if (!strcmp(n, "map")) {
        jlist *it = truthy(v) ? iter_items(e, v, x) : mklist(e, 0).u.l;
        const jv *an = arg(a, -1, "attribute"), *df = arg(a, -1, "default");
        jv r = mklist(e, it->n);
        if (an) {
            for (size_t i = 0; i < it->n; i++) {
                jv item = attr_path(e, &it->v[i], an, x);
                r.u.l->v[i] = item.t == V_UNDEF && df ? *df : item;
            }
            return r;
        }
        if (!p0 || p0->t != V_STR) XFAIL(x, "map needs attribute= or a filter name");
        args fa = {0};
        for (int i = 1; i < a->npos; i++) fa.pos[fa.npos++] = a->pos[i];
        for (size_t i = 0; i < it->n; i++) r.u.l->v[i] = apply_filter(e, p0->u.s, &it->v[i], &fa, x);
        return r;
    }
    if (!strcmp(n, "replace")) {
        jv s = to_str(e, v);
        const jv *o = arg(a, 0, "old"), *nw = arg(a, 1, "new"), *c = arg(a, 2, "count");
        if (!o || !nw) XFAIL(x, "replace needs two arguments");
        jv os = to_str(e, o), ns = to_str(e, nw);
        return str_replace(e, &s, &os, &ns, c && c->t != V_NONE ? want_int(e, c, x, "count") : -1, x);
    }
    if (!strcmp(n, "int") || !strcmp(n, "float")) {
        bool isint = n[0] == 'i';
        const jv *df = arg(a, 0, "default");
        jv dv = df ? *df : isint ? mkint(0) : mkfloat(0);
        if (v->t == V_INT || v->t == V_BOOL) return isint ? mkint(v->u.i) : mkfloat((double)v->u.i);
        if (v->t == V_FLOAT) {
            if (!isint) return *v;
            if (!(v->u.f > -9.2e18 && v->u.f < 9.2e18)) return dv;
            return mkint((int64_t)v->u.f);
        }
        if (v->t == V_STR) {
            jv s = strip(v, NULL, 3);
            char buf[64];
            if (s.n == 0 || s.n >= sizeof buf) return dv;
            memcpy(buf, s.u.s, s.n);
            buf[s.n] = 0;
            char *end;
            if (isint) {
                long long i = strtoll(buf, &end, 10);
                if (*end == 0) return mkint(i);
                double f = strtod(buf, &end);
                if (*end == 0 && f > -9.2e18 && f < 9.2e18) return mkint((int64_t)f);
                return dv;
            }
            double f = strtod(buf, &end);
            return *end == 0 ? mkfloat(f) : dv;
        }
        return dv;
    }
    if (!strcmp(n, "abs")) {
        if (v->t == V_FLOAT) return mkfloat(fabs(v->u.f));
        int64_t i = want_int(e, v, x, "abs");
        if (i == INT64_MIN) XFAIL(x, "integer overflow");
        return mkint(i < 0 ? -i : i);
    }
    if (!strcmp(n, "dictsort")) {
        if (v->t != V_DICT) XFAIL(x, "dictsort: a %s is not a mapping", tname(v));
        const jv *cs = arg(a, 0, "case_sensitive"), *by = arg(a, 1, "by"), *rev = arg(a, 2, "reverse");
        bool byval = by && by->t == V_STR && by->n == 5 && !memcmp(by->u.s, "value", 5);
        bool c_s = cs && truthy(cs), r_ = rev && truthy(rev);
        jdict *d = v->u.d;
        jv r = mklist(e, d->n);
        for (size_t i = 0; i < d->n; i++) {
            jv pr = mklist(e, 2);
            pr.u.l->v[0] = d->k[i];
            pr.u.l->v[1] = d->v[i];
            r.u.l->v[i] = pr;
        }
        for (size_t i = 1; i < d->n; i++) /* stable insertion sort, as Python's sorted */
            for (size_t j = i; j > 0; j--) {
                jv ka = r.u.l->v[j - 1].u.l->v[byval], kb = r.u.l->v[j].u.l->v[byval];
                if (!c_s && ka.t == V_STR) ka = str_case(e, &ka, 0);
                if (!c_s && kb.t == V_STR) kb = str_case(e, &kb, 0);
                bool gt = binop(e, r_ ? JOP_LT : JOP_GT, ka, kb, x).u.i != 0;
                if (!gt) break;
                jv t = r.u.l->v[j];
                r.u.l->v[j] = r.u.l->v[j - 1];
                r.u.l->v[j - 1] = t;
            }
        return r;
    }
    if (!strcmp(n, "min") || !strcmp(n, "max")) {
        jlist *it = iter_items(e, v, x);
        if (!it->n) return UNDEF;
        jv best = it->v[0];
        for (size_t i = 1; i < it->n; i++)
            if (binop(e, n[1] == 'i' ? JOP_LT : JOP_GT, it->v[i], best, x).u.i) best = it->v[i];
        return best;
    }
    if (!strcmp(n, "unique")) {
        jlist *it = iter_items(e, v, x);
        jv r = mklist(e, it->n);
        size_t m = 0;
        for (size_t i = 0; i < it->n; i++) {
            bool seen = false;
            for (size_t k = 0; k < m && !seen; k++) seen = veq(&r.u.l->v[k], &it->v[i]);
            if (!seen) r.u.l->v[m++] = it->v[i];
        }
        r.u.l->n = m;
        return r;
    }
    if (!strcmp(n, "indent")) {
        jv s = to_str(e, v);
        const jv *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
        jv pad;
        if (w && w->t == V_STR) pad = *w;
        else {
            int64_t k = w ? want_int(e, w, x, "indent width") : 4;
            if (k < 0) k = 0;
            if (k > 256) XFAIL(x, "indent width over 256");
            char sp[257];
            memset(sp, ' ', (size_t)k);
            pad = mkstr(e, sp, (size_t)k);
        }
        obuf *b = ob_new(e);
        bool at_start = true, line0 = true;
        for (size_t i = 0; i < s.n; i++) {
            if (at_start) {
                bool empty = s.u.s[i] == '\n';
                if ((!line0 || (first && truthy(first))) && (!empty || (blank && truthy(blank)))) ob_put(e, b, pad.u.s, pad.n);
                at_start = false;
            }
            ob_put(e, b, s.u.s + i, 1);
            if (s.u.s[i] == '\n') { at_start = true; line0 = false; }
        }
        if (line0 && s.n == 0 && first && truthy(first)) ob_put(e, b, pad.u.s, pad.n);
        return ob_take(e, b);
    }
    XFAIL(x, "unknown filter '%s'", n);
}

/* ---- statements ---- */

static void render_for(ev *e, const jnode *n) {
    jv src = eval(e, n->expr);
    jlist *items = iter_items(e, &src, n->expr);
    push_frame(e, n->expr);
    if (n->cond) { /* the loop's filter: loop.length counts what passes */
        jv r = mklist(e, items->n);
        size_t m = 0;
        for (size_t i = 0; i < items->n; i++) {
            tick(e, n->line, n->col);
            set_var(e, n->vars[0], items->v[i]);
            jv c = eval(e, n->cond);
            if (truthy(&c)) r.u.l->v[m++] = items->v[i];
        }
        r.u.l->n = m;
        items = r.u.l;
    }
    jloop *lp = al(e, sizeof *lp);
    lp->items = items;
    jv loopv = {.t = V_LOOP, .u.lp = lp};
    for (size_t i = 0; i < items->n; i++) {
        tick(e, n->line, n->col);
        lp->i = i;
        set_var(e, "loop", loopv);
        const jv *it = &items->v[i];
        if (n->nvars == 2) {
            jlist *pr = it->t == V_LIST ? it->u.l : NULL;
            if (!pr || pr->n != 2)
                efail(e, CANDLE_ERR_INVALID_ARG, n->line, n->col, "cannot unpack a %s into two loop variables", tname(it));
            set_var(e, n->vars[0], pr->v[0]);
            set_var(e, n->vars[1], pr->v[1]);
        } else set_var(e, n->vars[0], *it);
        render_body(e, &n->body);
        if (e->ctl == 1) { e->ctl = 0; break; }
        e->ctl = 0;
    }
    pop_frame(e);
    if (items->n == 0 && n->alt.count) render_body(e, &n->alt);
}

static void render_body(ev *e, const jbody *b) {
    for (int i = 0; i < b->count && !e->ctl; i++) {
        const jnode *n = b->n[i];
        switch (n->kind) {
        case JN_TEXT: ob_put(e, e->out, n->text, n->len); break;
        case JN_OUT: {
            jv v = eval(e, n->expr);
            put_str(e, e->out, &v);
            break;
        }
        case JN_IF:
            for (int k = 0; k < n->nconds; k++) {
                bool take = !n->conds[k];
                if (!take) {
                    jv c = eval(e, n->conds[k]);
                    take = truthy(&c);
                }
                if (take) {
                    render_body(e, &n->bodies[k]);
                    break;
                }
            }
            break;
        case JN_FOR: render_for(e, n); break;
        case JN_SET: {
            jv v;
            if (n->expr) v = eval(e, n->expr);
            else {
                obuf *saved = e->out, *buf = ob_new(e);
                e->out = buf;
                render_body(e, &n->body);
                e->out = saved;
                v = ob_take(e, buf);
            }
            if (n->nvars == 2) {
                jv *o = lookup(e, n->vars[0]);
                if (!o || o->t != V_DICT || !o->u.d->ns)
                    efail(e, CANDLE_ERR_INVALID_ARG, n->line, n->col, "cannot assign attribute '%s': '%s' is not a namespace", n->vars[1], n->vars[0]);
                dict_set(e, o->u.d, cstr(n->vars[1]), v);
            } else set_var(e, n->vars[0], v);
            break;
        }
        case JN_MACRO: set_var(e, n->vars[0], (jv){.t = V_MACRO, .u.mac = n}); break;
        case JN_BREAK: e->ctl = 1; break;
        case JN_CONTINUE: e->ctl = 2; break;
        case JN_BLOCK: render_body(e, &n->body); break;
        }
    }
}

static jv from_json(ev *e, const json_value *j) {
    switch (j->type) {
    case JSON_NULL: return NONE;
    case JSON_FALSE: return mkbool(false);
    case JSON_TRUE: return mkbool(true);
    case JSON_NUMBER: return j->is_int ? mkint(j->i64) : mkfloat(j->u.num);
    case JSON_STRING: return (jv){.t = V_STR, .n = j->n, .u.s = j->u.str};
    case JSON_ARRAY: {
        jv r = mklist(e, j->n);
        for (size_t i = 0; i < j->n; i++) r.u.l->v[i] = from_json(e, &j->u.items[i]);
        return r;
    }
    case JSON_OBJECT: {
        jv d = mkdict(e, j->n + 1);
        for (size_t i = 0; i < j->n; i++)
            dict_set(e, d.u.d, from_json(e, &j->u.items[2 * i]), from_json(e, &j->u.items[2 * i + 1]));
        return d;
    }
    }
    return NONE;
}

candle_status candle_jinja_render(const candle_jinja *t, const char *ctx, size_t ctx_len,
                                  const candle_jinja_limits *lim, char **out, size_t *out_len) {
    if (!t || !out || (!ctx && ctx_len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "jinja: NULL template, context or output");
    *out = NULL;
    if (out_len) *out_len = 0;
    json_doc *doc = NULL;
    if (ctx_len) {
        candle_status st = json_parse(&doc, ctx, ctx_len, "jinja context", NULL);
        if (st) return st;
        if (json_root(doc)->type != JSON_OBJECT) {
            json_free(doc);
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "jinja: the context must be a JSON object");
        }
    }
    ev *e = calloc(1, sizeof *e);
    if (!e) {
        json_free(doc);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "jinja: out of memory");
    }
    e->max_out = lim && lim->max_output ? lim->max_output : (size_t)1 << 20;
    e->a.cap = lim && lim->max_memory ? lim->max_memory : (size_t)64 << 20;
    e->max_iters = lim && lim->max_iterations ? lim->max_iterations : 1000000;
    /* The C stack bounds it: each macro level may hold JJ_MAX_NEST statements
     * and JJ_MAX_HEIGHT expression levels of frames. */
    e->max_depth = lim && lim->max_depth > 0 ? lim->max_depth : 16;
    if (e->max_depth > 16) e->max_depth = 16; /* worst case measured: 2-4 MB of stack at 32 (Release) */
    candle_status st = CANDLE_OK;
    if (setjmp(e->jb) == 0) {
        e->out = ob_new(e);
        if (doc) {
            const json_value *r = json_root(doc);
            for (size_t i = 0; i < r->n; i++) {
                const json_value *k = &r->u.items[2 * i];
                set_var(e, k->u.str, from_json(e, &r->u.items[2 * i + 1]));
            }
        }
        render_body(e, &t->root);
        obuf *o = e->bufs[0];
        *out = o->p ? o->p : calloc(1, 1);
        if (!*out) efail(e, CANDLE_ERR_OOM, 0, 0, "out of memory");
        if (out_len) *out_len = o->n;
        o->p = NULL;
    } else {
        st = e->err;
    }
    for (int i = 0; i < e->nbufs; i++) {
        free(e->bufs[i]->p);
        free(e->bufs[i]);
    }
    free(e->vars);
    cdl_jj_arena_free(&e->a);
    json_free(doc);
    if (st) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        free(e);
        return cdl_set_error(NULL, st, "%s", msg);
    }
    free(e);
    return CANDLE_OK;
}
