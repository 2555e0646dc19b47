/* CANDLE_PROFILE=1: wall time per op kind of every graph node run by
 * candle_graph_compute, printed to stderr at exit. A diagnostic for finding
 * where a decode step goes (per-op overheads versus the large products);
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
static atomic_int g_enabled = -1;

static void report(void) {
    long long total = 0;
    for (int i = 0; i < PROF_SLOTS; i++) total += atomic_load(&g_prof[i].ns);
    long long graphs = atomic_load(&g_graphs);
    fprintf(stderr, "candle profile: %lld graphs, %.3f ms of nodes\n", graphs, total / 1e6);
    fprintf(stderr, "%-24s %10s %12s %10s %10s %6s\n", "op", "nodes", "ms", "us/node",
            "us/graph", "%");
    for (int i = 0; i < PROF_SLOTS; i++) {
        long long ns = atomic_load(&g_prof[i].ns), n = atomic_load(&g_prof[i].n);
        if (!n) continue;
        char name[64];
        if (i < CANDLE_OP_COUNT) snprintf(name, sizeof name, "%s", candle_op_name((candle_op)i));
        else snprintf(name, sizeof name, "matmul %s", candle_dtype_name((candle_dtype)(i - CANDLE_OP_COUNT)));
        fprintf(stderr, "%-24s %10lld %12.3f %10.2f %10.2f %6.1f\n", name, n, ns / 1e6,
                ns / 1e3 / (double)n, graphs ? ns / 1e3 / (double)graphs : 0.0,
                total ? 100.0 * (double)ns / (double)total : 0.0);
    }
}

bool candle_profile_on(void) {
    int v = atomic_load_explicit(&g_enabled, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("CANDLE_PROFILE");
        v = e && *e && strcmp(e, "0") != 0;
        int expect = -1;
        if (atomic_compare_exchange_strong(&g_enabled, &expect, v) && v) atexit(report);
    }
    return v;
}

int64_t candle_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void candle_profile_node(const candle_tensor *t, int n, int64_t ns) {
    int slot = t->op;
    if (t->op == CANDLE_OP_MATMUL && t->n_src > 1 && t->src[1])
        slot = CANDLE_OP_COUNT + t->src[1]->dtype;
    if (slot < 0 || slot >= PROF_SLOTS) return;
    atomic_fetch_add_explicit(&g_prof[slot].ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_prof[slot].n, n, memory_order_relaxed);
}

void candle_profile_graph(void) { atomic_fetch_add_explicit(&g_graphs, 1, memory_order_relaxed); }
