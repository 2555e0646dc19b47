/* Opening GGUF files: map (or load) the image, parse it, and hand out
 * zero-copy tensors over the image's storage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf-impl.h"
#include "image-impl.h"

/* Takes over the reference to s. */
static candle_status open_storage(candle_gguf **out, candle_storage *s) {
    candle_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        candle_storage_release(s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf handle");
    }
    g->storage = s;
    g->base = s->data;
    g->file_size = s->size;
    candle_status st = cgguf_parse(g);
    if (st) {
        candle_gguf_close(g);
        return st;
    }
    *out = g;
    return CANDLE_OK;
}

static candle_status parse_image(void **handle, candle_storage *s, const char *name) {
    (void)name;
    candle_gguf *g = NULL;
    candle_status r = open_storage(&g, s);
    *handle = g;
    return r;
}

static void close_image(void *handle) { candle_gguf_close(handle); }

candle_status candle_gguf_open(candle_gguf **out, const char *path,
                               const candle_gguf_open_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "gguf: open: NULL argument");
    void *h = NULL;
    candle_status r = cimage_load("gguf", path, p && p->no_mmap, parse_image, close_image, &h);
    *out = h;
    return r;
}

candle_status candle_gguf_open_memory(candle_gguf **out, const void *data, size_t size) {
    if (!out || (!data && size))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "gguf: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    candle_storage *s = candle_storage_external((void *)(data ? data : empty), size);
    if (!s) return candle_last_error();
    return open_storage(out, s);
}

void candle_gguf_close(candle_gguf *g) {
    if (!g) return;
    cgguf_free_parsed(g);
    candle_storage_release(g->storage);
    free(g);
}

uint32_t candle_gguf_version(const candle_gguf *g) { return g ? g->version : 0; }
size_t candle_gguf_alignment(const candle_gguf *g) { return g ? g->alignment : 0; }
size_t candle_gguf_file_size(const candle_gguf *g) { return g ? g->file_size : 0; }
candle_storage *candle_gguf_storage(const candle_gguf *g) { return g ? g->storage : NULL; }

int64_t candle_gguf_n_tensors(const candle_gguf *g) { return g ? g->n_tensors : 0; }

const candle_gguf_tensor_info *candle_gguf_tensor(const candle_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_tensors) return NULL;
    return &g->tensors[i].info;
}

int64_t candle_gguf_find_tensor(const candle_gguf *g, const char *name) {
    if (!g || !name) return -1;
    return cdl_names_find(g->tensor_sorted, g->n_tensors, name);
}

candle_tensor *candle_gguf_load_tensor(const candle_gguf *g, candle_ctx *ctx, const char *name) {
    if (!ctx) return NULL;
    if (!g || !name) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "gguf: load_tensor: NULL argument");
        return NULL;
    }
    int64_t i = candle_gguf_find_tensor(g, name);
    if (i < 0) {
        cdl_set_error(ctx, CANDLE_ERR_FORMAT, "gguf: tensor '%s': not found", name);
        return NULL;
    }
    const candle_gguf_tensor_info *ti = &g->tensors[i].info;
    candle_tensor *t = candle_tensor_from_storage(ctx, ti->dtype, ti->rank, ti->shape,
                                                  g->storage, ti->offset);
    if (t) candle_tensor_set_name(t, name);
    return t;
}
