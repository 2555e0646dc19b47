/* The context object (internal). */
#ifndef CANDLE_CTX_IMPL_H
#define CANDLE_CTX_IMPL_H

#include "core-impl.h"

#define CANDLE_ERRMSG_MAX 512

/* Descriptors live in chunks so their addresses stay put. */
#define CANDLE_CTX_CHUNK 256

typedef struct cdl_desc_chunk {
    struct cdl_desc_chunk *next;
    candle_tensor t[CANDLE_CTX_CHUNK];
} cdl_desc_chunk;

/* Bytes held through a context, shared with storage that may outlive it. */
struct cdl_ctx_acct;

/* Scratch of the memory planner, kept so steady-state steps allocate nothing
 * (src/graph/memplan.c). */
typedef struct cdl_plan_scratch {
    void *nodes, *map, *blocks, *pins, *bucket;
    size_t cap_nodes, cap_map, cap_blocks, cap_pins, cap_bucket;
    int n_nodes;
} cdl_plan_scratch;

/* Reused between one-off computes (candle_compute) for the same reason. */
typedef struct cdl_graph_scratch {
    void *keys, *stack, *graph;
    size_t cap_keys, cap_stack;
} cdl_graph_scratch;

typedef struct cdl_graph_slot {
    size_t mark; /* n_tensors when the graph was built */
    void *g;
} cdl_graph_slot;

struct candle_ctx {
    candle_status status;
    char errmsg[CANDLE_ERRMSG_MAX];
    candle_backend *backend;
    bool owns_backend;
    bool eager;
    size_t mem_limit; /* 0 = none */
    /* Bytes held by storage allocated through this context. Shared with that
     * storage, which may outlive the context (a view kept in another one). */
    struct cdl_ctx_acct *acct;
    size_t mem_peak;
    uint64_t n_allocs;
    /* descriptors: chunks in order of creation; n_tensors in use */
    cdl_desc_chunk *first, *last;
    size_t n_tensors, n_chunks;
    /* graphs built in this ctx (freed with it, or by a reset past them) */
    struct cdl_graph_slot *graphs;
    size_t n_graphs, cap_graphs;
    /* Memory plan: one backend buffer reused across steps (NULL until the
     * first plan); no_plan gives every node its own. */
    struct plan_buf *plan_buf;
    bool no_plan, no_fuse;
    /* Placement (graph/schedule.c): the CPU backend that runs what the
     * context's backend does not support (made on first need), and the
     * copies made to and from it and for inputs the backend cannot read. */
    candle_backend *fallback;
    uint64_t n_copies, copy_bytes, n_fallback;
    cdl_plan_scratch plan;
    cdl_graph_scratch gscratch;
};

/* Memory from the backend counted against the context's limit: what names
 * the request in an OOM message ("tensor add"). On success *acct is retained
 * for the caller, who gives it back with cdl_ctx_sys_free. */
candle_status cdl_ctx_sys_alloc(candle_ctx *ctx, size_t size, const char *what,
                                   candle_storage **inner, struct cdl_ctx_acct **acct);
void cdl_ctx_sys_free(struct cdl_ctx_acct *acct, candle_storage *inner, size_t size);
/* Memory planner hooks (src/graph/memplan.c). */
void cdl_memplan_drop_buffer(candle_ctx *ctx);
void cdl_memplan_free_scratch(candle_ctx *ctx);
void cdl_graph_free_scratch(candle_ctx *ctx);

#endif
