/* Internal: quantized weight times one activation vector (batch-1 decoding).
 *
 * The activation is prepared once per product in a layout chosen for the
 * weight type (q8 codes ordered so that one load feeds two weight blocks,
 * block scales as floats, the offset terms of q4_0/q4_1 precomputed per
 * block), then every weight row is streamed once from the mapping with no
 * repacking. Codes and scales are those of the type's vec_dot activation
 * (q8_0, q8_1: the f16-rounded scale), so the integer block sums equal the
 * traits vec_dot's and results differ only in the order of float sums. */
#ifndef CANDLE_GEMV_IMPL_H
#define CANDLE_GEMV_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "candle/dtype.h"

/* Bytes of the prepared activation for weight type t and K elements (a
 * multiple of 64), or 0 when t has no matrix-vector kernel on this CPU. */
size_t cdl_gemv_x_bytes(candle_dtype t, int64_t K);
/* x: K floats; xv: cdl_gemv_x_bytes(t, K) bytes, 32-byte aligned. */
void cdl_gemv_prep(candle_dtype t, int64_t K, const float *x, void *xv);
/* out[r] = dot(weight row r, x) for r < n; rows ws bytes apart (the
 * portable rows of non-x86 CPUs are traits vec_dots: rows at the blocks'
 * natural alignment, 2 bytes). */
void cdl_gemv_rows(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                      float *out);

#endif
