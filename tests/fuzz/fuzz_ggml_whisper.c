/* libFuzzer target for the whisper.cpp ggml reader: any input must open or
 * fail with a format error naming the file, never crash or read outside the
 * input; every tensor of an opened file must lie inside it, have 1..4
 * positive dims whose size matches its bytes, be found by its name and load
 * with the bytes it lists; every token must lie inside the input. Built
 * with -DCANDLE_FUZZ=ON and clang (`make fuzz`). */
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

static void walk_tensors(const candle_ggml_whisper *m, const uint8_t *base, size_t size) {
    candle_ctx_params p = candle_ctx_default_params();
    p.mem_limit = (size_t)64 << 20;
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return;
    for (int64_t i = 0; i < candle_ggml_whisper_n_tensors(m); i++) {
        const candle_ggml_whisper_tensor_info *v = candle_ggml_whisper_tensor(m, i);
        if (candle_ggml_whisper_find_tensor(m, v->name) != i) __builtin_trap();
        if (v->offset > size || v->size > size - v->offset || v->rank < 1 ||
            v->rank > CANDLE_GGML_WHISPER_MAX_DIMS || (const uint8_t *)v->data != base + v->offset)
            __builtin_trap();
        int64_t numel = 1;
        for (int d = 0; d < v->rank; d++) {
            if (v->shape[d] < 1) __builtin_trap();
            numel *= v->shape[d];
        }
        const candle_dtype_traits *t = candle_dtype_info(v->dtype);
        if (!t || v->shape[v->rank - 1] % t->block_size ||
            (uint64_t)(numel / t->block_size) * t->type_size != v->size)
            __builtin_trap();
        touch(v->data, v->size);
        candle_tensor *lt = candle_ggml_whisper_load_tensor(m, ctx, v->name);
        if (lt && candle_tensor_nbytes(lt) != v->size) __builtin_trap();
        if (lt) touch(candle_tensor_data(lt), candle_tensor_nbytes(lt));
        candle_ctx_clear_error(ctx);
    }
    candle_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)candle_ggml_whisper_probe(data, size);
    candle_ggml_whisper *m = NULL;
    candle_status s = candle_ggml_whisper_open_memory(&m, data, size, "fuzz.bin");
    if (s != CANDLE_OK) {
        if ((s != CANDLE_ERR_FORMAT && s != CANDLE_ERR_OOM) || m) __builtin_trap();
        if (s == CANDLE_ERR_FORMAT && strncmp(candle_last_errmsg(), "fuzz.bin: ", 10))
            __builtin_trap();
        return 0;
    }
    for (int64_t i = 0; i < candle_ggml_whisper_n_tokens(m); i++) {
        const char *b;
        size_t n;
        if (!candle_ggml_whisper_token(m, i, &b, &n)) __builtin_trap();
        if ((const uint8_t *)b < data || n > size || (size_t)((const uint8_t *)b - data) > size - n)
            __builtin_trap();
        touch(b, n);
    }
    int32_t nm, nf;
    const void *mel = candle_ggml_whisper_mel_filters(m, &nm, &nf);
    if (mel) touch(mel, (size_t)nm * (size_t)nf * 4);
    walk_tensors(m, data, size);
    candle_ggml_whisper_close(m);
    return 0;
}
