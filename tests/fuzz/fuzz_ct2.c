/* libFuzzer target for the CTranslate2 model.bin reader: any input must
 * open or fail with a format error naming the file, never crash or read
 * outside the input; every variable of an opened file must lie inside it,
 * be found by its name, and load with the bytes it lists; every alias must
 * resolve to a variable or to nothing. Built with -DCANDLE_FUZZ=ON and
 * clang (`make fuzz`). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"

static volatile uint64_t sink;

static void touch(const void *p, size_t n) {
    const uint8_t *b = p;
    if (n) sink += b[0] + b[n - 1];
}

static void walk_vars(const candle_ct2 *m, const uint8_t *base, size_t size) {
    candle_ctx_params p = candle_ctx_default_params();
    p.mem_limit = (size_t)64 << 20;
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return;
    for (int64_t i = 0; i < candle_ct2_n_vars(m); i++) {
        const candle_ct2_var_info *v = candle_ct2_var(m, i);
        if (candle_ct2_find_var(m, v->name) != i) __builtin_trap();
        if (v->offset > size || v->size > size - v->offset || v->rank < 0 ||
            v->rank > CANDLE_MAX_RANK || (const uint8_t *)v->data != base + v->offset)
            __builtin_trap();
        touch(v->data, v->size);
        candle_tensor *t = candle_ct2_load_tensor(m, ctx, v->name);
        size_t want = v->ct2_dtype == CANDLE_CT2_I16 ? 2 * v->size : v->size;
        if (t && candle_tensor_nbytes(t) != want) __builtin_trap();
        if (t) touch(candle_tensor_data(t), candle_tensor_nbytes(t));
        candle_ctx_clear_error(ctx);
    }
    candle_ctx_free(ctx);
}

static void walk_aliases(const candle_ct2 *m) {
    for (int64_t i = 0; i < candle_ct2_n_aliases(m); i++) {
        const char *a, *t;
        int64_t v;
        if (!candle_ct2_alias(m, i, &a, &t, &v)) __builtin_trap();
        if (v < -1 || v >= candle_ct2_n_vars(m)) __builtin_trap();
        touch(a, strlen(a) + 1);
        touch(t, strlen(t) + 1);
        if (v >= 0 && candle_ct2_find_var(m, a) != v) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)candle_ct2_probe(data, size);
    candle_ct2 *m = NULL;
    candle_status s = candle_ct2_open_memory(&m, data, size, "fuzz.bin");
    if (s != CANDLE_OK) {
        if ((s != CANDLE_ERR_FORMAT && s != CANDLE_ERR_OOM) || m) __builtin_trap();
        if (s == CANDLE_ERR_FORMAT && strncmp(candle_last_errmsg(), "fuzz.bin: ", 10))
            __builtin_trap();
        return 0;
    }
    touch(candle_ct2_spec(m), strlen(candle_ct2_spec(m)) + 1);
    walk_vars(m, data, size);
    walk_aliases(m);
    candle_ct2_close(m);
    return 0;
}
