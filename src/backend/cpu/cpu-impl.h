/* CPU backend internals: kernel signature, the kernel table, strided
 * iteration helpers shared by the reference kernels. */
#ifndef CANDLE_CPU_IMPL_H
#define CANDLE_CPU_IMPL_H

#include <stdio.h>

#include "../../core/core-impl.h"
#include "../../core/elem-impl.h"

/* One kernel invocation. Reference kernels run with ith = 0, nth = 1; fast
 * kernels split their work by ith/nth across the thread pool. */
typedef struct cpu_task {
    int ith, nth;
    char *errmsg; /* kernels write a message here and return a status */
    size_t errmsg_len;
} cpu_task;

typedef candle_status (*cpu_kernel_fn)(const cpu_task *task, candle_tensor *dst);

/* Record a kernel error on the task. */
candle_status cpu_error(const cpu_task *task, candle_status s, const char *fmt, ...)
    CANDLE_PRINTF(3, 4);

/* ---- reference kernels (ref/), one per op family ---- */
candle_status cpu_ref_copy(const cpu_task *t, candle_tensor *dst);        /* COPY */
candle_status cpu_ref_unary(const cpu_task *t, candle_tensor *dst);       /* NEG..CLAMP */
candle_status cpu_ref_binary(const cpu_task *t, candle_tensor *dst);      /* ADD..GE */
candle_status cpu_ref_where(const cpu_task *t, candle_tensor *dst);       /* WHERE */
candle_status cpu_ref_reduce(const cpu_task *t, candle_tensor *dst);      /* SUM..ARGMAX */
candle_status cpu_ref_softmax(const cpu_task *t, candle_tensor *dst);     /* (LOG_)SOFTMAX */
candle_status cpu_ref_matmul(const cpu_task *t, candle_tensor *dst);      /* MATMUL */
candle_status cpu_ref_rms_norm(const cpu_task *t, candle_tensor *dst);    /* RMS_NORM */
candle_status cpu_ref_layer_norm(const cpu_task *t, candle_tensor *dst);  /* LAYER_NORM */
candle_status cpu_ref_rope(const cpu_task *t, candle_tensor *dst);        /* ROPE */
candle_status cpu_ref_index_select(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_gather(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_concat(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_arange(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_fill(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_rand(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_conv1d(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_conv2d(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_attention(const cpu_task *t, candle_tensor *dst);

/* ---- strided iteration ---- */

/* Advance a row-major multi-index over shape; false after the last one. */
static inline bool nd_next(int rank, const int64_t *shape, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Byte offset of a multi-index (plain dtypes). */
static inline int64_t nd_offset(int rank, const int64_t *idx, const int64_t *stride) {
    int64_t o = 0;
    for (int d = 0; d < rank; d++) o += idx[d] * stride[d];
    return o;
}

static inline char *tensor_ptr(const candle_tensor *t) { return (char *)candle_tensor_data(t); }

#endif
