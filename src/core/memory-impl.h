/* Internal: shared pieces of the arena and the pool, and the pool's hook for
 * device memory (a backend supplies its own allocate/free). */
#ifndef CANDLE_MEMORY_IMPL_H
#define CANDLE_MEMORY_IMPL_H

#include "core-impl.h"

/* Bytes the system reports as available (0 when it cannot tell). */
size_t cdl_mem_sys_available(void);

static inline void cdl_mem_stats_finish(candle_mem_stats *st) {
    st->fragmentation =
        st->bytes_reserved ? 1.0 - (double)st->bytes_live / (double)st->bytes_reserved : 0.0;
}

/* Where a pool gets its blocks: alloc returns NULL on failure. */
typedef struct cdl_pool_source {
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr);
    void *user;
} cdl_pool_source;

/* A pool over a backend's memory (candle_pool_init uses the heap for cpu). */
candle_status cdl_pool_init_with(candle_pool **out, size_t limit, candle_device device,
                                    const cdl_pool_source *src);

#endif
