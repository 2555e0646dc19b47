/* POST /v1/embeddings for an encoder model, in OpenAI's shape: input as a
 * string, an array of strings, an array of token ids or an array of such
 * arrays; encoding_format float or base64 (little-endian f32); dimensions;
 * usage; the extension "prompt_name" picks a prompt of the model's
 * config_sentence_transformers.json (default: its default_prompt_name's;
 * text inputs only, as sentence-transformers prepends it to the text). An input longer than the model takes is a 400 unless the request
 * says "truncate": true (as TEI's API does), never cut silently. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* OpenAI's limit on inputs per request. */
#define SRV_MAX_INPUTS 2048

/* The reply to a refused input: 400 naming it (with the way to cut a long
 * one), 500 for anything else. */
static void input_error(srv_reply *out, candle_status s, size_t i, const char *msg) {
    if (s == CANDLE_ERR_INVALID_ARG)
        srv_reply_error(out, 400, "input", "invalid_input", "input[%zu]: %s%s", i, msg,
                        strstr(msg, "no_truncate") ? "; send \"truncate\": true to cut long inputs" : "");
    else
        srv_reply_error(out, 500, NULL, NULL, "input[%zu]: %s", i, msg);
}

/* Token-id input i (a JSON array) into j, cut to the model's max_tokens
 * as candle_encoder_embed_tokens would; false after an error reply. */
static bool token_input(srv_model *md, json_t *a, size_t i, bool no_truncate, srv_enc_job *j, srv_reply *out) {
    int64_t n_vocab = candle_model_get_config(md->model)->n_vocab, max = candle_encoder_max_tokens(md->enc);
    size_t len = json_array_size(a);
    for (size_t k = 0; json_is_array(a) && k < len; k++) {
        json_t *v = json_array_get(a, k);
        json_int_t t = json_is_integer(v) ? json_integer_value(v) : -1;
        if (t < 0 || t >= n_vocab) len = 0;
    }
    if (!json_is_array(a) || !len) {
        srv_reply_error(out, 400, "input", "invalid_input",
                        "input[%zu]: every input must be a non-empty array of token ids in the vocabulary", i);
        return false;
    }
    if ((int64_t)len > max && no_truncate) {
        char msg[96];
        snprintf(msg, sizeof msg, "%zu tokens exceed the model's %lld (no_truncate)", len, (long long)max);
        input_error(out, CANDLE_ERR_INVALID_ARG, i, msg);
        return false;
    }
    int64_t n = (int64_t)len < max ? (int64_t)len : max;
    int32_t *ids = srv_enc_job_room(j, (size_t)n);
    if (!ids) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    for (int64_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(a, (size_t)k));
    srv_enc_job_add(j, (int64_t)i, n);
    return true;
}

/* Text input i, tokenized as candle_encoder_embed would (p's prompt and
 * cut), into j; false after an error reply. */
static bool text_input(srv_model *md, json_t *v, size_t i, const candle_embed_params *p, srv_enc_job *j,
                       srv_reply *out) {
    if (!json_is_string(v) || json_string_length(v) == 0) {
        srv_reply_error(out, 400, "input", "invalid_input", "input[%zu]: every input must be a non-empty string", i);
        return false;
    }
    int64_t max = candle_encoder_max_tokens(md->enc), n = 0;
    int32_t *ids = srv_enc_job_room(j, (size_t)max);
    candle_status s = ids ? candle_encoder_tokenize(md->enc, json_string_value(v), json_string_length(v), p, ids,
                                                    (size_t)max, &n)
                          : CANDLE_ERR_OOM;
    if (s) {
        input_error(out, s, i, ids ? candle_last_errmsg() : "out of memory");
        return false;
    }
    srv_enc_job_add(j, (int64_t)i, n);
    return true;
}

/* The request's input, tokenized, as a job of dim floats per row (*job, to
 * put back after), or an error reply. */
static bool read_inputs(srv_ctx *c, srv_model *md, json_t *input, const candle_embed_params *p, int64_t dim,
                        srv_enc_job **job, srv_reply *out) {
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
    bool strings = json_is_string(one ? input : json_array_get(input, 0));
    if (!strings && p->prompt_name) {
        srv_reply_error(out, 400, "prompt_name", "invalid_value",
                        "prompt_name applies to text inputs; token-id inputs are used as given");
        return false;
    }
    if (!(*job = srv_enc_job_get(c, md, SRV_ENC_EMBED, (int64_t)n, dim))) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = one ? input : json_array_get(input, i);
        if (!(strings ? text_input(md, v, i, p, *job, out) : token_input(md, v, i, p->no_truncate, *job, out)))
            return false;
    }
    return true;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n floats as base64 of their little-endian bytes into s; the length. */
static size_t base64_floats(const float *v, int64_t n, char *s) {
    size_t bytes = (size_t)n * sizeof *v, o = 0;
    const unsigned char *b = (const unsigned char *)v; /* little-endian hosts */
    for (size_t i = 0; i < bytes; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < bytes ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < bytes ? b[i + 2] : 0);
        s[o++] = b64[w >> 18 & 63];
        s[o++] = b64[w >> 12 & 63];
        s[o++] = i + 1 < bytes ? b64[w >> 6 & 63] : '=';
        s[o++] = i + 2 < bytes ? b64[w & 63] : '=';
    }
    return o;
}

/* A float as JSON: 9 significant digits, which read back (through a
 * reader's double) to the same float; ".0" where that reads as an integer;
 * null for NaN and infinities (JSON has none). */
static size_t json_float(float x, char *s) {
    if (!isfinite(x)) return (size_t)sprintf(s, "null");
    int n = sprintf(s, "%.9g", (double)x);
    if (!strpbrk(s, ".e")) n += sprintf(s + n, ".0");
    return (size_t)n;
}

/* s escaped as a JSON string's contents (s is the model's id) into o. */
static size_t json_text(const char *s, char *o) {
    size_t k = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') o[k++] = '\\', o[k++] = (char)ch;
        else if (ch < 0x20) k += (size_t)sprintf(o + k, "\\u%04x", ch);
        else o[k++] = (char)ch;
    }
    return k;
}

/* The reply body, written straight from the rows (one allocation, where a
 * jansson tree took one per float). */
static char *response(srv_model *md, const srv_enc_job *j, bool base64) {
    int64_t dim = j->dim, total = 0;
    for (int64_t i = 0; i < j->n; i++) total += j->n_ids[i];
    size_t row = base64 ? 4 * (((size_t)dim * 4 + 2) / 3) : (size_t)dim * 17, head = 6 * strlen(md->id) + 160;
    char *s = malloc(head + (size_t)j->n * (row + 64)), *o = s;
    if (!s) return NULL;
    o += sprintf(o, "{\"object\":\"list\",\"data\":[");
    for (int64_t i = 0; i < j->n; i++) {
        const float *v = j->out + i * dim;
        o += sprintf(o, "%s{\"object\":\"embedding\",\"index\":%lld,\"embedding\":%s", i ? "," : "", (long long)i,
                     base64 ? "\"" : "[");
        if (base64) o += base64_floats(v, dim, o);
        for (int64_t k = 0; !base64 && k < dim; k++) {
            if (k) *o++ = ',';
            o += json_float(v[k], o);
        }
        o += sprintf(o, "%s}", base64 ? "\"" : "]");
    }
    o += sprintf(o, "],\"model\":\"");
    o += json_text(md->id, o);
    sprintf(o, "\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", (long long)total, (long long)total);
    return s;
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
    candle_embed_params p = candle_embed_default_params();
    bool base64;
    srv_enc_job *j = NULL;
    if (read_options(md, req, &p, &base64, out) &&
        read_inputs(c, md, json_object_get(req, "input"), &p,
                    p.dimensions ? p.dimensions : candle_encoder_dim(md->enc), &j, out)) {
        candle_status s = srv_enc_job_run(md, j);
        if (s) {
            srv_reply_error(out, 500, NULL, NULL, "%s", j->err);
        } else {
            out->status = 200;
            if (!(out->body = response(md, j, base64))) srv_reply_error(out, 500, NULL, NULL, "out of memory");
        }
    }
    if (j) srv_enc_job_put(md, j);
}
