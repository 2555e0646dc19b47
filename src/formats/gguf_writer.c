/* GGUF writer (version 3): metadata, then tensor infos, then tensor data,
 * each tensor at a multiple of the alignment from the aligned data start.
 * Setting a key that exists replaces its value, so a copied file's metadata
 * can be amended (e.g. general.file_type after quantizing). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf-impl.h"

#define WRITER_MAX_NAME 63 /* what llama.cpp accepts for tensor names */

typedef struct wkv {
    char *key;
    uint8_t *val; /* type (u32) and value, as stored in the file */
    size_t size;
} wkv;

typedef struct wtensor {
    char *name;
    candle_dtype dtype;
    int rank;
    int64_t shape[CANDLE_MAX_RANK]; /* outermost-first */
    const void *data;               /* caller's, read at write time */
    size_t size;
} wtensor;

/* Names (keys, tensor names) to their positions, so that setting or adding
 * one is not a scan of all before it: a file of 100k keys was quadratic. The
 * names are the entries' own strings. */
typedef struct islot {
    const char *name; /* NULL: empty */
    int64_t pos;
} islot;

typedef struct name_index {
    islot *s;
    uint64_t cap, n; /* cap a power of two, at most half full */
} name_index;

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int64_t index_get(const name_index *x, const char *name) {
    for (uint64_t i = x->cap ? name_hash(name) & (x->cap - 1) : 0; x->cap; i = (i + 1) & (x->cap - 1)) {
        if (!x->s[i].name) return -1;
        if (!strcmp(x->s[i].name, name)) return x->s[i].pos;
    }
    return -1;
}

static void index_insert(islot *s, uint64_t cap, islot e) {
    uint64_t i = name_hash(e.name) & (cap - 1);
    while (s[i].name) i = (i + 1) & (cap - 1);
    s[i] = e;
}

/* name (not yet in x) at pos; false when out of memory. */
static bool index_put(name_index *x, const char *name, int64_t pos) {
    if (2 * (x->n + 1) > x->cap) {
        uint64_t cap = x->cap ? 2 * x->cap : 64;
        islot *s = calloc(cap, sizeof *s);
        if (!s) return false;
        for (uint64_t i = 0; i < x->cap; i++)
            if (x->s[i].name) index_insert(s, cap, x->s[i]);
        free(x->s);
        x->s = s;
        x->cap = cap;
    }
    index_insert(x->s, x->cap, (islot){name, pos});
    x->n++;
    return true;
}

struct candle_gguf_writer {
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    name_index kv_index, t_index;
    size_t alignment;
};

/* A growable byte buffer for one value. */
typedef struct bbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bbuf;

static void bput(bbuf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void bput_u32(bbuf *b, uint32_t v) { bput(b, &v, 4); }
static void bput_u64(bbuf *b, uint64_t v) { bput(b, &v, 8); }
static void bput_str(bbuf *b, const char *s, size_t len) {
    bput_u64(b, len);
    bput(b, s, len);
}

static candle_status arg_err(const char *fmt, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, fmt, what);
}

candle_status candle_gguf_writer_init(candle_gguf_writer **out) {
    if (!out) return arg_err("gguf writer: %s", "NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf writer");
    (*out)->alignment = GGUF_DEFAULT_ALIGNMENT;
    return CANDLE_OK;
}

void candle_gguf_writer_free(candle_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->kv_index.s);
    free(w->t_index.s);
    free(w);
}

static candle_status check_key(const char *key) {
    if (!key || !key[0]) return arg_err("gguf writer: %s", "empty or NULL key");
    if (strlen(key) > GGUF_MAX_KEY_LEN) return arg_err("gguf writer: key '%.64s' too long", key);
    return CANDLE_OK;
}

/* Store a finished value (type + payload) under key; takes b's memory. */
static candle_status set_value(candle_gguf_writer *w, const char *key, bbuf *b) {
    candle_status s = check_key(key);
    if (!s && b->oom) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf value");
    if (s) {
        free(b->p);
        return s;
    }
    int64_t i = index_get(&w->kv_index, key);
    if (i >= 0) {
        free(w->kv[i].val);
        w->kv[i].val = b->p;
        w->kv[i].size = b->n;
        return CANDLE_OK;
    }
    char *k = strdup(key);
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *kv = realloc(w->kv, (size_t)cap * sizeof *kv);
        if (kv) {
            w->kv = kv;
            w->cap_kv = cap;
        }
    }
    if (!k || w->n_kv == w->cap_kv || !index_put(&w->kv_index, k, w->n_kv)) {
        free(k);
        free(b->p);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf key");
    }
    w->kv[w->n_kv++] = (wkv){k, b->p, b->n};
    return CANDLE_OK;
}

static candle_status set_scalar(candle_gguf_writer *w, const char *key, candle_gguf_type t,
                                const void *v) {
    if (!w) return arg_err("gguf writer: %s", "NULL writer");
    bbuf b = {0};
    bput_u32(&b, t);
    bput(&b, v, cgguf_scalar_size(t));
    return set_value(w, key, &b);
}

candle_status candle_gguf_writer_set_alignment(candle_gguf_writer *w, size_t alignment) {
    if (!w) return arg_err("gguf writer: %s", "NULL writer");
    if (alignment == 0 || (alignment & (alignment - 1)) || alignment > UINT32_MAX)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "gguf writer: alignment %zu is not a power of two", alignment);
    uint32_t a = (uint32_t)alignment;
    candle_status s = set_scalar(w, "general.alignment", CANDLE_GGUF_UINT32, &a);
    if (!s) w->alignment = alignment;
    return s;
}

candle_status candle_gguf_writer_set_u32(candle_gguf_writer *w, const char *key, uint32_t v) {
    if (key && !strcmp(key, "general.alignment")) return candle_gguf_writer_set_alignment(w, v);
    return set_scalar(w, key, CANDLE_GGUF_UINT32, &v);
}

static bool is_alignment(const char *key) { return key && !strcmp(key, "general.alignment"); }

static candle_status alignment_type_err(void) {
    return arg_err("gguf writer: %s must be a u32", "general.alignment");
}

candle_status candle_gguf_writer_set_i32(candle_gguf_writer *w, const char *key, int32_t v) {
    if (is_alignment(key)) return alignment_type_err();
    return set_scalar(w, key, CANDLE_GGUF_INT32, &v);
}

candle_status candle_gguf_writer_set_f32(candle_gguf_writer *w, const char *key, float v) {
    if (is_alignment(key)) return alignment_type_err();
    return set_scalar(w, key, CANDLE_GGUF_FLOAT32, &v);
}

candle_status candle_gguf_writer_set_bool(candle_gguf_writer *w, const char *key, bool v) {
    if (is_alignment(key)) return alignment_type_err();
    uint8_t u = v ? 1 : 0;
    return set_scalar(w, key, CANDLE_GGUF_BOOL, &u);
}

candle_status candle_gguf_writer_set_str(candle_gguf_writer *w, const char *key, const char *v) {
    if (!w || !v) return arg_err("gguf writer: %s", "NULL argument");
    if (is_alignment(key)) return alignment_type_err();
    bbuf b = {0};
    bput_u32(&b, CANDLE_GGUF_STRING);
    bput_str(&b, v, strlen(v));
    return set_value(w, key, &b);
}

candle_status candle_gguf_writer_set_arr(candle_gguf_writer *w, const char *key,
                                         candle_gguf_type elem_type, const void *data, int64_t n) {
    if (!w || n < 0 || (n > 0 && !data)) return arg_err("gguf writer: %s", "bad array argument");
    if (is_alignment(key)) return alignment_type_err();
    size_t esz = cgguf_scalar_size(elem_type);
    if (!esz && elem_type != CANDLE_GGUF_STRING)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "gguf writer: arrays of %s are not supported",
                                cgguf_type_name(elem_type));
    bbuf b = {0};
    bput_u32(&b, CANDLE_GGUF_ARRAY);
    bput_u32(&b, elem_type);
    bput_u64(&b, (uint64_t)n);
    if (esz) {
        if ((uint64_t)n > SIZE_MAX / esz) b.oom = true;
        else bput(&b, data, (size_t)n * esz);
    } else {
        const char *const *strs = data;
        for (int64_t i = 0; i < n; i++) {
            if (!strs[i]) {
                free(b.p);
                return arg_err("gguf writer: %s", "NULL string in array");
            }
            bput_str(&b, strs[i], strlen(strs[i]));
        }
    }
    return set_value(w, key, &b);
}

candle_status candle_gguf_writer_copy_kv(candle_gguf_writer *w, const candle_gguf *src) {
    if (!w || !src) return arg_err("gguf writer: %s", "NULL argument");
    for (int64_t i = 0; i < src->n_kv; i++) {
        const gguf_kv *kv = &src->kv[i];
        candle_status s;
        if (is_alignment(kv->key)) {
            s = candle_gguf_writer_set_alignment(w, src->alignment);
        } else {
            bbuf b = {0};
            bput(&b, kv->raw, kv->raw_size);
            s = set_value(w, kv->key, &b);
        }
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status check_tensor(const candle_gguf_writer *w, const char *name,
                                  candle_dtype dtype, int rank, const int64_t *shape) {
    if (!name || !name[0] || strlen(name) > WRITER_MAX_NAME)
        return arg_err("gguf writer: tensor name '%.80s' empty or longer than 63 bytes",
                       name ? name : "(null)");
    if (index_get(&w->t_index, name) >= 0) return arg_err("gguf writer: duplicate tensor '%s'", name);
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    if (!tr || tr->gguf_id < 0)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "gguf writer: tensor '%s': dtype %s has no GGUF type", name,
                                candle_dtype_name(dtype));
    if (rank < 0 || rank > CANDLE_MAX_RANK || (rank > 0 && !shape))
        return arg_err("gguf writer: tensor '%s': bad rank", name);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0) return arg_err("gguf writer: tensor '%s': negative dimension", name);
    if (tr->block_size > 1 && (rank == 0 || shape[rank - 1] % tr->block_size))
        return cdl_set_error(NULL, CANDLE_ERR_SHAPE,
                                "gguf writer: tensor '%s': innermost dimension not a multiple of "
                                "the %s block size %" PRId64, name, tr->name, tr->block_size);
    return CANDLE_OK;
}

/* Bytes of a tensor, or SIZE_MAX on overflow. */
static size_t tensor_bytes(candle_dtype dtype, int rank, const int64_t *shape) {
    const candle_dtype_traits *tr = candle_dtype_info(dtype);
    if (rank == 0) return tr->type_size;
    size_t n = candle_dtype_row_size(dtype, shape[rank - 1]);
    for (int d = 0; d < rank - 1; d++)
        if (__builtin_mul_overflow(n, (size_t)shape[d], &n)) return SIZE_MAX;
    return n;
}

candle_status candle_gguf_writer_add_tensor(candle_gguf_writer *w, const char *name,
                                            candle_dtype dtype, int rank, const int64_t *shape,
                                            const void *data) {
    if (!w) return arg_err("gguf writer: %s", "NULL writer");
    candle_status s = check_tensor(w, name, dtype, rank, shape);
    if (s) return s;
    size_t size = tensor_bytes(dtype, rank, shape);
    if (size == SIZE_MAX) return arg_err("gguf writer: tensor '%s': size overflows", name);
    if (size && !data) return arg_err("gguf writer: tensor '%s': NULL data", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf tensor list");
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)) || !index_put(&w->t_index, t->name, w->n_t)) {
        free(t->name);
        t->name = NULL;
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf tensor name");
    }
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->shape[d] = shape[d];
    t->data = data;
    t->size = size;
    w->n_t++;
    return CANDLE_OK;
}

static size_t pad_to(size_t n, size_t a) { return (a - n % a) % a; }

/* Header, metadata and tensor infos (offsets relative to the data start). */
static void build_header(const candle_gguf_writer *w, bbuf *b) {
    bput(b, GGUF_MAGIC, 4);
    bput_u32(b, 3);
    bput_u64(b, (uint64_t)w->n_t);
    bput_u64(b, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        bput_str(b, w->kv[i].key, strlen(w->kv[i].key));
        bput(b, w->kv[i].val, w->kv[i].size);
    }
    size_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        bput_str(b, t->name, strlen(t->name));
        /* GGUF has no rank-0 tensors: a scalar is stored as [1] */
        bput_u32(b, t->rank ? (uint32_t)t->rank : 1);
        if (!t->rank) bput_u64(b, 1);
        for (int d = t->rank - 1; d >= 0; d--) bput_u64(b, (uint64_t)t->shape[d]);
        bput_u32(b, (uint32_t)candle_dtype_info(t->dtype)->gguf_id);
        bput_u64(b, off);
        off += t->size + pad_to(t->size, w->alignment);
    }
    /* Without tensors there is no data section to align (and a huge
     * alignment would otherwise pad the file up to it). */
    static const uint8_t zeros[64];
    size_t pad = w->n_t ? pad_to(b->n, w->alignment) : 0;
    while (pad) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        bput(b, zeros, k);
        pad -= k;
    }
}

candle_status candle_gguf_writer_write_memory(candle_gguf_writer *w, void **data, size_t *size) {
    if (!w || !data || !size) return arg_err("gguf writer: %s", "NULL argument");
    *data = NULL;
    *size = 0;
    bbuf b = {0};
    build_header(w, &b);
    static const uint8_t zeros[64];
    for (int64_t i = 0; i < w->n_t; i++) {
        bput(&b, w->t[i].data, w->t[i].size);
        for (size_t pad = pad_to(w->t[i].size, w->alignment); pad;) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            bput(&b, zeros, k);
            pad -= k;
        }
    }
    if (b.oom) {
        free(b.p);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf image");
    }
    *data = b.p;
    *size = b.n;
    return CANDLE_OK;
}

static bool write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n; }

static bool write_data(const candle_gguf_writer *w, FILE *f) {
    static const uint8_t zeros[64];
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->size && !write_all(f, t->data, t->size)) return false;
        for (size_t pad = pad_to(t->size, w->alignment); pad;) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            if (!write_all(f, zeros, k)) return false;
            pad -= k;
        }
    }
    return true;
}

/* Written to a new temporary beside PATH and renamed (core/file_out.c), so
 * a failed write never leaves a truncated file under the real name and a
 * symlink planted in the directory is never written through. */
candle_status candle_gguf_writer_write(candle_gguf_writer *w, const char *path) {
    if (!w || !path) return arg_err("gguf writer: %s", "NULL argument");
    bbuf b = {0};
    build_header(w, &b);
    if (b.oom) {
        free(b.p);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf header");
    }
    cdl_out_file o;
    candle_status s = cdl_out_file_open(&o, path, "gguf writer");
    if (!s) {
        bool ok = write_all(o.f, b.p, b.n) && write_data(w, o.f);
        s = cdl_out_file_commit(&o, ok, "gguf writer");
    }
    free(b.p);
    return s;
}
