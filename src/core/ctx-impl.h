/* The context object (internal). */
#ifndef CANDLE_CTX_IMPL_H
#define CANDLE_CTX_IMPL_H

#include "core-impl.h"

#define CANDLE_ERRMSG_MAX 512

/* Descriptors live in chunks so their addresses stay put. */
#define CANDLE_CTX_CHUNK 256

typedef struct candle_desc_chunk {
    struct candle_desc_chunk *next;
    candle_tensor t[CANDLE_CTX_CHUNK];
} candle_desc_chunk;

typedef struct candle_graph_slot {
    size_t mark; /* n_tensors when the graph was built */
    void *g;
} candle_graph_slot;

struct candle_ctx {
    candle_status status;
    char errmsg[CANDLE_ERRMSG_MAX];
    candle_backend *backend;
    bool owns_backend;
    bool eager;
    size_t mem_limit; /* 0 = none */
    /* Bytes held by storage allocated through this context. Shared with that
     * storage, which may outlive the context (a view kept in another one). */
    struct candle_ctx_acct *acct;
    size_t mem_peak;
    uint64_t n_allocs;
    /* descriptors: chunks in order of creation; n_tensors in use */
    candle_desc_chunk *first, *last;
    size_t n_tensors, n_chunks;
    /* graphs built in this ctx (freed with it, or by a reset past them) */
    struct candle_graph_slot *graphs;
    size_t n_graphs, cap_graphs;
};

#endif
