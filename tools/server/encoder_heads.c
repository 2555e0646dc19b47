/* POST /v1/rerank (and /rerank) and POST /v1/classify (and /classify,
 * TEI's /predict) for an encoder model with a classifier head.
 *
 * rerank, in the shape Jina's and Cohere's APIs (and llama.cpp's server)
 * share: {"query", "documents": [string | {"text"}], "top_n"?,
 * "return_documents"? (default false, as Cohere), "truncate"?} answers
 * {"model", "object": "list", "results": [{"index", "relevance_score",
 * "document"?: {"text"}}] sorted by score, "usage"}. A request with TEI's
 * "texts" instead of "documents" gets TEI's answer: [{"index", "score",
 * "text"?}] (with "return_text").
 *
 * classify: {"input": string | [string]} (TEI's "inputs" too) answers
 * {"model", "object": "list", "data": [{"index", "label", "score",
 * "probs" (in id order), "labels": [{"label", "score"}] sorted}], "usage"};
 * /predict answers TEI's shape: [{"label", "score"}] sorted for one string,
 * an array of those for an array.
 *
 * An input (a query/document pair) longer than the model takes is a 400
 * unless the request says "truncate": true, as /v1/embeddings does.
 *
 * Each request is tokenized here, on its own thread (its refusals are its
 * own 400s), with the library's rules (candle_encoder_tokenize_pair), then
 * queued to the model's batcher (enc_batch.c), which scores several
 * requests' inputs in one candle_encoder_classify_tokens /
 * candle_encoder_rerank_tokens call under --max-batch-tokens. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* As /v1/embeddings: inputs (documents) per request. */
#define SRV_MAX_HEAD_INPUTS 2048

/* The strings of a field that is a string or an array of strings (objects
 * {"text": string} too when objects): texts [*n] (borrowed from the
 * request), or an error reply naming the field. */
static const char **read_texts(json_t *v, const char *field, bool objects, int64_t *n, srv_reply *out) {
    size_t len = json_is_string(v) ? 1 : json_array_size(v);
    if ((!json_is_string(v) && !json_is_array(v)) || (objects && !json_is_array(v)) || len == 0) {
        srv_reply_error(out, 400, field, "invalid_input", "'%s' must be %s, and not empty", field,
                        objects ? "an array of strings (or of {\"text\": string} objects)"
                                : "a string or an array of strings");
        return NULL;
    }
    if (len > SRV_MAX_HEAD_INPUTS) {
        srv_reply_error(out, 400, field, "too_many_inputs", "%zu inputs in '%s', at most %d per request", len, field,
                        SRV_MAX_HEAD_INPUTS);
        return NULL;
    }
    const char **t = calloc(len, sizeof *t);
    if (!t) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_is_string(v) ? v : json_array_get(v, i);
        if (objects && json_is_object(e)) e = json_object_get(e, "text");
        if (!json_is_string(e) || json_string_length(e) == 0) {
            srv_reply_error(out, 400, field, "invalid_input", "%s[%zu]: every entry must be a non-empty %s", field,
                            i, objects ? "string or {\"text\": string}" : "string");
            free(t);
            return NULL;
        }
        t[i] = json_string_value(e);
    }
    *n = (int64_t)len;
    return t;
}

/* The model must have a head (a reranker: one score). */
static bool need_head(srv_model *md, const char *url, bool rerank, srv_reply *out) {
    int64_t L = md->enc ? candle_encoder_n_labels(md->enc) : 0;
    if (!md->enc)
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' is a decoder-only language model; %s needs an encoder with a %s head",
                        md->id, url, rerank ? "reranker (cross-encoder)" : "classifier");
    else if (!L)
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' has no classifier head (an embedding model: it serves /v1/embeddings), "
                        "so %s is not available", md->id, url);
    else if (rerank && L != 1)
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' is a classifier with %lld labels, not a reranker (one score): use "
                        "/v1/classify", md->id, (long long)L);
    return md->enc && L && (!rerank || L == 1);
}

/* The library's refusal of input i (who: "rerank: document") as a 400
 * naming the field, other failures as a 500. */
static void input_error(srv_reply *out, candle_status s, const char *field, const char *who, int64_t i) {
    const char *m = candle_last_errmsg();
    if (s == CANDLE_ERR_INVALID_ARG)
        srv_reply_error(out, 400, field, "invalid_input", "%s %lld: %s%s", who, (long long)i, m,
                        strstr(m, "no_truncate") ? "; send \"truncate\": true to cut long inputs" : "");
    else
        srv_reply_error(out, 500, NULL, NULL, "%s %lld: %s", who, (long long)i, m);
}

/* The request's inputs tokenized as the library's text calls tokenize them
 * (texts[i] for classify; the pairs query, texts[i] for rerank) into a job
 * of dim floats per row, then run by the batcher; NULL after an error
 * reply. The job goes back with srv_enc_job_put. */
static srv_enc_job *run_job(srv_ctx *c, srv_model *md, srv_enc_kind kind, const char *query, size_t qlen,
                            const char **texts, int64_t n, int64_t dim, bool trunc, const char *field,
                            srv_reply *out) {
    srv_enc_job *j = srv_enc_job_get(c, md, kind, n, dim);
    if (!j) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    candle_head_params p = {.no_truncate = !trunc};
    int64_t max = candle_encoder_max_tokens(md->enc);
    for (int64_t i = 0; i < n; i++) {
        int32_t *ids = srv_enc_job_room(j, (size_t)max);
        int64_t k = 0;
        const char *a = query ? query : texts[i], *b = query ? texts[i] : NULL;
        candle_status s = ids ? candle_encoder_tokenize_pair(md->enc, a, query ? qlen : SIZE_MAX, b, SIZE_MAX, &p,
                                                             ids, j->types + j->used, (size_t)max, &k)
                              : CANDLE_ERR_OOM;
        if (s) {
            if (ids) input_error(out, s, field, query ? "rerank: document" : "classify: input", i);
            else srv_reply_error(out, 500, NULL, NULL, "out of memory");
            srv_enc_job_put(md, j);
            return NULL;
        }
        srv_enc_job_add(j, i, k);
    }
    if (srv_enc_job_run(md, j)) {
        srv_reply_error(out, 500, NULL, NULL, "%s", j->err);
        srv_enc_job_put(md, j);
        return NULL;
    }
    return j;
}

static json_t *usage(const int64_t *n_tokens, int64_t n) {
    json_int_t total = 0;
    for (int64_t i = 0; i < n; i++) total += n_tokens[i];
    return json_pack("{s:I,s:I}", "prompt_tokens", total, "total_tokens", total);
}

/* idx [n] sorted by descending v[idx[*]], ties in input order (an
 * insertion sort: stable, and n is small). */
static void sort_desc(const float *v, int64_t *idx, int64_t n) {
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = i; j > 0 && v[idx[j]] > v[idx[j - 1]]; j--) {
            int64_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

static void rerank(srv_ctx *c, srv_model *md, const char *url, json_t *req, srv_reply *out) {
    if (!need_head(md, url, true, out)) return;
    json_t *q = json_object_get(req, "query"), *docs = json_object_get(req, "documents"),
           *texts = json_object_get(req, "texts"), *top = json_object_get(req, "top_n");
    bool tei = !docs && texts, ret = false, trunc = false, raw = false;
    const char *field = tei ? "texts" : "documents";
    if (!json_is_string(q) || json_string_length(q) == 0) {
        srv_reply_error(out, 400, "query", "invalid_input", "'query' must be a non-empty string");
        return;
    }
    if (top && !json_is_null(top) && (!json_is_integer(top) || json_integer_value(top) < 1)) {
        srv_reply_error(out, 400, "top_n", "invalid_value", "'top_n' must be a positive integer");
        return;
    }
    if (!srv_get_bool(req, tei ? "return_text" : "return_documents", &ret, out) || !srv_get_bool(req, "truncate", &trunc, out) ||
        !srv_get_bool(req, "raw_scores", &raw, out))
        return;
    if (raw) {
        srv_reply_error(out, 400, "raw_scores", "invalid_value", "raw_scores is not supported: scores are activated "
                        "as the model's CrossEncoder activation_fn says");
        return;
    }
    int64_t n = 0;
    const char **d = read_texts(tei ? texts : docs, field, true, &n, out);
    if (!d) return;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    srv_enc_job *j = NULL;
    if (!idx)
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
    else
        j = run_job(c, md, SRV_ENC_RERANK, json_string_value(q), json_string_length(q), d, n, 1, trunc, field, out);
    if (j) {
        const float *s = j->out;
        sort_desc(s, idx, n);
        int64_t k = top && json_is_integer(top) && json_integer_value(top) < n ? json_integer_value(top) : n;
        json_t *res = json_array();
        for (int64_t i = 0; res && i < k; i++) {
            json_t *r = json_pack("{s:I,s:f}", "index", (json_int_t)idx[i],
                                  tei ? "score" : "relevance_score", (double)s[idx[i]]);
            if (r && ret && tei) json_object_set_new(r, "text", json_string(d[idx[i]]));
            if (r && ret && !tei) json_object_set_new(r, "document", json_pack("{s:s}", "text", d[idx[i]]));
            json_array_append_new(res, r);
        }
        srv_reply_json(out, 200,
                       tei ? res
                           : json_pack("{s:s,s:s,s:o,s:o}", "model", md->id, "object", "list", "results",
                                       res ? res : json_array(), "usage", usage(j->n_ids, n)));
        srv_enc_job_put(md, j);
    }
    free(idx);
    free(d);
}

/* [{"label", "score"}] of one input's probabilities, sorted. */
static json_t *sorted_labels(srv_model *md, const float *pr, int64_t L, int64_t *idx) {
    sort_desc(pr, idx, L);
    json_t *a = json_array();
    for (int64_t k = 0; a && k < L; k++)
        json_array_append_new(a, json_pack("{s:s,s:f}", "label", candle_encoder_label(md->enc, idx[k]), "score",
                                           (double)pr[idx[k]]));
    return a;
}

static void classify(srv_ctx *c, srv_model *md, const char *url, json_t *req, srv_reply *out) {
    if (!need_head(md, url, false, out)) return;
    bool tei = !strcmp(url, "/predict"), trunc = false, raw = false;
    json_t *in = json_object_get(req, "input");
    const char *field = "input";
    if (!in && json_object_get(req, "inputs")) in = json_object_get(req, (field = "inputs"));
    if (json_is_array(in) && json_is_array(json_array_get(in, 0))) {
        srv_reply_error(out, 400, field, "invalid_input", "text pairs are not supported: '%s' must be a string or "
                        "an array of strings", field);
        return;
    }
    if (!srv_get_bool(req, "truncate", &trunc, out) || !srv_get_bool(req, "raw_scores", &raw, out)) return;
    if (raw) {
        srv_reply_error(out, 400, "raw_scores", "invalid_value", "raw_scores is not supported: scores are activated "
                        "as the model's problem_type says");
        return;
    }
    int64_t n = 0, L = candle_encoder_n_labels(md->enc);
    const char **t = read_texts(in, field, false, &n, out);
    if (!t) return;
    int64_t *idx = malloc((size_t)L * sizeof *idx);
    srv_enc_job *j = NULL;
    if (!idx) srv_reply_error(out, 500, NULL, NULL, "out of memory");
    else j = run_job(c, md, SRV_ENC_CLASSIFY, NULL, 0, t, n, L, trunc, field, out);
    if (j) {
        const float *pr = j->out;
        json_t *data = json_array();
        for (int64_t i = 0; data && i < n; i++) {
            json_t *labels = sorted_labels(md, pr + i * L, L, idx), *probs = json_array();
            for (int64_t k = 0; probs && k < L; k++) json_array_append_new(probs, json_real(pr[i * L + k]));
            json_t *r = tei ? labels
                            : json_pack("{s:I,s:s,s:f,s:o,s:o}", "index", (json_int_t)i, "label",
                                        candle_encoder_label(md->enc, idx[0]), "score", (double)pr[i * L + idx[0]],
                                        "probs", probs ? probs : json_array(), "labels",
                                        labels ? labels : json_array());
            if (tei) json_decref(probs);
            json_array_append_new(data, r);
        }
        if (tei && json_is_string(in)) {
            json_t *one = json_incref(json_array_get(data, 0));
            json_decref(data);
            data = one;
        }
        srv_reply_json(out, 200,
                       tei ? data
                           : json_pack("{s:s,s:s,s:o,s:o}", "model", md->id, "object", "list", "data",
                                       data ? data : json_array(), "usage", usage(j->n_ids, n)));
        srv_enc_job_put(md, j);
    }
    free(idx);
    free(t);
}

bool srv_is_encoder_head_url(const char *url) {
    static const char *const urls[] = {"/v1/rerank", "/rerank", "/v1/classify", "/classify", "/predict"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++)
        if (!strcmp(url, urls[i])) return true;
    return false;
}

void srv_encoder_head(srv_ctx *c, srv_model *md, const char *url, json_t *req, srv_reply *out) {
    if (strstr(url, "rerank")) rerank(c, md, url, req, out);
    else classify(c, md, url, req, out);
}
