/* libFuzzer target for the GGUF reader: any input must parse or fail with a
 * format error, never crash or read outside the input; everything a parsed
 * handle hands out must be readable. Built with -DCANDLE_FUZZ=ON and clang
 * (`make fuzz`). */
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

static void walk_kv(const candle_gguf *g, int64_t i) {
    char buf[256];
    const char *key = candle_gguf_key(g, i);
    if (candle_gguf_find_key(g, key) != i) __builtin_trap();
    candle_gguf_kv_str(g, i, buf, sizeof buf);
    uint32_t u;
    int64_t v;
    float f;
    bool b;
    const char *s;
    size_t len;
    sink += candle_gguf_get_u32(g, key, &u) + candle_gguf_get_i64(g, key, &v) +
            candle_gguf_get_f32(g, key, &f) + candle_gguf_get_bool(g, key, &b);
    if (candle_gguf_get_str(g, key, &s, &len)) touch(s, len);
    candle_gguf_type et;
    int64_t n;
    if (!candle_gguf_get_arr(g, key, &et, &n)) return;
    if (et == CANDLE_GGUF_STRING) {
        for (int64_t j = 0; j < n; j++)
            if (candle_gguf_arr_str(g, key, j, &s, &len)) touch(s, len);
    } else {
        const uint8_t *d = candle_gguf_arr_data(g, key);
        if (d && n > 0) sink += d[0];
    }
}

static void walk_tensors(const candle_gguf *g) {
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, NULL) != CANDLE_OK) return;
    const uint8_t *base = candle_gguf_storage(g)->data;
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *ti = candle_gguf_tensor(g, i);
        if (candle_gguf_find_tensor(g, ti->name) != i) __builtin_trap();
        if (ti->offset + ti->size > candle_gguf_file_size(g)) __builtin_trap();
        touch(base + ti->offset, ti->size);
        if (i < 4) {
            candle_tensor *t = candle_gguf_load_tensor(g, ctx, ti->name);
            if (t && candle_tensor_nbytes(t) != ti->size) __builtin_trap();
            candle_ctx_clear_error(ctx);
        }
    }
    candle_ctx_free(ctx);
}

/* Whatever parses must survive copy_kv + add_tensor + write and parse again
 * to the same metadata and bytes (a differential check of the writer). */
static void roundtrip(const candle_gguf *g) {
    const uint8_t *base = candle_gguf_storage(g)->data;
    /* Tensors may overlap in the input, but each gets its own aligned slot
     * in the copy: skip inputs whose copy would be large, to keep runs fast. */
    size_t out = 0, align = candle_gguf_alignment(g);
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *ti = candle_gguf_tensor(g, i);
        if (strlen(ti->name) > 63) return; /* the writer's limit */
        out += ti->size + align;
        if (out > ((size_t)4 << 20)) return;
    }
    candle_gguf_writer *w = NULL;
    if (candle_gguf_writer_init(&w) != CANDLE_OK) return;
    if (candle_gguf_writer_copy_kv(w, g) != CANDLE_OK) __builtin_trap();
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *ti = candle_gguf_tensor(g, i);
        if (candle_gguf_writer_add_tensor(w, ti->name, ti->dtype, ti->rank, ti->shape,
                                          base + ti->offset) != CANDLE_OK)
            __builtin_trap();
    }
    void *img = NULL;
    size_t n = 0;
    candle_gguf *h = NULL;
    if (candle_gguf_writer_write_memory(w, &img, &n) != CANDLE_OK) __builtin_trap();
    candle_gguf_writer_free(w);
    if (candle_gguf_open_memory(&h, img, n) != CANDLE_OK) __builtin_trap();
    if (candle_gguf_n_kv(h) != candle_gguf_n_kv(g) ||
        candle_gguf_n_tensors(h) != candle_gguf_n_tensors(g) ||
        candle_gguf_alignment(h) != candle_gguf_alignment(g))
        __builtin_trap();
    char a[256], b[256];
    for (int64_t i = 0; i < candle_gguf_n_kv(g); i++) {
        int64_t j = candle_gguf_find_key(h, candle_gguf_key(g, i));
        if (j < 0 || strcmp(candle_gguf_kv_str(g, i, a, sizeof a),
                            candle_gguf_kv_str(h, j, b, sizeof b)))
            __builtin_trap();
    }
    const uint8_t *hb = candle_gguf_storage(h)->data;
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *x = candle_gguf_tensor(g, i), *y = candle_gguf_tensor(h, i);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->size != y->size ||
            memcmp(base + x->offset, hb + y->offset, x->size))
            __builtin_trap();
    }
    candle_gguf_close(h);
    free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    candle_gguf *g = NULL;
    candle_status s = candle_gguf_open_memory(&g, data, size);
    if (s != CANDLE_OK) {
        if (s != CANDLE_ERR_FORMAT || g) __builtin_trap();
        if (!strstr(candle_last_errmsg(), " at offset ")) __builtin_trap();
        return 0;
    }
    for (int64_t i = 0; i < candle_gguf_n_kv(g); i++) walk_kv(g, i);
    walk_tensors(g);
    roundtrip(g);
    candle_gguf_close(g);
    return 0;
}
