/* tokenizer.json pre-tokenizers: each turns the list of splits into a
 * finer one, as the `tokenizers` library's PreTokenizedString::split does
 * (empty splits are dropped). */
#include <stdlib.h>
#include <string.h>

#include "hf-impl.h"
#include "unicode-impl.h"

/* A split's parts: (start, end, is_match) triples. */
typedef struct segs {
    size_t *v;
    size_t n, cap;
} segs;

static bool seg_push(segs *s, size_t a, size_t b, bool m) {
    if (s->n + 3 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 48;
        size_t *nv = tok_tmp_realloc(s->v, s->cap * sizeof *nv, nc * sizeof *nv);
        if (!nv) return false;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = a;
    s->v[s->n++] = b;
    s->v[s->n++] = m;
    return true;
}

static bool is_punct(uint32_t c) { return hf_uc_is_punct(c); }
static bool is_numeric(uint32_t c) { return hf_uc_is_numeric(c); }

/* Each character for which f holds is a match of its own. */
static bool segs_from_pred(const char *s, size_t n, bool (*f)(uint32_t), segs *out) {
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, n - i, &cp);
        if (f(cp)) {
            if (last < i && !seg_push(out, last, i, false)) return false;
            if (!seg_push(out, i, i + k, true)) return false;
            last = i + k;
        }
        i += k;
    }
    return last >= n || seg_push(out, last, n, false);
}

static bool segs_from_pattern(const hf_pattern *p, const char *s, size_t n, segs *out) {
    size_t *m, nm;
    if (!hf_pattern_find(p, s, n, &m, &nm)) return false;
    size_t prev = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < nm; i += 2) {
        if (prev != m[i]) ok = seg_push(out, prev, m[i], false);
        ok = ok && seg_push(out, m[i], m[i + 1], true);
        prev = m[i + 1];
    }
    if (ok && prev != n) ok = seg_push(out, prev, n, false);
    tok_tmp_free(m);
    return ok;
}

/* Merges segments in place by behavior; writes pieces to out. */
static bool emit(const char *s, bool first0, segs *sg, int behavior, bool invert, hf_list *out) {
    size_t *v = sg->v, n = sg->n / 3, k = 0;
    if (invert)
        for (size_t i = 0; i < n; i++) v[3 * i + 2] = !v[3 * i + 2];
    bool prev = false;
    if (behavior == HB_NEXT) {
        /* Right to left: a match joins the split after it. */
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            bool m = v[3 * i + 2];
            if (m && !prev && w < n) v[3 * w] = v[3 * i];
            else {
                w--;
                v[3 * w] = v[3 * i];
                v[3 * w + 1] = v[3 * i + 1];
                v[3 * w + 2] = m;
            }
            prev = m;
        }
        memmove(v, v + 3 * w, (n - w) * 3 * sizeof *v);
        k = n - w;
    } else {
        for (size_t i = 0; i < n; i++) {
            bool m = v[3 * i + 2];
            bool join = k > 0 && ((behavior == HB_PREVIOUS && m && !prev) ||
                                  (behavior == HB_CONTIGUOUS && m == prev));
            if (join) v[3 * (k - 1) + 1] = v[3 * i + 1];
            else if (behavior != HB_REMOVED || !m) {
                v[3 * k] = v[3 * i];
                v[3 * k + 1] = v[3 * i + 1];
                v[3 * k + 2] = m;
                k++;
            }
            prev = m;
        }
    }
    for (size_t i = 0; i < k; i++) {
        size_t a = v[3 * i], b = v[3 * i + 1];
        if (b > a && !hf_list_add(out, s + a, b - a, first0 && a == 0)) return false;
    }
    return true;
}

static bool is_word(uint32_t c) { return hf_uc_is_word(c); }

/* \w+|[^\w\s]+, keeping the matches. */
static bool whitespace(const char *s, size_t n, bool first0, hf_list *out) {
    size_t start = 0;
    int kind = 0; /* 0 space, 1 word, 2 other */
    for (size_t i = 0; i <= n;) {
        uint32_t cp = ' ';
        size_t k = i < n ? tok_utf8_decode(s + i, n - i, &cp) : 1;
        int kk = i == n || tok_unicode_is_space(cp) ? 0 : is_word(cp) ? 1 : 2;
        if (kk != kind) {
            if (kind && !hf_list_add(out, s + start, i - start, first0 && start == 0)) return false;
            start = i;
            kind = kk;
        }
        i += k;
    }
    return true;
}

static bool bytelevel(const hf_pre *p, const char *s, size_t n, bool first0, hf_list *out) {
    hf_str tmp = {0};
    bool ok = true;
    if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
        ok = hf_str_add(&tmp, " ", 1) && hf_str_add(&tmp, s, n);
        s = tmp.p;
        n = tmp.n;
    }
    hf_list parts = {0};
    segs sg = {0};
    if (ok && p->use_regex) {
        hf_pattern pat = {NULL, 0, p->gpt2};
        ok = segs_from_pattern(&pat, s, n, &sg) && emit(s, first0, &sg, HB_ISOLATED, false, &parts);
    } else if (ok && n) {
        ok = hf_list_add(&parts, s, n, first0);
    }
    for (size_t i = 0; ok && i < parts.n; i++) {
        const unsigned char *u = (const unsigned char *)hf_list_at(&parts, i);
        hf_str m = {0};
        for (size_t j = 0; ok && j < parts.len[i]; j++) ok = hf_str_cp(&m, tok_byte_to_cp(u[j]));
        ok = ok && hf_list_add(out, m.p, m.n, parts.first0[i]);
        hf_str_free(&m);
    }
    tok_tmp_free(sg.v);
    hf_list_free(&parts);
    hf_str_free(&tmp);
    return ok;
}

static bool metaspace(const hf_pre *p, const char *s, size_t n, bool first0, hf_list *out) {
    hf_str m = {0};
    size_t rl = strlen(p->repl);
    bool starts = (n && s[0] == ' ') || (n >= rl && !memcmp(s, p->repl, rl)); /* after replacing */
    bool ok = hf_str_add(&m, "", 0);
    if (!starts && (p->prepend == HP_ALWAYS || (p->prepend == HP_FIRST && first0)))
        ok = hf_str_add(&m, p->repl, rl);
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] == ' ' ? hf_str_add(&m, p->repl, rl) : hf_str_add(&m, s + i, 1);
    if (ok && p->split) {
        segs sg = {0};
        hf_pattern pat = {(char *)p->repl, rl, NULL};
        ok = segs_from_pattern(&pat, m.p, m.n, &sg) && emit(m.p, first0, &sg, HB_NEXT, false, out);
        tok_tmp_free(sg.v);
    } else if (ok && m.n) {
        ok = hf_list_add(out, m.p, m.n, first0);
    }
    hf_str_free(&m);
    return ok;
}

static bool one(const hf_pre *p, const char *s, size_t n, bool first0, hf_list *out) {
    segs sg = {0};
    bool ok = true;
    switch (p->type) {
    case HPT_BYTELEVEL: return bytelevel(p, s, n, first0, out);
    case HPT_METASPACE: return metaspace(p, s, n, first0, out);
    case HPT_WHITESPACE: return whitespace(s, n, first0, out);
    case HPT_WHITESPACE_SPLIT:
        ok = segs_from_pred(s, n, tok_unicode_is_space, &sg) && emit(s, first0, &sg, HB_REMOVED, false, out);
        break;
    case HPT_BERT: {
        hf_list tmp = {0};
        ok = segs_from_pred(s, n, tok_unicode_is_space, &sg) && emit(s, first0, &sg, HB_REMOVED, false, &tmp);
        for (size_t i = 0; ok && i < tmp.n; i++) {
            sg.n = 0;
            const char *q = hf_list_at(&tmp, i);
            ok = segs_from_pred(q, tmp.len[i], is_punct, &sg) &&
                 emit(q, tmp.first0[i], &sg, HB_ISOLATED, false, out);
        }
        hf_list_free(&tmp);
        break;
    }
    case HPT_PUNCTUATION:
        ok = segs_from_pred(s, n, is_punct, &sg) && emit(s, first0, &sg, p->behavior, false, out);
        break;
    case HPT_DIGITS:
        ok = segs_from_pred(s, n, is_numeric, &sg) &&
             emit(s, first0, &sg, p->individual_digits ? HB_ISOLATED : HB_CONTIGUOUS, false, out);
        break;
    case HPT_SPLIT:
        ok = segs_from_pattern(&p->pat, s, n, &sg) && emit(s, first0, &sg, p->behavior, p->invert, out);
        break;
    }
    tok_tmp_free(sg.v);
    return ok;
}

bool hf_pretokenize(const hf_pre *p, const char *s, size_t len, bool first0, hf_list *out) {
    hf_list_clear(out);
    if (!p) return !len || hf_list_add(out, s, len, first0);
    if (p->type != HPT_SEQUENCE) return one(p, s, len, first0, out);
    hf_list cur = {0}, next = {0};
    bool ok = !len || hf_list_add(&cur, s, len, first0);
    for (int k = 0; ok && k < p->n_seq; k++) {
        hf_list_clear(&next);
        for (size_t i = 0; ok && i < cur.n; i++)
            ok = one(&p->seq[k], hf_list_at(&cur, i), cur.len[i], cur.first0[i], &next);
        hf_list sw = cur;
        cur = next;
        next = sw;
    }
    for (size_t i = 0; ok && i < cur.n; i++) ok = hf_list_add(out, hf_list_at(&cur, i), cur.len[i], cur.first0[i]);
    hf_list_free(&cur);
    hf_list_free(&next);
    return ok;
}
