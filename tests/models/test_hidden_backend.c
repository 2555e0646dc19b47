/* Nothing bypasses the backend interface: every model runs on a backend
 * whose memory the host cannot address (tests/common/hidden_backend.c: a
 * host read of its storages faults; it computes only on its own storages),
 * once taking every op (whole graphs through graph_compute) and once with
 * RoPE and softmax refused so the scheduler runs them on a CPU backend with
 * counted copies, and gives the CPU backend's logits, bit for bit: a
 * prompt, then greedy decoding in a session, and the batched step over
 * sessions and a paged KV pool. stories260K (../shared/data), the tiny
 * architectures (tests/data/tiny) and SmolLM2-135M Q4_1 where models/ has it. */
#include <unistd.h>

#include "common/hidden_backend.h"
#include "models/model-impl.h"
#include "test.h"

enum { N_THREADS = 2, N_DECODE = 4 };

static const candle_op kRefused[] = {CANDLE_OP_ROPE, CANDLE_OP_SOFTMAX, CANDLE_OP_NONE};

typedef struct pair {
    const char *name;
    candle_model *cpu, *dev;
    candle_backend *hidden;
    bool refusing; /* RoPE and softmax go to the CPU fallback */
    int64_t nv;
} pair;

static bool load_pair(pair *p, const char *name, const char *path, bool refusing) {
    memset(p, 0, sizeof *p);
    p->name = name;
    p->refusing = refusing;
    if (access(path, R_OK) != 0) {
        printf("%s: %s absent, not run\n", name, path);
        return false;
    }
    p->hidden = test_hidden_backend_init(N_THREADS, refusing ? kRefused : NULL);
    CHECK(p->hidden != NULL);
    candle_model_params mp = candle_model_default_params();
    mp.n_threads = N_THREADS;
    CHECK_OK(NULL, candle_model_load(&p->cpu, path, &mp));
    mp.backend = p->hidden;
    CHECK_MSG(candle_model_load(&p->dev, path, &mp) == CANDLE_OK, "%s on the hidden backend: %s", name,
              candle_last_errmsg());
    if (!p->cpu || !p->dev) return false;
    p->nv = candle_model_get_config(p->cpu)->n_vocab;
    /* the weights live in the hidden backend's memory, not the mapped file */
    CHECK_MSG(!candle_tensor_is_host(p->dev->tok_embd) && p->dev->tok_embd->storage->backend == p->hidden,
              "%s: token embeddings not on the hidden backend", name);
    return true;
}

static void free_pair(pair *p) {
    candle_model_free(p->cpu);
    candle_model_free(p->dev);
    if (p->hidden) {
        long allocs, live, graphs;
        test_hidden_backend_counts(p->hidden, &allocs, &live, &graphs);
        CHECK_MSG(live == 0 && allocs > 0, "%s: hidden backend storages: %ld made, %ld still live", p->name, allocs,
                  live);
        /* whole graphs only where no node needs the scheduler */
        CHECK_MSG(p->refusing ? graphs == 0 : graphs > 0, "%s: %ld whole graphs handed over (refusing ops: %d)",
                  p->name, graphs, p->refusing);
        candle_backend_free(p->hidden);
    }
}

static void same_bits(const float *a, const float *b, int64_t n, const char *what) {
    int64_t bad = 0;
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        bad += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld logits differ from the CPU backend's (max %g)", what, (long long)bad,
              (long long)n, d);
}

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* A prompt and N_DECODE greedy steps in a session on each backend. */
static void check_session(pair *p, const int32_t *prompt, int64_t n) {
    float *a = malloc((size_t)p->nv * sizeof *a), *b = malloc((size_t)p->nv * sizeof *b);
    candle_session *sa = NULL, *sb = NULL;
    candle_session_params sp = {.n_ctx = 64};
    CHECK_OK(NULL, candle_session_init(&sa, p->cpu, &sp));
    CHECK_OK(NULL, candle_session_init(&sb, p->dev, &sp));
    if (!sa || !sb) goto done;
    CHECK(!candle_tensor_is_host(sb->kv.k[0]));
    CHECK_OK(NULL, candle_session_eval(sa, prompt, n, a, false));
    CHECK_MSG(candle_session_eval(sb, prompt, n, b, false) == CANDLE_OK, "%s: %s", p->name, candle_session_errmsg(sb));
    char what[96];
    snprintf(what, sizeof what, "%s prompt", p->name);
    same_bits(a, b, p->nv, what);
    for (int k = 0; k < N_DECODE; k++) {
        int32_t t = argmax(a, p->nv);
        CHECK_OK(NULL, candle_session_eval(sa, &t, 1, a, false));
        CHECK_OK(NULL, candle_session_eval(sb, &t, 1, b, false));
        snprintf(what, sizeof what, "%s decode step %d", p->name, k);
        same_bits(a, b, p->nv, what);
    }
    uint64_t copies, bytes, fallback;
    candle_ctx_transfer_stats(sb->ctx, &copies, &bytes, &fallback);
    CHECK_MSG(p->refusing ? fallback > 0 && copies >= 2 * fallback && bytes > 0 : copies == 0 && fallback == 0,
              "%s: %llu nodes on the CPU fallback, %llu copies (%llu bytes)", p->name, (unsigned long long)fallback,
              (unsigned long long)copies, (unsigned long long)bytes);
    candle_ctx_transfer_stats(sa->ctx, &copies, &bytes, &fallback);
    CHECK_MSG(copies == 0 && fallback == 0, "%s: the CPU backend copied %llu times", p->name,
              (unsigned long long)copies);
done:
    candle_session_free(sa);
    candle_session_free(sb);
    free(a);
    free(b);
}

/* One batched step: a session's prompt and a paged sequence's, both models. */
static void check_batch(pair *p, const int32_t *prompt, int64_t n) {
    candle_model *ms[2] = {p->cpu, p->dev};
    float *logits[2];
    for (int k = 0; k < 2; k++) {
        logits[k] = calloc(2 * (size_t)p->nv, sizeof(float));
        candle_batch *b = NULL;
        candle_kv_pool *pool = NULL;
        candle_session *s = NULL;
        candle_kv_seq seq;
        CHECK_OK(NULL, candle_batch_init(&b, ms[k], 0));
        CHECK_OK(NULL, candle_kv_pool_init(&pool, ms[k], 8, CANDLE_DTYPE_F32));
        CHECK_OK(NULL, candle_session_init(&s, ms[k], &(candle_session_params){.n_ctx = 64}));
        CHECK(!candle_kv_seq_init(&seq, 64));
        if (b && pool && s) {
            candle_batch_seq q[2] = {{.sess = s, .tokens = prompt, .n = n, .logits = logits[k]},
                                     {.pool = pool, .paged = &seq, .tokens = prompt + 1, .n = n - 1,
                                      .logits = logits[k] + p->nv}};
            CHECK_MSG(candle_batch_eval(b, q, 2) == CANDLE_OK, "%s batch (%s): %s", p->name, k ? "hidden" : "cpu",
                      candle_batch_errmsg(b));
        }
        if (pool) candle_kv_seq_free(pool, &seq);
        candle_session_free(s);
        candle_kv_pool_free(pool);
        candle_batch_free(b);
    }
    char what[96];
    snprintf(what, sizeof what, "%s batched step", p->name);
    same_bits(logits[0], logits[1], 2 * p->nv, what);
    free(logits[0]);
    free(logits[1]);
}

static int run_model(const char *name, const char *path) {
    int ran = 0;
    for (int refusing = 0; refusing < 2; refusing++) {
        pair p;
        if (load_pair(&p, name, path, refusing)) {
            int32_t prompt[9];
            for (int i = 0; i < 9; i++) prompt[i] = (int32_t)((1 + 37 * i) % p.nv);
            check_session(&p, prompt, 9);
            check_batch(&p, prompt, 9);
        }
        ran += p.dev != NULL;
        free_pair(&p);
    }
    return ran == 2;
}

int main(void) {
    char path[512];
    int ran = 0;
    static const char *const tiny[] = {"qwen2", "qwen3", "gemma2", "gemma3", "phi3"};
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "tests/data/tiny/%s.gguf", tiny[i]);
        ran += run_model(tiny[i], test_path(rel, path, sizeof path));
    }
    ran += run_model("stories260K", test_path("../shared/data/models/stories260K.gguf", path, sizeof path));
    ran += run_model("SmolLM2-135M", test_path("models/SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path));
    CHECK_MSG(ran >= 5, "only %d models ran", ran);
    return test_done("test_hidden_backend");
}
