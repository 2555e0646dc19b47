/* GGUF parsing: every count, length, type id, offset and size is checked
 * against the bytes that are really there before it is used, and nothing is
 * allocated in proportion to a count before the count is shown to fit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf-impl.h"

/* Smallest encodings, used to reject counts that cannot fit in the file. */
#define MIN_KV_BYTES 13     /* key length, 1-byte key, type, 1-byte value */
#define MIN_TENSOR_BYTES 24 /* name length, n_dims, type, offset */

typedef struct rd {
    const uint8_t *p;
    size_t size;
    size_t off;
} rd;

static candle_status ferr(size_t off, const char *field, const char *fmt, ...)
    CANDLE_PRINTF(3, 4);

static candle_status ferr(size_t off, const char *field, const char *fmt, ...) {
    char problem[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "gguf: %s: %s at offset %zu", field,
                            problem, off);
}

static candle_status oom(const char *what, size_t bytes) {
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf %s (%zu bytes)", what,
                            bytes);
}

static size_t left(const rd *r) { return r->size - r->off; }

static candle_status need(const rd *r, size_t n, const char *field) {
    if (n > left(r))
        return ferr(r->off, field, "truncated (needs %zu bytes, %zu left)", n, left(r));
    return CANDLE_OK;
}

/* Readers zero their output first so no path leaves it uninitialised. */
static candle_status rd_u32(rd *r, const char *field, uint32_t *v) {
    *v = 0;
    candle_status s = need(r, 4, field);
    if (s) return s;
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return CANDLE_OK;
}

static candle_status rd_u64(rd *r, const char *field, uint64_t *v) {
    *v = 0;
    candle_status s = need(r, 8, field);
    if (s) return s;
    memcpy(v, r->p + r->off, 8);
    r->off += 8;
    return CANDLE_OK;
}

static candle_status rd_str(rd *r, const char *field, const uint8_t **str, uint64_t *len) {
    size_t at = r->off;
    *str = NULL;
    candle_status s = rd_u64(r, field, len);
    if (s) return s;
    if (*len > left(r))
        return ferr(at, field, "string length %" PRIu64 " exceeds the %zu bytes left", *len,
                    left(r));
    *str = r->p + r->off;
    r->off += (size_t)*len;
    return CANDLE_OK;
}

size_t cgguf_scalar_size(uint32_t type) {
    switch (type) {
    case CANDLE_GGUF_UINT8:
    case CANDLE_GGUF_INT8:
    case CANDLE_GGUF_BOOL: return 1;
    case CANDLE_GGUF_UINT16:
    case CANDLE_GGUF_INT16: return 2;
    case CANDLE_GGUF_UINT32:
    case CANDLE_GGUF_INT32:
    case CANDLE_GGUF_FLOAT32: return 4;
    case CANDLE_GGUF_UINT64:
    case CANDLE_GGUF_INT64:
    case CANDLE_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *candle_gguf_type_name(candle_gguf_type t) { return cgguf_type_name((uint32_t)t); }

const char *cgguf_type_name(uint32_t type) {
    static const char *names[] = {"u8",  "i8",  "u16", "i16", "u32", "i32", "f32",
                                  "bool", "str", "arr", "u64", "i64", "f64"};
    _Static_assert(sizeof names / sizeof names[0] == CANDLE_GGUF_TYPE_COUNT,
                   "gguf type names out of date");
    return type < CANDLE_GGUF_TYPE_COUNT ? names[type] : "invalid";
}

static candle_status skip_value(rd *r, const char *field, uint32_t type, int depth);

static candle_status check_bools(const rd *r, const char *field, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (r->p[r->off + i] > 1)
            return ferr(r->off + i, field, "bool value %u is not 0 or 1", r->p[r->off + i]);
    return CANDLE_OK;
}

/* The elements of an array whose element type and count were just read. */
static candle_status skip_elems(rd *r, const char *field, uint32_t et, uint64_t n, int depth,
                                size_t et_off) {
    size_t esz = cgguf_scalar_size(et);
    if (esz) {
        if (n > left(r) / esz)
            return ferr(r->off, field, "%" PRIu64 " %s elements exceed the %zu bytes left", n,
                        cgguf_type_name(et), left(r));
        candle_status s = et == CANDLE_GGUF_BOOL ? check_bools(r, field, n) : CANDLE_OK;
        r->off += (size_t)n * esz;
        return s;
    }
    if (et != CANDLE_GGUF_STRING && et != CANDLE_GGUF_ARRAY)
        return ferr(et_off, field, "unknown array element type %" PRIu32, et);
    size_t min = et == CANDLE_GGUF_STRING ? 8 : 12;
    if (n > left(r) / min)
        return ferr(r->off, field, "%" PRIu64 " %s elements cannot fit in the %zu bytes left", n,
                    cgguf_type_name(et), left(r));
    for (uint64_t i = 0; i < n; i++) {
        candle_status s = skip_value(r, field, et, depth);
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status skip_value(rd *r, const char *field, uint32_t type, int depth) {
    size_t at = r->off;
    size_t sz = cgguf_scalar_size(type);
    if (sz) {
        candle_status s = need(r, sz, field);
        if (s) return s;
        if (type == CANDLE_GGUF_BOOL && r->p[at] > 1)
            return ferr(at, field, "bool value %u is not 0 or 1", r->p[at]);
        r->off += sz;
        return CANDLE_OK;
    }
    if (type == CANDLE_GGUF_STRING) {
        const uint8_t *str;
        uint64_t len;
        return rd_str(r, field, &str, &len);
    }
    if (type != CANDLE_GGUF_ARRAY) return ferr(at, field, "unknown value type %" PRIu32, type);
    if (depth >= GGUF_MAX_DEPTH)
        return ferr(at, field, "arrays nested deeper than %d", GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t n;
    candle_status s = rd_u32(r, field, &et);
    if (!s) s = rd_u64(r, field, &n);
    return s ? s : skip_elems(r, field, et, n, depth + 1, at);
}

/* Index string elements and realign misaligned numeric payloads, so the
 * accessors are O(1) and may hand out typed pointers. */
static candle_status index_array(gguf_kv *kv) {
    size_t esz = cgguf_scalar_size(kv->elem_type);
    if (kv->elem_type == CANDLE_GGUF_STRING && kv->n > 0) {
        /* n <= val_size / 8 was checked while parsing */
        kv->str_off = malloc((size_t)kv->n * sizeof *kv->str_off);
        if (!kv->str_off) return oom("string array index", (size_t)kv->n * sizeof(size_t));
        size_t off = 0;
        for (uint64_t i = 0; i < kv->n; i++) {
            uint64_t len;
            kv->str_off[i] = off;
            memcpy(&len, kv->val + off, 8);
            off += 8 + (size_t)len;
        }
    } else if (esz > 1 && kv->n > 0 && (uintptr_t)kv->val % esz) {
        kv->aligned = malloc(kv->val_size);
        if (!kv->aligned) return oom("array copy", kv->val_size);
        memcpy(kv->aligned, kv->val, kv->val_size);
    }
    return CANDLE_OK;
}

/* A key or tensor name: non-empty, at most max bytes, no NUL; copied out
 * NUL-terminated. `what` names it in messages ("key", "name"). */
static candle_status rd_name(rd *r, const char *field, const char *what, int max,
                             const char *oom_what, char **out) {
    size_t at = r->off;
    const uint8_t *k;
    uint64_t len;
    candle_status s = rd_str(r, field, &k, &len);
    if (s) return s;
    if (len == 0) return ferr(at, field, "empty %s", what);
    if (len > (uint64_t)max) return ferr(at, field, "length %" PRIu64 " exceeds %d", len, max);
    if (memchr(k, 0, (size_t)len)) return ferr(at, field, "contains a NUL byte");
    char *name = malloc((size_t)len + 1);
    if (!name) return oom(oom_what, (size_t)len + 1);
    memcpy(name, k, (size_t)len);
    name[len] = 0;
    *out = name;
    return CANDLE_OK;
}

static candle_status rd_key(rd *r, int64_t i, gguf_kv *kv) {
    char field[64];
    snprintf(field, sizeof field, "kv[%" PRId64 "] key", i);
    kv->off = r->off;
    return rd_name(r, field, "key", GGUF_MAX_KEY_LEN, "key", &kv->key);
}

static candle_status parse_kv(rd *r, int64_t i, gguf_kv *kv) {
    candle_status s = rd_key(r, i, kv);
    if (s) return s;
    char field[96];
    snprintf(field, sizeof field, "kv '%.64s' value", kv->key);
    size_t at = r->off;
    uint32_t type;
    if ((s = rd_u32(r, field, &type))) return s;
    if (type >= CANDLE_GGUF_TYPE_COUNT)
        return ferr(at, field, "unknown value type %" PRIu32, type);
    kv->type = (candle_gguf_type)type;
    if (type == CANDLE_GGUF_ARRAY) {
        uint32_t et;
        size_t et_off = r->off;
        if ((s = rd_u32(r, field, &et)) || (s = rd_u64(r, field, &kv->n))) return s;
        kv->val = r->p + r->off;
        if ((s = skip_elems(r, field, et, kv->n, 1, et_off))) return s;
        kv->elem_type = (candle_gguf_type)et;
        kv->val_size = (size_t)(r->p + r->off - kv->val);
        if ((s = index_array(kv))) return s;
    } else if (type == CANDLE_GGUF_STRING) {
        if ((s = rd_str(r, field, &kv->val, &kv->n))) return s;
        kv->val_size = (size_t)kv->n;
    } else {
        kv->val = r->p + r->off;
        kv->val_size = cgguf_scalar_size(type);
        if ((s = skip_value(r, field, type, 0))) return s;
    }
    kv->raw = r->p + at;
    kv->raw_size = r->off - at;
    return CANDLE_OK;
}

/* Sort names for lookup; returns the index of a duplicated entry or -1. */
static int64_t sort_names(gguf_name_ref *refs, int64_t n) {
    cdl_names_sort(refs, n);
    int64_t dup = -1;
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(refs[i - 1].name, refs[i].name)) {
            int64_t later = refs[i].idx > refs[i - 1].idx ? refs[i].idx : refs[i - 1].idx;
            if (dup < 0 || later < dup) dup = later;
        }
    return dup;
}

/* Grow an array of `have` items to hold one more, doubling, never beyond
 * `max` (a count already checked against the file size). */
static void *grow(void *p, int64_t have, int64_t *cap, int64_t max, size_t item) {
    if (have < *cap) return p;
    int64_t c = *cap ? *cap * 2 : 16;
    if (c > max) c = max;
    void *q = realloc(p, (size_t)c * item);
    if (!q) return NULL;
    memset((char *)q + (size_t)*cap * item, 0, (size_t)(c - *cap) * item);
    *cap = c;
    return q;
}

static candle_status parse_kvs(candle_gguf *g, rd *r, uint64_t n) {
    int64_t cap = 0;
    for (int64_t i = 0; i < (int64_t)n; i++) {
        gguf_kv *kv = grow(g->kv, g->n_kv, &cap, (int64_t)n, sizeof *g->kv);
        if (!kv) return oom("metadata table", (size_t)cap * 2 * sizeof *g->kv);
        g->kv = kv;
        g->n_kv = i + 1;
        candle_status s = parse_kv(r, i, &g->kv[i]);
        if (s) return s;
    }
    if (n == 0) return CANDLE_OK;
    g->kv_sorted = malloc((size_t)n * sizeof *g->kv_sorted);
    if (!g->kv_sorted) return oom("key index", (size_t)n * sizeof *g->kv_sorted);
    for (int64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = (gguf_name_ref){g->kv[i].key, i};
    int64_t dup = sort_names(g->kv_sorted, g->n_kv);
    if (dup >= 0) {
        char field[96];
        snprintf(field, sizeof field, "kv '%.64s' key", g->kv[dup].key);
        return ferr(g->kv[dup].off, field, "duplicate key");
    }
    return CANDLE_OK;
}

static candle_status parse_alignment(candle_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = cdl_names_find(g->kv_sorted, g->n_kv, "general.alignment");
    if (i < 0) return CANDLE_OK;
    const gguf_kv *kv = &g->kv[i];
    size_t at = (size_t)(kv->raw - g->base);
    if (kv->type != CANDLE_GGUF_UINT32)
        return ferr(at, "general.alignment", "type %s, expected u32", cgguf_type_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->val, 4);
    if (a == 0 || (a & (a - 1)))
        return ferr(at, "general.alignment", "%" PRIu32 " is not a power of two", a);
    g->alignment = a;
    return CANDLE_OK;
}

static candle_status rd_tensor_name(rd *r, int64_t i, gguf_tensor *t) {
    char field[64];
    snprintf(field, sizeof field, "tensor[%" PRId64 "] name", i);
    t->name_off = r->off;
    char *name = NULL;
    candle_status s = rd_name(r, field, "name", GGUF_MAX_NAME_LEN, "tensor name", &name);
    t->info.name = name;
    return s;
}

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "the reader assumes a 64-bit size_t");

/* Bytes of a tensor, with every product checked for overflow. Zero dims make
 * an empty tensor, but the other dims must still multiply without overflow. */
static candle_status tensor_size(const char *field, size_t at, candle_gguf_tensor_info *ti) {
    const candle_dtype_traits *tr = candle_dtype_info(ti->dtype);
    uint64_t nonzero = 1, rows = 1;
    for (int d = 0; d < ti->rank; d++) {
        uint64_t ne = (uint64_t)ti->shape[d];
        if (ne && (__builtin_mul_overflow(nonzero, ne, &nonzero) ||
                   nonzero > (uint64_t)INT64_MAX / 8))
            return ferr(at, field, "element count overflows");
        if (d < ti->rank - 1) rows *= ne; /* <= nonzero or 0 */
    }
    if (ti->rank == 0) {
        if (tr->block_size > 1)
            return ferr(at, field, "a %s tensor needs at least one dimension", tr->name);
        ti->size = tr->type_size;
        return CANDLE_OK;
    }
    int64_t inner = ti->shape[ti->rank - 1];
    if (inner % tr->block_size)
        return ferr(at, field, "innermost dimension %" PRId64 " is not a multiple of the %s block "
                    "size %" PRId64, inner, tr->name, tr->block_size);
    uint64_t row = (uint64_t)(inner / tr->block_size), bytes;
    if (__builtin_mul_overflow(row, (uint64_t)tr->type_size, &row) ||
        __builtin_mul_overflow(row, rows, &bytes))
        return ferr(at, field, "byte size overflows");
    ti->size = (size_t)bytes;
    return CANDLE_OK;
}

static candle_status parse_tensor(rd *r, int64_t i, gguf_tensor *t) {
    candle_status s = rd_tensor_name(r, i, t);
    if (s) return s;
    candle_gguf_tensor_info *ti = &t->info;
    char field[96];
    snprintf(field, sizeof field, "tensor '%.64s' n_dims", ti->name);
    size_t at = r->off;
    uint32_t n_dims;
    if ((s = rd_u32(r, field, &n_dims))) return s;
    if (n_dims > CANDLE_MAX_RANK)
        return ferr(at, field, "%" PRIu32 " exceeds %d", n_dims, CANDLE_MAX_RANK);
    ti->rank = (int)n_dims;
    snprintf(field, sizeof field, "tensor '%.64s' dims", ti->name);
    at = r->off;
    for (int d = 0; d < ti->rank; d++) {
        uint64_t ne;
        if ((s = rd_u64(r, field, &ne))) return s;
        if (ne > (uint64_t)INT64_MAX) return ferr(r->off - 8, field, "%" PRIu64 " too large", ne);
        ti->shape[ti->rank - 1 - d] = (int64_t)ne; /* file is innermost-first */
    }
    snprintf(field, sizeof field, "tensor '%.64s' type", ti->name);
    size_t type_at = r->off;
    uint32_t id;
    if ((s = rd_u32(r, field, &id))) return s;
    ti->dtype = id > INT32_MAX ? CANDLE_DTYPE_COUNT : candle_dtype_from_gguf((int)id);
    if (ti->dtype == CANDLE_DTYPE_COUNT)
        return ferr(type_at, field, "unknown ggml type id %" PRIu32, id);
    snprintf(field, sizeof field, "tensor '%.64s' dims", ti->name);
    if ((s = tensor_size(field, at, ti))) return s;
    snprintf(field, sizeof field, "tensor '%.64s' offset", ti->name);
    uint64_t off;
    if ((s = rd_u64(r, field, &off))) return s;
    ti->offset = (size_t)off; /* relative until placed */
    t->field_off = r->off - 8;
    return CANDLE_OK;
}

/* Offsets are relative to the data section, which starts at the first
 * aligned offset after the infos; each tensor must be aligned and inside. */
static candle_status place_tensor(const candle_gguf *g, gguf_tensor *t) {
    candle_gguf_tensor_info *ti = &t->info;
    char field[96];
    snprintf(field, sizeof field, "tensor '%.64s' offset", ti->name);
    size_t rel = ti->offset, end = g->file_size;
    if (rel % g->alignment)
        return ferr(t->field_off, field, "%zu is not a multiple of the alignment %zu", rel,
                    g->alignment);
    if (g->data_offset > end || rel > end - g->data_offset ||
        ti->size > end - g->data_offset - rel)
        return ferr(t->field_off, field,
                    "data (%zu bytes at %zu past the data start %zu) extends past the end of "
                    "the file (%zu bytes)", ti->size, rel, g->data_offset, end);
    ti->offset = g->data_offset + rel;
    return CANDLE_OK;
}

typedef struct {
    size_t off, size;
    int64_t i;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Two tensors sharing bytes would read each other's data as their own: no
 * writer makes such a file, so it is refused, naming both. */
static candle_status check_overlaps(const candle_gguf *g) {
    span *v = malloc((size_t)g->n_tensors * sizeof *v);
    if (!v) return oom("tensor spans", (size_t)g->n_tensors * sizeof *v);
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].info.size)
            v[n++] = (span){g->tensors[i].info.offset, g->tensors[i].info.size, i};
    qsort(v, (size_t)n, sizeof *v, span_cmp);
    candle_status s = CANDLE_OK;
    for (int64_t k = 1; k < n && !s; k++) {
        if (v[k - 1].off + v[k - 1].size <= v[k].off) continue;
        const gguf_tensor *a = &g->tensors[v[k - 1].i], *b = &g->tensors[v[k].i];
        char field[96];
        snprintf(field, sizeof field, "tensor '%.64s' offset", b->info.name);
        s = ferr(b->field_off, field,
                 "data at %zu overlaps tensor '%.64s' (%zu bytes at %zu)", b->info.offset,
                 a->info.name, a->info.size, a->info.offset);
    }
    free(v);
    return s;
}

static candle_status parse_tensors(candle_gguf *g, rd *r, uint64_t n) {
    int64_t cap = 0;
    for (int64_t i = 0; i < (int64_t)n; i++) {
        gguf_tensor *t = grow(g->tensors, g->n_tensors, &cap, (int64_t)n, sizeof *g->tensors);
        if (!t) return oom("tensor table", (size_t)cap * 2 * sizeof *g->tensors);
        g->tensors = t;
        g->n_tensors = i + 1;
        candle_status s = parse_tensor(r, i, &g->tensors[i]);
        if (s) return s;
    }
    size_t a = g->alignment;
    g->data_offset = r->off + (a - r->off % a) % a;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        candle_status s = place_tensor(g, &g->tensors[i]);
        if (s) return s;
    }
    if (n == 0) return CANDLE_OK;
    candle_status so = check_overlaps(g);
    if (so) return so;
    g->tensor_sorted = malloc((size_t)n * sizeof *g->tensor_sorted);
    if (!g->tensor_sorted) return oom("tensor index", (size_t)n * sizeof *g->tensor_sorted);
    for (int64_t i = 0; i < g->n_tensors; i++)
        g->tensor_sorted[i] = (gguf_name_ref){g->tensors[i].info.name, i};
    int64_t dup = sort_names(g->tensor_sorted, g->n_tensors);
    if (dup >= 0) {
        char field[96];
        snprintf(field, sizeof field, "tensor '%.64s' name", g->tensors[dup].info.name);
        return ferr(g->tensors[dup].name_off, field, "duplicate name");
    }
    return CANDLE_OK;
}

static candle_status parse_header(candle_gguf *g, rd *r, uint64_t *n_tensors, uint64_t *n_kv) {
    candle_status s = need(r, 4, "magic");
    if (s) return s;
    if (memcmp(r->p, GGUF_MAGIC, 4))
        return ferr(0, "magic", "expected \"GGUF\", found %02x %02x %02x %02x", r->p[0], r->p[1],
                    r->p[2], r->p[3]);
    r->off = 4;
    uint32_t v;
    if ((s = rd_u32(r, "version", &v))) return s;
    if (v == 0x02000000u || v == 0x03000000u)
        return ferr(4, "version", "big-endian files are not supported");
    if (v != 2 && v != 3)
        return ferr(4, "version", "%" PRIu32 " is not supported (only 2 and 3)", v);
    g->version = v;
    if ((s = rd_u64(r, "tensor_count", n_tensors))) return s;
    if (*n_tensors > left(r) / MIN_TENSOR_BYTES)
        return ferr(8, "tensor_count", "%" PRIu64 " tensors cannot fit in the %zu bytes left",
                    *n_tensors, left(r));
    if ((s = rd_u64(r, "kv_count", n_kv))) return s;
    size_t room = left(r) - (size_t)*n_tensors * MIN_TENSOR_BYTES;
    if (*n_kv > room / MIN_KV_BYTES)
        return ferr(16, "kv_count", "%" PRIu64 " keys cannot fit in the %zu bytes left", *n_kv,
                    left(r));
    return CANDLE_OK;
}

candle_status cgguf_parse(candle_gguf *g) {
    rd r = {g->base, g->file_size, 0};
    uint64_t n_tensors = 0, n_kv = 0;
    candle_status s = parse_header(g, &r, &n_tensors, &n_kv);
    if (!s) s = parse_kvs(g, &r, n_kv);
    if (!s) s = parse_alignment(g);
    if (!s) s = parse_tensors(g, &r, n_tensors);
    return s;
}

void cgguf_free_parsed(candle_gguf *g) {
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
        free(g->kv[i].aligned);
    }
    free(g->kv);
    free(g->kv_sorted);
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].info.name);
    free(g->tensors);
    free(g->tensor_sorted);
    g->kv = NULL;
    g->tensors = NULL;
    g->kv_sorted = g->tensor_sorted = NULL;
    g->n_kv = g->n_tensors = 0;
}
