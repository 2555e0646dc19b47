/* Strings, string lists, pattern search and UTF-8 repair shared by the
 * tokenizer.json pipeline stages. */
#include <stdlib.h>
#include <string.h>

#include "hf-impl.h"
#include "unicode-impl.h"

bool hf_str_reserve(hf_str *s, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        while (nc < s->n + n + 1) nc *= 2;
        char *np = tok_tmp_realloc(s->p, s->cap, nc);
        if (!np) return false;
        s->p = np;
        s->cap = nc;
    }
    return true;
}

bool hf_str_add(hf_str *s, const char *p, size_t n) {
    if (!hf_str_reserve(s, n)) return false;
    if (n) memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
    return true;
}

bool hf_str_cp(hf_str *s, uint32_t cp) {
    char b[4];
    return hf_str_add(s, b, tok_utf8_encode(cp, b));
}

void hf_str_free(hf_str *s) {
    tok_tmp_free(s->p);
    memset(s, 0, sizeof *s);
}

bool hf_list_add(hf_list *l, const char *p, size_t n, bool first0) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        size_t *no = tok_tmp_realloc(l->off, l->cap * sizeof *no, nc * sizeof *no);
        if (no) l->off = no;
        size_t *nl = tok_tmp_realloc(l->len, l->cap * sizeof *nl, nc * sizeof *nl);
        if (nl) l->len = nl;
        bool *nf = tok_tmp_realloc(l->first0, l->cap * sizeof *nf, nc * sizeof *nf);
        if (nf) l->first0 = nf;
        if (!no || !nl || !nf) return false;
        l->cap = nc;
    }
    /* p may point into l->buf, which growing moves. */
    size_t at = l->buf.n;
    bool inside = l->buf.p && p >= l->buf.p && p < l->buf.p + l->buf.n;
    size_t rel = inside ? (size_t)(p - l->buf.p) : 0;
    if (!hf_str_reserve(&l->buf, n)) return false;
    if (inside) p = l->buf.p + rel;
    if (n) memcpy(l->buf.p + at, p, n);
    l->buf.n += n;
    l->buf.p[l->buf.n] = 0;
    l->off[l->n] = at;
    l->len[l->n] = n;
    l->first0[l->n] = first0;
    l->n++;
    return true;
}

void hf_list_clear(hf_list *l) {
    l->n = 0;
    l->buf.n = 0;
}

void hf_list_free(hf_list *l) {
    hf_str_free(&l->buf);
    tok_tmp_free(l->off);
    tok_tmp_free(l->len);
    tok_tmp_free(l->first0);
    memset(l, 0, sizeof *l);
}

static bool pair_push(size_t **v, size_t *n, size_t *cap, size_t a, size_t b) {
    if (*n + 2 > *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        size_t *nv = tok_tmp_realloc(*v, *cap * sizeof *nv, nc * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = a;
    (*v)[(*n)++] = b;
    return true;
}

static bool regex_find(const tok_regex *re, const char *s, size_t n, size_t **pairs, size_t *np,
                       size_t *cap) {
    uint32_t *cps = tok_tmp_alloc((n + 1) * sizeof *cps);
    size_t *offs = tok_tmp_alloc((n + 1) * sizeof *offs);
    bool ok = cps && offs;
    int64_t nc = 0;
    for (size_t i = 0; ok && i < n; nc++) {
        offs[nc] = i;
        i += tok_utf8_decode(s + i, n - i, &cps[nc]);
    }
    if (ok) offs[nc] = n;
    tok_regex_stack st = {0};
    tok_regex_begin(&st);
    for (int64_t pos = 0; ok && pos < nc;) {
        int64_t end = tok_regex_match_at(re, cps, nc, pos, &st);
        if (end == -2) ok = false;
        else if (end > pos) {
            ok = pair_push(pairs, np, cap, offs[pos], offs[end]);
            pos = end;
        } else pos++;
    }
    tok_regex_stack_free(&st);
    tok_tmp_free(cps);
    tok_tmp_free(offs);
    return ok;
}

bool hf_pattern_find(const hf_pattern *p, const char *s, size_t n, size_t **pairs, size_t *n_pairs) {
    size_t cap = 0;
    *pairs = NULL;
    *n_pairs = 0;
    if (p->re) return regex_find(p->re, s, n, pairs, n_pairs, &cap);
    if (!p->len) return true;
    for (size_t pos = 0; pos + p->len <= n;) {
        const char *hit = memmem(s + pos, n - pos, p->str, p->len);
        if (!hit) break;
        size_t h = (size_t)(hit - s);
        if (!pair_push(pairs, n_pairs, &cap, h, h + p->len)) return false;
        pos = h + p->len;
    }
    return true;
}

/* Length of the valid prefix of a UTF-8 sequence at s (Unicode's "maximal
 * subpart"): 0 when s[0] cannot start one. */
static size_t valid_prefix(const unsigned char *s, size_t n, size_t *need) {
    unsigned char c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) *need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        *need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        *need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    size_t k = 1;
    if (k < n && s[k] >= lo && s[k] <= hi) k++;
    else return k;
    while (k < *need && k < n && (s[k] & 0xC0) == 0x80) k++;
    return k;
}

bool hf_utf8_lossy(const char *s, size_t n, hf_str *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t need = 0, k = valid_prefix(u + i, n - i, &need);
        if (k && k == need) {
            i += k;
            continue;
        }
        if (!hf_str_add(out, s + run, i - run) || !hf_str_add(out, "\xef\xbf\xbd", 3)) return false;
        i += k ? k : 1;
        run = i;
    }
    return hf_str_add(out, s + run, n - run);
}

const char hf_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
