/* A committed tiny model rewritten with one defect, for tests of what the
 * loaders and the numeric checks refuse: every key copied, then amended by
 * the caller's edit; every tensor copied, but `rows_of` keeps only its first
 * `rows` rows and `fill_of` is overwritten with `fill`. */
#ifndef CANDLE_TESTS_TINY_VARIANT_H
#define CANDLE_TESTS_TINY_VARIANT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"

typedef struct tiny_variant {
    candle_status (*edit)(candle_gguf_writer *w, void *user);
    void *user;
    const char *rows_of[2]; /* tensors cut to their first `rows` rows */
    int64_t rows;
    const char *fill_of; /* an f32 tensor whose every value becomes fill */
    float fill;
} tiny_variant;

static inline unsigned char *tiny_read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = len > 0 ? malloc((size_t)len) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = b ? (size_t)len : 0;
    return b;
}

static inline bool tiny_is(const char *name, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i], name)) return true;
    return false;
}

/* base (a GGUF path) rewritten as v into out. */
static inline candle_status tiny_variant_write(const char *base, const char *out,
                                               const tiny_variant *v) {
    size_t n = 0;
    unsigned char *file = tiny_read_all(base, &n);
    candle_gguf *g = NULL;
    candle_gguf_writer *w = NULL;
    candle_status s = file ? candle_gguf_open_memory(&g, file, n) : CANDLE_ERR_IO;
    if (!s) s = candle_gguf_writer_init(&w);
    if (!s) s = candle_gguf_writer_copy_kv(w, g);
    if (!s && v->edit) s = v->edit(w, v->user);
    float *filled = NULL;
    for (int64_t i = 0; !s && i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *t = candle_gguf_tensor(g, i);
        int64_t shape[CANDLE_MAX_RANK];
        memcpy(shape, t->shape, sizeof shape);
        const void *data = file + t->offset;
        if (tiny_is(t->name, v->rows_of, 2) && v->rows < shape[0]) shape[0] = v->rows;
        if (v->fill_of && !strcmp(t->name, v->fill_of) && t->dtype == CANDLE_DTYPE_F32) {
            free(filled);
            filled = malloc(t->size);
            for (size_t k = 0; filled && k < t->size / sizeof(float); k++) filled[k] = v->fill;
            data = filled;
        }
        s = data ? candle_gguf_writer_add_tensor(w, t->name, t->dtype, t->rank, shape, data)
                 : CANDLE_ERR_OOM;
    }
    if (!s) s = candle_gguf_writer_write(w, out);
    free(filled);
    candle_gguf_writer_free(w);
    candle_gguf_close(g);
    free(file);
    return s;
}

#endif
