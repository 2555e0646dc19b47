/* libFuzzer target for the server's encoder endpoints: srv_handle()
 * (tools/server/handlers.c routing) into /v1/embeddings (embeddings.c:
 * inputs, encoding_format, dimensions, truncate, prompt_name) and
 * /v1/rerank, /rerank, /v1/classify, /classify, /predict
 * (encoder_heads.c), on the tiny models of tests/data/encoders (path
 * compiled in): bert-tiny (an embedder with prompts), bert-tiny-reranker,
 * bert-tiny-classifier and qwen3-embedding-tiny (a decoder embedder). No
 * HTTP: the handler is called directly. An input is
 *   [u8 route][body]
 * route: bits 0-2 the URL (urls[]), bits 3-4 the model (models[]), bit 5
 * GET instead of POST; bodies up to 4 KB.
 * Beyond "no crash" (ASan/UBSan), for every reply:
 * - the status is 200, 400 or 405 (never 500 on these models);
 * - the body is well-formed JSON; an error has OpenAI's shape
 *   {"error": {"message": non-empty, "type" invalid_request_error, ...}};
 * - rerank results: indices distinct and in range, scores non-increasing,
 *   in [0, 1] (the reranker's sigmoid), usage total = prompt tokens > 0;
 * - classify: per input all the labels, sorted, the top label first,
 *   probabilities summing to 1 where there are several (softmax);
 * - embeddings: as many as the inputs, each of the asked dimensions.
 * Seeds: tests/fuzz/gen_server_encoder_corpus.py. Built with
 * -DCANDLE_FUZZ=ON when jansson is installed. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "server.h"

static const char *const urls[8] = {"/v1/embeddings", "/v1/rerank", "/rerank", "/v1/classify",
                                    "/classify", "/predict", "/v1/chat/completions", "/v1/models"};
static const char *const models[4] = {"bert-tiny", "bert-tiny-reranker", "bert-tiny-classifier",
                                      "qwen3-embedding-tiny"};
static srv_ctx ctxs[4];

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", CANDLE_FUZZ_ENCODER_DIR, models[i]);
        srv_ctx *c = &ctxs[i];
        candle_encoder_params ep = candle_encoder_default_params();
        ep.n_threads = 1;
        srv_models_init(c, &(srv_load_params){0});
        srv_model *e = srv_model_adopt(c, models[i], SRV_KIND_ENCODER);
        if (!e || candle_encoder_load(&e->enc, path, &ep)) {
            fprintf(stderr, "fuzz_server_encoder: %s: %s\n", path, candle_last_errmsg());
            exit(1);
        }
        c->cfg = (srv_config){.host = "127.0.0.1", .max_body = 1 << 20};
        e->max_tokens_limit = 64;
        e->model = (candle_model *)candle_encoder_model(e->enc);
        atomic_init(&c->shutting_down, false);
        atomic_init(&c->next_id, 0);
    }
    return 0;
}

static void check_error(json_t *j) {
    check(json_is_object(j) && json_object_size(j) == 1);
    json_t *e = json_object_get(j, "error");
    json_t *msg = json_object_get(e, "message"), *type = json_object_get(e, "type");
    check(json_is_string(msg) && json_string_length(msg) > 0);
    check(json_is_string(type) && !strcmp(json_string_value(type), "invalid_request_error"));
}

static void check_rerank(json_t *j, bool tei) {
    json_t *res = tei ? j : json_object_get(j, "results");
    check(json_is_array(res) && json_array_size(res) > 0);
    if (!tei) {
        json_t *u = json_object_get(j, "usage");
        json_int_t pt = json_integer_value(json_object_get(u, "prompt_tokens"));
        check(pt > 0 && pt == json_integer_value(json_object_get(u, "total_tokens")));
    }
    double prev = INFINITY;
    char seen[2048] = {0};
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *r = json_array_get(res, i), *idx = json_object_get(r, "index");
        double s = json_number_value(json_object_get(r, tei ? "score" : "relevance_score"));
        check(json_is_integer(idx) && json_integer_value(idx) >= 0 && json_integer_value(idx) < 2048);
        check(!seen[json_integer_value(idx)]);
        seen[json_integer_value(idx)] = 1;
        check(s <= prev && s >= 0 && s <= 1);
        prev = s;
    }
}

static void check_labels(json_t *labels, size_t L) {
    check(json_is_array(labels) && json_array_size(labels) == L);
    double prev = INFINITY, sum = 0;
    for (size_t k = 0; k < json_array_size(labels); k++) {
        json_t *l = json_array_get(labels, k);
        double s = json_number_value(json_object_get(l, "score"));
        check(json_is_string(json_object_get(l, "label")) && s <= prev);
        prev = s;
        sum += s;
    }
    check(L == 1 || fabs(sum - 1) < 1e-4); /* softmax over several labels */
}

static void check_classify(json_t *j, bool tei, size_t L) {
    if (tei) {
        if (json_is_array(json_array_get(j, 0)))
            for (size_t i = 0; i < json_array_size(j); i++) check_labels(json_array_get(j, i), L);
        else
            check_labels(j, L);
        return;
    }
    json_t *data = json_object_get(j, "data");
    check(json_is_array(data) && json_array_size(data) > 0);
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *d = json_array_get(data, i), *labels = json_object_get(d, "labels");
        check(json_integer_value(json_object_get(d, "index")) == (json_int_t)i);
        check_labels(labels, L);
        check(json_equal(json_object_get(d, "label"), json_object_get(json_array_get(labels, 0), "label")));
    }
}

static void check_embeddings(srv_ctx *c, json_t *req, json_t *j) {
    json_t *data = json_object_get(j, "data"), *in = json_object_get(req, "input");
    size_t n = json_is_string(in) || json_is_integer(json_array_get(in, 0)) ? 1 : json_array_size(in);
    check(json_is_array(data) && json_array_size(data) == n);
    json_t *dims = json_object_get(req, "dimensions"), *fmt = json_object_get(req, "encoding_format");
    json_int_t dim = json_is_integer(dims) ? json_integer_value(dims) : candle_encoder_dim(c->models[0]->enc);
    bool b64 = json_is_string(fmt) && !strcmp(json_string_value(fmt), "base64");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object_get(json_array_get(data, i), "embedding");
        check(b64 ? json_is_string(e) && json_string_length(e) == (size_t)(4 * ((dim * 4 + 2) / 3))
                  : json_is_array(e) && (json_int_t)json_array_size(e) == dim);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    /* a few hundred tiny inputs at most: thousands of forward passes under
     * the sanitizers would pass make fuzz's 10 s per input (the 2048-input
     * limit is the server tests') */
    if (size < 1 || size > 4096) return 0;
    unsigned route = data[0];
    const char *url = urls[route & 7], *method = route & 32 ? "GET" : "POST";
    srv_ctx *c = &ctxs[(route >> 3) & 3];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    srv_reply out;
    srv_handle(c, method, url, body, len, -1, &out);
    check(out.status == 200 || out.status == 400 || out.status == 405);
    check(out.body && !out.stream);
    json_t *j = json_loads(out.body, 0, NULL);
    check(j);
    if (out.status != 200) {
        check_error(j);
    } else if (!(route & 32)) {
        json_t *req = json_loadb(body, len, 0, NULL);
        check(req);
        /* a rerank request with TEI's "texts" gets TEI's bare array on either URL */
        bool tei = !strcmp(url, "/predict") || (strstr(url, "rerank") && json_is_array(j));
        if (strstr(url, "rerank")) check_rerank(j, tei);
        else if (strstr(url, "classify") || tei) check_classify(j, tei, (size_t)candle_encoder_n_labels(c->models[0]->enc));
        else if (!strcmp(url, "/v1/embeddings")) check_embeddings(c, req, j);
        json_decref(req);
    }
    json_decref(j);
    free(out.body);
    return 0;
}
