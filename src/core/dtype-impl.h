/* Internal: the mutable dtype traits table. Kernel layers (quant/) fill in
 * their function pointers once, through the hook below. */
#ifndef CANDLE_DTYPE_IMPL_H
#define CANDLE_DTYPE_IMPL_H

#include "candle/dtype.h"

/* Defined in quant/: registers to_f32/from_f32/vec_dot for the block types
 * and the plain float types. Called once, before the table is first read. */
void cdl_quant_register_traits(candle_dtype_traits *table);

static inline bool cdl_dtype_is_quantized(candle_dtype t) {
    return t >= CANDLE_DTYPE_Q4_0 && t < CANDLE_DTYPE_COUNT;
}

#endif
