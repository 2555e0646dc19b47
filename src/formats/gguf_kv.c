/* GGUF metadata accessors and their human-readable rendering. Values were
 * validated by the parser, so reads here stay inside the image. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf-impl.h"

int64_t candle_gguf_n_kv(const candle_gguf *g) { return g ? g->n_kv : 0; }

const char *candle_gguf_key(const candle_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int64_t candle_gguf_find_key(const candle_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return cdl_names_find(g->kv_sorted, g->n_kv, key);
}

candle_gguf_type candle_gguf_kv_type(const candle_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? g->kv[i].type : CANDLE_GGUF_TYPE_COUNT;
}

static const gguf_kv *find(const candle_gguf *g, const char *key) {
    int64_t i = candle_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

/* An integer of any width at p, widened to int64; false for u64 values
 * beyond INT64_MAX and for non-integer types. */
static bool load_int(candle_gguf_type type, const uint8_t *p, int64_t *v) {
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    switch (type) {
    case CANDLE_GGUF_UINT8: memcpy(&u8, p, 1); *v = u8; return true;
    case CANDLE_GGUF_INT8: memcpy(&i8, p, 1); *v = i8; return true;
    case CANDLE_GGUF_UINT16: memcpy(&u16, p, 2); *v = u16; return true;
    case CANDLE_GGUF_INT16: memcpy(&i16, p, 2); *v = i16; return true;
    case CANDLE_GGUF_UINT32: memcpy(&u32, p, 4); *v = u32; return true;
    case CANDLE_GGUF_INT32: memcpy(&i32, p, 4); *v = i32; return true;
    case CANDLE_GGUF_INT64: memcpy(v, p, 8); return true;
    case CANDLE_GGUF_UINT64:
        memcpy(&u64, p, 8);
        if (u64 > (uint64_t)INT64_MAX) return false;
        *v = (int64_t)u64;
        return true;
    default: return false;
    }
}

static bool load_f64(candle_gguf_type type, const uint8_t *p, double *v) {
    float f;
    int64_t i;
    if (type == CANDLE_GGUF_FLOAT32) {
        memcpy(&f, p, 4);
        *v = f;
        return true;
    }
    if (type == CANDLE_GGUF_FLOAT64) {
        memcpy(v, p, 8);
        return true;
    }
    if (!load_int(type, p, &i)) return false;
    *v = (double)i;
    return true;
}

bool candle_gguf_get_u32(const candle_gguf *g, const char *key, uint32_t *out) {
    const gguf_kv *kv = find(g, key);
    int64_t v;
    if (!kv || !load_int(kv->type, kv->val, &v) || v < 0 || v > (int64_t)UINT32_MAX) return false;
    if (out) *out = (uint32_t)v;
    return true;
}

bool candle_gguf_get_i64(const candle_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv = find(g, key);
    int64_t v;
    if (!kv || !load_int(kv->type, kv->val, &v)) return false;
    if (out) *out = v;
    return true;
}

/* f64 values narrow to the nearest f32 (hyperparameters such as norm
 * epsilons are written as either); integers only when exact. */
bool candle_gguf_get_f32(const candle_gguf *g, const char *key, float *out) {
    const gguf_kv *kv = find(g, key);
    double v;
    if (!kv || !load_f64(kv->type, kv->val, &v)) return false;
    bool is_int = kv->type != CANDLE_GGUF_FLOAT32 && kv->type != CANDLE_GGUF_FLOAT64;
    if (is_int && (double)(float)v != v) return false;
    if (out) *out = (float)v;
    return true;
}

bool candle_gguf_get_bool(const candle_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv = find(g, key);
    if (!kv || kv->type != CANDLE_GGUF_BOOL) return false;
    if (out) *out = kv->val[0] != 0;
    return true;
}

bool candle_gguf_get_str(const candle_gguf *g, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv = find(g, key);
    if (!kv || kv->type != CANDLE_GGUF_STRING) return false;
    if (s) *s = (const char *)kv->val;
    if (len) *len = (size_t)kv->n;
    return true;
}

bool candle_gguf_get_arr(const candle_gguf *g, const char *key, candle_gguf_type *elem_type,
                         int64_t *n) {
    const gguf_kv *kv = find(g, key);
    if (!kv || kv->type != CANDLE_GGUF_ARRAY) return false;
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = (int64_t)kv->n;
    return true;
}

static void arr_str_at(const gguf_kv *kv, int64_t i, const char **s, size_t *len) {
    uint64_t n;
    memcpy(&n, kv->val + kv->str_off[i], 8);
    if (s) *s = (const char *)kv->val + kv->str_off[i] + 8;
    if (len) *len = (size_t)n;
}

bool candle_gguf_arr_str(const candle_gguf *g, const char *key, int64_t i, const char **s,
                         size_t *len) {
    const gguf_kv *kv = find(g, key);
    if (!kv || kv->type != CANDLE_GGUF_ARRAY || kv->elem_type != CANDLE_GGUF_STRING || i < 0 ||
        (uint64_t)i >= kv->n)
        return false;
    arr_str_at(kv, i, s, len);
    return true;
}

const void *candle_gguf_arr_data(const candle_gguf *g, const char *key) {
    const gguf_kv *kv = find(g, key);
    if (!kv || kv->type != CANDLE_GGUF_ARRAY || !cgguf_scalar_size(kv->elem_type)) return NULL;
    return kv->aligned ? kv->aligned : kv->val;
}

/* ---- rendering for `candle info` ---- */

typedef struct sbuf {
    char *p;
    size_t n, used;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) CANDLE_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...) {
    if (b->used + 1 >= b->n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->used, b->n - b->used, fmt, ap);
    va_end(ap);
    if (w > 0) b->used += (size_t)w < b->n - b->used ? (size_t)w : b->n - b->used - 1;
}

/* Quoted, escaped, cut after max bytes. */
static void put_str(sbuf *b, const uint8_t *s, size_t len, size_t max) {
    put(b, "\"");
    for (size_t i = 0; i < len && i < max; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') put(b, "\\%c", c);
        else if (c == '\n') put(b, "\\n");
        else if (c < 0x20 || c == 0x7f) put(b, "\\x%02x", c);
        else if (c == 0xc2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f) put(b, "\\u%04x", s[++i]);
        else put(b, "%c", c);
    }
    if (len > max) put(b, "\"... (%zu bytes)", len);
    else put(b, "\"");
}

/* The shortest decimal that reads back as the same float. */
static void put_f32(sbuf *b, float f) {
    char tmp[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)f);
        if (strtof(tmp, NULL) == f || f != f) break;
    }
    put(b, "%s", tmp);
}

static void put_scalar(sbuf *b, candle_gguf_type t, const uint8_t *p) {
    int64_t i;
    double d;
    float f;
    if (t == CANDLE_GGUF_BOOL) put(b, "%s", p[0] ? "true" : "false");
    else if (t == CANDLE_GGUF_FLOAT32) {
        memcpy(&f, p, 4);
        put_f32(b, f);
    }
    else if (load_int(t, p, &i)) put(b, "%" PRId64, i);
    else if (t == CANDLE_GGUF_UINT64) {
        uint64_t u;
        memcpy(&u, p, 8);
        put(b, "%" PRIu64, u);
    } else if (load_f64(t, p, &d)) put(b, "%.17g", d);
}

#define ARR_SHOWN 8
#define STR_SHOWN 96

static void put_array(sbuf *b, const gguf_kv *kv) {
    put(b, "[%s x %" PRIu64 "]", cgguf_type_name(kv->elem_type), kv->n);
    if (kv->elem_type == CANDLE_GGUF_ARRAY || kv->n == 0) return;
    put(b, " [");
    size_t esz = cgguf_scalar_size(kv->elem_type);
    for (uint64_t i = 0; i < kv->n && i < ARR_SHOWN; i++) {
        if (i) put(b, ", ");
        if (esz) put_scalar(b, kv->elem_type, kv->val + i * esz);
        else {
            const char *s;
            size_t len;
            arr_str_at(kv, (int64_t)i, &s, &len);
            put_str(b, (const uint8_t *)s, len, 32);
        }
    }
    put(b, kv->n > ARR_SHOWN ? ", ...]" : "]");
}

const char *candle_gguf_kv_str(const candle_gguf *g, int64_t i, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    sbuf b = {buf, n, 0};
    buf[0] = 0;
    if (!g || i < 0 || i >= g->n_kv) return buf;
    const gguf_kv *kv = &g->kv[i];
    if (kv->type == CANDLE_GGUF_STRING) put_str(&b, kv->val, kv->val_size, STR_SHOWN);
    else if (kv->type == CANDLE_GGUF_ARRAY) put_array(&b, kv);
    else put_scalar(&b, kv->type, kv->val);
    return buf;
}
