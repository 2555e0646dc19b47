/* WordPiece (BERT): the text goes through BERT's normalizer (controls
 * dropped, CJK ideographs spaced out, and for an uncased model NFD,
 * nonspacing marks dropped and lower case), is split at whitespace, with
 * every punctuation mark a word of its own; each word is then cut greedily into
 * the longest vocabulary pieces from the left, or is [UNK] as a whole.
 * The GGUF vocabularies mark word-initial pieces with U+2581 (where BERT's
 * own files mark continuations with ##). */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

#define MAX_WORD_CHARS 100 /* longer words are [UNK], as in BERT */

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
    /* BERT's normalizer as tokenizer.json's BertNormalizer runs it */
    hf_norm bert = {.type = HN_BERT, .clean_text = true, .chinese = true,
                    .strip_accents = t->lowercase, .lowercase = t->lowercase};
    hf_str norm = {0};
    wp_word w = {0};
    candle_status st = CANDLE_OK;
    if (!hf_normalize(&bert, text, len, &norm)) {
        st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
        goto done;
    }
    w.cap = norm.n + 16;
    w.buf = malloc(w.cap);
    w.offs = malloc((norm.n + 1) * sizeof *w.offs);
    if (!w.buf || !w.offs) {
        st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
        goto done;
    }
    memcpy(w.buf, "\xe2\x96\x81", 3);
    for (size_t i = 0; i < norm.n && !tok_out_done(o);) {
        uint32_t cp;
        i += tok_utf8_decode(norm.p + i, norm.n - i, &cp);
        if (tok_unicode_is_space(cp)) {
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
        } else if (hf_uc_is_punct(cp)) { /* as the reference's Unicode tables say */
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
            word_add(&w, cp);
            encode_word(t, &w, o);
            w.n_chars = w.len = 0;
        } else
            word_add(&w, cp);
    }
    encode_word(t, &w, o);
done:
    hf_str_free(&norm);
    free(w.buf);
    free(w.offs);
    return st;
}
