/* libFuzzer target for the tokenizers: an input is
 *   [u32 LE length n][n bytes of GGUF][u8 flags][text]
 * (n clamped to what is there; flags bit 0 add_special, bit 1 parse_special,
 * bit 2 render_special). The GGUF's tokenizer.ggml.* metadata builds a
 * SentencePiece, byte-level BPE or WordPiece tokenizer (or fails with an
 * error); the text is encoded, decoded and streamed back. Beyond "no crash":
 * - encode gives the same ids whatever the capacity, writes none past it,
 *   and every id is in the vocabulary;
 * - a text of len bytes never encodes to fewer than len / max_token_bytes
 *   ids (where that is not 0), and encode_limit stops past its limit with
 *   the full encoding's first ids;
 * - token_bytes and decode honour the buffer contract of tokenizer.h: a
 *   too-small buffer is CANDLE_ERR_INVALID_ARG, nothing is written past cap,
 *   *len is the full count, and decode is the token pieces concatenated;
 * - the streaming detokenizer yields only valid UTF-8 and, end to end, the
 *   decoded text with each byte outside a well-formed character as U+FFFD;
 *   a too-small buffer leaves its state unchanged;
 * - invalid ids are rejected by token_bytes, decode and detok_push;
 * - decode(encode(text)) == text for byte-level BPE and SentencePiece when
 *   the format promises it (see lossless()).
 * Seeds: tests/fuzz/gen_tokenizer_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "tokenizer/tokenizer-impl.h"
#include "fuzz-check.h"

#define MAX_TEXT 1024 /* longer texts cost time per input more than they find */
#define CANARY 0xA5

/* A failed property names itself before the trap libFuzzer reports. */
static bool canary_intact(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != CANARY) return false;
    return true;
}

/* Length of the well-formed UTF-8 character at s[0..n) (Unicode table 3-7),
 * or 0: written apart from the library's decoder, to check it. */
static size_t utf8_char(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return 0;
    if (len > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t cl = utf8_char((const uint8_t *)s + i, n - i);
        if (!cl) return false;
        i += cl;
    }
    return true;
}

/* s with each byte outside a well-formed character as U+FFFD; out holds 3n. */
static size_t replace_invalid(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = utf8_char((const uint8_t *)s + i, n - i);
        if (!cl) {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        } else {
            memcpy(out + k, s + i, cl);
            k += cl;
            i += cl;
        }
    }
    return k;
}

/* encode into a small buffer with a canary past it, then again with room
 * for all when that was too small: encoding is what costs time here. */
static int32_t *encode(const candle_tokenizer *t, const char *text, size_t len, bool add,
                       bool parse, int64_t *n) {
    enum { SMALL = 24 };
    int32_t *ids = malloc((SMALL + 4) * sizeof *ids);
    if (!ids) return NULL;
    memset(ids, CANARY, (SMALL + 4) * sizeof *ids);
    int64_t n0 = -1;
    candle_status s = candle_tokenizer_encode(t, text, len, add, parse, ids, SMALL, &n0);
    if (s != CANDLE_OK) {
        check(s == CANDLE_ERR_OOM);
        free(ids);
        return NULL;
    }
    check(n0 >= 0 && (len || n0 <= 2));
    /* WordPiece may use the room past n0 as scratch (a word that ends up
     * [UNK]); past cap nothing may be written. */
    check(canary_intact((const uint8_t *)(ids + SMALL), 4 * sizeof *ids));
    if (n0 > SMALL) {
        int32_t *all = malloc((size_t)(n0 + 1) * sizeof *ids);
        if (!all) {
            free(ids);
            return NULL;
        }
        all[n0] = 0x5A5A5A5A;
        check(candle_tokenizer_encode(t, text, len, add, parse, all, n0, n) == CANDLE_OK && *n == n0);
        check(all[n0] == 0x5A5A5A5A && !memcmp(all, ids, SMALL * sizeof *ids));
        free(ids);
        ids = all;
    }
    *n = n0;
    for (int64_t i = 0; i < n0; i++) check(ids[i] >= 0 && ids[i] < candle_tokenizer_n_vocab(t));
    /* the length bound: more than n x max_token_bytes bytes never make n ids */
    size_t per = candle_tokenizer_max_token_bytes(t);
    check(!per || (size_t)n0 * per >= len);
    /* a limit: past it the encoder stops, with the full encoding's first ids */
    int64_t lim = n0 / 2, nl = -1;
    int32_t *part = malloc((size_t)(n0 + 1) * sizeof *part);
    if (part) {
        check(candle_tokenizer_encode_limit(t, text, len, add, parse, lim, part, n0 + 1, &nl) == CANDLE_OK);
        check(n0 <= lim ? nl == n0 : nl > lim && nl <= n0 && !memcmp(part, ids, (size_t)lim * sizeof *ids));
        free(part);
    }
    return ids;
}

/* Appends n bytes to a growing buffer; false when out of memory. */
typedef struct gbuf {
    char *p;
    size_t n, cap;
} gbuf;

static bool gput(gbuf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = 2 * (b->n + n) + 64;
        char *np = realloc(b->p, cap);
        if (!np) return false;
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
    return true;
}

/* The bytes of each piece, with the contract at cap 0, too small, exact
 * and +1. */
static bool pieces(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool render,
                   gbuf *out) {
    for (int64_t i = 0; i < n; i++) {
        size_t len = (size_t)-1, l2;
        candle_status s = candle_tokenizer_token_bytes(t, ids[i], render, NULL, 0, &len);
        check(len != (size_t)-1 && (s == CANDLE_OK) == (len == 0));
        if (s != CANDLE_OK) check(s == CANDLE_ERR_INVALID_ARG);
        uint8_t *buf = malloc(len + 8);
        if (!buf) return false;
        memset(buf, CANARY, len + 8);
        if (len) {
            check(candle_tokenizer_token_bytes(t, ids[i], render, (char *)buf, len - 1, &l2) ==
                      CANDLE_ERR_INVALID_ARG && l2 == len);
            check(canary_intact(buf + len - 1, 9));
        }
        check(candle_tokenizer_token_bytes(t, ids[i], render, (char *)buf, len, &l2) == CANDLE_OK &&
              l2 == len && canary_intact(buf + len, 8));
        check(candle_tokenizer_token_bytes(t, ids[i], render, (char *)buf, len + 1, &l2) ==
                  CANDLE_OK && l2 == len && buf[len] == 0);
        bool ok = gput(out, buf, len);
        free(buf);
        if (!ok) return false;
    }
    return true;
}

/* decode vs the pieces; returns the decoded text (malloc'd), *len its size. */
static char *decode(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool render,
                    size_t *len) {
    size_t full = (size_t)-1, l2;
    candle_status s = candle_tokenizer_decode(t, ids, n, render, NULL, 0, &full);
    check(s == CANDLE_ERR_INVALID_ARG && full != (size_t)-1);
    uint8_t *buf = malloc(full + 9);
    if (!buf) return NULL;
    memset(buf, CANARY, full + 9);
    if (full) {
        check(candle_tokenizer_decode(t, ids, n, render, (char *)buf, full, &l2) ==
                  CANDLE_ERR_INVALID_ARG && l2 == full && buf[full - 1] == 0);
        check(canary_intact(buf + full, 9));
        memset(buf, CANARY, full + 9);
        check(candle_tokenizer_decode(t, ids, n, render, (char *)buf, 1, &l2) ==
              CANDLE_ERR_INVALID_ARG);
        check(buf[0] == 0 && canary_intact(buf + 1, full + 8));
    }
    check(candle_tokenizer_decode(t, ids, n, render, (char *)buf, full + 1, &l2) == CANDLE_OK &&
          l2 == full && buf[full] == 0 && canary_intact(buf + full + 1, 8));
    *len = full;
    return (char *)buf;
}

/* Streams ids into out: every chunk valid UTF-8 and NUL-terminated. */
static bool stream(const candle_tokenizer *t, const int32_t *ids, int64_t n, bool render,
                   gbuf *out) {
    size_t cap = candle_tokenizer_detok_bufsize(t), cl;
    char *buf = malloc(cap);
    if (!buf) return false;
    candle_detok d = {.strip_space = true};
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) {
        candle_detok before = d;
        /* Only an empty piece with nothing held back fits in 1 byte. */
        candle_status s = candle_tokenizer_detok_push(t, &d, ids[i], render, buf, 1, &cl);
        if (s == CANDLE_OK) {
            check(cl == 0 && buf[0] == 0 && d.n_pending == before.n_pending);
            continue;
        }
        check(s == CANDLE_ERR_INVALID_ARG && !memcmp(&before, &d, sizeof d));
        check(candle_tokenizer_detok_push(t, &d, ids[i], render, buf, cap, &cl) == CANDLE_OK);
        check(cl < cap && buf[cl] == 0 && valid_utf8(buf, cl) && d.n_pending < 4);
        ok = gput(out, buf, cl);
    }
    if (ok) {
        check(candle_tokenizer_detok_flush(t, &d, buf, cap, &cl) == CANDLE_OK && d.n_pending == 0);
        check(cl < cap && buf[cl] == 0 && valid_utf8(buf, cl));
        ok = gput(out, buf, cl);
    }
    free(buf);
    return ok;
}

static void check_invalid_ids(const candle_tokenizer *t) {
    const int32_t bad[] = {-1, candle_tokenizer_n_vocab(t), INT32_MAX, INT32_MIN};
    char buf[64];
    size_t len;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        candle_detok d = {0};
        check(candle_tokenizer_token_bytes(t, bad[i], true, buf, sizeof buf, &len) ==
              CANDLE_ERR_INVALID_ARG);
        check(candle_tokenizer_decode(t, &bad[i], 1, true, buf, sizeof buf, &len) ==
              CANDLE_ERR_INVALID_ARG);
        check(candle_tokenizer_detok_push(t, &d, bad[i], true, buf, sizeof buf, &len) ==
                  CANDLE_ERR_INVALID_ARG && d.n_pending == 0);
        check(!candle_tokenizer_is_eog(t, bad[i]) || bad[i] == candle_tokenizer_n_vocab(t));
    }
    int32_t n = candle_tokenizer_n_vocab(t), bos = candle_tokenizer_bos(t),
            eos = candle_tokenizer_eos(t);
    check(n > 0 && bos >= -1 && bos < n && eos >= -1 && eos < n);
    check(!candle_tokenizer_is_eog(t, n) && !candle_tokenizer_is_eog(t, -1));
}

/* Printable ASCII but space: the same bytes as raw text and as GPT-2
 * byte-level text. */
static bool ascii_graphic(const tok_token *tk) {
    for (uint32_t i = 0; i < tk->len; i++)
        if (tk->text[i] < 33 || tk->text[i] > 126) return false;
    return true;
}

/* Whether decode(encode(text)) must give text back: byte-level BPE keeps
 * every byte, SentencePiece every byte but U+2581 (it stands for ' ') when
 * the vocabulary has the marker piece. Not WordPiece (lowercased, accents
 * and controls dropped). Only when the ids are plain pieces, or for BPE
 * special tokens whose text reads the same raw and byte-level (so it does
 * not matter whether the partition or a merge produced them) and is
 * rendered: otherwise a special token can stand for other text, and
 * SentencePiece puts a space prefix after one. Never the unknown token or
 * a token that strips whitespace (phi-3); a byte with no token of its own
 * is dropped when the vocabulary has no unknown token either. */
static bool lossless(const candle_tokenizer *t, const char *text, size_t len, bool parse,
                     bool render, const int32_t *ids, int64_t n) {
    if (t->kind == TOK_WPM || (parse && t->kind != TOK_BPE)) return false;
    if (t->kind == TOK_SPM) {
        if (candle_tokenizer_find(t, "\xe2\x96\x81") < 0 || memmem(text, len, "\xe2\x96\x81", 3))
            return false;
    }
    for (size_t i = 0; t->unk < 0 && i < len; i++)
        if (t->byte_ids[(uint8_t)text[i]] < 0) return false;
    for (int64_t i = 0; i < n; i++) {
        const tok_token *tk = &t->tokens[ids[i]];
        if (ids[i] == t->unk || tk->strip) return false;
        bool ok = tk->type == TT_NORMAL || (t->kind == TOK_SPM && tk->type == TT_BYTE);
        if (t->kind == TOK_BPE && tk->len && ascii_graphic(tk))
            ok |= tk->type == TT_USER ||
                  (render && (tk->type == TT_CONTROL || tk->type == TT_UNKNOWN));
        if (!ok) return false;
    }
    return true;
}

/* FUZZ_VERBOSE=1: how many inputs reached each check, at exit. */
static long n_built[3], n_round_trip[3];

static void report(void) {
    fprintf(stderr, "built spm/bpe/wpm: %ld/%ld/%ld, round trips checked: %ld/%ld/%ld\n",
            n_built[0], n_built[1], n_built[2], n_round_trip[0], n_round_trip[1], n_round_trip[2]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (getenv("FUZZ_VERBOSE")) atexit(report);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint32_t n;
    memcpy(&n, data, 4);
    size_t glen = n < size - 4 ? n : size - 4;
    const uint8_t *rest = data + 4 + glen;
    size_t rlen = size - 4 - glen;
    uint8_t flags = rlen ? rest[0] : 0;
    const char *text = rlen ? (const char *)rest + 1 : "";
    size_t tlen = rlen ? rlen - 1 : 0;
    if (tlen > MAX_TEXT) tlen = MAX_TEXT;
    bool add = flags & 1, parse = flags & 2, render = flags & 4;

    candle_gguf *g = NULL;
    if (candle_gguf_open_memory(&g, data + 4, glen) != CANDLE_OK) return 0;
    candle_tokenizer *t = NULL;
    candle_status s = candle_tokenizer_from_gguf(&t, g);
    candle_gguf_close(g); /* the tokenizer must not need it any more */
    if (s != CANDLE_OK) {
        check(!t && (s == CANDLE_ERR_FORMAT || s == CANDLE_ERR_UNSUPPORTED || s == CANDLE_ERR_OOM));
        return 0;
    }
    check_invalid_ids(t);
    n_built[t->kind]++;

    int64_t n_ids = 0;
    int32_t *ids = encode(t, text, tlen, add, parse, &n_ids);
    if (!ids) goto out;
    size_t dlen = 0;
    char *dec = decode(t, ids, n_ids, render, &dlen);
    gbuf pcs = {0}, str = {0};
    if (dec && pieces(t, ids, n_ids, render, &pcs)) {
        /* decode is the pieces, less the space the encoder put first */
        bool strip = ((t->kind == TOK_SPM && t->add_space_prefix) || t->kind == TOK_WPM) &&
                     pcs.n && pcs.p[0] == ' ';
        check(dlen == pcs.n - strip && (!dlen || !memcmp(dec, pcs.p + strip, dlen)));
    }
    if (dec && stream(t, ids, n_ids, render, &str)) {
        char *want = malloc(3 * dlen + 1);
        if (want) {
            size_t wl = replace_invalid(dec, dlen, want);
            check(wl == str.n && (!wl || !memcmp(want, str.p, wl)));
            free(want);
        }
    }
    bool rt = dec && !add && lossless(t, text, tlen, parse, render, ids, n_ids);
    n_round_trip[t->kind] += rt;
    if (rt && (dlen != tlen || (tlen && memcmp(dec, text, tlen)))) {
        fprintf(stderr, "kind %d, text", (int)t->kind);
        for (size_t i = 0; i < tlen; i++) fprintf(stderr, " %02x", (uint8_t)text[i]);
        fprintf(stderr, "\ndecoded");
        for (size_t i = 0; i < dlen; i++) fprintf(stderr, " %02x", (uint8_t)dec[i]);
        fprintf(stderr, "\nids");
        for (int64_t i = 0; i < n_ids; i++)
            fprintf(stderr, " %d'%s'", (int)ids[i], t->tokens[ids[i]].text);
        check(!"decode(encode(text)) == text");
    }
    free(dec);
    free(pcs.p);
    free(str.p);
    free(ids);
out:
    candle_tokenizer_free(t);
    return 0;
}
