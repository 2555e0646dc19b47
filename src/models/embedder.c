/* Sentence embeddings (encoder.h): the encoder model, its tokenizer and the
 * sentence-transformers modules of its directory, read from modules.json in
 * both the older layout (pooling_mode_*_tokens flags,
 * sentence_transformers.models.X) and sentence-transformers 5's (pooling_mode,
 * ...modules.x.X). A module Candle does not implement is refused by name. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candle/safetensors.h"
#include "candle/tokenizer.h"
#include "embedder-impl.h"
#include "tokenizer/tokenizer-impl.h"

candle_encoder_params candle_encoder_default_params(void) {
    return (candle_encoder_params){.n_threads = 0, .no_mmap = false, .weight_dtype = CANDLE_DTYPE_F32};
}

candle_embed_params candle_embed_default_params(void) {
    return (candle_embed_params){.pooling = CANDLE_POOLING_DEFAULT, .normalize = -1};
}

static bool exists(const char *path) {
    struct stat st;
    return !stat(path, &st);
}

candle_status encoder_read_json(const char *path, json_doc **out) {
    return json_parse_file(out, path, NULL, (size_t)16 << 20);
}

bool encoder_type_is(const json_value *type, const char *x) {
    const char *s;
    size_t len, n = strlen(x);
    return json_as_str(type, &s, &len) && len > n && s[len - n - 1] == '.' && !memcmp(s + len - n, x, n);
}

static candle_status read_pooling(candle_encoder *e, const char *path) {
    json_doc *d;
    candle_status s = encoder_read_json(path, &d);
    if (s) return s;
    const json_value *cfg = json_root(d);
    static const struct {
        const char *flag, *mode;
        candle_output_kind kind;
    } modes[] = {
        {"pooling_mode_mean_tokens", "mean", CANDLE_OUTPUT_POOLED_MEAN},
        {"pooling_mode_cls_token", "cls", CANDLE_OUTPUT_POOLED_CLS},
        {"pooling_mode_max_tokens", "max", CANDLE_OUTPUT_POOLED_MAX},
        {"pooling_mode_lasttoken", "lasttoken", CANDLE_OUTPUT_POOLED_LAST},
    };
    static const char *const unsupported[] = {"pooling_mode_mean_sqrt_len_tokens",
                                              "pooling_mode_weightedmean_tokens"};
    int found = 0;
    const json_value *mode = json_get(cfg, "pooling_mode");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        bool on = false;
        json_as_bool(json_get(cfg, modes[i].flag), &on);
        if (on || json_str_eq(mode, modes[i].mode)) {
            e->pool = modes[i].kind;
            found++;
        }
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        bool on = false;
        if (json_as_bool(json_get(cfg, unsupported[i]), &on) && on) found = -1;
    }
    bool include = true;
    json_as_bool(json_get(cfg, "include_prompt"), &include);
    e->exclude_prompt = !include;
    if (found != 1)
        s = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                             "%s: pooling must be exactly one of mean, cls, max, lasttoken%s", path,
                             mode && mode->type == JSON_STRING ? " (pooling_mode is another)" : "");
    json_free(d);
    return s;
}

static candle_status load_dense(dense_layer *L, const char *dir, const char *sub) {
    char path[4096];
    json_doc *d;
    snprintf(path, sizeof path, "%s/%s/config.json", dir, sub);
    candle_status s = encoder_read_json(path, &d);
    if (s) return s;
    const json_value *cfg = json_root(d), *act = json_get(cfg, "activation_function");
    bool bias = true;
    json_as_bool(json_get(cfg, "bias"), &bias);
    if (!json_as_i64(json_get(cfg, "in_features"), &L->n_in) ||
        !json_as_i64(json_get(cfg, "out_features"), &L->n_out) || L->n_in <= 0 || L->n_out <= 0 ||
        L->n_in > (1 << 20) || L->n_out > (1 << 20))
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: in_features/out_features missing or out of range", path);
    else if (encoder_type_is(act, "Tanh"))
        L->tanh = true;
    else if (act && !encoder_type_is(act, "Identity"))
        s = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: activation_function '%s' is not supported",
                             path, act->type == JSON_STRING ? act->u.str : "?");
    json_free(d);
    if (s) return s;
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, sub);
    candle_safetensors *st = NULL;
    if ((s = candle_safetensors_open(&st, path, NULL))) return s;
    candle_ctx *ctx = NULL;
    s = candle_ctx_init(&ctx, NULL);
    candle_tensor *w = s ? NULL : candle_safetensors_load_tensor(st, ctx, "linear.weight");
    candle_tensor *b = s || !bias ? NULL : candle_safetensors_load_tensor(st, ctx, "linear.bias");
    if (!s && (!w || (bias && !b))) s = cdl_set_error(NULL, candle_errcode(ctx), "%s", candle_errmsg(ctx));
    if (!s && (w->rank != 2 || w->shape[0] != L->n_out || w->shape[1] != L->n_in ||
               (b && (b->rank != 1 || b->shape[0] != L->n_out))))
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: linear.weight/bias shapes disagree with %lld -> %lld",
                             path, (long long)L->n_in, (long long)L->n_out);
    if (!s) {
        L->w = malloc((size_t)(L->n_in * L->n_out) * sizeof *L->w);
        L->b = b ? malloc((size_t)L->n_out * sizeof *L->b) : NULL;
        if (!L->w || (b && !L->b)) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s", path);
        if (!s) s = candle_tensor_to_f32(w, L->w);
        if (!s && b) s = candle_tensor_to_f32(b, L->b);
    }
    candle_ctx_free(ctx);
    candle_safetensors_close(st);
    return s;
}

/* A GGUF encoder's <arch>.pooling_type, as llama.cpp's converter writes it
 * from the sentence-transformers Pooling module (1 mean, 2 cls, 3 last;
 * absent: mean). None (0) and rank (4) are not sentence embeddings. */
static candle_status gguf_pooling(candle_encoder *e, const char *path, bool *given) {
    const char *arch = NULL;
    size_t alen = 0;
    int64_t type = -1;
    char key[160];
    if (!candle_weights_get_str(e->model->weights, "general.architecture", &arch, &alen)) return CANDLE_OK;
    snprintf(key, sizeof key, "%.*s.pooling_type", (int)(alen < 64 ? alen : 64), arch);
    if (!candle_weights_get_i64(e->model->weights, key, &type)) return CANDLE_OK;
    *given = true;
    static const candle_output_kind kinds[] = {CANDLE_OUTPUT_POOLED_MEAN, CANDLE_OUTPUT_POOLED_MEAN,
                                               CANDLE_OUTPUT_POOLED_CLS, CANDLE_OUTPUT_POOLED_LAST};
    if (type >= 1 && type <= 3) e->pool = kinds[type];
    else if (type != 0 && type != 4)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s = %lld is not a pooling type (0-4)", path, key,
                             (long long)type);
    return CANDLE_OK;
}

/* llama.cpp's names for the sentence-transformers Dense modules of a GGUF
 * (EmbeddingGemma's 2_Dense and 3_Dense): dense_2, then dense_3, each a
 * weight [out, in] and an optional bias. */
static candle_status gguf_dense(candle_encoder *e, const char *path) {
    static const char *const names[] = {"dense_2", "dense_3"};
    candle_ctx *ctx = NULL;
    candle_status s = CANDLE_OK;
    for (int k = 0; k < 2 && !s; k++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "%s.weight", names[k]);
        snprintf(bn, sizeof bn, "%s.bias", names[k]);
        if (candle_weights_find_tensor(e->model->weights, wn) < 0) continue;
        if (!ctx && (s = candle_ctx_init(&ctx, NULL))) break;
        candle_tensor *w = candle_weights_load_tensor(e->model->weights, ctx, wn), *b = NULL;
        if (w && candle_weights_find_tensor(e->model->weights, bn) >= 0)
            b = candle_weights_load_tensor(e->model->weights, ctx, bn);
        if (!w || (candle_weights_find_tensor(e->model->weights, bn) >= 0 && !b)) {
            s = cdl_set_error(NULL, candle_errcode(ctx), "%s: %s", path, candle_errmsg(ctx));
            break;
        }
        dense_layer *L = &e->dense[e->n_dense];
        if (w->rank != 2 || (b && (b->rank != 1 || b->shape[0] != w->shape[0]))) {
            s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: %s is not a [out, in] matrix with its [out] bias", path, wn);
            break;
        }
        L->n_out = w->shape[0];
        L->n_in = w->shape[1];
        L->w = malloc((size_t)(L->n_in * L->n_out) * sizeof *L->w);
        L->b = b ? malloc((size_t)L->n_out * sizeof *L->b) : NULL;
        e->n_dense++;
        if (!L->w || (b && !L->b)) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s of %s", wn, path);
        if (!s) s = candle_tensor_to_f32(w, L->w);
        if (!s && b) s = candle_tensor_to_f32(b, L->b);
    }
    candle_ctx_free(ctx);
    return s;
}

/* modules.json: Transformer first, then Pooling, Dense..., Normalize. */
static candle_status read_modules(candle_encoder *e, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    if (!exists(path)) return CANDLE_OK; /* a plain transformers model: mean, no normalising */
    json_doc *d;
    candle_status s = encoder_read_json(path, &d);
    const json_value *mods = json_root(d);
    if (!s && mods->type != JSON_ARRAY) s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: not an array", path);
    for (size_t i = 0; !s && i < mods->n; i++) {
        const json_value *type = json_get(json_at(mods, i), "type");
        const char *sub = "";
        json_as_str(json_get(json_at(mods, i), "path"), &sub, NULL);
        char mpath[4096];
        snprintf(mpath, sizeof mpath, "%s/%s/config.json", dir, sub);
        if (strstr(sub, "..")) s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: module path '%s'", path, sub);
        else if (encoder_type_is(type, "Transformer") && i == 0) continue;
        else if (encoder_type_is(type, "Pooling")) s = read_pooling(e, mpath);
        else if (encoder_type_is(type, "Normalize")) e->normalize = true;
        else if (encoder_type_is(type, "Dense") && e->n_dense < MAX_DENSE) s = load_dense(&e->dense[e->n_dense++], dir, sub);
        else
            s = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "%s: module %zu (%s) is not supported", path, i,
                                 type && type->type == JSON_STRING ? type->u.str : "no type");
    }
    json_free(d);
    return s;
}

/* An integer field of a JSON file of the directory, if any. */
static bool read_int_field(const char *dir, const char *file, const char *key, int64_t *out) {
    char path[4096];
    json_doc *d;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!exists(path) || encoder_read_json(path, &d)) return false;
    bool ok = json_as_i64(json_get(json_root(d), key), out);
    json_free(d);
    return ok;
}

/* sentence_bert_config.json's max_seq_length (else, as sentence-transformers
 * 6 does, tokenizer_config.json's model_max_length), at most the model's
 * positions. */
static void read_max_tokens(candle_encoder *e, const char *dir) {
    int64_t n;
    e->max_tokens = e->model->cfg.n_ctx_train;
    if (read_int_field(dir, "sentence_bert_config.json", "max_seq_length", &n) ||
        read_int_field(dir, "tokenizer_config.json", "model_max_length", &n))
        if (n > 0 && n < e->max_tokens) e->max_tokens = n;
}

/* config_sentence_transformers.json's prompts ({"query": "query: ", ...})
 * and default_prompt_name (refused when it names no prompt, as
 * sentence-transformers refuses it at load). */
static candle_status read_prompts(candle_encoder *e, const char *dir) {
    char path[4096];
    json_doc *d;
    e->default_prompt = -1;
    snprintf(path, sizeof path, "%s/config_sentence_transformers.json", dir);
    if (!exists(path)) return CANDLE_OK;
    candle_status s = encoder_read_json(path, &d);
    if (s) return s;
    const json_value *pr = json_get(json_root(d), "prompts"), *def = json_get(json_root(d), "default_prompt_name");
    if (pr && pr->type != JSON_OBJECT && pr->type != JSON_NULL)
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: prompts is %s, want an object", path,
                             json_type_name(pr->type));
    size_t n = pr && pr->type == JSON_OBJECT ? pr->n : 0;
    if (!s && n) {
        e->prompt_names = calloc(n, sizeof *e->prompt_names);
        e->prompts = calloc(n, sizeof *e->prompts);
        if (!e->prompt_names || !e->prompts) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: prompts");
    }
    for (size_t i = 0; !s && i < n; i++) {
        const char *text;
        size_t len;
        const char *key = json_obj_key(pr, i)->u.str;
        if (!json_as_str(json_obj_val(pr, i), &text, &len) || memchr(text, 0, len))
            s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: prompts.%s is not a string", path, key);
        else if (!(e->prompt_names[i] = strdup(key)) || !(e->prompts[i] = strdup(text)))
            s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: prompts");
        e->n_prompts = (int64_t)i + 1;
    }
    if (!s && def && def->type != JSON_NULL) {
        for (int64_t i = 0; i < e->n_prompts; i++)
            if (json_str_eq(def, e->prompt_names[i])) e->default_prompt = i;
        if (e->default_prompt < 0)
            s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: default_prompt_name %s%s%s is not one of the prompts",
                                 path, def->type == JSON_STRING ? "'" : "",
                                 def->type == JSON_STRING ? def->u.str : json_type_name(def->type),
                                 def->type == JSON_STRING ? "'" : "");
    }
    json_free(d);
    return s;
}

const char *candle_encoder_prompt(const candle_encoder *e, const char *name) {
    if (!e) return NULL;
    if (!name) return e->default_prompt >= 0 ? e->prompts[e->default_prompt] : NULL;
    for (int64_t i = 0; i < e->n_prompts; i++)
        if (!strcmp(e->prompt_names[i], name)) return e->prompts[i];
    return NULL;
}

const char *candle_encoder_prompt_name(const candle_encoder *e, int64_t i) {
    return e && i >= 0 && i < e->n_prompts ? e->prompt_names[i] : NULL;
}

void candle_encoder_free(candle_encoder *e) {
    if (!e) return;
    for (int64_t i = 0; i < e->n_prompts; i++) {
        free(e->prompt_names[i]);
        free(e->prompts[i]);
    }
    free(e->prompt_names);
    free(e->prompts);
    for (int i = 0; i < e->n_dense; i++) {
        free(e->dense[i].w);
        free(e->dense[i].b);
    }
    encoder_head_free(&e->head);
    candle_tokenizer_free(e->tok);
    candle_model_free(e->model);
    free(e);
}

candle_status candle_encoder_load(candle_encoder **out, const char *path, const candle_encoder_params *p) {
    if (!out || !path) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "encoder_load: NULL argument");
    *out = NULL;
    candle_encoder_params def = candle_encoder_default_params();
    if (!p) p = &def;
    candle_encoder *e = calloc(1, sizeof *e);
    if (!e) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: encoder");
    e->pool = CANDLE_OUTPUT_POOLED_MEAN;
    candle_model_params mp = candle_model_default_params();
    mp.n_threads = p->n_threads;
    mp.no_mmap = p->no_mmap;
    mp.weight_dtype = p->weight_dtype;
    candle_status s = candle_model_load(&e->model, path, &mp);
    /* A decoder embeds in a sentence-transformers folder (Qwen3-Embedding:
     * causal attention, the last token's state pooled): its modules.json
     * says how. */
    char mods[4096];
    snprintf(mods, sizeof mods, "%s/modules.json", path);
    bool hf = !s && candle_weights_get_format(e->model->weights) == CANDLE_WEIGHTS_HF_DIR;
    bool is_decoder = !s && e->model->cfg.kind == CANDLE_MODEL_DECODER_LM, pooled = false;
    if (is_decoder) e->pool = e->model->cfg.bidirectional ? CANDLE_OUTPUT_POOLED_MEAN : CANDLE_OUTPUT_POOLED_LAST;
    if (!s && !hf) s = gguf_pooling(e, path, &pooled);
    /* A GGUF decoder embeds when llama.cpp's converter marked it an
     * embedding model (a pooling type) or it attends both ways. */
    bool decoder = is_decoder && (hf ? exists(mods) : pooled || e->model->cfg.bidirectional);
    if (!s && e->model->cfg.kind != CANDLE_MODEL_ENCODER && !decoder)
        s = cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                             "encoder_load: %s is a %s model, not an encoder (a decoder embeds only in a "
                             "sentence-transformers folder, whose modules.json names its pooling, or as a GGUF "
                             "with a pooling type or bidirectional attention)",
                             path, candle_model_kind_name(e->model->cfg.kind));
    if (!s) s = candle_tokenizer_from_weights(&e->tok, e->model->weights);
    if (!s && !hf) s = gguf_dense(e, path);
    e->default_prompt = -1;
    if (!s && hf) s = read_modules(e, path);
    if (!s && hf) s = read_prompts(e, path);
    if (!s) s = encoder_head_load(e, path);
    if (!s) {
        read_max_tokens(e, path);
        e->dim = e->width = e->model->cfg.n_embd;
        for (int i = 0; i < e->n_dense && !s; i++) {
            if (e->dense[i].n_out > e->width) e->width = e->dense[i].n_out;
            if (e->dense[i].n_in != e->dim)
                s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: Dense module %d takes %lld features, gets %lld",
                                     path, i, (long long)e->dense[i].n_in, (long long)e->dim);
            e->dim = e->dense[i].n_out;
        }
    }
    if (s) {
        candle_encoder_free(e);
        return s;
    }
    *out = e;
    return CANDLE_OK;
}

const candle_model *candle_encoder_model(const candle_encoder *e) { return e->model; }
const candle_tokenizer *candle_encoder_tokenizer(const candle_encoder *e) { return e->tok; }
int64_t candle_encoder_dim(const candle_encoder *e) { return e->dim; }
int64_t candle_encoder_max_tokens(const candle_encoder *e) { return e->max_tokens; }

/* ids of a text as the reference tokenizes it for the model (special-token
 * text is matched, as `tokenizers` does by default): cut to max tokens
 * keeping the template's leading and trailing special tokens. */
candle_status encoder_tokenize(const candle_encoder *e, model_ws *ws, const char *text, size_t len,
                               bool no_truncate, const int32_t **ids, int64_t *n) {
    int64_t cap = (int64_t)len + 16, n_plain;
    int32_t *all = model_ws_buf(ws, WS_TOK_A, (size_t)cap * sizeof *all, "tokens"), *plain = NULL;
    candle_status s = all ? tok_scratch_begin(&ws->tok) : candle_last_error();
    if (!s) s = candle_tokenizer_encode(e->tok, text, len, true, true, all, cap, n);
    if (!s && *n > e->max_tokens && no_truncate)
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%" PRId64 " tokens exceed the model's %" PRId64
                             " (no_truncate)", *n, e->max_tokens);
    if (!s && *n > e->max_tokens) {
        if (!(plain = model_ws_buf(ws, WS_TOK_B, (size_t)cap * sizeof *plain, "tokens"))) s = candle_last_error();
        if (!s) s = candle_tokenizer_encode(e->tok, text, len, false, true, plain, cap, &n_plain);
        int64_t lead = 0;
        while (!s && lead + n_plain <= *n && memcmp(all + lead, plain, (size_t)n_plain * sizeof *plain)) lead++;
        int64_t trail = *n - n_plain - lead;
        if (!s && (lead + n_plain > *n || lead + trail >= e->max_tokens))
            s = cdl_set_error(NULL, CANDLE_ERR_INTERNAL, "cannot truncate around the special tokens");
        if (!s) {
            int64_t keep = e->max_tokens - lead - trail;
            memmove(all + lead + keep, all + *n - trail, (size_t)trail * sizeof *all);
            *n = e->max_tokens;
        }
    }
    tok_scratch_end(&ws->tok);
    if (!s && *n == 0) s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "an empty input");
    if (!s) *ids = all;
    return s;
}

tok_chunk *tok_chunk_begin(model_ws *ws) {
    tok_chunk *c = model_ws_buf(ws, WS_EMB_CHUNK, sizeof *c, "input chunk");
    if (c) {
        c->n = 0;
        c->used = 0;
    }
    return c;
}

candle_status tok_chunk_add(model_ws *ws, tok_chunk *c, const int32_t *ids, const int32_t *types, int64_t n) {
    size_t need = c->used + (size_t)n * (types ? 2 : 1);
    int32_t *buf = model_ws_grow(ws, WS_EMB_IDS, need * sizeof *buf, c->used * sizeof *buf, "input ids");
    if (!buf) return candle_last_error();
    int k = c->n++;
    c->off[k] = c->used;
    c->n_ids[k] = n;
    c->typed[k] = types != NULL;
    memcpy(buf + c->used, ids, (size_t)n * sizeof *buf);
    if (types) memcpy(buf + c->used + n, types, (size_t)n * sizeof *buf);
    c->used = need;
    return CANDLE_OK;
}

void tok_chunk_ptrs(model_ws *ws, tok_chunk *c) {
    const int32_t *buf = ws->buf[WS_EMB_IDS];
    for (int k = 0; k < c->n; k++) {
        c->ids[k] = buf + c->off[k];
        c->types[k] = c->typed[k] ? buf + c->off[k] + c->n_ids[k] : NULL;
    }
}

void encoder_dense_apply(const dense_layer *L, const float *x, float *y) {
    for (int64_t o = 0; o < L->n_out; o++) {
        double acc = L->b ? L->b[o] : 0;
        for (int64_t i = 0; i < L->n_in; i++) acc += (double)L->w[o * L->n_in + i] * x[i];
        y[o] = (float)(L->tanh ? tanh(acc) : acc);
    }
}

static void l2_normalize(float *x, int64_t n) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / fmax(sqrt(ss), 1e-12); /* torch.nn.functional.normalize's eps */
    for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] * inv);
}

static candle_output_kind pooling_of(const candle_encoder *e, candle_pooling p) {
    switch (p) {
    case CANDLE_POOLING_MEAN: return CANDLE_OUTPUT_POOLED_MEAN;
    case CANDLE_POOLING_CLS: return CANDLE_OUTPUT_POOLED_CLS;
    case CANDLE_POOLING_LAST: return CANDLE_OUTPUT_POOLED_LAST;
    case CANDLE_POOLING_MAX: return CANDLE_OUTPUT_POOLED_MAX;
    default: return e->pool;
    }
}

candle_status encoder_forward_pooled(const candle_model *m, model_ws *ws, const int32_t *const *ids,
                                     const int32_t *const *types, const int64_t *n_ids, int64_t n,
                                     candle_output_kind kind, float *pooled) {
    int64_t len = 0;
    for (int64_t k = 0; k < n; k++) len = n_ids[k] > len ? n_ids[k] : len;
    size_t cells = (size_t)(n * len);
    /* tokens [n, len], types [n, len] when given, then the mask [n, len] */
    int32_t *tok = model_ws_buf(ws, WS_EMB_IN, cells * (2 * sizeof *tok + 1), "forward inputs");
    if (!tok) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: forward inputs");
    int32_t *ty = types ? tok + cells : NULL;
    uint8_t *mask = (uint8_t *)(tok + 2 * cells);
    memset(tok, 0, cells * (types ? 2 : 1) * sizeof *tok);
    memset(mask, 0, cells);
    for (int64_t k = 0; k < n; k++) {
        memcpy(tok + k * len, ids[k], (size_t)n_ids[k] * sizeof *tok);
        if (types && types[k]) memcpy(ty + k * len, types[k], (size_t)n_ids[k] * sizeof *ty);
        memset(mask + k * len, 1, (size_t)n_ids[k]);
    }
    candle_forward_input in = {.tokens = tok, .mask = mask, .n_seq = n, .n_tokens = len, .type_ids = ty};
    return model_forward_ws(m, ws, &in, kind, pooled, (size_t)(n * m->cfg.n_embd));
}

/* Inputs i0.. (ids[k], n_ids[k] for k < n): pooled states in one forward,
 * then each one's Dense layers, dimensions and normalisation into out
 * [n, dim]. */
static candle_status embed_rows(const candle_encoder *e, model_ws *ws, int64_t i0, const int32_t *const *ids,
                                const int64_t *n_ids, int64_t n, const candle_embed_params *p, int64_t dim,
                                float *out) {
    const candle_model_config *c = &e->model->cfg;
    for (int64_t k = 0; k < n; k++) {
        for (int64_t j = 0; j < n_ids[k]; j++)
            if (ids[k][j] < 0 || ids[k][j] >= c->n_vocab)
                return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                     "embed: input %" PRId64 ": token %d at index %" PRId64
                                     " out of range [0, %" PRId64 ")", i0 + k, (int)ids[k][j], j, c->n_vocab);
    }
    /* pooled [n, n_embd], then two vectors of the widest layer */
    float *pooled = model_ws_buf(ws, WS_EMB_OUT, (size_t)(n * c->n_embd + 2 * e->width) * sizeof *pooled, "embed");
    candle_status s = pooled ? encoder_forward_pooled(e->model, ws, ids, NULL, n_ids, n, pooling_of(e, p->pooling),
                                                      pooled)
                             : cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: embed");
    float *buf = pooled ? pooled + n * c->n_embd : NULL;
    for (int64_t k = 0; !s && k < n; k++) {
        float *x = buf, *y = buf + e->width;
        memcpy(x, pooled + k * c->n_embd, (size_t)c->n_embd * sizeof *x);
        for (int i = 0; i < e->n_dense; i++) {
            encoder_dense_apply(&e->dense[i], x, y);
            float *t = x;
            x = y;
            y = t;
        }
        memcpy(out + k * dim, x, (size_t)dim * sizeof *out);
        if (p->normalize == 1 || (p->normalize < 0 && e->normalize)) l2_normalize(out + k * dim, dim);
    }
    return s;
}

/* What both entry points check; *dim for the run. */
static candle_status embed_begin(const candle_encoder *e, const void *inputs, int64_t n,
                                 const candle_embed_params *p, const float *out, size_t out_len,
                                 int64_t *dim) {
    if (!e || !inputs || !out || n <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "embed: NULL argument or no inputs");
    *dim = p->dimensions ? p->dimensions : e->dim;
    if (*dim <= 0 || *dim > e->dim)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "embed: dimensions %" PRId64 " outside 1..%" PRId64,
                                p->dimensions, e->dim);
    if (out_len / (size_t)*dim < (size_t)n)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "embed: output of %zu floats too small, need %zu",
                                out_len, (size_t)n * (size_t)*dim);
    return CANDLE_OK;
}

static candle_status input_error(int64_t i, candle_status s) {
    return cdl_set_error(NULL, s, "embed: input %" PRId64 ": %s", i, candle_last_errmsg());
}

/* The prompt a request asks for (encoder.h's rule), "" for none. */
static candle_status resolve_prompt(const candle_encoder *e, const candle_embed_params *p, const char **out) {
    const char *pr = p->prompt;
    if (!pr && p->prompt_name && !(pr = candle_encoder_prompt(e, p->prompt_name))) {
        char names[512] = "";
        for (int64_t i = 0; i < e->n_prompts && strlen(names) < 400; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "",
                     e->prompt_names[i]);
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "embed: prompt_name '%s' is not one of the model's "
                                "prompts (%s)", p->prompt_name, e->n_prompts ? names : "it has none");
    }
    if (!pr && !(pr = candle_encoder_prompt(e, NULL))) pr = "";
    if (*pr && e->exclude_prompt)
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "embed: the model's Pooling excludes the prompt's "
                                "tokens (include_prompt false), which Candle does not implement");
    *out = pr;
    return CANDLE_OK;
}

/* The text a prompt asks for: prompt + text (sentence-transformers
 * tokenizes the concatenation) in ws's WS_EMB_IN buffer, which is free
 * until the chunk's forward. */
static candle_status prompted(model_ws *ws, const char *prompt, size_t plen, const char **t, size_t *len) {
    if (!plen) return CANDLE_OK;
    char *joined = model_ws_buf(ws, WS_EMB_IN, plen + *len, "prompt");
    if (!joined) return candle_last_error();
    memcpy(joined, prompt, plen);
    memcpy(joined + plen, *t, *len);
    *t = joined;
    *len += plen;
    return CANDLE_OK;
}

candle_status candle_encoder_embed(const candle_encoder *e, const char *const *texts, const size_t *lens,
                                   int64_t n, const candle_embed_params *p, float *out, size_t out_len) {
    candle_embed_params def = candle_embed_default_params();
    if (!p) p = &def;
    int64_t dim;
    const char *prompt = "";
    candle_status s = embed_begin(e, texts, n, p, out, out_len, &dim);
    if (!s) s = resolve_prompt(e, p, &prompt);
    if (s) return s;
    size_t plen = strlen(prompt);
    model_ws *ws = model_ws_get(e->model, true);
    tok_chunk *ck = ws ? tok_chunk_begin(ws) : NULL;
    if (!ck) s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: embed");
    for (int64_t i = 0; i < n && !s; i++) {
        const char *t = texts[i] ? texts[i] : "";
        size_t len = lens ? lens[i] : strlen(t);
        const int32_t *ids = NULL;
        int64_t n_ids = 0;
        s = prompted(ws, prompt, plen, &t, &len);
        if (!s) s = encoder_tokenize(e, ws, t, len, p->no_truncate, &ids, &n_ids);
        if (!s) s = tok_chunk_add(ws, ck, ids, NULL, n_ids);
        if (s) {
            s = input_error(i, s);
            break;
        }
        if (p->n_tokens) p->n_tokens[i] = n_ids;
        if (ck->n == ENCODER_CHUNK || i == n - 1) {
            int64_t i0 = i + 1 - ck->n;
            tok_chunk_ptrs(ws, ck);
            s = embed_rows(e, ws, i0, ck->ids, ck->n_ids, ck->n, p, dim, out + i0 * dim);
            ck->n = 0;
            ck->used = 0;
        }
    }
    if (ws) model_ws_put(e->model, ws);
    return s;
}

candle_status candle_encoder_tokenize(const candle_encoder *e, const char *text, size_t len,
                                      const candle_embed_params *p, int32_t *ids, size_t cap, int64_t *n_ids) {
    candle_embed_params def = candle_embed_default_params();
    if (!p) p = &def;
    if (!e || !text || !ids || !n_ids) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenize: NULL argument");
    if (len == SIZE_MAX) len = strlen(text);
    const char *prompt = "";
    candle_status s = resolve_prompt(e, p, &prompt);
    if (s) return s;
    model_ws *ws = model_ws_get(e->model, false);
    if (!ws) return candle_last_error();
    const int32_t *all = NULL;
    int64_t n = 0;
    s = prompted(ws, prompt, strlen(prompt), &text, &len); /* as candle_encoder_embed: the prompt, then the text */
    if (!s) s = encoder_tokenize(e, ws, text, len, p->no_truncate, &all, &n);
    if (!s && (size_t)n > cap)
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "tokenize: %" PRId64 " ids, room for %zu", n, cap);
    if (!s) {
        memcpy(ids, all, (size_t)n * sizeof *ids);
        *n_ids = n;
    }
    model_ws_put(e->model, ws);
    return s;
}

candle_status candle_encoder_embed_tokens(const candle_encoder *e, const int32_t *const *ids,
                                          const int64_t *n_ids, int64_t n, const candle_embed_params *p,
                                          float *out, size_t out_len) {
    candle_embed_params def = candle_embed_default_params();
    if (!p) p = &def;
    int64_t dim;
    candle_status s = n_ids ? embed_begin(e, ids, n, p, out, out_len, &dim)
                            : cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "embed: NULL argument");
    if (s) return s;
    model_ws *ws = model_ws_get(e->model, true);
    if (!ws) return candle_last_error();
    int64_t cut[ENCODER_CHUNK];
    for (int64_t i0 = 0; i0 < n && !s; i0 += ENCODER_CHUNK) {
        int64_t m = n - i0 < ENCODER_CHUNK ? n - i0 : ENCODER_CHUNK;
        for (int64_t k = 0; k < m && !s; k++) {
            int64_t i = i0 + k, len = n_ids[i];
            if (!ids[i] || len <= 0) s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "an empty input");
            else if (len > e->max_tokens && p->no_truncate)
                s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "%" PRId64 " tokens exceed %" PRId64 " (no_truncate)",
                                  len, e->max_tokens);
            cut[k] = len > e->max_tokens ? e->max_tokens : len;
            if (!s && p->n_tokens) p->n_tokens[i] = cut[k];
            if (s) s = input_error(i, s);
        }
        if (!s) s = embed_rows(e, ws, i0, ids + i0, cut, m, p, dim, out + i0 * dim);
    }
    model_ws_put(e->model, ws);
    return s;
}
