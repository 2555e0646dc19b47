/* Byte-level BPE: the text is split by the family's pre-tokenizer regexes,
 * each piece's bytes are mapped to the GPT-2 alphabet, and the pair of
 * neighbours with the lowest merge rank is merged until no listed merge
 * applies. */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

typedef struct piece {
    int64_t start, end; /* code point indices */
} piece;

typedef struct bpe_work {
    uint32_t *cps;  /* [n_cps] */
    size_t *offs;   /* [n_cps + 1] byte offset of each code point */
    int64_t n_cps;
    piece *pieces, *next;
    int64_t n_pieces, cap;
    tok_regex_stack stack;
    char *word, *key;  /* byte-level text of a piece, merge key scratch */
    size_t word_cap, key_cap;
    tok_sym *sym;
    size_t sym_cap;
    tok_heap heap;
} bpe_work;

static void work_free(bpe_work *w) {
    free(w->cps);
    free(w->offs);
    free(w->pieces);
    free(w->next);
    tok_regex_stack_free(&w->stack);
    free(w->word);
    free(w->key);
    free(w->sym);
    tok_tmp_free(w->heap.v);
}

static bool reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return false;
    *p = np;
    *cap = nc;
    return true;
}

/* Applies one regex to every piece: matches and the gaps between them
 * both become pieces. */
static bool split_pieces(bpe_work *w, const tok_regex *re) {
    int64_t nn = 0;
    for (int64_t k = 0; k < w->n_pieces; k++) {
        int64_t s = w->pieces[k].start, e = w->pieces[k].end, gap = s;
        tok_regex_begin(&w->stack);
        for (int64_t pos = s; pos < e;) {
            int64_t end = tok_regex_match_at(re, w->cps + s, e - s, pos - s, &w->stack);
            if (end == -2) return false;
            if (end < 0 || end + s == pos) {
                pos++;
                continue;
            }
            end += s;
            if (gap < pos) w->next[nn++] = (piece){gap, pos};
            w->next[nn++] = (piece){pos, end};
            pos = gap = end;
        }
        if (gap < e) w->next[nn++] = (piece){gap, e};
    }
    piece *tmp = w->pieces;
    w->pieces = w->next;
    w->next = tmp;
    w->n_pieces = nn;
    return true;
}

static int32_t merge_rank(const candle_tokenizer *t, bpe_work *w, const tok_sym *l, const tok_sym *r) {
    size_t n = l->n + 1 + r->n;
    if (!reserve((void **)&w->key, &w->key_cap, n, 1)) return -2;
    memcpy(w->key, w->word + l->off, l->n);
    w->key[l->n] = ' ';
    memcpy(w->key + l->n + 1, w->word + r->off, r->n);
    return tok_map_get(&t->merges, w->key, n);
}

static bool try_pair(const candle_tokenizer *t, bpe_work *w, int32_t l) {
    if (l < 0 || w->sym[l].next < 0) return true;
    int32_t r = w->sym[l].next;
    int32_t rank = merge_rank(t, w, &w->sym[l], &w->sym[r]);
    if (rank == -2) return false;
    if (rank < 0) return true;
    tok_bigram b = {(double)rank, l, r, w->sym[l].n + w->sym[r].n};
    return tok_heap_push(&w->heap, b);
}

static void emit_symbol(const candle_tokenizer *t, const char *s, uint32_t n, tok_out *o) {
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id >= 0) {
        tok_out_push(o, id);
        return;
    }
    /* Not a token (a vocabulary without all merges' results): fall back
     * to the single-byte tokens. */
    for (uint32_t i = 0; i < n;) {
        uint32_t cp;
        i += (uint32_t)tok_utf8_decode(s + i, n - i, &cp);
        int b = tok_cp_to_byte(cp);
        int32_t bid = b >= 0 ? t->byte_ids[b] : -1;
        if (bid >= 0) tok_out_push(o, bid);
        else if (t->unk >= 0) tok_out_push(o, t->unk);
    }
}

static bool encode_word(const candle_tokenizer *t, bpe_work *w, const char *text, size_t len,
                        tok_out *o) {
    size_t wl = 0;
    if (!reserve((void **)&w->word, &w->word_cap, 2 * len + 1, 1)) return false;
    for (size_t i = 0; i < len; i++)
        wl += tok_utf8_encode(tok_byte_to_cp((uint8_t)text[i]), w->word + wl);
    if (t->ignore_merges) {
        int32_t id = tok_map_get(&t->vocab, w->word, wl);
        if (id >= 0) {
            tok_out_push(o, id);
            return true;
        }
    }
    if (!reserve((void **)&w->sym, &w->sym_cap, len, sizeof(tok_sym))) return false;
    int32_t ns = 0;
    for (size_t i = 0; i < wl; ns++) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(w->word + i, wl - i, &cp);
        w->sym[ns] = (tok_sym){ns - 1, -1, (uint32_t)i, (uint32_t)cl};
        if (ns) w->sym[ns - 1].next = ns;
        i += cl;
    }
    w->heap.n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!try_pair(t, w, i)) return false;
    while (w->heap.n) {
        tok_bigram b = tok_heap_pop(&w->heap);
        tok_sym *l = &w->sym[b.left], *r = &w->sym[b.right];
        if (!l->n || !r->n || l->next != b.right || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = b.left;
        if (!try_pair(t, w, l->prev) || !try_pair(t, w, b.left)) return false;
    }
    for (int32_t i = 0; ns && i >= 0; i = w->sym[i].next)
        emit_symbol(t, w->word + w->sym[i].off, w->sym[i].n, o);
    return true;
}

candle_status tok_bpe_encode(const candle_tokenizer *t, const char *text, size_t len, tok_out *o) {
    bpe_work w = {0};
    bool ok = (w.cps = malloc((len + 1) * sizeof *w.cps)) && (w.offs = malloc((len + 1) * sizeof *w.offs)) &&
              (w.pieces = malloc((len + 1) * sizeof *w.pieces)) && (w.next = malloc((len + 1) * sizeof *w.next));
    for (size_t i = 0; ok && i < len; w.n_cps++) {
        w.offs[w.n_cps] = i;
        i += tok_utf8_decode(text + i, len - i, &w.cps[w.n_cps]);
    }
    if (ok) {
        w.offs[w.n_cps] = len;
        w.pieces[0] = (piece){0, w.n_cps};
        w.n_pieces = w.n_cps > 0;
    }
    for (int i = 0; ok && i < t->n_regex; i++) ok = split_pieces(&w, t->regex[i]);
    for (int64_t k = 0; ok && k < w.n_pieces && !tok_out_done(o); k++) {
        size_t b0 = w.offs[w.pieces[k].start], b1 = w.offs[w.pieces[k].end];
        ok = encode_word(t, &w, text + b0, b1 - b0, o);
    }
    work_free(&w);
    return ok ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
}
