/* Opening safetensors files: map (or load) the image, validate the header
 * (safetensors_parse.c), and hand out tensors: zero-copy views of the image
 * for the dtypes Candle computes with, F32 copies for F64 and FP8. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image-impl.h"
#include "safetensors-impl.h"

static const char *const FMT = "safetensors";

/* Takes over the reference to s; name is copied. */
static candle_status open_storage(candle_safetensors **out, candle_storage *s, const char *name) {
    candle_safetensors *st = calloc(1, sizeof *st);
    if (st) st->name = strdup(name);
    if (!st || !st->name) {
        free(st);
        candle_storage_release(s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: safetensors handle");
    }
    st->storage = s;
    st->base = s->data;
    st->file_size = s->size;
    candle_status r = cst_parse(st);
    if (r) {
        candle_safetensors_close(st);
        return r;
    }
    *out = st;
    return CANDLE_OK;
}

static candle_status parse_image(void **handle, candle_storage *s, const char *name) {
    candle_safetensors *st = NULL;
    candle_status r = open_storage(&st, s, name);
    *handle = st;
    return r;
}

static void close_image(void *handle) { candle_safetensors_close(handle); }

candle_status candle_safetensors_open(candle_safetensors **out, const char *path,
                                      const candle_safetensors_open_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "safetensors: open: NULL argument");
    void *h = NULL;
    candle_status r = cimage_load(FMT, path, p && p->no_mmap, parse_image, close_image, &h);
    *out = h;
    return r;
}

candle_status candle_safetensors_open_memory(candle_safetensors **out, const void *data,
                                             size_t size, const char *name) {
    if (!out || (!data && size))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "safetensors: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    candle_storage *s = candle_storage_external((void *)(data ? data : empty), size);
    if (!s) return candle_last_error();
    return open_storage(out, s, name ? name : FMT);
}

void candle_safetensors_close(candle_safetensors *st) {
    if (!st) return;
    cst_free_parsed(st);
    candle_storage_release(st->storage);
    free(st->name);
    free(st);
}

size_t candle_safetensors_file_size(const candle_safetensors *st) {
    return st ? st->file_size : 0;
}

size_t candle_safetensors_data_offset(const candle_safetensors *st) {
    return st ? st->data_offset : 0;
}

candle_storage *candle_safetensors_storage(const candle_safetensors *st) {
    return st ? st->storage : NULL;
}

int64_t candle_safetensors_n_tensors(const candle_safetensors *st) {
    return st ? st->n_tensors : 0;
}

const candle_safetensors_tensor_info *candle_safetensors_tensor(const candle_safetensors *st,
                                                               int64_t i) {
    if (!st || i < 0 || i >= st->n_tensors) return NULL;
    return &st->tensors[i];
}

int64_t candle_safetensors_find_tensor(const candle_safetensors *st, const char *name) {
    if (!st || !name) return -1;
    return cdl_names_find(st->tensor_sorted, st->n_tensors, name);
}

int64_t candle_safetensors_n_metadata(const candle_safetensors *st) { return st ? st->n_meta : 0; }

bool candle_safetensors_metadata_at(const candle_safetensors *st, int64_t i, const char **key,
                                    const char **val, size_t *len) {
    if (!st || i < 0 || i >= st->n_meta) return false;
    if (key) *key = st->meta[i].key;
    if (val) *val = st->meta[i].val;
    if (len) *len = st->meta[i].len;
    return true;
}

bool candle_safetensors_metadata(const candle_safetensors *st, const char *key, const char **val,
                                 size_t *len) {
    if (!st || !key) return false;
    int64_t i = cdl_names_find(st->meta_sorted, st->n_meta, key);
    return i >= 0 && candle_safetensors_metadata_at(st, i, NULL, val, len);
}

/* ---- conversions to F32 (OCP 8-bit floating point spec, v1.0) ---- */

/* E4M3 ("FN"): bias 7, no infinities; S.1111.111 is NaN, so the largest
 * value is S.1111.110 = 448. Exponent 0 is subnormal: m/8 * 2^-6. */
static float e4m3_to_f32(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v = e == 15 && m == 7 ? NAN
              : e == 0          ? ldexpf((float)m, -9)
                                : ldexpf((float)(8 + m), e - 10);
    return b & 0x80 ? -v : v;
}

/* E5M2: IEEE-like, bias 15; exponent 31 is inf (m = 0) or NaN. Largest
 * finite 57344; subnormals m/4 * 2^-14. */
static float e5m2_to_f32(uint8_t b) {
    int e = (b >> 2) & 31, m = b & 3;
    float v = e == 31 ? (m ? NAN : INFINITY)
              : e == 0 ? ldexpf((float)m, -16)
                       : ldexpf((float)(4 + m), e - 17);
    return b & 0x80 ? -v : v;
}

static void convert(const char *st_dtype, const uint8_t *src, float *dst, int64_t n) {
    if (!strcmp(st_dtype, "F64")) {
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8); /* the data need not be aligned */
            dst[i] = (float)d;
        }
        return;
    }
    float table[256];
    bool e4 = !strcmp(st_dtype, "F8_E4M3");
    for (int b = 0; b < 256; b++) table[b] = e4 ? e4m3_to_f32((uint8_t)b) : e5m2_to_f32((uint8_t)b);
    for (int64_t i = 0; i < n; i++) dst[i] = table[src[i]];
}

/* A new tensor of load_dtype holding the bytes (copied as they are, or
 * converted), written in place or staged on the host for a device. */
static candle_tensor *load_copy(const candle_safetensors *st, candle_ctx *ctx,
                                const candle_safetensors_tensor_info *ti) {
    candle_tensor *t = candle_tensor_new(ctx, ti->load_dtype, ti->rank, ti->shape);
    if (!t) return NULL;
    size_t bytes = candle_tensor_nbytes(t);
    bool host = candle_tensor_is_host(t);
    uint8_t *p = host ? candle_tensor_data(t) : malloc(bytes ? bytes : 1);
    if (!p) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: %s: tensor '%s': staging %zu bytes",
                         st->name, ti->name, bytes);
        return NULL;
    }
    const uint8_t *src = st->base + ti->offset;
    if (ti->load_dtype == ti->dtype) memcpy(p, src, bytes);
    else convert(ti->st_dtype, src, (float *)p, candle_tensor_numel(t));
    candle_status s = host ? CANDLE_OK : candle_tensor_set_bytes(t, 0, p, bytes);
    if (!host) free(p);
    return s ? NULL : t; /* set_bytes recorded its error on ctx */
}

candle_tensor *candle_safetensors_load_tensor(const candle_safetensors *st, candle_ctx *ctx,
                                              const char *name) {
    if (!ctx) return NULL;
    if (!st || !name) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "safetensors: load_tensor: NULL argument");
        return NULL;
    }
    int64_t i = candle_safetensors_find_tensor(st, name);
    if (i < 0) {
        cdl_set_error(ctx, CANDLE_ERR_FORMAT, "%s: tensor '%s': not found", st->name, name);
        return NULL;
    }
    const candle_safetensors_tensor_info *ti = &st->tensors[i];
    if (ti->load_dtype == CANDLE_DTYPE_COUNT) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED,
                         "%s: tensor '%s': dtype %s cannot be loaded (Candle has no such type)",
                         st->name, name, ti->st_dtype);
        return NULL;
    }
    /* Views need data aligned for their type (kernels read it through typed
     * pointers); the header length need not keep it so, so copy then. */
    size_t align = candle_dtype_info(ti->load_dtype)->type_size;
    bool aligned = (uintptr_t)(st->base + ti->offset) % align == 0;
    candle_tensor *t = ti->load_dtype == ti->dtype && aligned
                           ? candle_tensor_from_storage(ctx, ti->dtype, ti->rank, ti->shape,
                                                        st->storage, ti->offset)
                           : load_copy(st, ctx, ti);
    if (t) candle_tensor_set_name(t, name);
    return t;
}
