/* A persistent thread pool for the CPU backend. The calling thread takes
 * part, so a pool of n threads starts n - 1 workers once; an op then costs
 * one wake-up (spinning workers see it within a microsecond or so, sleeping
 * ones are woken through a condition variable) instead of thread creation.
 *
 * A job is n_tasks tasks that threads claim one at a time, so a worker that
 * the OS has not scheduled (the machine may be shared) delays nothing: the
 * others, the caller included, take its tasks. */
#ifndef CANDLE_CPU_THREADPOOL_H
#define CANDLE_CPU_THREADPOOL_H

#include <stdbool.h>

typedef struct cpu_pool cpu_pool;

/* Task `task` of n_tasks, run by thread `thread` in [0, pool size): the
 * thread index is for per-thread scratch (no two tasks run on one thread at
 * once). */
typedef void (*cpu_pool_fn)(void *arg, int task, int n_tasks, int thread);

/* n_threads >= 1 (1 starts no workers). NULL when threads cannot start. */
cpu_pool *cpu_pool_new(int n_threads);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);

/* Run tasks 0..n_tasks-1 and return when all have finished. Not reentrant:
 * one job at a time per pool. */
void cpu_pool_run(cpu_pool *p, int n_tasks, cpu_pool_fn fn, void *arg);

/* A team job: exactly one task per thread (n_tasks = pool size), each on a
 * different thread, so tasks may wait for each other in cpu_pool_barrier. */
void cpu_pool_run_team(cpu_pool *p, cpu_pool_fn fn, void *arg);
/* Inside a team job: wait until all its tasks have arrived. */
void cpu_pool_barrier(cpu_pool *p);

#endif
