/* tokenizer.json tokenizers against the `tokenizers` library: every string
 * of tests/data/hf_tokenizers/corpus.jsonl encoded (ids exactly as the
 * golden file made by gen.py) and the golden ids decoded (text compared by
 * hash), for the small trained tokenizers in the repository and the real
 * ones when make test-data has fetched them; then the error paths and
 * encode_pair. `gen.py stress SEED OUT` makes other corpora for a run with
 * CANDLE_SOURCE_DIR=OUT; an argument runs one tokenizer only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "formats/quantize-impl.h"
#include "tokenizer/hf-impl.h"
#include "test.h"

#define NAME "test_hf_tokenizer"


typedef struct corpus {
    char **text;
    size_t *len;
    size_t n;
} corpus;

static int hexv(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

static bool load_corpus(corpus *c) {
    char path[1024];
    size_t len;
    char *all = test_read_file(test_path("tests/data/hf_tokenizers/corpus.jsonl", path, sizeof path), &len);
    if (!all) return false;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += all[i] == '\n';
    c->text = calloc(lines, sizeof *c->text);
    c->len = calloc(lines, sizeof *c->len);
    for (char *p = all; *p;) {
        char *nl = strchr(p, '\n');
        json_doc *d;
        if (json_parse(&d, p, (size_t)(nl - p), "corpus.jsonl", NULL) != CANDLE_OK) break;
        const char *s;
        size_t n;
        if (json_as_str(json_get(json_root(d), "t"), &s, &n)) {
            c->text[c->n] = malloc(n + 1);
            memcpy(c->text[c->n], s, n + 1);
        } else {
            json_as_str(json_get(json_root(d), "hex"), &s, &n);
            c->text[c->n] = malloc(n / 2 + 1);
            for (size_t k = 0; k < n / 2; k++) c->text[c->n][k] = (char)(hexv(s[2 * k]) * 16 + hexv(s[2 * k + 1]));
            n /= 2;
        }
        c->len[c->n++] = n;
        json_free(d);
        p = nl + 1;
    }
    free(all);
    return c->n == lines;
}

static void corpus_free(corpus *c) {
    for (size_t i = 0; i < c->n; i++) free(c->text[i]);
    free(c->text);
    free(c->len);
}

static uint32_t fnv(const char *s, size_t n) {
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x01000193u;
    return h;
}

/* IDS in gen.py's base-47 code. */
static int64_t parse_ids(const char *s, const char *end, int32_t *ids, int64_t cap) {
    int64_t n = 0, v = 0;
    for (; s < end; s++) {
        int c = (unsigned char)*s;
        if (c >= 0x50) v = v * 47 + (c - 0x50);
        else {
            if (n < cap) ids[n] = (int32_t)(v * 47 + (c - 0x21));
            n++;
            v = 0;
        }
    }
    return n;
}

static void print_ids(const char *what, const int32_t *ids, int64_t n) {
    printf("    %s:", what);
    for (int64_t i = 0; i < n && i < 40; i++) printf(" %d", ids[i]);
    printf(n > 40 ? " ...\n" : "\n");
}

/* "=" means the input text; else the hash. */
static bool check_text(const char *field, size_t flen, const char *got, size_t gn, const char *text, size_t tn) {
    if (flen == 1 && field[0] == '=') return gn == tn && !memcmp(got, text, tn);
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", fnv(got, gn));
    return flen == 8 && !memcmp(field, hex, 8);
}

/* With invalid UTF-8 in the input the reference saw U+FFFD instead, so
 * its decode is compared with the repaired text. */
static void run_one(const char *name, candle_tokenizer *t, bool decode, const char *golden_path, const corpus *c) {
    candle_status st;
    size_t glen;
    char *gold = test_read_file(golden_path, &glen);
    CHECK_MSG(gold != NULL, "%s: no golden %s", name, golden_path);
    if (!gold) {
        candle_tokenizer_free(t);
        return;
    }
    int64_t cap = 1 << 16;
    int32_t *want = malloc((size_t)cap * sizeof *want), *got = malloc((size_t)cap * sizeof *got);
    size_t dcap = 1 << 20;
    char *dec = malloc(dcap);
    int enc_bad = 0, dec_bad = 0, shown = 0;
    size_t line = 0;
    char *p = gold;
    for (; line < c->n && *p; line++) {
        char *nl = strchr(p, '\n'), *t1 = strchr(p, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!nl || !t1 || !t2 || t2 > nl) break;
        int64_t nw = parse_ids(p, t1, want, cap), ng = 0;
        /* The reference text for "=": the input as the reference saw it,
         * which is also what a tokenizer without its lossy UTF-8 step gets. */
        hf_str fixed = {0};
        hf_utf8_lossy(c->text[line], c->len[line], &fixed);
        const char *ref = fixed.p ? fixed.p : "";
        size_t rn = fixed.n;
        const char *in = decode ? c->text[line] : ref;
        size_t in_n = decode ? c->len[line] : rn;
        st = candle_tokenizer_encode(t, in, in_n, true, true, got, cap, &ng);
        if (st != CANDLE_OK || ng != nw || memcmp(got, want, (size_t)nw * sizeof *got)) {
            if (shown++ < 4) {
                printf("  %s: line %zu: encode differs (%s): %.200s\n", name, line + 1,
                       st == CANDLE_OK ? "ids" : candle_last_errmsg(), c->text[line]);
                print_ids("want", want, nw);
                print_ids("got ", got, ng);
            }
            enc_bad++;
        }
        /* limited to half the ids: stopped past it, with the same first ids */
        int64_t lim = nw / 2, n_lim = 0;
        if (st == CANDLE_OK && nw >= 4 &&
            (candle_tokenizer_encode_limit(t, in, in_n, true, true, lim, got, cap, &n_lim) ||
             n_lim <= lim || n_lim > nw || memcmp(got, want, (size_t)lim * sizeof *got))) {
            if (shown++ < 4) printf("  %s: line %zu: encode_limit(%lld) gave %lld ids\n", name, line + 1,
                                    (long long)lim, (long long)n_lim);
            enc_bad++;
        }
        for (int skip = 0; decode && skip < 2; skip++) {
            const char *f = skip ? t2 + 1 : t1 + 1;
            size_t fl = skip ? (size_t)(nl - t2 - 1) : (size_t)(t2 - t1 - 1);
            size_t dl = 0;
            st = candle_tokenizer_decode(t, want, nw, !skip, dec, dcap, &dl);
            if (st != CANDLE_OK || !check_text(f, fl, dec, dl, ref, rn)) {
                if (shown++ < 4)
                    printf("  %s: line %zu: decode(skip=%d) differs: %.200s -> %.*s\n", name, line + 1, skip,
                           ref, (int)(dl < 300 ? dl : 300), dec);
                dec_bad++;
                break;
            }
        }
        hf_str_free(&fixed);
        p = nl + 1;
    }
    CHECK_MSG(line == c->n, "%s: golden has %zu lines, corpus %zu", name, line, c->n);
    printf("%s: %zu strings, %d encode mismatches, %d decode mismatches\n", name, line, enc_bad, dec_bad);
    CHECK_MSG(enc_bad == 0 && dec_bad == 0, "%s: %d encode, %d decode mismatches", name, enc_bad, dec_bad);
    free(want);
    free(got);
    free(dec);
    free(gold);
}

/* The tokenizer from the tokenizer.ggml.* keys candle quantize derives
 * from the file (NULL where it derives none): these must encode as the
 * reference does, or llama.cpp would not. Decoding is not compared, as
 * the keys carry no decoder (BERT's cleanup of spaces, for one). */
static candle_tokenizer *ggml_keys(const char *name, const char *json, const char *config, bool want) {
    candle_gguf_writer *w = NULL;
    char why[160];
    void *mem = NULL;
    size_t n = 0;
    candle_gguf *g = NULL;
    candle_tokenizer *t = NULL;
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    CHECK_OK(NULL, candle_gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(NULL, cquant_write_ggml_vocab(w, json, config, 0, why, sizeof why));
    CHECK_MSG(!why[0] == want, "%s: ggml keys %s (%s)", name, why[0] ? "not written" : "written, unexpected", why);
    if (!why[0]) {
        CHECK_OK(NULL, candle_gguf_writer_write_memory(w, &mem, &n));
        CHECK_OK(NULL, candle_gguf_open_memory(&g, mem, n));
        if (g) CHECK_MSG(candle_tokenizer_from_gguf(&t, g) == CANDLE_OK, "%s: %s", name, candle_last_errmsg());
    } else
        printf("%s: no ggml keys: %s\n", name, why);
    candle_gguf_close(g);
    free(mem);
    candle_gguf_writer_free(w);
    return t;
}

static const char *const trained[] = {"bpe-llama3", "bpe-roberta", "wordpiece-bert", "wordpiece-mix",
                                      "bpe-fallback", "bpe-metaspace", "unigram-nfkc", "unigram-spm",
                                      "bpe-clip", "bpe-whitespace", "unigram-fallback", "bpe-o200k", NULL};
static const char *const real[] = {"all-minilm-l6-v2", "all-mpnet-base-v2", "whisper-tiny-en", "whisper-base",
                                   "embeddinggemma-300m",
                                   NULL};
/* The tokenizers whose ggml keys are written (every other is refused). */
static const char *const ggml_ok = " bpe-llama3 bpe-fallback all-minilm-l6-v2 all-mpnet-base-v2 embeddinggemma-300m ";

static bool listed(const char *list, const char *name) {
    const char *p = strstr(list, name);
    size_t n = strlen(name);
    return p && p[-1] == ' ' && p[n] == ' ';
}

static void run_all(const corpus *c, const char *only) {
    char json[1024], cfg[1024], gold[1024], rel[512];
    for (int k = 0; k < 2; k++) {
        for (const char *const *n = k ? real : trained; *n; n++) {
            if (only && strcmp(only, *n)) continue;
            if (k) snprintf(rel, sizeof rel, "../shared/data/hf_tokenizers/%s/tokenizer.json", *n);
            else snprintf(rel, sizeof rel, "tests/data/hf_tokenizers/%s/tokenizer.json", *n);
            test_path(rel, json, sizeof json);
            if (!test_need_file(NAME, json)) continue;
            snprintf(cfg, sizeof cfg, "%s", json);
            strcpy(strrchr(cfg, '/') + 1, "tokenizer_config.json");
            snprintf(rel, sizeof rel, "tests/data/hf_tokenizers/%s.golden", *n);
            test_path(rel, gold, sizeof gold);
            const char *config = access(cfg, R_OK) == 0 ? cfg : NULL;
            candle_tokenizer *t = NULL;
            candle_status st = candle_tokenizer_from_hf_file(&t, json, config);
            CHECK_MSG(st == CANDLE_OK, "%s: %s", *n, candle_last_errmsg());
            if (t) run_one(*n, t, true, gold, c);
            candle_tokenizer_free(t);
            char gname[128];
            snprintf(gname, sizeof gname, "%s (ggml keys)", *n);
            if ((t = ggml_keys(gname, json, config, listed(ggml_ok, *n)))) run_one(gname, t, false, gold, c);
            candle_tokenizer_free(t);
        }
    }
}

static void expect_error(const char *json, candle_status want, const char *sub) {
    candle_tokenizer *t = NULL;
    candle_status st = candle_tokenizer_from_hf_memory(&t, json, strlen(json), NULL, 0, "x.json");
    CHECK_MSG(st == want, "status %d, want %d for %s", (int)st, (int)want, json);
    CHECK(t == NULL);
    if (st != CANDLE_OK) CHECK_CONTAINS(candle_last_errmsg(), sub);
    candle_tokenizer_free(t);
    candle_clear_last_error();
}

#define WP_MODEL "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"[CLS]\":1,\"[SEP]\":2,\"hello\":3,\"world\":4,\"##s\":5}}"

static void test_errors(void) {
    expect_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Foo\"}]}," WP_MODEL "}",
                 CANDLE_ERR_UNSUPPORTED, "x.json: normalizer.normalizers[1].type 'Foo' is not supported");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Bar\"}," WP_MODEL "}", CANDLE_ERR_UNSUPPORTED,
                 "pre_tokenizer.type 'Bar'");
    expect_error("{\"decoder\":{\"type\":\"CTC\"}," WP_MODEL "}", CANDLE_ERR_UNSUPPORTED, "decoder.type 'CTC'");
    expect_error("{\"model\":{\"type\":\"Magic\",\"vocab\":{}}}", CANDLE_ERR_UNSUPPORTED, "model.type 'Magic'");
    expect_error("{\"model\":{\"type\":\"WordPiece\"}}", CANDLE_ERR_FORMAT, "x.json: model.vocab: missing");
    expect_error("{\"model\":", CANDLE_ERR_FORMAT, "x.json");
    expect_error("[1,2]", CANDLE_ERR_FORMAT, "expected an object");
    expect_error("{}", CANDLE_ERR_FORMAT, "model: missing");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a c\"]}}", CANDLE_ERR_FORMAT,
                 "model.merges[0]: merge token out of vocabulary");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                 "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
                 CANDLE_ERR_UNSUPPORTED, "pre_tokenizer.pattern");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", CANDLE_ERR_FORMAT,
                 "model.vocab[\"a\"]: expected an id");
}

static void test_files(void) {
    candle_tokenizer *t = (candle_tokenizer *)1;
    CHECK(candle_tokenizer_from_hf_file(&t, "/nonexistent/tokenizer.json", NULL) == CANDLE_ERR_IO);
    CHECK(t == NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "/nonexistent/tokenizer.json");
    candle_clear_last_error();
    /* A truncated real file is a format error naming it. */
    char path[1024];
    size_t len;
    char *json = test_read_file(test_path("tests/data/hf_tokenizers/wordpiece-bert/tokenizer.json", path, sizeof path), &len);
    CHECK(json != NULL);
    if (!json) return;
    CHECK(candle_tokenizer_from_hf_memory(&t, json, len / 2, NULL, 0, "half.json") == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "half.json");
    candle_clear_last_error();
    CHECK(candle_tokenizer_from_hf_memory(&t, json, len, "{\"bos_token\": 5}", 16, "x.json") == CANDLE_OK);
    CHECK(t && candle_tokenizer_bos(t) == -1 && candle_tokenizer_find(t, "[CLS]") == 2);
    candle_tokenizer_free(t);
    free(json);
}

/* parse_special=false encodes special-token text as text (the reference's
 * encode_special_tokens); without a post-processor, tokenizer_config's
 * add_bos_token/add_eos_token decide. Expected ids from `tokenizers`. */
static void test_special_flags(void) {
    char path[1024];
    candle_tokenizer *t = NULL;
    CHECK(candle_tokenizer_from_hf_file(&t, test_path("tests/data/hf_tokenizers/bpe-llama3/tokenizer.json", path,
                                                      sizeof path), NULL) == CANDLE_OK);
    if (!t) return;
    static const int32_t plain[] = {74, 75, 452, 71, 538, 65, 290, 436, 223, 273, 274, 71};
    static const int32_t special[] = {74, 75, 2, 223, 273, 274, 71};
    int32_t ids[32];
    int64_t n = 0;
    const char *text = "hi<|eot_id|> there";
    CHECK(candle_tokenizer_encode(t, text, strlen(text), false, false, ids, 32, &n) == CANDLE_OK);
    CHECK(n == 12 && !memcmp(ids, plain, sizeof plain));
    CHECK(candle_tokenizer_encode(t, text, strlen(text), false, true, ids, 32, &n) == CANDLE_OK);
    CHECK(n == 7 && !memcmp(ids, special, sizeof special));
    CHECK(candle_tokenizer_is_eog(t, 2)); /* <|eot_id|> */
    candle_tokenizer_free(t);

    const char *json = "{\"added_tokens\":[{\"id\":1,\"content\":\"[CLS]\",\"special\":true},"
                       "{\"id\":2,\"content\":\"[SEP]\",\"special\":true}]," WP_MODEL "}";
    const char *cfg = "{\"bos_token\":\"[CLS]\",\"eos_token\":{\"content\":\"[SEP]\"},"
                      "\"add_bos_token\":true,\"add_eos_token\":true,\"model_max_length\":8}";
    CHECK(candle_tokenizer_from_hf_memory(&t, json, strlen(json), cfg, strlen(cfg), "cfg.json") == CANDLE_OK);
    if (!t) return;
    CHECK(candle_tokenizer_bos(t) == 1 && candle_tokenizer_eos(t) == 2);
    CHECK(candle_tokenizer_encode(t, "hello", 5, true, true, ids, 32, &n) == CANDLE_OK);
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 3 && ids[2] == 2);
    CHECK(candle_tokenizer_encode(t, "hello", 5, false, true, ids, 32, &n) == CANDLE_OK);
    CHECK(n == 1 && ids[0] == 3);
    candle_tokenizer_free(t);
}

static void test_pair(void) {
    const char *json = "{\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},"
                       "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
                       "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",2],\"cls\":[\"[CLS]\",1]},"
                       "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
                       "\"added_tokens\":[{\"id\":1,\"content\":\"[CLS]\",\"special\":true},"
                       "{\"id\":2,\"content\":\"[SEP]\",\"special\":true}]," WP_MODEL "}";
    candle_tokenizer *t = NULL;
    CHECK(candle_tokenizer_from_hf_memory(&t, json, strlen(json), "{\"eos_token\":{\"content\":\"[SEP]\"}}", 33,
                                          "pair.json") == CANDLE_OK);
    if (!t) return;
    int32_t ids[16], types[16];
    int64_t n = 0;
    CHECK(candle_tokenizer_encode_pair(t, "Hello worlds", 12, "WORLD", 5, true, ids, 16, &n, types) == CANDLE_OK);
    static const int32_t want[] = {1, 3, 4, 5, 2, 4, 2}, want_ty[] = {0, 0, 0, 0, 0, 1, 1};
    CHECK(n == 7 && !memcmp(ids, want, sizeof want) && !memcmp(types, want_ty, sizeof want_ty));
    CHECK(candle_tokenizer_eos(t) == 2 && candle_tokenizer_is_eog(t, 2));
    CHECK(candle_tokenizer_find(t, "[CLS]") == 1);
    char buf[64];
    size_t len;
    CHECK(candle_tokenizer_decode(t, ids, n, false, buf, sizeof buf, &len) == CANDLE_OK);
    CHECK_MSG(!strcmp(buf, "hello worlds world"), "decoded '%s'", buf);
    /* Streaming gives the same text. */
    candle_detok d = {.strip_space = true};
    char out[256] = "", piece[256];
    for (int64_t i = 0; i < n; i++) {
        CHECK(candle_tokenizer_detok_push(t, &d, ids[i], false, piece, sizeof piece, &len) == CANDLE_OK);
        strcat(out, piece);
    }
    CHECK_MSG(!strcmp(out, "hello worlds world"), "streamed '%s'", out);
    candle_tokenizer_free(t);
}

int main(int argc, char **argv) {
    corpus c = {0};
    CHECK(load_corpus(&c));
    CHECK(c.n >= 5000);
    run_all(&c, argc > 1 ? argv[1] : NULL);
    corpus_free(&c);
    test_errors();
    test_files();
    test_special_flags();
    test_pair();
    return test_done(NAME);
}
