/* Public tokenizer API: special-token partition, BOS/EOS rules, dispatch
 * to the SPM/BPE/WordPiece encoders, and detokenization. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "tokenizer-impl.h"
#include "unicode-impl.h"

int32_t candle_tokenizer_n_vocab(const candle_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t candle_tokenizer_bos(const candle_tokenizer *t) { return t ? t->bos : -1; }
int32_t candle_tokenizer_eos(const candle_tokenizer *t) { return t ? t->eos : -1; }
bool candle_tokenizer_is_added(const candle_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->tokens[id].type == TT_CONTROL || t->tokens[id].type == TT_USER);
}

bool candle_tokenizer_is_eog(const candle_tokenizer *t, int32_t id) {
    if (!t || id < 0) return false;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

int32_t candle_tokenizer_find(const candle_tokenizer *t, const char *text) {
    if (!t || !text) return -1;
    size_t n = strlen(text);
    for (int i = 0; t->hf && i < t->hf->n_added; i++) {
        const tok_token *tk = &t->tokens[t->hf->added[i].id];
        if (tk->len == n && !memcmp(tk->text, text, n)) return t->hf->added[i].id;
    }
    return tok_map_get(&t->vocab, text, n);
}

/* A piece of the input: raw text, or a special token found in it. */
typedef struct fragment {
    int32_t id; /* -1 for raw text */
    size_t off, len;
} fragment;

typedef struct frag_list {
    fragment *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, fragment f) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        fragment *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = f;
    return true;
}

static bool is_blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Splits the raw fragments of *l at every occurrence of special token id,
 * dropping the whitespace the token strips. */
static bool split_on(const candle_tokenizer *t, const char *text, int32_t id, frag_list *l,
                     frag_list *tmp) {
    const tok_token *tk = &t->tokens[id];
    tmp->n = 0;
    for (size_t k = 0; k < l->n; k++) {
        fragment f = l->v[k];
        if (f.id >= 0) {
            if (!frag_push(tmp, f)) return false;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        for (;;) {
            const char *hit = memmem(text + pos, end - pos, tk->text, tk->len);
            if (!hit) break;
            size_t h = (size_t)(hit - text), left = h;
            if (tk->strip & STRIP_LEFT)
                while (left > pos && is_blank(text[left - 1])) left--;
            if (left > pos && !frag_push(tmp, (fragment){-1, pos, left - pos})) return false;
            if (!frag_push(tmp, (fragment){id, h, tk->len})) return false;
            pos = h + tk->len;
            if (tk->strip & STRIP_RIGHT)
                while (pos < end && is_blank(text[pos])) pos++;
        }
        if (pos < end && !frag_push(tmp, (fragment){-1, pos, end - pos})) return false;
    }
    frag_list sw = *l;
    *l = *tmp;
    *tmp = sw;
    return true;
}

/* Longest special texts first, so "<|im_start|>" wins over "<|im". User
 * defined tokens are always matched; control tokens only when asked. */
static bool partition(const candle_tokenizer *t, const char *text, size_t len, bool parse_special,
                      frag_list *l) {
    frag_list tmp = {0};
    bool ok = frag_push(l, (fragment){-1, 0, len});
    for (int32_t i = 0; ok && i < t->n_specials; i++) {
        int32_t id = t->specials[i];
        const tok_token *tk = &t->tokens[id];
        if (tk->type != TT_USER && !parse_special) continue;
        if (!memmem(text, len, tk->text, tk->len)) continue;
        ok = split_on(t, text, id, l, &tmp);
    }
    free(tmp.v);
    return ok;
}

candle_status candle_tokenizer_encode(const candle_tokenizer *t, const char *text, size_t len,
                                      bool add_special, bool parse_special, int32_t *ids,
                                      int64_t cap, int64_t *n_out) {
    return candle_tokenizer_encode_limit(t, text, len, add_special, parse_special, -1, ids, cap, n_out);
}

candle_status candle_tokenizer_encode_limit(const candle_tokenizer *t, const char *text, size_t len,
                                            bool add_special, bool parse_special, int64_t limit,
                                            int32_t *ids, int64_t cap, int64_t *n_out) {
    if (!t || (!text && len) || (!ids && cap > 0) || !n_out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_encode: NULL argument");
    tok_out o = {ids, cap < 0 ? 0 : cap, 0, limit < 0 || limit == INT64_MAX ? 0 : limit + 1};
    if (t->kind == TOK_HF) {
        candle_status hs = hf_encode(t, text, len, NULL, 0, false, add_special, parse_special, &o, NULL);
        *n_out = o.n;
        return hs;
    }
    frag_list l = {0};
    candle_status st = CANDLE_OK;
    if (add_special && t->add_bos && t->bos >= 0) tok_out_push(&o, t->bos);
    if (len && !partition(t, text, len, parse_special, &l))
        st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing %zu bytes", len);
    bool prev_special = true; /* SPM: a space prefix starts the text */
    for (size_t k = 0; st == CANDLE_OK && k < l.n && !tok_out_done(&o); k++) {
        fragment f = l.v[k];
        if (f.id >= 0) {
            tok_out_push(&o, f.id);
            prev_special = true;
            continue;
        }
        if (t->kind == TOK_SPM)
            st = tok_spm_encode(t, text + f.off, f.len, t->add_space_prefix && prev_special, &o);
        else if (t->kind == TOK_BPE) st = tok_bpe_encode(t, text + f.off, f.len, &o);
        else st = tok_wpm_encode(t, text + f.off, f.len, &o);
        prev_special = false;
    }
    if (st == CANDLE_OK && add_special && t->add_eos && t->eos >= 0 && !tok_out_done(&o))
        tok_out_push(&o, t->eos);
    free(l.v);
    *n_out = o.n;
    return st;
}

candle_status candle_tokenizer_encode_pair(const candle_tokenizer *t, const char *a, size_t alen,
                                           const char *b, size_t blen, bool add_special, int32_t *ids,
                                           int64_t cap, int64_t *n_out, int32_t *type_ids) {
    if (!t || (!a && alen) || (!b && blen) || (!ids && cap > 0) || !n_out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_encode_pair: NULL argument");
    if (cap < 0) cap = 0;
    if (t->kind == TOK_HF) {
        tok_out o = {ids, cap, 0, 0};
        candle_status st = hf_encode(t, a, alen, b, blen, true, add_special, true, &o, type_ids);
        *n_out = o.n;
        return st;
    }
    int64_t na = 0, nb = 0;
    candle_status st = candle_tokenizer_encode(t, a, alen, add_special, true, ids, cap, &na);
    if (st != CANDLE_OK) return st;
    int64_t room = na < cap ? cap - na : 0;
    st = candle_tokenizer_encode(t, b, blen, false, true, room ? ids + na : NULL, room, &nb);
    for (int64_t i = 0; type_ids && i < na + nb && i < cap; i++) type_ids[i] = i >= na;
    *n_out = na + nb;
    return st;
}

size_t candle_tokenizer_max_token_bytes(const candle_tokenizer *t) {
    /* WordPiece drops whitespace and control characters; a tokenizer.json
     * pipeline may normalize text away (strip, replace). */
    if (!t || (t->kind != TOK_SPM && t->kind != TOK_BPE)) return 0;
    for (int32_t i = 0; i < t->n_specials; i++)
        if (t->tokens[t->specials[i]].strip) return 0; /* it swallows any run of blanks */
    if (t->unk < 0)
        for (int b = 0; b < 256; b++)
            if (t->byte_ids[b] < 0) return 0; /* a character with no piece is dropped */
    /* Every input byte is now in some id: a piece's text (an SPM space is
     * the 3-byte U+2581, a byte-level BPE byte 1 or 2 bytes of its
     * alphabet), a byte id, a special token's text, or unk for one
     * character of at most 4 bytes. */
    size_t longest = 4;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->tokens[i].len > longest) longest = t->tokens[i].len;
    return longest;
}

/* ---- detokenization ---- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Writes the piece's bytes to out while they fit; returns the full length. */
static size_t piece_bytes(const candle_tokenizer *t, int32_t id, bool render_special, char *out,
                          size_t cap) {
    if (t->kind == TOK_HF) return hf_piece_bytes(t, id, render_special, out, cap);
    const tok_token *tk = &t->tokens[id];
    size_t n = 0;
#define PUT(c) do { if (n < cap) out[n] = (char)(c); n++; } while (0)
    if (tk->type == TT_CONTROL || tk->type == TT_UNKNOWN) {
        if (!render_special) return 0;
        for (uint32_t i = 0; i < tk->len; i++) PUT(tk->text[i]);
        return n;
    }
    if (tk->type == TT_USER) {
        for (uint32_t i = 0; i < tk->len; i++) PUT(tk->text[i]);
        return n;
    }
    if (tk->type == TT_BYTE && tk->len == 6 && hexval(tk->text[3]) >= 0 && hexval(tk->text[4]) >= 0) {
        PUT(hexval(tk->text[3]) * 16 + hexval(tk->text[4]));
        return n;
    }
    const char *s = tk->text;
    uint32_t len = tk->len, i = 0;
    if (t->kind == TOK_WPM && len >= 2 && s[0] == '#' && s[1] == '#') i = 2; /* BERT's own files */
    while (i < len) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(s + i, len - i, &cp);
        int b = -1;
        if (t->kind != TOK_BPE && cp == 0x2581) b = ' ';
        else if (t->kind == TOK_BPE) b = tok_cp_to_byte(cp);
        if (b >= 0) PUT(b);
        else for (size_t k = 0; k < cl; k++) PUT(s[i + k]);
        i += (uint32_t)cl;
    }
#undef PUT
    return n;
}

static candle_status check_id(const candle_tokenizer *t, int32_t id, const char *what) {
    if (id < 0 || id >= t->n_vocab)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%s: token id %d out of range [0, %d)",
                                what, (int)id, (int)t->n_vocab);
    return CANDLE_OK;
}

candle_status candle_tokenizer_token_bytes(const candle_tokenizer *t, int32_t id,
                                           bool render_special, char *buf, size_t cap,
                                           size_t *len) {
    if (!t || (!buf && cap) || !len)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_token_bytes: NULL argument");
    candle_status st = check_id(t, id, "tokenizer_token_bytes");
    if (st != CANDLE_OK) return st;
    *len = piece_bytes(t, id, render_special, buf, cap);
    if (*len > cap)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "tokenizer_token_bytes: buffer of %zu bytes too small, need %zu", cap, *len);
    if (*len < cap) buf[*len] = 0;
    return CANDLE_OK;
}

/* Whether decoding drops the space that encoding put before the text. */
static bool strips_prefix(const candle_tokenizer *t) {
    if (t->kind == TOK_HF) return hf_strips_prefix(t);
    return (t->kind == TOK_SPM && t->add_space_prefix) || t->kind == TOK_WPM;
}

static candle_status hf_decode_into(const candle_tokenizer *t, const int32_t *ids, int64_t n,
                                    bool render_special, char *buf, size_t cap, size_t *len) {
    for (int64_t i = 0; i < n; i++) {
        candle_status st = check_id(t, ids[i], "tokenizer_decode");
        if (st != CANDLE_OK) return st;
    }
    hf_str s = {0};
    if (!hf_decode(t, ids, n, !render_special, &s)) {
        hf_str_free(&s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: decoding %lld ids", (long long)n);
    }
    *len = s.n;
    if (cap) {
        size_t k = s.n < cap ? s.n : cap - 1;
        memcpy(buf, s.p, k);
        buf[k] = 0;
    }
    hf_str_free(&s);
    if (*len >= cap)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "tokenizer_decode: buffer of %zu bytes too small, need %zu", cap, *len + 1);
    return CANDLE_OK;
}

candle_status candle_tokenizer_decode(const candle_tokenizer *t, const int32_t *ids, int64_t n,
                                      bool render_special, char *buf, size_t cap, size_t *len) {
    if (!t || (!ids && n > 0) || (!buf && cap) || !len)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_decode: NULL argument");
    if (t->kind == TOK_HF) return hf_decode_into(t, ids, n, render_special, buf, cap, len);
    size_t total = 0;
    bool strip = strips_prefix(t);
    for (int64_t i = 0; i < n; i++) {
        candle_status st = check_id(t, ids[i], "tokenizer_decode");
        if (st != CANDLE_OK) return st;
        size_t room = total < cap ? cap - total : 0;
        char *dst = room ? buf + total : NULL;
        size_t pl = piece_bytes(t, ids[i], render_special, dst, room);
        if (strip && pl) {
            strip = false;
            char first;
            piece_bytes(t, ids[i], render_special, &first, 1);
            if (first == ' ') {
                if (room) memmove(dst, dst + 1, (pl < room ? pl : room) - 1);
                pl--;
            }
        }
        total += pl;
    }
    *len = total;
    if (cap) buf[total < cap ? total : cap - 1] = 0;
    if (total >= cap)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "tokenizer_decode: buffer of %zu bytes too small, need %zu", cap, total + 1);
    return CANDLE_OK;
}

/* ---- streaming ---- */

/* Copies s[0..n) to out with each byte that is not part of a well-formed
 * character replaced by U+FFFD; out has room for 3 * n bytes. */
static size_t sanitize(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t cl = tok_utf8_decode(s + i, n - i, &cp);
        if (cl == 1 && (unsigned char)s[i] >= 0x80) {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
        } else {
            memcpy(out + k, s + i, cl);
            k += cl;
        }
        i += cl;
    }
    return k;
}

size_t candle_tokenizer_detok_bufsize(const candle_tokenizer *t) {
    size_t longest = 0;
    for (int32_t i = 0; t && i < t->n_vocab; i++) {
        /* A piece never has more bytes than its text, but for the WordPiece
         * leading space. */
        size_t n = t->tokens[i].len + 1u;
        if (n > longest) longest = n;
    }
    return 3 * (longest + 4) + 1;
}

candle_status candle_tokenizer_detok_push(const candle_tokenizer *t, candle_detok *d, int32_t id,
                                          bool render_special, char *buf, size_t cap, size_t *len) {
    if (!t || !d || !buf || !len)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_detok_push: NULL argument");
    candle_status st = check_id(t, id, "tokenizer_detok_push");
    if (st != CANDLE_OK) return st;
    size_t pl = piece_bytes(t, id, render_special, NULL, 0);
    size_t have = d->n_pending + pl, need = 3 * have + 1;
    if (cap < need)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "tokenizer_detok_push: buffer of %zu bytes too small, need %zu", cap, need);
    /* Assemble pending + piece at the end of buf, sanitize to its start:
     * the output never overtakes the input it reads. */
    char *tmp = buf + cap - have;
    memcpy(tmp, d->pending, d->n_pending);
    piece_bytes(t, id, render_special, tmp + d->n_pending, pl);
    if (d->strip_space && pl) {
        d->strip_space = false;
        if (strips_prefix(t) && tmp[d->n_pending] == ' ') {
            memmove(tmp + 1, tmp, d->n_pending);
            tmp++;
            have--;
        }
    }
    size_t done = tok_utf8_complete_prefix(tmp, have);
    char keep[4];
    size_t n_keep = have - done;
    memcpy(keep, tmp + done, n_keep);
    *len = sanitize(tmp, done, buf);
    buf[*len] = 0;
    memcpy(d->pending, keep, n_keep);
    d->n_pending = (uint8_t)n_keep;
    return CANDLE_OK;
}

candle_status candle_tokenizer_detok_flush(const candle_tokenizer *t, candle_detok *d, char *buf,
                                           size_t cap, size_t *len) {
    (void)t;
    if (!d || !buf || !len)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenizer_detok_flush: NULL argument");
    if (cap < 3 * (size_t)d->n_pending + 1)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "tokenizer_detok_flush: buffer of %zu bytes too small", cap);
    *len = sanitize(d->pending, d->n_pending, buf);
    buf[*len] = 0;
    d->n_pending = 0;
    return CANDLE_OK;
}
