/* whisper.cpp ggml file reader: see include/candle/ggml_whisper.h for the
 * layout.
 *
 * Every count, length and size read from the file is checked against the
 * bytes left before it is used, in 64-bit arithmetic that cannot wrap (each
 * factor is bounded first), so a lying header costs no allocation beyond
 * the file's own size. The tables keep offsets so the image can be swapped
 * for a loaded copy after validation (no_mmap); tensor names are copied
 * once into one pool (the file does not terminate them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/ggml_whisper.h"
#include "core/core-impl.h"
#include "image-impl.h"

static const char *const FMT = "ggml";

typedef struct gw_token {
    size_t off, len;
} gw_token;

struct candle_ggml_whisper {
    char *name;
    candle_storage *storage;
    const uint8_t *base;
    size_t size;
    candle_ggml_whisper_hparams hp;
    int32_t n_mel, n_fft;
    size_t mel_off;
    gw_token *tokens;
    int64_t n_tokens;
    candle_ggml_whisper_tensor_info *tensors;
    int64_t n_tensors, cap_tensors;
    char *names; /* every tensor's name, NUL-terminated, back to back */
    size_t names_len, names_cap;
    size_t *name_at; /* tensor i's name offset in names */
    int64_t *sorted; /* tensor indices by name */
};

/* ---- a bounds-checked cursor ---- */
typedef struct cur {
    const candle_ggml_whisper *m;
    size_t pos;
    const char *where; /* the tensor or field being read, for messages */
} cur;

static candle_status ferr(const cur *c, const char *problem) {
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s: %s (at byte %zu)", c->m->name, c->where,
                         problem, c->pos);
}

static size_t left(const cur *c) { return c->m->size - c->pos; }

static candle_status take_u32(cur *c, uint32_t *v) {
    *v = 0;
    if (left(c) < 4) return ferr(c, "truncated");
    const uint8_t *b = c->m->base + c->pos;
    *v = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    c->pos += 4;
    return CANDLE_OK;
}

static candle_status take_i32(cur *c, int32_t *v) {
    uint32_t u;
    candle_status r = take_u32(c, &u);
    *v = (int32_t)u; /* two's complement, as the writers pack "i" */
    return r;
}

static candle_status oom(const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: ggml %s", what);
}

/* ---- ggml types ---- */
static const char *const GGML_NAMES[] = {
    "f32",     "f16",    "q4_0",    "q4_1",  "q4_2",  "q4_3",   "q5_0",    "q5_1",   "q8_0",
    "q8_1",    "q2_k",   "q3_k",    "q4_k",  "q5_k",  "q6_k",   "q8_k",    "iq2_xxs", "iq2_xs",
    "iq3_xxs", "iq1_s",  "iq4_nl",  "iq3_s", "iq2_s", "iq4_xs", "i8",      "i16",    "i32",
    "i64",     "f64",    "iq1_m",   "bf16",  "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0",
    "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4", "nvfp4", "q1_0", "q2_0",
};

const char *candle_ggml_type_name(int t) {
    return t >= 0 && (size_t)t < sizeof GGML_NAMES / sizeof *GGML_NAMES ? GGML_NAMES[t] : "?";
}

/* Candle's dtype for a ggml type id a weights file may hold (GGUF shares
 * the ids), else CANDLE_DTYPE_COUNT. */
static candle_dtype stored_dtype(int32_t t) {
    candle_dtype d = candle_dtype_from_gguf(t);
    switch (d) {
    case CANDLE_DTYPE_I8: case CANDLE_DTYPE_I32: case CANDLE_DTYPE_I64: case CANDLE_DTYPE_U8:
    case CANDLE_DTYPE_BOOL:
        return CANDLE_DTYPE_COUNT; /* no Whisper weight is an integer */
    default: return d;
    }
}

/* ---- the header, filters and vocabulary ---- */
static candle_status read_hparams(cur *c) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)c->m;
    static const char *const NAMES[11] = {
        "hparams.n_vocab",      "hparams.n_audio_ctx", "hparams.n_audio_state",
        "hparams.n_audio_head", "hparams.n_audio_layer", "hparams.n_text_ctx",
        "hparams.n_text_state", "hparams.n_text_head", "hparams.n_text_layer",
        "hparams.n_mels",       "hparams.ftype"};
    int32_t *f[11] = {&m->hp.n_vocab,      &m->hp.n_audio_ctx, &m->hp.n_audio_state,
                      &m->hp.n_audio_head, &m->hp.n_audio_layer, &m->hp.n_text_ctx,
                      &m->hp.n_text_state, &m->hp.n_text_head, &m->hp.n_text_layer,
                      &m->hp.n_mels,       &m->hp.ftype};
    for (int i = 0; i < 11; i++) {
        c->where = NAMES[i];
        candle_status r = take_i32(c, f[i]);
        if (r) return r;
        if (i < 10 && *f[i] <= 0) {
            c->pos -= 4;
            return ferr(c, "must be positive");
        }
        if (i == 10 && *f[i] < 0) {
            c->pos -= 4;
            return ferr(c, "negative");
        }
    }
    return CANDLE_OK;
}

static candle_status read_filters(cur *c) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)c->m;
    c->where = "mel filters.n_mel";
    candle_status r = take_i32(c, &m->n_mel);
    if (!r && m->n_mel < 0) return c->pos -= 4, ferr(c, "negative");
    c->where = "mel filters.n_fft";
    if (!r) r = take_i32(c, &m->n_fft);
    if (!r && m->n_fft < 0) return c->pos -= 4, ferr(c, "negative");
    if (r) return r;
    c->where = "mel filters";
    /* both below 2^31: the product of bytes fits in 64 bits */
    uint64_t bytes = (uint64_t)m->n_mel * (uint64_t)m->n_fft * 4u;
    if (bytes > left(c)) return ferr(c, "n_mel x n_fft floats run past the end of the file");
    m->mel_off = c->pos;
    c->pos += (size_t)bytes;
    return CANDLE_OK;
}

static candle_status read_vocab(cur *c) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)c->m;
    int32_t n;
    c->where = "vocabulary count";
    candle_status r = take_i32(c, &n);
    if (r) return r;
    if (n < 0) return c->pos -= 4, ferr(c, "negative");
    if ((uint64_t)n > left(c) / 4) return c->pos -= 4, ferr(c, "more tokens than the file can hold");
    m->tokens = calloc(n ? (size_t)n : 1, sizeof *m->tokens);
    if (!m->tokens) return oom("vocabulary");
    c->where = "vocabulary token";
    for (int32_t i = 0; i < n; i++) {
        uint32_t len;
        if ((r = take_u32(c, &len))) return r;
        if (len > left(c)) return c->pos -= 4, ferr(c, "token bytes run past the end of the file");
        m->tokens[i] = (gw_token){c->pos, len};
        c->pos += len;
        m->n_tokens = i + 1;
    }
    return CANDLE_OK;
}

/* ---- tensors ---- */
static candle_status add_name(candle_ggml_whisper *m, const uint8_t *s, size_t len) {
    if (m->names_len + len + 1 > m->names_cap) {
        size_t cap = m->names_cap ? m->names_cap : 4096;
        while (cap < m->names_len + len + 1) cap *= 2;
        char *p = realloc(m->names, cap);
        if (!p) return oom("tensor names");
        m->names = p;
        m->names_cap = cap;
    }
    memcpy(m->names + m->names_len, s, len);
    m->names[m->names_len + len] = 0;
    m->name_at[m->n_tensors] = m->names_len;
    m->names_len += len + 1;
    return CANDLE_OK;
}

static candle_status grow_tensors(candle_ggml_whisper *m) {
    if (m->n_tensors < m->cap_tensors) return CANDLE_OK;
    int64_t cap = m->cap_tensors ? 2 * m->cap_tensors : 64;
    candle_ggml_whisper_tensor_info *t = realloc(m->tensors, (size_t)cap * sizeof *t);
    if (t) m->tensors = t;
    size_t *a = t ? realloc(m->name_at, (size_t)cap * sizeof *a) : NULL;
    if (a) m->name_at = a;
    if (!t || !a) return oom("tensor table");
    m->cap_tensors = cap;
    return CANDLE_OK;
}

static candle_status read_tensor(cur *c) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)c->m;
    candle_status r = grow_tensors(m);
    if (r) return r;
    candle_ggml_whisper_tensor_info *v = &m->tensors[m->n_tensors];
    memset(v, 0, sizeof *v);
    int32_t n_dims, len, type;
    c->where = "tensor header";
    size_t start = c->pos;
    if ((r = take_i32(c, &n_dims)) || (r = take_i32(c, &len)) || (r = take_i32(c, &type))) return r;
    if (n_dims < 1 || n_dims > CANDLE_GGML_WHISPER_MAX_DIMS)
        return c->pos = start, ferr(c, "n_dims not in 1..4");
    if (len < 1) return c->pos = start + 4, ferr(c, "empty tensor name");
    int32_t ne[CANDLE_GGML_WHISPER_MAX_DIMS];
    c->where = "tensor dims";
    for (int i = 0; i < n_dims; i++) {
        if ((r = take_i32(c, &ne[i]))) return r;
        if (ne[i] < 1) return c->pos -= 4, ferr(c, "dimension not positive");
    }
    c->where = "tensor name";
    if ((uint32_t)len > left(c)) return ferr(c, "name runs past the end of the file");
    const uint8_t *s = m->base + c->pos;
    if (memchr(s, 0, (size_t)len)) return ferr(c, "name holds a NUL");
    if ((r = add_name(m, s, (size_t)len))) return r;
    c->pos += (size_t)len;
    c->where = m->names + m->name_at[m->n_tensors];
    candle_dtype d = stored_dtype(type);
    if (d == CANDLE_DTYPE_COUNT) {
        char msg[96];
        snprintf(msg, sizeof msg, "ggml type %d (%s) is not one Candle reads", type,
                 candle_ggml_type_name(type));
        return c->pos = start + 8, ferr(c, msg);
    }
    const candle_dtype_traits *dt = candle_dtype_info(d);
    if (ne[0] % dt->block_size) {
        char msg[96];
        snprintf(msg, sizeof msg, "row of %d elements is not a whole number of %s blocks (%lld)",
                 ne[0], candle_dtype_name(d), (long long)dt->block_size);
        return c->pos = start + 12, ferr(c, msg);
    }
    /* each factor is below 2^31 and checked against the bytes left before
     * the next multiplies it, so nothing wraps */
    uint64_t bytes = (uint64_t)(ne[0] / dt->block_size) * dt->type_size;
    for (int i = 1; i < n_dims && bytes <= left(c); i++) bytes *= (uint64_t)ne[i];
    if (bytes > left(c)) return ferr(c, "data runs past the end of the file");
    v->ggml_type = type;
    v->dtype = d;
    v->rank = n_dims;
    for (int i = 0; i < n_dims; i++) v->shape[i] = ne[n_dims - 1 - i];
    v->offset = c->pos;
    v->size = (size_t)bytes;
    c->pos += (size_t)bytes;
    m->n_tensors++;
    return CANDLE_OK;
}

static _Thread_local const candle_ggml_whisper *g_sort_m; /* qsort has no context argument */

static const char *tname(const candle_ggml_whisper *m, int64_t i) { return m->names + m->name_at[i]; }

static int name_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    int d = strcmp(tname(g_sort_m, x), tname(g_sort_m, y));
    return d ? d : (x > y) - (x < y);
}

static candle_status read_tensors(cur *c) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)c->m;
    while (left(c)) {
        candle_status r = read_tensor(c);
        if (r) return r;
    }
    m->sorted = calloc(m->n_tensors ? (size_t)m->n_tensors : 1, sizeof *m->sorted);
    if (!m->sorted) return oom("tensor index");
    for (int64_t i = 0; i < m->n_tensors; i++) m->sorted[i] = i;
    g_sort_m = m;
    qsort(m->sorted, (size_t)m->n_tensors, sizeof *m->sorted, name_cmp);
    for (int64_t i = 1; i < m->n_tensors; i++)
        if (!strcmp(tname(m, m->sorted[i]), tname(m, m->sorted[i - 1]))) {
            c->where = tname(m, m->sorted[i]);
            c->pos = m->tensors[m->sorted[i]].offset;
            return ferr(c, "tensor name appears twice");
        }
    return CANDLE_OK;
}

static candle_status parse(candle_ggml_whisper *m) {
    cur c = {m, 0, "magic"};
    uint32_t magic;
    candle_status r = take_u32(&c, &magic);
    if (r) return r;
    if (magic != CANDLE_GGML_WHISPER_MAGIC) {
        c.pos = 0;
        return ferr(&c, "not a whisper.cpp ggml file (bad magic)");
    }
    if ((r = read_hparams(&c)) || (r = read_filters(&c)) || (r = read_vocab(&c))) return r;
    return read_tensors(&c);
}

/* Names and data pointers from the offsets, for the current image. */
static void bind(candle_ggml_whisper *m) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        m->tensors[i].data = m->base + m->tensors[i].offset;
        m->tensors[i].name = tname(m, i);
    }
}

void candle_ggml_whisper_close(candle_ggml_whisper *m) {
    if (!m) return;
    free(m->tokens);
    free(m->tensors);
    free(m->names);
    free(m->name_at);
    free(m->sorted);
    candle_storage_release(m->storage);
    free(m->name);
    free(m);
}

/* Takes over the reference to s; name is copied. */
static candle_status open_storage(candle_ggml_whisper **out, candle_storage *s, const char *name) {
    candle_ggml_whisper *m = calloc(1, sizeof *m);
    if (m) m->name = strdup(name);
    if (!m || !m->name) {
        free(m);
        candle_storage_release(s);
        return oom("handle");
    }
    m->storage = s;
    m->base = s->data;
    m->size = s->size;
    candle_status r = parse(m);
    if (r) {
        candle_ggml_whisper_close(m);
        return r;
    }
    bind(m);
    *out = m;
    return CANDLE_OK;
}

static candle_status parse_image(void **handle, candle_storage *s, const char *name) {
    candle_ggml_whisper *m = NULL;
    candle_status r = open_storage(&m, s, name);
    *handle = m;
    return r;
}

static void close_image(void *handle) { candle_ggml_whisper_close(handle); }

candle_status candle_ggml_whisper_open(candle_ggml_whisper **out, const char *path,
                                       const candle_ggml_whisper_open_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "ggml: open: NULL argument");
    void *h = NULL;
    candle_status r = cimage_load(FMT, path, p && p->no_mmap, parse_image, close_image, &h);
    *out = h;
    return r;
}

candle_status candle_ggml_whisper_open_memory(candle_ggml_whisper **out, const void *data,
                                              size_t size, const char *name) {
    if (!out || (!data && size))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "ggml: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    candle_storage *s = candle_storage_external((void *)(data ? data : empty), size);
    if (!s) return candle_last_error();
    return open_storage(out, s, name ? name : FMT);
}

bool candle_ggml_whisper_probe(const void *head, size_t n) {
    const uint8_t *b = head;
    if (!b || n < 48) return false;
    for (int i = 0; i < 11; i++) {
        const uint8_t *p = b + 4 * i;
        uint32_t v = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (i == 0 && v != CANDLE_GGML_WHISPER_MAGIC) return false;
        if (i > 0 && ((int32_t)v <= 0 || v > (1u << 24))) return false;
    }
    return true;
}

const candle_ggml_whisper_hparams *candle_ggml_whisper_get_hparams(const candle_ggml_whisper *m) {
    return m ? &m->hp : NULL;
}
size_t candle_ggml_whisper_file_size(const candle_ggml_whisper *m) { return m ? m->size : 0; }
candle_storage *candle_ggml_whisper_storage(const candle_ggml_whisper *m) {
    return m ? m->storage : NULL;
}

const void *candle_ggml_whisper_mel_filters(const candle_ggml_whisper *m, int32_t *n_mel,
                                            int32_t *n_fft) {
    if (n_mel) *n_mel = m ? m->n_mel : 0;
    if (n_fft) *n_fft = m ? m->n_fft : 0;
    return m && m->n_mel && m->n_fft ? m->base + m->mel_off : NULL;
}

int64_t candle_ggml_whisper_n_tokens(const candle_ggml_whisper *m) { return m ? m->n_tokens : 0; }

bool candle_ggml_whisper_token(const candle_ggml_whisper *m, int64_t i, const char **bytes,
                               size_t *len) {
    if (!m || i < 0 || i >= m->n_tokens) return false;
    if (bytes) *bytes = (const char *)m->base + m->tokens[i].off;
    if (len) *len = m->tokens[i].len;
    return true;
}

int64_t candle_ggml_whisper_n_tensors(const candle_ggml_whisper *m) { return m ? m->n_tensors : 0; }

const candle_ggml_whisper_tensor_info *candle_ggml_whisper_tensor(const candle_ggml_whisper *m,
                                                                  int64_t i) {
    return m && i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

int64_t candle_ggml_whisper_find_tensor(const candle_ggml_whisper *m, const char *name) {
    if (!m || !name) return -1;
    int64_t lo = 0, hi = m->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (strcmp(tname(m, m->sorted[mid]), name) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n_tensors && !strcmp(tname(m, m->sorted[lo]), name) ? m->sorted[lo] : -1;
}

/* A copy on the host (staged for a device). */
static candle_tensor *load_copy(const candle_ggml_whisper *m, candle_ctx *ctx,
                                const candle_ggml_whisper_tensor_info *v) {
    candle_tensor *t = candle_tensor_new(ctx, v->dtype, v->rank, v->shape);
    if (!t) return NULL;
    size_t bytes = candle_tensor_nbytes(t);
    bool host = candle_tensor_is_host(t);
    uint8_t *p = host ? candle_tensor_data(t) : malloc(bytes ? bytes : 1);
    if (!p) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: %s: tensor '%s': staging %zu bytes",
                      m->name, v->name, bytes);
        return NULL;
    }
    memcpy(p, v->data, bytes);
    candle_status s = host ? CANDLE_OK : candle_tensor_set_bytes(t, 0, p, bytes);
    if (!host) free(p);
    return s ? NULL : t;
}

candle_tensor *candle_ggml_whisper_load_tensor(const candle_ggml_whisper *m, candle_ctx *ctx,
                                               const char *name) {
    if (!ctx) return NULL;
    if (!m || !name) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "ggml: load_tensor: NULL argument");
        return NULL;
    }
    int64_t i = candle_ggml_whisper_find_tensor(m, name);
    if (i < 0) {
        cdl_set_error(ctx, CANDLE_ERR_FORMAT, "%s: tensor '%s': not found", m->name, name);
        return NULL;
    }
    const candle_ggml_whisper_tensor_info *v = &m->tensors[i];
    /* kernels read through typed pointers, and the format packs tensors at
     * any byte: view only what is aligned as GGUF aligns its data (32) */
    bool view = (uintptr_t)v->data % 32 == 0;
    candle_tensor *t = view ? candle_tensor_from_storage(ctx, v->dtype, v->rank, v->shape,
                                                         m->storage, v->offset)
                            : load_copy(m, ctx, v);
    if (t) candle_tensor_set_name(t, name);
    return t;
}
