/* Jinja2 subset: lexer and parser. The lexer splits the template into text
 * and tag tokens in one pass, applying whitespace control as jinja2 does
 * with trim_blocks and lstrip_blocks (Hugging Face's settings) and dropping
 * one trailing newline of the template (keep_trailing_newline=False); the
 * parser builds the tree of jinja-impl.h with jinja2's operator precedence. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja-impl.h"
#include "../core/core-impl.h"

struct jj_block {
    jj_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *cdl_jj_alloc(jj_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->cap && (n > a->cap || a->used > a->cap - n)) return NULL;
    jj_block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t sz = n > 60000 ? n : 60000;
        b = malloc(sizeof *b + sz);
        if (!b) return NULL;
        b->size = sz;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void cdl_jj_arena_free(jj_arena *a) {
    for (jj_block *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

typedef enum { T_TEXT, T_VAR, T_BLOCK, T_END, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF } ttype;

typedef struct tok {
    ttype t;
    int line, col;
    const char *s; /* T_TEXT, T_NAME, T_OP: into the source; T_STR: unescaped copy */
    size_t len;
    int64_t i;
    double f;
} tok;

typedef struct parser {
    const char *src;
    size_t len;
    jj_arena *arena;
    tok *toks;
    size_t ntok, cap, pos;
    int depth;
    size_t lc_off;
    int lc_line, lc_col;
    candle_status err;
    char msg[256];
} parser;

/* Line and column of a byte offset, walking on from the last one asked
 * (tokens come in order: linear over the template). */
static int line_of(parser *p, size_t off, int *col) {
    size_t from = 0;
    int line = 1, c = 1;
    if (off >= p->lc_off) {
        from = p->lc_off;
        line = p->lc_line;
        c = p->lc_col;
    }
    for (size_t i = from; i < off && i < p->len; i++) {
        if (p->src[i] == '\n') {
            line++;
            c = 1;
        } else c++;
    }
    p->lc_off = off;
    p->lc_line = line;
    p->lc_col = c;
    *col = c;
    return line;
}

static bool fail(parser *p, candle_status st, int line, int col, const char *fmt, ...) {
    if (p->err) return false;
    va_list ap;
    va_start(ap, fmt);
    char m[200];
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    p->err = st;
    snprintf(p->msg, sizeof p->msg, "jinja: line %d, column %d: %s", line, col, m);
    return false;
}

static bool failat(parser *p, size_t off, const char *fmt, const char *arg) {
    int col, line = line_of(p, off, &col);
    return fail(p, CANDLE_ERR_FORMAT, line, col, fmt, arg);
}

static tok *push(parser *p, ttype t, size_t off, const char *s, size_t n) {
    if (p->ntok == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        tok *nt = realloc(p->toks, nc * sizeof *nt);
        if (!nt) {
            fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
            return NULL;
        }
        p->toks = nt;
        p->cap = nc;
    }
    tok *k = &p->toks[p->ntok++];
    memset(k, 0, sizeof *k);
    k->t = t;
    k->line = line_of(p, off, &k->col);
    k->s = s;
    k->len = n;
    return k;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void put_utf8(char *o, size_t *n, uint32_t c) {
    if (c < 0x80) o[(*n)++] = (char)c;
    else if (c < 0x800) {
        o[(*n)++] = (char)(0xC0 | (c >> 6));
        o[(*n)++] = (char)(0x80 | (c & 63));
    } else if (c < 0x10000) {
        o[(*n)++] = (char)(0xE0 | (c >> 12));
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*n)++] = (char)(0x80 | (c & 63));
    } else {
        o[(*n)++] = (char)(0xF0 | (c >> 18));
        o[(*n)++] = (char)(0x80 | ((c >> 12) & 63));
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*n)++] = (char)(0x80 | (c & 63));
    }
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string literal at s[i] (the quote), with Python's escapes. */
static bool lex_string(parser *p, size_t *ip) {
    const char *s = p->src;
    size_t i = *ip, start = i;
    char q = s[i++];
    char *o = cdl_jj_alloc(p->arena, p->len - i + 1);
    if (!o) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
    size_t n = 0;
    for (;;) {
        if (i >= p->len) return failat(p, start, "unterminated string%s", "");
        char c = s[i++];
        if (c == q) break;
        if (c != '\\') {
            o[n++] = c;
            continue;
        }
        if (i >= p->len) return failat(p, start, "unterminated string%s", "");
        char e = s[i++];
        int digits = 0;
        switch (e) {
        case 'n': o[n++] = '\n'; break;
        case 't': o[n++] = '\t'; break;
        case 'r': o[n++] = '\r'; break;
        case '0': o[n++] = '\0'; break;
        case 'a': o[n++] = '\a'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'v': o[n++] = '\v'; break;
        case '\\': case '\'': case '"': o[n++] = e; break;
        case '\n': break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: o[n++] = '\\'; o[n++] = e; break;
        }
        if (digits) {
            uint32_t c32 = 0;
            for (int k = 0; k < digits; k++) {
                int h = i < p->len ? hexv(s[i]) : -1;
                if (h < 0) return failat(p, i, "bad \\%s escape in a string", e == 'x' ? "x" : "u");
                c32 = c32 * 16 + (uint32_t)h;
                i++;
            }
            if (c32 > 0x10FFFF || (c32 >= 0xD800 && c32 < 0xE000))
                return failat(p, i, "escape out of the Unicode range%s", "");
            put_utf8(o, &n, c32);
        }
    }
    o[n] = 0;
    tok *k = push(p, T_STR, start, o, n);
    if (!k) return false;
    *ip = i;
    return true;
}

/* Tokens of a {{ }} or {% %} tag from *ip (after the opening and its sign) up
 * to the closing; *strip_after when it was -}} / -%}, *plus for +%}. */
static bool lex_tag(parser *p, size_t *ip, bool block, bool *strip_after, bool *plus) {
    const char *s = p->src;
    size_t i = *ip;
    int bal = 0;
    size_t open = i;
    for (;;) {
        while (i < p->len && is_ws(s[i])) i++;
        if (i >= p->len) return failat(p, open, "unclosed tag%s", "");
        char c = s[i];
        char close = block ? '%' : '}';
        if (bal == 0) {
            if ((c == '-' || c == '+') && i + 2 < p->len && s[i + 1] == close && s[i + 2] == '}') {
                if (c == '+' && !block) return failat(p, i, "unexpected '+'%s", "");
                *strip_after = c == '-';
                *plus = c == '+';
                push(p, T_END, i, NULL, 0);
                *ip = i + 3;
                return !p->err;
            }
            if (c == close && i + 1 < p->len && s[i + 1] == '}') {
                push(p, T_END, i, NULL, 0);
                *ip = i + 2;
                return !p->err;
            }
        }
        if (is_alpha(c)) {
            size_t b = i;
            while (i < p->len && (is_alpha(s[i]) || is_digit(s[i]))) i++;
            if (!push(p, T_NAME, b, s + b, i - b)) return false;
        } else if (is_digit(c)) {
            size_t b = i;
            bool fl = false;
            while (i < p->len && (is_digit(s[i]) || s[i] == '_')) i++;
            if (i + 1 < p->len && s[i] == '.' && is_digit(s[i + 1])) {
                fl = true;
                i++;
                while (i < p->len && (is_digit(s[i]) || s[i] == '_')) i++;
            }
            if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
                size_t j = i + 1;
                if (j < p->len && (s[j] == '+' || s[j] == '-')) j++;
                if (j < p->len && is_digit(s[j])) {
                    fl = true;
                    i = j;
                    while (i < p->len && is_digit(s[i])) i++;
                }
            }
            char buf[64];
            size_t n = 0;
            for (size_t k = b; k < i && n < sizeof buf - 1; k++)
                if (s[k] != '_') buf[n++] = s[k];
            buf[n] = 0;
            if (i - b >= sizeof buf - 1) return failat(p, b, "number too long%s", "");
            tok *k = push(p, fl ? T_FLOAT : T_INT, b, s + b, i - b);
            if (!k) return false;
            errno = 0;
            if (fl) k->f = strtod(buf, NULL);
            else {
                k->i = (int64_t)strtoll(buf, NULL, 10);
                if (errno) return failat(p, b, "integer out of range%s", "");
            }
        } else if (c == '\'' || c == '"') {
            if (!lex_string(p, &i)) return false;
        } else {
            static const char *two[] = {"==", "!=", "<=", ">=", "//", "**"};
            size_t n = 0;
            for (int k = 0; k < 6; k++)
                if (i + 1 < p->len && s[i] == two[k][0] && s[i + 1] == two[k][1]) n = 2;
            if (!n) {
                if (!strchr("()[]{}.,:|~+-*/%<>=", c) || c == 0)
                    return failat(p, i, "unexpected character '%s'", (char[]){c >= 32 && c < 127 ? c : '?', 0});
                n = 1;
                if (c == '(' || c == '[' || c == '{') bal++;
                if (c == ')' || c == ']' || c == '}') {
                    if (bal == 0) return failat(p, i, "unbalanced '%s'", (char[]){c, 0});
                    bal--;
                }
            }
            if (!push(p, T_OP, i, s + i, n)) return false;
            i += n;
        }
    }
}

static bool lex(parser *p) {
    const char *s = p->src;
    size_t len = p->len;
    /* keep_trailing_newline=False */
    if (len && s[len - 1] == '\n') len--;
    if (len && s[len - 1] == '\r') len--;
    size_t pos = 0;
    bool strip_next = false, trim_next = false, line_start = true;
    for (;;) {
        size_t i = pos;
        while (i + 1 < len && !(s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#'))) i++;
        bool at_tag = i + 1 < len;
        size_t tb = pos, te = at_tag ? i : len;
        if (strip_next) while (tb < te && is_ws(s[tb])) tb++;
        else if (trim_next && tb < te && s[tb] == '\n') tb++;
        char kind = at_tag ? s[i + 1] : 0;
        char sign = at_tag && i + 2 < len ? s[i + 2] : 0;
        if (at_tag) {
            if (sign == '-') {
                while (te > tb && is_ws(s[te - 1])) te--;
            } else if (kind != '{' && sign != '+') {
                size_t l = te;
                while (l > tb && s[l - 1] != '\n') l--;
                bool nl = l > tb || line_start || (l == tb && tb > 0 && s[tb - 1] == '\n');
                bool allws = true;
                for (size_t k = l; k < te; k++)
                    if (!is_ws(s[k])) allws = false;
                if (nl && allws) te = l;
            }
        }
        if (te > tb && !push(p, T_TEXT, tb, s + tb, te - tb)) return false;
        if (!at_tag) break;
        size_t j = i + 2 + (sign == '-' || sign == '+');
        strip_next = trim_next = false;
        if (kind == '#') {
            size_t k = j;
            while (k + 1 < len && !(s[k] == '#' && s[k + 1] == '}')) k++;
            if (k + 1 >= len) return failat(p, i, "unclosed comment%s", "");
            bool minus = k > j && s[k - 1] == '-', pl = k > j && s[k - 1] == '+';
            strip_next = minus;
            trim_next = !minus && !pl;
            pos = k + 2;
        } else {
            bool block = kind == '%', sa = false, pl = false;
            if (!push(p, block ? T_BLOCK : T_VAR, i, NULL, 0)) return false;
            p->len = len; /* the dropped newline is not part of a tag */
            if (!lex_tag(p, &j, block, &sa, &pl)) return false;
            strip_next = sa;
            trim_next = block && !sa && !pl;
            pos = j;
        }
        line_start = trim_next && pos < len && s[pos] == '\n';
        if (strip_next) line_start = false;
    }
    p->len = len;
    push(p, T_EOF, len, NULL, 0);
    return !p->err;
}

/* ---- parser ---- */

static tok *peek(parser *p) { return &p->toks[p->pos]; }
static tok *next(parser *p) {
    tok *t = &p->toks[p->pos];
    if (t->t != T_EOF) p->pos++;
    return t;
}
static bool is_op(tok *t, const char *op) { return t->t == T_OP && t->len == strlen(op) && !memcmp(t->s, op, t->len); }
static bool is_name(tok *t, const char *n) { return t->t == T_NAME && t->len == strlen(n) && !memcmp(t->s, n, t->len); }
static bool accept_op(parser *p, const char *op) {
    if (is_op(peek(p), op)) {
        p->pos++;
        return true;
    }
    return false;
}
static bool accept_name(parser *p, const char *n) {
    if (is_name(peek(p), n)) {
        p->pos++;
        return true;
    }
    return false;
}

static const char *tok_desc(tok *t, char *buf, size_t n) {
    switch (t->t) {
    case T_EOF: return "the end of the template";
    case T_END: return "the end of the tag";
    case T_TEXT: return "text";
    case T_VAR: return "'{{'";
    case T_BLOCK: return "'{%'";
    case T_STR: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    default: {
        size_t l = t->len < 40 ? t->len : 40;
        snprintf(buf, n, "'%.*s'", (int)l, t->s);
        return buf;
    }
    }
}

static bool unexpected(parser *p, const char *want) {
    tok *t = peek(p);
    char b[64];
    char m[160];
    snprintf(m, sizeof m, "expected %s, found %s", want, tok_desc(t, b, sizeof b));
    return fail(p, CANDLE_ERR_FORMAT, t->line, t->col, "%s", m);
}

static bool expect_op(parser *p, const char *op) {
    if (accept_op(p, op)) return true;
    char w[16];
    snprintf(w, sizeof w, "'%s'", op);
    return unexpected(p, w);
}

static const char *dupname(parser *p, const char *s, size_t n) {
    char *d = cdl_jj_alloc(p->arena, n + 1);
    if (!d) {
        fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static jx *mk(parser *p, jx_kind k, tok *at, int nkid) {
    jx *e = cdl_jj_alloc(p->arena, sizeof *e);
    if (!e || (nkid && !(e->kid = cdl_jj_alloc(p->arena, (size_t)nkid * sizeof *e->kid)))) {
        fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        return NULL;
    }
    e->kind = k;
    e->line = at->line;
    e->col = at->col;
    e->nkid = nkid;
    return e;
}

/* Sets e's height from its kids; refuses a tree taller than JJ_MAX_HEIGHT. */
static jx *seal(parser *p, jx *e) {
    if (!e) return NULL;
    int h = 0;
    for (int i = 0; i < e->nkid; i++)
        if (e->kid[i] && e->kid[i]->h > h) h = e->kid[i]->h;
    e->h = h + 1;
    if (e->h > JJ_MAX_HEIGHT) {
        fail(p, CANDLE_ERR_FORMAT, e->line, e->col, "expression nested deeper than %d", JJ_MAX_HEIGHT);
        return NULL;
    }
    return e;
}

/* Growable kid lists while parsing. */
typedef struct kids {
    jx *v[256];
    const char *kw[256];
    int n;
} kids;

static jx *from_kids(parser *p, jx_kind k, tok *at, jx *first, kids *ks) {
    int extra = first ? 1 : 0;
    jx *e = mk(p, k, at, ks->n + extra);
    if (!e) return NULL;
    bool anykw = false;
    for (int i = 0; i < ks->n; i++) anykw |= ks->kw[i] != NULL;
    if (anykw && !(e->kw = cdl_jj_alloc(p->arena, (size_t)e->nkid * sizeof *e->kw))) {
        fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        return NULL;
    }
    if (first) e->kid[0] = first;
    for (int i = 0; i < ks->n; i++) {
        e->kid[i + extra] = ks->v[i];
        if (anykw) e->kw[i + extra] = ks->kw[i];
    }
    return seal(p, e);
}

static jx *parse_expr(parser *p);
static jx *parse_or(parser *p);
static jx *parse_unary(parser *p, bool filters);

static bool enter(parser *p) {
    if (++p->depth > JJ_MAX_NEST) {
        tok *t = peek(p);
        return fail(p, CANDLE_ERR_FORMAT, t->line, t->col, "nested deeper than %d", JJ_MAX_NEST);
    }
    return true;
}

/* (args) of a call, filter or test, after the '('. */
static bool parse_args(parser *p, kids *ks) {
    ks->n = 0;
    if (accept_op(p, ")")) return true;
    for (;;) {
        if (ks->n == 256) return unexpected(p, "at most 256 arguments");
        const char *kw = NULL;
        if (peek(p)->t == T_NAME && is_op(&p->toks[p->pos + 1], "=")) {
            tok *n = next(p);
            p->pos++;
            if (!(kw = dupname(p, n->s, n->len))) return false;
        }
        jx *a = parse_expr(p);
        if (!a) return false;
        ks->v[ks->n] = a;
        ks->kw[ks->n++] = kw;
        if (accept_op(p, ")")) return true;
        if (!expect_op(p, ",")) return false;
        if (accept_op(p, ")")) return true;
    }
}

static jx *parse_primary(parser *p) {
    tok *t = next(p);
    jx *e;
    kids *ks;
    switch (t->t) {
    case T_NAME:
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            if (!(e = mk(p, JX_BOOL, t, 0))) return NULL;
            e->i = t->s[0] == 't' || t->s[0] == 'T';
            return e;
        }
        if (is_name(t, "none") || is_name(t, "None")) return mk(p, JX_NONE, t, 0);
        if (!(e = mk(p, JX_NAME, t, 0)) || !(e->name = dupname(p, t->s, t->len))) return NULL;
        e->len = t->len;
        return e;
    case T_STR: {
        /* adjacent literals concatenate */
        size_t n = t->len;
        size_t q = p->pos;
        while (p->toks[q].t == T_STR) n += p->toks[q++].len;
        if (!(e = mk(p, JX_STR, t, 0))) return NULL;
        char *d = cdl_jj_alloc(p->arena, n + 1);
        if (!d) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
        memcpy(d, t->s, t->len);
        size_t o = t->len;
        while (peek(p)->t == T_STR) {
            tok *u = next(p);
            memcpy(d + o, u->s, u->len);
            o += u->len;
        }
        d[o] = 0;
        e->name = d;
        e->len = o;
        return e;
    }
    case T_INT:
        if (!(e = mk(p, JX_INT, t, 0))) return NULL;
        e->i = t->i;
        return e;
    case T_FLOAT:
        if (!(e = mk(p, JX_FLOAT, t, 0))) return NULL;
        e->f = t->f;
        return e;
    case T_OP:
        if (is_op(t, "(")) {
            if (accept_op(p, ")")) return mk(p, JX_LIST, t, 0);
            jx *first = parse_expr(p);
            if (!first) return NULL;
            if (accept_op(p, ")")) return first;
            if (!(ks = malloc(sizeof *ks))) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
            ks->n = 0;
            while (accept_op(p, ",")) {
                if (is_op(peek(p), ")")) break;
                if (ks->n == 256) { free(ks); return unexpected(p, "at most 257 items"), NULL; }
                ks->kw[ks->n] = NULL;
                if (!(ks->v[ks->n++] = parse_expr(p))) { free(ks); return NULL; }
            }
            e = expect_op(p, ")") ? from_kids(p, JX_LIST, t, first, ks) : NULL;
            free(ks);
            return e;
        }
        if (is_op(t, "[") || is_op(t, "{")) {
            bool dict = is_op(t, "{");
            const char *close = dict ? "}" : "]";
            if (!(ks = malloc(sizeof *ks))) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
            ks->n = 0;
            e = NULL;
            while (!accept_op(p, close)) {
                if (ks->n && !expect_op(p, ",")) goto out;
                if (accept_op(p, close)) break;
                if (ks->n >= 254) { unexpected(p, "at most 127 items"); goto out; }
                ks->kw[ks->n] = NULL;
                if (!(ks->v[ks->n++] = parse_expr(p))) goto out;
                if (dict) {
                    if (!expect_op(p, ":")) goto out;
                    ks->kw[ks->n] = NULL;
                    if (!(ks->v[ks->n++] = parse_expr(p))) goto out;
                }
            }
            e = from_kids(p, dict ? JX_DICT : JX_LIST, t, NULL, ks);
        out:
            free(ks);
            return e;
        }
        break;
    default: break;
    }
    p->pos--;
    if (t->t == T_EOF) p->pos = p->ntok - 1;
    unexpected(p, "an expression");
    return NULL;
}

static jx *parse_postfix(parser *p, jx *e) {
    for (;;) {
        tok *t = peek(p);
        if (is_op(t, ".")) {
            p->pos++;
            tok *n = next(p);
            if (n->t == T_INT) { /* x.0 is x[0] */
                jx *i = mk(p, JX_INT, n, 0), *x = mk(p, JX_INDEX, t, 2);
                if (!i || !x) return NULL;
                i->i = n->i;
                x->kid[0] = e;
                x->kid[1] = i;
                if (!(e = seal(p, x))) return NULL;
                continue;
            }
            if (n->t != T_NAME) return p->pos--, unexpected(p, "an attribute name"), NULL;
            jx *a = mk(p, JX_ATTR, n, 1);
            if (!a || !(a->name = dupname(p, n->s, n->len))) return NULL;
            a->len = n->len;
            a->kid[0] = e;
            if (!(e = seal(p, a))) return NULL;
        } else if (is_op(t, "[")) {
            p->pos++;
            jx *part[3] = {0};
            bool slice = false;
            for (int k = 0; k < 3; k++) {
                if (!is_op(peek(p), ":") && !is_op(peek(p), "]"))
                    if (!(part[k] = parse_expr(p))) return NULL;
                if (k < 2 && accept_op(p, ":")) slice = true;
                else break;
            }
            if (!expect_op(p, "]")) return NULL;
            if (!slice && !part[0]) return unexpected(p, "an index"), NULL;
            jx *x = mk(p, slice ? JX_SLICE : JX_INDEX, t, slice ? 4 : 2);
            if (!x) return NULL;
            x->kid[0] = e;
            x->kid[1] = part[0];
            if (slice) {
                x->kid[2] = part[1];
                x->kid[3] = part[2];
            }
            if (!(e = seal(p, x))) return NULL;
        } else if (is_op(t, "(")) {
            p->pos++;
            kids *ks = malloc(sizeof *ks);
            if (!ks) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
            jx *c = parse_args(p, ks) ? from_kids(p, JX_CALL, t, e, ks) : NULL;
            free(ks);
            if (!c) return NULL;
            c->line = e->line; /* errors name the callee, not the '(' */
            c->col = e->col;
            e = c;
        } else return e;
    }
}

static jx *parse_filters(parser *p, jx *e) {
    for (;;) {
        tok *t = peek(p);
        bool filt = is_op(t, "|"), test = is_name(t, "is");
        if (!filt && !test) {
            if (is_op(t, "(")) { /* a call after a filter: (x|f)() */
                if (!(e = parse_postfix(p, e))) return NULL;
                continue;
            }
            return e;
        }
        p->pos++;
        bool neg = test && accept_name(p, "not");
        tok *n = next(p);
        if (n->t != T_NAME && !(test && (n->t == T_NAME || is_name(n, "none")))) {
            p->pos--;
            return unexpected(p, filt ? "a filter name" : "a test name"), NULL;
        }
        kids *ks = malloc(sizeof *ks);
        if (!ks) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
        ks->n = 0;
        bool ok = true;
        if (accept_op(p, "(")) ok = parse_args(p, ks);
        else if (test) {
            /* a test's single argument without parentheses: x is divisibleby 3 */
            tok *a = peek(p);
            if (a->t == T_STR || a->t == T_INT || a->t == T_FLOAT ||
                (a->t == T_NAME && !is_name(a, "and") && !is_name(a, "or") && !is_name(a, "else") &&
                 !is_name(a, "if") && !is_name(a, "in") && !is_name(a, "not") && !is_name(a, "is"))) {
                ks->kw[0] = NULL;
                ok = (ks->v[0] = parse_unary(p, false)) != NULL;
                ks->n = ok;
            }
        }
        jx *f = ok ? from_kids(p, filt ? JX_FILTER : JX_TEST, n, e, ks) : NULL;
        free(ks);
        if (!f || !(f->name = dupname(p, n->s, n->len))) return NULL;
        f->len = n->len;
        f->op = neg;
        e = f;
    }
}

static jx *parse_unary(parser *p, bool filters) {
    if (!enter(p)) return NULL;
    tok *t = peek(p);
    jx *e;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->pos++;
        jx *x = parse_unary(p, false);
        if (!x || !(e = mk(p, is_op(t, "-") ? JX_NEG : JX_POS, t, 1))) return NULL;
        e->kid[0] = x;
        if (!seal(p, e)) return NULL;
    } else {
        e = parse_primary(p);
        if (e) e = parse_postfix(p, e);
    }
    if (e && filters) e = parse_filters(p, e);
    p->depth--;
    return e;
}

static jx *binary(parser *p, tok *t, int op, jx *l, jx *r) {
    if (!l || !r) return NULL;
    jx *e = mk(p, JX_BIN, t, 2);
    if (!e) return NULL;
    e->op = op;
    e->kid[0] = l;
    e->kid[1] = r;
    return seal(p, e);
}

static jx *parse_pow(parser *p) {
    jx *l = parse_unary(p, true);
    while (l && is_op(peek(p), "**")) {
        tok *t = next(p);
        l = binary(p, t, JOP_POW, l, parse_unary(p, true));
    }
    return l;
}

static jx *parse_math2(parser *p) {
    jx *l = parse_pow(p);
    for (;;) {
        tok *t = peek(p);
        int op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV
               : is_op(t, "%") ? JOP_MOD : 0;
        if (!l || !op) return l;
        p->pos++;
        l = binary(p, t, op, l, parse_pow(p));
    }
}

static jx *parse_concat(parser *p) {
    jx *l = parse_math2(p);
    while (l && is_op(peek(p), "~")) {
        tok *t = next(p);
        l = binary(p, t, JOP_CONCAT, l, parse_math2(p));
    }
    return l;
}

static jx *parse_math1(parser *p) {
    jx *l = parse_concat(p);
    for (;;) {
        tok *t = peek(p);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : 0;
        if (!l || !op) return l;
        p->pos++;
        l = binary(p, t, op, l, parse_concat(p));
    }
}

static jx *parse_compare(parser *p) {
    jx *l = parse_math1(p);
    jx *all = NULL; /* a < b < c is (a < b) and (b < c) */
    for (;;) {
        tok *t = peek(p);
        int op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT
               : is_op(t, "<=") ? JOP_LE : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE
               : is_name(t, "in") ? JOP_IN : 0;
        if (!op && is_name(t, "not") && is_name(&p->toks[p->pos + 1], "in")) {
            op = JOP_NOTIN;
            p->pos++;
        }
        if (!l || !op) break;
        p->pos++;
        jx *r = parse_math1(p);
        jx *c = binary(p, t, op, l, r);
        if (!c) return NULL;
        if (all) {
            jx *a = mk(p, JX_AND, t, 2);
            if (!a) return NULL;
            a->kid[0] = all;
            a->kid[1] = c;
            if (!(all = seal(p, a))) return NULL;
        } else all = c;
        l = r;
    }
    return all ? all : l;
}

static jx *parse_not(parser *p) {
    tok *t = peek(p);
    if (is_name(t, "not")) {
        p->pos++;
        if (!enter(p)) return NULL;
        jx *x = parse_not(p), *e;
        p->depth--;
        if (!x || !(e = mk(p, JX_NOT, t, 1))) return NULL;
        e->kid[0] = x;
        return seal(p, e);
    }
    return parse_compare(p);
}

static jx *parse_and(parser *p) {
    jx *l = parse_not(p);
    while (l && is_name(peek(p), "and")) {
        tok *t = next(p);
        jx *r = parse_not(p), *e;
        if (!r || !(e = mk(p, JX_AND, t, 2))) return NULL;
        e->kid[0] = l;
        e->kid[1] = r;
        if (!(l = seal(p, e))) return NULL;
    }
    return l;
}

static jx *parse_or(parser *p) {
    jx *l = parse_and(p);
    while (l && is_name(peek(p), "or")) {
        tok *t = next(p);
        jx *r = parse_and(p), *e;
        if (!r || !(e = mk(p, JX_OR, t, 2))) return NULL;
        e->kid[0] = l;
        e->kid[1] = r;
        if (!(l = seal(p, e))) return NULL;
    }
    return l;
}

static jx *parse_expr(parser *p) {
    if (!enter(p)) return NULL;
    jx *e = parse_or(p);
    while (e && is_name(peek(p), "if")) {
        tok *t = next(p);
        jx *c = parse_or(p), *alt = NULL, *x;
        if (!c) return NULL;
        if (accept_name(p, "else") && !(alt = parse_expr(p))) return NULL;
        if (!(x = mk(p, JX_COND, t, 3))) return NULL;
        x->kid[0] = c;
        x->kid[1] = e;
        x->kid[2] = alt;
        if (!(e = seal(p, x))) return NULL;
    }
    p->depth--;
    return e;
}

/* An expression list without brackets (a tuple): {{ a, b }}, for x in a, b. */
static jx *parse_tuple(parser *p) {
    tok *t = peek(p);
    jx *first = parse_expr(p);
    if (!first || !is_op(peek(p), ",")) return first;
    kids *ks = malloc(sizeof *ks);
    if (!ks) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
    ks->n = 0;
    jx *e = NULL;
    while (accept_op(p, ",")) {
        if (peek(p)->t == T_END || is_name(peek(p), "if")) break;
        if (ks->n == 256) { unexpected(p, "at most 257 items"); goto out; }
        ks->kw[ks->n] = NULL;
        if (!(ks->v[ks->n++] = parse_expr(p))) goto out;
    }
    e = from_kids(p, JX_LIST, t, first, ks);
out:
    free(ks);
    return e;
}

/* ---- statements ---- */

static bool expect_end(parser *p) {
    if (peek(p)->t == T_END) {
        p->pos++;
        return true;
    }
    return unexpected(p, "the end of the tag");
}

static jnode *mkn(parser *p, jn_kind k, tok *at) {
    jnode *n = cdl_jj_alloc(p->arena, sizeof *n);
    if (!n) {
        fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        return NULL;
    }
    n->kind = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

typedef struct nodes {
    jnode **v;
    int n, cap;
} nodes;

static bool nodes_push(parser *p, nodes *ns, jnode *n) {
    if (ns->n == ns->cap) {
        int nc = ns->cap ? ns->cap * 2 : 16;
        jnode **nv = realloc(ns->v, (size_t)nc * sizeof *nv);
        if (!nv) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        ns->v = nv;
        ns->cap = nc;
    }
    ns->v[ns->n++] = n;
    return true;
}

static bool finish_body(parser *p, nodes *ns, jbody *b) {
    b->count = ns->n;
    b->n = NULL;
    if (ns->n) {
        b->n = cdl_jj_alloc(p->arena, (size_t)ns->n * sizeof *b->n);
        if (!b->n) {
            free(ns->v);
            return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory");
        }
        memcpy(b->n, ns->v, (size_t)ns->n * sizeof *b->n);
    }
    free(ns->v);
    return true;
}

/* Parses nodes until a block tag whose first word is one of ends (a
 * space-separated list; NULL: the end of the template). On return the
 * position is at that word, *endw its index. */
static bool parse_body(parser *p, jbody *b, const char *const *ends, int *endw, tok *opener, const char *what);

static const char *const if_ends[] = {"elif", "else", "endif", NULL};
static const char *const endif_ends[] = {"endif", NULL};
static const char *const for_ends[] = {"else", "endfor", NULL};
static const char *const endfor_ends[] = {"endfor", NULL};
static const char *const endset_ends[] = {"endset", NULL};
static const char *const endmacro_ends[] = {"endmacro", NULL};
static const char *const endgen_ends[] = {"endgeneration", NULL};

static jnode *parse_stmt(parser *p, tok *open) {
    tok *w = next(p);
    jnode *n;
    int e;
    if (w->t != T_NAME) return p->pos--, unexpected(p, "a statement name"), NULL;
    if (!enter(p)) return NULL;
    if (is_name(w, "if")) {
        jx *conds[64];
        jbody bodies[64];
        int k = 0;
        if (!(n = mkn(p, JN_IF, w))) return NULL;
        conds[0] = parse_expr(p);
        if (!conds[0] || !expect_end(p)) return NULL;
        for (;;) {
            if (!parse_body(p, &bodies[k], if_ends, &e, w, "if")) return NULL;
            k++;
            p->pos++;
            if (e == 2) break;
            if (k == 64) return unexpected(p, "at most 63 elif branches"), NULL;
            if (e == 0) {
                if (!(conds[k] = parse_expr(p))) return NULL;
            } else conds[k] = NULL;
            if (!expect_end(p)) return NULL;
            if (e == 1) {
                if (!parse_body(p, &bodies[k], endif_ends, &e, w, "if")) return NULL;
                k++;
                p->pos++;
                break;
            }
        }
        if (!expect_end(p)) return NULL;
        n->nconds = k;
        n->conds = cdl_jj_alloc(p->arena, (size_t)k * sizeof *n->conds);
        n->bodies = cdl_jj_alloc(p->arena, (size_t)k * sizeof *n->bodies);
        if (!n->conds || !n->bodies) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
        memcpy(n->conds, conds, (size_t)k * sizeof *conds);
        memcpy(n->bodies, bodies, (size_t)k * sizeof *bodies);
    } else if (is_name(w, "for")) {
        if (!(n = mkn(p, JN_FOR, w))) return NULL;
        for (;;) {
            tok *v = next(p);
            if (v->t != T_NAME) return p->pos--, unexpected(p, "a loop variable"), NULL;
            if (n->nvars == 2) return p->pos--, unexpected(p, "'in' (at most two loop variables)"), NULL;
            if (!(n->vars[n->nvars++] = dupname(p, v->s, v->len))) return NULL;
            if (!accept_op(p, ",")) break;
        }
        if (!accept_name(p, "in")) return unexpected(p, "'in'"), NULL;
        /* the iterable: an expression without a trailing "if" (the filter) */
        if (!(n->expr = parse_or(p))) return NULL;
        if (accept_name(p, "if") && !(n->cond = parse_expr(p))) return NULL;
        if (accept_name(p, "recursive")) return fail(p, CANDLE_ERR_UNSUPPORTED, w->line, w->col, "recursive loops are not supported"), NULL;
        if (!expect_end(p)) return NULL;
        if (!parse_body(p, &n->body, for_ends, &e, w, "for")) return NULL;
        p->pos++;
        if (e == 0) {
            if (!expect_end(p) || !parse_body(p, &n->alt, endfor_ends, &e, w, "for")) return NULL;
            p->pos++;
        }
        if (!expect_end(p)) return NULL;
    } else if (is_name(w, "set")) {
        if (!(n = mkn(p, JN_SET, w))) return NULL;
        tok *v = next(p);
        if (v->t != T_NAME) return p->pos--, unexpected(p, "a variable name"), NULL;
        if (!(n->vars[0] = dupname(p, v->s, v->len))) return NULL;
        n->nvars = 1;
        if (accept_op(p, ".")) {
            tok *a = next(p);
            if (a->t != T_NAME) return p->pos--, unexpected(p, "an attribute name"), NULL;
            if (!(n->vars[1] = dupname(p, a->s, a->len))) return NULL;
            n->nvars = 2;
        }
        if (is_op(peek(p), ",")) return fail(p, CANDLE_ERR_UNSUPPORTED, v->line, v->col, "set with several targets is not supported"), NULL;
        if (accept_op(p, "=")) {
            if (!(n->expr = parse_tuple(p)) || !expect_end(p)) return NULL;
        } else {
            if (n->nvars == 2) return unexpected(p, "'='"), NULL;
            if (!expect_end(p) || !parse_body(p, &n->body, endset_ends, &e, w, "set")) return NULL;
            p->pos++;
            if (!expect_end(p)) return NULL;
        }
    } else if (is_name(w, "macro")) {
        if (!(n = mkn(p, JN_MACRO, w))) return NULL;
        tok *v = next(p);
        if (v->t != T_NAME) return p->pos--, unexpected(p, "a macro name"), NULL;
        if (!(n->vars[0] = dupname(p, v->s, v->len)) || !expect_op(p, "(")) return NULL;
        const char *params[64];
        jx *defs[64];
        int k = 0;
        while (!accept_op(p, ")")) {
            if (k && !expect_op(p, ",")) return NULL;
            if (accept_op(p, ")")) break;
            tok *a = next(p);
            if (a->t != T_NAME) return p->pos--, unexpected(p, "a parameter name"), NULL;
            if (k == 64) return unexpected(p, "at most 64 parameters"), NULL;
            if (!(params[k] = dupname(p, a->s, a->len))) return NULL;
            defs[k] = NULL;
            if (accept_op(p, "=") && !(defs[k] = parse_expr(p))) return NULL;
            k++;
        }
        if (!expect_end(p) || !parse_body(p, &n->body, endmacro_ends, &e, w, "macro")) return NULL;
        p->pos++;
        if (!expect_end(p)) return NULL;
        n->nparams = k;
        if (k) {
            n->params = cdl_jj_alloc(p->arena, (size_t)k * sizeof *n->params);
            n->defaults = cdl_jj_alloc(p->arena, (size_t)k * sizeof *n->defaults);
            if (!n->params || !n->defaults) return fail(p, CANDLE_ERR_OOM, 0, 0, "out of memory"), NULL;
            memcpy(n->params, params, (size_t)k * sizeof *params);
            memcpy(n->defaults, defs, (size_t)k * sizeof *defs);
        }
    } else if (is_name(w, "break") || is_name(w, "continue")) {
        if (!(n = mkn(p, is_name(w, "break") ? JN_BREAK : JN_CONTINUE, w)) || !expect_end(p)) return NULL;
    } else if (is_name(w, "generation")) {
        if (!(n = mkn(p, JN_BLOCK, w)) || !expect_end(p) ||
            !parse_body(p, &n->body, endgen_ends, &e, w, "generation"))
            return NULL;
        p->pos++;
        if (!expect_end(p)) return NULL;
    } else {
        char m[80];
        snprintf(m, sizeof m, "unknown or unsupported statement '%.*s'", (int)(w->len < 40 ? w->len : 40), w->s);
        return fail(p, CANDLE_ERR_UNSUPPORTED, w->line, w->col, "%s", m), NULL;
    }
    (void)open;
    p->depth--;
    return n;
}

static bool parse_body(parser *p, jbody *b, const char *const *ends, int *endw, tok *opener, const char *what) {
    nodes ns = {0};
    for (;;) {
        tok *t = next(p);
        if (t->t == T_EOF) {
            if (!ends) return finish_body(p, &ns, b);
            free(ns.v);
            char m[80];
            snprintf(m, sizeof m, "'%s' opened here is never closed", what);
            return fail(p, CANDLE_ERR_FORMAT, opener->line, opener->col, "%s", m);
        }
        jnode *n = NULL;
        if (t->t == T_TEXT) {
            if ((n = mkn(p, JN_TEXT, t))) {
                n->text = t->s;
                n->len = t->len;
            }
        } else if (t->t == T_VAR) {
            if ((n = mkn(p, JN_OUT, t)) && (n->expr = parse_tuple(p))) {
                if (!expect_end(p)) n = NULL;
            } else n = NULL;
        } else if (t->t == T_BLOCK) {
            tok *w = peek(p);
            for (int k = 0; ends && ends[k]; k++)
                if (is_name(w, ends[k])) {
                    *endw = k;
                    return finish_body(p, &ns, b);
                }
            if (w->t == T_NAME && w->len > 3 && (!memcmp(w->s, "end", 3) || is_name(w, "elif") || is_name(w, "else"))) {
                free(ns.v);
                char m[80];
                snprintf(m, sizeof m, "unexpected '%.*s'", (int)(w->len < 40 ? w->len : 40), w->s);
                return fail(p, CANDLE_ERR_FORMAT, w->line, w->col, "%s", m);
            }
            n = parse_stmt(p, t);
        } else {
            p->pos--;
            unexpected(p, "text or a tag");
        }
        if (!n || !nodes_push(p, &ns, n)) {
            free(ns.v);
            return false;
        }
    }
}

candle_status candle_jinja_parse(const char *src, size_t len, candle_jinja **out) {
    if (!out || (!src && len))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "jinja: NULL template or output");
    *out = NULL;
    candle_jinja *t = calloc(1, sizeof *t);
    if (!t) return cdl_set_error(NULL, CANDLE_ERR_OOM, "jinja: out of memory");
    parser p = {.src = src ? src : "", .len = len, .arena = &t->arena, .lc_line = 1, .lc_col = 1};
    /* the text nodes point into a copy the template owns */
    char *copy = cdl_jj_alloc(&t->arena, len + 1);
    if (copy) {
        if (len) memcpy(copy, src, len);
        p.src = copy;
    } else fail(&p, CANDLE_ERR_OOM, 0, 0, "out of memory");
    if (!p.err && lex(&p)) parse_body(&p, &t->root, NULL, NULL, NULL, NULL);
    free(p.toks);
    if (p.err) {
        cdl_jj_arena_free(&t->arena);
        free(t);
        return cdl_set_error(NULL, p.err, "%s", p.msg);
    }
    *out = t;
    return CANDLE_OK;
}

void candle_jinja_free(candle_jinja *t) {
    if (!t) return;
    cdl_jj_arena_free(&t->arena);
    free(t);
}
