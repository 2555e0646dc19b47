/* Weight sources (weights.h): what every source shares, and the GGUF
 * adapter, which lists its file's tensors as they are and adds the one fact
 * its converter leaves implicit (Llama's q/k rows are permuted). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "weights-impl.h"

char *weights_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *r = malloc(n);
    if (r) memcpy(r, s, n);
    return r;
}

static weights_kv *add_kv(candle_weights *w, const char *key, candle_gguf_type type) {
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        weights_kv *kv = realloc(w->kv, (size_t)cap * sizeof *kv);
        if (!kv) return NULL;
        w->kv = kv;
        w->cap_kv = cap;
    }
    weights_kv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = weights_strdup(key))) return NULL;
    kv->type = type;
    w->n_kv++;
    return kv;
}

static candle_status kv_oom(const char *key) {
    return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: metadata '%s'", key);
}

candle_status weights_add_i64(candle_weights *w, const char *key, int64_t v) {
    weights_kv *kv = add_kv(w, key, CANDLE_GGUF_INT64);
    if (!kv) return kv_oom(key);
    kv->i = v;
    return CANDLE_OK;
}

candle_status weights_add_f64(candle_weights *w, const char *key, double v) {
    weights_kv *kv = add_kv(w, key, CANDLE_GGUF_FLOAT64);
    if (!kv) return kv_oom(key);
    kv->f = v;
    return CANDLE_OK;
}

candle_status weights_add_bool(candle_weights *w, const char *key, bool v) {
    weights_kv *kv = add_kv(w, key, CANDLE_GGUF_BOOL);
    if (!kv) return kv_oom(key);
    kv->b = v;
    return CANDLE_OK;
}

candle_status weights_add_str(candle_weights *w, const char *key, const char *s, size_t len) {
    weights_kv *kv = add_kv(w, key, CANDLE_GGUF_STRING);
    if (!kv || !(kv->s = malloc(len + 1))) return kv_oom(key);
    memcpy(kv->s, s, len);
    kv->s[len] = 0;
    kv->len = len;
    return CANDLE_OK;
}

candle_status weights_add_made(candle_weights *w, const char *name, const float *v, int64_t n) {
    weights_made *m = realloc(w->made, (size_t)(w->n_made + 1) * sizeof *m);
    if (!m) return kv_oom(name);
    w->made = m;
    m = &w->made[w->n_made];
    m->name = weights_strdup(name);
    m->v = malloc((size_t)(n > 0 ? n : 1) * sizeof *m->v);
    m->n = n;
    if (!m->name || !m->v) {
        free(m->name);
        free(m->v);
        return kv_oom(name);
    }
    memcpy(m->v, v, (size_t)n * sizeof *v);
    w->n_made++;
    return CANDLE_OK;
}

const weights_kv *weights_find_kv(const candle_weights *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return &w->kv[i];
    return NULL;
}

candle_status weights_index(candle_weights *w) {
    free(w->by_name);
    w->by_name = malloc((size_t)(w->n_entries ? w->n_entries : 1) * sizeof *w->by_name);
    if (!w->by_name) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor index");
    for (int64_t i = 0; i < w->n_entries; i++)
        w->by_name[i] = (cdl_name_ref){w->entries[i].info.name, i};
    cdl_names_sort(w->by_name, w->n_entries);
    for (int64_t i = 1; i < w->n_entries; i++) {
        const weights_entry *a = &w->entries[w->by_name[i - 1].idx];
        const weights_entry *b = &w->entries[w->by_name[i].idx];
        if (!strcmp(a->info.name, b->info.name))
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                    "%s: tensors '%s' (%s) and '%s' (%s) are both %s", w->path,
                                    a->info.src_name, a->info.file, b->info.src_name, b->info.file,
                                    a->info.name);
    }
    return CANDLE_OK;
}

/* ---- the GGUF adapter ---- */

static candle_status open_gguf(candle_weights *w, const candle_weights_params *p) {
    candle_gguf_open_params gp = {.no_mmap = p && p->no_mmap};
    candle_status s = candle_gguf_open(&w->gguf, w->path, &gp);
    if (s) return s;
    int64_t n = candle_gguf_n_tensors(w->gguf);
    w->entries = calloc((size_t)(n ? n : 1), sizeof *w->entries);
    if (!w->entries) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
    for (int64_t i = 0; i < n; i++) {
        const candle_gguf_tensor_info *t = candle_gguf_tensor(w->gguf, i);
        weights_entry *e = &w->entries[i];
        e->info = (candle_weights_tensor_info){.name = t->name,
                                               .src_name = t->name,
                                               .file = w->path,
                                               .dtype = t->dtype,
                                               .rank = t->rank,
                                               .offset = t->offset,
                                               .size = t->size};
        memcpy(e->info.shape, t->shape, sizeof t->shape);
        e->shard = -1;
    }
    w->n_entries = n;
    /* llama.cpp's converter permutes Llama's q/k rows so that RoPE pairs
     * adjacent dimensions; its other architectures keep Hugging Face's
     * halves. */
    const char *arch;
    size_t len;
    bool llama = candle_gguf_get_str(w->gguf, "general.architecture", &arch, &len) && len == 5 &&
                 !memcmp(arch, "llama", 5);
    if ((s = weights_add_bool(w, "candle.rope.interleaved", llama))) return s;
    return weights_index(w);
}

/* ---- opening ---- */

bool candle_weights_path_is_dir(const char *path) {
    struct stat st;
    return path && !stat(path, &st) && S_ISDIR(st.st_mode);
}

candle_status candle_weights_open(candle_weights **out, const char *path,
                                  const candle_weights_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "weights_open: NULL argument");
    *out = NULL;
    candle_weights *w = calloc(1, sizeof *w);
    if (!w || !(w->path = weights_strdup(path))) {
        free(w);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: weight source");
    }
    candle_status s;
    if (candle_weights_path_is_dir(path)) {
        w->format = CANDLE_WEIGHTS_HF_DIR;
        s = weights_open_hf(w, p);
    } else {
        w->format = CANDLE_WEIGHTS_GGUF;
        s = open_gguf(w, p);
    }
    if (s) {
        candle_weights_close(w);
        return s;
    }
    *out = w;
    return CANDLE_OK;
}

void candle_weights_close(candle_weights *w) {
    if (!w) return;
    candle_gguf_close(w->gguf);
    for (int i = 0; i < w->n_shards; i++) {
        candle_safetensors_close(w->shards[i]);
        free(w->shard_names[i]);
    }
    free(w->shards);
    free(w->shard_names);
    hf_quant_free(w);
    if (w->format == CANDLE_WEIGHTS_HF_DIR)
        for (int64_t i = 0; i < w->n_entries; i++) {
            free((char *)w->entries[i].info.name);
            for (int64_t k = 0; k < w->entries[i].n_parts; k++)
                free((char *)w->entries[i].parts[k].info.name);
            free(w->entries[i].parts);
        }
    free(w->entries);
    free(w->by_name);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].s);
    }
    free(w->kv);
    for (int i = 0; i < w->n_made; i++) {
        free(w->made[i].name);
        free(w->made[i].v);
    }
    free(w->made);
    free(w->path);
    free(w);
}

candle_weights_format candle_weights_get_format(const candle_weights *w) { return w->format; }
const char *candle_weights_format_name(const candle_weights *w) {
    return w->format == CANDLE_WEIGHTS_GGUF ? "gguf" : "safetensors";
}
const char *candle_weights_path(const candle_weights *w) { return w->path; }
const candle_gguf *candle_weights_gguf(const candle_weights *w) { return w->gguf; }

size_t candle_weights_file_size(const candle_weights *w) {
    if (w->gguf) return candle_gguf_file_size(w->gguf);
    size_t n = 0;
    for (int i = 0; i < w->n_shards; i++) n += candle_safetensors_file_size(w->shards[i]);
    return n;
}

int candle_weights_n_files(const candle_weights *w) { return w->gguf ? 1 : w->n_shards; }

/* ---- metadata: the source's own values first, then the GGUF file's ---- */

bool candle_weights_get_i64(const candle_weights *w, const char *key, int64_t *out) {
    const weights_kv *kv = weights_find_kv(w, key);
    if (!kv) return w->gguf && candle_gguf_get_i64(w->gguf, key, out);
    if (kv->type == CANDLE_GGUF_INT64) return *out = kv->i, true;
    if (kv->type == CANDLE_GGUF_FLOAT64 && kv->f == floor(kv->f) && fabs(kv->f) < 9.0e18)
        return *out = (int64_t)kv->f, true;
    return false;
}

bool candle_weights_get_f64(const candle_weights *w, const char *key, double *out) {
    const weights_kv *kv = weights_find_kv(w, key);
    if (!kv) {
        float f;
        if (!w->gguf || !candle_gguf_get_f32(w->gguf, key, &f)) return false;
        return *out = f, true;
    }
    if (kv->type == CANDLE_GGUF_FLOAT64) return *out = kv->f, true;
    if (kv->type == CANDLE_GGUF_INT64 && llabs(kv->i) < (1LL << 53)) return *out = (double)kv->i, true;
    return false;
}

bool candle_weights_get_bool(const candle_weights *w, const char *key, bool *out) {
    const weights_kv *kv = weights_find_kv(w, key);
    if (!kv) return w->gguf && candle_gguf_get_bool(w->gguf, key, out);
    if (kv->type != CANDLE_GGUF_BOOL) return false;
    return *out = kv->b, true;
}

bool candle_weights_get_str(const candle_weights *w, const char *key, const char **s,
                            size_t *len) {
    const weights_kv *kv = weights_find_kv(w, key);
    if (!kv) return w->gguf && candle_gguf_get_str(w->gguf, key, s, len);
    if (kv->type != CANDLE_GGUF_STRING) return false;
    *s = kv->s;
    *len = kv->len;
    return true;
}

static int64_t n_file_kv(const candle_weights *w) { return w->gguf ? candle_gguf_n_kv(w->gguf) : 0; }

int64_t candle_weights_n_kv(const candle_weights *w) { return n_file_kv(w) + w->n_kv; }

const char *candle_weights_key(const candle_weights *w, int64_t i) {
    int64_t nf = n_file_kv(w);
    if (i < 0 || i >= nf + w->n_kv) return NULL;
    return i < nf ? candle_gguf_key(w->gguf, i) : w->kv[i - nf].key;
}

candle_gguf_type candle_weights_kv_type(const candle_weights *w, int64_t i) {
    int64_t nf = n_file_kv(w);
    if (i < 0 || i >= nf + w->n_kv) return CANDLE_GGUF_TYPE_COUNT;
    return i < nf ? candle_gguf_kv_type(w->gguf, i) : w->kv[i - nf].type;
}

const char *candle_weights_kv_str(const candle_weights *w, int64_t i, char *buf, size_t n) {
    int64_t nf = n_file_kv(w);
    if (!buf || !n) return buf;
    buf[0] = 0;
    if (i < 0 || i >= nf + w->n_kv) return buf;
    if (i < nf) return candle_gguf_kv_str(w->gguf, i, buf, n);
    const weights_kv *kv = &w->kv[i - nf];
    switch (kv->type) {
    case CANDLE_GGUF_INT64: snprintf(buf, n, "%" PRId64, kv->i); break;
    case CANDLE_GGUF_FLOAT64: snprintf(buf, n, "%g", kv->f); break;
    case CANDLE_GGUF_BOOL: snprintf(buf, n, "%s", kv->b ? "true" : "false"); break;
    default: {
        char esc[128];
        candle_escape_text(kv->s, kv->len, esc, sizeof esc);
        if (kv->len + 3 <= n && strlen(esc) == kv->len) snprintf(buf, n, "\"%s\"", esc);
        else snprintf(buf, n, "\"%.*s...\" (%zu bytes)", (int)(n > 40 ? 20 : 0), esc, kv->len);
    }
    }
    return buf;
}

/* ---- tensors ---- */

int64_t candle_weights_n_tensors(const candle_weights *w) { return w->n_entries; }

const candle_weights_tensor_info *candle_weights_tensor(const candle_weights *w, int64_t i) {
    return i >= 0 && i < w->n_entries ? &w->entries[i].info : NULL;
}

int64_t candle_weights_find_tensor(const candle_weights *w, const char *name) {
    return cdl_names_find(w->by_name, w->n_entries, name);
}

const char *candle_weights_src_name(const candle_weights *w, const char *name, char *buf,
                                    size_t n) {
    if (!buf || !n) return buf;
    if (!w->hf || !hf_family_src_name(w->hf, name, buf, n)) snprintf(buf, n, "%s", name);
    return buf;
}

/* The f32 values of t (host or not), optionally plus one, as a new leaf. */
static candle_tensor *to_f32(candle_ctx *ctx, candle_tensor *t, bool add_one, const char *file) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    int64_t n = candle_tensor_numel(t);
    if (!tr->is_float || !tr->to_f32) {
        cdl_set_error(ctx, CANDLE_ERR_UNSUPPORTED, "%s: tensor '%s' of dtype %s cannot be given as f32",
                         file, t->name, tr->name);
        return NULL;
    }
    size_t nb = candle_tensor_nbytes(t);
    void *raw = malloc(nb ? nb : 1);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    candle_tensor *r = NULL;
    if (!raw || !f) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: %zu bytes converting '%s'", nb, t->name);
    } else if (!candle_tensor_get_bytes(t, 0, raw, nb)) {
        tr->to_f32(raw, f, n);
        if (add_one)
            for (int64_t i = 0; i < n; i++) f[i] += 1.0f;
        r = candle_tensor_new(ctx, CANDLE_DTYPE_F32, t->rank, t->shape);
        if (r && candle_tensor_set_bytes(r, 0, f, (size_t)n * sizeof *f)) r = NULL;
        if (r) candle_tensor_set_name(r, t->name);
    }
    free(raw);
    free(f);
    return r;
}

candle_tensor *candle_weights_load_linear(const candle_weights *w, candle_ctx *ctx, const char *name,
                                          candle_tensor **in_order) {
    int64_t i = name && w->quant ? candle_weights_find_tensor(w, name) : -1;
    *in_order = NULL;
    if (i >= 0 && w->entries[i].q) return hf_quant_load(w, &w->entries[i], ctx, name, in_order, NULL, NULL);
    return candle_weights_load_tensor(w, ctx, name);
}

candle_tensor *candle_weights_load_linear_split(const candle_weights *w, candle_ctx *ctx, const char *name,
                                                candle_tensor **in_order, candle_tensor **group_corr,
                                                int64_t *group) {
    int64_t i = name && w->quant ? candle_weights_find_tensor(w, name) : -1;
    *in_order = *group_corr = NULL;
    *group = 0;
    if (i >= 0 && w->entries[i].q)
        return hf_quant_load(w, &w->entries[i], ctx, name, in_order, group_corr, group);
    return candle_weights_load_tensor(w, ctx, name);
}

candle_tensor *candle_weights_load_tensor(const candle_weights *w, candle_ctx *ctx,
                                          const char *name) {
    int64_t i = name ? candle_weights_find_tensor(w, name) : -1;
    if (i < 0) {
        char src[160];
        candle_weights_src_name(w, name ? name : "(null)", src, sizeof src);
        if (strcmp(src, name ? name : ""))
            cdl_set_error(ctx, CANDLE_ERR_FORMAT, "%s: missing tensor '%s' (%s)", w->path, src,
                             name);
        else
            cdl_set_error(ctx, CANDLE_ERR_FORMAT, "%s: missing tensor '%s'", w->path, src);
        return NULL;
    }
    const weights_entry *e = &w->entries[i];
    if (e->made) {
        candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, e->info.shape, e->made);
        if (t) candle_tensor_set_name(t, name);
        return t;
    }
    if (w->gguf) return candle_gguf_load_tensor(w->gguf, ctx, name);
    if (e->parts) {
        candle_tensor *t = candle_tensor_new(ctx, e->info.dtype, e->info.rank, e->info.shape);
        size_t part = e->info.size / (size_t)e->n_parts;
        for (int64_t k = 0; t && k < e->n_parts; k++) {
            const weights_entry *p = &e->parts[k];
            candle_tensor *v = p->q ? hf_quant_load(w, p, ctx, p->info.name, NULL, NULL, NULL)
                                    : candle_safetensors_load_tensor(w->shards[p->shard], ctx, p->info.src_name);
            if (!v || candle_tensor_copy_bytes(t, (size_t)k * part, v, p->part_off, part)) t = NULL;
        }
        if (t) candle_tensor_set_name(t, name);
        return t;
    }
    if (e->q) return hf_quant_load(w, e, ctx, name, NULL, NULL, NULL);
    candle_tensor *t = candle_safetensors_load_tensor(w->shards[e->shard], ctx, e->info.src_name);
    if (!t) return NULL;
    candle_tensor_set_name(t, name);
    if (e->xf == XF_ADD_ONE || (e->xf == XF_F32 && t->dtype != CANDLE_DTYPE_F32))
        return to_f32(ctx, t, e->xf == XF_ADD_ONE, e->info.file);
    return t;
}
