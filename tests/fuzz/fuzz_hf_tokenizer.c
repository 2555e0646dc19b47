/* libFuzzer target for the tokenizer.json reader and pipeline: an input is
 *   [u32 LE length n][n bytes of tokenizer.json][u8 flags][text]
 * (n clamped to what is there; flags bit 0 add_special, bit 1
 * parse_special, bit 2 render_special). A tokenizer that loads encodes the
 * text (alone and as both halves of a pair), decodes and streams it back.
 * Beyond "no crash": load fails with an error message or gives a
 * tokenizer; encode gives the same ids whatever the capacity, writes none
 * past it, and every id is in the vocabulary; encode_limit stops past its
 * limit with the full encoding's first ids; decode honours the buffer
 * contract; the streaming detokenizer yields only valid UTF-8. The
 * tokenizer.ggml.* keys candle quantize derives from the file are written,
 * read back as a GGUF and exercised the same way (or say why there are none).
 * Seeds: tests/fuzz/gen_hf_tokenizer_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "formats/quantize-impl.h"
#include "fuzz-check.h"

#define MAX_TEXT 512

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

static void exercise(const candle_tokenizer *t, const char *text, size_t len, uint8_t flags) {
    bool add = flags & 1, parse = flags & 2, render = flags & 4;
    int64_t n = 0;
    if (candle_tokenizer_encode(t, text, len, add, parse, NULL, 0, &n) != CANDLE_OK) return;
    check(n >= 0 && n < 1 << 20);
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    int64_t n2 = 0;
    ids[n] = -12345; /* canary */
    check(candle_tokenizer_encode(t, text, len, add, parse, ids, n, &n2) == CANDLE_OK && n2 == n);
    check(ids[n] == -12345);
    int32_t nv = candle_tokenizer_n_vocab(t);
    for (int64_t i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < nv);
    /* a limit: past it the encoder stops, with the full encoding's first ids */
    int64_t lim = n / 2, nl = -1;
    int32_t *part = malloc((size_t)(n + 1) * sizeof *part);
    if (part) {
        check(candle_tokenizer_encode_limit(t, text, len, add, parse, lim, part, n + 1, &nl) == CANDLE_OK);
        check(n <= lim ? nl == n : nl > lim && nl <= n && !memcmp(part, ids, (size_t)lim * sizeof *ids));
        free(part);
    }
    size_t dl = 0;
    candle_status st = candle_tokenizer_decode(t, ids, n, render, NULL, 0, &dl);
    check(st == CANDLE_ERR_INVALID_ARG || (st == CANDLE_OK && n == 0) || st == CANDLE_OK);
    char *buf = malloc(dl + 1);
    size_t dl2 = 0;
    check(candle_tokenizer_decode(t, ids, n, render, buf, dl + 1, &dl2) == CANDLE_OK && dl2 == dl);
    free(buf);
    candle_detok d = {.strip_space = true};
    size_t cap = candle_tokenizer_detok_bufsize(t);
    char *piece = malloc(cap);
    for (int64_t i = 0; i < n; i++) {
        size_t pl;
        if (candle_tokenizer_detok_push(t, &d, ids[i], render, piece, cap, &pl) == CANDLE_OK)
            check(valid_utf8(piece, pl));
    }
    free(piece);
    int64_t np = 0;
    size_t half = len / 2;
    if (candle_tokenizer_encode_pair(t, text, half, text + half, len - half, add, NULL, 0, &np, NULL) ==
        CANDLE_OK) {
        int32_t *pids = malloc((size_t)(np + 1) * sizeof *pids), *types = malloc((size_t)(np + 1) * sizeof *types);
        check(candle_tokenizer_encode_pair(t, text, half, text + half, len - half, add, pids, np, &n2, types) ==
              CANDLE_OK && n2 == np);
        for (int64_t i = 0; i < np; i++) check(pids[i] >= 0 && pids[i] < nv && types[i] >= 0);
        free(pids);
        free(types);
    }
    free(ids);
}

static void ggml_keys(const char *json, size_t n, const char *text, size_t tl, uint8_t flags) {
    candle_gguf_writer *w = NULL;
    char why[160];
    void *mem = NULL;
    size_t len = 0;
    if (candle_gguf_writer_init(&w) != CANDLE_OK) return;
    candle_status st = cquant_write_ggml_vocab_memory(w, json, n, why, sizeof why);
    check(st == CANDLE_OK || candle_last_errmsg()[0]);
    candle_gguf *g = NULL;
    candle_tokenizer *t = NULL;
    if (st == CANDLE_OK && !why[0] && candle_gguf_writer_write_memory(w, &mem, &len) == CANDLE_OK &&
        candle_gguf_open_memory(&g, mem, len) == CANDLE_OK && candle_tokenizer_from_gguf(&t, g) == CANDLE_OK)
        exercise(t, text, tl, flags);
    candle_tokenizer_free(t);
    candle_gguf_close(g);
    free(mem);
    candle_gguf_writer_free(w);
    candle_clear_last_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    if (n > size - 4) n = (uint32_t)(size - 4);
    const char *json = (const char *)data + 4;
    size_t rest = size - 4 - n;
    uint8_t flags = rest ? data[4 + n] : 3;
    const char *text = rest > 1 ? (const char *)data + 5 + n : "";
    size_t tl = rest > 1 ? rest - 1 : 0;
    if (tl > MAX_TEXT) tl = MAX_TEXT;
    candle_tokenizer *t = NULL;
    candle_status st = candle_tokenizer_from_hf_memory(&t, json, n, NULL, 0, "fuzz.json");
    if (st != CANDLE_OK) {
        check(t == NULL && candle_last_errmsg()[0]);
        candle_clear_last_error();
        return 0;
    }
    exercise(t, text, tl, flags);
    candle_tokenizer_free(t);
    candle_clear_last_error();
    ggml_keys(json, n, text, tl, flags);
    return 0;
}
