/* Whisper's weight sources (whisper-src-impl.h): the dispatch by format,
 * CTranslate2 directories (model.bin, config.json, tokenizer.json) and
 * Hugging Face directories (config.json, *.safetensors,
 * generation_config.json, tokenizer.json) as transformers saves
 * WhisperForConditionalGeneration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/ct2.h"
#include "candle/safetensors.h"
#include "core/core-impl.h"
#include "core/json-impl.h"
#include "whisper-src-impl.h"

#define CFG_MAX_BYTES ((size_t)16 << 20)
#define HF_MAX_SHARDS 64

static bool file_in(const char *dir, const char *name) {
    char p[4096];
    int k = snprintf(p, sizeof p, "%s/%s", dir, name);
    return k > 0 && (size_t)k < sizeof p && !access(p, R_OK);
}

static candle_status tokenizer_json(const whisper_src *s, candle_tokenizer **tok) {
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", s->path);
    return candle_tokenizer_from_hf_file(tok, p, NULL);
}

/* Up to cap ids of a JSON array (non-integers skipped). */
static int json_ids(const json_value *arr, int32_t *out, int cap) {
    int n = 0;
    for (size_t i = 0; arr && arr->type == JSON_ARRAY && i < arr->n && n < cap; i++) {
        int64_t v;
        if (json_as_i64(json_at(arr, i), &v) && v >= 0 && v <= INT32_MAX) out[n++] = (int32_t)v;
    }
    return n;
}

/* [[layer, head], ...] */
static void json_align(const json_value *ah, whisper_cfg *cfg) {
    for (size_t i = 0; ah && ah->type == JSON_ARRAY && i < ah->n && cfg->n_align < WHISPER_MAX_ALIGN; i++) {
        int64_t L, H;
        const json_value *e = json_at(ah, i);
        if (e && e->type == JSON_ARRAY && e->n == 2 && json_as_i64(json_at(e, 0), &L) &&
            json_as_i64(json_at(e, 1), &H) && L >= 0 && L < INT16_MAX && H >= 0 && H < INT16_MAX) {
            cfg->align_l[cfg->n_align] = (int16_t)L;
            cfg->align_h[cfg->n_align++] = (int16_t)H;
        }
    }
}

static candle_dtype float_dtype(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16 ? t : CANDLE_DTYPE_COUNT;
}

/* ---- CTranslate2: model.bin's names are the vocabulary ---- */

static bool ct2_find(const whisper_src *s, const char *name, wsrc_tensor *t) {
    const candle_ct2 *m = s->impl;
    int64_t i = candle_ct2_find_var(m, name);
    const candle_ct2_var_info *v = i >= 0 ? candle_ct2_var(m, i) : NULL;
    if (!v || v->rank < 1 || v->rank > 3) return false;
    memset(t, 0, sizeof *t);
    t->rank = v->rank;
    memcpy(t->shape, v->shape, (size_t)v->rank * sizeof t->shape[0]);
    t->n_parts = 1;
    candle_dtype dt = v->ct2_dtype == CANDLE_CT2_F32   ? CANDLE_DTYPE_F32
                      : v->ct2_dtype == CANDLE_CT2_F16 ? CANDLE_DTYPE_F16
                      : v->ct2_dtype == CANDLE_CT2_BF16 ? CANDLE_DTYPE_BF16
                                                       : CANDLE_DTYPE_COUNT;
    t->part[0] = (wsrc_part){.data = v->data, .dtype = dt, .rows = v->shape[0]};
    return true;
}

/* A scalar attribute (num_heads) or -1. */
static int64_t ct2_scalar(const candle_ct2 *m, const char *name) {
    int64_t i = candle_ct2_find_var(m, name);
    const candle_ct2_var_info *v = i >= 0 ? candle_ct2_var(m, i) : NULL;
    if (!v || v->rank != 0) return -1;
    int16_t s16;
    int32_t s32;
    if (v->ct2_dtype == CANDLE_CT2_I16 && v->size == 2) return memcpy(&s16, v->data, 2), s16;
    if (v->ct2_dtype == CANDLE_CT2_I32 && v->size == 4) return memcpy(&s32, v->data, 4), s32;
    return -1;
}

static candle_status ct2_config(const whisper_src *s, const candle_tokenizer *tok, whisper_cfg *cfg) {
    (void)tok;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", s->path);
    json_doc *doc;
    candle_status st = json_parse_file(&doc, path, NULL, CFG_MAX_BYTES);
    if (st) return st;
    const json_value *root = json_root(doc);
    cfg->n_suppress = json_ids(json_get(root, "suppress_ids"), cfg->suppress, WHISPER_MAX_SUPPRESS);
    cfg->n_suppress_begin = json_ids(json_get(root, "suppress_ids_begin"), cfg->suppress_begin, WHISPER_MAX_SUPPRESS);
    cfg->n_lang = json_ids(json_get(root, "lang_ids"), cfg->lang_ids, WHISPER_MAX_LANGS);
    json_align(json_get(root, "alignment_heads"), cfg);
    json_free(doc);
    return CANDLE_OK;
}

static void ct2_close(whisper_src *s) { candle_ct2_close(s->impl); }

static candle_status open_ct2(whisper_src *s, bool no_mmap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model.bin", s->path);
    candle_ct2_open_params op = {.no_mmap = no_mmap};
    candle_ct2 *m = NULL;
    candle_status st = candle_ct2_open(&m, path, &op);
    if (st) return st;
    if (strcmp(candle_ct2_spec(m), "WhisperSpec")) {
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: spec %s, not WhisperSpec", path, candle_ct2_spec(m));
        candle_ct2_close(m);
        return st;
    }
    s->impl = m;
    s->file = "model.bin";
    s->n_head = ct2_scalar(m, "encoder/num_heads");
    if (ct2_scalar(m, "decoder/num_heads") != s->n_head) s->n_head = -1;
    s->find = ct2_find;
    s->tokenizer = tokenizer_json;
    s->config = ct2_config;
    s->close = ct2_close;
    return CANDLE_OK;
}

/* ---- Hugging Face: transformers' names, q/k/v kept apart ---- */

typedef struct hf_src {
    candle_safetensors *st[HF_MAX_SHARDS];
    int n_st;
    const char *prefix; /* "model." (WhisperForConditionalGeneration) or "" (WhisperModel) */
} hf_src;

static bool hf_part(const hf_src *h, const char *name, wsrc_part *p, int *rank, int64_t *shape) {
    char full[320];
    snprintf(full, sizeof full, "%s%s", h->prefix, name);
    for (int i = 0; i < h->n_st; i++) {
        int64_t k = candle_safetensors_find_tensor(h->st[i], full);
        const candle_safetensors_tensor_info *ti = k >= 0 ? candle_safetensors_tensor(h->st[i], k) : NULL;
        if (!ti) continue;
        if (ti->rank < 1 || ti->rank > 3) return false;
        const char *base = candle_safetensors_storage(h->st[i])->data;
        *p = (wsrc_part){.data = base + ti->offset, .dtype = float_dtype(ti->dtype), .rows = ti->shape[0]};
        *rank = ti->rank;
        memcpy(shape, ti->shape, (size_t)ti->rank * sizeof shape[0]);
        return true;
    }
    return false;
}

/* parts of "pre.<sub>.<leaf>" for each sub (NULL sub: a zero part of the
 * previous part's rows); the shapes must agree past the first dimension. */
static bool hf_parts(const hf_src *h, const char *pre, const char *const *subs, int n, const char *leaf,
                     wsrc_tensor *t) {
    memset(t, 0, sizeof *t);
    int have = -1;
    for (int i = 0; i < n; i++) {
        char name[320];
        int rank;
        int64_t shape[3];
        if (!subs[i]) continue;
        snprintf(name, sizeof name, "%s.%s.%s", pre, subs[i], leaf);
        if (!hf_part(h, name, &t->part[i], &rank, shape)) return false;
        if (have < 0) {
            t->rank = rank;
            memcpy(t->shape, shape, sizeof shape);
            t->shape[0] = 0;
        } else if (rank != t->rank || (rank > 1 && memcmp(shape + 1, t->shape + 1, (size_t)(rank - 1) * sizeof shape[0])))
            return false;
        t->shape[0] += shape[0];
        have = i;
    }
    if (have < 0) return false;
    for (int i = 0; i < n; i++)
        if (!subs[i]) { /* the key's bias: as many zeros as the value's */
            int64_t r = t->part[i + 1 < n ? i + 1 : i - 1].rows;
            t->part[i] = (wsrc_part){.data = NULL, .dtype = CANDLE_DTYPE_F32, .rows = r};
            t->shape[0] += r;
        }
    t->n_parts = n;
    return true;
}

/* CTranslate2 name -> transformers tensors. */
static bool hf_find(const whisper_src *s, const char *name, wsrc_tensor *t) {
    const hf_src *h = s->impl;
    static const struct {
        const char *ct2, *hf;
    } top[] = {
        {"encoder/conv1/weight", "encoder.conv1.weight"},
        {"encoder/conv1/bias", "encoder.conv1.bias"},
        {"encoder/conv2/weight", "encoder.conv2.weight"},
        {"encoder/conv2/bias", "encoder.conv2.bias"},
        {"encoder/position_encodings/encodings", "encoder.embed_positions.weight"},
        {"encoder/layer_norm/gamma", "encoder.layer_norm.weight"},
        {"encoder/layer_norm/beta", "encoder.layer_norm.bias"},
        {"decoder/layer_norm/gamma", "decoder.layer_norm.weight"},
        {"decoder/layer_norm/beta", "decoder.layer_norm.bias"},
        {"decoder/embeddings/weight", "decoder.embed_tokens.weight"},
        {"decoder/position_encodings/encodings", "decoder.embed_positions.weight"},
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(name, top[i].ct2)) {
            memset(t, 0, sizeof *t);
            t->n_parts = 1;
            return hf_part(h, top[i].hf, &t->part[0], &t->rank, t->shape);
        }
    /* side/layer_N/block/module[/leaf] */
    char side[16], block[32], rest[64];
    long long il;
    int used = 0;
    if (sscanf(name, "%15[a-z]/layer_%lld/%31[a-z_]/%63s%n", side, &il, block, rest, &used) != 4 ||
        (size_t)used != strlen(name) || il < 0 || (strcmp(side, "encoder") && strcmp(side, "decoder")))
        return false;
    char *slash = strrchr(rest, '/');
    if (!slash) return false;
    *slash = 0;
    const char *module = rest, *leaf = slash + 1;
    bool norm = !strcmp(module, "layer_norm");
    const char *hleaf = !strcmp(leaf, "gamma") || !strcmp(leaf, "weight") ? "weight"
                        : !strcmp(leaf, "beta") || !strcmp(leaf, "bias")  ? "bias"
                                                                          : NULL;
    if (!hleaf || norm != (!strcmp(leaf, "gamma") || !strcmp(leaf, "beta"))) return false;
    bool bias = !strcmp(hleaf, "bias");
    char pre[96];
    snprintf(pre, sizeof pre, "%s.layers.%lld", side, il);
    const char *one = NULL;
    if (!strcmp(block, "self_attention")) {
        if (norm) one = "self_attn_layer_norm";
        else if (!strcmp(module, "linear_0")) {
            const char *qkv[3] = {"self_attn.q_proj", bias ? NULL : "self_attn.k_proj", "self_attn.v_proj"};
            return hf_parts(h, pre, qkv, 3, hleaf, t);
        } else if (!strcmp(module, "linear_1")) one = "self_attn.out_proj";
    } else if (!strcmp(block, "attention") && !strcmp(side, "decoder")) {
        if (norm) one = "encoder_attn_layer_norm";
        else if (!strcmp(module, "linear_0")) one = "encoder_attn.q_proj";
        else if (!strcmp(module, "linear_1")) {
            const char *kv[2] = {bias ? NULL : "encoder_attn.k_proj", "encoder_attn.v_proj"};
            return hf_parts(h, pre, kv, 2, hleaf, t);
        } else if (!strcmp(module, "linear_2")) one = "encoder_attn.out_proj";
    } else if (!strcmp(block, "ffn")) {
        one = norm ? "final_layer_norm" : !strcmp(module, "linear_0") ? "fc1" : !strcmp(module, "linear_1") ? "fc2" : NULL;
    }
    return one && hf_parts(h, pre, &one, 1, hleaf, t);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* generation_config.json (config.json's copies for checkpoints older than
 * it): suppress_tokens, begin_suppress_tokens, lang_to_id, alignment_heads. */
static candle_status hf_config(const whisper_src *s, const candle_tokenizer *tok, whisper_cfg *cfg) {
    (void)tok;
    const char *names[2] = {"generation_config.json", "config.json"};
    for (int f = 0; f < 2; f++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", s->path, names[f]);
        if (f == 0 && !file_in(s->path, names[f])) continue;
        json_doc *doc;
        candle_status st = json_parse_file(&doc, path, NULL, CFG_MAX_BYTES);
        if (st) return st;
        const json_value *root = json_root(doc), *v;
        if (!cfg->n_suppress && (v = json_get(root, "suppress_tokens")))
            cfg->n_suppress = json_ids(v, cfg->suppress, WHISPER_MAX_SUPPRESS);
        if (!cfg->n_suppress_begin && (v = json_get(root, "begin_suppress_tokens")))
            cfg->n_suppress_begin = json_ids(v, cfg->suppress_begin, WHISPER_MAX_SUPPRESS);
        const json_value *langs = json_get(root, "lang_to_id");
        if (!cfg->n_lang && langs && langs->type == JSON_OBJECT) {
            for (size_t i = 0; i < langs->n && cfg->n_lang < WHISPER_MAX_LANGS; i++) {
                int64_t id;
                if (json_as_i64(json_obj_val(langs, i), &id) && id >= 0 && id <= INT32_MAX)
                    cfg->lang_ids[cfg->n_lang++] = (int32_t)id;
            }
            qsort(cfg->lang_ids, (size_t)cfg->n_lang, sizeof cfg->lang_ids[0], cmp_i32); /* by id, as CTranslate2's */
        }
        if (!cfg->n_align) json_align(json_get(root, "alignment_heads"), cfg);
        json_free(doc);
    }
    return CANDLE_OK;
}

static void hf_close(whisper_src *s) {
    hf_src *h = s->impl;
    for (int i = 0; h && i < h->n_st; i++) candle_safetensors_close(h->st[i]);
    free(h);
}

/* The shards of model.safetensors.index.json's weight_map, each once. */
static candle_status hf_open_index(hf_src *h, const char *dir, bool no_mmap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_doc *doc;
    candle_status st = json_parse_file(&doc, path, NULL, CFG_MAX_BYTES);
    if (st) return st;
    const json_value *map = json_get(json_root(doc), "weight_map");
    if (!map || map->type != JSON_OBJECT) st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: no weight_map object", path);
    const char *seen[HF_MAX_SHARDS];
    for (size_t i = 0; !st && i < map->n; i++) {
        const char *f = NULL;
        if (!json_as_str(json_obj_val(map, i), &f, NULL) || strchr(f, '/')) {
            st = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: weight_map[%zu] is not a file name", path, i);
            break;
        }
        int k = 0;
        while (k < h->n_st && strcmp(seen[k], f)) k++;
        if (k < h->n_st) continue;
        if (h->n_st == HF_MAX_SHARDS) {
            st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: more than %d shards", path, HF_MAX_SHARDS);
            break;
        }
        char sp[4400];
        snprintf(sp, sizeof sp, "%s/%s", dir, f);
        candle_safetensors_open_params op = {.no_mmap = no_mmap};
        st = candle_safetensors_open(&h->st[h->n_st], sp, &op);
        if (!st) seen[h->n_st++] = f;
    }
    json_free(doc);
    return st;
}

static candle_status open_hf(whisper_src *s, bool no_mmap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", s->path);
    json_doc *doc;
    candle_status st = json_parse_file(&doc, path, NULL, CFG_MAX_BYTES);
    if (st) return st;
    const json_value *root = json_root(doc);
    const char *mt = NULL, *act = NULL;
    json_as_str(json_get(root, "model_type"), &mt, NULL);
    json_as_str(json_get(root, "activation_function"), &act, NULL);
    int64_t he = -1, hd = -1;
    const json_value *se = json_get(root, "scale_embedding");
    if (!mt || strcmp(mt, "whisper"))
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: model_type %s, not whisper", path, mt ? mt : "(none)");
    else if (!json_as_i64(json_get(root, "encoder_attention_heads"), &he) ||
             !json_as_i64(json_get(root, "decoder_attention_heads"), &hd) || he < 1 || he != hd)
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                           "%s: encoder_attention_heads %lld, decoder_attention_heads %lld (want equal, positive)", path,
                           (long long)he, (long long)hd);
    else if (se && se->type == JSON_TRUE)
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: scale_embedding true (Whisper's is false)", path);
    if (!st && act && strcmp(act, "gelu"))
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: activation_function %s (want gelu)", path, act);
    json_free(doc);
    if (st) return st;
    hf_src *h = calloc(1, sizeof *h);
    if (!h) return cdl_set_error(NULL, CANDLE_ERR_OOM, "whisper: out of memory");
    s->impl = h;
    s->close = hf_close;
    if (file_in(s->path, "model.safetensors")) {
        snprintf(path, sizeof path, "%s/model.safetensors", s->path);
        candle_safetensors_open_params op = {.no_mmap = no_mmap};
        st = candle_safetensors_open(&h->st[0], path, &op);
        h->n_st = !st;
        s->file = "model.safetensors";
    } else if (file_in(s->path, "model.safetensors.index.json")) {
        st = hf_open_index(h, s->path, no_mmap);
        s->file = "model.safetensors.index.json";
    } else
        st = cdl_set_error(NULL, CANDLE_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", s->path);
    if (st) return st;
    wsrc_part p;
    int rank;
    int64_t shape[3];
    h->prefix = "model.";
    if (!hf_part(h, "encoder.conv1.weight", &p, &rank, shape)) h->prefix = "";
    s->n_head = he;
    s->find = hf_find;
    s->tokenizer = tokenizer_json;
    s->config = hf_config;
    return CANDLE_OK;
}

/* ---- dispatch ---- */

candle_status whisper_src_open(whisper_src *s, const char *path, bool no_mmap) {
    memset(s, 0, sizeof *s);
    size_t len = strlen(path);
    if (len >= sizeof s->path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper: path of %zu bytes", len);
    memcpy(s->path, path, len + 1);
    struct stat sb;
    if (stat(path, &sb)) return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: cannot be read", path);
    candle_status st;
    if (!S_ISDIR(sb.st_mode) && whisper_src_ggml_probe(path)) st = whisper_src_open_ggml(s, path, no_mmap);
    else if (!S_ISDIR(sb.st_mode))
        st = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                           "%s: a file; a Whisper model is a CTranslate2 or Hugging Face directory", path);
    else if (file_in(path, "model.bin")) st = open_ct2(s, no_mmap);
    else if (file_in(path, "config.json")) st = open_hf(s, no_mmap);
    else
        st = cdl_set_error(NULL, CANDLE_ERR_IO,
                           "%s: neither model.bin (CTranslate2) nor config.json (Hugging Face) in the directory", path);
    if (st && s->close) s->close(s);
    if (st) s->close = NULL;
    return st;
}

bool whisper_src_probe(const char *path) {
    struct stat sb;
    if (stat(path, &sb)) return false;
    if (!S_ISDIR(sb.st_mode)) return whisper_src_ggml_probe(path);
    if (file_in(path, "model.bin")) return true;
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", path);
    json_doc *doc;
    if (!file_in(path, "config.json") || json_parse_file(&doc, p, NULL, CFG_MAX_BYTES)) {
        candle_clear_last_error();
        return false;
    }
    bool yes = json_str_eq(json_get(json_root(doc), "model_type"), "whisper");
    json_free(doc);
    return yes;
}
