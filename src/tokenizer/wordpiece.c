/* WordPiece (BERT): the text is cleaned (controls dropped), lowercased and
 * stripped of accents, split at whitespace, with every punctuation mark
 * and CJK ideograph a word of its own; each word is then cut greedily into
 * the longest vocabulary pieces from the left, or is [UNK] as a whole.
 * The GGUF vocabularies mark word-initial pieces with U+2581 (where BERT's
 * own files mark continuations with ##). */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

#define MAX_WORD_CHARS 100 /* longer words are [UNK], as in BERT */

static bool is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* BERT counts all non-alphanumeric printable ASCII as punctuation. */
static bool is_punct(uint32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return true;
    return cp >= 128 && (tok_unicode_category(cp) & UCAT_P);
}

typedef struct wp_word {
    char *buf;      /* "\u2581" + the word's UTF-8, room for the marker */
    size_t *offs;   /* byte offset of each character (after the marker) */
    size_t n_chars, len, cap;
} wp_word;

/* Greedy longest-match-first pieces of the word in w. */
static bool encode_word(const candle_tokenizer *t, const wp_word *w, tok_out *o) {
    if (!w->n_chars) return true;
    int64_t mark = o->n;
    bool ok = w->n_chars <= MAX_WORD_CHARS;
    for (size_t start = 0; ok && start < w->n_chars;) {
        int32_t id = -1;
        size_t end = w->n_chars;
        for (; end > start; end--) {
            /* The marker sits just before the first character's bytes. */
            size_t b0 = start ? 3 + w->offs[start] : 0;
            size_t b1 = 3 + (end < w->n_chars ? w->offs[end] : w->len);
            if ((id = tok_map_get(&t->vocab, w->buf + b0, b1 - b0)) >= 0) break;
        }
        if (id < 0) ok = false;
        else tok_out_push(o, id);
        start = end;
    }
    if (!ok) {
        o->n = mark;
        if (t->unk >= 0) tok_out_push(o, t->unk);
    }
    return true;
}

static bool word_add(wp_word *w, uint32_t cp) {
    if (w->len + 3 + 8 > w->cap) return false; /* sized by the caller */
    w->offs[w->n_chars++] = w->len;
    w->len += tok_utf8_encode(cp, w->buf + 3 + w->len);
    return true;
}

candle_status tok_wpm_encode(const candle_tokenizer *t, const char *text, size_t len, tok_out *o) {
    wp_word w = {0};
    w.cap = 4 * len + 16; /* lowercasing and Hangul decomposition lengthen text */
    w.buf = malloc(w.cap);
    w.offs = malloc((len + 1) * sizeof *w.offs);
    candle_status st = CANDLE_OK;
    if (!w.buf || !w.offs) {
        st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
        goto done;
    }
    memcpy(w.buf, "\xe2\x96\x81", 3);
    for (size_t i = 0; i < len && !tok_out_done(o);) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(text + i, len - i, &cp);
        i += cl;
        if (tok_unicode_is_space(cp)) {
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || (tok_unicode_category(cp) & UCAT_C)) continue;
        cp = tok_unicode_strip_accent(tok_unicode_to_lower(cp));
        if (tok_unicode_is_mn(cp)) continue;
        if (is_punct(cp) || is_cjk(cp)) {
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
            word_add(&w, cp);
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
            continue;
        }
        if (cp >= 0xAC00 && cp < 0xAC00 + 11172) { /* NFD splits Hangul into jamo */
            uint32_t s = cp - 0xAC00;
            word_add(&w, 0x1100 + s / 588);
            word_add(&w, 0x1161 + (s % 588) / 28);
            if (s % 28) word_add(&w, 0x11A7 + s % 28);
            continue;
        }
        word_add(&w, cp);
    }
    encode_word(t, &w, o);
done:
    free(w.buf);
    free(w.offs);
    return st;
}
