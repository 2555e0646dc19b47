/* The grammar matcher: the set of pushdown stacks that the text so far
 * leaves open (each stack a list of element positions still to match, top
 * last; an empty stack means the text can end), advanced one code point at a
 * time, with a partial UTF-8 sequence held between bytes. Masking walks the
 * vocabulary's prefix trie, so tokens sharing a prefix share its work and a
 * prefix the grammar refuses prunes every token below it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar-impl.h"
#include "../core/core-impl.h"

/* A set of stacks, deduplicated through a hash table. */
typedef struct sset {
    uint32_t *data, n_data, cap_data;
    uint32_t *off, *len, *hash, n, cap;
    uint32_t *tab, tab_cap; /* slots hold index + 1 */
    bool tab_live;          /* tab indexes the set (only past SSET_LINEAR stacks) */
    bool overflow;          /* a limit was hit: the set is incomplete */
    uint64_t version;       /* stamped when its stacks are rewritten (step caches) */
} sset;

/* A position in the text: the open stacks and any partial UTF-8 sequence.
 * While a sequence is partial the stacks are those before its first byte, so
 * set may point at another position's storage. */
typedef struct gpos {
    sset own;
    const sset *set;
    uint8_t need;    /* continuation bytes still to come */
    uint32_t cp;     /* the bits so far */
    uint32_t min;    /* the least code point of this length (overlong forms are invalid) */
    /* own holds the stacks after a code point from cache_src (at its
     * version) that the stacks cache_sig (bit i: stack i) matched: siblings
     * in the trie that match the same stacks reuse it (a string's body
     * matches most bytes the same way) */
    const sset *cache_src;
    uint64_t cache_ver, cache_sig;
    bool cache_ok;
} gpos;

struct candle_grammar_state {
    const candle_grammar *g;
    gpos cur;
    gpos tmp[2];  /* accept_bytes' ping-pong */
    sset work;    /* stacks still to expand */
    uint32_t *stk; /* [GRAMMAR_MAX_DEPTH + 1] one stack being expanded */
    gpos *lv;      /* mask: one position per trie depth */
    uint32_t n_lv;
    uint8_t *allowed;
    int32_t n_allowed_cap;
    uint64_t version; /* the last stamp given to a stack set */
};

struct candle_grammar_vocab {
    int32_t n_vocab;
    char *blob;
    uint32_t *off, *len;
    uint8_t *eog;
    struct tnode {
        uint32_t child, sibling; /* 0: none (node 0 is the root, never a child) */
        int32_t tok;             /* first token ending here, -1 none; more via tok_next */
        uint8_t byte;
    } *nodes;
    uint32_t n_nodes;
    int32_t *tok_next;
    uint32_t max_len;
};

/* ---- stack sets ---- */

static void sset_free(sset *s) {
    free(s->data), free(s->off), free(s->len), free(s->hash), free(s->tab);
    memset(s, 0, sizeof *s);
}

static void sset_clear(sset *s) {
    s->n = s->n_data = 0;
    s->overflow = false;
    s->tab_live = false; /* rebuilt when the set grows past SSET_LINEAR */
}

static uint32_t stack_hash(const uint32_t *st, uint32_t n) {
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ st[i]) * 16777619u;
    return h;
}

/* Index the set's stacks in a table of at least `want` slots (a power of
 * two), reusing the allocation. */
static bool sset_build_tab(sset *s, uint32_t want) {
    uint32_t cap = 64;
    while (cap < want) cap *= 2;
    if (cap > s->tab_cap) {
        uint32_t *t = realloc(s->tab, cap * sizeof *t);
        if (!t) return false;
        s->tab = t;
        s->tab_cap = cap;
    }
    cap = s->tab_cap;
    memset(s->tab, 0, cap * sizeof *s->tab);
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t j = s->hash[i] & (cap - 1);
        while (s->tab[j]) j = (j + 1) & (cap - 1);
        s->tab[j] = i + 1;
    }
    s->tab_live = true;
    return true;
}

/* Small sets (the usual case) are searched linearly: cheaper than keeping
 * a table, which is built once a set grows past this. */
#define SSET_LINEAR 16

/* Add a stack; dedup: unless an equal one is there. Beyond the limits the
 * set is marked overflowed and the stack dropped. */
static void sset_add(sset *s, const uint32_t *st, uint32_t n, bool dedup) {
    uint32_t h = 0, j = 0;
    bool use_tab = false;
    if (dedup) {
        h = stack_hash(st, n);
        if (s->n < SSET_LINEAR) {
            for (uint32_t k = 0; k < s->n; k++)
                if (s->hash[k] == h && s->len[k] == n &&
                    (n == 0 || !memcmp(s->data + s->off[k], st, n * sizeof *st)))
                    return;
        } else {
            if ((!s->tab_live || 2 * (s->n + 1) > s->tab_cap) && !sset_build_tab(s, 4 * (s->n + 1)))
                goto oom;
            use_tab = true;
            j = h & (s->tab_cap - 1);
            for (; s->tab[j]; j = (j + 1) & (s->tab_cap - 1)) {
                uint32_t k = s->tab[j] - 1;
                if (s->hash[k] == h && s->len[k] == n &&
                    (n == 0 || !memcmp(s->data + s->off[k], st, n * sizeof *st)))
                    return;
            }
        }
    }
    if (s->n >= GRAMMAR_MAX_STACKS * 4) goto oom;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 16;
        uint32_t *o = realloc(s->off, cap * sizeof *o), *l = o ? realloc(s->len, cap * sizeof *l) : NULL;
        if (o) s->off = o;
        if (l) s->len = l;
        uint32_t *hh = l ? realloc(s->hash, cap * sizeof *hh) : NULL;
        if (!hh) goto oom;
        s->hash = hh;
        s->cap = cap;
    }
    if (s->n_data + n > s->cap_data) {
        uint32_t cap = s->cap_data ? s->cap_data : 64;
        while (cap < s->n_data + n) cap *= 2;
        uint32_t *d = realloc(s->data, cap * sizeof *d);
        if (!d) goto oom;
        s->data = d;
        s->cap_data = cap;
    }
    s->off[s->n] = s->n_data;
    s->len[s->n] = n;
    s->hash[s->n] = h;
    if (n) memcpy(s->data + s->n_data, st, n * sizeof *st);
    s->n_data += n;
    if (use_tab) s->tab[j] = s->n + 1;
    s->n++;
    return;
oom:
    s->overflow = true;
}

/* ---- matching ---- */

static bool is_end(const gelem *e) { return e->type == GE_END || e->type == GE_ALT; }

static bool el_match(const candle_grammar *g, const gelem *e, uint32_t cp) {
    if (e->type == GE_ANY) return true;
    bool in = false;
    for (uint32_t i = 0; i < e->b && !in; i++) {
        const uint32_t *r = g->ranges + 2 * (e->a + i);
        in = cp >= r[0] && cp <= r[1];
    }
    return in != e->neg;
}

/* Whether e may match some code point in [lo, hi] (for a partial UTF-8
 * sequence). A negated class counts as matching unless one of its ranges
 * covers all of [lo, hi]: the final code point is checked exactly. */
static bool el_match_range(const candle_grammar *g, const gelem *e, uint32_t lo, uint32_t hi) {
    if (e->type == GE_ANY) return true;
    for (uint32_t i = 0; i < e->b; i++) {
        const uint32_t *r = g->ranges + 2 * (e->a + i);
        if (e->neg && r[0] <= lo && r[1] >= hi) return false;
        if (!e->neg && r[0] <= hi && r[1] >= lo) return true;
    }
    return e->neg;
}

/* Expand the stacks in st->work until each has a character element on top
 * (or is empty), adding them to out. False when a limit was hit. */
static bool expand(candle_grammar_state *st, sset *out) {
    const candle_grammar *g = st->g;
    sset *w = &st->work;
    uint32_t *tmp = st->stk;
    uint32_t steps = 0;
    while (w->n && !w->overflow && !out->overflow) {
        uint32_t k = --w->n, n = w->len[k];
        if (n) memcpy(tmp, w->data + w->off[k], n * sizeof *tmp);
        w->n_data = w->off[k];
        if (++steps > GRAMMAR_MAX_WORK) {
            w->overflow = true;
            break;
        }
        if (n == 0 || g->el[tmp[n - 1]].type != GE_REF) {
            sset_add(out, tmp, n, true);
            continue;
        }
        uint32_t top = tmp[--n];
        uint32_t rule = g->el[top].a;
        /* the rest of this alternative; nothing when the reference is its
         * last element, so right recursion does not deepen the stack */
        if (!is_end(&g->el[top + 1])) tmp[n++] = top + 1;
        if (n + 1 > GRAMMAR_MAX_DEPTH) {
            w->overflow = true;
            break;
        }
        for (uint32_t a = g->alt_off[rule]; a < g->alt_off[rule + 1]; a++) {
            uint32_t start = g->alts[a];
            if (is_end(&g->el[start])) {
                sset_add(w, tmp, n, false);
            } else {
                tmp[n] = start;
                sset_add(w, tmp, n + 1, false);
            }
        }
    }
    bool ok = !w->overflow && !out->overflow && out->n <= GRAMMAR_MAX_STACKS;
    sset_clear(w);
    return ok;
}

/* The stacks after code point cp, from `from` into out. */
static bool step_cp(candle_grammar_state *st, const sset *from, uint32_t cp, sset *out) {
    const candle_grammar *g = st->g;
    sset_clear(out);
    sset_clear(&st->work);
    for (uint32_t i = 0; i < from->n; i++) {
        uint32_t n = from->len[i];
        if (n == 0) continue;
        const uint32_t *s = from->data + from->off[i];
        uint32_t top = s[n - 1];
        if (!el_match(g, &g->el[top], cp)) continue;
        memcpy(st->stk, s, n * sizeof *s);
        if (is_end(&g->el[top + 1])) n--;
        else st->stk[n - 1] = top + 1;
        sset_add(&st->work, st->stk, n, false);
    }
    if (st->work.overflow) {
        sset_clear(&st->work);
        return false;
    }
    return expand(st, out) && out->n > 0;
}

static bool any_match_range(const candle_grammar *g, const sset *s, uint32_t lo, uint32_t hi) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->len[i] && el_match_range(g, &g->el[s->data[s->off[i] + s->len[i] - 1]], lo, hi))
            return true;
    return false;
}

/* The position after a whole code point cp from the stacks src, into to. */
static bool step_full(candle_grammar_state *st, const sset *src, uint32_t cp, gpos *to) {
    const candle_grammar *g = st->g;
    uint64_t sig = 0;
    bool cacheable = src->n <= 64;
    if (cacheable) {
        for (uint32_t i = 0; i < src->n; i++)
            if (src->len[i] && el_match(g, &g->el[src->data[src->off[i] + src->len[i] - 1]], cp))
                sig |= 1ull << i;
        if (!sig) return false;
        if (to->cache_src == src && to->cache_ver == src->version && to->cache_sig == sig) {
            if (!to->cache_ok) return false;
            to->need = 0;
            to->set = &to->own;
            return true;
        }
    }
    bool ok = step_cp(st, src, cp, &to->own);
    to->own.version = ++st->version;
    to->cache_src = cacheable ? src : NULL;
    to->cache_ver = src->version;
    to->cache_sig = sig;
    to->cache_ok = ok;
    if (!ok) return false;
    to->need = 0;
    to->set = &to->own;
    return true;
}

/* One byte from `from` into `to`. to may be from itself, but to->own must
 * not hold the stacks from->set points at. */
static bool step_byte(candle_grammar_state *st, const gpos *from, uint8_t b, gpos *to) {
    const sset *src = from->set;
    uint8_t need = from->need;
    uint32_t cp = from->cp, min = from->min;
    if (need == 0) {
        if (b < 0x80) return step_full(st, src, b, to);
        if ((b & 0xE0) == 0xC0) need = 1, cp = b & 0x1F, min = 0x80;
        else if ((b & 0xF0) == 0xE0) need = 2, cp = b & 0x0F, min = 0x800;
        else if ((b & 0xF8) == 0xF0 && b <= 0xF4) need = 3, cp = b & 0x07, min = 0x10000;
        else return false;
    } else {
        if ((b & 0xC0) != 0x80) return false;
        cp = cp << 6 | (b & 0x3F);
        need--;
        if (need == 0) {
            if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
            return step_full(st, src, cp, to);
        }
    }
    /* still partial: the code points this prefix can become */
    uint32_t lo = cp << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (hi < min || lo > 0x10FFFF) return false; /* only overlong or too large forms */
    /* only surrogates (ED A0..BF): no byte can complete a character, and
     * a mask that let such a prefix through left no token after it */
    if (lo >= 0xD800 && hi <= 0xDFFF) return false;
    if (lo < min) lo = min;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (!any_match_range(st->g, src, lo, hi)) return false;
    to->set = src;
    to->need = need;
    to->cp = cp;
    to->min = min;
    return true;
}

void candle_grammar_state_reset(candle_grammar_state *s) {
    if (!s) return;
    const candle_grammar *g = s->g;
    sset_clear(&s->cur.own);
    sset_clear(&s->work);
    s->cur.set = &s->cur.own;
    s->cur.need = 0;
    for (uint32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1]; a++) {
        uint32_t start = g->alts[a];
        if (is_end(&g->el[start])) sset_add(&s->work, NULL, 0, false);
        else sset_add(&s->work, &start, 1, false);
    }
    if (!expand(s, &s->cur.own)) s->cur.own.overflow = true;
    s->cur.own.version = ++s->version;
}

candle_status candle_grammar_state_init(candle_grammar_state **out, const candle_grammar *g) {
    if (!out || !g) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar: NULL argument");
    *out = NULL;
    candle_grammar_state *s = calloc(1, sizeof *s);
    if (s) s->stk = malloc((GRAMMAR_MAX_DEPTH + 2) * sizeof *s->stk);
    if (!s || !s->stk) {
        free(s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: grammar state");
    }
    s->g = g;
    candle_grammar_state_reset(s);
    if (s->cur.own.overflow) {
        candle_grammar_state_free(s);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "grammar: the start rule expands beyond the matcher's limits "
                                "(%d stacks of depth %d)", GRAMMAR_MAX_STACKS, GRAMMAR_MAX_DEPTH);
    }
    *out = s;
    return CANDLE_OK;
}

void candle_grammar_state_free(candle_grammar_state *s) {
    if (!s) return;
    sset_free(&s->cur.own);
    sset_free(&s->tmp[0].own);
    sset_free(&s->tmp[1].own);
    sset_free(&s->work);
    for (uint32_t i = 0; i < s->n_lv; i++) sset_free(&s->lv[i].own);
    free(s->lv);
    free(s->stk);
    free(s->allowed);
    free(s);
}

static bool pos_can_end(const gpos *p) {
    if (p->need) return false;
    for (uint32_t i = 0; i < p->set->n; i++)
        if (p->set->len[i] == 0) return true;
    return false;
}

bool candle_grammar_state_can_end(const candle_grammar_state *s) { return s && pos_can_end(&s->cur); }

bool candle_grammar_state_done(const candle_grammar_state *s) {
    if (!s || s->cur.need) return false;
    for (uint32_t i = 0; i < s->cur.set->n; i++)
        if (s->cur.set->len[i]) return false;
    return true;
}

/* Run bytes from cur through tmp[0]/tmp[1]; *res the final position. */
static bool run_bytes(candle_grammar_state *s, const uint8_t *b, size_t n, gpos **res) {
    gpos *from = &s->cur;
    for (size_t i = 0; i < n; i++) {
        gpos *to = from->set == &s->tmp[0].own ? &s->tmp[1] : &s->tmp[0]; /* may be from */
        if (!step_byte(s, from, b[i], to)) return false;
        from = to;
    }
    *res = from;
    return true;
}

bool candle_grammar_state_accept_bytes(candle_grammar_state *s, const char *bytes, size_t n) {
    if (!s || (!bytes && n)) return false;
    gpos *r;
    if (!run_bytes(s, (const uint8_t *)bytes, n, &r)) return false;
    if (r == &s->cur) return true;
    if (r->set != &s->cur.own) { /* take over the stacks r points at */
        sset *src = (sset *)r->set, t = s->cur.own;
        s->cur.own = *src;
        *src = t;
    }
    s->cur.set = &s->cur.own;
    s->cur.need = r->need;
    s->cur.cp = r->cp;
    s->cur.min = r->min;
    return true;
}

bool candle_grammar_match(const candle_grammar *g, const char *bytes, size_t n) {
    candle_grammar_state *s;
    if (candle_grammar_state_init(&s, g)) return false;
    bool ok = candle_grammar_state_accept_bytes(s, bytes, n) && candle_grammar_state_can_end(s);
    candle_grammar_state_free(s);
    return ok;
}

/* ---- vocabulary ---- */

void candle_grammar_vocab_free(candle_grammar_vocab *v) {
    if (!v) return;
    free(v->blob), free(v->off), free(v->len), free(v->eog), free(v->nodes), free(v->tok_next);
    free(v);
}

int32_t candle_grammar_vocab_n(const candle_grammar_vocab *v) { return v ? v->n_vocab : 0; }

static candle_status vocab_oom(candle_grammar_vocab *v) {
    candle_grammar_vocab_free(v);
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: grammar vocabulary");
}

/* The trie over the pieces already in v. */
static candle_status vocab_build_trie(candle_grammar_vocab **out, candle_grammar_vocab *v) {
    size_t total = 1;
    for (int32_t i = 0; i < v->n_vocab; i++) total += v->len[i];
    v->nodes = malloc(total * sizeof *v->nodes);
    v->tok_next = malloc((size_t)v->n_vocab * sizeof *v->tok_next);
    if (!v->nodes || !v->tok_next) return vocab_oom(v);
    v->nodes[0] = (struct tnode){0, 0, -1, 0};
    v->n_nodes = 1;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        v->tok_next[id] = -1;
        if (v->eog[id] || !v->len[id]) continue;
        if (v->len[id] > v->max_len) v->max_len = v->len[id];
        uint32_t node = 0;
        const uint8_t *p = (const uint8_t *)v->blob + v->off[id];
        for (uint32_t k = 0; k < v->len[id]; k++) {
            uint32_t c = v->nodes[node].child;
            while (c && v->nodes[c].byte != p[k]) c = v->nodes[c].sibling;
            if (!c) {
                c = v->n_nodes++;
                v->nodes[c] = (struct tnode){0, v->nodes[node].child, -1, p[k]};
                v->nodes[node].child = c;
            }
            node = c;
        }
        v->tok_next[id] = v->nodes[node].tok;
        v->nodes[node].tok = id;
    }
    *out = v;
    return CANDLE_OK;
}

static candle_grammar_vocab *vocab_alloc(int32_t n_vocab, size_t blob) {
    candle_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n_vocab = n_vocab;
    v->blob = malloc(blob ? blob : 1);
    v->off = calloc((size_t)n_vocab, sizeof *v->off);
    v->len = calloc((size_t)n_vocab, sizeof *v->len);
    v->eog = calloc((size_t)n_vocab, 1);
    if (!v->blob || !v->off || !v->len || !v->eog) {
        candle_grammar_vocab_free(v);
        return NULL;
    }
    return v;
}

candle_status candle_grammar_vocab_from_pieces(candle_grammar_vocab **out,
                                               const char *const *pieces, const size_t *lens,
                                               int32_t n_vocab, int32_t eog) {
    if (!out || !pieces || !lens || n_vocab <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar vocabulary: bad arguments");
    *out = NULL;
    size_t blob = 0;
    for (int32_t i = 0; i < n_vocab; i++) blob += pieces[i] ? lens[i] : 0;
    candle_grammar_vocab *v = vocab_alloc(n_vocab, blob);
    if (!v) return vocab_oom(NULL);
    size_t at = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        v->off[i] = (uint32_t)at;
        v->len[i] = pieces[i] ? (uint32_t)lens[i] : 0;
        if (v->len[i]) memcpy(v->blob + at, pieces[i], v->len[i]);
        at += v->len[i];
    }
    if (eog >= 0 && eog < n_vocab) v->eog[eog] = 1;
    return vocab_build_trie(out, v);
}

candle_status candle_grammar_vocab_from_tokenizer(candle_grammar_vocab **out,
                                                  const candle_tokenizer *t) {
    if (!out || !t) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar vocabulary: NULL argument");
    *out = NULL;
    int32_t n = candle_tokenizer_n_vocab(t);
    if (n <= 0) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar vocabulary: empty vocabulary");
    size_t cap = 1 << 16, at = 0;
    candle_grammar_vocab *v = vocab_alloc(n, cap);
    if (!v) return vocab_oom(NULL);
    char buf[1024];
    for (int32_t id = 0; id < n; id++) {
        size_t len = 0;
        v->off[id] = (uint32_t)at;
        if (candle_tokenizer_is_eog(t, id)) {
            v->eog[id] = 1;
            continue;
        }
        /* a token longer than buf, or one that does not decode, is never allowed */
        if (candle_tokenizer_token_bytes(t, id, false, buf, sizeof buf, &len) || len > sizeof buf) {
            candle_clear_last_error();
            continue;
        }
        if (at + len > cap) {
            while (at + len > cap) cap *= 2;
            char *nb = realloc(v->blob, cap);
            if (!nb) return vocab_oom(v);
            v->blob = nb;
        }
        memcpy(v->blob + at, buf, len);
        v->len[id] = (uint32_t)len;
        at += len;
    }
    return vocab_build_trie(out, v);
}

/* ---- masking ---- */

bool candle_grammar_token_ok(candle_grammar_state *s, const candle_grammar_vocab *v, int32_t id) {
    if (!s || !v || id < 0 || id >= v->n_vocab) return false;
    if (v->eog[id]) return pos_can_end(&s->cur);
    if (!v->len[id]) return false;
    gpos *r;
    return run_bytes(s, (const uint8_t *)v->blob + v->off[id], v->len[id], &r);
}

static void mark(candle_grammar_state *s, const candle_grammar_vocab *v, uint32_t node,
                 uint32_t depth) {
    for (uint32_t c = v->nodes[node].child; c; c = v->nodes[c].sibling) {
        gpos *to = &s->lv[depth + 1];
        if (!step_byte(s, &s->lv[depth], v->nodes[c].byte, to)) continue;
        for (int32_t t = v->nodes[c].tok; t >= 0; t = v->tok_next[t]) s->allowed[t] = 1;
        if (v->nodes[c].child) mark(s, v, c, depth + 1);
    }
}

candle_status candle_grammar_mask(candle_grammar_state *s, const candle_grammar_vocab *v,
                                  float *logits, int32_t *n_allowed) {
    if (!s || !v || !logits) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar: NULL argument");
    if (s->n_lv < v->max_len + 1) {
        gpos *lv = realloc(s->lv, (v->max_len + 1) * sizeof *lv);
        if (!lv) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: grammar mask");
        memset(lv + s->n_lv, 0, (v->max_len + 1 - s->n_lv) * sizeof *lv);
        s->lv = lv;
        s->n_lv = v->max_len + 1;
    }
    if (s->n_allowed_cap < v->n_vocab) {
        uint8_t *a = realloc(s->allowed, (size_t)v->n_vocab);
        if (!a) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: grammar mask");
        s->allowed = a;
        s->n_allowed_cap = v->n_vocab;
    }
    memset(s->allowed, 0, (size_t)v->n_vocab);
    /* level 0 stands for the current position: its stacks are cur's */
    s->lv[0].set = s->cur.set;
    s->lv[0].need = s->cur.need;
    s->lv[0].cp = s->cur.cp;
    s->lv[0].min = s->cur.min;
    mark(s, v, 0, 0);
    bool end = pos_can_end(&s->cur);
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        if (v->eog[i]) s->allowed[i] = end;
        n += s->allowed[i];
    }
    if (n_allowed) *n_allowed = n;
    if (n == 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "grammar: no token can continue the grammar here (the vocabulary "
                                "cannot spell what it needs next)");
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (!s->allowed[i]) logits[i] = -INFINITY;
    return CANDLE_OK;
}

candle_status candle_grammar_accept_token(candle_grammar_state *s, const candle_grammar_vocab *v,
                                          int32_t id) {
    if (!s || !v || id < 0 || id >= v->n_vocab)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "grammar: token %d out of range", (int)id);
    if (v->eog[id]) {
        if (pos_can_end(&s->cur)) return CANDLE_OK;
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "grammar: end of generation (token %d) before the grammar is complete",
                                (int)id);
    }
    if (v->len[id] && candle_grammar_state_accept_bytes(s, v->blob + v->off[id], v->len[id]))
        return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                            "grammar: token %d does not continue the grammar", (int)id);
}
