/* Graphs: the nodes needed for some outputs, in topological order. A graph
 * is computed by: fusion passes -> memory plan -> backend execution (the first
 * two arrive with the graph compiler; the API does not change for them). */
#ifndef CANDLE_GRAPH_H
#define CANDLE_GRAPH_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_graph candle_graph;

/* Collect every node that outs depend on; the graph lives in ctx. */
candle_graph *candle_graph_build(candle_ctx *ctx, candle_tensor *const *outs, int n_outs);
int candle_graph_n_nodes(const candle_graph *g);
candle_tensor *candle_graph_node(const candle_graph *g, int i);
/* Allocate storage for the nodes that have none and run them on the
 * context's backend. Nodes already computed are skipped. */
candle_status candle_graph_compute(candle_ctx *ctx, candle_graph *g);
/* Build and compute the graph of one tensor. */
candle_status candle_compute(candle_ctx *ctx, candle_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
