/* libFuzzer target for the safetensors reader: any input must open or fail
 * with a format error naming the file, never crash or read outside the
 * input; every tensor of an opened file must lie inside it, be found by its
 * name, and load (or be refused as unsupported) with the bytes it lists.
 * Built with -DCANDLE_FUZZ=ON and clang (`make fuzz`). */
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

static void walk_metadata(const candle_safetensors *st) {
    for (int64_t i = 0; i < candle_safetensors_n_metadata(st); i++) {
        const char *k, *v, *w;
        size_t len, len2;
        if (!candle_safetensors_metadata_at(st, i, &k, &v, &len)) __builtin_trap();
        touch(v, len + 1); /* NUL-terminated */
        if (!candle_safetensors_metadata(st, k, &w, &len2) || w != v || len2 != len)
            __builtin_trap();
    }
}

static void load(const candle_safetensors *st, candle_ctx *ctx,
                 const candle_safetensors_tensor_info *ti) {
    candle_tensor *t = candle_safetensors_load_tensor(st, ctx, ti->name);
    if (ti->load_dtype == CANDLE_DTYPE_COUNT) {
        if (t || candle_errcode(ctx) != CANDLE_ERR_UNSUPPORTED) __builtin_trap();
    } else if (t) {
        size_t elem = candle_dtype_info(ti->load_dtype)->type_size;
        size_t stored = ti->load_dtype == ti->dtype ? ti->size : candle_tensor_nbytes(t);
        if (candle_tensor_nbytes(t) != stored || (stored && stored % elem)) __builtin_trap();
        touch(candle_tensor_data(t), candle_tensor_nbytes(t));
    }
    /* else: a large tensor may exceed the context's limit; that is an OOM
     * on ctx, not a crash */
    candle_ctx_clear_error(ctx);
}

static void walk_tensors(const candle_safetensors *st) {
    candle_ctx_params p = candle_ctx_default_params();
    p.mem_limit = (size_t)64 << 20; /* converted copies are 4x an F8 input */
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return;
    const uint8_t *base = candle_safetensors_storage(st)->data;
    size_t file = candle_safetensors_file_size(st);
    for (int64_t i = 0; i < candle_safetensors_n_tensors(st); i++) {
        const candle_safetensors_tensor_info *ti = candle_safetensors_tensor(st, i);
        if (candle_safetensors_find_tensor(st, ti->name) != i) __builtin_trap();
        if (ti->offset < candle_safetensors_data_offset(st) || ti->offset > file ||
            ti->size > file - ti->offset || ti->rank < 0 || ti->rank > CANDLE_MAX_RANK)
            __builtin_trap();
        touch(base + ti->offset, ti->size);
        load(st, ctx, ti);
    }
    candle_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    candle_safetensors *st = NULL;
    candle_status s = candle_safetensors_open_memory(&st, data, size, "fuzz.safetensors");
    if (s != CANDLE_OK) {
        if ((s != CANDLE_ERR_FORMAT && s != CANDLE_ERR_OOM) || st) __builtin_trap();
        if (s == CANDLE_ERR_FORMAT && strncmp(candle_last_errmsg(), "fuzz.safetensors: ", 18))
            __builtin_trap();
        return 0;
    }
    walk_metadata(st);
    walk_tensors(st);
    candle_safetensors_close(st);
    return 0;
}
