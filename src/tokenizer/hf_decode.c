/* tokenizer.json decoders: token strings to text, each decoder turning
 * the list of strings into another as the `tokenizers` library's
 * decode_chain does; the final strings are joined. In stream mode (one
 * token at a time, for detokenization) bytes stay raw and a token is
 * never treated as the first or last. */
#include <stdlib.h>
#include <string.h>

#include "hf-impl.h"
#include "unicode-impl.h"

static bool swap_in(hf_list *cur, hf_list *next) {
    hf_list_free(cur);
    *cur = *next;
    memset(next, 0, sizeof *next);
    return true;
}

static bool bytelevel(hf_list *cur, bool stream) {
    hf_str raw = {0}, out = {0};
    bool ok = hf_str_add(&raw, "", 0);
    for (size_t i = 0; ok && i < cur->n; i++) {
        const char *s = hf_list_at(cur, i);
        size_t n = cur->len[i], mark = raw.n;
        bool all = true;
        for (size_t j = 0; ok && all && j < n;) {
            uint32_t cp;
            j += tok_utf8_decode(s + j, n - j, &cp);
            int b = tok_cp_to_byte(cp);
            if (b < 0) all = false;
            else {
                char c = (char)b;
                ok = hf_str_add(&raw, &c, 1);
            }
        }
        if (!all) {
            raw.n = mark;
            ok = hf_str_add(&raw, s, n);
        }
    }
    if (ok && !stream) ok = hf_utf8_lossy(raw.p, raw.n, &out);
    hf_list next = {0};
    ok = ok && hf_list_add(&next, stream ? raw.p : out.p, stream ? raw.n : out.n, false);
    hf_str_free(&raw);
    hf_str_free(&out);
    if (ok) swap_in(cur, &next);
    hf_list_free(&next);
    return ok;
}

static const char *const cleanups[][2] = {
    {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
    {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

static bool replace_all(hf_str *s, const char *from, size_t fl, const char *to, size_t tl) {
    hf_str out = {0};
    bool ok = hf_str_add(&out, "", 0);
    size_t pos = 0;
    for (;;) {
        const char *hit = fl ? memmem(s->p + pos, s->n - pos, from, fl) : NULL;
        if (!hit) break;
        size_t h = (size_t)(hit - s->p);
        ok = ok && hf_str_add(&out, s->p + pos, h - pos) && hf_str_add(&out, to, tl);
        pos = h + fl;
    }
    ok = ok && hf_str_add(&out, s->p + pos, s->n - pos);
    if (ok) {
        hf_str_free(s);
        *s = out;
    } else hf_str_free(&out);
    return ok;
}

typedef bool (*tok_fn)(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *out);

/* Applies f to each token. */
static bool per_token(const hf_dec *d, hf_list *cur, bool stream, tok_fn f) {
    hf_list next = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < cur->n; i++) {
        hf_str o = {0};
        ok = hf_str_add(&o, "", 0) && f(d, i, cur->n, stream, hf_list_at(cur, i), cur->len[i], &o) &&
             hf_list_add(&next, o.p, o.n, false);
        hf_str_free(&o);
    }
    if (ok) swap_in(cur, &next);
    hf_list_free(&next);
    return ok;
}

static bool wordpiece(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *o) {
    (void)n;
    bool ok = true;
    if (i || stream) {
        if (len >= d->prefix_len && !memcmp(s, d->prefix, d->prefix_len)) {
            s += d->prefix_len;
            len -= d->prefix_len;
        } else ok = hf_str_add(o, " ", 1);
    }
    ok = ok && hf_str_add(o, s, len);
    for (size_t k = 0; ok && d->cleanup && k < sizeof cleanups / sizeof cleanups[0]; k++)
        ok = replace_all(o, cleanups[k][0], strlen(cleanups[k][0]), cleanups[k][1], strlen(cleanups[k][1]));
    return ok;
}

static bool metaspace(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *o) {
    (void)n;
    bool drop = i == 0 && !stream && d->prepend != HP_NEVER;
    for (size_t j = 0; j < len;) {
        if (len - j >= d->repl_len && !memcmp(s + j, d->repl, d->repl_len)) {
            if (!drop && !hf_str_add(o, " ", 1)) return false;
            j += d->repl_len;
        } else {
            if (!hf_str_add(o, s + j, 1)) return false;
            j++;
        }
    }
    return true;
}

static bool bpe_suffix(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *o) {
    bool last = i + 1 == n && !stream;
    return hf_str_add(o, s, len) && replace_all(o, d->prefix, d->prefix_len, last ? "" : " ", last ? 0 : 1);
}

static bool strip(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *o) {
    (void)i, (void)n;
    if (stream) return hf_str_add(o, s, len);
    size_t nch = 0, start_cut = 0, stop_cut = 0;
    for (size_t j = 0; j < len; j++) nch += ((unsigned char)s[j] & 0xC0) != 0x80;
    uint32_t *cps = malloc((nch + 1) * sizeof *cps);
    if (!cps) return false;
    for (size_t j = 0, k = 0; j < len; k++) j += tok_utf8_decode(s + j, len - j, &cps[k]);
    while (start_cut < nch && (int64_t)start_cut < d->start && cps[start_cut] == d->strip_cp) start_cut++;
    while (stop_cut < nch && (int64_t)stop_cut < d->stop && cps[nch - 1 - stop_cut] == d->strip_cp) stop_cut++;
    /* As the reference: it takes (bytes - cuts) characters after the
     * start cut, so the stop cut only bites on ASCII tokens. */
    size_t take = len >= start_cut + stop_cut ? len - start_cut - stop_cut : 0;
    bool ok = true;
    for (size_t k = start_cut; ok && k < nch && k - start_cut < take; k++) ok = hf_str_cp(o, cps[k]);
    free(cps);
    return ok;
}

static bool replace(const hf_dec *d, size_t i, size_t n, bool stream, const char *s, size_t len, hf_str *o) {
    (void)i, (void)n, (void)stream;
    size_t *m, nm;
    if (!hf_pattern_find(&d->pat, s, len, &m, &nm)) return false;
    size_t pos = 0;
    bool ok = true;
    for (size_t k = 0; ok && k < nm; k += 2) {
        ok = hf_str_add(o, s + pos, m[k] - pos) && hf_str_add(o, d->content, d->content_len);
        pos = m[k + 1];
    }
    tok_tmp_free(m);
    return ok && hf_str_add(o, s + pos, len - pos);
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>' || hexv(s[3]) < 0 || hexv(s[4]) < 0) return -1;
    return hexv(s[3]) * 16 + hexv(s[4]);
}

/* Bytes gathered from <0xXX> tokens: their text when it is valid UTF-8,
 * else one U+FFFD per byte (raw in stream mode). */
static bool flush_bytes(hf_list *next, hf_str *bytes, bool stream) {
    if (!bytes->n) return true;
    hf_str chk = {0};
    bool ok = stream || hf_utf8_lossy(bytes->p, bytes->n, &chk);
    bool valid = stream || (ok && chk.n == bytes->n && !memcmp(chk.p, bytes->p, bytes->n));
    hf_str_free(&chk);
    if (ok && valid) ok = hf_list_add(next, bytes->p, bytes->n, false);
    for (size_t k = 0; ok && !valid && k < bytes->n; k++) ok = hf_list_add(next, "\xef\xbf\xbd", 3, false);
    bytes->n = 0;
    return ok;
}

static bool bytefallback(hf_list *cur, bool stream) {
    hf_list next = {0};
    hf_str bytes = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < cur->n; i++) {
        int b = byte_token(hf_list_at(cur, i), cur->len[i]);
        if (b >= 0) {
            char c = (char)b;
            ok = hf_str_add(&bytes, &c, 1);
            continue;
        }
        ok = flush_bytes(&next, &bytes, stream) && hf_list_add(&next, hf_list_at(cur, i), cur->len[i], false);
    }
    ok = ok && flush_bytes(&next, &bytes, stream);
    hf_str_free(&bytes);
    if (ok) swap_in(cur, &next);
    hf_list_free(&next);
    return ok;
}

static bool fuse(hf_list *cur) {
    hf_list next = {0};
    bool ok = hf_list_add(&next, cur->buf.p ? cur->buf.p : "", cur->buf.n, false);
    /* The buffer holds the tokens back to back, in order. */
    if (ok) swap_in(cur, &next);
    hf_list_free(&next);
    return ok;
}

static bool apply(const hf_dec *d, hf_list *cur, bool stream) {
    switch (d->type) {
    case HD_SEQUENCE:
        for (int i = 0; i < d->n_seq; i++)
            if (!apply(&d->seq[i], cur, stream)) return false;
        return true;
    case HD_BYTELEVEL: return bytelevel(cur, stream);
    case HD_WORDPIECE: return per_token(d, cur, stream, wordpiece);
    case HD_METASPACE: return per_token(d, cur, stream, metaspace);
    case HD_BPE: return per_token(d, cur, stream, bpe_suffix);
    case HD_BYTEFALLBACK: return bytefallback(cur, stream);
    case HD_FUSE: return fuse(cur);
    case HD_STRIP: return per_token(d, cur, stream, strip);
    case HD_REPLACE: return per_token(d, cur, stream, replace);
    }
    return true;
}

static bool is_skipped(const candle_tokenizer *t, int32_t id, bool skip_special) {
    return skip_special && t->tokens[id].type == TT_CONTROL;
}

static bool run(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special,
                bool stream, hf_str *out) {
    hf_list cur = {0};
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++)
        if (!is_skipped(t, ids[i], skip_special))
            ok = hf_list_add(&cur, t->tokens[ids[i]].text, t->tokens[ids[i]].len, false);
    if (ok && t->hf->dec) ok = apply(t->hf->dec, &cur, stream);
    out->n = 0;
    ok = ok && hf_str_add(out, "", 0);
    for (size_t i = 0; ok && i < cur.n; i++) {
        if (!t->hf->dec && i && !hf_str_add(out, " ", 1)) ok = false;
        ok = ok && hf_str_add(out, hf_list_at(&cur, i), cur.len[i]);
    }
    hf_list_free(&cur);
    return ok;
}

bool hf_decode(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, hf_str *out) {
    return run(t, ids, n, skip_special, false, out);
}

size_t hf_piece_bytes(const candle_tokenizer *t, int32_t id, bool render_special, char *out, size_t cap) {
    hf_str s = {0};
    size_t n = 0;
    if (run(t, &id, 1, !render_special, true, &s)) {
        n = s.n;
        if (out && cap) memcpy(out, s.p, n < cap ? n : cap);
    }
    hf_str_free(&s);
    return n;
}

static bool strips(const hf_dec *d) {
    if (!d) return false;
    if (d->type == HD_SEQUENCE) {
        for (int i = 0; i < d->n_seq; i++)
            if (strips(&d->seq[i])) return true;
        return false;
    }
    return d->type == HD_WORDPIECE || (d->type == HD_METASPACE && d->prepend != HP_NEVER) ||
           (d->type == HD_STRIP && d->start > 0 && d->strip_cp == ' ');
}

bool hf_strips_prefix(const candle_tokenizer *t) { return strips(t->hf->dec); }
