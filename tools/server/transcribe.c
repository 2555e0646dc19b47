/* POST /v1/audio/transcriptions and /v1/audio/translations on a Whisper
 * model (candle_whisper), in OpenAI's shape: a multipart/form-data body with
 * file, model, language, prompt (the initial prompt), response_format (json,
 * text, srt, vtt, verbose_json), temperature and timestamp_granularities[]
 * (segment, word: verbose_json's segments and its top-level words, word
 * timestamps as faster-whisper's word_timestamps). The audio is
 * decoded from the request's memory (candle_audio_from_memory). A Whisper
 * model answers only these, /v1/models and /health; the others are a 400.
 *
 * The model is read-only and thread-shareable: each request transcribes in
 * its own connection thread with its own state, at most `parallel` at once
 * (the rest wait, up to `queue` of them; 429 beyond). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli/subtitles.h"
#include "multipart.h"
#include "server.h"

/* Text fields (model, language, prompt, ...) are short; a larger one is a 400. */
#define SRV_AUDIO_MAX_FIELD 65536
/* What a form holds beside its file: the text fields, part headers and
 * boundaries. A Content-Length above max_audio_bytes plus this is a 413
 * before the body is read. */
#define SRV_AUDIO_FORM_SLACK (SRV_MP_MAX_PARTS * (SRV_MP_MAX_HEADER + 80) + 8 * SRV_AUDIO_MAX_FIELD)

struct srv_audio {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, waiting, parallel, queue, n_threads;
    int uploads; /* admitted requests, from their headers to their end */
};

int srv_audio_init(srv_ctx *c, int parallel, int queue, int n_threads) {
    struct srv_audio *a = calloc(1, sizeof *a);
    if (!a) return 1;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->parallel = parallel < 1 ? 1 : parallel;
    a->queue = queue;
    a->n_threads = n_threads;
    c->audio = a;
    return 0;
}

void srv_audio_free(srv_ctx *c) {
    if (!c->audio) return;
    pthread_mutex_destroy(&c->audio->mu);
    pthread_cond_destroy(&c->audio->cv);
    free(c->audio);
    c->audio = NULL;
}

bool srv_audio_admit(srv_ctx *c) {
    struct srv_audio *a = c->audio;
    pthread_mutex_lock(&a->mu);
    bool ok = a->uploads < a->parallel + a->queue;
    if (ok) a->uploads++;
    pthread_mutex_unlock(&a->mu);
    return ok;
}

void srv_audio_release(srv_ctx *c) {
    pthread_mutex_lock(&c->audio->mu);
    c->audio->uploads--;
    pthread_mutex_unlock(&c->audio->mu);
}

bool srv_is_audio_url(const char *url) {
    return !strcmp(url, "/v1/audio/transcriptions") || !strcmp(url, "/v1/audio/translations") ||
           !strcmp(url, "/audio/transcriptions") || !strcmp(url, "/audio/translations");
}

/* A single Whisper model takes every URL (the others answer what it serves). */
static bool single_speech(const srv_ctx *c) {
    return !c->router && c->n_models && c->models[c->default_model]->kind == SRV_KIND_SPEECH;
}

bool srv_audio_routes(const srv_ctx *c, const char *url) {
    return single_speech(c) || srv_is_audio_url(url);
}

size_t srv_body_limit(const srv_ctx *c, const char *url) {
    /* no Whisper model: the audio URLs are a 400, their bodies bounded as any */
    if (!c->audio || !srv_is_audio_url(url)) return c->cfg.max_body;
    size_t a = c->cfg.max_audio_bytes + SRV_AUDIO_FORM_SLACK;
    return a > c->cfg.max_body ? a : c->cfg.max_body;
}

/* --- the slot gate ------------------------------------------------------------ */

/* 0 with a slot taken, or the HTTP status refusing the request. */
static int gate_enter(srv_ctx *c, int fd) {
    struct srv_audio *a = c->audio;
    int st = 0;
    pthread_mutex_lock(&a->mu);
    if (a->running >= a->parallel && a->waiting >= a->queue) {
        pthread_mutex_unlock(&a->mu);
        return 429;
    }
    a->waiting++;
    while (a->running >= a->parallel && !atomic_load(&c->shutting_down)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        if (pthread_cond_timedwait(&a->cv, &a->mu, &ts) && srv_peer_gone(fd)) {
            st = 499;
            break;
        }
    }
    a->waiting--;
    if (!st && atomic_load(&c->shutting_down)) st = 503;
    if (!st) a->running++;
    pthread_mutex_unlock(&a->mu);
    return st;
}

static void gate_leave(srv_ctx *c) {
    pthread_mutex_lock(&c->audio->mu);
    c->audio->running--;
    pthread_cond_signal(&c->audio->cv);
    pthread_mutex_unlock(&c->audio->mu);
}

/* --- output formats ----------------------------------------------------------- */

enum { FMT_JSON, FMT_TEXT, FMT_SRT, FMT_VTT, FMT_VERBOSE };

/* The cues `candle transcribe -o srt|vtt` prints; NULL when out of memory. */
static char *subtitles(const candle_whisper_result *r, int fmt) {
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    if (!f) return NULL;
    for (int64_t i = 0; i < r->n_segments; i++)
        cue_write(f, &r->segments[i], i + 1, fmt == FMT_SRT ? CUE_SRT : CUE_VTT);
    if (fmt == FMT_VTT && !r->n_segments) fputs("WEBVTT\n\n", f);
    bool failed = ferror(f);
    if (fclose(f) || failed) {
        free(p);
        return NULL;
    }
    return p;
}

/* OpenAI's verbose_json: the segments (segment granularity, the default)
 * and a top-level "words" array of {word, start, end} (word granularity). */
static json_t *verbose_json(const candle_whisper_result *r, bool translate, double duration, const char *text,
                            size_t text_len, bool want_segments, bool want_words) {
    const char *lang = candle_whisper_language_name(r->language);
    json_t *segs = want_segments ? json_array() : NULL;
    for (int64_t i = 0; segs && i < r->n_segments; i++) {
        const candle_whisper_segment *s = &r->segments[i];
        json_t *toks = json_array();
        for (int64_t k = 0; toks && k < s->n_tokens; k++) json_array_append_new(toks, json_integer(s->tokens[k]));
        json_array_append_new(
            segs, json_pack("{s:I,s:I,s:f,s:f,s:s,s:o,s:f,s:f,s:f,s:f}", "id", (json_int_t)i, "seek",
                            (json_int_t)s->seek, "start", s->t0, "end", s->t1, "text", s->text, "tokens",
                            toks ? toks : json_array(), "temperature", (double)s->temperature, "avg_logprob",
                            (double)s->avg_logprob, "compression_ratio",
                            isfinite(s->compression_ratio) ? (double)s->compression_ratio : 0.0,
                            "no_speech_prob", (double)s->no_speech_prob));
    }
    json_t *o = json_pack("{s:s,s:s,s:f,s:s%,s:{s:s,s:I}}", "task", translate ? "translate" : "transcribe",
                          "language", lang ? lang : "english", "duration", duration, "text", text, text_len, "usage", "type",
                          "duration", "seconds", (json_int_t)ceil(duration));
    if (!o) {
        json_decref(segs);
        return NULL;
    }
    if (want_segments) json_object_set_new(o, "segments", segs ? segs : json_array());
    if (want_words) {
        json_t *words = json_array();
        for (int64_t i = 0; words && i < r->n_segments; i++)
            for (int64_t k = 0; k < r->segments[i].n_words; k++) {
                const candle_whisper_word *w = &r->segments[i].words[k];
                json_array_append_new(words, json_pack("{s:s,s:f,s:f}", "word", w->word, "start", w->t0, "end", w->t1));
            }
        json_object_set_new(o, "words", words ? words : json_array());
    }
    return o;
}

/* --- the request -------------------------------------------------------------- */

typedef struct audio_req {
    const srv_mp_part *file;
    int fmt;
    double temperature; /* -1: absent */
    char *prompt;       /* the initial prompt, NUL-terminated (malloc'd), or NULL */
    const char *language; /* a multilingual model's language code, or NULL: detected */
    bool seg_granularity, word_granularity; /* timestamp_granularities[] given */
} audio_req;

/* A text field's bytes equal s. */
static bool field_is(const srv_mp_part *p, const char *s) {
    return p->len == strlen(s) && !memcmp(p->data, s, p->len);
}

/* The form's fields into q; false after an error reply. */
static bool read_form(srv_ctx *c, const srv_model *md, const srv_multipart *m, audio_req *q, srv_reply *out) {
    q->fmt = FMT_JSON;
    q->temperature = -1;
    for (int i = 0; i < m->n; i++) {
        const srv_mp_part *p = &m->parts[i];
        const char *k = p->name;
        if (!strcmp(k, "file")) {
            q->file = p;
        } else if (!strcmp(k, "model")) {
            /* taken by transcribe (form_model) */
        } else if (!strcmp(k, "language")) {
            /* an ISO-639-1 code as OpenAI takes it (or Whisper's English name) */
            char v[32] = "";
            if (p->len < sizeof v) memcpy(v, p->data, p->len);
            const char *code = p->len < sizeof v ? candle_whisper_language_code(v) : NULL;
            bool multi = candle_whisper_is_multilingual(md->whisper);
            if (p->len && !code) {
                srv_reply_error(out, 400, "language", "unsupported_language",
                                "'%.*s' is not a language Whisper knows (an ISO-639-1 code such as 'en' or 'de')",
                                (int)(p->len < 64 ? p->len : 64), (const char *)p->data);
                return false;
            }
            if (code && !multi && strcmp(code, "en")) {
                srv_reply_error(out, 400, "language", "unsupported_language",
                                "model '%s' is English-only: language must be 'en'", md->id);
                return false;
            }
            q->language = multi ? code : NULL;
        } else if (!strcmp(k, "prompt")) {
            /* faster-whisper's initial_prompt; a C string, so no NUL in it */
            if (memchr(p->data, 0, p->len)) {
                srv_reply_error(out, 400, "prompt", "invalid_value", "'prompt' holds a NUL byte");
                return false;
            }
            free(q->prompt);
            q->prompt = p->len ? malloc(p->len + 1) : NULL;
            if (p->len && !q->prompt) {
                srv_reply_error(out, 500, NULL, NULL, "out of memory");
                return false;
            }
            if (q->prompt) {
                memcpy(q->prompt, p->data, p->len);
                q->prompt[p->len] = 0;
            }
        } else if (!strcmp(k, "response_format")) {
            static const char *const names[] = {"json", "text", "srt", "vtt", "verbose_json"};
            int f = -1;
            for (int j = 0; j < 5; j++)
                if (field_is(p, names[j])) f = j;
            if (f < 0) {
                srv_reply_error(out, 400, "response_format", "invalid_value",
                                "response_format must be one of json, text, srt, vtt, verbose_json");
                return false;
            }
            q->fmt = f;
        } else if (!strcmp(k, "temperature")) {
            char v[64], *end;
            size_t n = p->len < sizeof v - 1 ? p->len : sizeof v - 1;
            memcpy(v, p->data, n);
            v[n] = 0;
            double t = strtod(v, &end);
            if (!n || p->len >= sizeof v || *end || !(t >= 0 && t <= 1)) {
                srv_reply_error(out, 400, "temperature", "invalid_value",
                                "temperature must be a number between 0 and 1");
                return false;
            }
            q->temperature = t;
        } else if (!strcmp(k, "timestamp_granularities[]") || !strcmp(k, "timestamp_granularities")) {
            if (field_is(p, "word")) {
                q->word_granularity = true;
            } else if (field_is(p, "segment")) {
                q->seg_granularity = true;
            } else {
                srv_reply_error(out, 400, "timestamp_granularities", "invalid_value",
                                "timestamp_granularities takes 'word' and/or 'segment'");
                return false;
            }
        } else if (!strcmp(k, "stream")) {
            if (!field_is(p, "false")) {
                srv_reply_error(out, 400, "stream", "unsupported_parameter",
                                "streamed transcriptions are not supported by this server");
                return false;
            }
        } else {
            srv_reply_error(out, 400, k, "unsupported_parameter", "'%s' is not a field this server takes", k);
            return false;
        }
    }
    /* as OpenAI: word timestamps come in verbose_json only */
    if (q->word_granularity && q->fmt != FMT_VERBOSE) {
        srv_reply_error(out, 400, "timestamp_granularities", "invalid_value",
                        "timestamp_granularities 'word' requires response_format=verbose_json");
        return false;
    }
    if (!q->file || !q->file->len) {
        srv_reply_error(out, 400, "file", "invalid_value", "'file' (the audio, a non-empty file part) is required");
        return false;
    }
    if (q->file->len > c->cfg.max_audio_bytes) {
        srv_reply_error(out, 413, "file", "file_too_large", "the audio file is %zu bytes, over the limit of %zu",
                        q->file->len, c->cfg.max_audio_bytes);
        return false;
    }
    return true;
}

typedef struct seg_watch {
    int fd;
    bool gone;
} seg_watch;

/* After each window: stop when the client has left. */
static int on_segment(const candle_whisper_segment *s, void *user) {
    (void)s;
    seg_watch *w = user;
    w->gone = srv_peer_gone(w->fd);
    return w->gone;
}

/* The form's model field into buf (NUL-terminated); false when absent. */
static bool form_model(const srv_multipart *m, char *buf, size_t cap) {
    for (int i = 0; i < m->n; i++) {
        const srv_mp_part *p = &m->parts[i];
        if (strcmp(p->name, "model")) continue;
        size_t n = p->len < cap - 1 ? p->len : cap - 1;
        memcpy(buf, p->data, n);
        buf[n] = 0;
        return true;
    }
    return false;
}

static void transcribe(srv_ctx *c, const char *url, const char *content_type, const char *body, size_t len,
                       int fd, srv_reply *out) {
    bool translate = strstr(url, "translations") != NULL;
    srv_multipart *m = malloc(sizeof *m);
    if (!m) {
        srv_reply_error(out, 500, NULL, NULL, "out of memory");
        return;
    }
    char err[256];
    audio_req q = {0};
    if (!srv_multipart_parse(content_type, body, len, SRV_AUDIO_MAX_FIELD, m, err, sizeof err)) {
        srv_reply_error(out, 400, NULL, "invalid_multipart", "%s", err);
        free(m);
        return;
    }
    char name[256];
    srv_model *md = srv_model_acquire(c, form_model(m, name, sizeof name) ? name : NULL, out);
    if (!md) {
        free(m);
        return;
    }
    if (md->kind != SRV_KIND_SPEECH) {
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' is not a speech model: %s needs a Whisper model (candle serve -m WHISPER_DIR)",
                        md->id, url);
        srv_model_release(c, md);
        free(m);
        return;
    }
    if (!read_form(c, md, m, &q, out)) {
        srv_model_release(c, md);
        free(q.prompt);
        free(m);
        return;
    }
    int st = gate_enter(c, fd);
    if (st) {
        if (st == 429) srv_reply_error(out, 429, NULL, "queue_full", "too many transcriptions waiting");
        else if (st == 503) srv_reply_error(out, 503, NULL, "shutting_down", "server is shutting down");
        else srv_reply_error(out, 499, NULL, NULL, "client gone");
        srv_model_release(c, md);
        free(q.prompt);
        free(m);
        return;
    }
    float *samples = NULL;
    size_t n = 0;
    candle_whisper_result r = {0};
    seg_watch w = {.fd = fd};
    candle_status s = candle_audio_from_memory(q.file->data, q.file->len,
                                               q.file->filename[0] ? q.file->filename : "file", &samples, &n);
    if (s) {
        if (s == CANDLE_ERR_UNSUPPORTED || s == CANDLE_ERR_OOM)
            srv_reply_error(out, 500, "file", NULL, "%s", candle_last_errmsg());
        else
            srv_reply_error(out, 400, "file", "invalid_audio", "cannot decode the audio: %s", candle_last_errmsg());
        goto done;
    }
    candle_whisper_transcribe_params tp = candle_whisper_transcribe_default_params();
    tp.n_threads = c->audio->n_threads;
    /* OpenAI's temperature: 0 (the default) falls back to higher ones on the
     * thresholds; T > 0 starts there and steps by 0.2 up to 1 (as
     * openai-whisper's temperature_increment_on_fallback and `candle transcribe
     * --temperature`). */
    float temps[8];
    int nt = 0;
    double t0 = q.temperature > 0 ? q.temperature : 0;
    for (double t = t0; nt < 8 && (nt == 0 || t <= 1.0 + 1e-6); t = t0 + 0.2 * nt) temps[nt++] = (float)t;
    tp.temperatures = temps;
    tp.n_temperatures = nt;
    tp.seed = (uint64_t)atomic_fetch_add(&c->next_id, 1);
    tp.on_segment = on_segment;
    tp.user = &w;
    tp.initial_prompt = q.prompt;
    tp.language = q.language;
    tp.translate = translate;
    tp.word_timestamps = q.word_granularity;
    s = candle_whisper_transcribe(md->whisper, samples, n, &tp, &r);
    if (s) {
        srv_reply_error(out, s == CANDLE_ERR_INVALID_ARG ? 400 : 500, NULL, NULL, "%s", candle_last_errmsg());
        goto done;
    }
    if (w.gone) {
        srv_reply_error(out, 499, NULL, NULL, "client gone");
        goto done;
    }
    out->tokens = r.n_tokens;
    double duration = (double)n / CANDLE_AUDIO_SAMPLE_RATE;
    size_t tl;
    const char *text = cue_trimmed(r.text ? r.text : "", &tl);
    if (q.fmt == FMT_JSON) {
        srv_reply_json(out, 200,
                       json_pack("{s:s%,s:{s:s,s:I}}", "text", text, tl, "usage", "type", "duration", "seconds",
                                 (json_int_t)ceil(duration)));
    } else if (q.fmt == FMT_VERBOSE) {
        srv_reply_json(out, 200, verbose_json(&r, translate, duration, text, tl,
                                               q.seg_granularity || !q.word_granularity, q.word_granularity));
    } else {
        char *b = NULL;
        if (q.fmt == FMT_TEXT) {
            b = malloc(tl + 2);
            if (b) {
                memcpy(b, text, tl);
                memcpy(b + tl, "\n", 2);
            }
        } else {
            b = subtitles(&r, q.fmt);
        }
        if (!b) {
            srv_reply_error(out, 500, NULL, NULL, "out of memory");
        } else {
            out->status = 200;
            out->body = b;
            out->content_type = q.fmt == FMT_VTT ? "text/vtt; charset=utf-8" : "text/plain; charset=utf-8";
        }
    }
done:
    gate_leave(c);
    srv_model_release(c, md);
    candle_whisper_result_free(&r);
    candle_free(samples);
    free(q.prompt);
    free(m);
}

static bool other_endpoint(const char *url) {
    static const char *const urls[] = {"/v1/completions", "/completions", "/v1/chat/completions",
                                       "/chat/completions", "/v1/embeddings", "/embeddings"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++)
        if (!strcmp(url, urls[i])) return true;
    return srv_is_encoder_head_url(url);
}

void srv_audio_handle(srv_ctx *c, const char *method, const char *url, const char *content_type, const char *body,
                      size_t len, int fd, srv_reply *out) {
    memset(out, 0, sizeof *out);
    out->tokens = -1;
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!srv_is_audio_url(url)) { /* a Whisper model's other routes */
        bool models_url = srv_is_models_url(url), health = !strcmp(url, "/health");
        if (models_url || health) {
            if (!get) srv_reply_error(out, 405, NULL, "method_not_allowed", "%s takes GET", url);
            else if (models_url) srv_models_list(c, url, out);
            else if (atomic_load(&c->shutting_down))
                srv_reply_error(out, 503, NULL, "shutting_down", "server is shutting down");
            else srv_reply_json(out, 200, json_pack("{s:s}", "status", "ok"));
        } else if (other_endpoint(url)) {
            srv_reply_error(out, 400, "model", "model_not_supported",
                            "model '%s' is a speech model (Whisper): it serves /v1/audio/transcriptions and "
                            "/v1/audio/translations, not %s",
                            c->models[c->default_model]->id, url);
        } else {
            srv_reply_error(out, 404, NULL, "not_found", "no endpoint %s %s", method, url);
        }
        return;
    }
    if (!post) {
        srv_reply_error(out, 405, NULL, "method_not_allowed", "%s takes POST", url);
    } else if (!c->router && !single_speech(c)) {
        /* the one model is not Whisper: refused before its form is read */
        srv_reply_error(out, 400, "model", "model_not_supported",
                        "model '%s' is not a speech model: %s needs a Whisper model (candle serve -m WHISPER_DIR)",
                        c->n_models ? c->models[c->default_model]->id : "", url);
    } else if (atomic_load(&c->shutting_down)) {
        srv_reply_error(out, 503, NULL, "shutting_down", "server is shutting down");
    } else {
        transcribe(c, url, content_type, body, len, fd, out);
    }
}
