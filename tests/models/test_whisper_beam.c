/* Whisper beam search and language detection against faster-whisper 1.2.1 /
 * CTranslate2 4.8.5 (tests/data/whisper/gen_whisper_beam_goldens.py):
 * transcribe(beam_size=5, patience=1, length_penalty=1, temperature=0) of
 * jfk.wav with tiny.en (timestamps on and off) and base, and of de.wav,
 * fr.wav and es.wav (espeak-ng) with base, the language detected, and de.wav's translate
 * task: every segment's tokens, text and times identical, avg_logprob close,
 * the language and its probability as detect_language() gives them; then
 * detect_language's top five on the four clips. Bad beam settings, an
 * unknown language and detection on an English-only model are refused.
 * Skips when tiny.en or the audio is absent; the base runs are skipped (and
 * said so) when scripts/fetch-whisper.sh base has not fetched it. The
 * sanitizer run (test_sanitized) searches once per model (tiny.en with
 * timestamps, base translating de.wav) and detects only de.wav's language. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"
#include "whisper-test.h"

static double num(const json_value *o, const char *k) {
    double v = NAN;
    json_as_f64(k ? json_get(o, k) : o, &v);
    return v;
}

static const char *str(const json_value *o, const char *k) {
    const char *s = NULL;
    if (!json_as_str(json_get(o, k), &s, NULL)) return NULL;
    return s;
}

typedef struct clip {
    float *x;
    size_t n;
} clip;

/* tests/data/audio's clips: jfk.wav, then espeak-ng's German, French and Spanish */
#define N_CLIPS 4
static const char *const clip_names[N_CLIPS] = {"jfk", "de", "fr", "es"};

static int clip_index(const char *name) {
    for (int i = 0; i < N_CLIPS; i++)
        if (!strcmp(name, clip_names[i])) return i;
    return 0;
}

static void check_run(const candle_whisper *w, const json_value *run, const clip *c) {
    const char *name = str(run, "model"), *cl = str(run, "clip"), *lang = str(run, "language");
    const char *task = str(run, "task");
    bool ts = true;
    json_as_bool(json_get(run, "timestamps"), &ts);
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    static const float t0[1] = {0.0f};
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.timestamps = ts;
    p.language = lang;
    p.translate = task && !strcmp(task, "translate");
    CHECK(p.beam_size == 5 && p.patience == 1.0f && p.length_penalty == 1.0f); /* faster-whisper's defaults */
    candle_whisper_result r;
    CHECK_MSG(candle_whisper_transcribe(w, c->x, c->n, &p, &r) == CANDLE_OK, "%s", candle_last_errmsg());
    const json_value *segs = json_get(run, "segments");
    CHECK_MSG(segs && (int64_t)segs->n == r.n_segments, "%s %s %s: %lld segments, golden %zu ('%s')", name, cl,
              task, (long long)r.n_segments, segs ? segs->n : 0, r.text ? r.text : "");
    for (int64_t i = 0; segs && i < r.n_segments && i < (int64_t)segs->n; i++) {
        const json_value *g = json_at(segs, (size_t)i), *toks = json_get(g, "tokens");
        const candle_whisper_segment *s = &r.segments[i];
        bool same = wtest_tokens_equal(toks, s);
        const char *text = str(g, "text");
        CHECK_MSG(same, "%s %s %s ts %d segment %lld: tokens differ ('%s' vs '%s')", name, cl, task, ts,
                  (long long)i, s->text, text ? text : "");
        CHECK_MSG(text && !strcmp(s->text, text), "%s %s segment %lld: '%s' vs '%s'", name, cl, (long long)i,
                  s->text, text ? text : "");
        CHECK_MSG(fabs(s->t0 - num(g, "start")) < 1e-6 && fabs(s->t1 - num(g, "end")) < 1e-6,
                  "%s %s segment %lld: [%.3f, %.3f] vs [%.3f, %.3f]", name, cl, (long long)i, s->t0, s->t1,
                  num(g, "start"), num(g, "end"));
        CHECK_MSG(fabs(s->avg_logprob - num(g, "avg_logprob")) < 2e-3, "avg_logprob %g vs %g", s->avg_logprob,
                  num(g, "avg_logprob"));
        CHECK_MSG(fabs(s->no_speech_prob - num(g, "no_speech_prob")) < 2e-3, "no_speech_prob %g vs %g",
                  s->no_speech_prob, num(g, "no_speech_prob"));
        printf("%s %s %s ts %d [%5.2f -> %5.2f]%s\n", name, cl, task, ts, s->t0, s->t1, s->text);
    }
    const char *want = str(run, "detected_language");
    CHECK_MSG(want && !strcmp(r.language, want), "%s %s: language %s, golden %s", name, cl, r.language,
              want ? want : "?");
    CHECK_MSG(fabs(r.language_probability - num(run, "language_probability")) < 2e-3, "%s %s: P(%s) %g vs %g", name,
              cl, r.language, r.language_probability, num(run, "language_probability"));
    candle_whisper_result_free(&r);
}

static void check_detect(const candle_whisper *w, const json_value *d, const clip *c) {
    char codes[5][16];
    float probs[5];
    int n_langs = 0;
    CHECK_MSG(candle_whisper_detect_language(w, c->x, c->n, 0, codes, probs, 5, &n_langs) == CANDLE_OK, "%s",
              candle_last_errmsg());
    CHECK_MSG(n_langs == 99, "%d languages", n_langs);
    const json_value *top = json_get(d, "top");
    for (size_t i = 0; top && i < top->n && i < 5; i++) {
        const json_value *e = json_at(top, i);
        const char *code = NULL;
        json_as_str(json_at(e, 0), &code, NULL);
        double p = num(json_at(e, 1), NULL);
        CHECK_MSG(code && !strcmp(codes[i], code) && fabs(probs[i] - p) < 2e-3, "%s #%zu: %s %g vs %s %g",
                  str(d, "clip"), i, codes[i], probs[i], code ? code : "?", p);
    }
    printf("detect %s: %s %.4f, %s %.4f\n", str(d, "clip"), codes[0], probs[0], codes[1], probs[1]);
}

int main(void) {
    char tiny[2048], base[2048];
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(tiny, sizeof tiny, "%s/models/whisper-tiny-en", cache && cache[0] ? cache : "build-data");
    snprintf(base, sizeof base, "%s/models/whisper-base", cache && cache[0] ? cache : "build-data");
    if (!test_need_file("whisper tiny.en (scripts/fetch-whisper.sh)", tiny)) return test_done("test_whisper_beam");
    if (!candle_audio_can_decode()) {
        test_skip("whisper_beam", "built without libsndfile");
        return test_done("test_whisper_beam");
    }
    clip clips[N_CLIPS] = {{0}};
    for (int i = 0; i < N_CLIPS; i++) {
        char rel[64], full[4096];
        snprintf(rel, sizeof rel, "tests/data/audio/%s.wav", clip_names[i]);
        test_path(rel, full, sizeof full);
        CHECK_MSG(candle_audio_load(full, &clips[i].x, &clips[i].n) == CANDLE_OK, "%s", candle_last_errmsg());
    }
    candle_whisper *wt = NULL, *wb = wtest_load_optional(base);
    CHECK_MSG(candle_whisper_load(&wt, tiny, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    char *gtext;
    json_doc *doc;
    wtest_goldens("whisper_beam_goldens.json", "gen_whisper_beam_goldens.py", &gtext, &doc);
    const json_value *runs = doc ? json_get(json_root(doc), "runs") : NULL;
    const json_value *det = doc ? json_get(json_root(doc), "detect") : NULL;
    int n_runs = 0;
    const bool sanitized = test_sanitized();
    if (sanitized) printf("sanitizer run: one beam search per model, detection on de.wav, no length_penalty 0\n");
    bool have_all = true;
    for (int i = 0; i < N_CLIPS; i++) have_all = have_all && clips[i].x;
    for (size_t i = 0; wt && have_all && runs && i < runs->n; i++) {
        const json_value *run = json_at(runs, i);
        const char *m = str(run, "model"), *cl = str(run, "clip"), *task = str(run, "task");
        const candle_whisper *w = m && !strcmp(m, "base") ? wb : wt;
        bool ts = true;
        json_as_bool(json_get(run, "timestamps"), &ts);
        if (!w || !cl || (w == wb && !ts)) continue; /* base without timestamps: kept short, tiny.en checks it */
        /* sanitized: beam search once per model, the multilingual one on translate */
        if (sanitized && (w == wt ? !ts : !(task && !strcmp(task, "translate")))) continue;
        check_run(w, run, &clips[clip_index(cl)]);
        n_runs++;
    }
    CHECK(n_runs >= (sanitized && !wb ? 1 : 2));
    for (size_t i = 0; wb && det && i < det->n; i++) {
        const char *cl = str(json_at(det, i), "clip");
        if (cl && have_all && (!sanitized || !strcmp(cl, "de"))) check_detect(wb, json_at(det, i), &clips[clip_index(cl)]);
    }
    if (wt && clips[0].x) {
        candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
        candle_whisper_result r;
        p.beam_size = 17;
        CHECK(candle_whisper_transcribe(wt, clips[0].x, clips[0].n, &p, &r) == CANDLE_ERR_INVALID_ARG);
        p.beam_size = 5;
        p.patience = 0;
        CHECK(candle_whisper_transcribe(wt, clips[0].x, clips[0].n, &p, &r) == CANDLE_ERR_INVALID_ARG);
        /* length_penalty 0: the search ends when the top beam finishes */
        p = candle_whisper_transcribe_default_params();
        p.length_penalty = 0;
        if (!sanitized) {
            CHECK_MSG(candle_whisper_transcribe(wt, clips[0].x, clips[0].n, &p, &r) == CANDLE_OK && r.n_segments > 0,
                      "%s", candle_last_errmsg());
            if (r.text) printf("length_penalty 0: '%s'\n", r.text);
            candle_whisper_result_free(&r);
        }
        char codes[1][16];
        float pr[1];
        CHECK(!candle_whisper_is_multilingual(wt));
        CHECK(candle_whisper_detect_language(wt, clips[0].x, clips[0].n, 0, codes, pr, 1, NULL) ==
              CANDLE_ERR_UNSUPPORTED);
        if (wb) {
            CHECK(candle_whisper_is_multilingual(wb));
            p = candle_whisper_transcribe_default_params();
            p.language = "xx";
            CHECK(candle_whisper_transcribe(wb, clips[0].x, clips[0].n, &p, &r) == CANDLE_ERR_INVALID_ARG);
        }
    }
    json_free(doc);
    free(gtext);
    for (int i = 0; i < N_CLIPS; i++) candle_free(clips[i].x);
    candle_whisper_free(wt);
    candle_whisper_free(wb);
    return test_done("test_whisper_beam");
}
