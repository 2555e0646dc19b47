/* candle_profile_enable: wall time per op kind of every graph node run by
 * candle_graph_compute, reported at exit through the log callback (log.h;
 * stderr unless the host set one). A diagnostic for finding where a decode
 * step goes (per-op overheads versus the large products);
 * the clock reads cost ~50 ns a node, so it stays off by default. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph-impl.h"

/* Matmuls are split by the weight dtype (a group counts under its first
 * node's), the rest by op. */
#define PROF_SLOTS (CANDLE_OP_COUNT + CANDLE_DTYPE_COUNT)

static struct {
    atomic_llong ns, n;
} g_prof[PROF_SLOTS];
static atomic_llong g_graphs;
static atomic_int g_enabled;

/* Matmul steps (a group as one) by shape: weight dtype, the rows of all its
 * weights, K and the number of products, with the weight bytes read, so the
 * report gives each shape's effective bandwidth. The first PROF_SHAPES
 * shapes seen are kept; a slot is claimed once (key 0 -> key) and never
 * freed. */
#define PROF_SHAPES 32
static struct {
    atomic_ullong key;
    atomic_llong ns, n, bytes;
} g_shapes[PROF_SHAPES];

static void report_shapes(void) {
    bool any = false;
    for (int i = 0; i < PROF_SHAPES; i++) {
        unsigned long long key = atomic_load(&g_shapes[i].key);
        long long n = atomic_load(&g_shapes[i].n), ns = atomic_load(&g_shapes[i].ns);
        if (!key || !n) continue;
        if (!any)
            cdl_log_msg(CANDLE_LOG_INFO, "%-24s %10s %12s %10s %10s %8s",
                           "matmul step (type NxK /prods)", "steps", "ms", "us/step", "KB/step",
                           "GB/s");
        any = true;
        char name[64];
        double kb = (double)atomic_load(&g_shapes[i].bytes) / (double)n / 1024.0;
        snprintf(name, sizeof name, "%s %llux%llu /%llu",
                 candle_dtype_name((candle_dtype)(key >> 56)), (key >> 24) & 0xffffffull,
                 (key >> 4) & 0xfffffull, key & 0xfull);
        cdl_log_msg(CANDLE_LOG_INFO, "%-24s %10lld %12.3f %10.2f %10.1f %8.1f", name, n,
                       ns / 1e6, ns / 1e3 / (double)n, kb,
                       ns ? kb * 1024.0 * (double)n / (double)ns : 0.0);
    }
}

/* The scheduler's copies between memories (schedule.c), all contexts. */
static atomic_llong g_copies, g_copy_bytes, g_fallbacks;

void cdl_profile_copy(size_t bytes) {
    atomic_fetch_add(&g_copies, 1);
    atomic_fetch_add(&g_copy_bytes, (long long)bytes);
}

void cdl_profile_fallback(void) { atomic_fetch_add(&g_fallbacks, 1); }

static void report(void) {
    long long total = 0;
    for (int i = 0; i < PROF_SLOTS; i++) total += atomic_load(&g_prof[i].ns);
    long long graphs = atomic_load(&g_graphs);
    cdl_log_msg(CANDLE_LOG_INFO, "candle profile: %lld graphs, %.3f ms of nodes", graphs,
                   total / 1e6);
    cdl_log_msg(CANDLE_LOG_INFO, "%-24s %10s %12s %10s %10s %6s", "op", "nodes", "ms",
                   "us/node", "us/graph", "%");
    for (int i = 0; i < PROF_SLOTS; i++) {
        long long ns = atomic_load(&g_prof[i].ns), n = atomic_load(&g_prof[i].n);
        if (!n) continue;
        char name[64];
        if (i < CANDLE_OP_COUNT) snprintf(name, sizeof name, "%s", candle_op_name((candle_op)i));
        else snprintf(name, sizeof name, "matmul %s", candle_dtype_name((candle_dtype)(i - CANDLE_OP_COUNT)));
        cdl_log_msg(CANDLE_LOG_INFO, "%-24s %10lld %12.3f %10.2f %10.2f %6.1f", name, n,
                       ns / 1e6, ns / 1e3 / (double)n, graphs ? ns / 1e3 / (double)graphs : 0.0,
                       total ? 100.0 * (double)ns / (double)total : 0.0);
    }
    report_shapes();
    cdl_log_msg(CANDLE_LOG_INFO, "copies between memories: %lld (%lld bytes), nodes on the CPU fallback: %lld",
                   (long long)atomic_load(&g_copies), (long long)atomic_load(&g_copy_bytes),
                   (long long)atomic_load(&g_fallbacks));
}

void candle_profile_enable(bool on) {
    static atomic_flag reporting = ATOMIC_FLAG_INIT;
    if (on && !atomic_flag_test_and_set(&reporting)) atexit(report);
    atomic_store(&g_enabled, on);
}

bool cdl_profile_on(void) { return atomic_load_explicit(&g_enabled, memory_order_relaxed); }

int64_t cdl_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void profile_shape(candle_tensor *const *nodes, int n, int64_t ns) {
    const candle_tensor *t = nodes[0], *w = t->src[1];
    long long rows = 0, bytes = 0;
    int64_t K = w->rank >= 2 ? w->shape[w->rank - 2] : 0;
    for (int k = 0; k < n; k++) {
        const candle_tensor *b = nodes[k]->src[1];
        if (!b || b->rank < 2) return;
        rows += b->shape[b->rank - 1];
        bytes += (long long)candle_dtype_row_size(b->dtype, b->shape[b->rank - 2]) * b->shape[b->rank - 1];
    }
    unsigned long long key = (unsigned long long)w->dtype << 56 |
                             ((unsigned long long)rows & 0xffffffull) << 24 |
                             ((unsigned long long)K & 0xfffffull) << 4 | (unsigned)(n & 0xf);
    for (int i = 0; i < PROF_SHAPES; i++) {
        unsigned long long k = atomic_load_explicit(&g_shapes[i].key, memory_order_relaxed), z = 0;
        if (k != key && !(k == 0 && atomic_compare_exchange_strong(&g_shapes[i].key, &z, key)) &&
            atomic_load(&g_shapes[i].key) != key)
            continue;
        atomic_fetch_add_explicit(&g_shapes[i].ns, ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_shapes[i].n, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_shapes[i].bytes, bytes, memory_order_relaxed);
        return;
    }
}

void cdl_profile_node(candle_tensor *const *nodes, int n, int64_t ns) {
    const candle_tensor *t = nodes[0];
    if ((t->op == CANDLE_OP_MATMUL || t->op == CANDLE_OP_MATMUL_GROUP_CORR) && t->n_src > 1 && t->src[1])
        profile_shape(nodes, n, ns);
    int slot = t->op;
    if (t->op == CANDLE_OP_MATMUL && t->n_src > 1 && t->src[1])
        slot = CANDLE_OP_COUNT + t->src[1]->dtype;
    if (slot < 0 || slot >= PROF_SLOTS) return;
    atomic_fetch_add_explicit(&g_prof[slot].ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_prof[slot].n, n, memory_order_relaxed);
}

void cdl_profile_graph(void) { atomic_fetch_add_explicit(&g_graphs, 1, memory_order_relaxed); }
