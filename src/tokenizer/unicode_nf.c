/* Unicode normalization forms NFD, NFKD, NFC, NFKC (UAX #15): full
 * decomposition from the generated tables (Hangul by algorithm), canonical
 * ordering of combining marks, then canonical composition. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer-impl.h"
#include "unicode-impl.h"

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7 };
enum { LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static const unicode_decomp *find_decomp(uint32_t cp, bool compat) {
    const unicode_decomp *t = compat ? tok_unicode_compat_decomp : tok_unicode_canon_decomp;
    int lo = 0, hi = (compat ? tok_unicode_n_compat_decomp : tok_unicode_n_canon_decomp) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t[mid].cp == cp) return &t[mid];
        if (t[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static int ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = tok_unicode_n_ccc_ranges - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tok_unicode_ccc_ranges[mid].start <= cp) lo = mid;
        else hi = mid - 1;
    }
    return tok_unicode_ccc_ranges[lo].cat;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = tok_unicode_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const unicode_comp *c = &tok_unicode_comp[mid];
        if (c->first == a && c->second == b) return c->composite;
        if (c->first < a || (c->first == a && c->second < b)) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

typedef struct cpbuf {
    uint32_t *v;
    size_t n, cap;
} cpbuf;

static bool cp_push(cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        uint32_t *nv = tok_tmp_realloc(b->v, b->cap * sizeof *nv, nc * sizeof *nv);
        if (!nv) return false;
        b->v = nv;
        b->cap = nc;
    }
    b->v[b->n++] = cp;
    return true;
}

typedef int (*decomp_override)(uint32_t cp, bool compat, uint32_t *out);

static bool decompose(cpbuf *b, uint32_t cp, bool compat, decomp_override ov) {
    uint32_t seq[4];
    int k = ov ? ov(cp, compat, seq) : -1;
    for (int i = 0; i < k; i++)
        if (!cp_push(b, seq[i])) return false;
    if (k >= 0) return true;
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        if (!cp_push(b, LBASE + s / NCOUNT) || !cp_push(b, VBASE + (s % NCOUNT) / TCOUNT)) return false;
        return t ? cp_push(b, TBASE + t) : true;
    }
    const unicode_decomp *d = find_decomp(cp, compat);
    if (!d) return cp_push(b, cp);
    for (uint32_t i = 0; i < d->n; i++)
        if (!cp_push(b, tok_unicode_decomp_pool[d->off + i])) return false;
    return true;
}

/* Canonical ordering: a stable sort of each run of non-starters by class. */
static void reorder(cpbuf *b) {
    for (size_t i = 1; i < b->n; i++) {
        int c = ccc(b->v[i]);
        if (!c) continue;
        for (size_t j = i; j > 0; j--) {
            int p = ccc(b->v[j - 1]);
            if (!p || p <= c) break;
            uint32_t tmp = b->v[j];
            b->v[j] = b->v[j - 1];
            b->v[j - 1] = tmp;
        }
    }
}

/* Canonical composition: each character joins the last starter unless a
 * character of the same or higher class stands between them (blocked). */
static void compose(cpbuf *b) {
    if (!b->n) return;
    size_t starter = 0, out = 1;
    int last_cc = ccc(b->v[0]) ? 256 : 0; /* 256: nothing composes yet */
    for (size_t i = 1; i < b->n; i++) {
        uint32_t cp = b->v[i];
        int cc = ccc(cp);
        uint32_t comp = (last_cc < cc || last_cc == 0) ? compose_pair(b->v[starter], cp) : 0;
        if (comp) {
            b->v[starter] = comp;
            continue;
        }
        if (cc == 0) starter = out;
        last_cc = cc;
        b->v[out++] = cp;
    }
    b->n = out;
}

char *tok_unicode_normalize(const char *s, size_t n, bool compat, bool compose_, decomp_override ov,
                            size_t *out_len) {
    cpbuf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        uint32_t cp;
        i += tok_utf8_decode(s + i, n - i, &cp);
        ok = decompose(&b, cp, compat, ov);
    }
    char *out = NULL;
    if (ok) {
        reorder(&b);
        if (compose_) compose(&b);
        out = tok_tmp_alloc(b.n * 4 + 1);
    }
    if (out) {
        size_t k = 0;
        for (size_t i = 0; i < b.n; i++) k += tok_utf8_encode(b.v[i], out + k);
        out[k] = 0;
        *out_len = k;
    }
    tok_tmp_free(b.v);
    return out;
}

int tok_unicode_lower_full(uint32_t cp, uint32_t *out) {
    if (cp == 0x130) { /* the one code point whose lowercase is two */
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = tok_unicode_to_lower(cp);
    return 1;
}

