/* Internal core declarations shared by the library's layers. */
#ifndef CANDLE_CORE_IMPL_H
#define CANDLE_CORE_IMPL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "candle/candle.h"

#if defined(__GNUC__)
#define CANDLE_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CANDLE_PRINTF(a, b)
#endif

/* Record an error on ctx (or the thread-local last error when ctx is NULL).
 * Returns s so callers can `return cdl_set_error(...)`. The first error on
 * a context sticks until candle_ctx_clear_error. */
candle_status cdl_set_error(candle_ctx *ctx, candle_status s, const char *fmt, ...)
    CANDLE_PRINTF(3, 4);
candle_status cdl_set_errorv(candle_ctx *ctx, candle_status s, const char *fmt, va_list ap);
/* Copy the thread-local last error onto ctx (after a context-less call). */
candle_status cdl_ctx_take_last_error(candle_ctx *ctx);
/* A message to the log callback (log.h), formatted as printf; one line,
 * without the newline. */
void cdl_log_msg(candle_log_level level, const char *fmt, ...) CANDLE_PRINTF(2, 3);
/* The calling thread's buffer of candle_backend_set_errmsg, for kernels that
 * format into it in place. */
enum { CANDLE_BACKEND_ERRMSG_MAX = 256 };
char *cdl_backend_errmsg_buffer(void);
/* "1.50 GiB" into buf. */
const char *cdl_format_bytes(size_t n, char *buf, size_t len);
/* Seconds on the monotonic clock (durations only). */
double cdl_now_s(void);

/* A host storage of one reference over data (freed by release). */
candle_storage *cdl_storage_new(void *data, size_t size, candle_storage_kind kind,
                                   void (*release)(candle_storage *));

/* A name and the index of its entry; sorted by name (ties in index order)
 * for binary search (names.c). */
typedef struct cdl_name_ref {
    const char *name;
    int64_t idx;
} cdl_name_ref;
void cdl_names_sort(cdl_name_ref *refs, int64_t n);
/* The idx of name in sorted[0..n), or -1. */
int64_t cdl_names_find(const cdl_name_ref *sorted, int64_t n, const char *name);

/* Replacing a file safely (file_out.c): open writes to a new temporary
 * beside path (O_EXCL|O_NOFOLLOW, a unique name); commit closes it and
 * renames it over path when ok, else removes it. An existing path that is not
 * a regular file is refused. `what` prefixes the error messages. */
typedef struct cdl_out_file {
    FILE *f;
    char *tmp;
    const char *path;
} cdl_out_file;
candle_status cdl_out_file_check(const char *path, const char *what);
candle_status cdl_out_file_open(cdl_out_file *o, const char *path, const char *what);
candle_status cdl_out_file_commit(cdl_out_file *o, bool ok, const char *what);
void cdl_out_file_abort(cdl_out_file *o);

/* Defensive checks of internal invariants (never of user input). */
#define CANDLE_ALWAYS(x) (__builtin_expect(!!(x), 1))
#define CANDLE_NEVER(x) (__builtin_expect(!!(x), 0))

/* ---- context internals ---- */

/* A context computing on be (freed with it when owns_backend); the public
 * candle_ctx_init (backend/registry.c) picks the backend. */
candle_status cdl_ctx_init_on(candle_ctx **out, const candle_ctx_params *p, candle_backend *be,
                                 bool owns_backend);

/* A new descriptor owned by ctx, zeroed but for ctx and device. */
candle_tensor *cdl_tensor_alloc_desc(candle_ctx *ctx);
/* Give t fresh storage from the backend for its (contiguous) layout,
 * respecting the context's memory limit. */
candle_status cdl_tensor_alloc_storage(candle_ctx *ctx, candle_tensor *t);
/* Point a view at its source's storage (source must have storage). */
void cdl_tensor_bind_view(candle_tensor *t);
/* Descriptor for a new op node: contiguous layout for shape, no storage. */
candle_tensor *cdl_node_new(candle_ctx *ctx, candle_op op, candle_dtype dtype, int rank,
                               const int64_t *shape);
/* Finish building a node: compute it at once in eager contexts. */
candle_tensor *cdl_node_finish(candle_ctx *ctx, candle_tensor *node);
/* candle_attention with options (flags, src/ops/attention.c):
 * CDL_ATTN_ROW_STEPS: each row gets the bits the one-position step at its
 * position gets (the step that verifies drafted tokens must pick what
 * decoding them one at a time would; kernels may take a slower path);
 * CDL_ATTN_BF16: the products may take q, k, v and the probabilities
 * rounded to bf16 (f32 sums) where a backend has bf16 dot products: for
 * models whose weights are bf16, whose linear products round their
 * activations so anyway. */
enum { CDL_ATTN_ROW_STEPS = 1, CDL_ATTN_BF16 = 2 };
/* candle_matmul_bias with options (iparams[0] of the node, a bit set):
 * CDL_MM_FLOAT_ACT: the activations stay float in the product, a quantized
 * weight is dequantized instead of the activations rounded to its dot
 * type's 8-bit blocks (the integer kernels): for encoders, whose outputs
 * are compared by cosine, where that rounding costs more than the integer
 * kernels' speed gives. CDL_MM_ROW_STEPS: each row gets the bits of its
 * one-row product (a step that verifies drafted tokens): a quantized
 * product keeps the kernels that give them up to more rows than speed
 * alone would (cdl_qgemm_rows_steps). */
enum { CDL_MM_FLOAT_ACT = 1, CDL_MM_ROW_STEPS = 2 };
candle_tensor *cdl_matmul_ex(candle_ctx *ctx, candle_tensor *a, candle_tensor *b, candle_tensor *bias,
                             unsigned flags);
candle_tensor *cdl_attention_rows(candle_ctx *ctx, candle_tensor *q, candle_tensor *k, candle_tensor *v,
                                  candle_tensor *mask, double scale, bool causal, unsigned flags);
/* Normalise a possibly negative dim; records an error and returns -1 if out of range. */
int cdl_norm_dim(candle_ctx *ctx, const char *op, int dim, int rank);
/* Graphs are freed with the context (or a reset past them); -1 on OOM. */
int cdl_ctx_track_graph(candle_ctx *ctx, void *g);
void cdl_graph_free_internal(void *g);
/* Tests: candle_ctx_default_params' no_plan from now on (the contexts that
 * sessions and batches make: the planner's results against none). */
void cdl_ctx_set_default_no_plan(bool on);
/* Ctx stats hook for storage released through a context. */
void cdl_ctx_note_free(candle_ctx *ctx, size_t bytes);

#endif
