/* Graphs: the nodes needed for some outputs, in topological order. A graph
 * is computed by: fusion passes -> memory plan -> backend execution (the first
 * two arrive with the graph compiler; the API does not change for them). */
#ifndef CANDLE_GRAPH_H
#define CANDLE_GRAPH_H

#include "api.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_graph candle_graph;

/* Collect every node that outs depend on; the graph lives in ctx. */
CANDLE_API candle_graph *candle_graph_build(candle_ctx *ctx, candle_tensor *const *outs,
                                            int n_outs);
CANDLE_API int candle_graph_n_nodes(const candle_graph *g);
CANDLE_API candle_tensor *candle_graph_node(const candle_graph *g, int i);
/* Allocate storage for the nodes that have none and run them on the
 * context's backend. Nodes already computed are skipped.
 *
 * Memory plan (lazy contexts): the nodes share one buffer of the context,
 * laid out by their lifetimes, so a node's bytes are reused once its last
 * reader has run. Afterwards only the graph's outputs (the tensors given to
 * candle_graph_build or candle_compute, those marked with
 * candle_tensor_set_output, and views of them) keep their data; the other
 * nodes read as not computed again (a later graph that needs one computes it
 * anew). The buffer survives candle_ctx_reset and grows only when a plan
 * needs more, so repeated steps allocate nothing. Eager contexts, and
 * contexts made with no_plan, give each node its own storage instead and
 * keep every node. */
CANDLE_API candle_status candle_graph_compute(candle_ctx *ctx, candle_graph *g);
/* Build and compute the graph of one tensor. */
CANDLE_API candle_status candle_compute(candle_ctx *ctx, candle_tensor *t);
/* Keep t's data after the graphs that compute it run (not overwritten by
 * the memory plan) even when it is not one of their outputs. */
CANDLE_API void candle_tensor_set_output(candle_tensor *t);
/* Bytes of the context's plan buffer (0 before the first planned run). */
CANDLE_API size_t candle_ctx_plan_bytes(const candle_ctx *ctx);
/* The profiler, for the whole process (off by default: its clock reads cost
 * ~50 ns a node): the wall time per op kind of every node the graphs run,
 * and the matrix products by weight shape with their bytes and effective
 * GB/s, reported when the process exits. */
CANDLE_API void candle_profile_enable(bool on);
/* What the context's graphs copied between memories since it was made: inputs
 * its backend could not read in place, and the inputs and outputs of nodes it
 * does not support, run on a CPU backend instead (fallback_nodes of them). */
CANDLE_API void candle_ctx_transfer_stats(const candle_ctx *ctx, uint64_t *copies, uint64_t *bytes,
                                          uint64_t *fallback_nodes);

#ifdef __cplusplus
}
#endif
#endif
