/* Tokenizer internals shared by the vocabulary loader and the SPM, BPE and
 * WordPiece encoders. */
#ifndef CANDLE_TOKENIZER_IMPL_H
#define CANDLE_TOKENIZER_IMPL_H

#include <stdint.h>

#include "candle/tokenizer.h"
#include "regex-impl.h"

typedef enum tok_kind { TOK_SPM, TOK_BPE, TOK_WPM, TOK_HF } tok_kind;

struct hf_tok;

/* GGUF tokenizer.ggml.token_type values. */
enum {
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6,
};

/* Open-addressing map from byte strings (owned elsewhere) to int32. */
typedef struct tok_map {
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
    uint64_t cap; /* power of two, 0 when empty */
} tok_map;

candle_status tok_map_init(tok_map *m, int64_t n);
void tok_map_free(tok_map *m);
/* A later put of the same key replaces the value. */
void tok_map_put(tok_map *m, const char *key, size_t len, int32_t val);
int32_t tok_map_get(const tok_map *m, const char *key, size_t len); /* -1 if absent */

/* Whitespace a special token swallows when matched in text. */
enum { STRIP_LEFT = 1, STRIP_RIGHT = 2 };

typedef struct tok_token {
    const char *text; /* NUL-terminated, in the tokenizer's string pool */
    uint32_t len;
    uint8_t type;     /* TT_* */
    uint8_t strip;    /* STRIP_* */
    float score;
} tok_token;

#define TOK_MAX_REGEX 8

struct candle_tokenizer {
    tok_kind kind;
    int32_t n_vocab;
    tok_token *tokens; /* [n_vocab] */
    char *pool;        /* token and merge strings */
    tok_map vocab;     /* text -> id */
    tok_map merges;    /* "left right" -> rank (BPE) */
    int32_t bos, eos, unk, pad, sep;
    int32_t eog[8];    /* end-of-generation ids */
    int n_eog;
    bool add_bos, add_eos, add_space_prefix;
    bool ignore_merges; /* BPE: a word that is a token is emitted whole */
    bool lowercase;     /* WordPiece: lowercased and stripped of accents, as BERT's uncased */
    int32_t byte_ids[256]; /* SPM <0xXX> tokens, BPE single-byte tokens; -1 if none */
    int32_t *specials;  /* ids matched in raw text, longest first */
    int32_t n_specials;
    tok_regex *regex[TOK_MAX_REGEX]; /* BPE pre-tokenizer, applied in turn */
    int n_regex;
    struct hf_tok *hf; /* TOK_HF: the tokenizer.json pipeline */
};

/* What a tokenizer is built from: GGUF metadata, or a test's tables. */
typedef struct tok_source {
    const char *model; /* "llama", "gpt2", "bert" */
    const char *pre;   /* pre-tokenizer name, may be NULL */
    const char *arch;  /* general.architecture, may be NULL */
    const char *name;  /* general.name, may be NULL */
    int64_t n_tokens;
    const char *const *tokens;
    const size_t *token_lens;
    const float *scores;    /* may be NULL */
    const int32_t *types;   /* may be NULL (all normal) */
    int64_t n_merges;
    const char *const *merges;
    const size_t *merge_lens;
    /* -2 = not given (use the model's default), -1 = none. */
    int64_t bos, eos, unk, pad, sep, eot, eom;
    int add_bos, add_eos, add_space_prefix; /* -1 = not given */
    bool cased; /* WordPiece: tokenizer.ggml.normalizer.lowercase false */
} tok_source;

candle_status tok_build(candle_tokenizer **out, const tok_source *src);

/* Pre-tokenizer regexes of a BPE family ("gpt-2", "llama-bpe", ...);
 * NULL-terminated. Unknown names get the default split, with *known false
 * (true for a known name or none). */
const char *const *tok_pre_regexes(const char *pre, bool *ignore_merges, bool *known);

/* ---- the encode path's temporary memory (scratch.c) ----
 * Every buffer an encode makes and drops (strings, piece lists, match
 * stacks, model lattices) goes through tok_tmp_*: heap memory, or while a
 * caller's scratch is bound to the thread (tok_scratch_begin .. _end), its
 * arena, reset at _end. tok_tmp_realloc takes the old block's size (what
 * an arena copies). Memory from tok_tmp_* must not outlive the call. */
typedef struct tok_scratch tok_scratch;
/* Binds *sc (made on first use) to this thread; nested begins leave the
 * outer binding. */
candle_status tok_scratch_begin(tok_scratch **sc);
void tok_scratch_end(tok_scratch **sc);
void tok_scratch_free(tok_scratch *sc);
void *tok_tmp_alloc(size_t n);
void *tok_tmp_calloc(size_t n, size_t size);
void *tok_tmp_realloc(void *p, size_t old, size_t n);
void tok_tmp_free(void *p);

/* Output buffer of ids that counts past its capacity. stop > 0: the
 * encoders give up once n reaches it (the caller's limit + 1), so a text far
 * longer than the caller can use costs no more than that many ids. */
typedef struct tok_out {
    int32_t *ids;
    int64_t cap, n;
    int64_t stop;
} tok_out;

static inline bool tok_out_done(const tok_out *o) { return o->stop > 0 && o->n >= o->stop; }

static inline void tok_out_push(tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Symbols being merged: a byte range of the word, linked in order. */
typedef struct tok_sym {
    int32_t prev, next;
    uint32_t off, n; /* n = 0 once merged into its left neighbour */
} tok_sym;

/* Candidate merge of two neighbours; the heap pops the lowest key, ties
 * going to the leftmost pair, as the reference tokenizers do. */
typedef struct tok_bigram {
    double key;
    int32_t left, right;
    uint32_t size; /* bytes of the merged text, to detect stale entries */
} tok_bigram;

typedef struct tok_heap {
    tok_bigram *v;
    int64_t n, cap;
} tok_heap;

bool tok_heap_push(tok_heap *h, tok_bigram b); /* false when out of memory */
tok_bigram tok_heap_pop(tok_heap *h);          /* h->n > 0 */

/* Encoders of one raw-text fragment (no special tokens inside). SPM adds
 * the space prefix when asked (first fragment, or after a special token). */
candle_status tok_spm_encode(const candle_tokenizer *t, const char *text, size_t len,
                             bool add_prefix, tok_out *o);
candle_status tok_bpe_encode(const candle_tokenizer *t, const char *text, size_t len, tok_out *o);
candle_status tok_wpm_encode(const candle_tokenizer *t, const char *text, size_t len, tok_out *o);

/* GPT-2 byte-level alphabet: byte -> code point and back (-1 if not one). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

#endif
