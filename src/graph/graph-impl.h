/* Graph internals shared by graph building, computing and memory planning. */
#ifndef CANDLE_GRAPH_IMPL_H
#define CANDLE_GRAPH_IMPL_H

#include "../core/ctx-impl.h"

/* Give the nodes of a graph about to run that need storage a region of the
 * context's plan buffer, laid out by their lifetimes; outs (and nodes marked
 * with candle_tensor_set_output) stay alive after the run. fused (NULL: none):
 * fused[i] marks a unary node run inside node i + 1 (graph.c's
 * fuse_elementwise): it gets no storage and its inputs live until i + 1. */
candle_status cdl_memplan_bind(candle_ctx *ctx, candle_tensor *const *nodes, int n,
                                  candle_tensor *const *outs, int n_outs,
                                  const unsigned char *fused);
/* Whether node i of the graph just bound must run (some output that is not
 * computed yet depends on it). */
bool cdl_memplan_needed(const candle_ctx *ctx, int i);
/* After the run (or its failure): nodes whose bytes were reused drop them. */
void cdl_memplan_finish(candle_ctx *ctx, candle_tensor *const *nodes, int n);

/* Placement (schedule.c): whether t, ready to run, needs copies or the CPU
 * fallback on the context's backend, and t computed so. */
bool cdl_sched_needed(const candle_ctx *ctx, const candle_tensor *t);
candle_status cdl_sched_compute(candle_ctx *ctx, candle_tensor *t);

/* Whether node i of g is a unary that runs fused into node i + 1 (tests). */
bool cdl_graph_fused(const candle_graph *g, int i);

/* candle_profile_enable (profile.c): per-op wall time, reported at exit. */
bool cdl_profile_on(void);
int64_t cdl_profile_now(void);
/* nodes[0..n) run as one step (a group of products when n > 1) took ns. */
void cdl_profile_node(candle_tensor *const *nodes, int n, int64_t ns);
void cdl_profile_graph(void);
/* The scheduler copied `bytes`; ran a node on the CPU fallback. */
void cdl_profile_copy(size_t bytes);
void cdl_profile_fallback(void);

#endif
