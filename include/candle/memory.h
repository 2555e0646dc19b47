/* Arena (bump allocation, chained blocks, reset per step) and size-class pool
 * (power-of-two classes, free lists), both with counters. */
#ifndef CANDLE_MEMORY_H
#define CANDLE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_mem_stats {
    uint64_t n_allocs;      /* allocations served since init */
    uint64_t n_sys_allocs;  /* allocations that went to the system */
    size_t bytes_live;      /* bytes handed out and not yet freed/reset */
    size_t bytes_peak;      /* high-water mark of bytes_live */
    size_t bytes_reserved;  /* bytes held from the system */
    double fragmentation;   /* 1 - live/reserved (0 when nothing reserved) */
} candle_mem_stats;

/* An arena belongs to one thread (no locking). bytes_live counts the sizes
 * asked for; bytes_reserved the blocks held. */
typedef struct candle_arena candle_arena;

/* block_size: bytes per chained block (0 = 1 MiB); limit: max bytes
 * reserved from the system (0 = none). */
CANDLE_API candle_status candle_arena_init(candle_arena **out, size_t block_size, size_t limit);
CANDLE_API void candle_arena_free(candle_arena *a);
/* align: power of two (0 = 64). Returns NULL and sets the last error on OOM. */
CANDLE_API void *candle_arena_alloc(candle_arena *a, size_t size, size_t align);
/* Free everything allocated, keep the blocks (no system calls next step);
 * blocks beyond the first are merged into one of the high-water size. */
CANDLE_API void candle_arena_reset(candle_arena *a);
CANDLE_API candle_mem_stats candle_arena_stats(const candle_arena *a);

/* A pool may be shared by threads (one mutex). bytes_live counts whole
 * size classes handed out; released blocks stay reserved until trim. */
typedef struct candle_pool candle_pool;

/* limit: max bytes reserved from the system (0 = none). */
CANDLE_API candle_status candle_pool_init(candle_pool **out, size_t limit, candle_device device);
CANDLE_API void candle_pool_free(candle_pool *p);
/* Rounded up to a power of two (min 64 bytes); NULL + last error on OOM. */
CANDLE_API void *candle_pool_alloc(candle_pool *p, size_t size);
/* NULL is a no-op; a pointer the pool did not hand out (or already got
 * back) is refused with an invalid-argument last error. */
CANDLE_API void candle_pool_release(candle_pool *p, void *ptr);
/* Give cached free blocks back to the system. */
CANDLE_API void candle_pool_trim(candle_pool *p);
CANDLE_API candle_mem_stats candle_pool_stats(const candle_pool *p);

#ifdef __cplusplus
}
#endif
#endif
