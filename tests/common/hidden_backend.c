/* The hidden-memory test backend (hidden_backend.h). */
#include "hidden_backend.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Addresses moved by 2^46: past the 47-bit user space of x86-64 and arm64
 * Linux, so the host faults on them instead of reading some other bytes. */
#define HIDE ((uintptr_t)1 << 46)

typedef struct hidden {
    candle_backend *cpu;
    bool unsupported[CANDLE_OP_COUNT];
    atomic_long allocs, live, graphs;
} hidden;

static void *reveal(const void *p) { return (void *)((uintptr_t)p - HIDE); }

static void release(candle_storage *s) {
    hidden *h = s->owner;
    free(reveal(s->data));
    atomic_fetch_sub(&h->live, 1);
    free(s);
}

static candle_status h_alloc(candle_backend *be, size_t size, candle_storage **out) {
    hidden *h = be->impl;
    candle_storage *s = calloc(1, sizeof *s);
    size_t rounded = (size + 63) & ~(size_t)63;
    void *p = s ? aligned_alloc(64, rounded ? rounded : 64) : NULL;
    if (!p) {
        free(s);
        candle_backend_set_errmsg("hidden: out of memory (%zu bytes)", size);
        return CANDLE_ERR_OOM;
    }
    *s = (candle_storage){.data = (void *)((uintptr_t)p + HIDE), .size = size, .refcount = 1,
                          .kind = CANDLE_STORAGE_DEVICE, .device = be->device, .release = release,
                          .owner = h, .backend = be};
    atomic_fetch_add(&h->allocs, 1);
    atomic_fetch_add(&h->live, 1);
    *out = s;
    return CANDLE_OK;
}

static char *at(const candle_storage *s, size_t offset) { return (char *)reveal(s->data) + offset; }

static candle_status h_set(candle_backend *be, candle_storage *s, size_t offset, const void *src, size_t size) {
    (void)be;
    memcpy(at(s, offset), src, size);
    return CANDLE_OK;
}

static candle_status h_get(candle_backend *be, const candle_storage *s, size_t offset, void *dst, size_t size) {
    (void)be;
    memcpy(dst, at(s, offset), size);
    return CANDLE_OK;
}

static candle_status h_memset(candle_backend *be, candle_storage *s, size_t offset, int value, size_t size) {
    (void)be;
    memset(at(s, offset), value, size);
    return CANDLE_OK;
}

static candle_status h_copy(candle_backend *be, candle_storage *dst, size_t dst_offset, const candle_storage *src,
                            size_t src_offset, size_t size) {
    (void)be;
    memmove(at(dst, dst_offset), at(src, src_offset), size);
    return CANDLE_OK;
}

static bool h_supports(candle_backend *be, const candle_tensor *node) {
    hidden *h = be->impl;
    return (unsigned)node->op < CANDLE_OP_COUNT && !h->unsupported[node->op] &&
           h->cpu->iface->supports_op(h->cpu, node);
}

/* The host's view of one of this backend's storages (no other memory). */
static bool shadow(candle_backend *be, const candle_storage *s, candle_storage *out) {
    if (!s || s->backend != be) return false;
    *out = *s;
    out->data = reveal(s->data);
    out->backend = NULL;
    return true;
}

static candle_status h_compute(candle_backend *be, candle_tensor *node) {
    hidden *h = be->impl;
    candle_tensor n = *node, srcs[CANDLE_MAX_SRC];
    candle_storage st[CANDLE_MAX_SRC + 1];
    if (!shadow(be, node->storage, &st[CANDLE_MAX_SRC])) {
        candle_backend_set_errmsg("hidden: the output of %s is not in this backend's memory",
                 candle_op_name((candle_op)node->op));
        return CANDLE_ERR_DEVICE;
    }
    n.storage = &st[CANDLE_MAX_SRC];
    for (int i = 0; i < node->n_src; i++) {
        if (!node->src[i]) continue;
        if (!shadow(be, node->src[i]->storage, &st[i])) {
            candle_backend_set_errmsg(
                     "hidden: input %d of %s is not in this backend's memory (the scheduler must copy it)", i,
                     candle_op_name((candle_op)node->op));
            return CANDLE_ERR_DEVICE;
        }
        srcs[i] = *node->src[i];
        srcs[i].storage = &st[i];
        n.src[i] = &srcs[i];
    }
    return h->cpu->iface->compute_node(h->cpu, &n); /* its error detail is this thread's */
}

/* Whole graph runs: node by node here, counted (a device would replay). */
static candle_status h_graph(candle_backend *be, candle_tensor *const *nodes, int n) {
    hidden *h = be->impl;
    atomic_fetch_add(&h->graphs, 1);
    for (int i = 0; i < n; i++) {
        candle_status s = h_compute(be, nodes[i]);
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status h_sync(candle_backend *be) {
    (void)be;
    return CANDLE_OK;
}

static void h_free(candle_backend *be) {
    hidden *h = be->impl;
    if (h) candle_backend_free(h->cpu);
    free(h);
    free(be);
}

static const candle_backend_iface hidden_iface = {
    .name = "hidden",
    .host_visible = false,
    .buffer_alloc = h_alloc,
    .buffer_set = h_set,
    .buffer_get = h_get,
    .buffer_memset = h_memset,
    .buffer_copy = h_copy,
    .supports_op = h_supports,
    .compute_node = h_compute,
    .synchronize = h_sync,
    .free = h_free,
    .graph_compute = h_graph,
};

candle_backend *test_hidden_backend_init(int n_threads, const candle_op *unsupported) {
    candle_backend *be = calloc(1, sizeof *be);
    hidden *h = calloc(1, sizeof *h);
    if (h) h->cpu = candle_backend_cpu_init(n_threads);
    if (!be || !h || !h->cpu) {
        if (h) candle_backend_free(h->cpu);
        free(h);
        free(be);
        return NULL;
    }
    for (const candle_op *op = unsupported; op && *op != CANDLE_OP_NONE; op++)
        if ((unsigned)*op < CANDLE_OP_COUNT) h->unsupported[*op] = true;
    be->iface = &hidden_iface;
    be->device = (candle_device){CANDLE_DEVICE_CPU, 1};
    be->n_threads = h->cpu->n_threads;
    be->impl = h;
    return be;
}

void test_hidden_backend_counts(const candle_backend *be, long *allocs, long *live, long *graphs) {
    hidden *h = be->impl;
    *allocs = atomic_load(&h->allocs);
    *live = atomic_load(&h->live);
    *graphs = atomic_load(&h->graphs);
}
