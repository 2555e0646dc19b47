/* Whisper tiny.en (CTranslate2 float16, scripts/fetch-whisper.sh) against
 * faster-whisper / CTranslate2 on jfk.wav (goldens made by
 * tests/data/whisper/gen_whisper_goldens.py): the encoder output of the
 * first window (slices of frames, NMSE below 1e-4) and the greedy
 * transcript without timestamps, whose token ids and text must be identical. Skips when the
 * model or the audio is absent, or the build cannot decode audio. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

static const char *model_dir(char *buf, size_t n) {
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(buf, n, "%s/models/whisper-tiny-en", cache && cache[0] ? cache : "build-data");
    return buf;
}

/* The first window's mel as transcribe makes it. */
static float *first_window(const float *samples, size_t n, int n_mels) {
    size_t frames = candle_whisper_mel_frames(n, CANDLE_WHISPER_HOP);
    float *mel = malloc((size_t)n_mels * frames * sizeof *mel);
    float *win = calloc((size_t)n_mels * CANDLE_WHISPER_CHUNK_FRAMES, sizeof *win);
    if (!mel || !win || candle_whisper_log_mel(samples, n, n_mels, CANDLE_WHISPER_HOP, mel, frames)) {
        free(mel);
        free(win);
        return NULL;
    }
    size_t len = frames - 1 < CANDLE_WHISPER_CHUNK_FRAMES ? frames - 1 : CANDLE_WHISPER_CHUNK_FRAMES;
    for (int r = 0; r < n_mels; r++) memcpy(win + (size_t)r * CANDLE_WHISPER_CHUNK_FRAMES, mel + r * frames, len * 4);
    free(mel);
    return win;
}

static void check_encoder(const candle_whisper *w, const json_value *g, const float *samples, size_t n) {
    candle_whisper_dims d = candle_whisper_get_dims(w);
    char path[4096];
    test_path("tests/data/whisper/whisper_enc_jfk.bin", path, sizeof path);
    size_t len = 0;
    float *want = (float *)test_read_file(path, &len);
    float *win = first_window(samples, n, (int)d.n_mels);
    float *enc = malloc((size_t)(d.n_audio_ctx * d.n_state) * sizeof *enc);
    CHECK(want && win && enc);
    if (!want || !win || !enc) goto out;
    CHECK_MSG(candle_whisper_encode(w, win, 0, enc, (size_t)(d.n_audio_ctx * d.n_state)) == CANDLE_OK, "%s",
              candle_last_errmsg());
    const json_value *slices = json_get(g, "encoder_slices");
    double err = 0, ref = 0;
    size_t k = 0;
    for (size_t i = 0; slices && i < slices->n; i++) {
        int64_t a = 0, b = 0;
        json_as_i64(json_at(json_at(slices, i), 0), &a);
        json_as_i64(json_at(json_at(slices, i), 1), &b);
        for (int64_t f = a; f < b; f++)
            for (int64_t j = 0; j < d.n_state && (k + 1) * 4 <= len; j++, k++) {
                double x = enc[f * d.n_state + j], y = want[k];
                err += (x - y) * (x - y);
                ref += y * y;
            }
    }
    CHECK_MSG(k * 4 == len, "golden holds %zu floats, compared %zu", len / 4, k);
    double nmse = err / (ref + 1e-300);
    printf("whisper encoder: NMSE %.3g over %zu values\n", nmse, k);
    CHECK_MSG(nmse < 1e-4, "encoder NMSE %.3g", nmse);
out:
    free(want);
    free(win);
    free(enc);
}

/* The goldens' settings: without_timestamps, condition_on_previous_text off,
 * temperature 0 alone. */
static candle_whisper_transcribe_params no_ts(void) {
    static const float t0[1] = {0.0f};
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    p.beam_size = 1; /* the goldens are greedy (beam_size=1) */
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.timestamps = false;
    p.condition_on_previous_text = false;
    return p;
}

static void check_transcript(const candle_whisper *w, const json_value *g, const char *key, const float *samples,
                             size_t n) {
    candle_whisper_result r;
    candle_whisper_transcribe_params p = no_ts();
    CHECK_MSG(candle_whisper_transcribe(w, samples, n, &p, &r) == CANDLE_OK, "%s", candle_last_errmsg());
    char k[64];
    snprintf(k, sizeof k, "%s_tokens", key);
    const json_value *toks = json_get(g, k);
    const char *text = "";
    snprintf(k, sizeof k, "%s_text", key);
    json_as_str(json_get(g, k), &text, NULL);
    bool same = toks && (int64_t)toks->n == r.n_tokens;
    for (size_t i = 0; same && i < toks->n; i++) {
        int64_t v;
        same = json_as_i64(json_at(toks, i), &v) && v == r.tokens[i];
    }
    CHECK_MSG(same, "%s: token ids differ (%lld tokens, golden %zu)", key, (long long)r.n_tokens, toks ? toks->n : 0);
    CHECK_MSG(r.text && !strcmp(r.text, text), "text '%s' vs '%s'", r.text ? r.text : "(null)", text);
    printf("whisper transcript of %s: '%s'\n", key, r.text ? r.text : "");
    candle_whisper_result_free(&r);
}

typedef struct job {
    const candle_whisper *w;
    const float *samples;
    size_t n;
    candle_status s;
    candle_whisper_result r;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    candle_whisper_transcribe_params p = no_ts();
    j->s = candle_whisper_transcribe(j->w, j->samples, j->n, &p, &j->r);
    return NULL;
}

/* One model, two transcriptions at once: the same text as alone. */
static void check_threads(const candle_whisper *w, const json_value *g, const float *samples, size_t n) {
    job j[2] = {{w, samples, n, 0, {0}}, {w, samples, n, 0, {0}}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, run_job, &j[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    const char *text = "";
    json_as_str(json_get(g, "jfk_text"), &text, NULL);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(j[i].s == CANDLE_OK && j[i].r.text && !strcmp(j[i].r.text, text), "thread %d: '%s'", i,
                  j[i].r.text ? j[i].r.text : candle_last_errmsg());
        candle_whisper_result_free(&j[i].r);
    }
}

int main(void) {
    char dir[4096], wav[4096], gpath[4096];
    model_dir(dir, sizeof dir);
    test_path("tests/data/audio/jfk.wav", wav, sizeof wav); /* a copy of ../shared's, in the repository */
    if (!test_need_file("whisper tiny.en (scripts/fetch-whisper.sh)", dir) || !test_need_file("jfk.wav", wav))
        return test_done("test_whisper");
    if (!candle_audio_can_decode()) {
        test_skip("whisper", "built without libsndfile");
        return test_done("test_whisper");
    }
    candle_whisper *w = NULL;
    CHECK_MSG(candle_whisper_load(&w, dir, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    float *samples = NULL;
    size_t n = 0;
    CHECK_MSG(candle_audio_load(wav, &samples, &n) == CANDLE_OK, "%s", candle_last_errmsg());
    test_path("tests/data/whisper/whisper_goldens.json", gpath, sizeof gpath);
    size_t glen = 0;
    char *gtext = test_read_file(gpath, &glen);
    json_doc *doc = NULL;
    CHECK(gtext && json_parse(&doc, gtext, glen, gpath, NULL) == CANDLE_OK);
    if (w && samples && doc) {
        check_encoder(w, json_root(doc), samples, n);
        check_transcript(w, json_root(doc), "jfk", samples, n);
        /* long-form: two windows, the second partly zeros */
        float *three = malloc(3 * n * sizeof *three);
        for (size_t i = 0; three && i < 3; i++) memcpy(three + i * n, samples, n * sizeof *three);
        if (three) check_transcript(w, json_root(doc), "jfk3", three, 3 * n);
        free(three);
        check_threads(w, json_root(doc), samples, n);
    }
    json_free(doc);
    free(gtext);
    candle_free(samples);
    candle_whisper_free(w);
    return test_done("test_whisper");
}
