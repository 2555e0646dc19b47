/* Lookups in the character tables taken from the `tokenizers` library
 * (hf_unicode_data.c): which Unicode version a property follows differs
 * from component to component there, so each has its own table. */
#include "hf-impl.h"
#include "unicode-impl.h"

extern const unicode_range hf_uc_gc_ranges[];
extern const int hf_uc_n_gc_ranges;
extern const char hf_uc_gc_names[];
extern const unsigned char hf_uc_gc_major[];
#define TABLE(name)                          \
    extern const unicode_pair hf_uc_##name[]; \
    extern const int hf_uc_n_##name;
TABLE(word)
TABLE(punct)
TABLE(numeric)
TABLE(marks)
TABLE(mn)
TABLE(control)
#undef TABLE
extern const hf_uc_map hf_uc_lower_map[];
extern const int hf_uc_n_lower_map;
extern const hf_uc_map hf_uc_canon[], hf_uc_compat[];
extern const int hf_uc_n_canon, hf_uc_n_compat;

static bool in_ranges(const unicode_pair *p, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < p[mid].from) hi = mid - 1;
        else if (cp > p[mid].to) lo = mid + 1;
        else return true;
    }
    return false;
}

static const hf_uc_map *find_map(const hf_uc_map *m, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (m[mid].cp == cp) return &m[mid];
        if (m[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

int hf_uc_gc(uint32_t cp) {
    int lo = 0, hi = hf_uc_n_gc_ranges - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (hf_uc_gc_ranges[mid].start <= cp) lo = mid;
        else hi = mid - 1;
    }
    return hf_uc_gc_ranges[lo].cat;
}

int hf_uc_category(uint32_t cp) { return hf_uc_gc_major[hf_uc_gc(cp)]; }

bool hf_uc_is_word(uint32_t cp) { return in_ranges(hf_uc_word, hf_uc_n_word, cp); }
bool hf_uc_is_punct(uint32_t cp) { return in_ranges(hf_uc_punct, hf_uc_n_punct, cp); }
bool hf_uc_is_numeric(uint32_t cp) { return in_ranges(hf_uc_numeric, hf_uc_n_numeric, cp); }
bool hf_uc_is_mark(uint32_t cp) { return in_ranges(hf_uc_marks, hf_uc_n_marks, cp); }
bool hf_uc_is_mn(uint32_t cp) { return in_ranges(hf_uc_mn, hf_uc_n_mn, cp); }
bool hf_uc_is_control(uint32_t cp) { return in_ranges(hf_uc_control, hf_uc_n_control, cp); }

int hf_uc_lower(uint32_t cp, uint32_t *out) {
    const hf_uc_map *m = find_map(hf_uc_lower_map, hf_uc_n_lower_map, cp);
    if (!m) return tok_unicode_lower_full(cp, out);
    for (uint32_t i = 0; i < m->n; i++) out[i] = m->seq[i];
    return (int)m->n;
}

int hf_uc_decomp(uint32_t cp, bool compat, uint32_t *out) {
    const hf_uc_map *m = compat ? find_map(hf_uc_compat, hf_uc_n_compat, cp) : find_map(hf_uc_canon, hf_uc_n_canon, cp);
    if (!m) return -1;
    for (uint32_t i = 0; i < m->n; i++) out[i] = m->seq[i];
    return (int)m->n;
}

candle_status hf_regex_compile(const char *pattern, tok_regex **out) {
    return tok_regex_compile_cat(pattern, hf_uc_category, hf_uc_gc, hf_uc_gc_names, out);
}
