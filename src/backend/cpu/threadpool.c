/* Persistent worker threads with a generation counter for dispatch.
 *
 * The job (fn, arg, nth) is written by the caller before it publishes a new
 * generation with a release store; workers read it after an acquire load of
 * the generation, so the plain fields need no lock. Workers spin for a while
 * after each job (decoding issues ops back to back), then sleep on a
 * condition variable. The sleep/wake handshake is Dekker-style on two
 * seq_cst atomics: a worker announces itself in n_sleeping before its last
 * look at the generation, and the caller looks at n_sleeping after
 * publishing, so one of them always sees the other. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Pause-loop iterations before a worker sleeps, and before a waiting thread
 * starts yielding its core (the machine may be shared). */
#define SPIN_BEFORE_SLEEP 20000
#define SPIN_BEFORE_YIELD 2000

typedef struct worker {
    cpu_pool *pool;
    int ith;
    pthread_t thread;
} worker;

struct cpu_pool {
    int n; /* threads including the caller */
    worker *workers; /* [n - 1] */
    /* the current job, published by gen */
    cpu_pool_fn fn;
    void *arg;
    int nth;
    atomic_uint gen;
    atomic_int pending; /* workers yet to finish the current generation */
    atomic_int stop;
    atomic_int n_sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* barrier */
    atomic_int bar_count;
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

/* Wait for a generation other than `seen`; false when the pool stops. */
static bool wait_job(cpu_pool *p, unsigned seen) {
    for (int i = 0; i < SPIN_BEFORE_SLEEP; i++) {
        if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen) return true;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return false;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return !atomic_load(&p->stop);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    cpu_pool *p = w->pool;
    unsigned seen = 0;
    while (wait_job(p, seen)) {
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (w->ith < p->nth) p->fn(p->arg, w->ith, p->nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
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
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
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
        p->workers[i].ith = i + 1;
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i])) {
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
        for (int i = 0; i < p->n - 1; i++) pthread_join(p->workers[i].thread, NULL);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int cpu_pool_size(const cpu_pool *p) { return p ? p->n : 1; }

void cpu_pool_run(cpu_pool *p, int nth, cpu_pool_fn fn, void *arg) {
    if (nth > p->n) nth = p->n;
    if (nth <= 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job, orders before n_sleeping */
    wake_sleepers(p);
    fn(arg, 0, nth);
    unsigned spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) spin_wait(&spins);
}

void cpu_pool_barrier(cpu_pool *p, int nth) {
    if (nth <= 1) return;
    unsigned g = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == nth - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
        return;
    }
    unsigned spins = 0;
    while (atomic_load_explicit(&p->bar_gen, memory_order_acquire) == g) spin_wait(&spins);
}
