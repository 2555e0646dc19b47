/* One candle_encoder shared by threads: each call takes a forward
 * workspace of its own from the model's free list (src/models/workspace.c)
 * and binds its own tokenizer scratch, so threads embedding, classifying
 * and tokenizing texts of different lengths at once get exactly what one
 * thread gets alone, bit for bit. Labelled "threads" so `make test-tsan`
 * runs it under ThreadSanitizer (the free list's lock, the scratch
 * binding, the context storage cache). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "test.h"

enum { N_THREADS = 4, ROUNDS = 200, N_TEXTS = 4, MAX_DIM = 1024 };

static const char *const texts[N_TEXTS] = {
    "a short one",
    "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun.",
    "Caf\xc3\xa9 na\xc3\xafve \xe6\x9d\xb1\xe4\xba\xac: accents, CJK and punctuation (some of it)!",
    "Shared encoders hand every caller a workspace of its own; the free list grows to the most callers "
    "that ever ran at once and no further, and each returns its workspace when done.",
};

typedef struct worker {
    const candle_encoder *e;
    const float *want; /* [N_TEXTS][4][N_TEXTS, dim]: one thread's embeddings of texts k..k+n */
    int64_t dim, first;
    int wrong, failed;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    float got[N_TEXTS * MAX_DIM];
    for (int r = 0; r < ROUNDS; r++) {
        /* a different subset and order of lengths each round and thread */
        int64_t k = (w->first + r) % N_TEXTS, n = 1 + (r + w->first) % 3;
        if (k + n > N_TEXTS) n = N_TEXTS - k;
        candle_status s = candle_encoder_embed(w->e, texts + k, NULL, n, NULL, got, (size_t)(n * w->dim));
        if (s) {
            w->failed++;
            continue;
        }
        if (memcmp(got, w->want + (k * 4 + n) * N_TEXTS * MAX_DIM, (size_t)(n * w->dim) * sizeof *got)) w->wrong++;
        int32_t ids[512];
        int64_t n_ids = 0;
        if (candle_encoder_tokenize(w->e, texts[k], SIZE_MAX, NULL, ids, 512, &n_ids) || n_ids <= 0) w->failed++;
    }
    return NULL;
}

int main(void) {
    char dir[1200];
    test_path("tests/data/encoders/bert-tiny", dir, sizeof dir);
    candle_encoder_params p = candle_encoder_default_params();
    p.n_threads = 1;
    candle_encoder *e = NULL;
    candle_status s = candle_encoder_load(&e, dir, &p);
    CHECK_MSG(s == CANDLE_OK, "%s: %s", dir, candle_last_errmsg());
    if (s) return test_done("test_encoder_threads");
    int64_t dim = candle_encoder_dim(e);
    CHECK(dim <= MAX_DIM);
    static float want[N_TEXTS * 4 * N_TEXTS * MAX_DIM];
    for (int k = 0; k < N_TEXTS; k++)
        for (int n = 1; n <= 3 && k + n <= N_TEXTS; n++)
            CHECK_OK(NULL, candle_encoder_embed(e, texts + k, NULL, n, NULL, want + (k * 4 + n) * N_TEXTS * MAX_DIM,
                                                (size_t)(n * dim)));
    pthread_t th[N_THREADS];
    worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (worker){e, want, dim, i, 0, 0};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(w[i].failed == 0, "thread %d: %d calls failed", i, w[i].failed);
        CHECK_MSG(w[i].wrong == 0, "thread %d: %d calls gave other embeddings than one thread alone", i,
                  w[i].wrong);
    }
    candle_encoder_free(e);
    return test_done("test_encoder_threads");
}
