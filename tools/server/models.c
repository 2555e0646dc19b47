/* The model registry of `candle serve`: several models in one server
 * (issue 21, part 6). Each entry is registered at startup without loading;
 * the first request that names it loads it in that request's thread (others
 * keep being served meanwhile; requests for the same model wait for that one
 * load), and a load that would pass --models-max or --mem-budget first
 * unloads the least recently used idle models. A request holds its entry
 * (refs) while it runs, a stream until its last chunk, so a model is never
 * unloaded under a request: with every loaded model in use, a load that
 * needs room answers 503 (Retry-After) instead of waiting, so a burst for
 * many models cannot hold connection threads indefinitely.
 *
 * One mutex guards the registry's states, counts and LRU times; loading runs
 * outside it, unloading (a scheduler with no request left, then the model's
 * memory) inside it, which takes milliseconds. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "candle/kv_pool.h"
#include "candle/speculative.h"
#include "server.h"

static const char *const state_names[] = {"unloaded", "loading", "loaded", "unloaded"};
static const char *const kind_names[] = {NULL, "decoder", "encoder", "speech"};

void srv_models_init(srv_ctx *c, const srv_load_params *lp) {
    c->load = *lp;
    c->default_model = 0;
    pthread_mutex_init(&c->models_mu, NULL);
    pthread_cond_init(&c->models_cv, NULL);
    srv_metrics_init(&c->retired);
}

static bool file_exists(const char *dir, const char *name) {
    char p[4096];
    int k = snprintf(p, sizeof p, "%s/%s", dir, name);
    return k > 0 && (size_t)k < sizeof p && !access(p, R_OK);
}


/* A sentence-transformers folder (modules.json) holding a decoder is an
 * embedding model (Qwen3-Embedding): served as an encoder too. */
static bool st_folder(const char *path) {
    return file_exists(path, "modules.json");
}

/* Bytes of a file, or of a folder's files (not recursing): what a load of it
 * is expected to map before its real size is known. */
static size_t path_bytes(const char *path) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (!S_ISDIR(st.st_mode)) return (size_t)st.st_size;
    DIR *d = opendir(path);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (!stat(p, &st) && S_ISREG(st.st_mode)) n += (size_t)st.st_size;
    }
    closedir(d);
    return n;
}

/* A model's default id: the base name, without .gguf, trailing slashes cut. */
static char *id_of(const char *path) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t n = len - start;
    if (n > 5 && !strncmp(path + len - 5, ".gguf", 5)) n -= 5;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, path + start, n);
        s[n] = 0;
    }
    return s;
}

static srv_model *find(const srv_ctx *c, const char *name) {
    for (int i = 0; i < c->n_models; i++)
        if (!strcmp(c->models[i]->id, name)) return c->models[i];
    return NULL;
}

static srv_model *entry_new(srv_ctx *c, const char *path, const char *id) {
    if (id && find(c, id)) {
        fprintf(stderr, "candle serve: two models are named '%s' (-m PATH:ALIAS names one)\n", id);
        return NULL;
    }
    srv_model **grown = realloc(c->models, (size_t)(c->n_models + 1) * sizeof *grown);
    srv_model *e = calloc(1, sizeof *e);
    if (grown) c->models = grown;
    if (!grown || !e || !(e->id = id ? strdup(id) : NULL) || !(e->path = strdup(path ? path : e->id))) {
        if (e) free(e->id);
        free(e);
        fprintf(stderr, "candle serve: out of memory\n");
        return NULL;
    }
    srv_metrics_init(&e->metrics);
    pthread_mutex_init(&e->enc_mu, NULL);
    c->models[c->n_models++] = e;
    return e;
}

bool srv_models_add(srv_ctx *c, const char *path, const char *id) {
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "candle serve: %s: %s\n", path, strerror(errno));
        return false;
    }
    char *own = id ? NULL : id_of(path);
    if (!id && !own) {
        fprintf(stderr, "candle serve: out of memory\n");
        return false;
    }
    if (!*(id ? id : own)) {
        fprintf(stderr, "candle serve: %s: an empty model name\n", path);
        free(own);
        return false;
    }
    srv_model *e = entry_new(c, path, id ? id : own);
    free(own);
    if (!e) return false;
    bool dir = S_ISDIR(st.st_mode);
    e->kind = candle_whisper_probe(path) ? SRV_KIND_SPEECH : dir && st_folder(path) ? SRV_KIND_ENCODER : SRV_KIND_UNKNOWN;
    e->bytes = path_bytes(path);
    return true;
}

/* path with its folder resolved (not its last part: two links to one file
 * are two models), malloc'ed; NULL when the folder is not there. */
static char *canonical(const char *full) {
    char path[4096];
    snprintf(path, sizeof path, "%s", full);
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--) path[n - 1] = 0;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? (slash == path ? "/" : path) : ".");
    char *d = realpath(dir, NULL);
    if (!d) return NULL;
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(d) + strlen(base) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", d, base);
    free(d);
    return s;
}

/* Is path a registered model's already? A -m model inside --models-dir
 * keeps its -m name and place rather than clashing. */
static bool registered(const srv_ctx *c, const char *path) {
    char *want = canonical(path);
    bool found = false;
    for (int i = 0; want && !found && i < c->n_models; i++) {
        char *have = c->models[i]->path ? canonical(c->models[i]->path) : NULL;
        found = have && !strcmp(have, want);
        free(have);
    }
    free(want);
    return found;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool srv_models_add_dir(srv_ctx *c, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "candle serve: --models-dir %s: %s\n", dir, strerror(errno));
        return false;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    struct dirent *de;
    while (ok && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (nm[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        struct stat st;
        if (stat(p, &st)) continue;
        size_t len = strlen(nm);
        bool gguf = S_ISREG(st.st_mode) && len > 5 && !strcmp(nm + len - 5, ".gguf");
        /* a Hugging Face folder (config.json), CTranslate2 (model.bin),
         * sentence-transformers (modules.json), or a whisper.cpp file */
        bool folder = S_ISDIR(st.st_mode) &&
                      (file_exists(p, "config.json") || file_exists(p, "model.bin") || file_exists(p, "modules.json"));
        if (!gguf && !folder && !candle_whisper_probe(p)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(names, cap * sizeof *g);
            if (!g) {
                ok = false;
                break;
            }
            names = g;
        }
        if (!(names[n] = strdup(nm))) ok = false;
        else n++;
    }
    closedir(d);
    if (!ok) fprintf(stderr, "candle serve: out of memory\n");
    qsort(names, n, sizeof *names, by_name);
    size_t before = (size_t)c->n_models;
    bool found = false; /* a model -m registered already */
    for (size_t i = 0; ok && i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (registered(c, p)) found = true;
        else ok = srv_models_add(c, p, NULL);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (ok && !found && (size_t)c->n_models == before) {
        fprintf(stderr, "candle serve: --models-dir %s holds no *.gguf file or model folder\n", dir);
        ok = false;
    }
    return ok;
}

srv_model *srv_model_adopt(srv_ctx *c, const char *id, srv_kind kind) {
    srv_model *e = entry_new(c, NULL, id);
    if (!e) return NULL;
    e->kind = kind;
    e->state = SRV_MODEL_LOADED;
    e->borrowed = true;
    return e;
}

/* --- loading and unloading ------------------------------------------------ */

static void set_error(srv_model *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(srv_model *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
}

/* Free the loaded objects (e not reachable by requests: refs 0, or never
 * published). The scheduler is stopped first: it holds no request a handler
 * still waits on (refs 0), and fails any a client left behind. */
static void unload_objects(srv_model *e) {
    srv_enc_batch_free(e); /* the server's own, borrowed models too */
    if (e->borrowed) return;
    srv_sched_stop(e->sched);
    e->sched = NULL;
    if (e->have_chat) candle_chat_template_free(&e->chat);
    e->have_chat = false;
    candle_tokenizer_free(e->tok);
    e->tok = NULL;
    candle_whisper_free(e->whisper);
    e->whisper = NULL;
    if (e->enc) candle_encoder_free(e->enc); /* and its model */
    else candle_model_free(e->model);
    e->enc = NULL;
    e->model = NULL;
}

/* Load e's objects (outside the registry's lock, so what others read under
 * it, its kind and bytes, come back in *kind and *bytes); false with
 * e->error. */
static bool load_objects(srv_ctx *c, srv_model *e, srv_kind *kind, size_t *bytes) {
    const srv_load_params *a = &c->load;
    const char *path = e->path;
    if (*kind == SRV_KIND_SPEECH) {
        candle_whisper_params wp = candle_whisper_default_params();
        wp.weight_dtype = a->weight_dtype;
        if (candle_whisper_load(&e->whisper, path, &wp)) {
            set_error(e, "%s: %s", path, candle_last_errmsg());
            return false;
        }
        *bytes = path_bytes(path);
        return true;
    }
    candle_model_params mp = {.n_threads = a->n_threads, .weight_dtype = a->weight_dtype};
    if (candle_model_load(&e->model, path, &mp)) {
        set_error(e, "%s: %s", path, candle_last_errmsg());
        return false;
    }
    if (candle_model_get_config(e->model)->kind == CANDLE_MODEL_ENCODER || st_folder(path)) {
        /* served through its sentence-embedding pipeline: /v1/embeddings, and
         * /v1/rerank or /v1/classify with a classifier head */
        candle_model_free(e->model);
        e->model = NULL;
        candle_encoder_params ep = candle_encoder_default_params();
        ep.n_threads = a->n_threads;
        ep.weight_dtype = a->weight_dtype;
        if (candle_encoder_load(&e->enc, path, &ep)) {
            set_error(e, "%s: %s", path, candle_last_errmsg());
            return false;
        }
        e->model = (candle_model *)candle_encoder_model(e->enc);
        *kind = SRV_KIND_ENCODER;
        *bytes = candle_model_weight_bytes(e->model);
        return true;
    }
    *kind = SRV_KIND_DECODER;
    if (candle_tokenizer_from_weights(&e->tok, candle_model_weights(e->model))) {
        set_error(e, "%s: tokenizer: %s", path, candle_last_errmsg());
        return false;
    }
    const char *tmpl = NULL;
    size_t len = 0;
    candle_weights_get_str(candle_model_weights(e->model), "tokenizer.chat_template", &tmpl, &len);
    e->have_chat = !candle_chat_template_init(&e->chat, tmpl, len, a->chat_template);
    if (!e->have_chat && a->chat_template) {
        set_error(e, "%s: %s", path, candle_last_errmsg());
        return false;
    }
    if (a->draft_model) {
        /* candle_spec_init checks the draft's vocabulary as `candle run
         * --draft-model` does (a small session: only the check is wanted) */
        candle_spec_params cp = candle_spec_default_params();
        cp.draft_model = a->draft_model;
        cp.draft_session.n_ctx = 16;
        candle_spec *chk = NULL;
        if (candle_spec_init(&chk, e->model, e->tok, &cp)) {
            set_error(e, "--draft-model: %s", candle_last_errmsg());
            return false;
        }
        candle_spec_free(chk);
    }
    if (!e->have_chat)
        fprintf(stderr, "candle serve: %s: no known chat template: /v1/chat/completions disabled for it\n", e->id);
    const candle_model_config *mc = candle_model_get_config(e->model);
    int64_t n_ctx = a->n_ctx < mc->n_ctx_train ? a->n_ctx : mc->n_ctx_train;
    e->max_tokens_limit = n_ctx;
    size_t bb = candle_kv_pool_block_bytes(e->model, a->kv_type);
    if (a->kv_mem > 0 && (size_t)a->kv_mem < bb) {
        set_error(e, "--kv-mem %lld is less than one KV block of %s (%zu bytes)", (long long)a->kv_mem, e->id, bb);
        return false;
    }
    srv_sched_params sp = {.n_slots = a->parallel, .n_ctx = n_ctx, .kv_mem = a->kv_mem, .kv_type = a->kv_type,
                           .queue_cap = a->queue, .prefill_chunk = a->prefill_chunk,
                           .batch_size = a->batch_size, .itl_stretch = a->itl_stretch,
                           .n_threads = a->n_threads, .lookup_ngram = a->lookup_ngram, .n_draft = a->n_draft,
                           .draft_model = a->draft_model, .draft_p_min = a->draft_p_min,
                           .draft_no_timing = a->draft_no_timing};
    if (srv_sched_start(&e->sched, e->model, e->tok, &sp, &e->metrics)) {
        set_error(e, "%s: %s", e->id, candle_last_errmsg());
        return false;
    }
    /* the pool srv_sched_start made: every slot's context, or --kv-mem */
    int64_t blocks = (int64_t)a->parallel * ((n_ctx + CANDLE_KV_BLOCK - 1) / CANDLE_KV_BLOCK);
    if (a->kv_mem > 0 && a->kv_mem / (int64_t)bb < blocks) blocks = a->kv_mem / (int64_t)bb;
    *bytes = candle_model_weight_bytes(e->model) + (size_t)blocks * bb;
    return true;
}

/* Under mu: entries loaded or loading, and their bytes, e left out. */
static void usage(const srv_ctx *c, const srv_model *except, int *n, size_t *bytes) {
    *n = 0;
    *bytes = 0;
    for (int i = 0; i < c->n_models; i++) {
        const srv_model *m = c->models[i];
        if (m == except || (m->state != SRV_MODEL_LOADED && m->state != SRV_MODEL_LOADING)) continue;
        (*n)++;
        *bytes += m->bytes;
    }
}

/* Under mu, m loaded and idle: unload it. Its scheduler's counters carry
 * on in c->retired, so /metrics' totals never go down. */
static void unload_locked(srv_ctx *c, srv_model *m, const char *why) {
    unload_objects(m);
    m->state = SRV_MODEL_UNLOADED;
    m->error[0] = 0;
    srv_metrics_add(&c->retired, &m->metrics, false);
    srv_metrics_reset(&m->metrics);
    c->n_unloads++;
    if (!c->cfg.quiet) fprintf(stderr, "candle serve: unloaded %s (%s)\n", m->id, why);
}

/* Under mu: unload the least recently used idle loaded model other than
 * except; false when none is idle. */
static bool evict_one(srv_ctx *c, const srv_model *except) {
    srv_model *lru = NULL;
    for (int i = 0; i < c->n_models; i++) {
        srv_model *m = c->models[i];
        if (m == except || m->state != SRV_MODEL_LOADED || m->refs > 0 || m->borrowed) continue;
        if (!lru || m->last_use < lru->last_use) lru = m;
    }
    if (!lru) return false;
    unload_locked(c, lru, "least recently used");
    return true;
}

/* Under mu: unload idle models until e (its bytes as they stand) fits the
 * limits; false with the reason in msg when it cannot. */
static bool make_room(srv_ctx *c, const srv_model *e, char *msg, size_t cap) {
    for (;;) {
        int n;
        size_t bytes;
        usage(c, e, &n, &bytes);
        bool count_ok = !c->models_max || n + 1 <= c->models_max;
        bool mem_ok = !c->mem_budget || bytes + e->bytes <= (size_t)c->mem_budget;
        if (count_ok && mem_ok) return true;
        if (!mem_ok && e->bytes > (size_t)c->mem_budget) {
            snprintf(msg, cap, "model '%s' needs %zu bytes, more than --mem-budget %lld", e->id, e->bytes,
                     (long long)c->mem_budget);
            return false;
        }
        if (evict_one(c, e)) continue;
        if (!count_ok)
            snprintf(msg, cap, "cannot load model '%s': %d models are loaded (--models-max %d) and all are in "
                     "use; retry later", e->id, n, c->models_max);
        else
            snprintf(msg, cap, "cannot load model '%s' (%zu bytes): the models in use hold %zu of --mem-budget "
                     "%lld bytes; retry later", e->id, e->bytes, bytes, (long long)c->mem_budget);
        return false;
    }
}

/* Under mu, e UNLOADED or FAILED: load it, the lock released meanwhile.
 * Returns 0 (LOADED), or the HTTP status refusing it with msg. */
static int load_locked(srv_ctx *c, srv_model *e, char *msg, size_t cap) {
    if (!make_room(c, e, msg, cap)) return 503;
    e->state = SRV_MODEL_LOADING;
    e->error[0] = 0;
    pthread_mutex_unlock(&c->models_mu);
    double t0 = srv_now();
    srv_kind kind = e->kind;
    size_t bytes = e->bytes;
    bool ok = load_objects(c, e, &kind, &bytes);
    if (!ok) unload_objects(e);
    pthread_mutex_lock(&c->models_mu);
    e->kind = kind;
    if (ok) e->bytes = bytes;
    int status = 0;
    if (ok && !make_room(c, e, msg, cap)) {
        /* its real size (the KV pool's too) is past what the others leave */
        unload_objects(e);
        set_error(e, "%s", msg);
        e->state = SRV_MODEL_UNLOADED;
        status = 503;
    } else if (!ok) {
        e->state = SRV_MODEL_FAILED;
        c->n_load_failures++;
        snprintf(msg, cap, "cannot load model '%.150s': %.300s", e->id, e->error);
        status = 500;
        fprintf(stderr, "candle serve: %s\n", msg);
    } else {
        e->state = SRV_MODEL_LOADED;
        c->n_loads++;
        if (!c->cfg.quiet)
            fprintf(stderr, "candle serve: loaded %s (%s, %.1f MB) in %.2f s\n", e->id, kind_names[e->kind],
                    (double)e->bytes / 1e6, srv_now() - t0);
    }
    pthread_cond_broadcast(&c->models_cv);
    return status;
}

bool srv_model_load_now(srv_ctx *c, srv_model *e) {
    char msg[512];
    pthread_mutex_lock(&c->models_mu);
    int st = e->state == SRV_MODEL_LOADED ? 0 : load_locked(c, e, msg, sizeof msg);
    if (st && !e->error[0]) set_error(e, "%s", msg);
    pthread_mutex_unlock(&c->models_mu);
    return !st;
}

static void reply_not_found(srv_reply *out, const char *name) {
    char shown[160];
    size_t n = strlen(name);
    snprintf(shown, sizeof shown, "%.*s%s", (int)(n < 120 ? n : 120), name, n < 120 ? "" : "...");
    srv_reply_error(out, 404, "model", "model_not_found", "The model '%s' does not exist", shown);
    /* OpenAI's type for an unknown model, not the 404 of an unknown URL */
    json_t *j = json_loads(out->body, 0, NULL);
    json_t *err = json_object_get(j, "error");
    if (err) {
        json_object_set_new(err, "type", json_string("invalid_request_error"));
        char *s = srv_json_dumps(j, JSON_COMPACT);
        if (s) {
            free(out->body);
            out->body = s;
        }
    }
    json_decref(j);
}

static srv_model *resolve(srv_ctx *c, const char *name) {
    if (c->n_models == 0) return NULL;
    if (!name || !*name || !c->router) return c->models[c->default_model];
    srv_model *e = find(c, name);
    if (e) return e;
    /* the file's name as well as the id, for the ids taken from it */
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) {
        for (int i = 0; i < c->n_models; i++)
            if (strlen(c->models[i]->id) == n - 5 && !strncmp(c->models[i]->id, name, n - 5)) return c->models[i];
    }
    return NULL;
}

srv_model *srv_model_acquire(srv_ctx *c, const char *name, srv_reply *out) {
    srv_model *e = resolve(c, name);
    if (!e) {
        reply_not_found(out, name ? name : "");
        return NULL;
    }
    char msg[512];
    pthread_mutex_lock(&c->models_mu);
    int status = 0;
    for (;;) {
        if (atomic_load(&c->shutting_down)) {
            status = 503;
            snprintf(msg, sizeof msg, "server is shutting down");
            break;
        }
        if (e->state == SRV_MODEL_LOADED) break;
        if (e->state == SRV_MODEL_LOADING) {
            /* another request's load: this one waits for it and takes
             * its outcome (a failure once, not a second load) */
            pthread_cond_wait(&c->models_cv, &c->models_mu);
            if (e->state == SRV_MODEL_FAILED) {
                status = 500;
                snprintf(msg, sizeof msg, "cannot load model '%.150s': %.300s", e->id, e->error);
                break;
            }
            continue;
        }
        /* UNLOADED, or FAILED before: a new try (what failed may have been
         * room, or a file since fixed) */
        if ((status = load_locked(c, e, msg, sizeof msg))) break;
    }
    if (!status) {
        e->refs++;
        e->last_use = srv_now();
    }
    pthread_mutex_unlock(&c->models_mu);
    if (status) {
        srv_reply_error(out, status, status == 503 ? "model" : NULL,
                        status == 503 ? (atomic_load(&c->shutting_down) ? "shutting_down" : "model_busy")
                                      : "model_load_failed",
                        "%s", msg);
        return NULL;
    }
    return e;
}

void srv_model_release(srv_ctx *c, srv_model *e) {
    if (!e) return;
    pthread_mutex_lock(&c->models_mu);
    e->refs--;
    e->last_use = srv_now();
    pthread_mutex_unlock(&c->models_mu);
}

bool srv_models_busy(srv_ctx *c) {
    bool busy = false;
    pthread_mutex_lock(&c->models_mu);
    for (int i = 0; i < c->n_models; i++) busy |= c->models[i]->refs > 0 || c->models[i]->state == SRV_MODEL_LOADING;
    pthread_mutex_unlock(&c->models_mu);
    return busy;
}

bool srv_models_have_speech(const srv_ctx *c) {
    for (int i = 0; i < c->n_models; i++)
        if (c->models[i]->kind == SRV_KIND_SPEECH) return true;
    return false;
}

void srv_models_drain(srv_ctx *c, double grace) {
    double end = srv_now() + grace;
    /* shutting_down is set, so no load starts: wait for those under way,
     * after which no scheduler comes or goes */
    pthread_mutex_lock(&c->models_mu);
    for (;;) {
        bool loading = false;
        for (int i = 0; i < c->n_models; i++) loading |= c->models[i]->state == SRV_MODEL_LOADING;
        if (!loading || srv_now() >= end) break;
        srv_timedwait_ms(&c->models_cv, &c->models_mu, 100);
    }
    /* the loaded schedulers, drained outside the lock (their requests'
     * streams release their models under it) */
    srv_sched **scheds = calloc((size_t)c->n_models + 1, sizeof *scheds);
    int n = 0;
    for (int i = 0; scheds && i < c->n_models; i++)
        if (c->models[i]->state == SRV_MODEL_LOADED && c->models[i]->sched) scheds[n++] = c->models[i]->sched;
    pthread_mutex_unlock(&c->models_mu);
    for (int i = 0; i < n; i++) {
        double left = end - srv_now();
        srv_sched_drain(scheds[i], left > 0 ? left : 0);
    }
    free(scheds);
}

void srv_models_stop(srv_ctx *c) {
    for (int i = 0; i < c->n_models; i++) {
        srv_model *e = c->models[i];
        if (e->borrowed || !e->sched) continue;
        srv_sched_stop(e->sched);
        e->sched = NULL;
    }
}

void srv_models_free(srv_ctx *c) {
    for (int i = 0; i < c->n_models; i++) {
        srv_model *e = c->models[i];
        unload_objects(e);
        pthread_mutex_destroy(&e->metrics.mu);
        pthread_mutex_destroy(&e->enc_mu);
        free(e->id);
        free(e->path);
        free(e);
    }
    free(c->models);
    c->models = NULL;
    c->n_models = 0;
    pthread_mutex_destroy(&c->retired.mu);
    pthread_mutex_destroy(&c->models_mu);
    pthread_cond_destroy(&c->models_cv);
}

/* --- GET /v1/models ------------------------------------------------------- */

bool srv_is_models_url(const char *url) {
    return !strcmp(url, "/v1/models") || !strcmp(url, "/models") || !strncmp(url, "/v1/models/", 11) ||
           !strncmp(url, "/models/", 8);
}

/* Under mu: one entry in OpenAI's shape, with llama-server's router field
 * status {value: loaded|loading|unloaded, failed: true and the error after a
 * failed load}, and meta (the model's shape) while loaded. */
static json_t *model_json(const srv_model *e) {
    json_t *status = json_pack("{s:s}", "value", state_names[e->state]);
    if (e->state == SRV_MODEL_FAILED) {
        json_object_set_new(status, "failed", json_true());
        json_object_set_new(status, "error", json_string(e->error));
    }
    json_t *j = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", e->id, "object", "model", "created",
                          (json_int_t)time(NULL), "owned_by", "candle", "status", status);
    if (!j) return NULL;
    if (kind_names[e->kind]) json_object_set_new(j, "kind", json_string(kind_names[e->kind]));
    if (e->state != SRV_MODEL_LOADED) return j;
    json_t *meta = NULL;
    if (e->whisper) {
        candle_whisper_dims d = candle_whisper_get_dims(e->whisper);
        meta = json_pack("{s:s,s:s,s:I,s:I,s:I}", "arch", "whisper", "kind", "speech", "n_mels", (json_int_t)d.n_mels,
                         "n_vocab", (json_int_t)d.n_vocab, "n_text_ctx", (json_int_t)d.n_text_ctx);
    } else if (e->enc) {
        const candle_model_config *mc = candle_model_get_config(e->model);
        meta = json_pack("{s:s,s:s,s:I,s:I}", "arch", candle_arch_name(mc->arch), "kind",
                         candle_model_kind_name(mc->kind), "dimensions", (json_int_t)candle_encoder_dim(e->enc),
                         "max_tokens", (json_int_t)candle_encoder_max_tokens(e->enc));
    } else if (e->model) {
        const candle_model_config *mc = candle_model_get_config(e->model);
        meta = json_pack("{s:s,s:I,s:I,s:I}", "arch", candle_arch_name(mc->arch), "n_vocab", (json_int_t)mc->n_vocab,
                         "n_ctx", (json_int_t)(e->sched ? srv_sched_n_ctx(e->sched) : e->max_tokens_limit),
                         "n_ctx_train", (json_int_t)mc->n_ctx_train);
    }
    if (meta) {
        if (!e->borrowed) json_object_set_new(meta, "bytes", json_integer((json_int_t)e->bytes));
        json_object_set_new(j, "meta", meta);
    }
    return j;
}

void srv_models_list(srv_ctx *c, const char *url, srv_reply *out) {
    const char *one = !strncmp(url, "/v1/models/", 11) ? url + 11 : !strncmp(url, "/models/", 8) ? url + 8 : NULL;
    pthread_mutex_lock(&c->models_mu);
    json_t *j = NULL;
    if (one) {
        /* one model, by its exact id (the registry's, whatever the mode) */
        srv_model *e = find(c, one);
        if (!e && !c->router && c->n_models) e = c->models[c->default_model];
        if (e) j = model_json(e);
    } else {
        json_t *data = json_array();
        for (int i = 0; i < c->n_models; i++) json_array_append_new(data, model_json(c->models[i]));
        j = json_pack("{s:s,s:o}", "object", "list", "data", data);
    }
    pthread_mutex_unlock(&c->models_mu);
    if (one && !j) reply_not_found(out, one);
    else srv_reply_json(out, 200, j);
}

/* --- POST /models/load, /models/unload (llama-server's router) ------------- */

bool srv_is_models_admin_url(const char *url) {
    return !strcmp(url, "/models/load") || !strcmp(url, "/models/unload");
}

void srv_models_admin(srv_ctx *c, const char *url, json_t *req, srv_reply *out) {
    json_t *mj = json_object_get(req, "model");
    if (!json_is_string(mj)) {
        srv_reply_error(out, 400, "model", "invalid_type", "'model' is required: the name of a served model");
        return;
    }
    const char *name = json_string_value(mj);
    if (!strcmp(url, "/models/load")) {
        /* as a request for it would: loaded now (room made), then let go */
        srv_model *e = srv_model_acquire(c, name, out);
        if (!e) return;
        srv_model_release(c, e);
        srv_reply_json(out, 200, json_pack("{s:b}", "success", 1));
        return;
    }
    srv_model *e = resolve(c, name);
    if (!e) {
        reply_not_found(out, name);
        return;
    }
    pthread_mutex_lock(&c->models_mu);
    int status = 0;
    char msg[384];
    if (e->state != SRV_MODEL_LOADED || e->borrowed) {
        status = 400;
        snprintf(msg, sizeof msg, "model '%.200s' is not loaded", e->id);
    } else if (e->refs > 0) {
        status = 503;
        snprintf(msg, sizeof msg, "model '%.200s' is in use by %d requests; retry later", e->id, e->refs);
    } else {
        unload_locked(c, e, "POST /models/unload");
    }
    pthread_mutex_unlock(&c->models_mu);
    if (status)
        srv_reply_error(out, status, "model", status == 400 ? "model_not_loaded" : "model_busy", "%s", msg);
    else
        srv_reply_json(out, 200, json_pack("{s:b}", "success", 1));
}

/* --- /metrics ------------------------------------------------------------- */

/* A model id as a Prometheus label value: \, " and newlines escaped. */
static void label(char *dst, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '\\' || *s == '"') dst[n++] = '\\', dst[n++] = *s;
        else if (*s == '\n') dst[n++] = '\\', dst[n++] = 'n';
        else dst[n++] = *s;
    }
    dst[n] = 0;
}

char *srv_models_metrics(srv_ctx *c) {
    srv_metrics tot;
    srv_metrics_init(&tot);
    srv_metrics_add(&tot, &c->metrics, true);
    pthread_mutex_lock(&c->models_mu);
    srv_metrics_add(&tot, &c->retired, false);
    int loaded = 0;
    for (int i = 0; i < c->n_models; i++) {
        srv_model *e = c->models[i];
        loaded += e->state == SRV_MODEL_LOADED;
        if (e->state == SRV_MODEL_LOADED) srv_metrics_add(&tot, &e->metrics, true);
    }
    char *base = srv_metrics_render(&tot);
    pthread_mutex_destroy(&tot.mu);
    size_t cap = 1024 + (size_t)c->n_models * 700, n = 0;
    char *extra = malloc(cap);
    if (!base || !extra) {
        pthread_mutex_unlock(&c->models_mu);
        free(base);
        free(extra);
        return NULL;
    }
    n += (size_t)snprintf(extra + n, cap - n,
                          "# HELP candle_models_loaded Models loaded now.\n# TYPE candle_models_loaded gauge\n"
                          "candle_models_loaded %d\n"
                          "# HELP candle_model_loads_total Models loaded (on demand or at startup).\n"
                          "# TYPE candle_model_loads_total counter\ncandle_model_loads_total %llu\n"
                          "# HELP candle_model_unloads_total Models unloaded to make room (least recently used).\n"
                          "# TYPE candle_model_unloads_total counter\ncandle_model_unloads_total %llu\n"
                          "# HELP candle_model_load_failures_total Loads that failed.\n"
                          "# TYPE candle_model_load_failures_total counter\ncandle_model_load_failures_total %llu\n"
                          "# HELP candle_model_loaded Whether a registered model is loaded (1) or not (0).\n"
                          "# TYPE candle_model_loaded gauge\n",
                          loaded, (unsigned long long)c->n_loads, (unsigned long long)c->n_unloads,
                          (unsigned long long)c->n_load_failures);
    for (int i = 0; i < c->n_models && n < cap; i++) {
        char l[512];
        label(l, sizeof l, c->models[i]->id);
        n += (size_t)snprintf(extra + n, cap - n, "candle_model_loaded{model=\"%s\"} %d\n", l,
                              c->models[i]->state == SRV_MODEL_LOADED);
    }
    pthread_mutex_unlock(&c->models_mu);
    size_t bl = strlen(base), el = strlen(extra);
    char *all = realloc(base, bl + el + 1);
    if (all) memcpy(all + bl, extra, el + 1);
    else free(base);
    free(extra);
    return all;
}
