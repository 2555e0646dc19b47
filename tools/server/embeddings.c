/* POST /v1/embeddings for an encoder model, in OpenAI's shape: input as a
 * string, an array of strings, an array of token ids or an array of such
 * arrays; encoding_format float or base64 (little-endian f32); dimensions;
 * usage; the extension "prompt_name" picks a prompt of the model's
 * config_sentence_transformers.json (default: its default_prompt_name's;
 * text inputs only, as sentence-transformers prepends it to the text). An input longer than the model takes is a 400 unless the request
 * says "truncate": true (as TEI's API does), never cut silently. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* OpenAI's limit on inputs per request. */
#define SRV_MAX_INPUTS 2048

typedef struct emb_inputs {
    const char **texts;   /* [n] or NULL */
    int32_t **ids;        /* [n] or NULL */
    int64_t *n_ids;       /* [n] */
    int64_t n;
} emb_inputs;

static void inputs_free(emb_inputs *in) {
    for (int64_t i = 0; in->ids && i < in->n; i++) free(in->ids[i]);
    free(in->ids);
    free(in->texts);
    free(in->n_ids);
}

/* An array of token ids into ids/n; false if it is not one. */
static bool token_array(json_t *a, int32_t **ids, int64_t *n, int64_t n_vocab) {
    size_t len = json_array_size(a);
    if (!json_is_array(a) || !len || !json_is_integer(json_array_get(a, 0))) return false;
    *ids = malloc(len * sizeof **ids);
    if (!*ids) return false;
    for (size_t i = 0; i < len; i++) {
        json_t *v = json_array_get(a, i);
        json_int_t t = json_is_integer(v) ? json_integer_value(v) : -1;
        if (t < 0 || t >= n_vocab) return false;
        (*ids)[i] = (int32_t)t;
    }
    *n = (int64_t)len;
    return true;
}

/* The request's input, or an error reply. */
static bool read_inputs(json_t *input, int64_t n_vocab, emb_inputs *in, srv_reply *out) {
    bool one = json_is_string(input) || (json_is_array(input) && json_is_integer(json_array_get(input, 0)));
    size_t n = one ? 1 : json_array_size(input);
    if (!input || (!one && !json_is_array(input)) || n == 0) {
        srv_reply_error(out, 400, "input", "invalid_input",
                        "'input' must be a string, an array of strings, or token ids (one array or "
                        "an array of arrays), and not empty");
        return false;
    }
    if (n > SRV_MAX_INPUTS) {
        srv_reply_error(out, 400, "input", "too_many_inputs", "%zu inputs, at most %d per request", n,
                        SRV_MAX_INPUTS);
        return false;
    }
    in->n = (int64_t)n;
    in->n_ids = calloc(n, sizeof *in->n_ids);
    bool strings = json_is_string(one ? input : json_array_get(input, 0));
    if (strings) in->texts = calloc(n, sizeof *in->texts);
    else in->ids = calloc(n, sizeof *in->ids);
    if (!in->n_ids || (strings ? !in->texts : !in->ids)) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = one ? input : json_array_get(input, i);
        bool ok = strings ? json_is_string(v) && json_string_length(v) > 0
                          : token_array(v, &in->ids[i], &in->n_ids[i], n_vocab);
        if (strings && ok) in->texts[i] = json_string_value(v);
        if (!ok) {
            srv_reply_error(out, 400, "input", "invalid_input",
                            "input[%zu]: every input must be %s", i,
                            strings ? "a non-empty string" : "a non-empty array of token ids in the vocabulary");
            return false;
        }
    }
    return true;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *base64_floats(const float *v, int64_t n) {
    size_t bytes = (size_t)n * sizeof *v, len = 4 * ((bytes + 2) / 3);
    char *s = malloc(len + 1);
    if (!s) return NULL;
    const unsigned char *b = (const unsigned char *)v; /* little-endian hosts */
    size_t o = 0;
    for (size_t i = 0; i < bytes; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < bytes ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < bytes ? b[i + 2] : 0);
        s[o++] = b64[w >> 18 & 63];
        s[o++] = b64[w >> 12 & 63];
        s[o++] = i + 1 < bytes ? b64[w >> 6 & 63] : '=';
        s[o++] = i + 2 < bytes ? b64[w & 63] : '=';
    }
    s[o] = 0;
    json_t *j = json_stringn(s, o);
    free(s);
    return j;
}

static json_t *response(srv_model *md, const float *v, int64_t n, int64_t dim, bool base64,
                        const int64_t *n_tokens) {
    json_t *data = json_array();
    json_int_t total = 0;
    for (int64_t i = 0; data && i < n; i++) {
        json_t *e = base64 ? base64_floats(v + i * dim, dim) : json_array();
        for (int64_t k = 0; !base64 && e && k < dim; k++) json_array_append_new(e, json_real(v[i * dim + k]));
        json_array_append_new(data, json_pack("{s:s,s:I,s:o}", "object", "embedding", "index", (json_int_t)i,
                                              "embedding", e ? e : json_null()));
        total += n_tokens[i];
    }
    return json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data ? data : json_array(),
                     "model", md->id, "usage", "prompt_tokens", total, "total_tokens", total);
}

/* encoding_format, dimensions and truncate into p; false after an error reply. */
static bool read_options(srv_model *md, json_t *req, candle_embed_params *p, bool *base64, srv_reply *out) {
    json_t *fmt = json_object_get(req, "encoding_format"), *dims = json_object_get(req, "dimensions"),
           *trunc = json_object_get(req, "truncate");
    *base64 = fmt && json_is_string(fmt) && !strcmp(json_string_value(fmt), "base64");
    if (fmt && !json_is_null(fmt) && !*base64 && !(json_is_string(fmt) && !strcmp(json_string_value(fmt), "float"))) {
        srv_reply_error(out, 400, "encoding_format", "invalid_value", "encoding_format must be 'float' or 'base64'");
        return false;
    }
    int64_t max = candle_encoder_dim(md->enc);
    if (dims && !json_is_null(dims) &&
        (!json_is_integer(dims) || json_integer_value(dims) < 1 || json_integer_value(dims) > max)) {
        srv_reply_error(out, 400, "dimensions", "invalid_value", "dimensions must be an integer in 1..%lld",
                        (long long)max);
        return false;
    }
    if (trunc && !json_is_null(trunc) && !json_is_boolean(trunc)) {
        srv_reply_error(out, 400, "truncate", "invalid_value", "truncate must be a boolean");
        return false;
    }
    json_t *pn = json_object_get(req, "prompt_name");
    if (pn && !json_is_null(pn) && (!json_is_string(pn) || !candle_encoder_prompt(md->enc, json_string_value(pn)))) {
        char names[400] = "";
        for (int64_t i = 0; candle_encoder_prompt_name(md->enc, i) && strlen(names) < 300; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "",
                     candle_encoder_prompt_name(md->enc, i));
        srv_reply_error(out, 400, "prompt_name", "invalid_value",
                        "prompt_name must be one of the model's prompts (config_sentence_transformers.json): %s",
                        names[0] ? names : "it has none");
        return false;
    }
    p->prompt_name = json_is_string(pn) ? json_string_value(pn) : NULL;
    p->dimensions = dims && json_is_integer(dims) ? json_integer_value(dims) : 0;
    p->no_truncate = !(trunc && json_is_true(trunc));
    return true;
}

void srv_embeddings(srv_ctx *c, srv_model *md, json_t *req, srv_reply *out) {
    (void)c;
    candle_embed_params p = candle_embed_default_params();
    bool base64;
    emb_inputs in = {0};
    if (!read_options(md, req, &p, &base64, out) ||
        !read_inputs(json_object_get(req, "input"), candle_model_get_config(md->model)->n_vocab, &in, out)) {
        inputs_free(&in);
        return;
    }
    if (in.ids && p.prompt_name) {
        srv_reply_error(out, 400, "prompt_name", "invalid_value",
                        "prompt_name applies to text inputs; token-id inputs are used as given");
        inputs_free(&in);
        return;
    }
    int64_t dim = p.dimensions ? p.dimensions : candle_encoder_dim(md->enc);
    float *v = malloc((size_t)(in.n * dim) * sizeof *v);
    int64_t *n_tokens = calloc((size_t)in.n, sizeof *n_tokens);
    p.n_tokens = n_tokens;
    candle_status s = CANDLE_ERR_OOM;
    if (v && n_tokens) {
        pthread_mutex_lock(&md->enc_mu);
        s = in.texts ? candle_encoder_embed(md->enc, in.texts, NULL, in.n, &p, v, (size_t)(in.n * dim))
                     : candle_encoder_embed_tokens(md->enc, (const int32_t *const *)in.ids, in.n_ids, in.n, &p, v,
                                                   (size_t)(in.n * dim));
        pthread_mutex_unlock(&md->enc_mu);
    }
    if (s == CANDLE_ERR_INVALID_ARG)
        srv_reply_error(out, 400, "input", "invalid_input", "%s%s", candle_last_errmsg(),
                        strstr(candle_last_errmsg(), "no_truncate") ? "; send \"truncate\": true to cut long inputs"
                                                                    : "");
    else if (s)
        srv_reply_error(out, 500, NULL, NULL, "%s", v && n_tokens ? candle_last_errmsg() : "out of memory");
    else
        srv_reply_json(out, 200, response(md, v, in.n, dim, base64, n_tokens));
    free(v);
    free(n_tokens);
    inputs_free(&in);
}
