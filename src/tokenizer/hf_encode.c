/* Encoding with a tokenizer.json pipeline, in the `tokenizers` library's
 * order: added tokens that are not normalized are found in the raw text;
 * each stretch between them is normalized, searched for the normalized
 * added tokens, pre-tokenized and given to the model; the post-processor
 * adds the special tokens. Invalid UTF-8 in the input is replaced by
 * U+FFFD first (maximal subparts), which is the text a Python caller
 * passing bytes.decode(errors='replace') encodes. */
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"
#include "hf-impl.h"
#include "unicode-impl.h"

typedef struct ivec {
    int32_t *v;
    int64_t n, cap;
    int64_t stop; /* tok_out's: give up once n reaches it (0: never) */
} ivec;

static bool iv_done(const ivec *a) { return a->stop > 0 && a->n >= a->stop; }

static bool iv_reserve(ivec *a, int64_t more) {
    if (a->n + more <= a->cap) return true;
    int64_t nc = a->cap ? a->cap * 2 : 64;
    while (nc < a->n + more) nc *= 2;
    int32_t *nv = tok_tmp_realloc(a->v, (size_t)a->cap * sizeof *nv, (size_t)nc * sizeof *nv);
    if (!nv) return false;
    a->v = nv;
    a->cap = nc;
    return true;
}

static candle_status oom(void) { return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizing"); }

static candle_status model_into(const candle_tokenizer *t, const char *s, size_t n, ivec *a) {
    if (!iv_reserve(a, 16)) return oom();
    for (;;) {
        tok_out o = {a->v + a->n, a->cap - a->n, 0, 0};
        candle_status st = hf_model_encode(t, s, n, &o);
        if (st != CANDLE_OK) return st;
        if (o.n <= o.cap) {
            a->n += o.n;
            return CANDLE_OK;
        }
        if (!iv_reserve(a, o.n)) return oom();
    }
}

static bool is_ws(uint32_t c) { return tok_unicode_is_space(c); }
static bool is_alnum(uint32_t c) { return (tok_unicode_category(c) & (UCAT_L | UCAT_N)) != 0; }

static uint32_t last_cp(const char *s, size_t n, size_t *k) {
    size_t j = n;
    while (j > 0 && ((unsigned char)s[j - 1] & 0xC0) == 0x80 && n - j < 3) j--;
    if (j > 0) j--;
    uint32_t cp;
    tok_utf8_decode(s + j, n - j, &cp);
    *k = n - j;
    return cp;
}

/* The added token (of the given normalized kind) starting at s[i], the
 * longest, or NULL. */
static const hf_added *match_at(const hf_tok *h, const char *s, size_t n, size_t i, bool normalized,
                                bool parse_special) {
    unsigned char b = (unsigned char)s[i];
    for (int k = h->bucket[b]; h->by_byte && k < h->bucket[b + 1]; k++) {
        const hf_added *a = &h->added[h->by_byte[k]];
        if (a->normalized != normalized || (a->special && !parse_special)) continue;
        if (a->len <= n - i && !memcmp(s + i, a->text, a->len)) return a;
    }
    return NULL;
}

typedef candle_status (*span_fn)(const candle_tokenizer *t, const char *s, size_t n, bool first0, ivec *a);

/* Splits s on added tokens, calling f on the stretches between them. */
static candle_status split_added(const candle_tokenizer *t, const char *s, size_t n, bool first0,
                                 bool normalized, bool parse_special, span_fn f, ivec *a) {
    const hf_tok *h = t->hf;
    size_t done = 0;
    candle_status st = CANDLE_OK;
    for (size_t i = 0; st == CANDLE_OK && i < n && !iv_done(a);) {
        const hf_added *m = match_at(h, s, n, i, normalized, parse_special);
        if (!m) {
            i++;
            continue;
        }
        size_t start = i, stop = i + m->len, k;
        i = stop;
        if (m->single_word) {
            bool before = start == 0 || !is_alnum(last_cp(s, start, &k));
            uint32_t cp = 0;
            if (stop < n) tok_utf8_decode(s + stop, n - stop, &cp);
            bool after = stop == n || !is_alnum(cp);
            if (!before || !after) continue;
        }
        if (m->lstrip) {
            while (start > done && is_ws(last_cp(s, start, &k))) start -= k;
        }
        if (m->rstrip) {
            while (stop < n) {
                uint32_t cp;
                size_t cl = tok_utf8_decode(s + stop, n - stop, &cp);
                if (!is_ws(cp)) break;
                stop += cl;
            }
            i = stop;
        }
        if (start > done) st = f(t, s + done, start - done, first0 && done == 0, a);
        if (st == CANDLE_OK && !iv_reserve(a, 1)) st = oom();
        if (st == CANDLE_OK) a->v[a->n++] = m->id;
        done = stop;
    }
    if (st == CANDLE_OK && done < n && !iv_done(a)) st = f(t, s + done, n - done, first0 && done == 0, a);
    return st;
}

static candle_status pieces(const candle_tokenizer *t, const char *s, size_t n, bool first0, ivec *a) {
    hf_list l = {0};
    candle_status st = hf_pretokenize(t->hf->pre, s, n, first0, &l) ? CANDLE_OK : oom();
    for (size_t i = 0; st == CANDLE_OK && i < l.n && !iv_done(a); i++) st = model_into(t, hf_list_at(&l, i), l.len[i], a);
    hf_list_free(&l);
    return st;
}

/* Only tokens marked special are affected by parse_special, so this pass
 * can always match. */
static candle_status pieces_after_norm(const candle_tokenizer *t, const char *s, size_t n, bool first0,
                                       ivec *a) {
    return split_added(t, s, n, first0, true, true, pieces, a);
}

static candle_status normalized(const candle_tokenizer *t, const char *s, size_t n, bool first0, ivec *a) {
    hf_str norm = {0};
    candle_status st = hf_normalize(t->hf->norm, s, n, &norm) ? CANDLE_OK : oom();
    if (st == CANDLE_OK) st = pieces_after_norm(t, norm.p, norm.n, first0, a);
    hf_str_free(&norm);
    return st;
}

static candle_status encode_one(const candle_tokenizer *t, const char *text, size_t len,
                                bool parse_special, ivec *a) {
    hf_str clean = {0};
    if (!hf_utf8_lossy(text ? text : "", len, &clean)) return oom();
    candle_status st = split_added(t, clean.p, clean.n, true, false, parse_special, normalized, a);
    hf_str_free(&clean);
    return st;
}

candle_status hf_encode(const candle_tokenizer *t, const char *text, size_t len, const char *text_b,
                        size_t len_b, bool pair, bool add_special, bool parse_special, tok_out *o,
                        int32_t *type_ids) {
    ivec a = {.stop = o->stop}, b = {.stop = o->stop};
    candle_status st = encode_one(t, text, len, parse_special, &a);
    if (st == CANDLE_OK && pair) st = encode_one(t, text_b, len_b, parse_special, &b);
    if (st == CANDLE_OK) st = hf_post_process(t, a.v, a.n, b.v, b.n, pair, add_special, o, type_ids);
    tok_tmp_free(a.v);
    tok_tmp_free(b.v);
    return st;
}
