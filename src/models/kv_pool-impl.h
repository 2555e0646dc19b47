/* The paged KV pool's internals, shared by kv_pool.c and batch.c. */
#ifndef CANDLE_KV_POOL_IMPL_H
#define CANDLE_KV_POOL_IMPL_H

#include "candle/kv_pool.h"
#include "model-impl.h"

struct candle_kv_pool {
    const candle_model *model;
    candle_ctx *ctx; /* owns k and v */
    int64_t n_blocks, n_layer, n_used;
    candle_tensor **k; /* [n_layer] of [n_blocks*BLOCK, n_head_kv, head_dim] kv_type */
    candle_tensor **v; /* [n_layer] of [n_blocks*BLOCK, n_head_kv, head_dim] kv_type */
    int32_t *refs;     /* [n_blocks] sequences holding the block */
    uint64_t *hash;    /* [n_blocks] hash of the tokens before a published block */
    int32_t *fill;     /* [n_blocks] published rows (BLOCK: whole), 0: not published */
    int32_t *toks;     /* [n_blocks*BLOCK] tokens of published rows */
    /* published blocks by hash: chains through chain[], -1 ends, so a lookup
     * does not scan the pool */
    int32_t *bucket;   /* [n_buckets] first block of each chain */
    int32_t *chain;    /* [n_blocks] next block in its chain */
    uint64_t mask;     /* n_buckets - 1 (a power of two) */
    int32_t *prev, *next; /* free list links */
    bool *in_free;
    int32_t head, tail;
};

#endif
