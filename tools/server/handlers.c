/* Endpoint handlers: request JSON in, response JSON out (jansson). Every
 * error answers in OpenAI's shape {"error": {"message", "type", "param",
 * "code"}}. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"
#include "tokenizer/unicode-impl.h"

/* msg as valid UTF-8 into out (cap >= 5): a byte that begins no well-formed
 * character becomes U+FFFD (tok_utf8_decode's rule). Messages quote input
 * (jansson's "near '...'" cuts a character in two, a URL may hold any
 * bytes), and jansson builds no string that is not UTF-8. */
static const char *utf8_clean(const char *msg, char *out, size_t cap) {
    size_t n = 0, left = strlen(msg);
    while (left && n + 4 < cap) { /* room for a character and the NUL */
        uint32_t cp;
        size_t len = tok_utf8_decode(msg, left, &cp);
        n += tok_utf8_encode(cp, out + n);
        msg += len;
        left -= len;
    }
    out[n] = 0;
    return out;
}

char *srv_error_json(int status, const char *msg, const char *param, const char *code) {
    char clean[1024];
    msg = utf8_clean(msg, clean, sizeof clean);
    const char *type = status == 401   ? "authentication_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                       : status == 404 ? "not_found_error"
                                       : "invalid_request_error";
    json_t *e = json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg, "type", type,
                          "param", param, "code", code);
    char *s = e ? srv_json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return s;
}

void srv_reply_error(srv_reply *out, int status, const char *param, const char *code,
                        const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    out->status = status;
    out->body = srv_error_json(status, msg, param, code);
}

void srv_reply_json(srv_reply *out, int status, json_t *j) {
    out->status = status;
    out->body = j ? srv_json_dumps(j, JSON_COMPACT) : NULL;
    if (!out->body) srv_reply_error(out, 500, NULL, NULL, "out of memory");
    json_decref(j);
}

/* --- request fields ---------------------------------------------------------- */

/* Each getter: absent or null leaves *v as is and returns true; a wrong type
 * or range fills the error reply and returns false. */
static bool get_num(json_t *o, const char *k, double lo, double hi, double *v, srv_reply *out) {
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return true;
    if (!json_is_number(j)) {
        srv_reply_error(out, 400, k, "invalid_type", "'%s' must be a number", k);
        return false;
    }
    double x = json_number_value(j);
    if (!(x >= lo && x <= hi)) {
        srv_reply_error(out, 400, k, "invalid_value", "'%s' must be between %g and %g, got %g", k, lo,
                    hi, x);
        return false;
    }
    *v = x;
    return true;
}

static bool get_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *v,
                    srv_reply *out) {
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return true;
    if (!json_is_integer(j)) {
        srv_reply_error(out, 400, k, "invalid_type", "'%s' must be an integer", k);
        return false;
    }
    json_int_t x = json_integer_value(j);
    if (x < lo || x > hi) {
        srv_reply_error(out, 400, k, "invalid_value", "'%s' must be between %lld and %lld, got %lld",
                    k, (long long)lo, (long long)hi, (long long)x);
        return false;
    }
    *v = x;
    return true;
}

bool srv_get_bool(json_t *o, const char *k, bool *v, srv_reply *out) {
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return true;
    if (!json_is_boolean(j)) {
        srv_reply_error(out, 400, k, "invalid_type", "'%s' must be a boolean", k);
        return false;
    }
    *v = json_is_true(j);
    return true;
}

static bool add_stop(srv_req *r, json_t *j, srv_reply *out) {
    if (!json_is_string(j) || json_string_length(j) == 0) {
        srv_reply_error(out, 400, "stop", "invalid_type", "'stop' must be a non-empty string or an "
                    "array of at most %d non-empty strings", SRV_MAX_STOP);
        return false;
    }
    if (r->n_stop >= SRV_MAX_STOP) {
        srv_reply_error(out, 400, "stop", "invalid_value", "'stop' takes at most %d sequences",
                    SRV_MAX_STOP);
        return false;
    }
    r->stop[r->n_stop] = strdup(json_string_value(j));
    if (!r->stop[r->n_stop]) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    r->n_stop++;
    return true;
}

/* Fields of OpenAI's API this server does not implement yet are refused, so a
 * client never takes a reply without what it asked for (issue 22, finding
 * 13). Absent, null, false, 0, an empty array or object are what the server
 * does anyway, and pass. tools, tool_choice and the deprecated functions
 * are srv_tools_parse's. */
static bool refuse_unsupported(json_t *o, srv_reply *out) {
    /* echo: the prompt (and its logprobs) in the reply, not implemented */
    static const char *const fields[] = {"echo"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *k = fields[i];
        json_t *v = json_object_get(o, k);
        if (!v || json_is_null(v) || json_is_false(v)) continue;
        if (json_is_integer(v) && json_integer_value(v) == 0) continue;
        if ((json_is_array(v) && json_array_size(v) == 0) || (json_is_object(v) && json_object_size(v) == 0))
            continue;
        srv_reply_error(out, 400, k, "unsupported_parameter", "'%s' is not supported by this server", k);
        return false;
    }
    return true;
}

/* response_format, enforced: {"type": "json_object"} constrains the reply to
 * a JSON object, {"type": "json_schema", "json_schema": {"schema": {...}}} to
 * the schema (candle_json_schema_to_gbnf; a keyword it cannot enforce is a
 * 400 naming it, never a looser grammar), "text" leaves it free. */
static bool parse_response_format(json_t *o, srv_req *r, srv_reply *out) {
    json_t *v = json_object_get(o, "response_format");
    if (!v || json_is_null(v)) return true;
    json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!type) {
        srv_reply_error(out, 400, "response_format", "invalid_type",
                        "'response_format' must be an object with a string 'type'");
        return false;
    }
    if (!strcmp(type, "text")) return true;
    char *schema = NULL;
    if (!strcmp(type, "json_object")) {
        schema = strdup("{\"type\":\"object\"}");
    } else if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(v, "json_schema");
        json_t *sch = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!json_is_object(sch) && !json_is_boolean(sch)) {
            srv_reply_error(out, 400, "response_format", "invalid_value",
                            "'response_format' of type json_schema needs 'json_schema': {'schema': {...}}");
            return false;
        }
        schema = srv_json_dumps(sch, JSON_COMPACT | JSON_ENCODE_ANY);
    } else {
        srv_reply_error(out, 400, "response_format", "invalid_value",
                        "'response_format' type '%s' is not one of text, json_object, json_schema", type);
        return false;
    }
    char *gbnf = NULL;
    candle_status st = schema ? candle_json_schema_to_gbnf(schema, strlen(schema), &gbnf) : CANDLE_ERR_OOM;
    free(schema);
    return srv_grammar_parse(st, gbnf, "response_format", &r->grammar, out);
}

/* grammar: llama-server's extension, a GBNF grammar (candle_grammar_parse's)
 * the reply follows, enforced as response_format's; not beside it. */
static bool parse_grammar(json_t *o, srv_req *r, srv_reply *out) {
    json_t *v = json_object_get(o, "grammar");
    if (!v || json_is_null(v) || (json_is_string(v) && !json_string_length(v))) return true;
    if (!json_is_string(v)) {
        srv_reply_error(out, 400, "grammar", "invalid_type", "'grammar' must be a string (GBNF)");
        return false;
    }
    if (r->grammar) {
        srv_reply_error(out, 400, "grammar", "invalid_value",
                        "'grammar' and 'response_format' cannot both constrain the reply");
        return false;
    }
    char *g = strdup(json_string_value(v));
    return srv_grammar_parse(g ? CANDLE_OK : CANDLE_ERR_OOM, g, "grammar", &r->grammar, out);
}

bool srv_grammar_parse(candle_status st, char *gbnf, const char *param, candle_grammar **g, srv_reply *out) {
    if (!st) st = candle_grammar_parse(g, gbnf, strlen(gbnf));
    candle_free(gbnf);
    if (st == CANDLE_ERR_OOM) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    if (st) {
        srv_reply_error(out, 400, param, "unsupported_parameter", "%s", candle_last_errmsg());
        return false;
    }
    return true;
}

/* logprobs: chat takes "logprobs": bool and "top_logprobs": 0..20 (which
 * needs logprobs true, as OpenAI says); the legacy completions take
 * "logprobs": N, 0..5 alternatives. */
static bool parse_logprobs(json_t *o, bool chat, srv_req *r, srv_reply *out) {
    json_int_t n = -1;
    if (chat) {
        bool on = false;
        json_int_t top = -1;
        if (!srv_get_bool(o, "logprobs", &on, out) ||
            !get_int(o, "top_logprobs", 0, CANDLE_MAX_TOP_LOGPROBS, &top, out))
            return false;
        if (top >= 0 && !on) {
            srv_reply_error(out, 400, "top_logprobs", "invalid_value",
                            "'top_logprobs' needs 'logprobs': true");
            return false;
        }
        n = on ? (top >= 0 ? top : 0) : -1;
    } else {
        json_t *t = json_object_get(o, "top_logprobs");
        if (t && !json_is_null(t)) {
            srv_reply_error(out, 400, "top_logprobs", "invalid_value",
                            "'top_logprobs' is a /v1/chat/completions field; /v1/completions takes "
                            "'logprobs': 0 to 5");
            return false;
        }
        if (!get_int(o, "logprobs", 0, 5, &n, out)) return false;
    }
    r->n_logprobs = (int)n;
    return true;
}

/* logit_bias: {"token id": bias}, ids of this vocabulary, biases -100..100
 * (candle_sampler_set_logit_bias adds them to the logits). */
static bool parse_logit_bias(const srv_model *md, json_t *o, srv_req *r, srv_reply *out) {
    json_t *b = json_object_get(o, "logit_bias");
    if (!b || json_is_null(b)) return true;
    if (!json_is_object(b)) {
        srv_reply_error(out, 400, "logit_bias", "invalid_type",
                        "'logit_bias' must be an object of token id strings to numbers");
        return false;
    }
    size_t n = json_object_size(b);
    if (!n) return true;
    int32_t nv = candle_tokenizer_n_vocab(md->tok);
    if (n > (size_t)nv) {
        srv_reply_error(out, 400, "logit_bias", "invalid_value", "'logit_bias' has more entries than the "
                        "vocabulary's %d tokens", (int)nv);
        return false;
    }
    r->bias_tok = malloc(n * sizeof *r->bias_tok);
    r->bias_val = malloc(n * sizeof *r->bias_val);
    if (!r->bias_tok || !r->bias_val) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        long long id = -1;
        size_t len = strlen(k);
        if (len && len <= 10 && strspn(k, "0123456789") == len) id = strtoll(k, NULL, 10);
        if (id < 0 || id >= nv) {
            char clean[64];
            srv_reply_error(out, 400, "logit_bias", "invalid_value",
                            "'logit_bias' key '%s' is not a token id in [0, %d)",
                            utf8_clean(strlen(k) < 40 ? k : "(a long key)", clean, sizeof clean), (int)nv);
            return false;
        }
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(x >= -100 && x <= 100)) {
            srv_reply_error(out, 400, "logit_bias", "invalid_value",
                            "'logit_bias' value for token %lld must be a number from -100 to 100", id);
            return false;
        }
        r->bias_tok[r->n_bias] = (int32_t)id;
        r->bias_val[r->n_bias++] = (float)x;
    }
    return true;
}

/* Response ids as OpenAI's look: unique and not guessable from one another
 * (a per-process random key through a 64-bit mix of the request count). */
static uint64_t id_key;
static void id_key_init(void) {
    if (getrandom(&id_key, sizeof id_key, 0) != (ssize_t)sizeof id_key)
        id_key = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
}
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
void srv_unique_id(char *buf, size_t n, const char *prefix, uint64_t seq) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, id_key_init);
    uint64_t a = mix64(id_key + seq), b = mix64(a ^ id_key);
    snprintf(buf, n, "%s%016llx%08llx", prefix, (unsigned long long)a, (unsigned long long)(b >> 32));
}

/* Sampling and length options shared by both generation endpoints. */
static bool parse_options(srv_ctx *c, const srv_model *md, json_t *o, bool chat, srv_req *r, srv_reply *out, bool *stream,
                          bool *include_usage, int *n_choices) {
    /* Omitted samplers are llama-server's defaults (common_params_sampling:
     * temp 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalties over the last
     * 64 tokens), which candle_sampler_default_params holds too; OpenAI's
     * own (temperature 1, no truncation) are a request away. */
    const candle_sampler_params d = candle_sampler_default_params();
    double temp = d.temp, top_p = d.top_p, min_p = d.min_p, pres = d.presence_penalty,
           freq = d.frequency_penalty, rep = d.repeat_penalty;
    json_int_t top_k = d.top_k, seed = -1, n = 1, max_tokens = 0, last_n = d.penalty_last_n;
    json_int_t lim = md->max_tokens_limit;
    if (!refuse_unsupported(o, out) || !parse_response_format(o, r, out) || !parse_grammar(o, r, out) ||
        !parse_logprobs(o, chat, r, out) || !parse_logit_bias(md, o, r, out) || !srv_lora_request(c, o, r, out))
        return false;
    bool ok = get_num(o, "temperature", 0, 10, &temp, out) && get_num(o, "top_p", 0, 1, &top_p, out) &&
              get_num(o, "min_p", 0, 1, &min_p, out) &&
              get_num(o, "presence_penalty", -2, 2, &pres, out) &&
              get_num(o, "frequency_penalty", -2, 2, &freq, out) &&
              get_num(o, "repeat_penalty", 0.01, 10, &rep, out) &&
              get_int(o, "top_k", 0, 1 << 30, &top_k, out) &&
              get_int(o, "repeat_last_n", 0, 1 << 20, &last_n, out) &&
              get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, out) &&
              get_int(o, "n", 1, SRV_MAX_CHOICES, &n, out) &&
              get_int(o, "max_tokens", 1, lim, &max_tokens, out) &&
              get_int(o, "max_completion_tokens", 1, lim, &max_tokens, out) &&
              srv_get_bool(o, "stream", stream, out) && srv_get_bool(o, "ignore_eos", &r->ignore_eos, out);
    if (!ok) return false;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            srv_reply_error(out, 400, "stream_options", "invalid_type",
                        "'stream_options' must be an object");
            return false;
        }
        if (!srv_get_bool(so, "include_usage", include_usage, out)) return false;
    }
    json_t *stop = json_object_get(o, "stop");
    if (json_is_array(stop)) {
        size_t i;
        json_t *v;
        json_array_foreach(stop, i, v) if (!add_stop(r, v, out)) return false;
    } else if (stop && !json_is_null(stop) && !add_stop(r, stop, out)) {
        return false;
    }
    r->sp.temp = (float)temp;
    r->sp.top_p = (float)top_p;
    r->sp.min_p = (float)min_p;
    r->sp.top_k = (int32_t)top_k;
    r->sp.presence_penalty = (float)pres;
    r->sp.frequency_penalty = (float)freq;
    r->sp.repeat_penalty = (float)rep;
    r->sp.penalty_last_n = (int32_t)last_n;
    /* the same ranges as the CLI's (candle_sampler_params_check) */
    if (candle_sampler_params_check(&r->sp)) {
        srv_reply_error(out, 400, NULL, "invalid_value", "%s", candle_last_errmsg());
        return false;
    }
    /* Unseeded requests still get distinct, reproducible-per-request draws. */
    r->sp.seed = seed >= 0 ? (uint64_t)seed
                           : (uint64_t)time(NULL) * 6364136223846793005ull +
                                 (uint64_t)atomic_load(&c->next_id);
    r->max_tokens = max_tokens;
    /* n > 1: every choice in a slot of its own at once (they share the
     * prompt's KV blocks) */
    int slots = srv_sched_n_slots(md->sched);
    if (n > slots) {
        srv_reply_error(out, 400, "n", "invalid_value", "'n' must be at most %d (the server's --parallel), got %lld",
                        slots, (long long)n);
        return false;
    }
    *n_choices = (int)n;
    return true;
}

/* --- prompts ----------------------------------------------------------------- */

/* Prompts of more bytes than this are tokenized one at a time: the
 * tokenizer's work is some 28 bytes per byte of text (issue 22, finding 3:
 * 64 concurrent 1 MB prompts peaked at 1.8 GB). */
#define SRV_BIG_PROMPT (64 << 10)

/* A prompt is refused as soon as it certainly cannot fit: by its length
 * where the vocabulary bounds the bytes one token stands for, else once the
 * encoder has made more tokens than the context holds. Either way a request's
 * tokenizer work is bounded by the context, not by the body. */
static bool tokenize(srv_ctx *c, const srv_model *md, const char *text, size_t len, srv_req *r, srv_reply *out,
                     const char *field) {
    int64_t n_ctx = srv_sched_n_ctx(md->sched), n = 0;
    size_t per = candle_tokenizer_max_token_bytes(md->tok);
    if (per && len / per > (uint64_t)n_ctx) {
        srv_reply_error(out, 400, field, "context_length_exceeded",
                        "the prompt is %zu bytes, more than %lld tokens of at most %zu bytes each; this "
                        "server's context is %lld tokens, and at least one must be left to generate",
                        len, (long long)n_ctx, per, (long long)n_ctx);
        return false;
    }
    int64_t cap = (int64_t)len + 8 < n_ctx + 8 ? (int64_t)len + 8 : n_ctx + 8;
    r->prompt = malloc((size_t)cap * sizeof *r->prompt);
    bool big = len > SRV_BIG_PROMPT;
    if (big) pthread_mutex_lock(&c->big_prompt);
    bool bad = !r->prompt ||
               candle_tokenizer_encode_limit(md->tok, text, len, true, true, n_ctx - 1, r->prompt, cap, &n);
    if (big) pthread_mutex_unlock(&c->big_prompt);
    /* past the limit by more than cap: a long word's ids come at once */
    bad = bad || (n > cap && n < n_ctx);
    if (bad) {
        srv_reply_error(out, r->prompt ? 400 : 500, field, NULL, "cannot tokenize the prompt: %s",
                    r->prompt ? candle_last_errmsg() : "out of memory");
        return false;
    }
    if (n >= n_ctx) { /* the encoder stopped there */
        srv_reply_error(out, 400, field, "context_length_exceeded",
                        "the prompt has at least %lld tokens; this server's context is %lld tokens, and "
                        "at least one must be left to generate", (long long)n, (long long)n_ctx);
        return false;
    }
    /* held for the request's life: only its tokens */
    int32_t *fit = realloc(r->prompt, (size_t)(n ? n : 1) * sizeof *r->prompt);
    if (fit) r->prompt = fit;
    r->n_prompt = n;
    return true;
}

static bool prompt_from_json(srv_ctx *c, const srv_model *md, json_t *p, srv_req *r, srv_reply *out) {
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) return tokenize(c, md, json_string_value(p), json_string_length(p), r, out, "prompt");
    if (json_is_array(p) && json_array_size(p) > 0) {
        size_t n = json_array_size(p), i;
        json_t *v;
        r->prompt = malloc(n * sizeof *r->prompt);
        if (!r->prompt) {
            srv_reply_error(out, 500, NULL, NULL, "out of memory");
            return false;
        }
        json_array_foreach(p, i, v) {
            json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
            if (id < 0 || id >= candle_tokenizer_n_vocab(md->tok)) {
                srv_reply_error(out, 400, "prompt", "invalid_value",
                            "'prompt' must be a string or an array of token ids in [0, %d)",
                            candle_tokenizer_n_vocab(md->tok));
                return false;
            }
            r->prompt[i] = (int32_t)id;
        }
        r->n_prompt = (int64_t)n;
        return true;
    }
    srv_reply_error(out, 400, "prompt", "invalid_type",
                "'prompt' is required: a non-empty string or array of token ids");
    return false;
}

/* Message content: a string, or an array of {"type": "text", "text": ...}. */
static char *message_text(json_t *content) {
    if (json_is_string(content)) return strdup(json_string_value(content));
    if (!json_is_array(content)) return NULL;
    size_t len = 0, i;
    json_t *v;
    json_array_foreach(content, i, v) {
        json_t *t = json_object_get(v, "text");
        if (!json_is_string(t)) return NULL;
        len += json_string_length(t);
    }
    char *s = malloc(len + 1);
    if (!s) return NULL;
    len = 0;
    json_array_foreach(content, i, v) {
        json_t *t = json_object_get(v, "text");
        memcpy(s + len, json_string_value(t), json_string_length(t));
        len += json_string_length(t);
    }
    s[len] = 0;
    return s;
}

/* The template's bos_token / eos_token texts, and whether the tokenizer adds
 * BOS itself (then a rendering's leading bos_token is dropped). */
static void special_texts(const srv_model *md, char *bos, char *eos, size_t cap, bool *adds_bos) {
    int32_t ids[2] = {candle_tokenizer_bos(md->tok), candle_tokenizer_eos(md->tok)};
    char *dst[2] = {bos, eos};
    for (int k = 0; k < 2; k++) {
        size_t len = 0;
        if (ids[k] < 0 || candle_tokenizer_token_bytes(md->tok, ids[k], true, dst[k], cap - 1, &len) || len >= cap)
            len = 0;
        dst[k][len] = 0;
    }
    int32_t first[4];
    int64_t n = 0;
    *adds_bos = ids[0] >= 0 && !candle_tokenizer_encode(md->tok, "a", 1, true, false, first, 4, &n) && n > 0 &&
                first[0] == ids[0];
}

static bool prompt_from_messages(srv_ctx *c, const srv_model *md, json_t *msgs, const srv_tools *tl, srv_req *r, srv_reply *out) {
    if (!md->have_chat) {
        srv_reply_error(out, 400, NULL, "no_chat_template",
                    "this model has no chat template Candle recognises; use /v1/completions");
        return false;
    }
    size_t n = json_is_array(msgs) ? json_array_size(msgs) : 0;
    if (!n) {
        srv_reply_error(out, 400, "messages", "invalid_type",
                    "'messages' is required: a non-empty array of {role, content}");
        return false;
    }
    candle_chat_msg *m = calloc(n, sizeof *m);
    char **texts = calloc(n, sizeof *texts);
    candle_chat_tool_call **calls = calloc(n, sizeof *calls);
    bool ok = m && texts && calls;
    if (!ok) srv_reply_error(out, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; ok && i < n; i++) {
        json_t *msg = json_array_get(msgs, i);
        json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
        if (!(ok = srv_tools_msg_calls(msg, i, &calls[i], &m[i].n_tool_calls, out))) break;
        m[i].tool_calls = calls[i];
        texts[i] = message_text(content);
        /* an assistant message that made calls may have no content */
        bool bare = m[i].n_tool_calls && (!content || json_is_null(content));
        if (!json_is_string(role) || (!texts[i] && !bare)) {
            srv_reply_error(out, 400, "messages", "invalid_type",
                        "messages[%zu] needs a string 'role' and a string (or text parts) "
                        "'content'", i);
            ok = false;
            break;
        }
        m[i].role = json_string_value(role);
        m[i].content = texts[i];
        if (!strcmp(m[i].role, "tool")) {
            json_t *id = json_object_get(msg, "tool_call_id"), *nm = json_object_get(msg, "name");
            if ((id && !json_is_null(id) && !json_is_string(id)) || (nm && !json_is_null(nm) && !json_is_string(nm))) {
                srv_reply_error(out, 400, "messages", "invalid_type",
                                "messages[%zu]: a tool message's 'tool_call_id' and 'name' are strings", i);
                ok = false;
                break;
            }
            m[i].tool_call_id = json_is_string(id) ? json_string_value(id) : NULL;
            m[i].name = json_is_string(nm) ? json_string_value(nm) : NULL;
        }
    }
    char *text = NULL;
    if (ok) {
        char bos[128], eos[128];
        bool adds_bos = false;
        special_texts(md, bos, eos, sizeof bos, &adds_bos);
        candle_chat_options co = {.add_generation_prompt = true, .tools = tl ? tl->tools : NULL,
                                  .bos_token = bos, .eos_token = eos, .strip_bos = adds_bos};
        candle_status st = candle_chat_render(&md->chat, m, n, &co, &text);
        if (st) {
            srv_reply_error(out, st == CANDLE_ERR_OOM ? 500 : 400, "messages", NULL, "%s", candle_last_errmsg());
            ok = false;
        }
    }
    if (ok) ok = tokenize(c, md, text, strlen(text), r, out, "messages");
    candle_free(text);
    for (size_t i = 0; m && i < n; i++) {
        if (texts) free(texts[i]);
        if (calls) srv_tools_msg_calls_free(calls[i], m[i].n_tool_calls);
    }
    free(calls);
    free(texts);
    free(m);
    return ok;
}

/* --- generation ---------------------------------------------------------------- */

bool srv_peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
    char ch;
    return recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void wait_done(srv_req *r, int fd) {
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        srv_timedwait_ms(&r->cv, &r->mu, 100);
        if (!r->done && srv_peer_gone(fd)) {
            atomic_store(&r->cancelled, true);
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

/* --- logprobs in OpenAI's shapes ------------------------------------------------ */

/* A log-probability; -inf (a token the grammar or a bias removed) as -9999,
 * OpenAI's number for "never". */
static json_t *lp_num(float x) {
    return json_real(isfinite(x) ? (double)x : -9999.0);
}

/* A token's text: its bytes when they are whole UTF-8, otherwise (part of a
 * character) "bytes:\xNN..." as OpenAI writes those; *bytes (may be NULL)
 * gets them as an array of numbers. */
static json_t *token_text(const srv_model *md, int32_t id, json_t **bytes) {
    char buf[256];
    size_t len = 0;
    if (candle_tokenizer_token_bytes(md->tok, id, true, buf, sizeof buf, &len)) len = 0;
    if (len > sizeof buf) len = sizeof buf;
    bool whole = true;
    for (size_t i = 0; i < len && whole;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(buf + i, len - i, &cp);
        whole = cp != 0xFFFD || (k == 3 && !memcmp(buf + i, "\xEF\xBF\xBD", 3));
        i += k;
    }
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < len; i++) json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    if (whole) return json_stringn(buf, len);
    char hex[6 + 4 * sizeof buf + 1];
    size_t n = (size_t)sprintf(hex, "bytes:");
    for (size_t i = 0; i < len; i++) n += (size_t)sprintf(hex + n, "\\x%02x", (unsigned char)buf[i]);
    return json_stringn(hex, n);
}

static json_t *chat_token_json(const srv_model *md, const candle_token_logprob *t) {
    json_t *bytes;
    json_t *text = token_text(md, t->token, &bytes);
    return json_pack("{s:o,s:o,s:o}", "token", text, "logprob", lp_num(t->logprob), "bytes", bytes);
}

/* The logprobs of entries e[0..n) of a request's text: chat's
 * {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}, or
 * the completions' {tokens, token_logprobs, top_logprobs, text_offset};
 * text_offset counts code points of the returned text (not of the prompt),
 * from the cursor (*cur_b bytes, *cur_cp code points) on. */
static json_t *logprobs_json(const srv_model *md, bool chat, const srv_lp *e, size_t n, const char *text,
                             size_t text_len, size_t *cur_b, size_t *cur_cp) {
    if (chat) {
        json_t *content = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *tok = chat_token_json(md, &e[i].tok), *top = json_array();
            for (int32_t k = 0; k < e[i].n_top; k++) json_array_append_new(top, chat_token_json(md, &e[i].top[k]));
            json_object_set_new(tok, "top_logprobs", top);
            json_array_append_new(content, tok);
        }
        return json_pack("{s:o,s:n}", "content", content, "refusal");
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(toks, token_text(md, e[i].tok.token, NULL));
        json_array_append_new(lps, lp_num(e[i].tok.logprob));
        json_t *d = json_object();
        for (int32_t k = 0; k < e[i].n_top; k++) {
            json_t *t = token_text(md, e[i].top[k].token, NULL);
            if (t && !json_object_get(d, json_string_value(t))) /* two ids of one text: the likelier */
                json_object_set_new(d, json_string_value(t), lp_num(e[i].top[k].logprob));
            json_decref(t);
        }
        json_array_append_new(tops, d);
        size_t to = e[i].start < text_len ? e[i].start : text_len;
        for (; *cur_b < to; (*cur_b)++) *cur_cp += ((unsigned char)text[*cur_b] & 0xC0) != 0x80;
        json_array_append_new(offs, json_integer((json_int_t)*cur_cp));
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* The prompt counts once for all n choices (as OpenAI bills it), with the
 * cached tokens of the first choice (the others share its blocks). */
static json_t *usage_n_json(const srv_req *r, int64_t n_gen) {
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)r->n_prompt,
                     "completion_tokens", (json_int_t)n_gen, "total_tokens",
                     (json_int_t)(r->n_prompt + n_gen), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)r->n_cached);
}


/* A request with tools: its reply is parsed for calls in the template's
 * format, and with tool_choice required or named generation is held to the
 * calls' grammar (as response_format's). With auto the same grammar holds
 * from where the reply starts a call (grammar_lazy), so the arguments of a
 * call follow the function's schema there too: not for Mistral, whose
 * [TOOL_CALLS] marker is a control token the text does not show, nor beside
 * a response_format. */
static bool tools_setup(const srv_model *md, const srv_tools *tl, srv_req *r, srv_reply *out) {
    if (!tl->tools) return true;
    if (!md->have_chat) return true; /* prompt_from_messages refuses it */
    r->tools = true;
    r->tool_parallel = tl->parallel;
    r->tool_fmt = md->chat.tool_format;
    if (!tl->required) {
        if (r->grammar || r->tool_fmt == CANDLE_TOOL_MISTRAL) return true;
        r->grammar_lazy = true;
        return srv_tools_grammar(tl, r->tool_fmt, &r->grammar, out);
    }
    if (r->grammar) {
        srv_reply_error(out, 400, "response_format", "invalid_value",
                        "'response_format' or 'grammar' cannot constrain a reply that 'tool_choice' requires "
                        "to be a call");
        return false;
    }
    return srv_tools_grammar(tl, r->tool_fmt, &r->grammar, out);
}

static void generate(srv_ctx *c, srv_model *md, json_t *o, bool chat, int fd, srv_reply *out) {
    srv_req *r = srv_req_new();
    if (!r) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return;
    }
    bool stream = false, include_usage = false;
    int n = 1;
    long id = atomic_fetch_add(&c->next_id, 1);
    srv_unique_id(out->id, sizeof out->id, chat ? "chatcmpl-" : "cmpl-", (uint64_t)id);
    out->chat = chat;
    srv_tools tl = {0};
    bool ok = parse_options(c, md, o, chat, r, out, &stream, &include_usage, &n) &&
              srv_tools_parse(o, chat, &tl, out) && tools_setup(md, &tl, r, out) &&
              (chat ? prompt_from_messages(c, md, json_object_get(o, "messages"), &tl, r, out)
                    : prompt_from_json(c, md, json_object_get(o, "prompt"), r, out));
    srv_tools_free(&tl);
    int64_t n_ctx = srv_sched_n_ctx(md->sched);
    if (ok && r->n_prompt >= n_ctx) {
        srv_reply_error(out, 400, chat ? "messages" : "prompt", "context_length_exceeded",
                    "the prompt has %lld tokens; this server's context is %lld tokens, and at "
                    "least one must be left to generate", (long long)r->n_prompt,
                    (long long)n_ctx);
        ok = false;
    }
    if (!ok) {
        srv_req_unref(r);
        return;
    }
    if (!r->max_tokens || r->n_prompt + r->max_tokens > n_ctx) r->max_tokens = n_ctx - r->n_prompt;
    /* n choices: requests of their own (seeds seed, seed + 1, ...), submitted
     * together so the scheduler admits them together and the later ones share
     * the first one's prompt rows (the prefix sharing of one burst) */
    srv_req *rs[SRV_MAX_CHOICES] = {r};
    int n_sub = 0, st = 0;
    for (int k = 1; k < n; k++)
        if (!(rs[k] = srv_req_choice(r, k))) st = 500;
    /* a stream of several choices: a group request that http.c streams, told
     * of each choice's text and end (it takes the references to them) */
    srv_req *g = !st && stream && n > 1 ? srv_req_new() : NULL;
    if (g && !(g->choices = calloc((size_t)n, sizeof *g->choices))) st = 500;
    if (!st && g) {
        g->n_choices = n;
        g->n_prompt = r->n_prompt;
        for (int k = 0; k < n; k++) {
            g->choices[k] = rs[k];
            rs[k]->group = g;
        }
    } else if (stream && n > 1) {
        st = 500;
    }
    for (; !st && n_sub < n; n_sub++)
        if ((st = srv_sched_submit(md->sched, rs[n_sub]))) break;
    if (st) {
        const char *msg = n_sub < n && rs[n_sub] ? rs[n_sub]->errmsg : "";
        srv_reply_error(out, st, NULL, st == 429 ? "queue_full" : NULL, "%s", msg[0] ? msg : "out of memory");
        for (int k = 0; k < n_sub; k++) atomic_store(&rs[k]->cancelled, true); /* the scheduler drops them */
        if (g && g->choices) {
            srv_req_unref(g); /* and the choices */
        } else {
            srv_req_unref(g);
            for (int k = 0; k < n; k++) srv_req_unref(rs[k]);
        }
        return;
    }
    if (stream) {
        out->status = 200;
        out->stream = g ? g : r;
        out->include_usage = include_usage;
        return;
    }
    bool gone = false;
    int failed = -1;
    int64_t n_gen = 0;
    for (int k = 0; k < n; k++) {
        if (gone) atomic_store(&rs[k]->cancelled, true);
        wait_done(rs[k], fd);
        pthread_mutex_lock(&rs[k]->mu);
        n_gen += rs[k]->n_gen;
        pthread_mutex_unlock(&rs[k]->mu);
        gone |= atomic_load(&rs[k]->cancelled);
        if (failed < 0 && rs[k]->err_status) failed = k;
    }
    out->tokens = n_gen;
    if (gone) {
        srv_reply_error(out, 499, NULL, NULL, "client disconnected");
    } else if (failed >= 0) {
        srv_reply_error(out, rs[failed]->err_status, NULL, NULL, "%s", rs[failed]->errmsg);
    } else {
        json_t *choices = json_array();
        for (int k = 0; k < n; k++) {
            srv_req *q = rs[k];
            json_t *text = json_stringn_nocheck(q->text ? q->text : "", q->len);
            size_t cb = 0, ccp = 0;
            json_t *lp = q->n_logprobs >= 0 ? logprobs_json(md, chat, q->lp, q->n_lp, q->text, q->len, &cb, &ccp)
                                            : json_null();
            candle_tool_calls tc = {0};
            json_t *calls = chat && r->tools ? srv_tool_calls_json(q->text, q->len, r->tool_fmt, r->tool_parallel, &tc)
                                             : NULL;
            if (calls) {
                /* the text outside the calls, if any, stays the content */
                json_decref(text);
                text = tc.content ? json_string(tc.content) : json_null();
            }
            candle_tool_calls_free(&tc);
            if (calls)
                json_array_append_new(choices, json_pack("{s:i,s:{s:s,s:o,s:o},s:o,s:s}", "index", k, "message",
                                                         "role", "assistant", "content", text, "tool_calls", calls,
                                                         "logprobs", lp, "finish_reason",
                                                         /* cut off by max_tokens (a call after these unfinished) */
                                                         q->finish && !strcmp(q->finish, "length") ? "length" : "tool_calls"));
            else
            json_array_append_new(
                choices, chat ? json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", k, "message", "role", "assistant",
                                          "content", text, "logprobs", lp, "finish_reason", q->finish)
                              : json_pack("{s:i,s:o,s:o,s:s}", "index", k, "text", text, "logprobs", lp,
                                          "finish_reason", q->finish));
        }
        srv_reply_json(out, 200,
                   json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", out->id, "object",
                             chat ? "chat.completion" : "text_completion", "created",
                             (json_int_t)time(NULL), "model", md->id, "choices",
                             choices, "usage", usage_n_json(r, n_gen)));
    }
    for (int k = n - 1; k >= 0; k--) srv_req_unref(rs[k]);
}

static json_t *chunk_json(const srv_reply *rp, json_t *choice) {
    return json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", rp->id, "object",
                     rp->chat ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)time(NULL), "model", rp->model->id, "choices", choice);
}

static bool append_event(char **buf, size_t *len, json_t *j) {
    char *s = j ? srv_json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return false;
    size_t n = strlen(s);
    char *b = realloc(*buf, *len + n + 9);
    if (!b) {
        free(s);
        return false;
    }
    *len += (size_t)sprintf(b + *len, "data: %s\n\n", s);
    *buf = b;
    free(s);
    return true;
}

/* A content chunk of choice `index`: text t and logprobs lp (both taken;
 * lp NULL: null), with the role when role (a chat stream's first chunk). */
static bool content_event(const srv_reply *rp, int index, json_t *t, json_t *lp, bool role,
                          char **buf, size_t *n) {
    if (!lp) lp = json_null();
    json_t *choice = rp->chat ? (role ? json_pack("{s:i,s:{s:s,s:o},s:o,s:n}", "index", index, "delta", "role",
                                                  "assistant", "content", t, "logprobs", lp, "finish_reason")
                                      : json_pack("{s:i,s:{s:o},s:o,s:n}", "index", index, "delta", "content", t,
                                                  "logprobs", lp, "finish_reason"))
                              : json_pack("{s:i,s:o,s:o,s:n}", "index", index, "text", t, "logprobs", lp,
                                          "finish_reason");
    return append_event(buf, n, chunk_json(rp, choice));
}

/* Under q->mu: the logprobs JSON of q's entries not sent yet that end within
 * the first `upto` bytes of its text (the scheduler adds each in the same
 * critical section as the text that ends it), or with all every one left;
 * NULL when there are none, unless always. */
static json_t *stream_logprobs(const srv_model *md, bool chat, srv_req *q, size_t upto, bool all, bool always) {
    size_t from = q->lp_sent, to = from;
    while (to < q->n_lp && (all || q->lp[to].end <= upto)) to++;
    q->lp_sent = to;
    if (to == from && !always) return NULL;
    /* no entries yet: lp is still NULL, and NULL + 0 is undefined in C */
    return logprobs_json(md, chat, q->lp ? q->lp + from : NULL, to - from, q->text, q->len, &q->cp_bytes,
                         &q->cp_count);
}

/* A call's first delta: its index, id, type and name, arguments "". */
static bool tool_head(const srv_reply *rp, int choice, size_t i, const char *id, const char *name, char **buf,
                      size_t *n) {
    char fresh[48];
    if (!id) {
        srv_tool_call_id(fresh, sizeof fresh);
        id = fresh;
    }
    json_t *head = json_pack("{s:i,s:{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]},s:n,s:n}", "index", choice, "delta", "tool_calls",
                             "index", (int)i, "id", id, "type", "function", "function", "name", name, "arguments", "",
                             "logprobs", "finish_reason");
    return append_event(buf, n, head ? chunk_json(rp, head) : NULL);
}

/* A fragment of call i's arguments (whole UTF-8 characters). */
static bool tool_args(const srv_reply *rp, int choice, size_t i, const char *a, size_t len, char **buf, size_t *n) {
    json_t *frag = json_stringn(a, len);
    json_t *d = frag ? json_pack("{s:i,s:{s:[{s:i,s:{s:o}}]},s:n,s:n}", "index", choice, "delta", "tool_calls", "index",
                                 (int)i, "function", "arguments", frag, "logprobs", "finish_reason")
                     : NULL;
    return append_event(buf, n, d ? chunk_json(rp, d) : NULL);
}

/* With tools: q's new text (len bytes) to its tool stream (made with its
 * content deltas on first use); under q->mu in a group, as the scheduler
 * writes q->text. false on memory. */
static bool tool_feed(srv_req *q, const char *text, size_t len) {
    if (!q->tool_stream &&
        (candle_tool_stream_new(q->tool_fmt, &q->tool_stream) || candle_tool_stream_with_content(q->tool_stream)))
        return false;
    return !len || !candle_tool_stream_feed(q->tool_stream, text, len);
}

/* With tools, choice `choice` (request q, fed its new text): the deltas q's
 * tool stream gives, in the reply's order: content (text before, between and
 * after the calls) and each call's head (index, fresh id, name) once its name
 * is known, then its arguments as they grow (only the first call without
 * parallel_tool_calls). The first event carries lp (taken) and, with role,
 * the role. At the end (final) the stream's rest, then what the parse of the
 * whole reply has that the stream did not give: the rest of a streamed
 * call's arguments (none, unless the stream could not know), or a call it
 * did not see, whole; *made says whether the reply has calls. */
static bool tool_events(const srv_reply *rp, srv_req *q, int choice, json_t *lp, bool role, bool final, bool *made,
                        char **buf, size_t *n) {
    json_t *calls = NULL;
    bool ok = true, first = true;
    if (final) {
        candle_tool_calls tc = {0};
        calls = srv_tool_calls_json(q->text, q->len, q->tool_fmt, q->tool_parallel, &tc);
        candle_tool_calls_free(&tc);
        *made = calls != NULL;
        if (candle_tool_stream_finish(q->tool_stream)) ok = false;
    }
    candle_tool_delta d;
    while (ok && candle_tool_stream_next(q->tool_stream, &d)) {
        if (d.content || (first && (lp || role))) { /* the chunk's logprobs (and role) go with its first event */
            ok = content_event(rp, choice, json_stringn_nocheck(d.content ? d.content : "", d.content ? d.len : 0),
                               lp, first && role, buf, n);
            lp = NULL;
        }
        first = false;
        if (!ok || d.content) continue;
        if (d.index > 0 && !q->tool_parallel) continue;
        if (d.name) {
            ok = tool_head(rp, choice, d.index, NULL, d.name, buf, n);
            q->tool_heads = d.index + 1;
        } else {
            ok = tool_args(rp, choice, d.index, d.arguments, d.len, buf, n);
        }
    }
    if (ok && first && (lp || role)) {
        ok = content_event(rp, choice, json_string(""), lp, role, buf, n);
        lp = NULL;
    }
    json_decref(lp);
    for (size_t i = 0; ok && calls && i < json_array_size(calls); i++) {
        json_t *call = json_array_get(calls, i), *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *a = json_string_value(json_object_get(fn, "arguments"));
        size_t m = strlen(a), from = 0;
        candle_tool_stream_call sc;
        if (i < q->tool_heads && candle_tool_stream_get(q->tool_stream, i, &sc)) {
            /* streamed as something the parser then read otherwise (see
             * tools.h): nothing can be taken back */
            if (strcmp(sc.name, name) || sc.len > m || memcmp(sc.arguments, a, sc.len)) continue;
            from = sc.len;
        } else {
            ok = tool_head(rp, choice, i, json_string_value(json_object_get(call, "id")), name, buf, n);
        }
        if (ok && m > from) ok = tool_args(rp, choice, i, a + from, m - from, buf, n);
    }
    json_decref(calls);
    return ok;
}

char *srv_stream_chunk(srv_ctx *c, const srv_reply *rp, const char *text, size_t len, bool first,
                       const srv_req *final) {
    (void)c; /* the model's tokenizer and id are rp->model's */
    char *buf = NULL;
    size_t n = 0;
    bool ok = true;
    srv_req *r = rp->stream;
    bool made[SRV_MAX_CHOICES] = {0}; /* with tools, at the end: choice k's reply has calls */
    if (r && r->choices) {
        /* n > 1 choices: r only signals; each choice's new text and logprobs
         * are read from it, a chunk per choice with any (with tools, its
         * content and calls' deltas, from the choice's own tool stream) */
        for (int k = 0; ok && k < r->n_choices; k++) {
            srv_req *q = r->choices[k];
            pthread_mutex_lock(&q->mu);
            size_t from = q->text_sent, to = q->len;
            json_t *t = q->tools ? NULL : json_stringn_nocheck(q->text ? q->text + from : "", to - from);
            if (q->tools && !tool_feed(q, q->text ? q->text + from : "", to - from)) ok = false;
            q->text_sent = to;
            json_t *lp = q->n_logprobs >= 0 ? stream_logprobs(rp->model, rp->chat, q, to, final != NULL, to > from) : NULL;
            pthread_mutex_unlock(&q->mu);
            bool role = rp->chat && !q->role_sent;
            if (q->tools) {
                if (ok) ok = tool_events(rp, q, k, lp, role, final != NULL, &made[k], &buf, &n);
                else json_decref(lp);
                q->role_sent = true;
            } else if (to > from || role || lp) {
                ok = content_event(rp, k, t, lp, role, &buf, &n);
                q->role_sent = true;
            } else {
                json_decref(t);
            }
        }
    } else {
        json_t *lp = NULL;
        if (r && r->n_logprobs >= 0) {
            r->text_sent += len;
            pthread_mutex_lock(&r->mu);
            lp = stream_logprobs(rp->model, rp->chat, r, r->text_sent, final != NULL, len > 0);
            pthread_mutex_unlock(&r->mu);
        }
        if (r && r->tools) {
            /* the calls are read as they come: content and calls' deltas in
             * the reply's order */
            ok = tool_feed(r, text, len);
            if (ok) ok = tool_events(rp, r, 0, lp, first && rp->chat, final != NULL, &made[0], &buf, &n);
            else json_decref(lp);
        } else if (len || (first && rp->chat) || lp) {
            ok = content_event(rp, 0, json_stringn_nocheck(text ? text : "", len), lp, first && rp->chat, &buf, &n);
        }
    }
    if (ok && final) {
        if (final->err_status) {
            char *es = srv_error_json(final->err_status, final->errmsg, NULL, NULL);
            ok = append_event(&buf, &n, es ? json_loads(es, 0, NULL) : NULL);
            free(es);
        } else {
            /* after the end the scheduler writes none of them: read unlocked */
            int nc = final->choices ? final->n_choices : 1;
            for (int k = 0; ok && k < nc; k++) {
                const char *fin = final->choices ? final->choices[k]->finish : final->finish;
                if (!fin) fin = "stop";
                /* calls, or a call streamed; "length" stays (cut off by
                 * max_tokens, a call perhaps unfinished), as in the message */
                const srv_req *q = final->choices ? final->choices[k] : r;
                if ((made[k] || (q && q->tool_heads)) && strcmp(fin, "length")) fin = "tool_calls";
                json_t *choice = rp->chat ? json_pack("{s:i,s:{},s:s}", "index", k, "delta", "finish_reason", fin)
                                          : json_pack("{s:i,s:s,s:n,s:s}", "index", k, "text", "", "logprobs",
                                                      "finish_reason", fin);
                ok = append_event(&buf, &n, chunk_json(rp, choice));
            }
            if (ok && rp->include_usage) {
                const srv_req *u0 = final->choices ? final->choices[0] : final;
                json_t *u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", rp->id, "object",
                                      rp->chat ? "chat.completion.chunk" : "text_completion",
                                      "created", (json_int_t)time(NULL), "model",
                                      rp->model->id, "choices", "usage", usage_n_json(u0, final->n_gen));
                ok = append_event(&buf, &n, u);
            }
        }
        if (ok) {
            char *b = realloc(buf, n + 16);
            if (b) {
                n += (size_t)sprintf(b + n, "data: [DONE]\n\n");
                buf = b;
            }
        }
    }
    if (!ok) {
        free(buf);
        return NULL;
    }
    if (!buf) buf = calloc(1, 1);
    return buf;
}

/* --- routing ------------------------------------------------------------------- */

/* The endpoint on the request's model, which the caller holds. */
static void route(srv_ctx *c, srv_model *md, int kind, const char *url, json_t *o, int fd, srv_reply *out) {
    if (md->kind == SRV_KIND_SPEECH) {
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' is a speech model (Whisper): it serves /v1/audio/transcriptions and "
                        "/v1/audio/translations, not %s", md->id, url);
    } else if (kind == 6) {
        srv_encoder_head(c, md, url, o, out);
    } else if (kind == 3 && md->enc) {
        srv_embeddings(c, md, o, out);
    } else if (kind == 3) {
        srv_reply_error(out, 400, "model", "model_not_supported",
                    "model '%s' is a decoder-only language model without an embedding output; "
                    "/v1/embeddings is not available for it", md->id);
    } else if (md->enc) {
        srv_reply_error(out, 400, "model", "model_not_supported",
                    "model '%s' is an encoder (embeddings): it serves /v1/embeddings, not %s",
                    md->id, url);
    } else {
        generate(c, md, o, kind == 2, fd, out);
    }
}

void srv_handle(srv_ctx *c, const char *method, const char *url, const char *body, size_t len,
                int fd, srv_reply *out) {
    memset(out, 0, sizeof *out);
    out->tokens = -1;
    bool post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    if (srv_is_lora_url(url)) {
        srv_lora_handle(c, method, url, body, len, out);
        return;
    }
    int kind = srv_is_models_admin_url(url) ? 7
               : !strcmp(url, "/v1/completions") || !strcmp(url, "/completions") ? 1
               : !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions") ? 2
               : !strcmp(url, "/v1/embeddings") || !strcmp(url, "/embeddings")              ? 3
               : srv_is_models_url(url)                                                     ? 4
               : !strcmp(url, "/health")                                                    ? 5
               : srv_is_encoder_head_url(url)                                               ? 6
                                                                                            : 0;
    if (!kind) {
        srv_reply_error(out, 404, NULL, "not_found", "no endpoint %s %s", method, url);
        return;
    }
    if (kind == 4 || kind == 5) {
        if (!get) {
            srv_reply_error(out, 405, NULL, "method_not_allowed", "%s takes GET", url);
        } else if (kind == 4) {
            srv_models_list(c, url, out);
        } else if (atomic_load(&c->shutting_down)) {
            srv_reply_error(out, 503, NULL, "shutting_down", "server is shutting down");
        } else {
            srv_reply_json(out, 200, json_pack("{s:s}", "status", "ok"));
        }
        return;
    }
    if (!post) {
        srv_reply_error(out, 405, NULL, "method_not_allowed", "%s takes POST", url);
        return;
    }
    json_error_t err;
    /* the encoder endpoints are done with the request when this returns
     * (no stream): their JSON needs no heap (jalloc.c) */
    bool arena = kind == 3 || kind == 6;
    if (arena) srv_jparse_begin();
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &err);
    if (!o) {
        srv_reply_error(out, 400, NULL, "invalid_json", "invalid JSON body: %s (line %d, column %d)",
                    err.text, err.line, err.column);
        if (arena) srv_jparse_end();
        return;
    }
    /* the request's model picks the entry; with one model (no router) it
     * answers whatever the request names, as it always has */
    json_t *mj = json_object_get(o, "model");
    if (!json_is_object(o)) {
        srv_reply_error(out, 400, NULL, "invalid_json", "the request body must be a JSON object");
    } else if (kind == 7) {
        srv_models_admin(c, url, o, out);
    } else if (c->router && mj && !json_is_null(mj) && !json_is_string(mj)) {
        srv_reply_error(out, 400, "model", "invalid_type", "'model' must be a string");
    } else {
        srv_model *md = srv_model_acquire(c, json_is_string(mj) ? json_string_value(mj) : NULL, out);
        if (md) {
            route(c, md, kind, url, o, fd, out);
            /* a stream holds its model until its end (http.c releases it) */
            if (out->stream) out->model = md;
            else srv_model_release(c, md);
        }
    }
    json_decref(o);
    if (arena) srv_jparse_end();
}
