/* tokenizer.json normalizers, string to string, as the `tokenizers`
 * library applies them (each over the whole text of one split). */
#include <stdlib.h>
#include <string.h>

#include "hf-impl.h"
#include "unicode-impl.h"

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* BERT's control test: Cc, Cf, Co in the reference's tables (unassigned
 * code points stay), plus NUL and U+FFFD. */
static bool is_control(uint32_t c) { return hf_uc_is_control(c); }

typedef bool (*cp_map)(const hf_norm *n, uint32_t cp, hf_str *out);

static bool map_cps(const hf_norm *n, const char *s, size_t len, hf_str *out, cp_map f) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += tok_utf8_decode(s + i, len - i, &cp);
        if (!f(n, cp, out)) return false;
    }
    return true;
}

static bool bert_clean(const hf_norm *n, uint32_t cp, hf_str *out) {
    (void)n;
    if (is_control(cp)) return true;
    return hf_str_cp(out, tok_unicode_is_space(cp) ? ' ' : cp);
}

static bool bert_chinese(const hf_norm *n, uint32_t cp, hf_str *out) {
    (void)n;
    if (!is_chinese(cp)) return hf_str_cp(out, cp);
    return hf_str_cp(out, ' ') && hf_str_cp(out, cp) && hf_str_cp(out, ' ');
}

static bool drop_mn(const hf_norm *n, uint32_t cp, hf_str *out) {
    (void)n;
    return hf_uc_is_mn(cp) ? true : hf_str_cp(out, cp);
}

/* StripAccents drops every mark (Mn, Mc, Me), unlike BERT's Mn. */
static bool drop_marks(const hf_norm *n, uint32_t cp, hf_str *out) {
    (void)n;
    return hf_uc_is_mark(cp) ? true : hf_str_cp(out, cp);
}

static bool lower(const hf_norm *n, uint32_t cp, hf_str *out) {
    (void)n;
    uint32_t v[3];
    int k = hf_uc_lower(cp, v);
    for (int i = 0; i < k; i++)
        if (!hf_str_cp(out, v[i])) return false;
    return true;
}

/* Runs f from the string in *cur into a fresh one, then swaps. */
static bool step(const hf_norm *n, hf_str *cur, cp_map f) {
    hf_str next = {0};
    if (!hf_str_add(&next, "", 0) || !map_cps(n, cur->p, cur->n, &next, f)) {
        hf_str_free(&next);
        return false;
    }
    hf_str_free(cur);
    *cur = next;
    return true;
}

static bool nf(hf_str *cur, bool compat, bool compose) {
    size_t len;
    char *s = tok_unicode_normalize(cur->p, cur->n, compat, compose, hf_uc_decomp, &len);
    if (!s) return false;
    tok_tmp_free(cur->p);
    cur->p = s;
    cur->n = len;
    cur->cap = len + 1;
    return true;
}

static bool bert(const hf_norm *n, hf_str *cur) {
    if (n->clean_text && !step(n, cur, bert_clean)) return false;
    if (n->chinese && !step(n, cur, bert_chinese)) return false;
    if (n->strip_accents && (!nf(cur, false, false) || !step(n, cur, drop_mn))) return false;
    return !n->lowercase || step(n, cur, lower);
}

static bool replace(const hf_norm *n, hf_str *cur) {
    size_t *m, nm;
    if (!hf_pattern_find(&n->pat, cur->p, cur->n, &m, &nm)) return false;
    hf_str next = {0};
    bool ok = hf_str_add(&next, "", 0);
    size_t pos = 0;
    for (size_t i = 0; ok && i < nm; i += 2) {
        ok = hf_str_add(&next, cur->p + pos, m[i] - pos) && hf_str_add(&next, n->content, n->content_len);
        pos = m[i + 1];
    }
    ok = ok && hf_str_add(&next, cur->p + pos, cur->n - pos);
    tok_tmp_free(m);
    if (!ok) {
        hf_str_free(&next);
        return false;
    }
    hf_str_free(cur);
    *cur = next;
    return true;
}

static bool strip(const hf_norm *n, hf_str *cur) {
    size_t a = 0, b = cur->n;
    while (n->left && a < b) {
        uint32_t cp;
        size_t k = tok_utf8_decode(cur->p + a, b - a, &cp);
        if (!tok_unicode_is_space(cp)) break;
        a += k;
    }
    while (n->right && b > a) {
        size_t k = 1;
        while (k < b - a && (cur->p[b - k] & 0xC0) == 0x80) k++;
        uint32_t cp;
        tok_utf8_decode(cur->p + b - k, k, &cp);
        if (!tok_unicode_is_space(cp)) break;
        b -= k;
    }
    memmove(cur->p, cur->p + a, b - a);
    cur->n = b - a;
    cur->p[cur->n] = 0;
    return true;
}

static bool prepend(const hf_norm *n, hf_str *cur) {
    if (!cur->n) return true;
    hf_str next = {0};
    if (!hf_str_add(&next, n->content, n->content_len) || !hf_str_add(&next, cur->p, cur->n)) {
        hf_str_free(&next);
        return false;
    }
    hf_str_free(cur);
    *cur = next;
    return true;
}

bool hf_precompiled_normalize(const hf_norm *n, hf_str *cur);

static bool apply(const hf_norm *n, hf_str *cur) {
    switch (n->type) {
    case HN_SEQUENCE:
        for (int i = 0; i < n->n_seq; i++)
            if (!apply(&n->seq[i], cur)) return false;
        return true;
    case HN_NFC: return nf(cur, false, true);
    case HN_NFD: return nf(cur, false, false);
    case HN_NFKC: return nf(cur, true, true);
    case HN_NFKD: return nf(cur, true, false);
    case HN_LOWERCASE: return step(n, cur, lower);
    case HN_STRIP_ACCENTS: return step(n, cur, drop_marks);
    case HN_STRIP: return strip(n, cur);
    case HN_BERT: return bert(n, cur);
    case HN_REPLACE: return replace(n, cur);
    case HN_PREPEND: return prepend(n, cur);
    case HN_PRECOMPILED: return hf_precompiled_normalize(n, cur);
    }
    return true;
}

bool hf_normalize(const hf_norm *n, const char *s, size_t len, hf_str *out) {
    out->n = 0;
    if (!hf_str_add(out, s, len)) return false;
    return !n || apply(n, out);
}
