/* Shared helpers of the op builders. */
#ifndef CANDLE_OPS_IMPL_H
#define CANDLE_OPS_IMPL_H

#include "../core/ctx-impl.h"

/* Op builders return NULL at once when ctx or an input is NULL (an earlier
 * op failed and its error is already recorded). */
#define OP_CHECK_IN(x)                 \
    do {                               \
        if (!ctx || !(x)) return NULL; \
    } while (0)

/* Both operands on one device, or a device error naming the op. */
bool op_check_device(candle_ctx *ctx, const char *op, const candle_tensor *a,
                     const candle_tensor *b);
/* Same dtype, or a dtype error naming the op and both dtypes. */
bool op_check_same_dtype(candle_ctx *ctx, const char *op, const candle_tensor *a,
                         const candle_tensor *b);
/* Plain (non-block) dtype, or a dtype error. float_only: f32/f16/bf16. */
bool op_check_plain(candle_ctx *ctx, const char *op, const candle_tensor *a, bool float_only);
/* t of a block type (a quantized KV cache) whose rows, the last dim, are
 * whole contiguous blocks that its type converts to f32 (or, from_f32, from
 * it); else a dtype error: "<op>: <type> <what> need rows of whole ...". */
bool op_check_block_rows(candle_ctx *ctx, const char *op, const char *what, const candle_tensor *t,
                         bool from_f32);
/* Keys/values (attention) or KV caches: a float dtype (op_check_plain), or
 * block rows (op_check_block_rows) read back to f32 and, when `written`
 * (a cache the op stores into), written from f32 too. */
bool op_check_kv_rows(candle_ctx *ctx, const char *op, const char *what, const candle_tensor *t, bool written);
/* NumPy broadcast of n shapes into out; a shape error names the op. */
bool op_broadcast_shape(candle_ctx *ctx, const char *op, candle_tensor *const *xs, int n,
                        int *rank, int64_t *shape);

#endif
