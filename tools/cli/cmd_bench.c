/* candle bench ops [--json] [-t N] [--quick]: f32 GEMM and matrix-vector
 * throughput of the CPU backend against OpenBLAS (dlopen'ed, same process,
 * same data), with the machine's FMA peak and read bandwidth measured here
 * by probes that use the kernels' instructions.
 *
 * `candle bench -m MODEL` (model throughput) is a separate benchmark that
 * lives beside this one; see bench_model below. */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "cli.h"
#include "bench_util.h"

#define MAX_ROWS 128
#define BW_BYTES ((size_t)256 << 20)
#define BENCH_REPS 5      /* groups per engine and shape, at most */
#define BENCH_SHAPE_S 4.0 /* past this, a shape stops after 3 groups */
#define BENCH_SETTLE_S 0.05

/* ---- machine probes, on 1..n threads started together ---- */

typedef struct probe_arg {
    pthread_barrier_t *start;
    const float *buf;
    size_t n;
    int64_t iters;
    double work;    /* flops or bytes */
    double t0, t1; /* this thread's own start and end */
} probe_arg;

static void *fma_thread(void *p) {
    probe_arg *a = p;
    pthread_barrier_wait(a->start);
    a->t0 = bench_now_s();
    a->work = cpu_probe_fma(a->iters);
    a->t1 = bench_now_s();
    return NULL;
}

static volatile float g_sink;

static void *read_thread(void *p) {
    probe_arg *a = p;
    pthread_barrier_wait(a->start);
    a->t0 = bench_now_s();
    g_sink = cpu_probe_read(a->buf, a->n);
    a->t1 = bench_now_s();
    a->work = (double)a->n * sizeof(float);
    return NULL;
}

/* Best of `reps` runs of fn on nt threads: work per second. */
static double probe(void *(*fn)(void *), int nt, const float *buf, size_t n, int64_t iters, int reps) {
    double best = 0;
    for (int r = 0; r < reps; r++) {
        pthread_t th[16];
        probe_arg args[16];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
        for (int i = 0; i < nt; i++) {
            size_t lo = n * (size_t)i / (size_t)nt, hi = n * (size_t)(i + 1) / (size_t)nt;
            args[i] = (probe_arg){&start, buf ? buf + lo : NULL, hi - lo, iters, 0, 0, 0};
            pthread_create(&th[i], NULL, fn, &args[i]);
        }
        pthread_barrier_wait(&start);
        double t0 = 1e300, t1 = 0, work = 0;
        for (int i = 0; i < nt; i++) {
            pthread_join(th[i], NULL);
            work += args[i].work;
            t0 = args[i].t0 < t0 ? args[i].t0 : t0;
            t1 = args[i].t1 > t1 ? args[i].t1 : t1;
        }
        /* the span from the first thread's start to the last one's end */
        double rate = work / (t1 - t0);
        pthread_barrier_destroy(&start);
        if (rate > best) best = rate;
    }
    return best;
}

static void noop_task(void *arg, int task, int n_tasks, int thread) {
    (void)arg, (void)task, (void)n_tasks, (void)thread;
}

/* Seconds per team job of nt empty tasks (every thread takes part: publish,
 * wake, join): the cost
 * every multithreaded op pays on top of its work. Best of a few batches. */
static double probe_dispatch(int nt) {
    cpu_pool *pool = cpu_pool_new(nt);
    if (!pool) return 0;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now_s();
        for (int i = 0; i < 2000; i++) cpu_pool_run_team(pool, noop_task, NULL);
        double dt = (bench_now_s() - t0) / 2000;
        best = dt < best ? dt : best;
    }
    cpu_pool_free(pool);
    return best;
}

/* ---- OpenBLAS through dlopen ---- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
typedef void (*set_threads_fn)(int);

typedef struct blas {
    void *lib;
    sgemm_fn sgemm;
    sgemv_fn sgemv;
    set_threads_fn set_threads;
} blas;

static bool blas_open(blas *b) {
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so",
                                        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"};
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !b->lib; i++)
        b->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!b->lib) return false;
    *(void **)&b->sgemm = dlsym(b->lib, "cblas_sgemm");
    *(void **)&b->sgemv = dlsym(b->lib, "cblas_sgemv");
    *(void **)&b->set_threads = dlsym(b->lib, "openblas_set_num_threads");
    if (b->sgemm && b->sgemv && b->set_threads) return true;
    dlclose(b->lib);
    b->lib = NULL;
    return false;
}

/* ---- cases ---- */

typedef struct bench_row {
    char name[32];
    int64_t M, N, K;
    bool weight_t;  /* b = transpose of a [N, K] weight, else a plain [K, N] */
    candle_dtype wt; /* weight dtype (f32, or f16 for matrix-vector) */
    int threads;
    double t_candle, t_blas; /* best seconds per product; 0 = not run */
} bench_row;

typedef struct bench_opts {
    bool json, quick;
    int max_threads;
} bench_opts;

static void fill(candle_tensor *t, uint32_t seed) {
    int64_t n = candle_tensor_numel(t);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) * (1.0f / 16777216.0f) - 0.5f;
        if (t->dtype == CANDLE_DTYPE_F16) ((uint16_t *)tensor_ptr(t))[i] = candle_f32_to_f16(v);
        else if (t->dtype == CANDLE_DTYPE_BF16) ((uint16_t *)tensor_ptr(t))[i] = candle_f32_to_bf16(v);
        else ((float *)tensor_ptr(t))[i] = v;
    }
}

/* Seconds per call of fn(arg), averaged over a batch of back-to-back calls
 * lasting at least min_time (one call when a call takes longer): a batch
 * keeps the engine's threads as hot as they are in a real workload. */
static double batch_time(void (*fn)(void *), void *arg, double min_time) {
    double t0 = bench_now_s(), t = t0;
    int64_t calls = 0;
    do {
        fn(arg);
        calls++;
        t = bench_now_s();
    } while (t - t0 < min_time);
    return (t - t0) / (double)calls;
}

/* Lets the other engine's idle threads fall asleep before the next group. */
static void settle(void) {
    struct timespec ts = {0, (long)(BENCH_SETTLE_S * 1e9)};
    nanosleep(&ts, NULL);
}

typedef struct cdl_call {
    candle_backend *be;
    candle_tensor *y;
} cdl_call;

static void run_candle(void *p) {
    cdl_call *c = p;
    c->be->iface->compute_node(c->be, c->y);
}

typedef struct blas_call {
    const blas *b;
    const bench_row *r;
    const float *a, *w;
    float *c;
} blas_call;

static void run_blas(void *p) {
    blas_call *c = p;
    const bench_row *r = c->r;
    int M = (int)r->M, N = (int)r->N, K = (int)r->K;
    if (r->M == 1 && r->weight_t)
        c->b->sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, N, K, 1.0f, c->w, K, c->a, 1, 0.0f, c->c, 1);
    else if (r->weight_t)
        c->b->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, M, N, K, 1.0f, c->a, K, c->w, K, 0.0f, c->c, N);
    else
        c->b->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, M, N, K, 1.0f, c->a, K, c->w, N, 0.0f, c->c, N);
}

typedef struct engine_run {
    bench_row *rows;
    int n;
    candle_backend *const *bes;
    const blas *b;
    cdl_call cc;
    blas_call bc;
} engine_run;

/* One group: every thread count of one engine, best batch kept per row. */
static void run_group(engine_run *e, bool use_blas, double batch_s) {
    for (int i = 0; i < e->n; i++) {
        bench_row *r = &e->rows[i];
        double t;
        if (use_blas) {
            e->b->set_threads(r->threads);
            t = batch_time(run_blas, &e->bc, batch_s);
            if (r->t_blas == 0 || t < r->t_blas) r->t_blas = t;
        } else {
            e->cc.be = e->bes[r->threads - 1];
            t = batch_time(run_candle, &e->cc, batch_s);
            if (r->t_candle == 0 || t < r->t_candle) r->t_candle = t;
        }
    }
    settle();
}

/* Times every thread count of one shape (rows[0..n)) on both engines.
 *
 * Fairness: the two engines share the process and its two cores, and both
 * keep their worker threads spinning for a while after a call (OpenBLAS
 * for 2^OPENBLAS_THREAD_TIMEOUT TSC cycles, about 0.1 s by default, the
 * Candle pool for SPIN_BEFORE_SLEEP pauses). Timed back to back, a 2-thread
 * run of one engine shared the cores with the other's spinning workers, so
 * small products measured slower on 2 threads than on 1. So: OpenBLAS's
 * timeout is cut to 2^24 cycles (bench_ops; still far longer than the gap
 * between two calls of a batch), each engine runs all its thread counts as
 * a group followed by a settle that outlasts both spins, groups alternate
 * which engine goes first (drift in clock or load hits both alike), and
 * each row keeps its best batch of several. */
static int bench_shape(bench_row *rows, int n, candle_backend *const *bes, const blas *b, bool quick) {
    const bench_row *r = &rows[0];
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.n_threads = 1;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return 1;
    int64_t as[2] = {r->M, r->K}, ws[2] = {r->N, r->K}, bs[2] = {r->K, r->N};
    candle_tensor *a = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, as);
    candle_tensor *w = r->weight_t ? candle_tensor_new(ctx, r->wt, 2, ws) : candle_tensor_new(ctx, r->wt, 2, bs);
    if (!a || !w) {
        fprintf(stderr, "candle bench: %s\n", candle_errmsg(ctx));
        candle_ctx_free(ctx);
        return 1;
    }
    fill(a, 1);
    fill(w, 2);
    candle_tensor *y = candle_matmul(ctx, a, r->weight_t ? candle_transpose(ctx, w, 0, 1) : w);
    if (!y || candle_compute(ctx, y) != CANDLE_OK) {
        fprintf(stderr, "candle bench: %s\n", candle_errmsg(ctx));
        candle_ctx_free(ctx);
        return 1;
    }
    engine_run e = {rows, n, bes, b, {NULL, y},
                    {b, r, (const float *)tensor_ptr(a), (const float *)tensor_ptr(w), (float *)tensor_ptr(y)}};
    bool with_blas = b->lib && r->wt == CANDLE_DTYPE_F32;
    /* warm-up: scratch allocation, page faults, thread start-up */
    run_group(&e, false, 0);
    if (with_blas) run_group(&e, true, 0);
    for (int i = 0; i < n; i++) rows[i].t_candle = rows[i].t_blas = 0;
    double batch_s = quick ? 0.02 : 0.05, t0 = bench_now_s();
    int max_reps = quick ? 3 : BENCH_REPS;
    for (int rep = 0; rep < max_reps && (rep < 3 || bench_now_s() - t0 < BENCH_SHAPE_S); rep++) {
        bool blas_first = with_blas && rep % 2 == 1;
        run_group(&e, blas_first, batch_s);
        if (with_blas) run_group(&e, !blas_first, batch_s);
    }
    candle_ctx_free(ctx);
    return 0;
}

static int add_shape(bench_row *rows, int n, const bench_opts *o, const char *name, int64_t M,
                     int64_t N, int64_t K, bool weight_t, candle_dtype wt) {
    for (int t = 1; t <= o->max_threads && n < MAX_ROWS; t = t == 1 && o->max_threads > 1 ? o->max_threads : t + o->max_threads) {
        bench_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", name);
        r->M = M, r->N = N, r->K = K, r->weight_t = weight_t, r->wt = wt, r->threads = t;
    }
    return n;
}

static int make_rows(bench_row *rows, const bench_opts *o) {
    static const int64_t squares[] = {64, 128, 256, 512, 1024, 2048, 4096};
    static const struct { const char *name; int64_t N, K; } llm[] = {
        {"2048x2048", 2048, 2048}, {"5632x2048", 5632, 2048}, {"2048x5632", 2048, 5632}, {"32000x2048", 32000, 2048}};
    static const int64_t ms[] = {1, 32, 512};
    int n = 0;
    char name[32];
    for (size_t i = 0; i < sizeof squares / sizeof squares[0]; i++) {
        if (o->quick && squares[i] > 256) break;
        snprintf(name, sizeof name, "square %lld", (long long)squares[i]);
        n = add_shape(rows, n, o, name, squares[i], squares[i], squares[i], false, CANDLE_DTYPE_F32);
    }
    for (size_t i = 0; i < sizeof llm / sizeof llm[0]; i++)
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++) {
            if (o->quick && (i > 0 || ms[j] > 32)) continue;
            n = add_shape(rows, n, o, llm[i].name, ms[j], llm[i].N, llm[i].K, true, CANDLE_DTYPE_F32);
            if (ms[j] == 1) n = add_shape(rows, n, o, llm[i].name, 1, llm[i].N, llm[i].K, true, CANDLE_DTYPE_F16);
            /* bf16 weights (bf16 dot products where the CPU has them) */
            if (i == 0) n = add_shape(rows, n, o, llm[i].name, ms[j], llm[i].N, llm[i].K, true, CANDLE_DTYPE_BF16);
        }
    return n;
}

/* ---- output ---- */

typedef struct machine {
    double peak[17], bw[17]; /* flop/s and byte/s by thread count */
    double dispatch[17];     /* seconds per empty pool job */
    bool have_blas;
    char info[2048];
} machine;

static double row_flops(const bench_row *r) { return 2.0 * (double)r->M * (double)r->N * (double)r->K; }
static double row_weight_bytes(const bench_row *r) {
    return (double)r->N * (double)r->K * (double)candle_dtype_info(r->wt)->type_size;
}

static void print_table(const bench_row *rows, int n, const machine *m) {
    printf("candle bench ops: f32 matmul, Candle CPU backend vs OpenBLAS%s\n\n", m->have_blas ? "" : " (not found)");
    printf("%s\n", m->info);
    for (int t = 1; t <= 16; t++)
        if (m->peak[t] > 0)
            printf("measured peak: %d thread%s: %.1f GFLOP/s f32 FMA, %.1f GB/s read, %.2f us per pool dispatch\n",
                   t, t > 1 ? "s" : "", m->peak[t] * 1e-9, m->bw[t] * 1e-9, m->dispatch[t] * 1e6);
    printf("\n%-12s %5s %6s %6s %3s %4s %9s %7s %9s %6s %6s %5s\n", "shape", "M", "N", "K", "thr", "w",
           "GFLOP/s", "GB/s", "BLAS", "ratio", "%peak", "%bw");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double g = row_flops(r) / r->t_candle * 1e-9, gb = row_weight_bytes(r) / r->t_candle * 1e-9;
        double gblas = r->t_blas > 0 ? row_flops(r) / r->t_blas * 1e-9 : 0;
        char blas_s[16] = "-", ratio_s[16] = "-", peak_s[16] = "-", bw_s[16] = "-";
        if (gblas > 0) {
            snprintf(blas_s, sizeof blas_s, "%.1f", gblas);
            snprintf(ratio_s, sizeof ratio_s, "%.2f", g / gblas);
        }
        if (r->M == 1) snprintf(bw_s, sizeof bw_s, "%.0f", 100.0 * gb * 1e9 / m->bw[r->threads]);
        else snprintf(peak_s, sizeof peak_s, "%.0f", 100.0 * g * 1e9 / m->peak[r->threads]);
        printf("%-12s %5lld %6lld %6lld %3d %4s %9.1f %7.1f %9s %6s %6s %5s\n", r->name, (long long)r->M,
               (long long)r->N, (long long)r->K, r->threads, candle_dtype_name(r->wt), g, gb, blas_s, ratio_s,
               peak_s, bw_s);
    }
    printf("\nratio = Candle / OpenBLAS GFLOP/s (M = 1: cblas_sgemv); GB/s = weight bytes read per second;\n"
           "%%peak against the measured FMA peak, %%bw against the measured read bandwidth, same thread count.\n");
}

static void print_json(const bench_row *rows, int n, const machine *m) {
    printf("{\"bench\": \"ops\", \"openblas\": %s, \"machine\": {", m->have_blas ? "true" : "false");
    const char *sep = "";
    printf("\"peak_gflops\": {");
    for (int t = 1; t <= 16; t++)
        if (m->peak[t] > 0) printf("%s\"%d\": %.2f", sep, t, m->peak[t] * 1e-9), sep = ", ";
    printf("}, \"read_gbs\": {");
    sep = "";
    for (int t = 1; t <= 16; t++)
        if (m->bw[t] > 0) printf("%s\"%d\": %.2f", sep, t, m->bw[t] * 1e-9), sep = ", ";
    printf("}, \"dispatch_us\": {");
    sep = "";
    for (int t = 1; t <= 16; t++)
        if (m->peak[t] > 0) printf("%s\"%d\": %.3f", sep, t, m->dispatch[t] * 1e6), sep = ", ";
    printf("}, \"kernels\": \"%s\"}, \"results\": [\n", cpu_simd_get()->name);
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double g = row_flops(r) / r->t_candle * 1e-9, gb = row_weight_bytes(r) / r->t_candle * 1e-9;
        printf("  {\"shape\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"threads\": %d, \"weight\": \"%s\", "
               "\"gflops\": %.3f, \"gbs\": %.3f, \"pct_peak\": %.1f, \"pct_bw\": %.1f",
               r->name, (long long)r->M, (long long)r->N, (long long)r->K, r->threads, candle_dtype_name(r->wt), g, gb,
               100.0 * g * 1e9 / m->peak[r->threads], 100.0 * gb * 1e9 / m->bw[r->threads]);
        if (r->t_blas > 0) {
            double gblas = row_flops(r) / r->t_blas * 1e-9;
            printf(", \"openblas_gflops\": %.3f, \"ratio\": %.3f", gblas, g / gblas);
        }
        printf("}%s\n", i + 1 < n ? "," : "");
    }
    printf("]}\n");
}

static void measure_machine(machine *m, const bench_opts *o) {
    float *buf = aligned_alloc(64, BW_BYTES);
    if (buf) memset(buf, 0, BW_BYTES);
    for (int t = 1; t <= o->max_threads; t = t == 1 && o->max_threads > 1 ? o->max_threads : t + o->max_threads) {
        /* many short runs: on a shared machine the best one is the least
         * disturbed, as for the products below */
        double peak = probe(fma_thread, t, NULL, 0, o->quick ? 1000000 : 4000000, o->quick ? 3 : 12);
        double bw = buf ? probe(read_thread, t, buf, BW_BYTES / sizeof(float), 0, o->quick ? 2 : 8) : 0;
        double dispatch = probe_dispatch(t);
        m->peak[t] = peak > m->peak[t] ? peak : m->peak[t];
        m->bw[t] = bw > m->bw[t] ? bw : m->bw[t];
        m->dispatch[t] = m->dispatch[t] > 0 && m->dispatch[t] < dispatch ? m->dispatch[t] : dispatch;
    }
    free(buf);
    candle_cpu_info(m->info, sizeof m->info);
}

/* With autogroup scheduling (Linux's default for desktop-style configs)
 * every session is one scheduling entity, and `nice` only weighs threads
 * inside it: a niced build in another terminal takes as much of a core as
 * the benchmark. Measured here: square 256 on 2 threads 35 GFLOP/s next to
 * niced builds, 130 under SCHED_FIFO. Says so, once, on stderr. */
static void warn_autogroup(void) {
    FILE *f = fopen("/proc/sys/kernel/sched_autogroup_enabled", "r");
    int on = 0;
    if (f) {
        if (fscanf(f, "%d", &on) != 1) on = 0;
        fclose(f);
    }
    int policy = sched_getscheduler(0);
    if (on && policy != SCHED_FIFO && policy != SCHED_RR)
        fprintf(stderr, "candle bench: note: sched_autogroup is on, so nice'd processes of other sessions compete\n"
                        "  equally with this one; for stable figures run on an idle machine or under `chrt -f 1`\n");
}

static int bench_ops(int argc, char **argv) {
    bench_opts o = {false, false, cpu_get_features()->n_physical};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o.json = true;
        else if (!strcmp(argv[i], "--quick")) o.quick = true;
        else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) && i + 1 < argc) o.max_threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "candle bench ops: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (o.max_threads < 1 || o.max_threads > 16) {
        fprintf(stderr, "candle bench ops: -t wants 1..16 threads\n");
        return 2;
    }
    static bench_row rows[MAX_ROWS];
    static machine m;
    warn_autogroup();
    int n = make_rows(rows, &o);
    measure_machine(&m, &o);
    /* see bench_shape; a value the user set wins */
    setenv("OPENBLAS_THREAD_TIMEOUT", "24", 0);
    blas b;
    m.have_blas = blas_open(&b);
    if (!m.have_blas) fprintf(stderr, "candle bench: OpenBLAS not found (apt-get install libopenblas-dev); Candle only\n");
    candle_backend *bes[16] = {NULL};
    for (int t = 1; t <= o.max_threads; t++) bes[t - 1] = candle_backend_cpu_init(t);
    int rc = 0;
    for (int i = 0; i < n && !rc;) {
        int j = i;
        while (j < n && !strcmp(rows[j].name, rows[i].name) && rows[j].M == rows[i].M && rows[j].wt == rows[i].wt) j++;
        rc = bench_shape(&rows[i], j - i, bes, &b, o.quick);
        i = j;
    }
    for (int t = 0; t < 16; t++) candle_backend_free(bes[t]);
    measure_machine(&m, &o); /* again: each figure keeps its best of both passes */
    if (!rc) {
        if (o.json) print_json(rows, n, &m);
        else print_table(rows, n, &m);
    }
    if (b.lib) dlclose(b.lib);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: candle bench ops [--json] [-t N] [--quick]\n"
               "         f32 GEMM and matrix-vector products vs OpenBLAS, 1 and N threads\n"
               "         (N defaults to the physical cores), with measured FMA peak and\n"
               "         read bandwidth; --quick runs the small shapes only\n"
               "       candle bench quant [--json] [-t N] [--quick]   quantized products\n"
               "       candle bench attn [--json] [-t N] [--quick]    flash vs materialised attention\n"
               "       candle bench load -m PATH [-m PATH ...] [--reps N] [--no-mmap] [--cold] [--json]\n"
               "         loading time and peak RSS per weight format (safetensors, GGUF)\n"
               "       candle bench embed -m ENCODER [--lengths L,..] [--batch B,..] [-t T,..] [--reps N] [--json]\n"
               "         sentence-embedding latency (P50/P99) and throughput (inputs/s)\n"
               "       candle bench -m MODEL ...   model throughput\n");
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "ops")) return bench_ops(argc - 1, argv + 1);
    if (!strcmp(argv[1], "quant")) return cmd_bench_quant(argc - 1, argv + 1);
    if (!strcmp(argv[1], "attn")) return cmd_bench_attn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "load")) return cmd_bench_load(argc - 1, argv + 1);
    if (!strcmp(argv[1], "embed")) return cmd_bench_embed(argc - 1, argv + 1);
    return cmd_bench_model(argc, argv); /* model throughput: cmd_bench_model.c */
}
