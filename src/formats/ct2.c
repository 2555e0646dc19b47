/* CTranslate2 model.bin reader: see include/candle/ct2.h for the layout.
 *
 * Every count, length and size read from the file is checked against the
 * bytes left before it is used: the variable and alias tables are sized by
 * counts that are first bounded by the least bytes an entry takes, so a
 * lying header costs no allocation beyond the file's own size. Names point
 * into the image (their NUL is checked); the tables keep offsets so the
 * image can be swapped for a loaded copy after validation (no_mmap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/ct2.h"
#include "core/core-impl.h"
#include "image-impl.h"

static const char *const FMT = "ct2";

typedef struct ct2_name {
    size_t off; /* of the name's first byte in the image */
    int64_t idx; /* variable index; for an alias its resolution (-1 ignored) */
    int64_t order; /* position in the file, to keep the first of equal names */
} ct2_name;

typedef struct ct2_alias {
    size_t alias_off, target_off;
    int64_t var;
} ct2_alias;

struct candle_ct2 {
    char *name;
    candle_storage *storage;
    const uint8_t *base;
    size_t size;
    uint32_t version, revision;
    size_t spec_off; /* SIZE_MAX: none (version 1) */
    candle_ct2_var_info *vars;
    int64_t n_vars;
    ct2_name *var_sorted;
    ct2_alias *aliases;
    int64_t n_aliases;
    ct2_name *alias_sorted;
};

/* ---- a bounds-checked cursor ---- */
typedef struct cur {
    const candle_ct2 *m;
    size_t pos;
    const char *where; /* the variable or field being read, for messages */
} cur;

static candle_status ferr(const cur *c, const char *problem) {
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s: %s (at byte %zu)", c->m->name,
                            c->where, problem, c->pos);
}

static size_t left(const cur *c) { return c->m->size - c->pos; }

static candle_status take(cur *c, size_t n, uint64_t *v) {
    *v = 0;
    if (left(c) < n) return ferr(c, "truncated");
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x |= (uint64_t)c->m->base[c->pos + i] << (8 * i);
    c->pos += n;
    *v = x;
    return CANDLE_OK;
}

/* A u16 length counting the NUL, then the bytes; *off is where they start. */
static candle_status take_string(cur *c, size_t *off) {
    uint64_t len;
    *off = 0;
    candle_status r = take(c, 2, &len);
    if (r) return r;
    if (len < 2) return ferr(c, "empty string (length below 2)");
    if (left(c) < len) return ferr(c, "string runs past the end of the file");
    const uint8_t *s = c->m->base + c->pos;
    if (s[len - 1] != 0) return ferr(c, "string does not end in NUL");
    if (memchr(s, 0, len - 1)) return ferr(c, "string holds a NUL");
    *off = c->pos;
    c->pos += len;
    return CANDLE_OK;
}

/* ---- names ---- */
static _Thread_local const uint8_t *g_sort_base; /* qsort has no context argument */

static int name_cmp(const void *a, const void *b) {
    const ct2_name *x = a, *y = b;
    int d = strcmp((const char *)g_sort_base + x->off, (const char *)g_sort_base + y->off);
    return d ? d : (x->order > y->order) - (x->order < y->order);
}

/* The first-registered entry named s in a sorted table, or NULL. */
static const ct2_name *lookup(const uint8_t *base, const ct2_name *t, int64_t n, const char *s) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (strcmp((const char *)base + t[mid].off, s) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && !strcmp((const char *)base + t[lo].off, s) ? &t[lo] : NULL;
}

/* ---- variables ---- */
static const struct {
    const char *name;
    size_t size;
    candle_dtype load;
} DTYPES[CANDLE_CT2_DTYPE_COUNT] = {
    {"float32", 4, CANDLE_DTYPE_F32}, {"int8", 1, CANDLE_DTYPE_I8},
    {"int16", 2, CANDLE_DTYPE_I32},   {"int32", 4, CANDLE_DTYPE_I32},
    {"float16", 2, CANDLE_DTYPE_F16}, {"bfloat16", 2, CANDLE_DTYPE_BF16},
};

const char *candle_ct2_dtype_name(candle_ct2_dtype t) {
    return (unsigned)t < CANDLE_CT2_DTYPE_COUNT ? DTYPES[t].name : "?";
}

/* Before version 4 the file gave an item size, not a type. */
static candle_status old_dtype(cur *c, uint64_t item, candle_ct2_dtype *t) {
    switch (item) {
    case 4: *t = CANDLE_CT2_F32; return CANDLE_OK;
    case 2: *t = CANDLE_CT2_I16; return CANDLE_OK;
    case 1: *t = CANDLE_CT2_I8; return CANDLE_OK;
    default: return ferr(c, "unknown item size");
    }
}

static candle_status read_shape(cur *c, candle_ct2_var_info *v, uint64_t *numel) {
    uint64_t rank, d;
    candle_status r = take(c, 1, &rank);
    if (r) return r;
    if (rank > CANDLE_MAX_RANK) return ferr(c, "rank above Candle's limit of 6");
    v->rank = (int)rank;
    *numel = 1;
    uint64_t nonzero = 1; /* product of the non-zero dimensions, saturated */
    for (int i = 0; i < v->rank; i++) {
        if ((r = take(c, 4, &d))) return r;
        v->shape[i] = (int64_t)d;
        /* the byte count is a u32, so a product past 2^32 cannot match it:
         * saturate there (unless a later dimension is 0) */
        *numel = !d ? 0 : *numel > UINT32_MAX ? *numel : *numel * d;
        if (d) nonzero = nonzero > UINT32_MAX ? nonzero : nonzero * d;
    }
    /* an empty tensor too: its strides are products of the other dimensions */
    if (nonzero > UINT32_MAX) return ferr(c, "dimensions multiply past 2^32 elements");
    return CANDLE_OK;
}

static candle_status read_var(cur *c, candle_ct2_var_info *v, size_t *name_off) {
    c->where = "variable name";
    candle_status r = take_string(c, name_off);
    if (r) return r;
    c->where = (const char *)c->m->base + *name_off;
    uint64_t numel = 0, t, n;
    if ((r = read_shape(c, v, &numel)) || (r = take(c, 1, &t)) || (r = take(c, 4, &n))) return r;
    if (c->m->version >= 4) {
        if (t >= CANDLE_CT2_DTYPE_COUNT) return ferr(c, "unknown dtype id");
        v->ct2_dtype = (candle_ct2_dtype)t;
    } else {
        if ((r = old_dtype(c, t, &v->ct2_dtype))) return r;
        n *= t; /* the count was of elements */
    }
    if (numel > UINT32_MAX || numel * DTYPES[v->ct2_dtype].size != n)
        return ferr(c, "byte count does not match the shape and dtype");
    if (left(c) < n) return ferr(c, "data runs past the end of the file");
    v->dtype = DTYPES[v->ct2_dtype].load;
    v->offset = c->pos;
    v->size = (size_t)n;
    c->pos += (size_t)n;
    return CANDLE_OK;
}

static candle_status oom(const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: ct2 %s", what);
}

/* Least bytes per entry: a 1-char name (2 + 2), rank, dtype, nbytes. */
#define MIN_VAR_BYTES 10
#define MIN_ALIAS_BYTES 8

static candle_status read_vars(cur *c) {
    candle_ct2 *m = (candle_ct2 *)c->m;
    uint64_t n;
    c->where = "variable count";
    candle_status r = take(c, 4, &n);
    if (r) return r;
    if (n > left(c) / MIN_VAR_BYTES) return ferr(c, "more variables than the file can hold");
    m->vars = calloc(n ? n : 1, sizeof *m->vars);
    m->var_sorted = calloc(n ? n : 1, sizeof *m->var_sorted);
    if (!m->vars || !m->var_sorted) return oom("variable table");
    for (uint64_t i = 0; i < n; i++) {
        if ((r = read_var(c, &m->vars[i], &m->var_sorted[i].off))) return r;
        m->var_sorted[i].idx = m->var_sorted[i].order = (int64_t)i;
        m->n_vars = (int64_t)i + 1;
    }
    g_sort_base = m->base;
    qsort(m->var_sorted, n, sizeof *m->var_sorted, name_cmp);
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp((const char *)m->base + m->var_sorted[i].off,
                    (const char *)m->base + m->var_sorted[i - 1].off)) {
            c->where = (const char *)m->base + m->var_sorted[i].off;
            return ferr(c, "variable name appears twice");
        }
    return CANDLE_OK;
}

/* As CTranslate2 registers them, in file order: an alias counts only when
 * its name is free (no variable, no alias registered before) and its target
 * is a variable or an alias registered before. The first entry of each
 * group of equal names in alias_sorted holds what that name resolves to
 * (-1 while unregistered), so find_var reads it there. */
static void resolve_aliases(candle_ct2 *m) {
    for (int64_t i = 0; i < m->n_aliases; i++) m->alias_sorted[i].idx = -1;
    for (int64_t i = 0; i < m->n_aliases; i++) {
        ct2_alias *a = &m->aliases[i];
        const char *alias = (const char *)m->base + a->alias_off;
        const char *target = (const char *)m->base + a->target_off;
        a->var = -1;
        ct2_name *g = (ct2_name *)lookup(m->base, m->alias_sorted, m->n_aliases, alias);
        if (lookup(m->base, m->var_sorted, m->n_vars, alias) || g->idx >= 0) continue;
        const ct2_name *t = lookup(m->base, m->var_sorted, m->n_vars, target);
        if (!t) t = lookup(m->base, m->alias_sorted, m->n_aliases, target);
        a->var = t ? t->idx : -1;
        g->idx = a->var;
    }
}

static candle_status read_aliases(cur *c) {
    candle_ct2 *m = (candle_ct2 *)c->m;
    uint64_t n = 0;
    c->where = "alias count";
    candle_status r = m->version >= 3 ? take(c, 4, &n) : CANDLE_OK;
    if (r) return r;
    if (n > left(c) / MIN_ALIAS_BYTES) return ferr(c, "more aliases than the file can hold");
    m->aliases = calloc(n ? n : 1, sizeof *m->aliases);
    m->alias_sorted = calloc(n ? n : 1, sizeof *m->alias_sorted);
    if (!m->aliases || !m->alias_sorted) return oom("alias table");
    for (uint64_t i = 0; i < n; i++) {
        ct2_alias *a = &m->aliases[i];
        c->where = "alias";
        if ((r = take_string(c, &a->alias_off))) return r;
        c->where = (const char *)m->base + a->alias_off;
        if ((r = take_string(c, &a->target_off))) return r;
        m->alias_sorted[i] = (ct2_name){a->alias_off, -1, (int64_t)i};
        m->n_aliases = (int64_t)i + 1;
    }
    g_sort_base = m->base;
    qsort(m->alias_sorted, n, sizeof *m->alias_sorted, name_cmp);
    resolve_aliases(m);
    return CANDLE_OK;
}

static candle_status parse(candle_ct2 *m) {
    cur c = {m, 0, "version"};
    uint64_t v, rev = 1;
    candle_status r = take(&c, 4, &v);
    if (r) return r;
    if (v < 1 || v > CANDLE_CT2_MAX_VERSION) {
        c.pos = 0;
        return ferr(&c, v > CANDLE_CT2_MAX_VERSION && v < 100
                            ? "binary version newer than 6 (unsupported)"
                            : "not a CTranslate2 model.bin (bad version)");
    }
    m->version = (uint32_t)v;
    m->spec_off = SIZE_MAX;
    if (v >= 2) {
        c.where = "spec name";
        if ((r = take_string(&c, &m->spec_off))) return r;
        c.where = "spec revision";
        if ((r = take(&c, 4, &rev))) return r;
    }
    m->revision = (uint32_t)rev;
    if ((r = read_vars(&c)) || (r = read_aliases(&c))) return r;
    c.where = "end";
    if (left(&c)) return ferr(&c, "trailing bytes after the aliases");
    return CANDLE_OK;
}

/* Names and data pointers from the offsets, for the current image. */
static void bind(candle_ct2 *m) {
    for (int64_t i = 0; i < m->n_vars; i++) {
        candle_ct2_var_info *v = &m->vars[i];
        v->data = m->base + v->offset;
    }
    for (int64_t i = 0; i < m->n_vars; i++)
        m->vars[m->var_sorted[i].idx].name = (const char *)m->base + m->var_sorted[i].off;
}

void candle_ct2_close(candle_ct2 *m) {
    if (!m) return;
    free(m->vars);
    free(m->var_sorted);
    free(m->aliases);
    free(m->alias_sorted);
    candle_storage_release(m->storage);
    free(m->name);
    free(m);
}

/* Takes over the reference to s; name is copied. */
static candle_status open_storage(candle_ct2 **out, candle_storage *s, const char *name) {
    candle_ct2 *m = calloc(1, sizeof *m);
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
        candle_ct2_close(m);
        return r;
    }
    bind(m);
    *out = m;
    return CANDLE_OK;
}

static candle_status parse_image(void **handle, candle_storage *s, const char *name) {
    candle_ct2 *m = NULL;
    candle_status r = open_storage(&m, s, name);
    *handle = m;
    return r;
}

static void close_image(void *handle) { candle_ct2_close(handle); }

candle_status candle_ct2_open(candle_ct2 **out, const char *path, const candle_ct2_open_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "ct2: open: NULL argument");
    void *h = NULL;
    candle_status r = cimage_load(FMT, path, p && p->no_mmap, parse_image, close_image, &h);
    *out = h;
    return r;
}

candle_status candle_ct2_open_memory(candle_ct2 **out, const void *data, size_t size,
                                     const char *name) {
    if (!out || (!data && size))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "ct2: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    candle_storage *s = candle_storage_external((void *)(data ? data : empty), size);
    if (!s) return candle_last_error();
    return open_storage(out, s, name ? name : FMT);
}

bool candle_ct2_probe(const void *head, size_t n) {
    const uint8_t *b = head;
    if (!b || n < 8) return false;
    uint32_t v = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    size_t len = b[4] | (size_t)b[5] << 8;
    if (v < 2 || v > CANDLE_CT2_MAX_VERSION || len < 6 || n < 6 + len) return false;
    const char *s = (const char *)b + 6;
    return s[len - 1] == 0 && strlen(s) == len - 1 && !strcmp(s + len - 5, "Spec");
}

uint32_t candle_ct2_version(const candle_ct2 *m) { return m ? m->version : 0; }
uint32_t candle_ct2_revision(const candle_ct2 *m) { return m ? m->revision : 0; }
size_t candle_ct2_file_size(const candle_ct2 *m) { return m ? m->size : 0; }
candle_storage *candle_ct2_storage(const candle_ct2 *m) { return m ? m->storage : NULL; }
int64_t candle_ct2_n_vars(const candle_ct2 *m) { return m ? m->n_vars : 0; }
int64_t candle_ct2_n_aliases(const candle_ct2 *m) { return m ? m->n_aliases : 0; }

const char *candle_ct2_spec(const candle_ct2 *m) {
    if (!m || m->spec_off == SIZE_MAX) return "";
    return (const char *)m->base + m->spec_off;
}

const candle_ct2_var_info *candle_ct2_var(const candle_ct2 *m, int64_t i) {
    return m && i >= 0 && i < m->n_vars ? &m->vars[i] : NULL;
}

int64_t candle_ct2_find_var(const candle_ct2 *m, const char *name) {
    if (!m || !name) return -1;
    const ct2_name *t = lookup(m->base, m->var_sorted, m->n_vars, name);
    if (t) return t->idx;
    t = lookup(m->base, m->alias_sorted, m->n_aliases, name);
    return t ? t->idx : -1;
}

bool candle_ct2_alias(const candle_ct2 *m, int64_t i, const char **alias, const char **target,
                      int64_t *var) {
    if (!m || i < 0 || i >= m->n_aliases) return false;
    if (alias) *alias = (const char *)m->base + m->aliases[i].alias_off;
    if (target) *target = (const char *)m->base + m->aliases[i].target_off;
    if (var) *var = m->aliases[i].var;
    return true;
}

/* A copy on the host (staged for a device), I16 widened to I32. */
static candle_tensor *load_copy(const candle_ct2 *m, candle_ctx *ctx, const candle_ct2_var_info *v) {
    candle_tensor *t = candle_tensor_new(ctx, v->dtype, v->rank, v->shape);
    if (!t) return NULL;
    size_t bytes = candle_tensor_nbytes(t);
    bool host = candle_tensor_is_host(t);
    uint8_t *p = host ? candle_tensor_data(t) : malloc(bytes ? bytes : 1);
    if (!p) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: %s: variable '%s': staging %zu bytes",
                         m->name, v->name, bytes);
        return NULL;
    }
    if (v->ct2_dtype == CANDLE_CT2_I16) {
        const uint8_t *s = v->data;
        for (size_t i = 0; i < v->size / 2; i++) {
            int32_t x = (int16_t)(uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
            memcpy(p + 4 * i, &x, 4);
        }
    } else {
        memcpy(p, v->data, bytes);
    }
    candle_status s = host ? CANDLE_OK : candle_tensor_set_bytes(t, 0, p, bytes);
    if (!host) free(p);
    return s ? NULL : t;
}

candle_tensor *candle_ct2_load_tensor(const candle_ct2 *m, candle_ctx *ctx, const char *name) {
    if (!ctx) return NULL;
    if (!m || !name) {
        cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "ct2: load_tensor: NULL argument");
        return NULL;
    }
    int64_t i = candle_ct2_find_var(m, name);
    if (i < 0) {
        cdl_set_error(ctx, CANDLE_ERR_FORMAT, "%s: variable '%s': not found", m->name, name);
        return NULL;
    }
    const candle_ct2_var_info *v = &m->vars[i];
    /* kernels read through typed pointers, and the format packs variables
     * at any byte: view only what happens to be aligned */
    size_t align = candle_dtype_info(v->dtype)->type_size;
    bool view = v->ct2_dtype != CANDLE_CT2_I16 && (uintptr_t)v->data % align == 0;
    candle_tensor *t = view ? candle_tensor_from_storage(ctx, v->dtype, v->rank, v->shape,
                                                         m->storage, v->offset)
                            : load_copy(m, ctx, v);
    if (t) candle_tensor_set_name(t, name);
    return t;
}
