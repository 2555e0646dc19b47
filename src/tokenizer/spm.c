/* SentencePiece-style encoding: spaces become U+2581, the text is split
 * into characters, and the neighbouring pair whose concatenation is the
 * highest-scoring vocabulary piece is merged until none is left. Pieces
 * still unknown fall back to <0xXX> byte tokens (or unk). */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 */

/* The piece id for text if merging into it is allowed: control, byte and
 * unknown pieces are never produced by merges. */
static int32_t mergeable(const candle_tokenizer *t, const char *s, size_t n) {
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id < 0) return -1;
    uint8_t ty = t->tokens[id].type;
    return (ty == TT_CONTROL || ty == TT_BYTE || ty == TT_UNKNOWN) ? -1 : id;
}

static bool try_pair(const candle_tokenizer *t, const char *text, const tok_sym *sym, int32_t l,
                     tok_heap *h) {
    if (l < 0 || sym[l].next < 0) return true;
    int32_t r = sym[l].next;
    uint32_t size = sym[l].n + sym[r].n;
    int32_t id = mergeable(t, text + sym[l].off, size);
    if (id < 0) return true;
    tok_bigram b = {-(double)t->tokens[id].score, l, r, size};
    return tok_heap_push(h, b);
}

/* " a b" -> "▁a▁b", with the optional leading space. */
static char *escape(const char *text, size_t len, bool add_prefix, size_t *out_len) {
    size_t spaces = add_prefix;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    char *s = malloc(len + 2 * spaces + 1);
    if (!s) return NULL;
    size_t k = 0;
    if (add_prefix) memcpy(s + k, SPACE_MARK, 3), k += 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(s + k, SPACE_MARK, 3), k += 3;
        else s[k++] = text[i];
    }
    *out_len = k;
    return s;
}

static void emit_piece(const candle_tokenizer *t, const char *s, uint32_t n, tok_out *o) {
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id >= 0) {
        tok_out_push(o, id);
        return;
    }
    bool bytes = true;
    for (uint32_t i = 0; i < n && bytes; i++) bytes = t->byte_ids[(unsigned char)s[i]] >= 0;
    if (!bytes) {
        if (t->unk >= 0) tok_out_push(o, t->unk);
        return;
    }
    for (uint32_t i = 0; i < n; i++) tok_out_push(o, t->byte_ids[(unsigned char)s[i]]);
}

candle_status tok_spm_encode(const candle_tokenizer *t, const char *text, size_t len,
                             bool add_prefix, tok_out *o) {
    size_t n = 0;
    char *s = escape(text, len, add_prefix, &n);
    tok_sym *sym = malloc((n ? n : 1) * sizeof *sym);
    tok_heap h = {0};
    candle_status st = CANDLE_OK;
    if (!s || !sym) goto oom;
    int32_t ns = 0;
    for (size_t i = 0; i < n; ns++) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(s + i, n - i, &cp);
        sym[ns] = (tok_sym){ns - 1, -1, (uint32_t)i, (uint32_t)cl};
        if (ns) sym[ns - 1].next = ns;
        i += cl;
    }
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!try_pair(t, s, sym, i, &h)) goto oom;
    while (h.n) {
        tok_bigram b = tok_heap_pop(&h);
        tok_sym *l = &sym[b.left], *r = &sym[b.right];
        if (!l->n || !r->n || l->next != b.right || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!try_pair(t, s, sym, l->prev, &h) || !try_pair(t, s, sym, b.left, &h)) goto oom;
    }
    for (int32_t i = 0; ns && i >= 0 && !tok_out_done(o); i = sym[i].next)
        emit_piece(t, s + sym[i].off, sym[i].n, o);
    goto done;
oom:
    st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
done:
    free(s);
    free(sym);
    tok_tmp_free(h.v);
    return st;
}
