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
        size_t cl = tok_utf8_decode(s + i, n - i, &cp);
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

/* Byte soup (invalid UTF-8 included: stray continuation bytes, cut
 * sequences) encodes without error; a lossless tokenizer gives it back, and
 * streaming stays valid UTF-8. Bytes that never occur in UTF-8 (0xF5-0xFF)
 * are left out: byte-level vocabularies such as falcon's have no token
 * for them. */
static void check_random_bytes(const candle_tokenizer *t, const vocab_case *vc) {
    static const char alphabet[] = "ab \n\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x9a\x80\x80\xbf<>'1";
    uint32_t rng = 12345;
    int bad = 0;
    for (int it = 0; it < 60; it++) {
        char text[48];
        rng = rng * 1664525u + 1013904223u;
        size_t len = 1 + (rng >> 8) % (sizeof text - 1);
        for (size_t i = 0; i < len; i++) {
            rng = rng * 1664525u + 1013904223u;
            text[i] = alphabet[(rng >> 8) % (sizeof alphabet - 1)];
        }
        int64_t n;
        int32_t *ids = encode(t, text, len, false, &n);
        char dec[256];
        size_t dl;
        CHECK(candle_tokenizer_decode(t, ids, n, false, dec, sizeof dec, &dl) == CANDLE_OK);
        if (vc->lossless && (dl != len || memcmp(dec, text, len))) bad++;
        check_stream(t, ids, n, text, len, false, vc->name);
        free(ids);
    }
    CHECK_MSG(bad == 0, "%s: %d random byte strings do not round-trip", vc->name, bad);
}

static void check_vocab(const vocab_case *vc) {
    char rel[256];
    snprintf(rel, sizeof rel, "../shared/data/tokenizers/ggml-vocab-%s.gguf", vc->name);
    char abs[1024];
    if (!test_need_file("test_tokenizer vocabulary (scripts/fetch-test-data.sh)", test_path(rel, abs, sizeof abs)))
        return;
    candle_tokenizer *t = load(rel);
    CHECK_MSG(t != NULL, "%s: load failed", vc->name);
    if (!t) return;
    char path[1024], rel2[300];
    size_t ni, no;
    snprintf(rel2, sizeof rel2, "%s.inp", rel);
    char *inp = test_read_file(test_path(rel2, path, sizeof path), &ni);
    snprintf(rel2, sizeof rel2, "%s.out", rel);
    char *out = test_read_file(test_path(rel2, path, sizeof path), &no);
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
    check_random_bytes(t, vc);
    printf("%-15s %2d/%d encode, %2d/%d decode round trip\n", vc->name, pass, total, round, total);
    free(inp);
    free(out);
    candle_tokenizer_free(t);
}

/* ---- real models: ids from llama.cpp (scripts/gen_tokenizer_refs.py) ---- */

typedef struct ref_case {
    const char *text;
    bool special; /* add BOS/EOS and parse special-token text */
    int32_t ids[80];
    int n;
} ref_case;

static const ref_case stories_refs[] = {
    {"Once upon a time, there was a little girl named Lily.", true, {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}, 16},
    {"Once upon a time, there was a little girl named Lily.", false, {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}, 15},
    {"Hello <s> world", true, {1, 346, 306, 414, 410, 1, 410, 263, 304, 341}, 10},
    {"Hello <s> world", false, {346, 306, 414, 410, 504, 419, 505, 263, 304, 341}, 10},
    {"caf\xc3""\xa9"" \xf0""\x9f""\x9a""\x80"" \xc2""\xbd""\x0a""\x09""x", true, {1, 280, 412, 431, 485, 410, 243, 162, 157, 131, 410, 197, 192, 13, 12, 444}, 16},
    {"caf\xc3""\xa9"" \xf0""\x9f""\x9a""\x80"" \xc2""\xbd""\x0a""\x09""x", false, {280, 412, 431, 485, 410, 243, 162, 157, 131, 410, 197, 192, 13, 12, 444}, 15},
};

static const ref_case smol_refs[] = {
    {"<|im_start|>system\x0a""You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\x0a""<|im_start|>user\x0a""What is 2+2? Answer in 3 words.<|im_end|>\x0a""<|im_start|>assistant\x0a""", true, {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 19842, 281, 216, 35, 1924, 30, 2, 198, 1, 520, 9531, 198}, 43},
    {"<|im_start|>system\x0a""You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\x0a""<|im_start|>user\x0a""What is 2+2? Answer in 3 words.<|im_end|>\x0a""<|im_start|>assistant\x0a""", false, {44, 108, 306, 79, 3738, 108, 46, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 44, 108, 306, 79, 486, 108, 46, 198, 44, 108, 306, 79, 3738, 108, 46, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 19842, 281, 216, 35, 1924, 15602, 108, 306, 79, 486, 108, 46, 198, 44, 108, 306, 79, 3738, 108, 46, 520, 9531, 198}, 72},
    {"def fib(n):\x0a""    return n if n < 2 else fib(n-1) + fib(n-2)\x0a""", true, {1604, 3987, 24, 94, 727, 472, 1003, 304, 585, 304, 2067, 216, 34, 1745, 3987, 24, 94, 29, 33, 25, 1232, 3987, 24, 94, 29, 34, 25, 198}, 28},
    {"def fib(n):\x0a""    return n if n < 2 else fib(n-1) + fib(n-2)\x0a""", false, {1604, 3987, 24, 94, 727, 472, 1003, 304, 585, 304, 2067, 216, 34, 1745, 3987, 24, 94, 29, 33, 25, 1232, 3987, 24, 94, 29, 34, 25, 198}, 28},
    {"H\xc3""\xa9""llo w\xc3""\xb6""rld \xe2""\x80""\x94"" na\xc3""\xaf""ve caf\xc3""\xa9"", 12345 items; it's 3.14159!  \xf0""\x9f""\x9a""\x80""", true, {56, 2756, 31394, 267, 29989, 400, 1841, 15486, 46494, 37366, 28, 216, 33, 34, 35, 36, 37, 3723, 43, 357, 506, 216, 35, 30, 33, 36, 33, 37, 41, 17, 216, 15107, 244, 218}, 34},
    {"H\xc3""\xa9""llo w\xc3""\xb6""rld \xe2""\x80""\x94"" na\xc3""\xaf""ve caf\xc3""\xa9"", 12345 items; it's 3.14159!  \xf0""\x9f""\x9a""\x80""", false, {56, 2756, 31394, 267, 29989, 400, 1841, 15486, 46494, 37366, 28, 216, 33, 34, 35, 36, 37, 3723, 43, 357, 506, 216, 35, 30, 33, 36, 33, 37, 41, 17, 216, 15107, 244, 218}, 34},
};

static void check_refs(const candle_tokenizer *t, const char *name, const ref_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const ref_case *c = &cases[i];
        int64_t m;
        int32_t *ids = encode(t, c->text, strlen(c->text), c->special, &m);
        bool ok = m == c->n && !memcmp(ids, c->ids, (size_t)m * sizeof *ids);
        CHECK_MSG(ok, "%s: case %zu (special %d): %lld ids, want %d", name, i, c->special, (long long)m, c->n);
        /* Rendering specials gives the text back (SPM drops its prefix). */
        char buf[1024];
        size_t len;
        CHECK(candle_tokenizer_decode(t, ids, m, c->special, buf, sizeof buf, &len) == CANDLE_OK);
        if (!c->special) CHECK_MSG(!strcmp(buf, c->text), "%s: case %zu decodes to '%s'", name, i, buf);
        free(ids);
    }
}

static void check_stories(void) {
    char path[1024];
    if (!test_need_file("test_tokenizer stories260K",
                        test_path("../shared/data/models/stories260K.gguf", path, sizeof path)))
        return;
    candle_tokenizer *t = load("../shared/data/models/stories260K.gguf");
    CHECK(t != NULL);
    if (!t) return;
    CHECK(candle_tokenizer_n_vocab(t) == 512);
    CHECK(candle_tokenizer_bos(t) == 1 && candle_tokenizer_eos(t) == 2);
    CHECK(candle_tokenizer_is_eog(t, 2) && !candle_tokenizer_is_eog(t, 1) && !candle_tokenizer_is_eog(t, -1));
    CHECK(candle_tokenizer_find(t, "<s>") == 1 && candle_tokenizer_find(t, "no such piece") == -1);
    check_refs(t, "stories260K", stories_refs, sizeof stories_refs / sizeof stories_refs[0]);

    /* Token pieces: space marker, byte fallback, control only on request. */
    char buf[64];
    size_t len;
    CHECK(candle_tokenizer_token_bytes(t, 403, false, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK(len == 5 && !strcmp(buf, " Once"));
    CHECK(candle_tokenizer_token_bytes(t, 3 + 0xE2, false, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK(len == 1 && (unsigned char)buf[0] == 0xE2);
    CHECK(candle_tokenizer_token_bytes(t, 1, false, buf, sizeof buf, &len) == CANDLE_OK && len == 0);
    CHECK(candle_tokenizer_token_bytes(t, 1, true, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK(len == 3 && !strcmp(buf, "<s>"));
    CHECK(candle_tokenizer_token_bytes(t, 403, false, buf, 2, &len) == CANDLE_ERR_INVALID_ARG && len == 5);
    CHECK_CONTAINS(candle_last_errmsg(), "buffer of 2 bytes too small, need 5");
    CHECK(candle_tokenizer_token_bytes(t, 403, false, buf, 5, &len) == CANDLE_OK && len == 5); /* no NUL needed */

    /* Encode reports the full count when ids has too little room. */
    int32_t ids[3] = {-7, -7, -7};
    int64_t n;
    CHECK(candle_tokenizer_encode(t, "Once upon a time", 16, true, false, ids, 2, &n) == CANDLE_OK);
    CHECK(n == 5 && ids[0] == 1 && ids[1] == 403 && ids[2] == -7);
    CHECK(candle_tokenizer_encode(t, "", 0, true, false, ids, 3, &n) == CANDLE_OK && n == 1);
    CHECK(candle_tokenizer_encode(t, "", 0, false, false, ids, 3, &n) == CANDLE_OK && n == 0);

    /* Decode: the first piece's prefix space goes, truncation is reported. */
    int32_t once[] = {1, 403, 407};
    CHECK(candle_tokenizer_decode(t, once, 3, false, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK_MSG(!strcmp(buf, "Once upon"), "'%s'", buf);
    CHECK(candle_tokenizer_decode(t, once, 3, true, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK_MSG(!strcmp(buf, "<s> Once upon"), "'%s'", buf);
    CHECK(candle_tokenizer_decode(t, once, 3, false, buf, 4, &len) == CANDLE_ERR_INVALID_ARG);
    CHECK(len == 9 && !strcmp(buf, "Onc"));
    CHECK_CONTAINS(candle_last_errmsg(), "need 10");
    CHECK(candle_tokenizer_decode(t, once, 3, false, buf, 10, &len) == CANDLE_OK && len == 9);

    /* Streaming byte-fallback pieces: "€" = E2 82 AC arrives whole. */
    size_t cap = candle_tokenizer_detok_bufsize(t);
    char *chunk = malloc(cap);
    candle_detok d = {0};
    const int32_t euro[] = {3 + 0xE2, 3 + 0x82, 3 + 0xAC};
    const char *want[] = {"", "", "\xe2\x82\xac"};
    for (int i = 0; i < 3; i++) {
        CHECK(candle_tokenizer_detok_push(t, &d, euro[i], false, chunk, cap, &len) == CANDLE_OK);
        CHECK_MSG(!strcmp(chunk, want[i]) && len == strlen(want[i]), "euro piece %d: '%s'", i, chunk);
    }
    /* A lead byte followed by ASCII can never complete: U+FFFD, then 'x'. */
    CHECK(candle_tokenizer_detok_push(t, &d, 3 + 0xE2, false, chunk, cap, &len) == CANDLE_OK && len == 0);
    CHECK(candle_tokenizer_detok_push(t, &d, 3 + 'x', false, chunk, cap, &len) == CANDLE_OK);
    CHECK(!strcmp(chunk, "\xef\xbf\xbdx"));
    /* Unfinished at the end: flush turns the held bytes into U+FFFD. */
    CHECK(candle_tokenizer_detok_push(t, &d, 3 + 0xF0, false, chunk, cap, &len) == CANDLE_OK && len == 0);
    CHECK(candle_tokenizer_detok_push(t, &d, 3 + 0x9F, false, chunk, cap, &len) == CANDLE_OK && len == 0);
    CHECK(candle_tokenizer_detok_push(t, &d, 403, false, chunk, 4, &len) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "too small");
    CHECK(d.n_pending == 2);
    CHECK(candle_tokenizer_detok_flush(t, &d, chunk, cap, &len) == CANDLE_OK);
    CHECK(!strcmp(chunk, "\xef\xbf\xbd\xef\xbf\xbd") && d.n_pending == 0);
    /* The prefix space is dropped only when asked (start of a text). */
    candle_detok d2 = {.strip_space = true}, d3 = {0};
    CHECK(candle_tokenizer_detok_push(t, &d2, 403, false, chunk, cap, &len) == CANDLE_OK);
    CHECK(!strcmp(chunk, "Once"));
    CHECK(candle_tokenizer_detok_push(t, &d3, 403, false, chunk, cap, &len) == CANDLE_OK);
    CHECK(!strcmp(chunk, " Once"));
    free(chunk);

    /* Errors: ids out of range, NULL arguments. */
    int32_t bad = 512;
    CHECK(candle_tokenizer_decode(t, &bad, 1, false, buf, sizeof buf, &len) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "token id 512 out of range [0, 512)");
    CHECK(candle_tokenizer_token_bytes(t, -1, false, buf, sizeof buf, &len) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_tokenizer_detok_push(t, &d, 9999, false, buf, sizeof buf, &len) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_tokenizer_encode(t, NULL, 3, false, false, ids, 3, &n) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_tokenizer_encode(t, "a", 1, false, false, ids, 3, NULL) == CANDLE_ERR_INVALID_ARG);
    candle_tokenizer_free(t);
}

/* SmolLM2 is fetched by scripts/fetch-model.sh; skipped without it. */
static void check_smollm2(void) {
    char path[1024];
    FILE *f = fopen(test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path), "rb");
    if (!f) {
        test_skip("test_tokenizer smollm2", "%s absent (scripts/fetch-model.sh smollm2)", path);
        return;
    }
    fclose(f);
    candle_tokenizer *t = load("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    CHECK(t != NULL);
    if (!t) return;
    CHECK(candle_tokenizer_bos(t) == 1 && candle_tokenizer_eos(t) == 2);
    CHECK(candle_tokenizer_find(t, "<|im_end|>") == 2 && candle_tokenizer_find(t, "<|im_start|>") == 1);
    CHECK(candle_tokenizer_is_eog(t, 2) && candle_tokenizer_is_eog(t, 0) && !candle_tokenizer_is_eog(t, 1));
    check_refs(t, "smollm2", smol_refs, sizeof smol_refs / sizeof smol_refs[0]);
    /* With specials rendered, byte-level BPE gives the chat text back. */
    const ref_case *c = &smol_refs[0];
    char buf[1024];
    size_t len;
    CHECK(candle_tokenizer_decode(t, c->ids, c->n, true, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK_MSG(!strcmp(buf, c->text), "'%s'", buf);
    printf("smollm2: %zu reference tokenizations\n", sizeof smol_refs / sizeof smol_refs[0]);
    candle_tokenizer_free(t);
}

/* ---- regex engine and pre-tokenizer splits ---- */

static int64_t to_cps(const char *s, uint32_t *cps) {
    int64_t n = 0;
    for (size_t i = 0, len = strlen(s); i < len;) i += tok_utf8_decode(s + i, len - i, &cps[n++]);
    return n;
}

typedef struct re_case {
    const char *pattern, *text;
    int64_t want; /* end of the match at 0 (code points), -1 none */
} re_case;

static const re_case re_cases[] = {
    {"\\s+(?!\\S)", "   a", 2},        {"\\s+(?!\\S)", "   ", 3},
    {" ?\\p{L}+", " h\xc3\xa9llo!", 6}, {"\\p{N}{1,3}", "12345", 3},
    {"a|ab", "ab", 1},                  {"(?:ab)+?", "abab", 2},
    {"(?:ab)+", "abab", 4},             {"[^\\s\\p{L}\\p{N}]+", "!?a", 2},
    {"\\s*[\\r\\n]+", "  \n\nx", 4},    {"x$", "x", 1},
    {"x$", "xy", -1},                   {"[\xe4\xb8\x80-\xe9\xbe\xa5]+", "\xe6\x88\x91\xe6\x83\xb3" "a", 2},
    {"(?=a)[^b]", "a", 1},              {"(?!a).", "a", -1},
    {"\\p{P}+", "\"\xc2\xab\xc2\xbb" "a", 3}, {"[\\x{2126}]", "\xe2\x84\xa6", 1},
    {"a{2}", "aaa", 2},                 {"a{2,}", "aaaa", 4},
    {"'s|'t", "'t", 2},                 {"\\S+", "ab c", 2},
    {"[^a-z]+", "ABc", 2},              {"\\d+", "12a", 2},
    {"\\s", "\xc2\xa0", 1},             {"\\s", "\xe2\x80\x8b", -1}, /* NBSP yes, ZWSP no */
    {"[\\p{L}\\p{M}]+", "e\xcc\x81x1", 3}, {"\\P{L}+", "12a", 2},
    {"a??b", "ab", 2},                  {"[]a]+", "]a]", 3},
};

typedef struct re_err_case {
    const char *pattern, *msg;
} re_err_case;

static const re_err_case re_errs[] = {
    {"(a", "missing )"},          {"[a", "unterminated class"},  {"\\p{Lu}", "one-letter category"},
    {"a{3,1}", "bad {m,n}"},      {"*a", "unexpected metacharacter"}, {"\\q", "unsupported escape"},
    {"[z-a]", "reversed range"},  {"a)", "unbalanced )"},        {"(?<a>x)", "unsupported group"},
    {"\\x{110000}", "bad \\x{...}"},
};

static void check_regex(void) {
    uint32_t cps[64];
    tok_regex_stack st = {0};
    for (size_t i = 0; i < sizeof re_cases / sizeof re_cases[0]; i++) {
        const re_case *c = &re_cases[i];
        tok_regex *re = NULL;
        CHECK_MSG(tok_regex_compile(c->pattern, &re) == CANDLE_OK, "%s: %s", c->pattern, candle_last_errmsg());
        if (!re) continue;
        int64_t n = to_cps(c->text, cps);
        tok_regex_begin(&st);
        int64_t got = tok_regex_match_at(re, cps, n, 0, &st);
        CHECK_MSG(got == c->want, "/%s/ on '%s': %lld, want %lld", c->pattern, c->text, (long long)got,
                  (long long)c->want);
        tok_regex_free(re);
    }
    for (size_t i = 0; i < sizeof re_errs / sizeof re_errs[0]; i++) {
        tok_regex *re = NULL;
        CHECK(tok_regex_compile(re_errs[i].pattern, &re) == CANDLE_ERR_INVALID_ARG && re == NULL);
        CHECK_CONTAINS(candle_last_errmsg(), re_errs[i].msg);
    }
    tok_regex_stack_free(&st);
}

/* A greedy run that fails at its end from every start (\s+$ on spaces
 * before a digit) switches the memo on; the answers stay the same. */
static void check_regex_memo(void) {
    enum { RUN = 6000 };
    uint32_t *cps = malloc((RUN + 3) * sizeof *cps);
    for (int i = 0; i < RUN; i++) cps[i] = i % 2 ? '\t' : ' ';
    cps[RUN] = '5';
    cps[RUN + 1] = cps[RUN + 2] = ' ';
    tok_regex *re = NULL;
    tok_regex_stack st = {0};
    CHECK(tok_regex_compile("\\s+$", &re) == CANDLE_OK);
    tok_regex_begin(&st);
    int64_t first = -1, end = -1;
    for (int64_t pos = 0; re && pos < RUN + 3 && first < 0; pos++)
        if ((end = tok_regex_match_at(re, cps, RUN + 3, pos, &st)) >= 0) first = pos;
    CHECK(st.memo != NULL);
    CHECK(first == RUN + 1 && end == RUN + 3);
    tok_regex_begin(&st); /* all whitespace: the match from 0 takes it all */
    CHECK(re && tok_regex_match_at(re, cps, RUN, 0, &st) == RUN);
    tok_regex_free(re);
    tok_regex_stack_free(&st);
    free(cps);
}

/* Splits text with a family's regexes the way the BPE encoder does:
 * matches and the gaps between them are pieces; returns them joined by |. */
static void split_family(const char *pre, const char *text, char *out) {
    bool im;
    bool known;
    const char *const *res = tok_pre_regexes(pre, &im, &known);
    uint32_t cps[256];
    int64_t n = to_cps(text, cps), cuts[256], n_cuts = 0, next[256];
    tok_regex_stack st = {0};
    cuts[n_cuts++] = 0;
    cuts[n_cuts++] = n;
    for (int r = 0; res[r]; r++) {
        tok_regex *re = NULL;
        CHECK(tok_regex_compile(res[r], &re) == CANDLE_OK);
        int64_t nn = 0;
        for (int64_t k = 0; re && k + 1 < n_cuts; k++) {
            int64_t s = cuts[k], e = cuts[k + 1];
            next[nn++] = s;
            tok_regex_begin(&st);
            for (int64_t pos = s; pos < e;) {
                int64_t end = tok_regex_match_at(re, cps + s, e - s, pos - s, &st);
                if (end <= pos - s) {
                    pos++;
                    continue;
                }
                if (next[nn - 1] != pos) next[nn++] = pos;
                if (end + s < e) next[nn++] = end + s;
                pos = end + s;
            }
        }
        next[nn++] = n;
        memcpy(cuts, next, (size_t)nn * sizeof *cuts);
        n_cuts = nn;
        tok_regex_free(re);
    }
    tok_regex_stack_free(&st);
    size_t o = 0;
    for (int64_t k = 0; k + 1 < n_cuts; k++) {
        if (k) out[o++] = '|';
        for (int64_t c = cuts[k]; c < cuts[k + 1]; c++) o += tok_utf8_encode(cps[c], out + o);
    }
    out[o] = 0;
}

typedef struct split_case {
    const char *pre, *text, *want;
} split_case;

static const split_case split_cases[] = {
    {"llama-bpe", "Hello 12345 world!!\n\n  x", "Hello| |123|45| world|!!\n\n| | x"},
    {"llama-bpe", "I'M don't\r\n", "I|'M| don|'t|\r\n"},
    {"qwen2", "a 12345", "a| |1|2|3|4|5"},
    {"gpt-2", "I'M don't  x", "I|'|M| don|'t| | x"},
    {"smollm", "v2.10 ok", "v|2|.|1|0| ok"},
    {"falcon", "a...b 12345", "a|...|b| |123|45"},
    {"deepseek-coder", "ab\ncd 12", "ab|\n|cd| |1|2"},
};

static void check_splits(void) {
    char out[512];
    for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; i++) {
        const split_case *c = &split_cases[i];
        split_family(c->pre, c->text, out);
        CHECK_MSG(!strcmp(out, c->want), "%s: '%s' -> '%s', want '%s'", c->pre, c->text, out, c->want);
    }
}

/* ---- building from metadata: errors ---- */

static void check_build_errors(void) {
    const char *toks[] = {"a", "b", "ab"};
    const size_t lens[] = {1, 1, 2};
    tok_source s = {.model = "unigram", .n_tokens = 3, .tokens = toks, .token_lens = lens,
                    .bos = -2, .eos = -2, .unk = -2, .pad = -2, .sep = -2, .eot = -2, .eom = -2,
                    .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
    candle_tokenizer *t = (candle_tokenizer *)1;
    CHECK(tok_build(&t, &s) == CANDLE_ERR_UNSUPPORTED && t == NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "model 'unigram' not supported");
    s.model = "gpt2";
    CHECK(tok_build(&t, &s) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "without merges");
    s.model = NULL;
    CHECK(tok_build(&t, &s) == CANDLE_ERR_FORMAT);
    s.model = "llama";
    s.n_tokens = 0;
    CHECK(tok_build(&t, &s) == CANDLE_ERR_FORMAT);

    /* A small SPM vocabulary without byte tokens: unknown characters are unk. */
    s.n_tokens = 3;
    s.unk = 0;
    s.add_space_prefix = 0;
    CHECK(tok_build(&t, &s) == CANDLE_OK);
    if (t) {
        int32_t ids[8];
        int64_t n;
        CHECK(candle_tokenizer_encode(t, "abz", 3, false, false, ids, 8, &n) == CANDLE_OK);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == 0); /* "ab", unk for "z" */
        candle_tokenizer_free(t);
    }

    /* GGUF files: no vocabulary, and arrays of the wrong length. */
    char path[1024];
    const char *bin = getenv("CANDLE_BINARY_DIR");
    snprintf(path, sizeof path, "%s/test_tokenizer_bad.gguf", bin ? bin : ".");
    candle_gguf_writer *w = NULL;
    CHECK(candle_gguf_writer_init(&w) == CANDLE_OK);
    CHECK(candle_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") == CANDLE_OK);
    CHECK(candle_gguf_writer_write(w, path) == CANDLE_OK);
    candle_gguf *g = NULL;
    CHECK(candle_gguf_open(&g, path, NULL) == CANDLE_OK);
    CHECK(candle_tokenizer_from_gguf(&t, g) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "no tokenizer.ggml.tokens");
    candle_gguf_close(g);
    float scores[2] = {0, 1};
    CHECK(candle_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", CANDLE_GGUF_STRING, toks, 3) == CANDLE_OK);
    CHECK(candle_gguf_writer_set_arr(w, "tokenizer.ggml.scores", CANDLE_GGUF_FLOAT32, scores, 2) == CANDLE_OK);
    CHECK(candle_gguf_writer_write(w, path) == CANDLE_OK);
    CHECK(candle_gguf_open(&g, path, NULL) == CANDLE_OK);
    CHECK(candle_tokenizer_from_gguf(&t, g) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "tokenizer.ggml.scores: expected 3 elements");
    candle_gguf_close(g);
    candle_gguf_writer_free(w);
    remove(path);
    CHECK(candle_tokenizer_from_gguf(&t, NULL) == CANDLE_ERR_INVALID_ARG);
}

/* SPM byte fallback: only "<0xHH>" tokens of type byte stand for bytes, so
 * what the encoder falls back to decodes to the same byte. Without token
 * types those tokens get the byte type; a typed vocabulary whose "<0x7A>"
 * is a normal token falls back to unk for 'z' instead of a token that
 * decodes to the six characters "<0x7A>". */
static void check_byte_fallback_types(void) {
    const char *toks[] = {"<unk>", "a", "<0x7A>"};
    const size_t lens[] = {5, 1, 6};
    const int32_t types[] = {2, 1, 1}; /* unknown, normal, normal */
    tok_source s = {.model = "llama", .n_tokens = 3, .tokens = toks, .token_lens = lens,
                    .bos = -2, .eos = -2, .unk = 0, .pad = -2, .sep = -2, .eot = -2, .eom = -2,
                    .add_bos = -1, .add_eos = -1, .add_space_prefix = 0};
    for (int typed = 0; typed < 2; typed++) {
        s.types = typed ? types : NULL;
        candle_tokenizer *t = NULL;
        CHECK(tok_build(&t, &s) == CANDLE_OK);
        if (!t) continue;
        int32_t ids[8];
        int64_t n = 0;
        CHECK(candle_tokenizer_encode(t, "az", 2, false, false, ids, 8, &n) == CANDLE_OK);
        CHECK(n == 2 && ids[0] == 1 && ids[1] == (typed ? 0 : 2));
        char buf[16];
        size_t len = 0;
        CHECK(candle_tokenizer_token_bytes(t, 2, false, buf, sizeof buf, &len) == CANDLE_OK);
        CHECK(typed ? len == 6 && !memcmp(buf, "<0x7A>", 6) : len == 1 && buf[0] == 'z');
        candle_tokenizer_free(t);
    }
}

/* Phi-3's special tokens swallow the whitespace after them (llama.cpp's
 * ids for a chat prompt). */
static void check_phi3_specials(void) {
    char path[1024];
    if (!test_need_file("test_tokenizer phi-3 specials",
                        test_path("../shared/data/tokenizers/ggml-vocab-phi-3.gguf", path, sizeof path)))
        return;
    candle_tokenizer *t = load("../shared/data/tokenizers/ggml-vocab-phi-3.gguf");
    CHECK(t != NULL);
    if (!t) return;
    const char *chat = "<|user|>\nHi there<|end|>\n<|assistant|>\n";
    const int32_t want[] = {1, 32010, 6324, 727, 32007, 32001};
    int64_t n;
    int32_t *ids = encode(t, chat, strlen(chat), true, &n);
    CHECK(n == 6 && !memcmp(ids, want, sizeof want));
    CHECK(candle_tokenizer_is_eog(t, 32007) && candle_tokenizer_is_eog(t, 32000));
    free(ids);
    candle_tokenizer_free(t);
}

/* ---- the length bound and the encoding limit (issue 22, finding 3) ---- */

/* max_token_bytes is 0 exactly where text can vanish (WordPiece, Phi-3's
 * blank-swallowing specials, falcon's missing bytes); elsewhere no text of
 * more than n * bound bytes encodes to n ids or fewer, runs of blanks and
 * byte soup included. encode_limit stops just past its limit with the full
 * encoding's first ids. */
static void check_length_bound(void) {
    static const struct { const char *name; bool bounded; } cases[] = {
        {"llama-spm", true}, {"gpt-2", true},  {"deepseek-coder", true},
        {"phi-3", false},    {"falcon", false}, {"bert-bge", false},
    };
    static const char *const texts[] = {
        "                                                                                ",
        "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\t\t\t\t\t\t\t\t\t\t\t\t",
        "the quick brown fox jumps over the lazy dog; the quick brown fox jumps again",
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x9a\x80\x80\xbf\xff\xfe\x01\x02<s></s><|endoftext|>",
        "================================================================================",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000",
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char rel[256], abs[1024];
        snprintf(rel, sizeof rel, "../shared/data/tokenizers/ggml-vocab-%s.gguf", cases[c].name);
        if (!test_need_file("test_tokenizer length bound", test_path(rel, abs, sizeof abs))) continue;
        candle_tokenizer *t = load(rel);
        CHECK(t != NULL);
        if (!t) continue;
        size_t per = candle_tokenizer_max_token_bytes(t);
        CHECK_MSG((per > 0) == cases[c].bounded, "%s: max_token_bytes %zu", cases[c].name, per);
        for (size_t k = 0; per && k < sizeof texts / sizeof texts[0]; k++) {
            int64_t n;
            int32_t *ids = encode(t, texts[k], strlen(texts[k]), true, &n);
            CHECK_MSG((size_t)n * per >= strlen(texts[k]), "%s: %zu bytes in %lld ids of at most %zu",
                      cases[c].name, strlen(texts[k]), (long long)n, per);
            free(ids);
        }
        /* a long text, limited to 50 ids */
        size_t len = 0;
        char *big = malloc(200000);
        while (len + 80 < 200000) {
            memcpy(big + len, texts[2], 76);
            len += 76;
        }
        int64_t n_all, n_lim = 0;
        int32_t *all = encode(t, big, len, true, &n_all);
        int32_t lim[256];
        CHECK(candle_tokenizer_encode_limit(t, big, len, true, true, 50, lim, 256, &n_lim) == CANDLE_OK);
        CHECK_MSG(n_lim > 50 && n_lim < 80 && n_all > 1000 && !memcmp(lim, all, 50 * sizeof *lim),
                  "%s: limit 50 gave %lld ids (all %lld)", cases[c].name, (long long)n_lim, (long long)n_all);
        CHECK(candle_tokenizer_encode_limit(t, big, len, true, true, -1, NULL, 0, &n_lim) == CANDLE_OK &&
              n_lim == n_all);
        free(all);
        free(big);
        candle_tokenizer_free(t);
    }
    /* SPM without byte tokens: only an unknown token makes it bounded */
    const char *toks[] = {"<unk>", "a", "b", "ab"};
    const size_t lens[] = {5, 1, 1, 2};
    tok_source s = {.model = "llama", .n_tokens = 4, .tokens = toks, .token_lens = lens,
                    .bos = -2, .eos = -2, .unk = -1, .pad = -2, .sep = -2, .eot = -2, .eom = -2,
                    .add_bos = -1, .add_eos = -1, .add_space_prefix = 0};
    for (int unk = 0; unk < 2; unk++) {
        s.unk = unk ? 0 : -1;
        candle_tokenizer *t = NULL;
        CHECK(tok_build(&t, &s) == CANDLE_OK);
        if (!t) continue;
        CHECK(candle_tokenizer_max_token_bytes(t) == (unk ? 5u : 0u));
        candle_tokenizer_free(t);
    }
}

/* ---- warnings at load (issue 22, finding 7) ---- */

static char warned[2048];

static void keep_warning(candle_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == CANDLE_LOG_WARN && strlen(warned) + strlen(msg) + 2 < sizeof warned) {
        strcat(warned, msg);
        strcat(warned, "\n");
    }
}

/* An unknown tokenizer.ggml.pre and merges that do not join two tokens into
 * a token load (the default split; byte tokens where a merge's result is no
 * token), but say so; known names and sound merges say nothing. */
static void check_load_warnings(void) {
    const char *toks[] = {"a", "b", "ab", "c", "\xc4\xa0"};
    const size_t toklens[] = {1, 1, 2, 1, 2};
    const char *merges[] = {"a b", "b c", "ab", "a zz"};
    const size_t mlens[] = {3, 3, 2, 4};
    tok_source s = {.model = "gpt2", .pre = "qwen2", .n_tokens = 5, .tokens = toks, .token_lens = toklens,
                    .n_merges = 1, .merges = merges, .merge_lens = mlens,
                    .bos = -2, .eos = -2, .unk = -2, .pad = -2, .sep = -2, .eot = -2, .eom = -2,
                    .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
    candle_log_set_callback(keep_warning, NULL);
    candle_tokenizer *t = NULL;
    warned[0] = 0;
    CHECK(tok_build(&t, &s) == CANDLE_OK && !warned[0]);
    candle_tokenizer_free(t);
    s.pre = "no-such-pre\x1b[2J";
    warned[0] = 0;
    CHECK(tok_build(&t, &s) == CANDLE_OK);
    CHECK_CONTAINS(warned, "tokenizer.ggml.pre 'no-such-pre\\x1b[2J' is not a pre-tokenizer Candle knows");
    candle_tokenizer_free(t);
    s.pre = NULL;
    s.n_merges = 4;
    warned[0] = 0;
    CHECK(tok_build(&t, &s) == CANDLE_OK);
    CHECK_CONTAINS(warned, "3 of 4 tokenizer.ggml.merges are not 'LEFT RIGHT' of tokens");
    CHECK_CONTAINS(warned, "(the first: 'b c')");
    if (t) { /* "bc" is no token: b and c stay apart */
        int32_t ids[8];
        int64_t n = 0;
        CHECK(candle_tokenizer_encode(t, "abc", 3, false, false, ids, 8, &n) == CANDLE_OK);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == 3);
    }
    candle_tokenizer_free(t);
    candle_log_set_callback(NULL, NULL);
}

int main(void) {
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) check_vocab(&vocabs[i]);
    check_stories();
    check_smollm2();
    check_phi3_specials();
    check_regex();
    check_regex_memo();
    check_splits();
    check_build_errors();
    check_byte_fallback_types();
    check_length_bound();
    check_load_warnings();
    return test_done("test_tokenizer");
}
