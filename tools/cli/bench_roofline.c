/* Read bandwidth and FMA peak for the roofline of `candle bench`, on n
 * threads started together, with the CPU backend's probes (cpu_probe.c: the
 * kernels' own instruction set, chosen from cpuid). */
#include "bench_roofline.h"

#include "backend/cpu/cpu-impl.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BW_BYTES ((size_t)256 << 20) /* 8x a 32 MiB L3 */
#define BW_PASSES 5
#define FMA_ITERS 10000000L /* rounds of cpu_probe_fma: tens of ms a pass */
#define FMA_PASSES 3
#define MAX_THREADS 256

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *bench_fma_kind(void) { return cpu_simd_get()->name; }

/* Results the compiler cannot prove unused. */
static volatile double sink;

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
    double flops;           /* of one FMA pass */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    pthread_mutex_lock(&w->g->mu);
    while (!w->g->go) pthread_cond_wait(&w->g->cv, &w->g->mu);
    int go = w->g->go;
    pthread_mutex_unlock(&w->g->mu);
    if (go < 0) return NULL;
    for (int k = 0; k < w->passes; k++) {
        pthread_barrier_wait(&w->g->bar);
        double t0 = now();
        if (w->fma) w->flops = cpu_probe_fma(w->iters);
        else sink += cpu_probe_read((const float *)w->p, w->n / sizeof(float));
        w->secs[k] = now() - t0;
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
                          int passes, double *flops) {
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
        for (int i = 0; i < n && flops; i++) *flops += ws[i].flops;
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
    double t = run_threads(n, false, buf, BW_BYTES, 0, BW_PASSES, NULL);
    free(buf);
    return t > 0 ? (double)used / t : 0;
}

double bench_fma_peak(int n_threads) {
    int n = n_threads < 1 ? 1 : n_threads;
    double flops = 0;
    double t = run_threads(n, true, NULL, 0, FMA_ITERS, FMA_PASSES, &flops);
    return t > 0 ? flops / t : 0;
}

int bench_read_jitter(int n_threads, double secs, int passes, double *pass_secs) {
    int n = n_threads < 1 ? 1 : n_threads;
    double bw = bench_read_bandwidth(n);
    /* One pass reads what the threads read in `secs`. Passes take their
     * slices of a buffer of at least 64 MiB (twice the L3) in turn, so a pass
     * does not find the previous one's bytes in cache. */
    size_t bytes = (size_t)(bw * secs) / 4096 * 4096;
    if (bw <= 0 || bytes < 4096) return -1;
    size_t n_slots = (((size_t)64 << 20) + bytes - 1) / bytes;
    unsigned char *buf = aligned_alloc(64, n_slots * bytes);
    if (!buf) return -1;
    memset(buf, 1, n_slots * bytes);
    int r = 0;
    for (int k = 0; k < passes && !r; k++) {
        pass_secs[k] = run_threads(n, false, buf + (size_t)k % n_slots * bytes, bytes, 0, 1, NULL);
        if (pass_secs[k] <= 0) r = -1;
    }
    free(buf);
    return r;
}
