/* Read bandwidth and FMA peak for the roofline of `candle bench`. The CLI is
 * built without -mavx2, so the AVX2 kernels carry a target attribute and run
 * only when cpuid says the CPU has them. */
#include "bench_roofline.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define BW_BYTES ((size_t)256 << 20) /* 8x a 32 MiB L3 */
#define BW_PASSES 5
#define FMA_ITERS 4000000L /* about 25 ms a pass at 30 GFLOP/s a core */
#define FMA_PASSES 3
#define MAX_THREADS 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool has_avx2_fma(void) {
#if HAVE_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

const char *bench_fma_kind(void) { return has_avx2_fma() ? "avx2-fma" : "scalar"; }

/* Results the compiler cannot prove unused. */
static volatile double sink;

#if HAVE_X86
__attribute__((target("avx2"))) static double read_avx2(const unsigned char *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4]; /* unsigned: the sum wraps by design */
    _mm256_storeu_si256((__m256i *)lanes, s);
    return (double)(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iters) {
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    __m256 c[12];
    for (int k = 0; k < 12; k++) c[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++) c[k] = _mm256_fmadd_ps(c[k], a, b);
    float out[8];
    for (int k = 1; k < 12; k++) c[0] = _mm256_add_ps(c[0], c[k]);
    _mm256_storeu_ps(out, c[0]);
    return out[0];
}
#endif

static double read_scalar(const unsigned char *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        const uint64_t *q = (const uint64_t *)(p + i);
        s0 += q[0];
        s1 += q[1];
        s2 += q[2];
        s3 += q[3];
    }
    return (double)(s0 + s1 + s2 + s3);
}

static double fma_scalar(long iters) {
    float c[8];
    for (int k = 0; k < 8; k++) c[k] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 8; k++) c[k] = fmaf(c[k], 0.999999f, 1e-6f);
    return c[0] + c[7];
}

/* Threads start at a gate: the barrier's count is known only once every
 * thread that could be created is running. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go; /* 0 wait, 1 run, -1 give up */
    pthread_barrier_t bar;
} gate;

typedef struct worker {
    pthread_t th;
    gate *g;
    bool fma;              /* else read */
    const unsigned char *p;
    size_t n;              /* bytes of this thread's slice */
    long iters;
    int passes;
    double secs[BW_PASSES]; /* per pass */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    pthread_mutex_lock(&w->g->mu);
    while (!w->g->go) pthread_cond_wait(&w->g->cv, &w->g->mu);
    int go = w->g->go;
    pthread_mutex_unlock(&w->g->mu);
    if (go < 0) return NULL;
    bool fast = has_avx2_fma();
    for (int k = 0; k < w->passes; k++) {
        pthread_barrier_wait(&w->g->bar);
        double t0 = now(), r;
#if HAVE_X86
        if (fast) r = w->fma ? fma_avx2(w->iters) : read_avx2(w->p, w->n);
        else
#endif
            r = w->fma ? fma_scalar(w->iters) : read_scalar(w->p, w->n);
        (void)fast;
        w->secs[k] = now() - t0;
        sink += r;
    }
    return NULL;
}

static void open_gate(gate *g, int go) {
    pthread_mutex_lock(&g->mu);
    g->go = go;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Runs the kernel on n threads; returns the best pass's slowest thread time,
 * 0 when a thread cannot be created. */
static double run_threads(int n, bool fma, const unsigned char *buf, size_t bytes, long iters,
                          int passes) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws) return 0;
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .go = 0};
    size_t slice = bytes / (size_t)n / 128 * 128;
    int started = 1;
    for (int i = 0; i < n; i++) {
        ws[i] = (worker){.g = &g, .fma = fma, .p = buf ? buf + (size_t)i * slice : NULL,
                         .n = slice, .iters = iters, .passes = passes};
        if (i > 0 && started == i && pthread_create(&ws[i].th, NULL, work, &ws[i]) == 0)
            started++;
    }
    double best = 0;
    if (started == n) {
        pthread_barrier_init(&g.bar, NULL, (unsigned)n);
        open_gate(&g, 1);
        work(&ws[0]);
    } else {
        open_gate(&g, -1);
    }
    for (int i = 1; i < started; i++) pthread_join(ws[i].th, NULL);
    if (started == n) {
        pthread_barrier_destroy(&g.bar);
        for (int k = 0; k < passes; k++) {
            double worst = 0;
            for (int i = 0; i < n; i++)
                if (ws[i].secs[k] > worst) worst = ws[i].secs[k];
            if (best == 0 || worst < best) best = worst;
        }
    }
    free(ws);
    return best;
}

double bench_read_bandwidth(int n_threads) {
    unsigned char *buf = aligned_alloc(64, BW_BYTES);
    if (!buf) return 0;
    memset(buf, 1, BW_BYTES); /* fault the pages in before timing */
    int n = n_threads < 1 ? 1 : n_threads;
    size_t used = BW_BYTES / (size_t)n / 128 * 128 * (size_t)n;
    double t = run_threads(n, false, buf, BW_BYTES, 0, BW_PASSES);
    free(buf);
    return t > 0 ? (double)used / t : 0;
}

double bench_fma_peak(int n_threads) {
    int n = n_threads < 1 ? 1 : n_threads;
    bool fast = has_avx2_fma();
    long iters = fast ? FMA_ITERS : FMA_ITERS / 4;
    double flops_per_iter = fast ? 12.0 * 8 * 2 : 8.0 * 2;
    double t = run_threads(n, true, NULL, 0, iters, FMA_PASSES);
    return t > 0 ? flops_per_iter * (double)iters * n / t : 0;
}
