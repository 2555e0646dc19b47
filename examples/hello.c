/* Build a small computation, print it, and show an error message. */
#include <stdio.h>

#include "candle/candle.h"

int main(void) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true; /* compute each op as it is built */
    candle_ctx *ctx;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
        fprintf(stderr, "init: %s\n", candle_last_errmsg());
        return 1;
    }
    const float av[] = {1, 2, 3, 4, 5, 6};
    const float bv[] = {10, 20, 30};
    candle_tensor *a = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, 3}, av);
    candle_tensor *b = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){3}, bv);

    /* (a + b) broadcast over rows, then silu, then the transpose as a view */
    candle_tensor *y = candle_transpose(ctx, candle_silu(ctx, candle_add(ctx, a, b)), 0, 1);
    if (!y) {
        fprintf(stderr, "error: %s\n", candle_errmsg(ctx));
        return 1;
    }
    candle_tensor_print(y, stdout);

    /* A shape mismatch is an error with context, never a crash. */
    candle_tensor *c = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){2}, bv);
    if (!candle_add(ctx, a, c))
        printf("expected error (%s): %s\n", candle_status_name(candle_errcode(ctx)), candle_errmsg(ctx));
    candle_ctx_free(ctx);
    return 0;
}
