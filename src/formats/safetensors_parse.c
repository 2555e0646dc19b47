/* safetensors header validation. Allocations are bounded by the header's
 * length (itself bounded by the file and CANDLE_SAFETENSORS_MAX_HEADER), and
 * every number from the header is range-checked before it sizes or locates
 * anything. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors-impl.h"

/* The dtypes the reference implementation knows. bits: per element (F4 and
 * F6 pack several per byte). */
typedef struct st_dtype {
    const char *name;
    int bits;
    candle_dtype stored; /* Candle's type for the bytes as they are */
    candle_dtype load;   /* what loading gives (F32 for a conversion) */
} st_dtype;

#define NONE CANDLE_DTYPE_COUNT
static const st_dtype DTYPES[] = {
    {"BOOL", 8, CANDLE_DTYPE_BOOL, CANDLE_DTYPE_BOOL},
    {"U8", 8, CANDLE_DTYPE_U8, CANDLE_DTYPE_U8},
    {"I8", 8, CANDLE_DTYPE_I8, CANDLE_DTYPE_I8},
    {"F16", 16, CANDLE_DTYPE_F16, CANDLE_DTYPE_F16},
    {"BF16", 16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_BF16},
    {"I32", 32, CANDLE_DTYPE_I32, CANDLE_DTYPE_I32},
    {"F32", 32, CANDLE_DTYPE_F32, CANDLE_DTYPE_F32},
    {"I64", 64, CANDLE_DTYPE_I64, CANDLE_DTYPE_I64},
    {"F64", 64, NONE, CANDLE_DTYPE_F32},
    {"F8_E4M3", 8, NONE, CANDLE_DTYPE_F32},
    {"F8_E5M2", 8, NONE, CANDLE_DTYPE_F32},
    {"I16", 16, NONE, NONE},
    {"U16", 16, NONE, NONE},
    {"U32", 32, NONE, NONE},
    {"U64", 64, NONE, NONE},
    {"F8_E8M0", 8, NONE, NONE},
    {"F4", 4, NONE, NONE},
    {"F6_E2M3", 6, NONE, NONE},
    {"F6_E3M2", 6, NONE, NONE},
    {"C64", 64, NONE, NONE},
};
#undef NONE

static candle_status ferr(const candle_safetensors *st, const char *fmt, ...) CANDLE_PRINTF(2, 3);

static candle_status ferr(const candle_safetensors *st, const char *fmt, ...) {
    char problem[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s", st->name, problem);
}

static candle_status oom(const char *what, size_t bytes) {
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: safetensors %s (%zu bytes)",
                            what, bytes);
}

static candle_status check_size(const char *name, size_t size) {
    if (size < 8)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "%s: header length: file is %zu bytes, shorter than the "
                                "8-byte header length",
                                name, size);
    return CANDLE_OK;
}

static const char *tname(const json_value *v) { return json_type_name(v->type); }

/* Shape and dtype as "shape [2, 2] of F32", for messages. */
static const char *shape_desc(const candle_safetensors_tensor_info *t, char *buf, size_t n) {
    char sh[160];
    snprintf(buf, n, "shape %s of %s", candle_shape_str(t->rank, t->shape, sh, sizeof sh),
             t->st_dtype);
    return buf;
}

static const st_dtype *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, name)) return &DTYPES[i];
    return NULL;
}

static candle_status rd_dtype(const candle_safetensors *st, const char *name,
                              const json_value *v, candle_safetensors_tensor_info *t,
                              const st_dtype **dt) {
    if (v->type != JSON_STRING)
        return ferr(st, "tensor '%s': dtype is a JSON %s, not a string", name, tname(v));
    *dt = strlen(v->u.str) == v->n ? find_dtype(v->u.str) : NULL;
    if (!*dt) return ferr(st, "tensor '%s': unknown dtype '%s'", name, v->u.str);
    t->st_dtype = (*dt)->name;
    t->dtype = (*dt)->stored;
    t->load_dtype = (*dt)->load;
    return CANDLE_OK;
}

static candle_status rd_shape(const candle_safetensors *st, const char *name,
                              const json_value *v, candle_safetensors_tensor_info *t) {
    if (v->type != JSON_ARRAY)
        return ferr(st, "tensor '%s': shape is a JSON %s, not an array", name, tname(v));
    if (v->n > CANDLE_MAX_RANK)
        return ferr(st, "tensor '%s': shape has %zu dimensions, more than %d", name, v->n,
                    CANDLE_MAX_RANK);
    t->rank = (int)v->n;
    for (size_t i = 0; i < v->n; i++) {
        const json_value *d = json_at(v, i);
        if (!json_as_i64(d, &t->shape[i]) || t->shape[i] < 0)
            return ferr(st, "tensor '%s': shape[%zu] is not a non-negative integer", name, i);
    }
    return CANDLE_OK;
}

static candle_status rd_offsets(const candle_safetensors *st, const char *name,
                                const json_value *v, int64_t off[2]) {
    if (v->type != JSON_ARRAY || v->n != 2 || !json_as_i64(json_at(v, 0), &off[0]) ||
        !json_as_i64(json_at(v, 1), &off[1]) || off[0] < 0 || off[1] < 0)
        return ferr(st, "tensor '%s': data_offsets is not an array of two non-negative integers",
                    name);
    return CANDLE_OK;
}

/* Read the entry's three fields, each exactly once and nothing else. */
static candle_status rd_fields(const candle_safetensors *st, const char *name,
                               const json_value *e, candle_safetensors_tensor_info *t,
                               const st_dtype **dt, int64_t off[2]) {
    static const char *const FIELDS[3] = {"dtype", "shape", "data_offsets"};
    bool seen[3] = {false, false, false};
    for (size_t i = 0; i < e->n; i++) {
        const json_value *k = json_obj_key(e, i), *v = json_obj_val(e, i);
        int f = 0;
        while (f < 3 && !json_str_eq(k, FIELDS[f])) f++;
        if (f == 3) return ferr(st, "tensor '%s': unknown field '%s'", name, k->u.str);
        if (seen[f]) return ferr(st, "tensor '%s': field '%s' given twice", name, FIELDS[f]);
        seen[f] = true;
        candle_status s = f == 0   ? rd_dtype(st, name, v, t, dt)
                          : f == 1 ? rd_shape(st, name, v, t)
                                   : rd_offsets(st, name, v, off);
        if (s) return s;
    }
    for (int f = 0; f < 3; f++)
        if (!seen[f]) return ferr(st, "tensor '%s': missing field '%s'", name, FIELDS[f]);
    return CANDLE_OK;
}

/* Bytes the shape takes, or an error if they are not a whole number or
 * overflow. The product of the nonzero dimensions must fit too, so a
 * zero-element tensor's strides do (as in the GGUF reader). */
static candle_status shape_bytes(const candle_safetensors *st, const char *name,
                                 const candle_safetensors_tensor_info *t, int bits,
                                 uint64_t *bytes) {
    uint64_t n = 1, nonzero = 1;
    bool over = false;
    for (int d = 0; d < t->rank; d++) {
        uint64_t e = (uint64_t)t->shape[d];
        over |= __builtin_mul_overflow(n, e, &n);
        if (e) over |= __builtin_mul_overflow(nonzero, e, &nonzero);
    }
    uint64_t nbits = 0, nzbits = 0;
    over |= __builtin_mul_overflow(n, (uint64_t)bits, &nbits) ||
            __builtin_mul_overflow(nonzero, (uint64_t)bits, &nzbits) || nzbits / 8 > INT64_MAX;
    char buf[200];
    if (over) return ferr(st, "tensor '%s': %s is too large", name, shape_desc(t, buf, sizeof buf));
    if (nbits % 8)
        return ferr(st, "tensor '%s': %s is not a whole number of bytes", name,
                    shape_desc(t, buf, sizeof buf));
    *bytes = nbits / 8;
    return CANDLE_OK;
}

static candle_status parse_tensor(candle_safetensors *st, const char *name, const json_value *e,
                                  candle_safetensors_tensor_info *t) {
    if (e->type != JSON_OBJECT)
        return ferr(st, "tensor '%s': entry is a JSON %s, not an object", name, tname(e));
    t->name = name;
    const st_dtype *dt = NULL;
    int64_t off[2] = {0, 0};
    uint64_t need = 0;
    candle_status s = rd_fields(st, name, e, t, &dt, off);
    if (!s) s = shape_bytes(st, name, t, dt->bits, &need);
    if (s) return s;
    size_t data_size = st->file_size - st->data_offset;
    if (off[0] > off[1])
        return ferr(st, "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "]: begin after end",
                    name, off[0], off[1]);
    if ((uint64_t)off[1] > data_size)
        return ferr(st,
                    "tensor '%s': data_offsets [%" PRId64 ", %" PRId64
                    "] exceed the data section of %zu bytes",
                    name, off[0], off[1], data_size);
    uint64_t have = (uint64_t)(off[1] - off[0]);
    char buf[200];
    if (have != need)
        return ferr(st,
                    "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] hold %" PRIu64
                    " bytes but %s needs %" PRIu64,
                    name, off[0], off[1], have, shape_desc(t, buf, sizeof buf), need);
    t->offset = st->data_offset + (size_t)off[0];
    t->size = (size_t)have;
    return CANDLE_OK;
}

static candle_status parse_metadata(candle_safetensors *st, const json_value *m) {
    if (m->type != JSON_OBJECT)
        return ferr(st, "__metadata__: a JSON %s, not an object", tname(m));
    if (m->n && !(st->meta = calloc(m->n, sizeof *st->meta)))
        return oom("metadata", m->n * sizeof *st->meta);
    for (size_t i = 0; i < m->n; i++) {
        const json_value *k = json_obj_key(m, i), *v = json_obj_val(m, i);
        if (strlen(k->u.str) != k->n)
            return ferr(st, "__metadata__: key '%s' contains a NUL byte", k->u.str);
        if (v->type != JSON_STRING)
            return ferr(st, "__metadata__: '%s' is a JSON %s, not a string", k->u.str, tname(v));
        st->meta[i] = (st_meta){k->u.str, v->u.str, v->n};
    }
    st->n_meta = (int64_t)m->n;
    return CANDLE_OK;
}

/* Sorted refs for lookup; a repeated name (the later one named) is an error. */
static candle_status sort_names(candle_safetensors *st, st_name_ref **out, int64_t n,
                                const char *(*name_of)(const candle_safetensors *, int64_t),
                                const char *what) {
    if (!n) return CANDLE_OK;
    st_name_ref *refs = malloc((size_t)n * sizeof *refs);
    if (!refs) return oom("index", (size_t)n * sizeof *refs);
    *out = refs;
    for (int64_t i = 0; i < n; i++) refs[i] = (st_name_ref){name_of(st, i), i};
    cdl_names_sort(refs, n);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(refs[i - 1].name, refs[i].name))
            return ferr(st, "%s '%s': given twice", what, refs[i].name);
    return CANDLE_OK;
}

static const char *tensor_name(const candle_safetensors *st, int64_t i) {
    return st->tensors[i].name;
}

static const char *meta_key(const candle_safetensors *st, int64_t i) { return st->meta[i].key; }


typedef struct st_range {
    size_t begin, end;
    int64_t idx;
} st_range;

static int range_cmp(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sorted by offset, each non-empty range must start at or after the end of
 * every earlier one (empty ranges hold no bytes to share). */
static candle_status check_overlap(candle_safetensors *st) {
    int64_t n = st->n_tensors;
    if (n < 2) return CANDLE_OK;
    st_range *r = malloc((size_t)n * sizeof *r);
    if (!r) return oom("ranges", (size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++) {
        const candle_safetensors_tensor_info *t = &st->tensors[i];
        r[i] = (st_range){t->offset - st->data_offset, t->offset - st->data_offset + t->size, i};
    }
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    candle_status s = CANDLE_OK;
    const st_range *last = NULL; /* the non-empty range reaching furthest */
    for (int64_t i = 0; i < n && !s; i++) {
        if (r[i].begin == r[i].end) continue;
        if (last && r[i].begin < last->end)
            s = ferr(st, "tensor '%s': data_offsets [%zu, %zu] overlap tensor '%s' [%zu, %zu]",
                     st->tensors[r[i].idx].name, r[i].begin, r[i].end,
                     st->tensors[last->idx].name, last->begin, last->end);
        if (!last || r[i].end > last->end) last = &r[i];
    }
    free(r);
    return s;
}

static candle_status parse_header(candle_safetensors *st, uint64_t n) {
    size_t what_len = strlen(st->name) + sizeof ": header";
    char *what = malloc(what_len);
    if (!what) return oom("message", what_len);
    snprintf(what, what_len, "%s: header", st->name);
    candle_status s = json_parse(&st->doc, (const char *)st->base + 8, (size_t)n, what, NULL);
    free(what);
    if (s) return s;
    const json_value *root = json_root(st->doc);
    if (root->type != JSON_OBJECT)
        return ferr(st, "header: a JSON %s, not an object", tname(root));
    if (root->n && !(st->tensors = calloc(root->n, sizeof *st->tensors)))
        return oom("tensor table", root->n * sizeof *st->tensors);
    bool have_meta = false;
    for (size_t i = 0; i < root->n && !s; i++) {
        const json_value *k = json_obj_key(root, i), *v = json_obj_val(root, i);
        if (json_str_eq(k, "__metadata__")) {
            if (have_meta) return ferr(st, "__metadata__: given twice");
            have_meta = true;
            s = parse_metadata(st, v);
        } else if (strlen(k->u.str) != k->n) {
            s = ferr(st, "tensor '%s': name contains a NUL byte", k->u.str);
        } else {
            s = parse_tensor(st, k->u.str, v, &st->tensors[st->n_tensors++]);
        }
    }
    return s;
}

candle_status cst_parse(candle_safetensors *st) {
    candle_status s = check_size(st->name, st->file_size);
    if (s) return s;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | st->base[i]; /* little-endian on any host */
    if (n > st->file_size - 8)
        return ferr(st, "header length: %" PRIu64 " exceeds the %zu bytes after it", n,
                    st->file_size - 8);
    if (n > CANDLE_SAFETENSORS_MAX_HEADER)
        return ferr(st, "header length: %" PRIu64 " exceeds the limit of %zu bytes", n,
                    CANDLE_SAFETENSORS_MAX_HEADER);
    st->data_offset = 8 + (size_t)n;
    s = parse_header(st, n);
    if (!s) s = sort_names(st, &st->tensor_sorted, st->n_tensors, tensor_name, "tensor");
    if (!s) s = sort_names(st, &st->meta_sorted, st->n_meta, meta_key, "__metadata__: key");
    if (!s) s = check_overlap(st);
    return s;
}

void cst_free_parsed(candle_safetensors *st) {
    free(st->tensors);
    free(st->tensor_sorted);
    free(st->meta);
    free(st->meta_sorted);
    json_free(st->doc);
    st->tensors = NULL;
    st->tensor_sorted = NULL;
    st->meta = NULL;
    st->meta_sorted = NULL;
    st->doc = NULL;
    st->n_tensors = st->n_meta = 0;
}
