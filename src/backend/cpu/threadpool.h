/* A persistent thread pool for the CPU backend. The calling thread is worker
 * 0, so a pool of n threads starts n - 1 workers once; each op then costs one
 * wake-up (spinning workers see it within a microsecond or so, sleeping ones
 * are woken through a condition variable) instead of thread creation. */
#ifndef CANDLE_CPU_THREADPOOL_H
#define CANDLE_CPU_THREADPOOL_H

#include <stdbool.h>

typedef struct cpu_pool cpu_pool;

/* Runs on every participating thread: ith in [0, nth). */
typedef void (*cpu_pool_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 starts no workers). NULL when threads cannot start. */
cpu_pool *cpu_pool_new(int n_threads);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);

/* Run fn on nth threads (1 <= nth <= size; the caller is ith 0) and return
 * when all have finished. Not reentrant: one job at a time per pool. */
void cpu_pool_run(cpu_pool *p, int nth, cpu_pool_fn fn, void *arg);

/* Inside a job: wait until all nth threads of the job have arrived. */
void cpu_pool_barrier(cpu_pool *p, int nth);

#endif
