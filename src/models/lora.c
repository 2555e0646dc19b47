/* LoRA adapters (lora.h): pairs read from a GGUF LoRA or a PEFT directory,
 * checked against the model's weights, held as f32 in a context of their
 * own on the model's backend, and added to the decoder's linears by
 * lora_add when a computation names them. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/gguf.h"
#include "candle/safetensors.h"
#include "model-impl.h"
#include "../core/json-impl.h"

/* adapter_config.json is a few hundred bytes; a larger one is not one. */
#define LORA_CONFIG_MAX ((size_t)1 << 20)

typedef struct lora_pair {
    candle_tensor *a; /* [in, r]: lora_a [r, in] transposed, or NULL */
    candle_tensor *b; /* [r, out]: lora_b [out, r] transposed */
    float mult;       /* alpha / r (rsLoRA: alpha / sqrt(r)); 1 without alpha */
} lora_pair;

struct candle_lora {
    const candle_model *model;
    char *path;
    candle_ctx *ctx;   /* the pairs, on the model's backend */
    lora_pair *pairs;  /* [(n_layer + 1) * LORA_SLOTS]: layer il's slot at il * LORA_SLOTS + slot,
                        * the output head at n_layer * LORA_SLOTS */
    int64_t n_pairs, rank;
    size_t bytes;
};

/* What a loader has found of one adapter: where its pairs come from and
 * how they are scaled. */
typedef struct lora_src {
    candle_lora *l;
    const char *file;  /* for messages */
    bool interleaved;  /* Llama q/k rows in llama.cpp's order (a GGUF adapter) */
    double alpha;      /* 0: none */
    bool rslora;
    int64_t want_rank; /* PEFT's r (every pair), or 0 */
    candle_ctx *tmp;   /* CPU scratch for reading the source's tensors */
    candle_ctx_mark tmp_mark;
} lora_src;

static const struct {
    const char *suffix;
    lora_slot slot;
} slot_names[] = {
    {"attn_q.weight", LORA_Q},      {"attn_k.weight", LORA_K},     {"attn_v.weight", LORA_V},
    {"attn_qkv.weight", LORA_QKV},  {"attn_output.weight", LORA_O}, {"ffn_gate.weight", LORA_GATE},
    {"ffn_up.weight", LORA_UP},     {"ffn_down.weight", LORA_DOWN},
};

static lora_pair *pair_at(const candle_lora *l, int64_t il, lora_slot slot) {
    int64_t n_layer = l->model->cfg.n_layer;
    return &l->pairs[il < 0 ? n_layer * LORA_SLOTS : il * LORA_SLOTS + slot];
}

/* The base weight (transposed view [in, out]) a GGUF tensor name stands
 * for, with its layer (-1: output) and slot; NULL if the decoder has none. */
static candle_tensor *base_weight(const candle_model *m, const char *name, int64_t *il, lora_slot *slot) {
    if (!strcmp(name, "output.weight")) {
        *il = -1;
        *slot = LORA_Q;
        return m->output;
    }
    char *end;
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9') return NULL;
    long long v = strtoll(name + 4, &end, 10);
    if (*end != '.' || v < 0 || v >= m->cfg.n_layer) return NULL;
    const layer_weights *w = &m->layers[v];
    for (size_t i = 0; i < sizeof slot_names / sizeof *slot_names; i++) {
        if (strcmp(end + 1, slot_names[i].suffix)) continue;
        *il = v;
        *slot = slot_names[i].slot;
        candle_tensor *t[LORA_SLOTS] = {w->wq, w->wk, w->wv, w->wqkv, w->wo, w->w_gate, w->w_up, w->w_down};
        return t[*slot];
    }
    return NULL;
}

/* A source tensor as host f32 [rows, cols] (malloc'd), or NULL with the error set. */
static float *read_f32(lora_src *s, candle_tensor *t, const char *name, int64_t *rows, int64_t *cols) {
    if (!t) {
        cdl_set_error(NULL, candle_errcode(s->tmp), "lora: %s: %s", s->file, candle_errmsg(s->tmp));
        return NULL;
    }
    if (t->rank != 2 || t->shape[0] <= 0 || t->shape[1] <= 0) {
        char sh[64];
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' has shape %s, want a matrix", s->file,
                      name, candle_shape_str(t->rank, t->shape, sh, sizeof sh));
        return NULL;
    }
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    if (!tr->is_float && !(tr->is_quantized && tr->to_f32)) {
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' has dtype %s, want a float or quantized type",
                      s->file, name, candle_dtype_name(t->dtype));
        return NULL;
    }
    *rows = t->shape[0];
    *cols = t->shape[1];
    float *v = malloc((size_t)(*rows * *cols) * sizeof *v);
    if (!v) {
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: lora tensor '%s'", name);
        return NULL;
    }
    if (candle_tensor_to_f32(t, v)) {
        free(v);
        cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' cannot be read as f32", s->file, name);
        return NULL;
    }
    return v;
}

/* Llama's q/k output rows between Hugging Face's (i, i + d/2) pairing and
 * llama.cpp's (2i, 2i+1), per head, as its converter permutes them: b is
 * [out, r]. */
static candle_status permute_heads(float *b, int64_t out, int64_t r, int64_t n_head, bool to_interleaved) {
    if (n_head <= 0 || out % (2 * n_head))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %" PRId64 " rows are not %" PRId64 " heads of even size",
                             out, n_head);
    float *tmp = malloc((size_t)(out * r) * sizeof *tmp);
    if (!tmp) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: lora permute");
    int64_t hd = out / n_head, half = hd / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) {
                int64_t inter = h * hd + 2 * i + j, halves = h * hd + j * half + i;
                int64_t dst = to_interleaved ? inter : halves, src = to_interleaved ? halves : inter;
                memcpy(tmp + dst * r, b + src * r, (size_t)r * sizeof *tmp);
            }
    memcpy(b, tmp, (size_t)(out * r) * sizeof *b);
    free(tmp);
    return CANDLE_OK;
}

/* Does the model pair RoPE dimensions as llama.cpp's Llama files do? */
static bool base_interleaved(const candle_model *m) {
    bool v = false;
    candle_weights_get_bool(m->weights, "candle.rope.interleaved", &v);
    return v;
}

/* The pair (a [r, in], b [out, r] as stored, already read) for the base
 * weight `name` (GGUF spelling); shown names `an`/`bn` in messages. */
static candle_status add_pair(lora_src *s, const char *name, const char *an, const char *bn, float *a, int64_t ar,
                              int64_t ac, float *b, int64_t br, int64_t bc) {
    candle_lora *l = s->l;
    const candle_model *m = l->model;
    int64_t il;
    lora_slot slot;
    candle_tensor *w = base_weight(m, name, &il, &slot);
    if (!w) {
        const char *why = !strcmp(name, "token_embd.weight") || strstr(name, "_exps") || strstr(name, "ffn_gate_inp")
                              ? "an embedding, router or expert adapter is not supported"
                              : "it matches no linear weight of the model";
        return cdl_set_error(NULL, strstr(why, "not supported") ? CANDLE_ERR_UNSUPPORTED : CANDLE_ERR_FORMAT,
                             "lora: %s: tensor '%s' (base weight '%s'): %s (%s)", s->file, an, name, why,
                             candle_arch_name(m->cfg.arch));
    }
    int64_t in = w->shape[0], out = w->shape[1];
    if (ac != in || br != out || ar != bc)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "lora: %s: '%s' [%" PRId64 ", %" PRId64 "] and '%s' [%" PRId64 ", %" PRId64
                             "] do not fit base weight '%s' [%" PRId64 ", %" PRId64
                             "] (want [r, %" PRId64 "] and [%" PRId64 ", r])",
                             s->file, an, ar, ac, bn, br, bc, name, out, in, in, out);
    if (s->want_rank && ar != s->want_rank)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                             "lora: %s: '%s' has rank %" PRId64 " but r is %" PRId64 " (per-module ranks are not supported)",
                             s->file, an, ar, s->want_rank);
    lora_pair *p = pair_at(l, il, slot);
    if (p->a)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: two adapters for base weight '%s'", s->file, name);
    bool qk = il >= 0 && (slot == LORA_Q || slot == LORA_K);
    if (qk && m->cfg.arch == CANDLE_ARCH_LLAMA && s->interleaved != base_interleaved(m)) {
        int64_t nh = slot == LORA_Q ? m->cfg.n_head : m->cfg.n_head_kv;
        candle_status st = permute_heads(b, br, bc, nh, !s->interleaved);
        if (st) return st;
    }
    int64_t ash[2] = {ar, ac}, bsh[2] = {br, bc};
    candle_tensor *ta = candle_tensor_from_f32(l->ctx, CANDLE_DTYPE_F32, 2, ash, a);
    candle_tensor *tb = candle_tensor_from_f32(l->ctx, CANDLE_DTYPE_F32, 2, bsh, b);
    p->a = ta ? candle_transpose(l->ctx, ta, 0, 1) : NULL;
    p->b = tb ? candle_transpose(l->ctx, tb, 0, 1) : NULL;
    if (!p->a || !p->b)
        return cdl_set_error(NULL, candle_errcode(l->ctx), "lora: %s: %s", s->file, candle_errmsg(l->ctx));
    double r = (double)ar;
    p->mult = s->alpha == 0 ? 1.0f : (float)(s->rslora ? s->alpha / sqrt(r) : s->alpha / r);
    l->n_pairs++;
    if (ar > l->rank) l->rank = ar;
    l->bytes += (size_t)(ar * ac + br * bc) * sizeof(float);
    return CANDLE_OK;
}

/* Read both tensors (loaded into s->tmp) and add their pair. */
static candle_status take_pair(lora_src *s, const char *name, const char *an, candle_tensor *ta, const char *bn,
                               candle_tensor *tb) {
    int64_t ar, ac, br = 0, bc = 0;
    float *a = read_f32(s, ta, an, &ar, &ac), *b = a ? read_f32(s, tb, bn, &br, &bc) : NULL;
    candle_status st = a && b ? add_pair(s, name, an, bn, a, ar, ac, b, br, bc) : candle_last_error();
    free(a);
    free(b);
    candle_ctx_reset(s->tmp, s->tmp_mark);
    return st;
}

static bool ends_with(const char *s, const char *tail, size_t *stem) {
    size_t n = strlen(s), t = strlen(tail);
    if (n < t || strcmp(s + n - t, tail)) return false;
    *stem = n - t;
    return true;
}

/* ---- llama.cpp's GGUF LoRA ---- */

static bool gguf_str_is(const candle_gguf *g, const char *key, const char *want, const char **got, size_t *len) {
    *got = "(none)";
    *len = 6;
    return candle_gguf_get_str(g, key, got, len) && *len == strlen(want) && !memcmp(*got, want, *len);
}

static candle_status load_gguf(lora_src *s) {
    candle_gguf *g;
    candle_status st = candle_gguf_open(&g, s->l->path, NULL);
    if (st) return cdl_set_error(NULL, st, "lora: %s", candle_last_errmsg());
    const char *got;
    size_t len;
    const char *arch = candle_arch_name(s->l->model->cfg.arch);
    if (!gguf_str_is(g, "general.type", "adapter", &got, &len))
        st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: general.type is '%.*s', want 'adapter'", s->file,
                           (int)(len > 64 ? 64 : len), got);
    else if (!gguf_str_is(g, "adapter.type", "lora", &got, &len))
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "lora: %s: adapter.type is '%.*s', want 'lora'", s->file,
                           (int)(len > 64 ? 64 : len), got);
    else if (!gguf_str_is(g, "general.architecture", arch, &got, &len))
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "lora: %s: an adapter for '%.*s', the model is '%s'",
                           s->file, (int)(len > 64 ? 64 : len), got, arch);
    float alpha = 0;
    if (!st && candle_gguf_find_key(g, "adapter.lora.alpha") >= 0 && !candle_gguf_get_f32(g, "adapter.lora.alpha", &alpha))
        st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: adapter.lora.alpha is not a number", s->file);
    if (!st && (!isfinite(alpha) || alpha < 0))
        st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: adapter.lora.alpha %g", s->file, (double)alpha);
    s->alpha = alpha;
    s->interleaved = !strcmp(arch, "llama"); /* as weights.c reads llama.cpp's Llama files */
    char name[256], other[272];
    for (int64_t i = 0; !st && i < candle_gguf_n_tensors(g); i++) {
        const char *tn = candle_gguf_tensor(g, i)->name;
        size_t stem;
        bool is_a = ends_with(tn, ".lora_a", &stem), is_b = !is_a && ends_with(tn, ".lora_b", &stem);
        if (!is_a && !is_b) {
            st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' is not a LoRA tensor (.lora_a / .lora_b)",
                               s->file, tn);
            break;
        }
        if (stem >= sizeof name) {
            st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor name '%.64s...' too long", s->file, tn);
            break;
        }
        memcpy(name, tn, stem);
        name[stem] = 0;
        snprintf(other, sizeof other, "%s.%s", name, is_a ? "lora_b" : "lora_a");
        if (candle_gguf_find_tensor(g, other) < 0) {
            st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' has no '%s'", s->file, tn, other);
            break;
        }
        if (is_b) continue; /* taken with its lora_a */
        st = take_pair(s, name, tn, candle_gguf_load_tensor(g, s->tmp, tn), other,
                       candle_gguf_load_tensor(g, s->tmp, other));
    }
    candle_gguf_close(g);
    return st;
}

/* ---- PEFT directories ---- */

static candle_status peft_unsupported(lora_src *s, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "lora: %s: %s is not supported", s->file, what);
}

/* A list, object or string field that is present and not empty. */
static bool nonempty(const json_value *v) {
    return v && ((v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->n > 0 : v->type == JSON_STRING);
}

static candle_status peft_config(lora_src *s, const json_value *c, const json_value **targets) {
    bool b = false;
    const char *str;
    size_t len;
    int64_t r;
    double alpha;
    if (!c || c->type != JSON_OBJECT)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: not a JSON object", s->file);
    const json_value *pt = json_get(c, "peft_type");
    if (pt && !json_str_eq(pt, "LORA")) {
        if (!json_as_str(pt, &str, &len)) str = "?", len = 1;
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "lora: %s: peft_type '%.*s' is not LORA", s->file,
                             (int)(len > 64 ? 64 : len), str);
    }
    if (json_as_bool(json_get(c, "use_dora"), &b) && b) return peft_unsupported(s, "use_dora (DoRA)");
    if (json_as_bool(json_get(c, "fan_in_fan_out"), &b) && b) return peft_unsupported(s, "fan_in_fan_out");
    const json_value *bias = json_get(c, "bias");
    if (bias && bias->type != JSON_NULL && !json_str_eq(bias, "none")) return peft_unsupported(s, "bias other than 'none'");
    if (nonempty(json_get(c, "modules_to_save"))) return peft_unsupported(s, "modules_to_save");
    if (nonempty(json_get(c, "rank_pattern"))) return peft_unsupported(s, "rank_pattern");
    if (nonempty(json_get(c, "alpha_pattern"))) return peft_unsupported(s, "alpha_pattern");
    if (nonempty(json_get(c, "layer_replication"))) return peft_unsupported(s, "layer_replication");
    if (!json_as_i64(json_get(c, "r"), &r) || r <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: no positive integer field 'r'", s->file);
    if (!json_as_f64(json_get(c, "lora_alpha"), &alpha) || !isfinite(alpha) || alpha <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: no positive number field 'lora_alpha'", s->file);
    s->rslora = json_as_bool(json_get(c, "use_rslora"), &b) && b;
    s->want_rank = r;
    s->alpha = alpha;
    *targets = json_get(c, "target_modules");
    return CANDLE_OK;
}

/* Is module path's last component (or the path) in target_modules? A
 * string there is a regular expression PEFT matches: not checked. */
static bool targeted(const json_value *targets, const char *path, size_t n) {
    if (!targets || targets->type != JSON_ARRAY) return true;
    const char *dot = path + n;
    while (dot > path && dot[-1] != '.') dot--;
    for (size_t i = 0; i < targets->n; i++) {
        const char *t;
        size_t len;
        if (!json_as_str(json_at(targets, i), &t, &len)) continue;
        if ((len == (size_t)(path + n - dot) && !memcmp(t, dot, len)) || (len == n && !memcmp(t, path, n))) return true;
    }
    return false;
}

/* "base_model.model.<module>.lora_A.weight" -> module. */
static bool peft_module(const char *tn, const char *tail, size_t *off, size_t *stem) {
    static const char pre[] = "base_model.model.";
    if (!ends_with(tn, tail, stem)) return false;
    *off = strncmp(tn, pre, sizeof pre - 1) ? 0 : sizeof pre - 1;
    return *stem > *off;
}

static candle_status load_peft_tensors(lora_src *s, const candle_safetensors *sf, const json_value *targets) {
    char mod[256], hf[272], gg[256], other[300];
    candle_status st = CANDLE_OK;
    for (int64_t i = 0; !st && i < candle_safetensors_n_tensors(sf); i++) {
        const char *tn = candle_safetensors_tensor(sf, i)->name;
        size_t off, stem;
        bool is_a = peft_module(tn, ".lora_A.weight", &off, &stem);
        bool is_b = !is_a && peft_module(tn, ".lora_B.weight", &off, &stem);
        if (!is_a && !is_b) {
            if (strstr(tn, "lora_magnitude_vector")) return peft_unsupported(s, "DoRA (lora_magnitude_vector)");
            if (strstr(tn, "lora_embedding_")) return peft_unsupported(s, "an embedding adapter");
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                 "lora: %s: tensor '%s' is not a LoRA tensor (<module>.lora_A.weight / .lora_B.weight)",
                                 s->file, tn);
        }
        if (stem - off >= sizeof mod)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor name '%.64s...' too long", s->file, tn);
        memcpy(mod, tn + off, stem - off);
        mod[stem - off] = 0;
        snprintf(other, sizeof other, "%.*s.%s", (int)stem, tn, is_a ? "lora_B.weight" : "lora_A.weight");
        if (candle_safetensors_find_tensor(sf, other) < 0)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' has no '%s'", s->file, tn, other);
        if (is_b) continue;
        if (!targeted(targets, mod, strlen(mod)))
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s' adapts '%s', not in target_modules",
                                 s->file, tn, mod);
        snprintf(hf, sizeof hf, "%s.weight", mod);
        if (!candle_weights_map_hf_name(s->l->model->weights, hf, gg, sizeof gg))
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: tensor '%s': module '%s' matches no weight of the model (%s)",
                                 s->file, tn, mod, candle_arch_name(s->l->model->cfg.arch));
        st = take_pair(s, gg, tn, candle_safetensors_load_tensor(sf, s->tmp, tn), other,
                       candle_safetensors_load_tensor(sf, s->tmp, other));
    }
    return st;
}

static candle_status load_peft(lora_src *s) {
    const char *dir = s->l->path;
    size_t n = strlen(dir) + 32;
    char *cfg_path = malloc(n), *st_path = malloc(n);
    json_doc *doc = NULL;
    candle_safetensors *sf = NULL;
    const json_value *targets = NULL;
    candle_status st = cfg_path && st_path ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: lora");
    if (!st) {
        snprintf(cfg_path, n, "%s/adapter_config.json", dir);
        snprintf(st_path, n, "%s/adapter_model.safetensors", dir);
        s->file = "adapter_config.json";
        st = json_parse_file(&doc, cfg_path, "adapter_config.json", LORA_CONFIG_MAX);
        if (st) st = cdl_set_error(NULL, st, "lora: %s: %s", dir, candle_last_errmsg());
    }
    if (!st) st = peft_config(s, json_root(doc), &targets);
    if (!st) {
        s->file = "adapter_model.safetensors";
        st = candle_safetensors_open(&sf, st_path, NULL);
        if (st) st = cdl_set_error(NULL, st, "lora: %s: %s", dir, candle_last_errmsg());
    }
    if (!st) st = load_peft_tensors(s, sf, targets);
    candle_safetensors_close(sf);
    json_free(doc);
    free(cfg_path);
    free(st_path);
    return st;
}

/* ---- the API ---- */

candle_status candle_lora_load(candle_lora **out, const candle_model *m, const char *path) {
    if (!out || !m || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "lora_load: NULL argument");
    *out = NULL;
    if (model_need_decoder(m, "lora_load")) return candle_last_error();
    if (!m->layers) return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "lora_load: the model has no decoder layers");
    candle_lora *l = calloc(1, sizeof *l);
    lora_src s = {.l = l, .file = path};
    candle_status st = l ? CANDLE_OK : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: lora");
    if (!st) {
        l->model = m;
        l->path = malloc(strlen(path) + 1);
        l->pairs = calloc((size_t)((m->cfg.n_layer + 1) * LORA_SLOTS), sizeof *l->pairs);
        if (!l->path || !l->pairs) st = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: lora");
        else strcpy(l->path, path);
    }
    candle_ctx_params cp = candle_ctx_default_params();
    cp.backend = m->backend;
    if (!st) st = candle_ctx_init(&l->ctx, &cp);
    candle_ctx_params tp = candle_ctx_default_params();
    if (!st) st = candle_ctx_init(&s.tmp, &tp);
    if (!st) s.tmp_mark = candle_ctx_get_mark(s.tmp);
    if (!st) st = candle_weights_path_is_dir(path) ? load_peft(&s) : load_gguf(&s);
    if (!st && l->n_pairs == 0)
        st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "lora: %s: the adapter has no tensors", path);
    candle_ctx_free(s.tmp);
    if (st) {
        candle_lora_free(l);
        return st;
    }
    *out = l;
    return CANDLE_OK;
}

void candle_lora_free(candle_lora *l) {
    if (!l) return;
    candle_ctx_free(l->ctx);
    free(l->pairs);
    free(l->path);
    free(l);
}

const char *candle_lora_path(const candle_lora *l) { return l ? l->path : NULL; }
const candle_model *candle_lora_model(const candle_lora *l) { return l ? l->model : NULL; }
int64_t candle_lora_n_pairs(const candle_lora *l) { return l ? l->n_pairs : 0; }
int64_t candle_lora_rank(const candle_lora *l) { return l ? l->rank : 0; }
size_t candle_lora_bytes(const candle_lora *l) { return l ? l->bytes : 0; }

bool candle_lora_set_equal(const candle_lora_use *a, int na, const candle_lora_use *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i].lora != b[i].lora || a[i].scale != b[i].scale) return false;
    return true;
}

candle_status lora_check_use(candle_ctx *ctx, const candle_model *m, const candle_lora_use *use, int n,
                             const char *who) {
    if (n < 0 || (n > 0 && !use)) return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: %d LoRA adapters", who, n);
    for (int i = 0; i < n; i++) {
        if (!use[i].lora)
            return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: LoRA adapter %d is NULL", who, i);
        if (use[i].lora->model != m)
            return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: LoRA adapter %d ('%s') was loaded for another model",
                                 who, i, use[i].lora->path);
        if (!isfinite(use[i].scale))
            return cdl_set_error(ctx, CANDLE_ERR_INVALID_ARG, "%s: LoRA adapter %d has scale %g", who, i,
                                 (double)use[i].scale);
    }
    return CANDLE_OK;
}

candle_status candle_session_set_lora(candle_session *s, const candle_lora_use *use, int n) {
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "session_set_lora: NULL session");
    candle_ctx_clear_error(s->ctx);
    if (!use) n = 0;
    candle_status st = lora_check_use(s->ctx, s->model, use, n, "session_set_lora");
    if (st) return st;
    candle_lora_use *copy = NULL;
    if (n > 0) {
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy) return cdl_set_error(s->ctx, CANDLE_ERR_OOM, "out of memory: session LoRA set");
        memcpy(copy, use, (size_t)n * sizeof *copy);
    }
    free(s->lora);
    s->lora = copy;
    s->n_lora = n;
    return CANDLE_OK;
}

candle_tensor *lora_add(candle_ctx *ctx, const candle_lora_use *use, int n, int64_t il, lora_slot slot,
                        candle_tensor *h, candle_tensor *y) {
    for (int i = 0; i < n && y; i++) {
        if (!use[i].lora || use[i].scale == 0) continue;
        const lora_pair *p = pair_at(use[i].lora, il, slot);
        if (!p->a) continue;
        candle_tensor *d = candle_matmul(ctx, candle_matmul(ctx, h, p->a), p->b); /* [n, out] */
        y = candle_add(ctx, y, candle_scale(ctx, d, (double)use[i].scale * p->mult));
    }
    return y;
}
