/* The CPU backend: memory from the heap, nodes run by the kernel table. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-impl.h"

static cpu_kernel_fn kernels[CANDLE_OP_COUNT] = {
    [CANDLE_OP_COPY] = cpu_ref_copy,
    [CANDLE_OP_NEG] = cpu_ref_unary,
    [CANDLE_OP_ABS] = cpu_ref_unary,
    [CANDLE_OP_EXP] = cpu_ref_unary,
    [CANDLE_OP_LOG] = cpu_ref_unary,
    [CANDLE_OP_SQRT] = cpu_ref_unary,
    [CANDLE_OP_RSQRT] = cpu_ref_unary,
    [CANDLE_OP_SIN] = cpu_ref_unary,
    [CANDLE_OP_COS] = cpu_ref_unary,
    [CANDLE_OP_TANH] = cpu_ref_unary,
    [CANDLE_OP_SIGMOID] = cpu_ref_unary,
    [CANDLE_OP_RELU] = cpu_ref_unary,
    [CANDLE_OP_SILU] = cpu_ref_unary,
    [CANDLE_OP_GELU_ERF] = cpu_ref_unary,
    [CANDLE_OP_GELU_TANH] = cpu_ref_unary,
    [CANDLE_OP_AFFINE] = cpu_ref_unary,
    [CANDLE_OP_CLAMP] = cpu_ref_unary,
    [CANDLE_OP_ADD] = cpu_ref_binary,
    [CANDLE_OP_SUB] = cpu_ref_binary,
    [CANDLE_OP_MUL] = cpu_ref_binary,
    [CANDLE_OP_DIV] = cpu_ref_binary,
    [CANDLE_OP_MAXIMUM] = cpu_ref_binary,
    [CANDLE_OP_MINIMUM] = cpu_ref_binary,
    [CANDLE_OP_POW] = cpu_ref_binary,
    [CANDLE_OP_EQ] = cpu_ref_binary,
    [CANDLE_OP_NE] = cpu_ref_binary,
    [CANDLE_OP_LT] = cpu_ref_binary,
    [CANDLE_OP_LE] = cpu_ref_binary,
    [CANDLE_OP_GT] = cpu_ref_binary,
    [CANDLE_OP_GE] = cpu_ref_binary,
    [CANDLE_OP_WHERE] = cpu_ref_where,
    [CANDLE_OP_SUM] = cpu_ref_reduce,
    [CANDLE_OP_MEAN] = cpu_ref_reduce,
    [CANDLE_OP_MAX] = cpu_ref_reduce,
    [CANDLE_OP_MIN] = cpu_ref_reduce,
    [CANDLE_OP_ARGMAX] = cpu_ref_reduce,
    [CANDLE_OP_SOFTMAX] = cpu_ref_softmax,
    [CANDLE_OP_LOG_SOFTMAX] = cpu_ref_softmax,
    [CANDLE_OP_MATMUL] = cpu_ref_matmul,
    [CANDLE_OP_RMS_NORM] = cpu_ref_rms_norm,
    [CANDLE_OP_LAYER_NORM] = cpu_ref_layer_norm,
    [CANDLE_OP_ROPE] = cpu_ref_rope,
    [CANDLE_OP_INDEX_SELECT] = cpu_ref_index_select,
    [CANDLE_OP_GATHER] = cpu_ref_gather,
    [CANDLE_OP_CONCAT] = cpu_ref_concat,
    [CANDLE_OP_ARANGE] = cpu_ref_arange,
    [CANDLE_OP_FILL] = cpu_ref_fill,
    [CANDLE_OP_RAND] = cpu_ref_rand,
    [CANDLE_OP_CONV1D] = cpu_ref_conv1d,
    [CANDLE_OP_CONV2D] = cpu_ref_conv2d,
    [CANDLE_OP_ATTENTION] = cpu_ref_attention,
};

candle_status cpu_error(const cpu_task *task, candle_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->errmsg, task->errmsg_len, fmt, ap);
    va_end(ap);
    return s;
}

static void release_heap(candle_storage *s) {
    free(s->data);
    free(s);
}

static candle_status cpu_buffer_alloc(candle_backend *be, size_t size, candle_storage **out) {
    (void)be;
    candle_storage *s = calloc(1, sizeof *s);
    /* 64-byte alignment for SIMD loads; size rounded up as aligned_alloc needs. */
    size_t rounded = (size + 63) & ~(size_t)63;
    void *data = s && rounded >= size ? aligned_alloc(64, rounded) : NULL;
    if (!data) {
        char a[32];
        free(s);
        return candle_set_error(NULL, CANDLE_ERR_OOM,
                                "out of memory: requested %s on cpu (allocation failed)",
                                candle_format_bytes(size, a, sizeof a));
    }
    s->data = data;
    s->size = size;
    s->refcount = 1;
    s->kind = CANDLE_STORAGE_HEAP;
    s->device = be->device;
    s->release = release_heap;
    *out = s;
    return CANDLE_OK;
}

static bool cpu_supports_op(candle_backend *be, const candle_tensor *node) {
    (void)be;
    return (unsigned)node->op < CANDLE_OP_COUNT && kernels[node->op] != NULL;
}

static candle_status cpu_compute_node(candle_backend *be, candle_tensor *node) {
    cpu_task task = {.ith = 0, .nth = 1, .errmsg = be->errmsg, .errmsg_len = sizeof be->errmsg};
    return kernels[node->op](&task, node);
}

static candle_status cpu_synchronize(candle_backend *be) {
    (void)be;
    return CANDLE_OK;
}

static void cpu_free(candle_backend *be) { free(be); }

static const candle_backend_iface cpu_iface = {
    .name = "cpu",
    .buffer_alloc = cpu_buffer_alloc,
    .supports_op = cpu_supports_op,
    .compute_node = cpu_compute_node,
    .synchronize = cpu_synchronize,
    .free = cpu_free,
};

candle_backend *candle_backend_cpu_init(int n_threads) {
    candle_backend *be = calloc(1, sizeof *be);
    if (!be) {
        candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: cpu backend");
        return NULL;
    }
    be->iface = &cpu_iface;
    be->device = (candle_device){CANDLE_DEVICE_CPU, 0};
    be->n_threads = n_threads > 0 ? n_threads : 1;
    return be;
}

void candle_backend_free(candle_backend *be) {
    if (be) be->iface->free(be);
}

const char *candle_backend_name(const candle_backend *be) { return be ? be->iface->name : "none"; }

const char *candle_cpu_info(char *buf, size_t n) {
    snprintf(buf, n, "kernels: reference (scalar)\n");
    return buf;
}
