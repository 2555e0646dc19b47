/* UTF-8 and Unicode property lookups over the generated tables. */
#include "unicode-impl.h"

size_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else goto bad;
    if (len > n) goto bad;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFD;
    return 1;
}

size_t tok_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Expected length of a sequence from its lead byte; 0 for a byte that
 * cannot start one. */
static size_t utf8_lead_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t tok_utf8_complete_prefix(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    /* Only the last 3 bytes can belong to an unfinished character. */
    size_t start = n > 3 ? n - 3 : 0;
    for (size_t i = n; i > start; i--) {
        size_t need = utf8_lead_len(u[i - 1]);
        if ((u[i - 1] & 0xC0) == 0x80) continue;
        if (need > n - (i - 1)) {
            for (size_t k = i; k < n; k++)
                if ((u[k] & 0xC0) != 0x80) return n; /* malformed, not incomplete */
            return i - 1;
        }
        return n;
    }
    return n;
}

int tok_unicode_category(uint32_t cp) {
    int lo = 0, hi = tok_unicode_n_cat_ranges - 1;
    while (lo < hi) { /* last range with start <= cp */
        int mid = (lo + hi + 1) / 2;
        if (tok_unicode_cat_ranges[mid].start <= cp) lo = mid;
        else hi = mid - 1;
    }
    return tok_unicode_cat_ranges[lo].cat;
}

bool tok_unicode_is_space(uint32_t cp) {
    /* The White_Space property, which is what regex \s means in the
     * reference tokenizers. */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static uint32_t pair_lookup(const unicode_pair *p, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p[mid].from == cp) return p[mid].to;
        if (p[mid].from < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return cp;
}

uint32_t tok_unicode_to_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return pair_lookup(tok_unicode_lower_pairs, tok_unicode_n_lower_pairs, cp);
}

uint32_t tok_unicode_strip_accent(uint32_t cp) {
    if (cp < 0xC0) return cp;
    return pair_lookup(tok_unicode_strip_pairs, tok_unicode_n_strip_pairs, cp);
}

bool tok_unicode_is_mn(uint32_t cp) {
    if (cp < 0x300) return false;
    int lo = 0, hi = tok_unicode_n_mn_pairs - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tok_unicode_mn_pairs[mid].from) hi = mid - 1;
        else if (cp > tok_unicode_mn_pairs[mid].to) lo = mid + 1;
        else return true;
    }
    return false;
}
