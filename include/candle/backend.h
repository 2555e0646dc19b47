/* Backends compute graphs. Each is a vtable behind an opaque handle. */
#ifndef CANDLE_BACKEND_H
#define CANDLE_BACKEND_H

#include "api.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_backend_iface {
    const char *name;
    /* Storage of `size` bytes on the backend's device (refcount 1). */
    candle_status (*buffer_alloc)(candle_backend *be, size_t size, candle_storage **out);
    bool (*supports_op)(candle_backend *be, const candle_tensor *node);
    /* Compute one node whose inputs are computed and whose storage is set. */
    candle_status (*compute_node)(candle_backend *be, candle_tensor *node);
    candle_status (*synchronize)(candle_backend *be);
    void (*free)(candle_backend *be);
    /* Optional (NULL: node by node): n matmul nodes that read the same
     * activation and not each other, ready as for compute_node, computed
     * together (one job where the backend can). */
    candle_status (*compute_group)(candle_backend *be, candle_tensor *const *nodes, int n);
    /* Optional (NULL: never fused): whether the backend can compute binary
     * (an add, sub, mul or div of unary's shape reading unary as exactly
     * one operand: the graph checks that) straight from unary's
     * input, the unary's result never stored; and that computation (binary
     * ready as for compute_node; unary gets no storage). compute_fused
     * answers CANDLE_ERR_UNSUPPORTED, having done nothing, where it cannot
     * (the graph then runs the two nodes one by one). Results are the same
     * bits as the two nodes' own kernels. */
    bool (*fusable)(candle_backend *be, const candle_tensor *unary, const candle_tensor *binary);
    candle_status (*compute_fused)(candle_backend *be, candle_tensor *unary, candle_tensor *binary);
} candle_backend_iface;

struct candle_backend {
    const candle_backend_iface *iface;
    candle_device device;
    int n_threads;
    char errmsg[256]; /* detail of the last failing compute_node */
    void *impl;
};

CANDLE_API candle_backend *candle_backend_cpu_init(int n_threads);
CANDLE_API void candle_backend_free(candle_backend *be);
CANDLE_API const char *candle_backend_name(const candle_backend *be);
/* CPU features found (cpuid) and the kernels chosen, one per line. */
CANDLE_API const char *candle_cpu_info(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
