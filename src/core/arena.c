/* Arena: bump allocation in chained blocks, reset once per step.
 *
 * A step that overflowed its first block leaves a chain; the reset replaces
 * the chain with one block large enough for the whole step, so a steady state
 * (decoding the same graph again and again) makes no system allocation.
 * Not thread safe: an arena belongs to one step of one thread. */
#include <stdlib.h>

#include "memory-impl.h"

/* Under AddressSanitizer a reset poisons the blocks and an allocation
 * unpoisons its bytes, so memory used past its step's reset is reported. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct arena_block {
    struct arena_block *next;
    char *data;  /* aligned to the block's base alignment */
    size_t size; /* usable bytes at data */
    size_t used; /* bump offset */
} arena_block;

struct candle_arena {
    arena_block *first, *cur;
    size_t block_size;
    size_t limit;     /* 0 = none */
    size_t max_align; /* largest alignment asked for so far */
    /* Bytes the current step would use if all its allocations had been made
     * in one block whose base is aligned to max_align: the merged size. */
    size_t step_linear;
    size_t high_water; /* max step_linear over steps */
    candle_mem_stats st;
};

#define ARENA_DEFAULT_BLOCK ((size_t)1 << 20)
#define ARENA_BASE_ALIGN ((size_t)64)

static size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

static candle_status arena_oom(const candle_arena *a, size_t request, const char *why) {
    char r[32], av[32], lim[32];
    size_t avail = 0;
    if (a->limit) {
        avail = a->limit > a->st.bytes_reserved ? a->limit - a->st.bytes_reserved : 0;
        if (a->cur) avail += a->cur->size - a->cur->used;
        return cdl_set_error(NULL, CANDLE_ERR_OOM,
                                "out of memory: requested %s, available %s on cpu (arena limit %s)",
                                cdl_format_bytes(request, r, sizeof r),
                                cdl_format_bytes(avail, av, sizeof av),
                                cdl_format_bytes(a->limit, lim, sizeof lim));
    }
    return cdl_set_error(NULL, CANDLE_ERR_OOM,
                            "out of memory: requested %s, available %s on cpu (arena: %s)",
                            cdl_format_bytes(request, r, sizeof r),
                            cdl_format_bytes(cdl_mem_sys_available(), av, sizeof av), why);
}

/* A block of at least `size` usable bytes whose base is aligned to `align`. */
static arena_block *block_new(candle_arena *a, size_t size, size_t align) {
    if (align < ARENA_BASE_ALIGN) align = ARENA_BASE_ALIGN;
    size_t rounded = align_up(size ? size : 1, align);
    if (rounded < size) return NULL;
    if (a->limit && (rounded > a->limit || a->st.bytes_reserved > a->limit - rounded)) return NULL;
    arena_block *b = malloc(sizeof *b);
    void *data = b ? aligned_alloc(align, rounded) : NULL;
    if (!data) {
        free(b);
        return NULL;
    }
    *b = (arena_block){.next = NULL, .data = data, .size = rounded, .used = 0};
    a->st.n_sys_allocs++;
    a->st.bytes_reserved += rounded;
    return b;
}

static void block_free(candle_arena *a, arena_block *b) {
    a->st.bytes_reserved -= b->size;
    ARENA_UNPOISON(b->data, b->size);
    free(b->data);
    free(b);
}

candle_status candle_arena_init(candle_arena **out, size_t block_size, size_t limit) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "arena_init: out is NULL");
    *out = NULL;
    candle_arena *a = calloc(1, sizeof *a);
    if (!a) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: arena descriptor");
    a->block_size = block_size ? block_size : ARENA_DEFAULT_BLOCK;
    a->limit = limit;
    a->max_align = ARENA_BASE_ALIGN;
    /* The first block is made lazily so that a limit below block_size still
     * leaves a usable arena (blocks are then sized to the request). */
    *out = a;
    return CANDLE_OK;
}

void candle_arena_free(candle_arena *a) {
    if (!a) return;
    for (arena_block *b = a->first, *n; b; b = n) {
        n = b->next;
        block_free(a, b);
    }
    free(a);
}

/* Offset in b where an allocation of size/align fits, or SIZE_MAX. */
static size_t fit(const arena_block *b, size_t size, size_t align) {
    uintptr_t base = (uintptr_t)b->data + b->used;
    size_t pad = (size_t)(align_up(base, align) - base);
    if (pad > b->size - b->used || size > b->size - b->used - pad) return SIZE_MAX;
    return b->used + pad;
}

static arena_block *grow(candle_arena *a, size_t size, size_t align) {
    size_t want = size > a->block_size ? size : a->block_size;
    /* Under a limit, a block just big enough for the request may still fit. */
    if (a->limit && (a->st.bytes_reserved > a->limit || a->limit - a->st.bytes_reserved < want))
        want = size;
    arena_block *b = block_new(a, want, align);
    if (!b) return NULL;
    if (a->cur) {
        b->next = a->cur->next;
        a->cur->next = b;
    } else {
        b->next = a->first;
        a->first = b;
    }
    return b;
}

void *candle_arena_alloc(candle_arena *a, size_t size, size_t align) {
    if (!a) {
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "arena_alloc: arena is NULL");
        return NULL;
    }
    if (align == 0) align = 64;
    if (align & (align - 1)) {
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                         "arena_alloc: alignment %zu is not a power of two", align);
        return NULL;
    }
    if (size > SIZE_MAX / 2 || align > SIZE_MAX / 4) {
        arena_oom(a, size, "size overflow");
        return NULL;
    }
    /* Kept blocks after cur (a chain that could not be merged) come first. */
    size_t off = SIZE_MAX;
    if (!a->cur && a->first) a->cur = a->first;
    while (a->cur && (off = fit(a->cur, size, align)) == SIZE_MAX && a->cur->next &&
           a->cur->next->used == 0)
        a->cur = a->cur->next;
    if (off == SIZE_MAX) {
        arena_block *b = grow(a, size, align);
        if (!b) {
            arena_oom(a, size, "system allocation failed");
            return NULL;
        }
        a->cur = b;
        off = fit(b, size, align);
    }
    a->cur->used = off + size;
    if (align > a->max_align) a->max_align = align;
    /* saturates: a step that large cannot be merged anyway */
    size_t lin = align_up(a->step_linear, align);
    a->step_linear = lin < a->step_linear || lin > SIZE_MAX / 2 - size ? SIZE_MAX / 2 : lin + size;
    if (a->step_linear > a->high_water) a->high_water = a->step_linear;
    a->st.n_allocs++;
    a->st.bytes_live += size;
    if (a->st.bytes_live > a->st.bytes_peak) a->st.bytes_peak = a->st.bytes_live;
    ARENA_UNPOISON(a->cur->data + off, size);
    return a->cur->data + off;
}

void candle_arena_reset(candle_arena *a) {
    if (!a) return;
    bool chained = a->first && a->first->next;
    if (chained && a->high_water > 0) {
        /* One block for the whole step. The old chain is freed first when a
         * limit would not hold both; a failure then just leaves no block. */
        size_t old = a->st.bytes_reserved;
        size_t want = a->high_water > a->block_size ? a->high_water : a->block_size;
        if (a->limit && want > a->limit) want = a->high_water;
        arena_block *m = NULL;
        if (!a->limit || old + align_up(want, a->max_align) <= a->limit)
            m = block_new(a, want, a->max_align);
        if (m || a->limit) {
            for (arena_block *b = a->first, *n; b; b = n) {
                n = b->next;
                block_free(a, b);
            }
            a->first = m ? m : block_new(a, want, a->max_align);
        }
    }
    for (arena_block *b = a->first; b; b = b->next) {
        b->used = 0;
        ARENA_POISON(b->data, b->size);
    }
    a->cur = a->first;
    a->step_linear = 0;
    a->st.bytes_live = 0;
}

candle_mem_stats candle_arena_stats(const candle_arena *a) {
    candle_mem_stats st = {0};
    if (!a) return st;
    st = a->st;
    cdl_mem_stats_finish(&st);
    return st;
}
