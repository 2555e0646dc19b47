/* Persistent workers; jobs are published through a generation counter and
 * their tasks claimed with an atomic counter.
 *
 * Publishing (seqlock style): the caller makes the generation odd, waits
 * until no worker is inside the previous job, writes the job, then makes the
 * generation even. A worker that sees a new even generation announces
 * itself in `inside` and checks the generation again before reading the job;
 * both sides use seq_cst, so either the caller sees the worker inside and
 * waits, or the worker sees the odd generation and backs off.
 *
 * Workers spin for a while after each job (decoding issues ops back to
 * back), then sleep on a condition variable; the sleep/wake handshake is the
 * same Dekker pattern on n_sleeping and the generation. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A worker spins this long after its last job before it sleeps: decoding
 * issues ops back to back with gaps of tens of microseconds (attention,
 * norms on the calling thread), and a wake-up through the condition
 * variable costs about as much again. Checked on the clock every
 * SPIN_CHECK pause iterations, when the spinning worker also yields: where
 * the caller shares a vCPU with it (another process holding the other one)
 * a pure pause loop kept the caller off the CPU for the worker's whole
 * slice (perf of tinyllama-shape Q8_0 decode, 2 threads, a fuzzer on one
 * vCPU: the worker 33-40% of samples in this loop, 8-14% in the products;
 * bench -n 32 -r 3 alternating 14.6/14.8/14.1, 11.9/9.0/12.6 t/s ->
 * 20.5/15.8/31.1, 15.3/13.8/19.1); with the CPU to itself a yield returns
 * at once (bench ops pool dispatch 0.63 -> 0.62 us). A waiting caller
 * yields its core after SPIN_BEFORE_YIELD iterations. */
#define SPIN_BEFORE_SLEEP_NS 2000000
#define SPIN_CHECK 64
#define SPIN_BEFORE_YIELD 1000

/* Fields written by different threads live on different cache lines: the
 * two cores would otherwise bounce one line on every task claim. */
#define LINE 64

typedef struct worker {
    cpu_pool *pool;
    int thread;
    pthread_t handle;
} worker;

struct cpu_pool {
    /* written by the caller once per job, read by the workers */
    _Alignas(LINE) atomic_uint gen;
    int n;           /* threads including the caller */
    worker *workers; /* [n - 1] */
    /* the current job, valid while gen is even */
    cpu_pool_fn fn;
    void *arg;
    int n_tasks;
    bool team; /* each thread claims at most one task */
    atomic_int stop;
    _Alignas(LINE) atomic_int next_task; /* claimed by every thread */
    _Alignas(LINE) atomic_int done;      /* tasks finished, added once per thread and job */
    _Alignas(LINE) atomic_int inside;    /* workers reading or running the current job */
    _Alignas(LINE) atomic_int n_sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* barrier of team jobs */
    _Alignas(LINE) atomic_int bar_count;
    atomic_uint bar_gen;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline void spin_wait(unsigned *spins) {
    if (++*spins < SPIN_BEFORE_YIELD) cpu_relax();
    else sched_yield();
}

static bool is_new(unsigned g, unsigned seen) { return g != seen && !(g & 1u); }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait for a published generation other than `seen`; false on stop. */
static bool wait_job(cpu_pool *p, unsigned seen) {
    int64_t until = now_ns() + SPIN_BEFORE_SLEEP_NS;
    for (int i = 1;; i++) {
        if (is_new(atomic_load_explicit(&p->gen, memory_order_acquire), seen)) return true;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return false;
        cpu_relax();
        if (i % SPIN_CHECK == 0) {
            if (now_ns() > until) break;
            sched_yield(); /* a caller descheduled on a shared vCPU gets it back */
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    while (!is_new(atomic_load(&p->gen), seen) && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return !atomic_load(&p->stop);
}

/* Claim and run tasks of the current job until none is left; the count
 * of finished tasks is published once, at the end. */
static void work(cpu_pool *p, int thread) {
    int ran = 0;
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        p->fn(p->arg, t, p->n_tasks, thread);
        ran++;
        if (p->team) break;
    }
    if (ran) atomic_fetch_add_explicit(&p->done, ran, memory_order_release);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    cpu_pool *p = w->pool;
    unsigned seen = 0;
    while (wait_job(p, seen)) {
        unsigned g = atomic_load(&p->gen);
        if (!is_new(g, seen)) continue;
        atomic_fetch_add(&p->inside, 1);
        if (atomic_load(&p->gen) == g) {
            seen = g;
            work(p, w->thread);
        }
        atomic_fetch_sub_explicit(&p->inside, 1, memory_order_release);
    }
    return NULL;
}

static void wake_sleepers(cpu_pool *p) {
    if (atomic_load(&p->n_sleeping) == 0) return;
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

cpu_pool *cpu_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    /* over-aligned: calloc promises only max_align_t */
    size_t size = (sizeof(cpu_pool) + LINE - 1) & ~(size_t)(LINE - 1);
    cpu_pool *p = aligned_alloc(LINE, size);
    if (!p) return NULL;
    memset(p, 0, size);
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads == 1) return p;
    p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
    if (!p->workers) {
        cpu_pool_free(p);
        return NULL;
    }
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].thread = i + 1;
        if (pthread_create(&p->workers[i].handle, NULL, worker_main, &p->workers[i])) {
            p->n = i + 1; /* free joins the ones that started */
            cpu_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n - 1; i++) pthread_join(p->workers[i].handle, NULL);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int cpu_pool_size(const cpu_pool *p) { return p ? p->n : 1; }

static void run(cpu_pool *p, int n_tasks, bool team, cpu_pool_fn fn, void *arg) {
    unsigned spins = 0;
    atomic_fetch_add(&p->gen, 1); /* odd: the job is being rewritten */
    while (atomic_load(&p->inside) > 0) spin_wait(&spins);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    p->team = team;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* even: published */
    wake_sleepers(p);
    work(p, 0);
    spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks) spin_wait(&spins);
}

void cpu_pool_run(cpu_pool *p, int n_tasks, cpu_pool_fn fn, void *arg) {
    if (n_tasks <= 0) return;
    if (p->n == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(arg, t, n_tasks, 0);
        return;
    }
    run(p, n_tasks, false, fn, arg);
}

void cpu_pool_run_team(cpu_pool *p, cpu_pool_fn fn, void *arg) {
    if (p->n == 1) {
        fn(arg, 0, 1, 0);
        return;
    }
    run(p, p->n, true, fn, arg);
}

void cpu_pool_barrier(cpu_pool *p) {
    int n = p->n;
    if (n <= 1) return;
    unsigned g = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
        return;
    }
    unsigned spins = 0;
    while (atomic_load_explicit(&p->bar_gen, memory_order_acquire) == g) spin_wait(&spins);
}
