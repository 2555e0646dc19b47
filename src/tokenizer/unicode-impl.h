/* Unicode support for the tokenizers: UTF-8 decoding that never fails,
 * general categories, White_Space, lowercasing and accent stripping. */
#ifndef CANDLE_TOKENIZER_UNICODE_IMPL_H
#define CANDLE_TOKENIZER_UNICODE_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Major general category, as bits so a regex class can test a set. */
enum {
    UCAT_L = 1 << 0, /* letters */
    UCAT_M = 1 << 1, /* marks */
    UCAT_N = 1 << 2, /* numbers */
    UCAT_P = 1 << 3, /* punctuation */
    UCAT_S = 1 << 4, /* symbols */
    UCAT_Z = 1 << 5, /* separators */
    UCAT_C = 1 << 6, /* other: controls, unassigned, surrogates */
};

typedef struct unicode_range {
    uint32_t start; /* the category holds up to the next range's start */
    uint8_t cat;
} unicode_range;

typedef struct unicode_pair {
    uint32_t from, to;
} unicode_pair;

extern const unicode_range tok_unicode_cat_ranges[];
extern const int tok_unicode_n_cat_ranges;
extern const unicode_pair tok_unicode_lower_pairs[];
extern const int tok_unicode_n_lower_pairs;
extern const unicode_pair tok_unicode_strip_pairs[];
extern const int tok_unicode_n_strip_pairs;
extern const unicode_pair tok_unicode_mn_pairs[]; /* ranges from..to of category Mn */
extern const int tok_unicode_n_mn_pairs;

/* Length of the UTF-8 sequence starting at s[0] (1..4). A malformed or
 * truncated sequence counts as 1 byte, decoded as U+FFFD, so every byte of
 * the input stays covered exactly once. */
size_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Bytes written (1..4) into out. */
size_t tok_utf8_encode(uint32_t cp, char *out);
/* Length of the longest prefix of s[0..n) that ends on a whole character;
 * the rest is an incomplete (not yet invalid) trailing sequence. */
size_t tok_utf8_complete_prefix(const char *s, size_t n);

int tok_unicode_category(uint32_t cp);
bool tok_unicode_is_space(uint32_t cp);
uint32_t tok_unicode_to_lower(uint32_t cp);
/* The base character of an accented one (é -> e), else cp. */
uint32_t tok_unicode_strip_accent(uint32_t cp);
/* Nonspacing mark (Mn): what accent stripping removes. */
bool tok_unicode_is_mn(uint32_t cp);

/* Normalization data (unicode_norm.c, scripts/gen_unicode_norm.py). */
typedef struct unicode_decomp {
    uint32_t cp, off, n; /* full decomposition: pool[off..off+n) */
} unicode_decomp;
typedef struct unicode_comp {
    uint32_t first, second, composite;
} unicode_comp;
extern const uint32_t tok_unicode_decomp_pool[];
extern const unicode_decomp tok_unicode_canon_decomp[];
extern const int tok_unicode_n_canon_decomp;
extern const unicode_decomp tok_unicode_compat_decomp[];
extern const int tok_unicode_n_compat_decomp;
extern const unicode_range tok_unicode_ccc_ranges[]; /* cat holds the combining class */
extern const int tok_unicode_n_ccc_ranges;
extern const unicode_comp tok_unicode_comp[];
extern const int tok_unicode_n_comp;

/* Unicode normalization forms of s[0..n) (any bytes: invalid sequences
 * read as U+FFFD) into a malloc'd NUL-terminated string; NULL when out of
 * memory. compat: NFK*; compose: NF*C. override (may be NULL) gives another
 * table's full decomposition of cp (its length), or -1 to use ours. */
char *tok_unicode_normalize(const char *s, size_t n, bool compat, bool compose,
                           int (*override)(uint32_t cp, bool compat, uint32_t *out), size_t *out_len);
/* Full lowercase of one code point into out (1..3 code points). */
int tok_unicode_lower_full(uint32_t cp, uint32_t *out);

#endif
