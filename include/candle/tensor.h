/* Context, storage and the tensor descriptor.
 *
 * A context owns tensor descriptors (freed with it, or with a reset to a mark),
 * the error state, the memory limit and the backend that computes its graphs.
 * Storage is refcounted and shared by views. Shapes are outermost-first
 * (PyTorch order); strides are in bytes. For quantized dtypes the innermost
 * dimension is stored in whole blocks: its stride is the block's byte size and
 * it is indexed per block. */
#ifndef CANDLE_TENSOR_H
#define CANDLE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "dtype.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CANDLE_MAX_RANK 6
#define CANDLE_MAX_SRC 8
#define CANDLE_MAX_PARAMS 16
#define CANDLE_MAX_NAME 64

typedef enum candle_device_type {
    CANDLE_DEVICE_CPU = 0,
    CANDLE_DEVICE_CUDA,
    CANDLE_DEVICE_TYPE_COUNT
} candle_device_type;

typedef struct candle_device {
    candle_device_type type;
    int index; /* cuda:N */
} candle_device;

/* "cpu", "cuda:0"; buf needs 16 bytes. */
CANDLE_API const char *candle_device_str(candle_device d, char *buf, size_t n);

typedef enum candle_storage_kind {
    CANDLE_STORAGE_HEAP = 0, /* owned malloc'ed memory */
    CANDLE_STORAGE_MMAP,     /* part of a mapped file (weights, zero-copy) */
    CANDLE_STORAGE_ARENA,    /* a region of an arena, valid until its reset */
    CANDLE_STORAGE_EXTERNAL, /* caller's memory, not freed by Candle */
    CANDLE_STORAGE_DEVICE,   /* backend memory */
    CANDLE_STORAGE_KIND_COUNT
} candle_storage_kind;

typedef struct candle_backend candle_backend;
typedef struct candle_storage candle_storage;
struct candle_storage {
    void *data;
    size_t size; /* bytes */
    int refcount;
    candle_storage_kind kind;
    candle_device device;
    /* Called once when refcount drops to zero; frees data and the struct. */
    void (*release)(candle_storage *s);
    void *owner; /* the mapping, arena or backend the data belongs to */
    /* NULL: host memory, data readable in place (every CPU storage). Else the
     * backend whose memory this is: data is an address in its own space, and
     * bytes move only through it (candle_tensor_set_bytes and friends). */
    candle_backend *backend;
};

CANDLE_API candle_storage *candle_storage_retain(candle_storage *s);
CANDLE_API void candle_storage_release(candle_storage *s);
/* Wrap caller memory (not freed by Candle). */
CANDLE_API candle_storage *candle_storage_external(void *data, size_t size);

typedef struct candle_ctx candle_ctx;

typedef struct candle_tensor candle_tensor;
struct candle_tensor {
    candle_dtype dtype;
    int rank;
    int64_t shape[CANDLE_MAX_RANK];  /* outermost-first */
    int64_t stride[CANDLE_MAX_RANK]; /* bytes */
    size_t offset;                   /* bytes from storage->data */
    candle_storage *storage;         /* NULL until computed/allocated */
    candle_device device;

    /* Graph: the op that produces this tensor from src (CANDLE_OP_NONE for
     * leaves: weights, inputs). */
    int op; /* candle_op */
    candle_tensor *src[CANDLE_MAX_SRC];
    int n_src;
    int64_t iparams[CANDLE_MAX_PARAMS];
    double fparams[CANDLE_MAX_PARAMS];
    /* Views share the storage of view_src, at view_offset bytes from it. */
    candle_tensor *view_src;
    size_t view_offset;
    bool computed;
    /* Kept by memory plans after the graph runs (candle_tensor_set_output). */
    bool output;
    char name[CANDLE_MAX_NAME];
    candle_ctx *ctx;
};

/* ---- context ---- */

typedef struct candle_ctx_params {
    candle_backend *backend; /* NULL: the CPU backend */
    bool eager;              /* compute each op as it is built */
    size_t mem_limit;        /* bytes of tensor storage allowed, 0 = none */
    int n_threads;           /* 0 = default */
    /* For comparisons and tests (same results): every node its own storage
     * instead of the memory plan; no elementwise fusion. */
    bool no_plan;
    bool no_fuse;
} candle_ctx_params;

CANDLE_API candle_ctx_params candle_ctx_default_params(void);
CANDLE_API candle_status candle_ctx_init(candle_ctx **out, const candle_ctx_params *p);
CANDLE_API void candle_ctx_free(candle_ctx *ctx);
CANDLE_API candle_status candle_errcode(const candle_ctx *ctx);
CANDLE_API const char *candle_errmsg(const candle_ctx *ctx);
/* Forget the sticky error so the context can be used again. */
CANDLE_API void candle_ctx_clear_error(candle_ctx *ctx);
CANDLE_API bool candle_ctx_is_eager(const candle_ctx *ctx);
CANDLE_API void candle_ctx_set_eager(candle_ctx *ctx, bool eager);
CANDLE_API candle_backend *candle_ctx_backend(candle_ctx *ctx);
/* Bytes of tensor storage currently held through this context / its peak. */
CANDLE_API size_t candle_ctx_mem_used(const candle_ctx *ctx);
CANDLE_API size_t candle_ctx_mem_peak(const candle_ctx *ctx);
/* Number of storage allocations made by this context since init. */
CANDLE_API uint64_t candle_ctx_alloc_count(const candle_ctx *ctx);

/* Tensors created after a mark are freed by a reset to it (weights first,
 * then per-step graphs). */
typedef size_t candle_ctx_mark;
CANDLE_API candle_ctx_mark candle_ctx_get_mark(const candle_ctx *ctx);
CANDLE_API void candle_ctx_reset(candle_ctx *ctx, candle_ctx_mark mark);

/* ---- creating tensors (allocated at once, data uninitialised) ---- */

CANDLE_API candle_tensor *candle_tensor_new(candle_ctx *ctx, candle_dtype dtype, int rank,
                                            const int64_t *shape);
/* A leaf over existing storage (retained), e.g. a weight in a mapped file. */
CANDLE_API candle_tensor *candle_tensor_from_storage(candle_ctx *ctx, candle_dtype dtype, int rank,
                                                     const int64_t *shape, candle_storage *s,
                                                     size_t offset);
/* Copy n f32 values into a new tensor of `dtype` (converted). */
CANDLE_API candle_tensor *candle_tensor_from_f32(candle_ctx *ctx, candle_dtype dtype, int rank,
                                                 const int64_t *shape, const float *data);
CANDLE_API candle_tensor *candle_tensor_from_i32(candle_ctx *ctx, int rank, const int64_t *shape,
                                                 const int32_t *data);

/* ---- descriptor queries ---- */

/* Accessors, so a binding need not mirror struct candle_tensor's layout
 * (which may grow). Each takes NULL: dtype CANDLE_DTYPE_COUNT, rank -1,
 * nelements and nbytes 0. dim and stride take i in [-rank, rank) (negative
 * counts from the end, as in the view calls); out of range (or NULL) dim
 * gives -1 and stride 0. Strides are in bytes and may be 0 (a broadcast) or
 * negative (candle_as_strided), so check i against the rank, not the value. */
CANDLE_API candle_dtype candle_tensor_dtype(const candle_tensor *t);
CANDLE_API int candle_tensor_rank(const candle_tensor *t);
CANDLE_API int64_t candle_tensor_dim(const candle_tensor *t, int i);
CANDLE_API int64_t candle_tensor_stride(const candle_tensor *t, int i);
/* Elements (the product of the shape; 1 for rank 0). */
CANDLE_API int64_t candle_tensor_nelements(const candle_tensor *t);
/* Bytes of the tensor's data laid out contiguously (what a copy of it takes;
 * a strided view may span more or less of its storage). */
CANDLE_API size_t candle_tensor_nbytes(const candle_tensor *t);

/* candle_tensor_nelements without the NULL check. */
CANDLE_API int64_t candle_tensor_numel(const candle_tensor *t);
CANDLE_API bool candle_tensor_is_contiguous(const candle_tensor *t);
CANDLE_API bool candle_tensor_same_shape(const candle_tensor *a, const candle_tensor *b);
/* NULL if not yet computed. */
CANDLE_API void *candle_tensor_data(const candle_tensor *t);
/* Contiguous strides for a shape. */
CANDLE_API void candle_contiguous_strides(candle_dtype dtype, int rank, const int64_t *shape,
                                          int64_t *stride);
/* "[2, 3, 4]" into buf. */
CANDLE_API const char *candle_shape_str(int rank, const int64_t *shape, char *buf, size_t n);
CANDLE_API void candle_tensor_set_name(candle_tensor *t, const char *name);

/* Element access for tests and examples (any layout, computed tensors). */
CANDLE_API candle_status candle_tensor_get_f64(const candle_tensor *t, const int64_t *index,
                                               double *out);
/* Copy (converting) all elements, row-major logical order, into out[numel]. */
CANDLE_API candle_status candle_tensor_to_f32(const candle_tensor *t, float *out);
/* Bytes of a tensor's storage, [offset, offset + size) from its first byte,
 * moved through the backend that holds them (or in place for host memory):
 * written from host memory, read into it, set to a byte value, or copied from
 * another tensor's storage (on any backend). Ranges outside the storage are
 * an invalid-argument error. */
CANDLE_API candle_status candle_tensor_set_bytes(candle_tensor *t, size_t offset, const void *src, size_t size);
CANDLE_API candle_status candle_tensor_get_bytes(const candle_tensor *t, size_t offset, void *dst, size_t size);
CANDLE_API candle_status candle_tensor_memset_bytes(candle_tensor *t, size_t offset, int value, size_t size);
CANDLE_API candle_status candle_tensor_copy_bytes(candle_tensor *dst, size_t dst_offset, const candle_tensor *src,
                                                  size_t src_offset, size_t size);
/* Whether t's data is host memory, readable in place (candle_tensor_data). */
CANDLE_API bool candle_tensor_is_host(const candle_tensor *t);
/* Print to a FILE* (stdio) with shape and dtype, like torch's repr. */
CANDLE_API candle_status candle_tensor_print(const candle_tensor *t, void *file);

#ifdef __cplusplus
}
#endif
#endif
