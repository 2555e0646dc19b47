/* Zero heap allocations per call in steady state (issue 19): after a few
 * warm-up calls, candle_encoder_embed / _embed_tokens on all-MiniLM-L6-v2
 * (and embed on EmbeddingGemma, a bidirectional decoder, when fetched)
 * and candle_encoder_classify / _rerank (and their token entry points) on
 * the committed tiny classifier and reranker allocate nothing for inputs of
 * lengths and batch sizes already seen. Counted through the preloaded
 * counter (bench/malloc_count.c; tests/CMakeLists.txt sets LD_PRELOAD for
 * this test): without it (the sanitizer builds bring their own allocator)
 * the test skips. The counter is process-wide, so the calls run on one
 * library thread pool whose workers allocate nothing either. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "test.h"

static unsigned long long (*count_fn)(void);

#define ROUNDS 4

static const char *const texts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "A short one.",
    "Zero heap allocations per request in steady state: the workspace keeps its context, its packer "
    "buffers and the tokenizer's scratch between calls, so a server answering request after request "
    "of similar sizes goes to the allocator only while it warms up.",
};
#define N_TEXTS 3

typedef candle_status (*call_fn)(const candle_encoder *e, void *arg);

/* Allocations of one call of f after warm-up, the largest over ROUNDS. */
static unsigned long long steady_allocs(const char *what, const candle_encoder *e, call_fn f, void *arg) {
    for (int i = 0; i < 3; i++) {
        candle_status s = f(e, arg);
        CHECK_MSG(s == CANDLE_OK, "%s: %s", what, candle_last_errmsg());
        if (s) return ~0ull;
    }
    unsigned long long most = 0;
    for (int r = 0; r < ROUNDS; r++) {
        unsigned long long before = count_fn();
        candle_status s = f(e, arg);
        unsigned long long n = count_fn() - before;
        CHECK_MSG(s == CANDLE_OK, "%s: %s", what, candle_last_errmsg());
        if (n > most) most = n;
    }
    printf("%-40s %llu allocations per call\n", what, most);
    return most;
}

typedef struct embed_arg {
    const char *const *texts;
    int64_t n;
    float *out;
    size_t cap;
} embed_arg;

static candle_status embed_texts(const candle_encoder *e, void *arg) {
    embed_arg *a = arg;
    return candle_encoder_embed(e, a->texts, NULL, a->n, NULL, a->out, a->cap);
}

typedef struct tokens_arg {
    const int32_t *ids[N_TEXTS];
    int32_t *types[N_TEXTS];
    int64_t n_ids[N_TEXTS];
    int64_t n;
    float *out;
    size_t cap;
} tokens_arg;

static candle_status embed_tokens(const candle_encoder *e, void *arg) {
    tokens_arg *a = arg;
    return candle_encoder_embed_tokens(e, a->ids, a->n_ids, a->n, NULL, a->out, a->cap);
}

static candle_status classify_texts(const candle_encoder *e, void *arg) {
    embed_arg *a = arg;
    return candle_encoder_classify(e, a->texts, NULL, a->n, NULL, a->out, a->cap);
}

static candle_status classify_tokens(const candle_encoder *e, void *arg) {
    tokens_arg *a = arg;
    return candle_encoder_classify_tokens(e, a->ids, a->n_ids, a->n, NULL, a->out, a->cap);
}

static candle_status rerank_texts(const candle_encoder *e, void *arg) {
    embed_arg *a = arg;
    return candle_encoder_rerank(e, "what does the fox do?", SIZE_MAX, a->texts, NULL, a->n, NULL, a->out);
}

static candle_status rerank_tokens(const candle_encoder *e, void *arg) {
    tokens_arg *a = arg;
    return candle_encoder_rerank_tokens(e, a->ids, (const int32_t *const *)a->types, a->n_ids, a->n, NULL, a->out);
}

static candle_encoder *load(const char *dir) {
    candle_encoder_params p = candle_encoder_default_params();
    p.n_threads = 2;
    candle_encoder *e = NULL;
    candle_status s = candle_encoder_load(&e, dir, &p);
    CHECK_MSG(s == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    return e;
}

/* The ids of texts[0..n) (as pairs with the query when pair). */
static bool tokenize_all(const candle_encoder *e, bool pair, tokens_arg *t, int64_t n) {
    int64_t cap = candle_encoder_max_tokens(e);
    t->n = n;
    for (int64_t i = 0; i < n; i++) {
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        t->types[i] = malloc((size_t)cap * sizeof *t->types[i]);
        t->ids[i] = ids;
        candle_status s =
            pair ? candle_encoder_tokenize_pair(e, "what does the fox do?", SIZE_MAX, texts[i], SIZE_MAX, NULL, ids,
                                                t->types[i], (size_t)cap, &t->n_ids[i])
                 : candle_encoder_tokenize(e, texts[i], SIZE_MAX, NULL, ids, (size_t)cap, &t->n_ids[i]);
        CHECK_MSG(s == CANDLE_OK, "tokenize: %s", candle_last_errmsg());
        if (s) return false;
    }
    return true;
}

static void free_tokens(tokens_arg *t) {
    for (int64_t i = 0; i < t->n; i++) {
        free((void *)t->ids[i]);
        free(t->types[i]);
    }
}

/* A loaded encoder, an output of N_TEXTS rows of its width (the embedding
 * dimension, or the labels of a head) and, when tokens, the texts' ids (as
 * pairs with the query when pair) with that output. */
typedef struct fixture {
    candle_encoder *e;
    int64_t width;
    float *out;
    tokens_arg t;
} fixture;

static bool fixture_open(fixture *f, const char *dir, bool head, bool tokens, bool pair) {
    memset(f, 0, sizeof *f);
    if (!(f->e = load(dir))) return false;
    f->width = head ? candle_encoder_n_labels(f->e) : candle_encoder_dim(f->e);
    f->out = malloc((size_t)(N_TEXTS * f->width) * sizeof *f->out);
    f->t.out = f->out;
    f->t.cap = (size_t)(N_TEXTS * f->width);
    return !tokens || tokenize_all(f->e, pair, &f->t, N_TEXTS);
}

static void fixture_close(fixture *f) {
    free_tokens(&f->t);
    free(f->out);
    candle_encoder_free(f->e);
}

/* One input of each length, then all of them in one call: every case must
 * allocate nothing once warm, also after the others ran. */
static void check_embedder(const char *dir) {
    fixture f;
    if (fixture_open(&f, dir, false, true, false)) {
        char what[96];
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t k = 0; k < N_TEXTS; k++) {
                embed_arg a = {texts + k, 1, f.out, (size_t)f.width};
                snprintf(what, sizeof what, "embed: text %lld", (long long)k);
                CHECK(steady_allocs(what, f.e, embed_texts, &a) == 0);
            }
            embed_arg a = {texts, N_TEXTS, f.out, f.t.cap};
            CHECK(steady_allocs("embed: 3 texts", f.e, embed_texts, &a) == 0);
            tokens_arg one = f.t;
            one.n = 1;
            CHECK(steady_allocs("embed_tokens: 1 input", f.e, embed_tokens, &one) == 0);
            CHECK(steady_allocs("embed_tokens: 3 inputs", f.e, embed_tokens, &f.t) == 0);
        }
    }
    fixture_close(&f);
}

/* A bidirectional decoder (decoder_hidden_bidir) and its tokenizer. */
static void check_bidir(const char *dir) {
    fixture f;
    if (fixture_open(&f, dir, false, false, false)) {
        embed_arg one = {texts, 1, f.out, (size_t)f.width}, all = {texts, N_TEXTS, f.out, f.t.cap};
        CHECK(steady_allocs("embeddinggemma embed: 1 text", f.e, embed_texts, &one) == 0);
        CHECK(steady_allocs("embeddinggemma embed: 3 texts", f.e, embed_texts, &all) == 0);
    }
    fixture_close(&f);
}

static void check_head(const char *dir, bool rerank) {
    fixture f;
    if (fixture_open(&f, dir, true, true, rerank)) {
        embed_arg a = {texts, N_TEXTS, f.out, f.t.cap}, one = {texts, 1, f.out, (size_t)f.width};
        for (int pass = 0; pass < 2; pass++) {
            if (rerank) {
                CHECK(steady_allocs("rerank: 1 document", f.e, rerank_texts, &one) == 0);
                CHECK(steady_allocs("rerank: 3 documents", f.e, rerank_texts, &a) == 0);
                CHECK(steady_allocs("rerank_tokens: 3 pairs", f.e, rerank_tokens, &f.t) == 0);
            } else {
                CHECK(steady_allocs("classify: 1 text", f.e, classify_texts, &one) == 0);
                CHECK(steady_allocs("classify: 3 texts", f.e, classify_texts, &a) == 0);
                CHECK(steady_allocs("classify_tokens: 3 inputs", f.e, classify_tokens, &f.t) == 0);
            }
        }
    }
    fixture_close(&f);
}

int main(void) {
    *(void **)&count_fn = dlsym(RTLD_DEFAULT, "candle_malloc_count");
    if (!count_fn) {
        test_skip("test_encoder_allocs",
                  "the allocation counter is not preloaded (LD_PRELOAD=libcandle_malloc_count.so; "
                  "not under the sanitizers)");
        return test_done("test_encoder_allocs");
    }
    char dir[1200], p[1200];
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(dir, sizeof dir, "%s/models/all-minilm-l6-v2", cache ? cache : "build-data");
    if (test_need_file("all-MiniLM-L6-v2 (scripts/fetch-minilm.sh)", dir)) check_embedder(dir);
    snprintf(dir, sizeof dir, "%s/models/embeddinggemma-300m", cache ? cache : "build-data");
    if (access(dir, R_OK) == 0) check_bidir(dir);
    else printf("embeddinggemma-300m: %s absent, not checked\n", dir);
    check_head(test_path("tests/data/encoders/bert-tiny-classifier", p, sizeof p), false);
    check_head(test_path("tests/data/encoders/bert-tiny-reranker", p, sizeof p), true);
    return test_done("test_encoder_allocs");
}
