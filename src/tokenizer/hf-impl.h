/* Hugging Face tokenizer.json pipelines (the `tokenizers` library's
 * components): added tokens, normalizer, pre-tokenizer, model (BPE,
 * WordPiece, Unigram), post-processor and decoder, hung off a
 * candle_tokenizer of kind TOK_HF. */
#ifndef CANDLE_TOKENIZER_HF_IMPL_H
#define CANDLE_TOKENIZER_HF_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer-impl.h"

/* A growable byte string. */
typedef struct hf_str {
    char *p;
    size_t n, cap;
} hf_str;

bool hf_str_reserve(hf_str *s, size_t n); /* room for n more bytes and a NUL */
bool hf_str_add(hf_str *s, const char *p, size_t n);
bool hf_str_cp(hf_str *s, uint32_t cp);
void hf_str_free(hf_str *s);

/* A list of strings in one buffer: the pre-tokenizer's splits, the
 * decoder's tokens. first0 marks a piece that starts the original text
 * (Metaspace prepend_scheme "first"). */
typedef struct hf_list {
    hf_str buf;
    size_t *off, *len;
    bool *first0;
    size_t n, cap;
} hf_list;

bool hf_list_add(hf_list *l, const char *p, size_t n, bool first0);
void hf_list_clear(hf_list *l);
void hf_list_free(hf_list *l);
static inline const char *hf_list_at(const hf_list *l, size_t i) { return l->buf.p + l->off[i]; }

/* Pattern of Split, Replace: a literal string or a regex. */
typedef struct hf_pattern {
    char *str;
    size_t len;
    tok_regex *re; /* NULL for a literal */
} hf_pattern;

/* Matches of p in s[0..n) as (start, end) byte pairs, leftmost first and
 * non-overlapping; empty matches are skipped. */
bool hf_pattern_find(const hf_pattern *p, const char *s, size_t n, size_t **pairs, size_t *n_pairs);

enum hf_norm_type {
    HN_SEQUENCE, HN_NFC, HN_NFD, HN_NFKC, HN_NFKD, HN_LOWERCASE, HN_STRIP_ACCENTS, HN_STRIP,
    HN_BERT, HN_REPLACE, HN_PREPEND, HN_PRECOMPILED,
};

typedef struct hf_norm {
    int type;
    bool clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
    bool left, right;                                   /* Strip */
    hf_pattern pat;                                     /* Replace */
    char *content;                                      /* Replace, Prepend */
    size_t content_len;
    const uint32_t *trie; /* Precompiled: double-array units */
    size_t n_trie;
    const char *normalized; /* Precompiled: NUL-separated replacements */
    size_t n_normalized;
    unsigned char *blob;    /* Precompiled: the decoded charsmap */
    struct hf_norm *seq;
    int n_seq;
} hf_norm;

enum hf_behavior { HB_REMOVED, HB_ISOLATED, HB_PREVIOUS, HB_NEXT, HB_CONTIGUOUS };
enum hf_prepend { HP_ALWAYS, HP_FIRST, HP_NEVER };

enum hf_pre_type {
    HPT_SEQUENCE, HPT_BYTELEVEL, HPT_WHITESPACE, HPT_WHITESPACE_SPLIT, HPT_BERT, HPT_METASPACE,
    HPT_SPLIT, HPT_DIGITS, HPT_PUNCTUATION,
};

typedef struct hf_pre {
    int type;
    bool add_prefix_space, use_regex; /* ByteLevel */
    tok_regex *gpt2;                  /* ByteLevel with use_regex */
    char repl[8];                     /* Metaspace replacement (UTF-8) */
    uint32_t repl_cp;
    int prepend, behavior;
    bool split, invert, individual_digits;
    hf_pattern pat;
    struct hf_pre *seq;
    int n_seq;
} hf_pre;

enum hf_model_type { HM_BPE, HM_WORDPIECE, HM_UNIGRAM };

/* (left id, right id) -> (rank, merged id), open addressing. */
typedef struct hf_merge_map {
    uint64_t *keys; /* (left << 32 | right) + 1, 0 = empty */
    int32_t *rank, *id;
    uint64_t cap;
} hf_merge_map;

typedef struct hf_model {
    int type;
    int32_t unk; /* -1 if none */
    bool byte_fallback, fuse_unk, ignore_merges;
    char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix */
    size_t prefix_len, suffix_len;
    int64_t max_chars;    /* WordPiece max_input_chars_per_word */
    hf_merge_map merges;
    double *scores;       /* Unigram: [n_vocab] */
    double min_score;
    size_t max_piece_len; /* Unigram: longest piece in bytes */
} hf_model;

typedef struct hf_tmpl_item {
    bool special;  /* else a sequence */
    bool seq_b;    /* sequence B */
    int32_t type_id;
    int32_t *ids;  /* special: its ids */
    int n_ids;
} hf_tmpl_item;

enum hf_post_type { HPP_SEQUENCE, HPP_TEMPLATE, HPP_BERT, HPP_ROBERTA, HPP_BYTELEVEL };

typedef struct hf_post {
    int type;
    hf_tmpl_item *single, *pair;
    int n_single, n_pair;
    struct hf_post *seq;
    int n_seq;
} hf_post;

enum hf_dec_type {
    HD_SEQUENCE, HD_BYTELEVEL, HD_WORDPIECE, HD_METASPACE, HD_BPE, HD_BYTEFALLBACK, HD_FUSE,
    HD_STRIP, HD_REPLACE,
};

typedef struct hf_dec {
    int type;
    char *prefix; /* WordPiece prefix, BPEDecoder suffix */
    size_t prefix_len;
    bool cleanup;
    char repl[8]; /* Metaspace replacement */
    size_t repl_len;
    int prepend;
    uint32_t strip_cp; /* Strip content */
    int64_t start, stop;
    hf_pattern pat; /* Replace */
    char *content;
    size_t content_len;
    struct hf_dec *seq;
    int n_seq;
} hf_dec;

typedef struct hf_added {
    int32_t id;
    const char *text; /* as matched: normalized when `normalized` */
    size_t len;
    bool special, single_word, lstrip, rstrip, normalized;
    char *own; /* the normalized text, when it differs */
} hf_added;

typedef struct hf_tok {
    hf_norm *norm;  /* NULL if none */
    hf_pre *pre;
    hf_model model;
    hf_post *post;
    hf_dec *dec;
    hf_added *added; /* longest first */
    int n_added;
    int *by_byte;       /* added indices grouped by first byte, longest first in each */
    int bucket[257];    /* by_byte[bucket[b] .. bucket[b + 1]) start with byte b */
    bool add_bos, add_eos; /* tokenizer_config, when there is no post-processor */
    int64_t model_max_length;
} hf_tok;

void hf_tok_free(hf_tok *h);

/* Pipeline stages. Each returns false when out of memory. */
bool hf_normalize(const hf_norm *n, const char *s, size_t len, hf_str *out);
bool hf_pretokenize(const hf_pre *p, const char *s, size_t len, bool first0, hf_list *out);
candle_status hf_model_encode(const candle_tokenizer *t, const char *s, size_t len, tok_out *o);
/* Post-processing of a (pair of) id sequences; type_ids may be NULL. */
candle_status hf_post_process(const candle_tokenizer *t, const int32_t *a, int64_t na,
                              const int32_t *b, int64_t nb, bool pair, bool add_special,
                              tok_out *o, int32_t *type_ids);
/* Decodes ids into out (not NUL-terminated). */
bool hf_decode(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, hf_str *out);
/* Bytes of one token for streaming: byte-level and byte-fallback pieces
 * as bytes, the Metaspace marker as ' ', WordPiece's "##" dropped (or a
 * space added). */
size_t hf_piece_bytes(const candle_tokenizer *t, int32_t id, bool render_special, char *out, size_t cap);
bool hf_strips_prefix(const candle_tokenizer *t);

candle_status hf_encode(const candle_tokenizer *t, const char *text, size_t len, const char *text_b,
                        size_t len_b, bool pair, bool add_special, bool parse_special, tok_out *o,
                        int32_t *type_ids);

/* Invalid UTF-8 replaced by U+FFFD, one per maximal subpart (as Python's
 * errors='replace' and Rust's from_utf8_lossy do). */
bool hf_utf8_lossy(const char *s, size_t n, hf_str *out);

/* Character properties as the `tokenizers` library sees them
 * (hf_unicode_data.c, scripts/gen_hf_unicode.py). */
typedef struct hf_uc_map {
    uint32_t cp, n, seq[4];
} hf_uc_map;
int hf_uc_category(uint32_t cp); /* UCAT_* */
int hf_uc_gc(uint32_t cp);       /* general category: index in "LuLlLt...CoCn" */
bool hf_uc_is_word(uint32_t cp);
bool hf_uc_is_punct(uint32_t cp);
bool hf_uc_is_numeric(uint32_t cp);
bool hf_uc_is_mark(uint32_t cp);
bool hf_uc_is_mn(uint32_t cp);
bool hf_uc_is_control(uint32_t cp);
int hf_uc_lower(uint32_t cp, uint32_t *out); /* 1..3 code points */
/* The library's full decomposition where it differs from unicode_norm.c:
 * its length (0..4) into out, or -1 when it does not differ. */
int hf_uc_decomp(uint32_t cp, bool compat, uint32_t *out);
candle_status hf_regex_compile(const char *pattern, tok_regex **out);

/* The GPT-2 pre-tokenizer pattern. */
extern const char hf_gpt2_pattern[];

#endif
