/* The Hugging Face directory adapter: config.json for the hyperparameters,
 * model.safetensors or the shards model.safetensors.index.json names for
 * the tensors, tokenizer_config.json for the chat template. Every name is
 * translated by the model_type's table (hf_families.c); a tensor the family
 * does not know, a shard that is missing or lacks a tensor its index
 * promises, or a config field of the wrong type is refused, naming the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights-impl.h"

/* JSON files beside the weights are small; a larger one is not what it
 * claims to be. tokenizer.json is read by the tokenizer, not here. */
#define HF_JSON_MAX ((size_t)64 << 20)

static void join(char *buf, size_t n, const char *dir, const char *file) {
    snprintf(buf, n, "%s/%s", dir, file);
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* The bytes of a JSON file, parsed. `name` is how messages call it. */
static candle_status read_json(const char *path, const char *name, json_doc **out) {
    return json_parse_file(out, path, name, HF_JSON_MAX);
}

static candle_status read_config(candle_weights *w, json_doc **cfg_doc) {
    char path[4096];
    join(path, sizeof path, w->path, "config.json");
    if (!file_exists(path))
        return cdl_set_error(NULL, CANDLE_ERR_IO,
                                "%s: not a model: no config.json (a Hugging Face directory needs "
                                "config.json and model.safetensors)", w->path);
    candle_status s = read_json(path, "config.json", cfg_doc);
    if (s) return s;
    const json_value *cfg = json_root(*cfg_doc);
    if (cfg->type != JSON_OBJECT)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: not a JSON object");
    const char *mt;
    size_t len;
    if (!json_as_str(json_get(cfg, "model_type"), &mt, &len))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: no string field 'model_type'");
    if (!(w->hf = hf_family_find(mt, len)))
        return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED,
                                "config.json: model_type '%.*s' is not supported (supported: %s)",
                                (int)(len > 64 ? 64 : len), mt, hf_family_list());
    candle_status st = hf_family_config(w->hf, w, cfg, "config.json");
    return st ? st : hf_quant_config(w, cfg);
}

/* chat_template: a string, or a list of {name, template} of which "default"
 * (else the first) is the chat template. */
static candle_status read_chat_template(candle_weights *w) {
    char path[4096];
    join(path, sizeof path, w->path, "tokenizer_config.json");
    if (!file_exists(path)) return CANDLE_OK;
    json_doc *d;
    candle_status s = read_json(path, "tokenizer_config.json", &d);
    if (s) return s;
    const json_value *t = json_get(json_root(d), "chat_template");
    if (t && t->type == JSON_ARRAY) {
        const json_value *pick = NULL;
        for (size_t i = 0; i < t->n; i++)
            if (json_str_eq(json_get(json_at(t, i), "name"), "default") || !pick)
                pick = json_get(json_at(t, i), "template");
        t = pick;
    }
    const char *str;
    size_t len;
    if (json_as_str(t, &str, &len)) s = weights_add_str(w, "tokenizer.chat_template", str, len);
    json_free(d);
    return s;
}

/* A shard named by the index: a plain file name inside the directory. */
static bool shard_name_ok(const char *s, size_t len) {
    return len > 0 && len < 256 && !memchr(s, '/', len) && !memchr(s, '\\', len) &&
           !memchr(s, 0, len) && !(len <= 2 && s[0] == '.');
}

static int shard_index(candle_weights *w, const char *name, size_t len) {
    for (int i = 0; i < w->n_shards; i++)
        if (strlen(w->shard_names[i]) == len && !memcmp(w->shard_names[i], name, len)) return i;
    return -1;
}

static candle_status open_shard(candle_weights *w, const char *name, size_t len,
                                const candle_weights_params *p) {
    char **names = realloc(w->shard_names, (size_t)(w->n_shards + 1) * sizeof *names);
    if (names) w->shard_names = names;
    candle_safetensors **sh = realloc(w->shards, (size_t)(w->n_shards + 1) * sizeof *sh);
    if (sh) w->shards = sh;
    char *copy = malloc(len + 1);
    if (!names || !sh || !copy) {
        free(copy);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: shard list");
    }
    memcpy(copy, name, len);
    copy[len] = 0;
    char path[4096];
    join(path, sizeof path, w->path, copy);
    candle_safetensors_open_params sp = {.no_mmap = p && p->no_mmap};
    candle_safetensors *st = NULL;
    candle_status s = candle_safetensors_open(&st, path, &sp);
    if (s) {
        free(copy);
        return s;
    }
    w->shard_names[w->n_shards] = copy;
    w->shards[w->n_shards++] = st;
    return CANDLE_OK;
}

/* model.safetensors.index.json: every shard its weight_map names, each
 * opened once, and every tensor it promises present in its shard. */
static candle_status open_index(candle_weights *w, const char *path, const candle_weights_params *p) {
    static const char *name = "model.safetensors.index.json";
    json_doc *d;
    candle_status s = read_json(path, name, &d);
    if (s) return s;
    const json_value *map = json_get(json_root(d), "weight_map");
    if (!map || map->type != JSON_OBJECT || !map->n)
        s = cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: no weight_map object of tensor -> file", name);
    for (size_t i = 0; !s && map && i < map->n; i++) {
        const char *file, *tensor;
        size_t len, tlen;
        json_as_str(json_obj_key(map, i), &tensor, &tlen);
        if (!json_as_str(json_obj_val(map, i), &file, &len) || !shard_name_ok(file, len)) {
            s = cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                 "%s: weight_map['%.*s'] is not a file name in the directory", name,
                                 (int)(tlen > 128 ? 128 : tlen), tensor);
            break;
        }
        int k = shard_index(w, file, len);
        if (k < 0) {
            if ((s = open_shard(w, file, len, p))) break;
            k = w->n_shards - 1;
        }
        if (candle_safetensors_find_tensor(w->shards[k], tensor) < 0)
            s = cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                 "%s: tensor '%.*s' is mapped to %s, which does not hold it", name,
                                 (int)(tlen > 128 ? 128 : tlen), tensor, w->shard_names[k]);
    }
    json_free(d);
    return s;
}

static candle_status open_weights(candle_weights *w, const candle_weights_params *p) {
    char path[4096];
    join(path, sizeof path, w->path, "model.safetensors.index.json");
    if (file_exists(path)) return open_index(w, path, p);
    join(path, sizeof path, w->path, "model.safetensors");
    if (file_exists(path)) return open_shard(w, "model.safetensors", 17, p);
    return cdl_set_error(NULL, CANDLE_ERR_IO,
                            "%s: no model.safetensors or model.safetensors.index.json", w->path);
}

/* Every tensor of every shard, under its GGUF name. */
static candle_status list_tensors(candle_weights *w) {
    int64_t total = w->n_made;
    for (int i = 0; i < w->n_shards; i++) total += candle_safetensors_n_tensors(w->shards[i]);
    w->entries = calloc((size_t)(total ? total : 1), sizeof *w->entries);
    if (!w->entries) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
    for (int k = 0; k < w->n_shards; k++) {
        candle_safetensors *st = w->shards[k];
        for (int64_t i = 0; i < candle_safetensors_n_tensors(st); i++) {
            const candle_safetensors_tensor_info *t = candle_safetensors_tensor(st, i);
            char name[160], lin[256];
            weights_xform xf;
            bool is_qweight = false;
            const char *src = t->name;
            if (hf_family_ignored(t->name)) continue;
            /* a packed linear stands as its "<prefix>.weight"; its zeros,
             * scales and g_idx are read beside the qweight (weights_quant.c) */
            if (hf_quant_part(w, t->name, &is_qweight, lin, sizeof lin)) {
                if (!is_qweight) continue;
                src = lin;
            }
            if (!hf_family_tensor(w->hf, src, name, sizeof name, &xf))
                return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                        "%s: tensor '%s' is not part of a %s model",
                                        w->shard_names[k], t->name, hf_family_model_type(w->hf));
            weights_entry *e = &w->entries[w->n_entries];
            if (!(e->info.name = weights_strdup(name)))
                return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
            w->n_entries++;
            e->info.src_name = t->name;
            e->info.file = w->shard_names[k];
            e->info.dtype = xf == XF_NONE ? t->load_dtype : CANDLE_DTYPE_F32;
            e->info.rank = t->rank;
            memcpy(e->info.shape, t->shape, sizeof t->shape);
            e->info.offset = t->offset;
            e->info.size = t->size;
            e->shard = k;
            e->xf = xf;
            if (is_qweight && !(e->q = calloc(1, sizeof *e->q)))
                return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
        }
    }
    for (int k = 0; k < w->n_made; k++) {
        weights_entry *e = &w->entries[w->n_entries];
        if (!(e->info.name = weights_strdup(w->made[k].name)))
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
        w->n_entries++;
        e->info.src_name = e->info.name;
        e->info.file = "config.json";
        e->info.dtype = CANDLE_DTYPE_F32;
        e->info.rank = 1;
        e->info.shape[0] = w->made[k].n;
        e->info.size = (size_t)w->made[k].n * sizeof(float);
        e->shard = -1;
        e->made = w->made[k].v;
    }
    return weights_index(w);
}

/* "blk.N.<what>.E.weight" -> N, <what> (into buf) and E; false otherwise. */
static bool expert_name(const char *name, long *il, char *what, size_t n, long *ie) {
    char *end;
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9') return false;
    *il = strtol(name + 4, &end, 10);
    const char *a = end + 1, *dot = *end == '.' ? strchr(a, '.') : NULL;
    if (!dot || dot[1] < '0' || dot[1] > '9' || (size_t)(dot - a) >= n) return false;
    *ie = strtol(dot + 1, &end, 10);
    if (strcmp(end, ".weight")) return false;
    memcpy(what, a, (size_t)(dot - a));
    what[dot - a] = 0;
    return true;
}

/* The directory's experts (one tensor per expert: blk.N.ffn_gate.E.weight)
 * as GGUF stacks them: one blk.N.ffn_gate_exps.weight [n_expert, rows, cols]
 * per layer and projection, so that a directory and llama.cpp's GGUF files
 * load through the same tensors and `candle quantize` writes the stacked
 * form llama.cpp reads. Experts 0..n-1 must all be there, alike in dtype and
 * shape; a gap is refused naming the missing expert's tensor. */
static candle_status stack_experts(candle_weights *w) {
    for (int64_t i = 0; i < w->n_entries; i++) {
        long il, ie, jl, je;
        char what[32], w2[32];
        if (!expert_name(w->entries[i].info.name, &il, what, sizeof what, &ie)) continue;
        /* gather this layer's <what> experts */
        long hi = -1;
        for (int64_t j = 0; j < w->n_entries; j++)
            if (expert_name(w->entries[j].info.name, &jl, w2, sizeof w2, &je) && jl == il &&
                !strcmp(w2, what) && je > hi)
                hi = je;
        weights_entry *parts = calloc((size_t)(hi + 1), sizeof *parts);
        if (!parts) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: expert list");
        for (int64_t j = 0; j < w->n_entries; j++)
            if (expert_name(w->entries[j].info.name, &jl, w2, sizeof w2, &je) && jl == il &&
                !strcmp(w2, what))
                parts[je] = w->entries[j];
        const candle_weights_tensor_info *t0 = NULL;
        for (long e = 0; e <= hi; e++) {
            const candle_weights_tensor_info *t = &parts[e].info;
            bool bad = !t->name || (t0 && (t->dtype != t0->dtype || t->rank != 2 || t->size != t0->size ||
                                           t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1]));
            if (!bad && !t0 && t->rank != 2) bad = true;
            if (bad) {
                char gguf[96], src[160];
                snprintf(gguf, sizeof gguf, "blk.%ld.%s.%ld.weight", il, what, e);
                if (!hf_family_src_name(w->hf, gguf, src, sizeof src)) snprintf(src, sizeof src, "%s", gguf);
                candle_status s = cdl_set_error(
                    NULL, CANDLE_ERR_FORMAT,
                    t->name ? "%s: tensor '%s' differs from expert 0's in dtype or shape"
                            : "%s: missing tensor '%s' (experts 0..%ld of layer %ld)",
                    w->path, t->name ? t->src_name : src, hi, il);
                free(parts);
                return s;
            }
            if (!t0) t0 = t;
        }
        weights_entry st = parts[0];
        st.q = NULL; /* each part keeps its own packed linear */
        char name[96];
        snprintf(name, sizeof name, "blk.%ld.%s_exps.weight", il, what);
        if (!(st.info.name = weights_strdup(name))) {
            free(parts);
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
        }
        st.info.rank = 3;
        st.info.shape[0] = hi + 1;
        st.info.shape[1] = t0->shape[0];
        st.info.shape[2] = t0->shape[1];
        st.info.size = t0->size * (size_t)(hi + 1);
        st.parts = parts;
        st.n_parts = hi + 1;
        /* the stacked entry replaces the per-expert ones */
        int64_t k = 0;
        for (int64_t j = 0; j < w->n_entries; j++) {
            if (expert_name(w->entries[j].info.name, &jl, w2, sizeof w2, &je) && jl == il &&
                !strcmp(w2, what)) {
                free((char *)w->entries[j].info.name); /* the parts get their own below */
                continue;
            }
            w->entries[k++] = w->entries[j];
        }
        for (long e = 0; e <= hi; e++) {
            char pn[96];
            snprintf(pn, sizeof pn, "blk.%ld.%s.%ld.weight", il, what, e);
            parts[e].info.name = weights_strdup(pn);
        }
        w->entries[k++] = st;
        w->n_entries = k;
        i = -1; /* entries moved: scan again */
    }
    return weights_index(w);
}

/* GraniteMoE's blk.N.ffn_gate_up_exps.weight [n_expert, 2 * n_ff, n_embd]
 * (input_linear: each expert's gate rows, then its up rows) as the two
 * stacks GGUF has, ffn_gate_exps and ffn_up_exps [n_expert, n_ff, n_embd]:
 * each expert's half a part of the stored tensor, copied out at load. */
static candle_status split_gate_up(candle_weights *w) {
    static const char tail[] = ".ffn_gate_up_exps.weight";
    int64_t n0 = w->n_entries;
    for (int64_t i = 0; i < n0; i++) {
        weights_entry *e = &w->entries[i];
        size_t nl = strlen(e->info.name);
        if (nl < sizeof tail || strcmp(e->info.name + nl - (sizeof tail - 1), tail)) continue;
        const candle_weights_tensor_info *t = &e->info;
        if (t->rank != 3 || t->shape[0] <= 0 || t->shape[1] <= 0 || t->shape[1] % 2 || e->xf != XF_NONE || e->q)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                    "%s: tensor '%s' is not [n_expert, 2 * n_ff, n_embd]", w->path,
                                    t->src_name);
        int64_t ne = t->shape[0];
        size_t half = t->size / (size_t)ne / 2;
        weights_entry src = *e, halves[2];
        for (int h = 0; h < 2; h++) {
            char name[96];
            snprintf(name, sizeof name, "%.*s.%s_exps.weight", (int)(nl - (sizeof tail - 1)), t->name,
                     h ? "ffn_up" : "ffn_gate");
            weights_entry st = src;
            st.info.name = weights_strdup(name);
            st.info.shape[1] = t->shape[1] / 2;
            st.info.size = half * (size_t)ne;
            st.parts = calloc((size_t)ne, sizeof *st.parts);
            st.n_parts = ne;
            for (int64_t k = 0; st.parts && k < ne; k++) {
                char pn[128];
                snprintf(pn, sizeof pn, "%.96s#%lld", name, (long long)k);
                st.parts[k] = src;
                st.parts[k].info.name = weights_strdup(pn);
                st.parts[k].part_off = (size_t)(2 * k + h) * half;
            }
            halves[h] = st;
        }
        bool ok = halves[0].info.name && halves[1].info.name && halves[0].parts && halves[1].parts;
        for (int h = 0; h < 2; h++)
            for (int64_t k = 0; ok && k < ne; k++) ok = halves[h].parts[k].info.name;
        weights_entry *grown = ok ? realloc(w->entries, (size_t)(w->n_entries + 1) * sizeof *grown) : NULL;
        if (!grown) {
            for (int h = 0; h < 2; h++) {
                for (int64_t k = 0; halves[h].parts && k < ne; k++) free((char *)halves[h].parts[k].info.name);
                free(halves[h].parts);
                free((char *)halves[h].info.name);
            }
            return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: tensor list");
        }
        w->entries = grown;
        free((char *)w->entries[i].info.name);
        w->entries[i] = halves[0];
        w->entries[w->n_entries++] = halves[1];
    }
    return weights_index(w);
}

/* Untied models must have their output projection: tying it silently would
 * run a different model. */
static candle_status check_tied(candle_weights *w, const json_value *cfg) {
    bool tied = true;
    const json_value *t = json_get(cfg, "tie_word_embeddings");
    if (t && t->type != JSON_NULL && !json_as_bool(t, &tied))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: tie_word_embeddings is %s, want a boolean",
                                json_type_name(t->type));
    if (!tied && candle_weights_find_tensor(w, "output.weight") < 0)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "%s: config.json has tie_word_embeddings false but no file holds "
                                "lm_head.weight", w->path);
    return CANDLE_OK;
}

candle_status weights_open_hf(candle_weights *w, const candle_weights_params *p) {
    json_doc *cfg = NULL;
    candle_status s = read_config(w, &cfg);
    if (!s) s = weights_add_bool(w, "candle.rope.interleaved", false);
    if (!s) s = read_chat_template(w);
    if (!s) s = open_weights(w, p);
    if (!s) s = list_tensors(w);
    if (!s) s = hf_quant_entries(w);
    if (!s) s = stack_experts(w);
    if (!s) s = split_gate_up(w);
    if (!s) s = check_tied(w, json_root(cfg));
    json_free(cfg);
    return s;
}

bool candle_weights_map_hf_name(const candle_weights *w, const char *hf_name, char *buf, size_t n) {
    if (!w || !hf_name || !buf || !n) return false;
    const hf_family *f = w->hf;
    const char *arch;
    size_t len;
    if (!f && candle_weights_get_str(w, "general.architecture", &arch, &len)) f = hf_family_find(arch, len);
    weights_xform xf;
    return f && hf_family_tensor(f, hf_name, buf, n, &xf);
}
