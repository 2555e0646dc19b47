/* Size-class pool: power-of-two classes from 64 bytes, one free list per
 * class, for device buffers and long-lived temporaries.
 *
 * The pool never writes into its blocks (they may be device memory), so the
 * free lists are pointer stacks and the blocks handed out are kept in a hash
 * map; that map is also what lets a release of a foreign pointer be refused
 * without touching the pool. One mutex guards everything: a server's threads
 * share a pool. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "memory-impl.h"

#define POOL_MIN_SHIFT 6
#define POOL_MAX_SHIFT 62 /* largest class: 4 EiB, far beyond any request */
#define POOL_N_CLASSES (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1)

typedef struct ptr_stack {
    void **v;
    size_t n, cap;
} ptr_stack;

/* Open addressing, linear probing. Key 0 is empty, 1 a tombstone; neither
 * is ever a block address. */
typedef struct live_map {
    uintptr_t *keys;
    uint8_t *cls;
    size_t cap, n, tombs;
} live_map;

#define MAP_EMPTY ((uintptr_t)0)
#define MAP_TOMB ((uintptr_t)1)

struct candle_pool {
    pthread_mutex_t lock;
    candle_device device;
    cdl_pool_source src;
    size_t limit; /* 0 = none */
    size_t cached; /* bytes sitting in free lists */
    ptr_stack free_list[POOL_N_CLASSES];
    live_map live;
    candle_mem_stats st;
};

size_t cdl_mem_sys_available(void) {
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0) return 0;
    return (size_t)pages * (size_t)psize;
}

static void *heap_alloc(void *user, size_t size) {
    (void)user;
    return aligned_alloc(64, size);
}
static void heap_free(void *user, void *ptr) {
    (void)user;
    free(ptr);
}

static int class_of(size_t size) {
    if (size <= ((size_t)1 << POOL_MIN_SHIFT)) return 0;
    int bits = 64 - __builtin_clzll((unsigned long long)(size - 1));
    return bits - POOL_MIN_SHIFT;
}
static size_t class_size(int c) { return (size_t)1 << (c + POOL_MIN_SHIFT); }

static size_t map_slot(const live_map *m, uintptr_t key) {
    return (size_t)((key >> 6) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
}

/* Slot holding key, or SIZE_MAX. */
static size_t map_find(const live_map *m, uintptr_t key) {
    if (!m->cap) return SIZE_MAX;
    for (size_t i = map_slot(m, key), k = 0; k < m->cap; i = (i + 1) & (m->cap - 1), k++) {
        if (m->keys[i] == key) return i;
        if (m->keys[i] == MAP_EMPTY) return SIZE_MAX;
    }
    return SIZE_MAX;
}

static void map_put(live_map *m, uintptr_t key, uint8_t cls) {
    size_t i = map_slot(m, key);
    while (m->keys[i] != MAP_EMPTY && m->keys[i] != MAP_TOMB) i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == MAP_TOMB) m->tombs--;
    m->keys[i] = key;
    m->cls[i] = cls;
    m->n++;
}

/* Room for one more key (rehashing away tombstones); false on OOM. */
static bool map_reserve(live_map *m) {
    if ((m->n + m->tombs + 1) * 2 <= m->cap) return true;
    size_t cap = m->cap ? m->cap : 64;
    while ((m->n + 1) * 4 > cap) cap *= 2; /* load <= 1/4 after a rehash */
    live_map nm = {calloc(cap, sizeof *nm.keys), calloc(cap, sizeof *nm.cls), cap, 0, 0};
    if (!nm.keys || !nm.cls) {
        free(nm.keys);
        free(nm.cls);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] > MAP_TOMB) map_put(&nm, m->keys[i], m->cls[i]);
    free(m->keys);
    free(m->cls);
    *m = nm;
    return true;
}

static bool stack_push(ptr_stack *s, void *p) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        void **v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = p;
    return true;
}

static void lock(const candle_pool *p) { pthread_mutex_lock((pthread_mutex_t *)&p->lock); }
static void unlock(const candle_pool *p) { pthread_mutex_unlock((pthread_mutex_t *)&p->lock); }

candle_status cdl_pool_init_with(candle_pool **out, size_t limit, candle_device device,
                                    const cdl_pool_source *src) {
    if (!out || !src || !src->alloc || !src->free)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "pool_init: NULL argument");
    *out = NULL;
    candle_pool *p = calloc(1, sizeof *p);
    if (!p) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: pool descriptor");
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "pool_init: mutex init failed");
    }
    p->device = device;
    p->src = *src;
    p->limit = limit;
    *out = p;
    return CANDLE_OK;
}

candle_status candle_pool_init(candle_pool **out, size_t limit, candle_device device) {
    if (device.type != CANDLE_DEVICE_CPU) {
        char d[16];
        if (out) *out = NULL;
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "pool_init: no memory source for %s here; the device backend "
                                "makes its own pool",
                                candle_device_str(device, d, sizeof d));
    }
    cdl_pool_source heap = {heap_alloc, heap_free, NULL};
    return cdl_pool_init_with(out, limit, device, &heap);
}

/* Free every cached block (lock held). */
static void trim_locked(candle_pool *p) {
    for (int c = 0; c < POOL_N_CLASSES; c++) {
        ptr_stack *s = &p->free_list[c];
        for (size_t i = 0; i < s->n; i++) p->src.free(p->src.user, s->v[i]);
        p->st.bytes_reserved -= s->n * class_size(c);
        p->cached -= s->n * class_size(c);
        s->n = 0;
    }
}

void candle_pool_free(candle_pool *p) {
    if (!p) return;
    trim_locked(p);
    for (size_t i = 0; i < p->live.cap; i++)
        if (p->live.keys[i] > MAP_TOMB) p->src.free(p->src.user, (void *)p->live.keys[i]);
    for (int c = 0; c < POOL_N_CLASSES; c++) free(p->free_list[c].v);
    free(p->live.keys);
    free(p->live.cls);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void pool_oom(const candle_pool *p, size_t size, const char *why) {
    char r[32], av[32], lim[32], d[16];
    candle_device_str(p->device, d, sizeof d);
    cdl_format_bytes(size, r, sizeof r);
    if (p->limit) {
        size_t avail = p->limit > p->st.bytes_reserved ? p->limit - p->st.bytes_reserved : 0;
        cdl_set_error(NULL, CANDLE_ERR_OOM,
                         "out of memory: requested %s, available %s on %s (pool limit %s)", r,
                         cdl_format_bytes(avail + p->cached, av, sizeof av), d,
                         cdl_format_bytes(p->limit, lim, sizeof lim));
    } else {
        size_t avail = p->device.type == CANDLE_DEVICE_CPU ? cdl_mem_sys_available() : 0;
        cdl_set_error(NULL, CANDLE_ERR_OOM,
                         "out of memory: requested %s, available %s on %s (pool: %s)", r,
                         cdl_format_bytes(avail, av, sizeof av), d, why);
    }
}

static bool over_limit(const candle_pool *p, size_t add) {
    return p->limit && (add > p->limit || p->st.bytes_reserved > p->limit - add);
}

/* A fresh block of class c from the source (lock held); NULL on OOM. */
static void *sys_block(candle_pool *p, int c, size_t request) {
    size_t cs = class_size(c);
    if (over_limit(p, cs)) trim_locked(p); /* cached blocks of other classes */
    if (over_limit(p, cs)) {
        pool_oom(p, request, "limit");
        return NULL;
    }
    void *ptr = p->src.alloc(p->src.user, cs);
    if (!ptr && p->cached) {
        trim_locked(p);
        ptr = p->src.alloc(p->src.user, cs);
    }
    if (!ptr) {
        pool_oom(p, request, "system allocation failed");
        return NULL;
    }
    p->st.n_sys_allocs++;
    p->st.bytes_reserved += cs;
    return ptr;
}

void *candle_pool_alloc(candle_pool *p, size_t size) {
    if (!p) {
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "pool_alloc: pool is NULL");
        return NULL;
    }
    lock(p);
    void *ptr = NULL;
    if (size > ((size_t)1 << POOL_MAX_SHIFT)) {
        pool_oom(p, size, "size beyond the largest class");
        goto out;
    }
    int c = class_of(size);
    if (!map_reserve(&p->live)) {
        pool_oom(p, size, "pool bookkeeping");
        goto out;
    }
    ptr_stack *s = &p->free_list[c];
    if (s->n) {
        ptr = s->v[--s->n];
        p->cached -= class_size(c);
    } else if (!(ptr = sys_block(p, c, size))) {
        goto out;
    }
    map_put(&p->live, (uintptr_t)ptr, (uint8_t)c);
    p->st.n_allocs++;
    p->st.bytes_live += class_size(c);
    if (p->st.bytes_live > p->st.bytes_peak) p->st.bytes_peak = p->st.bytes_live;
out:
    unlock(p);
    return ptr;
}

void candle_pool_release(candle_pool *p, void *ptr) {
    if (!p || !ptr) return;
    lock(p);
    size_t i = map_find(&p->live, (uintptr_t)ptr);
    if (i == SIZE_MAX) {
        unlock(p);
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                         "pool_release: %p was not allocated by this pool or is already released",
                         ptr);
        return;
    }
    int c = p->live.cls[i];
    p->live.keys[i] = MAP_TOMB;
    p->live.n--;
    p->live.tombs++;
    p->st.bytes_live -= class_size(c);
    if (stack_push(&p->free_list[c], ptr)) {
        p->cached += class_size(c);
    } else {
        p->src.free(p->src.user, ptr);
        p->st.bytes_reserved -= class_size(c);
    }
    unlock(p);
}

void candle_pool_trim(candle_pool *p) {
    if (!p) return;
    lock(p);
    trim_locked(p);
    unlock(p);
}

candle_mem_stats candle_pool_stats(const candle_pool *p) {
    candle_mem_stats st = {0};
    if (!p) return st;
    lock(p);
    st = p->st;
    unlock(p);
    cdl_mem_stats_finish(&st);
    return st;
}
