/* LoRA adapters of `candle serve`, as llama-server has them: --lora PATH
 * (repeatable) and --lora-scaled PATH SCALE load adapters at start, ids
 * 0..n-1 in load order; with --lora-admin, POST /lora-adapters/load
 * {"path", "scale"} loads one more while serving (the next id; scale
 * default 0, so nothing changes until it is asked for); GET /lora-adapters lists [{"id", "path", "scale"}];
 * POST /lora-adapters with [{"id", "scale"}] sets the global scales (ids it
 * does not list go to 0, as llama-server's parse_lora_request); a request's
 * own "lora": [{"id", "scale"}] replaces the global scales for that request
 * only. With --lora-admin, POST /lora-adapters/unload {"id"} takes one
 * out: no new request can name it, the global scale goes to 0, and it is
 * freed when the last request using it is (each request holds a reference
 * on the adapters of its set from its parse to its free); ids are not
 * reused. The adapters never change the model: each request carries its set
 * (srv_req.lora), and the scheduler runs one forward per distinct set in a
 * step (scheduler.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct srv_loras {
    pthread_mutex_t mu; /* the global scales, n and the appends of a load */
    bool admin;         /* --lora-admin: POST /lora-adapters/load allowed */
    const candle_model *model; /* the served model (one -m: never unloaded) */
    pthread_mutex_t load_mu; /* one load at a time */
    int n;              /* adapters [0, n) have been loaded (some perhaps unloaded since) */
    candle_lora *ad[SRV_MAX_LORA];
    int refs[SRV_MAX_LORA];     /* requests whose set holds ad[i] */
    bool gone[SRV_MAX_LORA];    /* unloaded: named by no new request, freed at refs 0 (ad NULL then) */
    char *path[SRV_MAX_LORA];
    float scale[SRV_MAX_LORA];
};

int srv_lora_open(srv_ctx *c, const candle_model *m, const char *const *paths, const float *scales, int n,
                  bool admin) {
    if (n <= 0 && !admin) return 0;
    srv_loras *l = calloc(1, sizeof *l);
    if (!l) return 1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->load_mu, NULL);
    l->admin = admin;
    l->model = m;
    c->loras = l;
    for (int i = 0; i < n && i < SRV_MAX_LORA; i++) {
        if (candle_lora_load(&l->ad[i], m, paths[i])) {
            fprintf(stderr, "candle serve: --lora %s: %s\n", paths[i], candle_last_errmsg());
            return 1;
        }
        l->path[i] = strdup(paths[i]);
        l->scale[i] = scales[i];
        l->n = i + 1;
        fprintf(stderr, "candle serve: LoRA adapter %d: %s (%lld pairs, rank %lld, scale %g)\n", i, paths[i],
                (long long)candle_lora_n_pairs(l->ad[i]), (long long)candle_lora_rank(l->ad[i]), (double)scales[i]);
    }
    return 0;
}

void srv_lora_free(srv_ctx *c) {
    srv_loras *l = c->loras;
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        candle_lora_free(l->ad[i]); /* after every request: refs are 0 */
        free(l->path[i]);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->load_mu);
    free(l);
    c->loras = NULL;
}

bool srv_is_lora_url(const char *url) {
    return !strcmp(url, "/lora-adapters") || !strcmp(url, "/lora-adapters/load") ||
           !strcmp(url, "/lora-adapters/unload");
}

/* A [{"id", "scale"}] list onto scale[n] (unlisted ids 0); false after a 400. */
static bool parse_list(srv_loras *l, json_t *list, const char *param, float *scale, srv_reply *out) {
    int n = 0;
    if (l) {
        pthread_mutex_lock(&l->mu);
        n = l->n;
        pthread_mutex_unlock(&l->mu);
    }
    if (!json_is_array(list)) {
        srv_reply_error(out, 400, param, "invalid_type", "'%s' must be an array of {\"id\", \"scale\"}", param);
        return false;
    }
    for (int i = 0; i < SRV_MAX_LORA; i++) scale[i] = 0;
    size_t k;
    json_t *e;
    json_array_foreach(list, k, e) {
        json_t *id = json_object_get(e, "id"), *sc = json_object_get(e, "scale");
        if (!json_is_object(e) || !json_is_integer(id) || (sc && !json_is_number(sc))) {
            srv_reply_error(out, 400, param, "invalid_type", "'%s'[%zu] must be {\"id\": integer, \"scale\": number}",
                            param, k);
            return false;
        }
        json_int_t v = json_integer_value(id);
        double s = sc ? json_number_value(sc) : 0.0; /* llama-server: a missing scale is 0 */
        if (v < 0 || v >= n) {
            srv_reply_error(out, 400, param, "invalid_value", "'%s'[%zu]: no LoRA adapter %lld (the server has %d)",
                            param, k, (long long)v, n);
            return false;
        }
        pthread_mutex_lock(&l->mu);
        bool gone = l->gone[v];
        pthread_mutex_unlock(&l->mu);
        if (gone && s != 0) {
            srv_reply_error(out, 400, param, "invalid_value", "'%s'[%zu]: LoRA adapter %lld was unloaded", param, k,
                            (long long)v);
            return false;
        }
        if (!isfinite(s) || fabs(s) > 1e6) {
            srv_reply_error(out, 400, param, "invalid_value", "'%s'[%zu]: scale %g", param, k, s);
            return false;
        }
        scale[v] = (float)s;
    }
    return true;
}

/* Drops r's references (srv_req_unref, as r is freed): an unloaded
 * adapter whose last request this was is freed. */
static void release(srv_req *r) {
    srv_loras *l = r->lora_src;
    candle_lora *drop[SRV_MAX_LORA];
    int n_drop = 0;
    pthread_mutex_lock(&l->mu);
    for (int k = 0; k < r->n_lora; k++)
        for (int i = 0; i < l->n; i++)
            if (l->ad[i] == r->lora[k].lora && --l->refs[i] == 0 && l->gone[i]) {
                drop[n_drop++] = l->ad[i];
                l->ad[i] = NULL;
            }
    pthread_mutex_unlock(&l->mu);
    for (int k = 0; k < n_drop; k++) candle_lora_free(drop[k]);
    r->n_lora = 0;
    r->lora_release = NULL;
}

/* The set of scales as a request's adapters: the non-zero ones, in id
 * order, each held until r is freed (an adapter unloaded since the scales
 * were read is left out). */
static void to_set(srv_loras *l, const float *scale, srv_req *r) {
    r->n_lora = 0;
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->n; i++)
        if (scale[i] != 0 && !l->gone[i]) {
            r->lora[r->n_lora++] = (candle_lora_use){l->ad[i], scale[i]};
            l->refs[i]++;
        }
    pthread_mutex_unlock(&l->mu);
    if (r->n_lora) {
        r->lora_src = l;
        r->lora_release = release;
    }
}

/* POST /lora-adapters/unload {"id": integer}: the adapter leaves now for
 * new requests and is freed with the last request that uses it. */
static void unload_one(srv_ctx *c, json_t *o, srv_reply *out) {
    srv_loras *l = c->loras;
    if (!l || !l->admin) {
        srv_reply_error(out, 403, NULL, "forbidden", "unloading adapters needs candle serve --lora-admin");
        return;
    }
    json_t *id = json_object_get(o, "id");
    if (!json_is_object(o) || !json_is_integer(id)) {
        srv_reply_error(out, 400, "id", "invalid_type", "the body must be {\"id\": integer}");
        return;
    }
    json_int_t v = json_integer_value(id);
    candle_lora *drop = NULL;
    int in_use = 0;
    pthread_mutex_lock(&l->mu);
    bool known = v >= 0 && v < l->n, was = known && l->gone[v];
    if (known && !was) {
        l->gone[v] = true;
        l->scale[v] = 0;
        in_use = l->refs[v];
        if (!in_use) drop = l->ad[v], l->ad[v] = NULL;
    }
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    candle_lora_free(drop);
    if (!known)
        srv_reply_error(out, 404, "id", "not_found", "no LoRA adapter %lld (the server has %d)", (long long)v, n);
    else if (was)
        srv_reply_error(out, 404, "id", "not_found", "LoRA adapter %lld was unloaded already", (long long)v);
    else
        srv_reply_json(out, 200, json_pack("{s:I,s:b,s:i}", "id", (json_int_t)v, "unloaded", 1, "in_use", in_use));
}

/* POST /lora-adapters/load {"path": string, "scale": number}: one more
 * adapter, loaded outside the lock (requests go on meanwhile). */
static void load_one(srv_ctx *c, json_t *o, srv_reply *out) {
    srv_loras *l = c->loras;
    if (!l || !l->admin) {
        srv_reply_error(out, 403, NULL, "forbidden", "loading adapters needs candle serve --lora-admin");
        return;
    }
    json_t *p = json_object_get(o, "path"), *sc = json_object_get(o, "scale");
    if (!json_is_object(o) || !json_is_string(p) || (sc && !json_is_number(sc))) {
        srv_reply_error(out, 400, "path", "invalid_type", "the body must be {\"path\": string, \"scale\": number}");
        return;
    }
    double s = sc ? json_number_value(sc) : 0.0;
    if (!isfinite(s) || fabs(s) > 1e6) {
        srv_reply_error(out, 400, "scale", "invalid_value", "scale %g", s);
        return;
    }
    pthread_mutex_lock(&l->load_mu);
    candle_lora *ad = NULL;
    char *path = strdup(json_string_value(p));
    if (l->n == SRV_MAX_LORA)
        srv_reply_error(out, 400, "path", "too_many_adapters", "the server holds %d adapters already", SRV_MAX_LORA);
    else if (!path)
        srv_reply_error(out, 500, NULL, "out_of_memory", "out of memory");
    else if (candle_lora_load(&ad, l->model, path))
        srv_reply_error(out, 400, "path", "invalid_adapter", "%s", candle_last_errmsg());
    if (ad) {
        pthread_mutex_lock(&l->mu);
        int id = l->n;
        l->ad[id] = ad;
        l->path[id] = path;
        l->scale[id] = (float)s;
        l->n = id + 1;
        pthread_mutex_unlock(&l->mu);
        path = NULL;
        srv_reply_json(out, 200, json_pack("{s:i,s:s,s:f}", "id", id, "path", l->path[id], "scale", s));
    }
    free(path);
    pthread_mutex_unlock(&l->load_mu);
}

bool srv_lora_request(srv_ctx *c, json_t *o, srv_req *r, srv_reply *out) {
    srv_loras *l = c->loras;
    float scale[SRV_MAX_LORA];
    json_t *list = json_object_get(o, "lora");
    if (list && !json_is_null(list)) {
        if (!parse_list(l, list, "lora", scale, out)) return false;
        to_set(l, scale, r);
        return true;
    }
    if (!l) {
        r->n_lora = 0;
        return true;
    }
    pthread_mutex_lock(&l->mu);
    memcpy(scale, l->scale, sizeof scale);
    pthread_mutex_unlock(&l->mu);
    to_set(l, scale, r);
    return true;
}

static json_t *list_json(srv_loras *l) {
    json_t *a = json_array();
    if (!l) return a;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->n; i++)
        if (!l->gone[i])
            json_array_append_new(a, json_pack("{s:i,s:s,s:f}", "id", i, "path", l->path[i], "scale",
                                               (double)l->scale[i]));
    pthread_mutex_unlock(&l->mu);
    return a;
}

void srv_lora_handle(srv_ctx *c, const char *method, const char *url, const char *body, size_t len,
                     srv_reply *out) {
    srv_loras *l = c->loras;
    bool load = !strcmp(url, "/lora-adapters/load"), unload = !strcmp(url, "/lora-adapters/unload");
    if (!strcmp(method, "GET") && !load && !unload) {
        srv_reply_json(out, 200, list_json(l));
        return;
    }
    if (strcmp(method, "POST")) {
        srv_reply_error(out, 405, NULL, "method_not_allowed", "%s takes %s", url,
                        load || unload ? "POST" : "GET or POST");
        return;
    }
    json_error_t err;
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &err);
    if (!o) {
        srv_reply_error(out, 400, NULL, "invalid_json", "invalid JSON body: %s (line %d, column %d)", err.text,
                        err.line, err.column);
        return;
    }
    float scale[SRV_MAX_LORA];
    if (load) {
        load_one(c, o, out);
    } else if (unload) {
        unload_one(c, o, out);
    } else if (parse_list(l, o, "body", scale, out)) {
        if (l) {
            pthread_mutex_lock(&l->mu);
            memcpy(l->scale, scale, sizeof scale);
            pthread_mutex_unlock(&l->mu);
        }
        srv_reply_json(out, 200, json_pack("{s:b}", "success", 1));
    }
    json_decref(o);
}
