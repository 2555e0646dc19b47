/* The encode path's temporary memory (tokenizer-impl.h: tok_tmp_*).
 *
 * A tokenizer is shared by threads and is not modified by encoding, so the
 * strings, lists and match stacks one encode builds belong to its caller.
 * A caller that encodes again and again (an embedding server) binds its own
 * scratch arena to its thread around the calls: those buffers then come
 * from the arena, whose reset keeps one block as large as the largest call
 * needed, and a steady state asks the system for nothing. Unbound, they are
 * ordinary heap memory. The binding is a per-thread pointer set only for
 * the duration of the caller's calls: no state is shared between threads,
 * and the memory is the caller's (freed with its scratch). */
#include <stdlib.h>
#include <string.h>

#include "candle/memory.h"
#include "core/core-impl.h"
#include "tokenizer-impl.h"

/* A scratch holding more than this after a call is freed (made again on
 * the next): one very long text costs its memory once. */
#define TOK_SCRATCH_KEEP ((size_t)8 << 20)
#define TOK_SCRATCH_BLOCK ((size_t)64 << 10)

struct tok_scratch {
    candle_arena *arena;
    bool bound; /* this scratch is the thread's current one */
};

static _Thread_local candle_arena *tl_arena;

candle_status tok_scratch_begin(tok_scratch **sc) {
    if (tl_arena) return CANDLE_OK; /* an outer caller's binding holds */
    if (!*sc && !(*sc = calloc(1, sizeof **sc)))
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tokenizer scratch");
    if (!(*sc)->arena) {
        candle_status s = candle_arena_init(&(*sc)->arena, TOK_SCRATCH_BLOCK, 0);
        if (s) return s;
    }
    tl_arena = (*sc)->arena;
    (*sc)->bound = true;
    return CANDLE_OK;
}

void tok_scratch_end(tok_scratch **sc) {
    if (!*sc || !(*sc)->bound) return;
    tl_arena = NULL;
    (*sc)->bound = false;
    if (candle_arena_stats((*sc)->arena).bytes_reserved > TOK_SCRATCH_KEEP) {
        candle_arena_free((*sc)->arena);
        (*sc)->arena = NULL;
    } else {
        candle_arena_reset((*sc)->arena);
    }
}

void tok_scratch_free(tok_scratch *sc) {
    if (!sc) return;
    candle_arena_free(sc->arena);
    free(sc);
}

void *tok_tmp_alloc(size_t n) {
    if (!tl_arena) return malloc(n ? n : 1);
    return candle_arena_alloc(tl_arena, n ? n : 1, 16);
}

void *tok_tmp_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    if (!tl_arena) return calloc(n ? n : 1, size ? size : 1);
    void *p = tok_tmp_alloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

void *tok_tmp_realloc(void *p, size_t old, size_t n) {
    if (!tl_arena) return realloc(p, n ? n : 1);
    void *q = tok_tmp_alloc(n);
    if (q && p) memcpy(q, p, old < n ? old : n);
    return q;
}

void tok_tmp_free(void *p) {
    if (!tl_arena) free(p);
}
