/* The CPU thread pool: every job runs on exactly its nth threads, barriers
 * order the phases of a job, workers that went to sleep wake up, and the
 * fast kernels that split work across threads give the single-thread
 * result. Labelled "threads" so `make test-tsan` runs it under
 * ThreadSanitizer. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "test.h"

#define MAX_T 8

typedef struct job {
    cpu_pool *pool;
    atomic_int task_hits[64]; /* how often each task ran */
    int thread_busy[MAX_T];   /* plain: each written by its own thread only */
    int phase_of[MAX_T];      /* team test: written before, read after barriers */
    atomic_int errors;
    int phases;
} job;

static void count_fn(void *arg, int task, int n_tasks, int thread) {
    job *j = arg;
    if (task < 0 || task >= n_tasks || n_tasks > 64 || thread < 0 || thread >= cpu_pool_size(j->pool))
        atomic_fetch_add(&j->errors, 1);
    else {
        atomic_fetch_add(&j->task_hits[task], 1);
        /* two tasks never run on one thread at once */
        if (j->thread_busy[thread]++) atomic_fetch_add(&j->errors, 1);
        j->thread_busy[thread]--;
    }
}

static void team_fn(void *arg, int task, int n_tasks, int thread) {
    job *j = arg;
    (void)thread;
    for (int p = 1; p <= j->phases; p++) {
        j->phase_of[task] = p;
        cpu_pool_barrier(j->pool);
        for (int t = 0; t < n_tasks; t++)
            if (j->phase_of[t] != p) atomic_fetch_add(&j->errors, 1);
        cpu_pool_barrier(j->pool);
    }
}

static void test_dispatch(int n) {
    cpu_pool *pool = cpu_pool_new(n);
    CHECK(pool != NULL);
    if (!pool) return;
    CHECK(cpu_pool_size(pool) == n);
    job *j = calloc(1, sizeof *j);
    j->pool = pool;
    int runs = 400, expect[64] = {0};
    for (int r = 0; r < runs; r++) {
        int n_tasks = 1 + r % 37;
        cpu_pool_run(pool, n_tasks, count_fn, j);
        for (int t = 0; t < n_tasks; t++) expect[t]++;
        if (r % 200 == 199) {
            /* long enough for the workers to stop spinning and sleep */
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    for (int t = 0; t < 64; t++)
        CHECK_MSG(atomic_load(&j->task_hits[t]) == expect[t], "pool %d task %d: ran %d times, want %d", n, t,
                  atomic_load(&j->task_hits[t]), expect[t]);
    CHECK(atomic_load(&j->errors) == 0);

    job *b = calloc(1, sizeof *b);
    b->pool = pool;
    b->phases = 200;
    cpu_pool_run_team(pool, team_fn, b);
    CHECK_MSG(atomic_load(&b->errors) == 0, "pool %d: %d barrier violations", n, atomic_load(&b->errors));
    free(j);
    free(b);
    cpu_pool_free(pool);
}

/* The fast kernels on 1 and 2 threads give the same values (each thread
 * computes whole outputs, so they are bit-identical). */
static void test_kernels_split(void) {
    candle_ctx *ctx[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        candle_ctx_params p = candle_ctx_default_params();
        p.eager = true;
        p.n_threads = i + 1;
        CHECK(candle_ctx_init(&ctx[i], &p) == CANDLE_OK);
    }
    if (!ctx[0] || !ctx[1]) return;
    cpu_set_always_parallel(true);
    enum { OUT_MAX = 16384 }; /* all five results: 3072 + 48 + 3072 + 2048 + 6144 */
    float *out[2] = {calloc(OUT_MAX, sizeof(float)), calloc(OUT_MAX, sizeof(float))};
    int64_t as[2] = {64, 96}, ws[2] = {48, 96}, xs[2] = {1, 96}, qs[4] = {1, 4, 16, 32}, ks[4] = {1, 2, 40, 32};
    float *data = malloc(sizeof(float) * 64 * 96);
    for (int i = 0; i < 64 * 96; i++) data[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int c = 0; c < 2; c++) {
        candle_ctx *x = ctx[c];
        candle_tensor *a = candle_tensor_from_f32(x, CANDLE_DTYPE_F32, 2, as, data);
        candle_tensor *w = candle_tensor_from_f32(x, CANDLE_DTYPE_F32, 2, ws, data);
        candle_tensor *wq = candle_tensor_from_f32(x, CANDLE_DTYPE_Q8_0, 2, ws, data);
        candle_tensor *v = candle_tensor_from_f32(x, CANDLE_DTYPE_F32, 2, xs, data);
        candle_tensor *q = candle_tensor_from_f32(x, CANDLE_DTYPE_F32, 4, qs, data);
        candle_tensor *k = candle_tensor_from_f32(x, CANDLE_DTYPE_F32, 4, ks, data + 7);
        candle_tensor *ys[5] = {
            candle_linear(x, a, w, NULL),  /* GEMM */
            candle_linear(x, v, w, NULL),  /* matrix-vector */
            candle_linear(x, a, wq, NULL), /* quantized: two phases and a barrier */
            candle_attention(x, q, k, k, NULL, 0.0, true),
            candle_softmax(x, a, -1),
        };
        float *o = out[c];
        for (int i = 0; i < 5; i++) {
            CHECK_MSG(ys[i] && cpu_fast_kernel_for(ys[i]), "case %d: %s", i, candle_errmsg(x));
            if (!ys[i] || o + candle_tensor_numel(ys[i]) > out[c] + OUT_MAX) continue;
            CHECK(candle_tensor_to_f32(ys[i], o) == CANDLE_OK);
            o += candle_tensor_numel(ys[i]);
        }
    }
    CHECK(memcmp(out[0], out[1], sizeof(float) * OUT_MAX) == 0);
    cpu_set_always_parallel(false);
    free(out[0]);
    free(out[1]);
    free(data);
    candle_ctx_free(ctx[0]);
    candle_ctx_free(ctx[1]);
}

/* Two contexts on one backend, computing from two threads at once: the
 * backend serialises its fast nodes (shared pool and scratch). */
typedef struct shared_job {
    candle_backend *be;
    float *out; /* [48 * 64] */
    int rc;
} shared_job;

static void *shared_thread(void *arg) {
    shared_job *j = arg;
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    p.backend = j->be;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return NULL;
    int64_t as[2] = {48, 80}, ws[2] = {64, 80};
    float *data = malloc(sizeof(float) * 64 * 80);
    for (int i = 0; i < 64 * 80; i++) data[i] = (float)((i * 29 % 97) - 48) / 48.0f;
    candle_tensor *a = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, as, data);
    candle_tensor *w = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, ws, data);
    candle_tensor *y = NULL;
    for (int r = 0; r < 20; r++) y = candle_softmax(ctx, candle_linear(ctx, a, w, NULL), -1);
    j->rc = y ? candle_tensor_to_f32(y, j->out) : CANDLE_ERR_INVALID_ARG;
    free(data);
    candle_ctx_free(ctx);
    return NULL;
}

static void test_shared_backend(void) {
    candle_backend *be = candle_backend_cpu_init(2);
    CHECK(be != NULL);
    if (!be) return;
    cpu_set_always_parallel(true);
    shared_job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (shared_job){be, calloc(48 * 64, sizeof(float)), -1};
        CHECK(pthread_create(&th[i], NULL, shared_thread, &jobs[i]) == 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(jobs[0].rc == CANDLE_OK && jobs[1].rc == CANDLE_OK);
    CHECK(memcmp(jobs[0].out, jobs[1].out, sizeof(float) * 48 * 64) == 0);
    cpu_set_always_parallel(false);
    free(jobs[0].out);
    free(jobs[1].out);
    candle_backend_free(be);
}

int main(void) {
    for (int n = 1; n <= 4; n++) test_dispatch(n);
    test_kernels_split();
    test_shared_backend();
    return test_done("test_threadpool");
}
