/* Backtracking regex engine for pre-tokenizer patterns: the pattern is
 * parsed to a tree, compiled to a small instruction list (char, class,
 * split, jump, lookahead, match) and run with an explicit backtrack stack,
 * which gives the Perl/Oniguruma leftmost-first semantics the reference
 * tokenizers were defined with. Patterns come from a fixed internal table;
 * errors still go through the normal error path. */
#include "regex-impl.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

typedef struct rclass {
    bool neg;
    bool space, nspace; /* \s, \S inside the class */
    uint8_t cats;       /* \p{X} bits */
    uint8_t ncats;      /* \P{X} bits */
    uint32_t gcs, ngcs; /* \p{Xy}, \P{Xy}: bits of general category indices */
    uint64_t ascii[2];  /* precomputed answer for code points < 128 */
    uint32_t *ranges;   /* pairs lo, hi */
    int n_ranges;
    int (*cat)(uint32_t); /* the category table \p{X} reads */
    int (*gc)(uint32_t);  /* general category index for \p{Xy}, or NULL */
} rclass;

enum { I_CHAR, I_CLASS, I_ANY, I_EOL, I_SPLIT, I_JMP, I_LOOK, I_MATCH };

typedef struct insn {
    uint8_t op;
    bool neg;   /* I_LOOK: negative lookahead */
    uint32_t cp;
    int32_t x, y; /* I_SPLIT: try x, then y; I_JMP, I_LOOK: continue at x */
} insn;

enum { N_CHAR, N_CLASS, N_ANY, N_EOL, N_CAT, N_ALT, N_REP, N_LOOK };

typedef struct rnode {
    uint8_t type;
    bool greedy, neg;
    uint32_t cp;
    int cls;
    int child;      /* first child (CAT, ALT, REP, LOOK) */
    int next;       /* next sibling, -1 at the end */
    int min, max;   /* REP; max -1 = unbounded */
} rnode;

struct tok_regex {
    insn *prog;
    int n_prog, cap_prog;
    rclass *classes;
    int n_classes, cap_classes;
    int (*cat)(uint32_t);
    int (*gc)(uint32_t);
    const char *gc_names; /* two letters per index */
};

typedef struct parser {
    const uint32_t *p;
    int n, i;
    rnode *nodes;
    int n_nodes, cap_nodes;
    tok_regex *re;
    const char *err;
    int icase; /* inside (?i:...): ASCII letters match either case */
} parser;

static bool grow(void **buf, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *nb = realloc(*buf, (size_t)nc * elem);
    if (!nb) return false;
    *buf = nb;
    *cap = nc;
    return true;
}

static int new_node(parser *ps, int type) {
    if (!grow((void **)&ps->nodes, &ps->cap_nodes, ps->n_nodes + 1, sizeof(rnode))) {
        ps->err = "out of memory";
        return -1;
    }
    rnode *nd = &ps->nodes[ps->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->type = (uint8_t)type;
    nd->child = nd->next = -1;
    nd->greedy = true;
    return ps->n_nodes++;
}

static int new_class(parser *ps) {
    tok_regex *re = ps->re;
    if (!grow((void **)&re->classes, &re->cap_classes, re->n_classes + 1, sizeof(rclass))) {
        ps->err = "out of memory";
        return -1;
    }
    memset(&re->classes[re->n_classes], 0, sizeof(rclass));
    re->classes[re->n_classes].cat = re->cat;
    re->classes[re->n_classes].gc = re->gc;
    return re->n_classes++;
}

static bool class_add_range(parser *ps, rclass *c, uint32_t lo, uint32_t hi) {
    int cap = c->n_ranges; /* exact-size growth keeps the struct simple */
    uint32_t *nr = realloc(c->ranges, (size_t)(cap + 1) * 2 * sizeof(uint32_t));
    if (!nr) {
        ps->err = "out of memory";
        return false;
    }
    c->ranges = nr;
    c->ranges[2 * cap] = lo;
    c->ranges[2 * cap + 1] = hi;
    c->n_ranges++;
    return true;
}

static bool class_test_slow(const rclass *c, uint32_t cp) {
    bool in = false;
    if (c->cats || c->ncats) {
        int cat = c->cat(cp);
        if ((cat & c->cats) || (c->ncats && !(cat & c->ncats))) in = true;
    }
    if (!in && (c->gcs || c->ngcs)) {
        uint32_t bit = 1u << c->gc(cp);
        if ((bit & c->gcs) || (c->ngcs && !(bit & c->ngcs))) in = true;
    }
    if (!in && c->space && tok_unicode_is_space(cp)) in = true;
    if (!in && c->nspace && !tok_unicode_is_space(cp)) in = true;
    for (int i = 0; !in && i < c->n_ranges; i++)
        if (cp >= c->ranges[2 * i] && cp <= c->ranges[2 * i + 1]) in = true;
    return in != c->neg;
}

static inline bool class_test(const rclass *c, uint32_t cp) {
    if (cp < 128) return (c->ascii[cp >> 6] >> (cp & 63)) & 1;
    return class_test_slow(c, cp);
}

static void class_finish(rclass *c) {
    for (uint32_t cp = 0; cp < 128; cp++)
        if (class_test_slow(c, cp)) c->ascii[cp >> 6] |= (uint64_t)1 << (cp & 63);
}

/* ---- parser ---- */

static bool at_end(const parser *ps) { return ps->i >= ps->n; }
static uint32_t peek(const parser *ps) { return at_end(ps) ? 0 : ps->p[ps->i]; }

/* Index of the two-letter category a b in the regex's table, or -1. */
static int gc_index(const tok_regex *re, uint32_t a, uint32_t b) {
    for (int k = 0; re->gc_names && re->gc_names[2 * k]; k++)
        if ((uint32_t)re->gc_names[2 * k] == a && (uint32_t)re->gc_names[2 * k + 1] == b) return k;
    return -1;
}

/* \p{X}: the category bit; \p{Xy} (a general category, when the
 * regex has a table of them): its index + 1 in *gc. 0 with an error. */
static int parse_prop(parser *ps, int *gc) {
    *gc = 0;
    if (ps->re->gc_names && peek(ps) == '{' && ps->i + 3 < ps->n && ps->p[ps->i + 3] == '}') {
        uint32_t a = ps->p[ps->i + 1], b = ps->p[ps->i + 2];
        ps->i += 4;
        int k = gc_index(ps->re, a, b);
        if (k >= 0) {
            *gc = k + 1;
            return 1;
        }
        ps->err = "unknown category in \\p{}";
        return 0;
    }
    if (peek(ps) != '{' || ps->i + 2 >= ps->n || ps->p[ps->i + 2] != '}') {
        ps->err = "expected \\p{X} with a one-letter category";
        return 0;
    }
    uint32_t c = ps->p[ps->i + 1];
    ps->i += 3;
    switch (c) {
    case 'L': return UCAT_L;
    case 'M': return UCAT_M;
    case 'N': return UCAT_N;
    case 'P': return UCAT_P;
    case 'S': return UCAT_S;
    case 'Z': return UCAT_Z;
    case 'C': return UCAT_C;
    }
    ps->err = "unknown category in \\p{}";
    return 0;
}

static uint32_t escape_literal(uint32_t c) {
    switch (c) {
    case 'r': return '\r';
    case 'n': return '\n';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    }
    return c;
}

/* One escape after '\' into class c; returns false on error. Sets *lit to
 * a literal code point (and returns true) when the escape is one. */
static bool parse_escape(parser *ps, rclass *c, uint32_t *lit, bool *is_lit) {
    *is_lit = false;
    if (at_end(ps)) {
        ps->err = "trailing backslash";
        return false;
    }
    uint32_t e = ps->p[ps->i++];
    int cat, gc;
    switch (e) {
    case 'p':
    case 'P':
        if (!(cat = parse_prop(ps, &gc))) return false;
        if (gc) {
            if (e == 'p') c->gcs |= 1u << (gc - 1);
            else c->ngcs |= 1u << (gc - 1);
        } else if (e == 'p') c->cats |= (uint8_t)cat;
        else c->ncats |= (uint8_t)cat;
        return true;
    case 's': c->space = true; return true;
    case 'S': c->nspace = true; return true;
    case 'd':
    case 'D': {
        /* With a general category table \d is \p{Nd}, as in Oniguruma;
         * without one, ASCII digits. */
        int nd = gc_index(ps->re, 'N', 'd');
        if (nd >= 0) {
            if (e == 'd') c->gcs |= 1u << nd;
            else c->ngcs |= 1u << nd;
            return true;
        }
        if (e == 'd') return class_add_range(ps, c, '0', '9');
        return class_add_range(ps, c, 0, '0' - 1) && class_add_range(ps, c, '9' + 1, 0x10FFFF);
    }
    }
    if (e == 'x' && peek(ps) == '{') { /* \x{HHHH}: code points that normalisation would alter */
        uint32_t v = 0;
        int digits = 0;
        for (ps->i++; !at_end(ps) && peek(ps) != '}' && digits < 7; ps->i++, digits++) {
            uint32_t h = ps->p[ps->i];
            int d = (h >= '0' && h <= '9') ? (int)(h - '0') : (h >= 'A' && h <= 'F') ? (int)(h - 'A' + 10)
                  : (h >= 'a' && h <= 'f') ? (int)(h - 'a' + 10) : -1;
            if (d < 0) break;
            v = v * 16 + (uint32_t)d;
        }
        if (peek(ps) != '}' || !digits || v > 0x10FFFF) {
            ps->err = "bad \\x{...}";
            return false;
        }
        ps->i++;
        *lit = v;
        *is_lit = true;
        return true;
    }
    if ((e >= 'a' && e <= 'z' && !strchr("rntfv", (int)e)) || (e >= 'A' && e <= 'Z') ||
        (e >= '0' && e <= '9')) {
        ps->err = "unsupported escape";
        return false;
    }
    *lit = escape_literal(e);
    *is_lit = true;
    return true;
}

static int parse_class(parser *ps) {
    int ci = new_class(ps);
    if (ci < 0) return -1;
    rclass *c = &ps->re->classes[ci];
    if (peek(ps) == '^') {
        c->neg = true;
        ps->i++;
    }
    bool first = true;
    while (!at_end(ps) && (peek(ps) != ']' || first)) {
        first = false;
        uint32_t lo = ps->p[ps->i++];
        if (lo == '\\') {
            bool is_lit;
            if (!parse_escape(ps, c, &lo, &is_lit)) return -1;
            if (!is_lit) continue;
        }
        uint32_t hi = lo;
        if (peek(ps) == '-' && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
            ps->i++;
            hi = ps->p[ps->i++];
            if (hi == '\\') {
                bool is_lit;
                if (!parse_escape(ps, c, &hi, &is_lit)) return -1;
                if (!is_lit) {
                    ps->err = "class escape as a range end";
                    return -1;
                }
            }
            if (hi < lo) {
                ps->err = "reversed range in class";
                return -1;
            }
        }
        if (!class_add_range(ps, c, lo, hi)) return -1;
    }
    if (peek(ps) != ']') {
        ps->err = "unterminated class";
        return -1;
    }
    ps->i++;
    class_finish(c);
    int nd = new_node(ps, N_CLASS);
    if (nd >= 0) ps->nodes[nd].cls = ci;
    return nd;
}

static int parse_alt(parser *ps);

static int parse_atom(parser *ps) {
    uint32_t c = ps->p[ps->i++];
    int nd;
    if (c == '(') {
        int look = -1;
        if (peek(ps) == '?') {
            uint32_t k = ps->i + 1 < ps->n ? ps->p[ps->i + 1] : 0;
            if (k == ':') look = -1;
            else if (k == 'i' && ps->i + 2 < ps->n && ps->p[ps->i + 2] == ':') {
                ps->i += 3;
                ps->icase++;
                int inner = parse_alt(ps);
                ps->icase--;
                if (inner < 0) return -1;
                if (peek(ps) != ')') {
                    ps->err = "missing )";
                    return -1;
                }
                ps->i++;
                return inner;
            } else if (k == '=') look = 0;
            else if (k == '!') look = 1;
            else {
                ps->err = "unsupported group";
                return -1;
            }
            ps->i += 2;
        }
        int inner = parse_alt(ps);
        if (inner < 0) return -1;
        if (peek(ps) != ')') {
            ps->err = "missing )";
            return -1;
        }
        ps->i++;
        if (look < 0) return inner;
        if ((nd = new_node(ps, N_LOOK)) < 0) return -1;
        ps->nodes[nd].child = inner;
        ps->nodes[nd].neg = look == 1;
        return nd;
    }
    if (c == '[') return parse_class(ps);
    if (c == '.') return new_node(ps, N_ANY);
    if (c == '$') return new_node(ps, N_EOL);
    if (c == '\\') {
        int ci = new_class(ps);
        if (ci < 0) return -1;
        uint32_t lit;
        bool is_lit;
        if (!parse_escape(ps, &ps->re->classes[ci], &lit, &is_lit)) return -1;
        if (is_lit) {
            ps->re->n_classes--; /* unused: a literal after all */
            c = lit;
        } else {
            class_finish(&ps->re->classes[ci]);
            if ((nd = new_node(ps, N_CLASS)) >= 0) ps->nodes[nd].cls = ci;
            return nd;
        }
    } else if (strchr("*+?{)|^", (int)(c < 128 ? c : 'a'))) {
        ps->err = "unexpected metacharacter";
        return -1;
    }
    if (ps->icase && ((c | 32) >= 'a' && (c | 32) <= 'z')) {
        int ci = new_class(ps);
        if (ci < 0) return -1;
        rclass *cl = &ps->re->classes[ci];
        if (!class_add_range(ps, cl, c | 32, c | 32) || !class_add_range(ps, cl, c & ~32u, c & ~32u)) return -1;
        class_finish(cl);
        if ((nd = new_node(ps, N_CLASS)) >= 0) ps->nodes[nd].cls = ci;
        return nd;
    }
    if ((nd = new_node(ps, N_CHAR)) >= 0) ps->nodes[nd].cp = c;
    return nd;
}

static bool parse_int(parser *ps, int *v) {
    if (peek(ps) < '0' || peek(ps) > '9') return false;
    *v = 0;
    while (peek(ps) >= '0' && peek(ps) <= '9' && *v < 10000) *v = *v * 10 + (int)(ps->p[ps->i++] - '0');
    return true;
}

static int parse_repeat(parser *ps) {
    int atom = parse_atom(ps);
    while (atom >= 0 && !at_end(ps)) {
        uint32_t q = peek(ps);
        int min, max;
        if (q == '?') min = 0, max = 1;
        else if (q == '*') min = 0, max = -1;
        else if (q == '+') min = 1, max = -1;
        else if (q == '{') {
            ps->i++;
            if (!parse_int(ps, &min)) {
                ps->err = "bad {m,n}";
                return -1;
            }
            max = min;
            if (peek(ps) == ',') {
                ps->i++;
                if (!parse_int(ps, &max)) max = -1;
            }
            if (peek(ps) != '}' || (max >= 0 && max < min)) {
                ps->err = "bad {m,n}";
                return -1;
            }
        } else break;
        ps->i++;
        int nd = new_node(ps, N_REP);
        if (nd < 0) return -1;
        ps->nodes[nd].child = atom;
        ps->nodes[nd].min = min;
        ps->nodes[nd].max = max;
        if (peek(ps) == '?') {
            ps->nodes[nd].greedy = false;
            ps->i++;
        }
        atom = nd;
    }
    return atom;
}

static int parse_cat(parser *ps) {
    int nd = new_node(ps, N_CAT), last = -1;
    if (nd < 0) return -1;
    while (!at_end(ps) && peek(ps) != '|' && peek(ps) != ')') {
        int item = parse_repeat(ps);
        if (item < 0) return -1;
        if (last < 0) ps->nodes[nd].child = item;
        else ps->nodes[last].next = item;
        last = item;
    }
    return nd;
}

static int parse_alt(parser *ps) {
    int first = parse_cat(ps);
    if (first < 0 || peek(ps) != '|') return first;
    int nd = new_node(ps, N_ALT), last = first;
    if (nd < 0) return -1;
    ps->nodes[nd].child = first;
    while (peek(ps) == '|') {
        ps->i++;
        int alt = parse_cat(ps);
        if (alt < 0) return -1;
        ps->nodes[last].next = alt;
        last = alt;
    }
    return nd;
}

/* ---- code generation ---- */

static int emit(parser *ps, int op) {
    tok_regex *re = ps->re;
    if (!grow((void **)&re->prog, &re->cap_prog, re->n_prog + 1, sizeof(insn))) {
        ps->err = "out of memory";
        return -1;
    }
    memset(&re->prog[re->n_prog], 0, sizeof(insn));
    re->prog[re->n_prog].op = (uint8_t)op;
    return re->n_prog++;
}

static bool gen(parser *ps, int ni);

static bool gen_rep(parser *ps, const rnode *nd) {
    for (int k = 0; k < nd->min; k++)
        if (!gen(ps, nd->child)) return false;
    if (nd->max < 0) {
        int split = emit(ps, I_SPLIT);
        if (split < 0 || !gen(ps, nd->child)) return false;
        int jmp = emit(ps, I_JMP);
        if (jmp < 0) return false;
        insn *s = &ps->re->prog[split];
        ps->re->prog[jmp].x = split;
        s->x = nd->greedy ? split + 1 : ps->re->n_prog;
        s->y = nd->greedy ? ps->re->n_prog : split + 1;
        return true;
    }
    /* Each optional copy's split skips to the end (once one copy is not
     * taken, neither are the rest); the splits are chained through x until
     * the end is known. */
    int chain = -1;
    for (int k = nd->min; k < nd->max; k++) {
        int split = emit(ps, I_SPLIT);
        if (split < 0) return false;
        ps->re->prog[split].x = chain;
        chain = split;
        if (!gen(ps, nd->child)) return false;
    }
    int end = ps->re->n_prog;
    while (chain >= 0) {
        insn *s = &ps->re->prog[chain];
        int prev = s->x;
        s->x = nd->greedy ? chain + 1 : end;
        s->y = nd->greedy ? end : chain + 1;
        chain = prev;
    }
    return true;
}

static bool gen(parser *ps, int ni) {
    const rnode nd = ps->nodes[ni]; /* copy: gen may not move nodes, but stays safe */
    int pc;
    switch (nd.type) {
    case N_CHAR:
        if ((pc = emit(ps, I_CHAR)) < 0) return false;
        ps->re->prog[pc].cp = nd.cp;
        return true;
    case N_CLASS:
        if ((pc = emit(ps, I_CLASS)) < 0) return false;
        ps->re->prog[pc].x = nd.cls;
        return true;
    case N_ANY: return emit(ps, I_ANY) >= 0;
    case N_EOL: return emit(ps, I_EOL) >= 0;
    case N_CAT:
        for (int c = nd.child; c >= 0; c = ps->nodes[c].next)
            if (!gen(ps, c)) return false;
        return true;
    case N_ALT: {
        int chain = -1; /* the jumps to the end, linked through x */
        for (int c = nd.child; c >= 0; c = ps->nodes[c].next) {
            if (ps->nodes[c].next < 0) {
                if (!gen(ps, c)) return false;
                break;
            }
            int split = emit(ps, I_SPLIT);
            if (split < 0 || !gen(ps, c)) return false;
            int jmp = emit(ps, I_JMP);
            if (jmp < 0) return false;
            ps->re->prog[jmp].x = chain;
            chain = jmp;
            ps->re->prog[split].x = split + 1;
            ps->re->prog[split].y = ps->re->n_prog;
        }
        while (chain >= 0) {
            int prev = ps->re->prog[chain].x;
            ps->re->prog[chain].x = ps->re->n_prog;
            chain = prev;
        }
        return true;
    }
    case N_REP: return gen_rep(ps, &nd);
    case N_LOOK:
        if ((pc = emit(ps, I_LOOK)) < 0) return false;
        ps->re->prog[pc].neg = nd.neg;
        if (!gen(ps, nd.child) || emit(ps, I_MATCH) < 0) return false;
        ps->re->prog[pc].x = ps->re->n_prog;
        return true;
    }
    return false;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
    for (int i = 0; i < re->n_classes; i++) free(re->classes[i].ranges);
    free(re->classes);
    free(re->prog);
    free(re);
}

candle_status tok_regex_compile(const char *pattern, tok_regex **out) {
    return tok_regex_compile_cat(pattern, tok_unicode_category, NULL, NULL, out);
}

candle_status tok_regex_compile_cat(const char *pattern, int (*cat)(uint32_t), int (*gc)(uint32_t),
                                    const char *gc_names, tok_regex **out) {
    *out = NULL;
    size_t len = strlen(pattern);
    parser ps = {0};
    uint32_t *cps = malloc((len + 1) * sizeof(uint32_t));
    tok_regex *re = calloc(1, sizeof *re);
    if (!cps || !re) {
        free(cps);
        free(re);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: regex of %zu bytes", len);
    }
    for (size_t i = 0; i < len;) i += tok_utf8_decode(pattern + i, len - i, &cps[ps.n++]);
    ps.p = cps;
    ps.re = re;
    re->cat = cat;
    re->gc = gc;
    re->gc_names = gc ? gc_names : NULL;
    int root = parse_alt(&ps);
    if (root >= 0 && !at_end(&ps)) ps.err = "unbalanced )";
    if (!ps.err && (!gen(&ps, root) || emit(&ps, I_MATCH) < 0) && !ps.err) ps.err = "codegen";
    free(ps.nodes);
    free(cps);
    if (ps.err) {
        tok_regex_free(re);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "regex: %s at offset %d in '%s'",
                                ps.err, ps.i, pattern);
    }
    *out = re;
    return CANDLE_OK;
}

/* ---- matching ---- */

static bool push(tok_regex_stack *st, int64_t pc, int64_t pos) {
    if (st->n + 2 > st->cap) {
        int64_t nc = st->cap ? st->cap * 2 : 256;
        int64_t *nv = tok_tmp_realloc(st->v, (size_t)st->cap * sizeof(int64_t), (size_t)nc * sizeof(int64_t));
        if (!nv) return false;
        st->v = nv;
        st->cap = nc;
    }
    st->v[st->n++] = pc;
    st->v[st->n++] = pos;
    return true;
}

/* Past this many steps per character on one text the memo is used; it is
 * skipped when its bitmap would exceed MEMO_MAX_BITS. */
#define MEMO_STEPS_PER_CHAR 64
#define MEMO_MAX_BITS ((int64_t)1 << 27)

void tok_regex_stack_free(tok_regex_stack *st) {
    tok_tmp_free(st->v);
    tok_tmp_free(st->memo);
    memset(st, 0, sizeof *st);
}

void tok_regex_begin(tok_regex_stack *st) {
    tok_tmp_free(st->memo);
    st->memo = NULL;
    st->memo_re = st->memo_text = NULL;
    st->steps = 0;
}

/* Resets the step count (and memo) when the text or regex changes. */
static void memo_track(const tok_regex *re, const uint32_t *cps, int64_t n, tok_regex_stack *st) {
    if (st->memo_re == re && st->memo_text == cps && st->memo_len == n) return;
    tok_tmp_free(st->memo);
    st->memo = NULL;
    st->memo_re = re;
    st->memo_text = cps;
    st->memo_len = n;
    st->steps = 0;
}

static void memo_maybe_start(const tok_regex *re, int64_t n, tok_regex_stack *st) {
    int64_t bits = (n + 1) * re->n_prog;
    if (st->memo || st->steps < MEMO_STEPS_PER_CHAR * (n + 16) || bits > MEMO_MAX_BITS) return;
    st->memo = tok_tmp_calloc((size_t)(bits / 64 + 1), sizeof(uint64_t)); /* NULL: carry on without */
}

/* The states of a successful match may lead to MATCH again: forget the
 * positions it covered (the next try starts at its end). */
static void memo_forget(const tok_regex *re, tok_regex_stack *st, int64_t from, int64_t to) {
    if (!st->memo) return;
    int64_t w0 = from * re->n_prog / 64, w1 = ((to + 1) * re->n_prog) / 64;
    memset(st->memo + w0, 0, (size_t)(w1 - w0 + 1) * sizeof(uint64_t));
}

/* main: the top-level run, whose states may be memoised; a lookahead's
 * sub-run succeeds or fails by itself, so its states are not. */
static int64_t run(const tok_regex *re, int64_t pc, const uint32_t *cps, int64_t n, int64_t pos,
                   tok_regex_stack *st, bool main) {
    const int64_t base = st->n;
    for (;;) {
        if (main) {
            if (st->memo) {
                uint64_t idx = (uint64_t)pos * (uint64_t)re->n_prog + (uint64_t)pc;
                uint64_t bit = (uint64_t)1 << (idx & 63);
                if (st->memo[idx >> 6] & bit) goto fail; /* explored: it failed */
                st->memo[idx >> 6] |= bit;
            } else if (++st->steps >= MEMO_STEPS_PER_CHAR * (n + 16)) {
                memo_maybe_start(re, n, st);
            }
        }
        const insn *in = &re->prog[pc];
        bool ok;
        switch (in->op) {
        case I_CHAR: ok = pos < n && cps[pos] == in->cp; pos += ok; pc++; break;
        case I_CLASS:
            ok = pos < n && class_test(&re->classes[in->x], cps[pos]);
            pos += ok;
            pc++;
            break;
        case I_ANY: ok = pos < n && cps[pos] != '\n'; pos += ok; pc++; break;
        case I_EOL: ok = pos == n; pc++; break;
        case I_SPLIT:
            if (!push(st, in->y, pos)) {
                st->n = base;
                return -2;
            }
            pc = in->x;
            continue;
        case I_JMP: pc = in->x; continue;
        case I_LOOK: {
            int64_t r = run(re, pc + 1, cps, n, pos, st, false);
            if (r == -2) {
                st->n = base;
                return -2;
            }
            ok = (r >= 0) != in->neg;
            pc = in->x;
            break;
        }
        default: /* I_MATCH */
            st->n = base;
            return pos;
        }
        if (ok) continue;
    fail:
        if (st->n == base) return -1;
        pos = st->v[--st->n];
        pc = st->v[--st->n];
    }
}

int64_t tok_regex_match_at(const tok_regex *re, const uint32_t *cps, int64_t n, int64_t pos,
                           tok_regex_stack *st) {
    memo_track(re, cps, n, st);
    int64_t end = run(re, 0, cps, n, pos, st, true);
    if (end >= 0) memo_forget(re, st, pos, end);
    return end;
}
