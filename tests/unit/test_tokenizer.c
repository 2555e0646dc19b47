/* Tokenizers against the reference tokenizations of ../shared/data/tokenizers
 * (*.inp inputs separated by "\n__ggml_vocab_test__\n", one line of ids per
 * input in *.out), decode round trips, UTF-8-safe streaming, the regex
 * engine behind the BPE pre-tokenizers, and error paths. */
#include <stdint.h>

#include "test.h"
#include "tokenizer/regex-impl.h"
#include "tokenizer/tokenizer-impl.h"
#include "tokenizer/unicode-impl.h"

#define SEP "\n__ggml_vocab_test__\n"

typedef struct vocab_case {
    const char *name;
    bool claimed;  /* every input must match */
    bool lossless; /* decode(encode(x)) == x */
} vocab_case;

static const vocab_case vocabs[] = {
    {"llama-spm", true, true},      {"phi-3", true, true},  {"gpt-2", true, true},
    {"deepseek-coder", true, true}, {"falcon", true, true}, {"bert-bge", true, false},
};

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (buf && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[sz] = 0;
    *n = (size_t)sz;
    return buf;
}

static candle_tokenizer *load(const char *rel) {
    char path[1024];
    candle_gguf *g = NULL;
    candle_tokenizer *t = NULL;
    test_path(rel, path, sizeof path);
    if (candle_gguf_open(&g, path, NULL) != CANDLE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, candle_last_errmsg());
        return NULL;
    }
    if (candle_tokenizer_from_gguf(&t, g) != CANDLE_OK)
        fprintf(stderr, "%s: %s\n", path, candle_last_errmsg());
    candle_gguf_close(g); /* the tokenizer keeps its own copy */
    return t;
}

/* ids of text, malloc'd; n in *n. */
static int32_t *encode(const candle_tokenizer *t, const char *s, size_t len, bool special, int64_t *n) {
    int64_t cap = 16;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    CHECK(candle_tokenizer_encode(t, s, len, special, special, ids, cap, n) == CANDLE_OK);
    if (*n > cap) {
        cap = *n;
        ids = realloc(ids, (size_t)cap * sizeof *ids);
        CHECK(candle_tokenizer_encode(t, s, len, special, special, ids, cap, n) == CANDLE_OK);
    }
    return ids;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t cl = utf8_decode(s + i, n - i, &cp);
        if (cl == 1 && (unsigned char)s[i] >= 0x80) return false;
        i += cl;
    }
    return true;
}

/* Streams ids one at a time: every chunk valid UTF-8, and for a lossless
 * tokenizer the chunks join to the input. */
static void check_stream(const candle_tokenizer *t, const int32_t *ids, int64_t n, const char *want,
                         size_t want_len, bool lossless, const char *what) {
    size_t cap = candle_tokenizer_detok_bufsize(t), total = 0, len;
    char *chunk = malloc(cap), *all = malloc(3 * want_len + 64);
    candle_detok d = {.strip_space = true};
    bool valid = true;
    for (int64_t i = 0; i < n; i++) {
        CHECK(candle_tokenizer_detok_push(t, &d, ids[i], false, chunk, cap, &len) == CANDLE_OK);
        valid &= valid_utf8(chunk, len) && strlen(chunk) == len;
        if (total + len <= 3 * want_len + 32) memcpy(all + total, chunk, len);
        total += len;
    }
    CHECK(candle_tokenizer_detok_flush(t, &d, chunk, cap, &len) == CANDLE_OK);
    valid &= valid_utf8(chunk, len);
    if (total + len <= 3 * want_len + 32) memcpy(all + total, chunk, len);
    total += len;
    CHECK_MSG(valid, "%s: a streamed chunk is not valid UTF-8", what);
    if (lossless)
        CHECK_MSG(total == want_len && !memcmp(all, want, want_len), "%s: stream gives '%.*s'", what,
                  (int)(total < 200 ? total : 200), all);
    free(chunk);
    free(all);
}

static void check_vocab(const vocab_case *vc) {
    char rel[256];
    snprintf(rel, sizeof rel, "../shared/data/tokenizers/ggml-vocab-%s.gguf", vc->name);
    candle_tokenizer *t = load(rel);
    CHECK_MSG(t != NULL, "%s: load failed", vc->name);
    if (!t) return;
    char path[1024], rel2[300];
    size_t ni, no;
    snprintf(rel2, sizeof rel2, "%s.inp", rel);
    char *inp = read_file(test_path(rel2, path, sizeof path), &ni);
    snprintf(rel2, sizeof rel2, "%s.out", rel);
    char *out = read_file(test_path(rel2, path, sizeof path), &no);
    CHECK(inp && out);
    int total = 0, pass = 0, round = 0;
    char *ip = inp, *op = out;
    while (inp && out && *ip && *op) {
        char *iend = strstr(ip, SEP), *oend = strchr(op, '\n');
        if (!iend || !oend) break;
        size_t len = (size_t)(iend - ip);
        int64_t n, m = 0;
        int32_t *ids = encode(t, ip, len, false, &n);
        int32_t want[1024];
        for (char *q = op; q < oend && m < 1024;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            want[m++] = (int32_t)v;
            q = e;
        }
        bool ok = n == m && !memcmp(ids, want, (size_t)n * sizeof *ids);
        total++;
        pass += ok;
        if (!ok && vc->claimed) {
            fprintf(stderr, "%s: input %d '%.*s': got", vc->name, total, (int)len, ip);
            for (int64_t k = 0; k < n && k < 40; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n  want");
            for (int64_t k = 0; k < m && k < 40; k++) fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n");
        }
        if (vc->claimed) CHECK_MSG(ok, "%s: input %d", vc->name, total);
        char *dec = malloc(4 * len + 64);
        size_t dl;
        CHECK(candle_tokenizer_decode(t, ids, n, false, dec, 4 * len + 64, &dl) == CANDLE_OK);
        bool rt = dl == len && !memcmp(dec, ip, len);
        round += rt;
        if (vc->lossless) CHECK_MSG(rt, "%s: decode of input %d gives '%s'", vc->name, total, dec);
        check_stream(t, ids, n, ip, len, vc->lossless, vc->name);
        free(dec);
        free(ids);
        ip = iend + strlen(SEP);
        op = oend + 1;
    }
    CHECK_MSG(total == 46, "%s: %d inputs", vc->name, total);
    printf("%-15s %2d/%d encode, %2d/%d decode round trip\n", vc->name, pass, total, round, total);
    free(inp);
    free(out);
    candle_tokenizer_free(t);
}

int main(void) {
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) check_vocab(&vocabs[i]);
    return test_done("test_tokenizer");
}
