/* The Precompiled normalizer: SentencePiece's precompiled_charsmap, a
 * Darts double-array trie over UTF-8 keys whose values index a blob of
 * NUL-terminated replacements. As the `tokenizers` library applies it
 * (spm_precompiled): text is walked by extended grapheme cluster; a
 * cluster shorter than 6 bytes whose bytes begin with a key is replaced
 * whole by the replacement of the shortest such key, otherwise each
 * character is replaced by its own key's replacement or kept. */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "unicode-impl.h"

static int b64(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static size_t b64_decode(const char *s, size_t n, unsigned char *out, bool *ok) {
    size_t k = 0, bits = 0;
    uint32_t acc = 0;
    *ok = true;
    while (n && s[n - 1] == '=') n--;
    for (size_t i = 0; i < n; i++) {
        int v = b64((unsigned char)s[i]);
        if (v < 0) {
            *ok = false;
            return 0;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    return k;
}

candle_status hf_precompiled_load(hf_norm *n, const char *text, size_t len, const char *file,
                                  const char *path) {
    unsigned char *blob = malloc(len / 4 * 3 + 4);
    if (!blob) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: precompiled_charsmap");
    bool ok;
    size_t bl = b64_decode(text, len, blob, &ok);
    uint32_t trie_bytes = bl >= 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                                        (uint32_t)blob[3] << 24
                                  : 0;
    if (!ok || bl < 4 || trie_bytes % 4 || trie_bytes > bl - 4) {
        free(blob);
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s.precompiled_charsmap: %s", file, path,
                                ok ? "bad trie size" : "invalid base64");
    }
    /* The units are little-endian u32s: converted once, so the lookups
     * need neither alignment nor byte order care. */
    uint32_t *units = malloc(trie_bytes ? trie_bytes : 4);
    if (!units) {
        free(blob);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: precompiled_charsmap");
    }
    for (uint32_t i = 0; i < trie_bytes / 4; i++) {
        const unsigned char *u = blob + 4 + 4 * i;
        units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    n->blob = blob;
    n->trie = units;
    n->n_trie = trie_bytes / 4;
    n->normalized = (const char *)blob + 4 + trie_bytes;
    n->n_normalized = bl - 4 - trie_bytes;
    return CANDLE_OK;
}

/* Replacement of the shortest key that s begins with, or NULL. */
static const char *transform(const hf_norm *n, const char *s, size_t len, size_t *out_len) {
    if (!n->n_trie) return NULL;
    uint32_t unit = n->trie[0];
    size_t pos = (unit >> 10) << ((unit & (1u << 9)) >> 6);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!c) return NULL;
        pos ^= c;
        if (pos >= n->n_trie) return NULL;
        unit = n->trie[pos];
        if ((unit & ((1u << 31) | 0xFF)) != c) return NULL;
        pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
        if ((unit >> 8) & 1) {
            if (pos >= n->n_trie) return NULL;
            size_t v = n->trie[pos] & ((1u << 31) - 1);
            if (v >= n->n_normalized) return NULL;
            const char *r = n->normalized + v;
            const char *end = memchr(r, 0, n->n_normalized - v);
            *out_len = end ? (size_t)(end - r) : n->n_normalized - v;
            return r;
        }
    }
    return NULL;
}

/* ---- extended grapheme clusters (UAX #29), from general categories ---- */

enum { G_OTHER, G_CR, G_LF, G_CONTROL, G_EXTEND, G_ZWJ, G_SPACING, G_L, G_V, G_T, G_LV, G_LVT, G_RI, G_PICT };

static bool is_pict(uint32_t c) {
    return c == 0xA9 || c == 0xAE || c == 0x203C || c == 0x2049 || c == 0x2122 || c == 0x2139 ||
           (c >= 0x2194 && c <= 0x21AA) || (c >= 0x2300 && c <= 0x23FF) || (c >= 0x25A0 && c <= 0x27BF) ||
           (c >= 0x2B00 && c <= 0x2BFF) || c == 0x3030 || c == 0x303D || c == 0x3297 || c == 0x3299 ||
           (c >= 0x1F000 && c <= 0x1F1E5) || (c >= 0x1F200 && c <= 0x1F3FA) || (c >= 0x1F400 && c <= 0x1FAFF);
}

static int gcb(uint32_t c) {
    if (c == '\r') return G_CR;
    if (c == '\n') return G_LF;
    if (c == 0x200D) return G_ZWJ;
    if (c == 0x200C || (c >= 0xFF9E && c <= 0xFF9F) || (c >= 0x1F3FB && c <= 0x1F3FF) ||
        (c >= 0xE0020 && c <= 0xE007F))
        return G_EXTEND;
    if (c >= 0x1F1E6 && c <= 0x1F1FF) return G_RI;
    if ((c >= 0x1100 && c <= 0x115F) || (c >= 0xA960 && c <= 0xA97F)) return G_L;
    if ((c >= 0x1160 && c <= 0x11A7) || (c >= 0xD7B0 && c <= 0xD7C6)) return G_V;
    if ((c >= 0x11A8 && c <= 0x11FF) || (c >= 0xD7CB && c <= 0xD7FB)) return G_T;
    if (c >= 0xAC00 && c <= 0xD7A3) return (c - 0xAC00) % 28 ? G_LVT : G_LV;
    if (is_pict(c)) return G_PICT;
    int cat = tok_unicode_category(c);
    if (cat == UCAT_M) return tok_unicode_is_mn(c) || (c >= 0x20DD && c <= 0x20E4) ? G_EXTEND : G_SPACING;
    /* Control: Cc, Cf (BERT's control set without private use), Zl, Zp. */
    bool private_use = (c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000;
    if (c == 0x2028 || c == 0x2029 || (hf_uc_is_control(c) && !private_use && c != 0xFFFD)) return G_CONTROL;
    return G_OTHER;
}

static bool no_break(int a, int b, bool pict_zwj, int ri_run) {
    if (a == G_CR && b == G_LF) return true;
    if (a == G_CR || a == G_LF || a == G_CONTROL || b == G_CR || b == G_LF || b == G_CONTROL) return false;
    if (a == G_L && (b == G_L || b == G_V || b == G_LV || b == G_LVT)) return true;
    if ((a == G_LV || a == G_V) && (b == G_V || b == G_T)) return true;
    if ((a == G_LVT || a == G_T) && b == G_T) return true;
    if (b == G_EXTEND || b == G_ZWJ || b == G_SPACING) return true;
    if (a == G_ZWJ && b == G_PICT && pict_zwj) return true;
    if (a == G_RI && b == G_RI) return ri_run % 2 == 1;
    return false;
}

/* End of the cluster that starts at s[0]. */
static size_t grapheme(const char *s, size_t n) {
    uint32_t cp;
    size_t i = tok_utf8_decode(s, n, &cp);
    int prev = gcb(cp);
    bool in_pict = prev == G_PICT;
    int ri = prev == G_RI;
    while (i < n) {
        size_t k = tok_utf8_decode(s + i, n - i, &cp);
        int cur = gcb(cp);
        if (!no_break(prev, cur, in_pict, ri)) break;
        /* ExtPict Extend* ZWJ: the emoji sequence goes on. */
        if (cur != G_EXTEND && cur != G_ZWJ) in_pict = cur == G_PICT;
        ri = cur == G_RI ? ri + 1 : 0;
        prev = cur;
        i += k;
    }
    return i;
}

bool hf_precompiled_normalize(const hf_norm *n, hf_str *cur) {
    hf_str out = {0};
    bool ok = hf_str_add(&out, "", 0);
    const char *s = cur->p;
    for (size_t i = 0; ok && i < cur->n;) {
        size_t g = grapheme(s + i, cur->n - i), rl;
        const char *r = g < 6 ? transform(n, s + i, g, &rl) : NULL;
        if (r) {
            ok = hf_str_add(&out, r, rl);
            i += g;
            continue;
        }
        for (size_t j = i; ok && j < i + g;) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + j, i + g - j, &cp);
            r = transform(n, s + j, k, &rl);
            ok = r ? hf_str_add(&out, r, rl) : hf_str_add(&out, s + j, k);
            j += k;
        }
        i += g;
    }
    if (ok) {
        hf_str_free(cur);
        *cur = out;
    } else hf_str_free(&out);
    return ok;
}
