/* Encoder requests' JSON without the heap (server.h: srv_jparse_*).
 *
 * jansson takes one allocator for the process (json_set_alloc_funcs). The
 * one installed here is malloc and free, except while a thread handles an
 * encoder request, between srv_jparse_begin and srv_jparse_end: the parsed
 * request and the reply's objects then come from an arena the thread took
 * from a pool, and freeing them (json_decref) costs nothing. The strings
 * json_dumps makes (reply bodies, which MHD and the handlers free with
 * free()) are heap memory: srv_json_dumps pauses the routing around it.
 * The free function tells the two apart by the thread's current arena's
 * blocks. Nothing made in the arena may outlive srv_jparse_end, which gives
 * it back: the encoder handlers finish with the request (no stream) before
 * srv_handle returns. An arena grown past JARENA_KEEP by one large request
 * is freed, not kept. */
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "server.h"

/* Under AddressSanitizer a reset poisons the arena, so a parsed tree used
 * after srv_jparse_end is reported. */
#if defined(__SANITIZE_ADDRESS__)
#define JARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JARENA_ASAN 1
#endif
#endif
#ifdef JARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define JARENA_BLOCK ((size_t)64 << 10)
#define JARENA_KEEP ((size_t)1 << 20)

typedef struct jblock {
    struct jblock *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} jblock;

typedef struct jarena {
    struct jarena *next; /* in the pool */
    jblock *blocks;      /* the newest first */
    size_t reserved, high;
} jarena;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static jarena *pool;
static bool installed;
static _Thread_local jarena *cur;       /* recognised by free until srv_jparse_end */
static _Thread_local bool routing;      /* allocations go to cur */

static bool owns(const jarena *a, const void *p) {
    uintptr_t u = (uintptr_t)p;
    for (const jblock *b = a->blocks; b; b = b->next)
        if (u >= (uintptr_t)b->data && u < (uintptr_t)b->data + b->size) return true;
    return false;
}

static void *arena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    jblock *b = a->blocks;
    if (!b || b->size - b->used < n) {
        size_t size = n > JARENA_BLOCK ? n : JARENA_BLOCK;
        if (!(b = malloc(sizeof *b + size))) return NULL;
        b->next = a->blocks;
        b->size = size;
        b->used = 0;
        a->blocks = b;
        a->reserved += size;
    }
    void *p = b->data + b->used;
    b->used += n;
    UNPOISON(p, n);
    return p;
}

static void arena_release(jarena *a) {
    for (jblock *b = a->blocks, *n; b; b = n) {
        n = b->next;
        UNPOISON(b->data, b->size);
        free(b);
    }
    a->blocks = NULL;
    a->reserved = 0;
}

/* Back to one block as large as the largest parse, empty. */
static void arena_reset(jarena *a) {
    size_t used = 0;
    for (jblock *b = a->blocks; b; b = b->next) used += b->used;
    if (used > a->high) a->high = used;
    if (a->blocks && a->blocks->next) {
        arena_release(a);
        jblock *b = malloc(sizeof *b + a->high);
        if (b) {
            *b = (jblock){NULL, a->high, 0};
            a->blocks = b;
            a->reserved = a->high;
        }
    }
    if (a->blocks) {
        a->blocks->used = 0;
        POISON(a->blocks->data, a->blocks->size);
    }
}

static void *j_malloc(size_t n) {
    if (routing && cur) {
        void *p = arena_alloc(cur, n);
        if (p) return p;
    }
    return malloc(n);
}

static void j_free(void *p) {
    if (p && !(cur && owns(cur, p))) free(p);
}

void srv_jalloc_install(void) {
    json_set_alloc_funcs(j_malloc, j_free);
    installed = true;
}

void srv_jparse_begin(void) {
    if (!installed || cur) return;
    pthread_mutex_lock(&pool_mu);
    jarena *a = pool;
    if (a) pool = a->next;
    pthread_mutex_unlock(&pool_mu);
    if (!a && !(a = calloc(1, sizeof *a))) return; /* parse on the heap */
    cur = a;
    routing = true;
}

char *srv_json_dumps(const json_t *j, size_t flags) {
    bool r = routing;
    routing = false;
    char *s = json_dumps(j, flags);
    routing = r;
    return s;
}

void srv_jparse_end(void) {
    jarena *a = cur;
    routing = false;
    cur = NULL;
    if (!a) return;
    arena_reset(a);
    if (a->reserved > JARENA_KEEP) {
        arena_release(a);
        free(a);
        return;
    }
    pthread_mutex_lock(&pool_mu);
    a->next = pool;
    pool = a;
    pthread_mutex_unlock(&pool_mu);
}
