/* Whisper tiny.en segment timestamps against faster-whisper's
 * transcribe(beam_size=1, without_timestamps=False) on jfk.wav and on
 * jfk.wav three times over (two windows: the second starts at the first's
 * last complete timestamp), condition_on_previous_text on and off, at
 * temperature 0 (goldens: tests/data/whisper/gen_whisper_ts_goldens.py):
 * each segment's tokens, text, seek and start/end times identical, its
 * window's average log-probability, compression ratio and no-speech
 * probability close; the segment callback sees the same segments and can
 * stop the transcription. Then the temperature fallback and the no-speech
 * check: jfk with the default fallback decodes as at temperature 0 (nothing
 * falls back, as in the reference); a compression threshold below jfk's
 * ratio makes every temperature fail, so the likeliest decoding is kept and
 * reported at the last temperature, the same for the same seed; 5 s of
 * silence gives no segment, as the reference; bad temperatures are refused.
 * Skips when the model or the audio is absent, or the build cannot decode
 * audio. The sanitizer run (test_sanitized) leaves out the runs without
 * conditioning and the seeded repeat at temperature 1. */
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

typedef struct seen {
    int n, stop_after;
    double t0[64];
} seen;

static int on_segment(const candle_whisper_segment *s, void *user) {
    seen *c = user;
    if (c->n < 64) c->t0[c->n] = s->t0;
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

/* One golden run: the segments of Candle's transcription against it. */
static void check_run(const candle_whisper *w, const json_value *run, const float *samples, size_t n, bool stop) {
    const char *clip = "";
    json_as_str(json_get(run, "clip"), &clip, NULL);
    bool cond = false;
    json_as_bool(json_get(run, "condition_on_previous_text"), &cond);
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    p.beam_size = 1; /* the goldens are greedy (beam_size=1) */
    p.condition_on_previous_text = cond;
    const json_value *temps = json_get(run, "temperatures");
    float t[8];
    p.n_temperatures = temps && temps->n <= 8 ? (int)temps->n : 0;
    for (int i = 0; i < p.n_temperatures; i++) t[i] = (float)num(json_at(temps, (size_t)i), NULL);
    p.temperatures = t;
    seen c = {0};
    p.on_segment = on_segment;
    p.user = &c;
    candle_whisper_result r;
    CHECK_MSG(candle_whisper_transcribe(w, samples, n, &p, &r) == CANDLE_OK, "%s", candle_last_errmsg());
    const json_value *segs = json_get(run, "segments");
    CHECK_MSG(segs && (int64_t)segs->n == r.n_segments, "%s cond %d: %lld segments, golden %zu", clip, cond,
              (long long)r.n_segments, segs ? segs->n : 0);
    CHECK_MSG(c.n == r.n_segments, "callback saw %d of %lld segments", c.n, (long long)r.n_segments);
    size_t text_len = 0;
    for (int64_t i = 0; segs && i < r.n_segments && i < (int64_t)segs->n; i++) {
        const json_value *g = json_at(segs, (size_t)i);
        const candle_whisper_segment *s = &r.segments[i];
        const char *text = "";
        json_as_str(json_get(g, "text"), &text, NULL);
        text_len += strlen(text);
        const json_value *toks = json_get(g, "tokens");
        bool same = wtest_tokens_equal(toks, s);
        CHECK_MSG(same, "%s cond %d segment %lld: tokens differ", clip, cond, (long long)i);
        CHECK_MSG(!strcmp(s->text, text), "%s segment %lld: '%s' vs '%s'", clip, (long long)i, s->text, text);
        CHECK_MSG(fabs(s->t0 - num(g, "start")) < 1e-6 && fabs(s->t1 - num(g, "end")) < 1e-6,
                  "%s segment %lld: [%.3f, %.3f] vs [%.3f, %.3f]", clip, (long long)i, s->t0, s->t1, num(g, "start"),
                  num(g, "end"));
        CHECK_MSG(s->seek == (int64_t)num(g, "seek"), "%s segment %lld: seek %lld vs %g", clip, (long long)i,
                  (long long)s->seek, num(g, "seek"));
        CHECK_MSG(fabs(s->avg_logprob - num(g, "avg_logprob")) < 2e-3, "avg_logprob %g vs %g", s->avg_logprob,
                  num(g, "avg_logprob"));
        CHECK_MSG(fabs(s->no_speech_prob - num(g, "no_speech_prob")) < 2e-3, "no_speech_prob %g vs %g",
                  s->no_speech_prob, num(g, "no_speech_prob"));
        CHECK_MSG(fabs(s->compression_ratio - num(g, "compression_ratio")) < 1e-4, "compression_ratio %g vs %g",
                  s->compression_ratio, num(g, "compression_ratio"));
        CHECK_MSG(fabs(s->temperature - num(g, "temperature")) < 1e-6, "temperature %g vs %g", s->temperature,
                  num(g, "temperature"));
        CHECK(i >= 64 || c.t0[i] == s->t0);
        printf("%s cond %d [%6.2f -> %6.2f]%s\n", clip, cond, s->t0, s->t1, s->text);
    }
    CHECK_MSG(r.text && strlen(r.text) == text_len, "result text: '%s'", r.text ? r.text : "(null)");
    candle_whisper_result_free(&r);
    if (!stop) return;

    /* a callback that stops after the first segment */
    seen one = {.stop_after = 1};
    p.user = &one;
    CHECK(candle_whisper_transcribe(w, samples, n, &p, &r) == CANDLE_OK);
    CHECK_MSG(one.n == 1 && r.n_segments == 1, "stop: %d calls, %lld segments", one.n, (long long)r.n_segments);
    candle_whisper_result_free(&r);
}

static bool same_tokens(const candle_whisper_result *a, const candle_whisper_result *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens);
}

/* greedy: jfk's tokens at temperature 0 (a golden run). */
static void check_fallback(const candle_whisper *w, const float *samples, size_t n, const json_value *greedy,
                           bool sampling) {
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    p.beam_size = 1; /* the goldens are greedy (beam_size=1) */
    candle_whisper_result a, b;
    static const float temps[2] = {0.0f, 1.0f};
    /* every temperature fails the compression check: the likeliest is kept */
    p.temperatures = temps;
    p.n_temperatures = 2;
    p.best_of = 2;
    p.compression_ratio_threshold = 1.0f;
    p.seed = 7;
    CHECK(candle_whisper_transcribe(w, samples, n, &p, &a) == CANDLE_OK);
    CHECK_MSG(a.n_segments > 0 && a.segments[0].temperature == 1.0f, "fallback: %lld segments, temperature %g",
              (long long)a.n_segments, a.n_segments ? a.segments[0].temperature : -1.0);
    CHECK_MSG(a.n_segments > 0 && a.segments[0].compression_ratio > 1.0f, "kept ratio %g",
              a.n_segments ? a.segments[0].compression_ratio : 0.0);
    /* the greedy decoding is the likeliest by far here */
    const json_value *segs = json_get(greedy, "segments");
    int64_t k = 0;
    bool same = segs != NULL;
    for (size_t i = 0; same && i < segs->n; i++) {
        const json_value *toks = json_get(json_at(segs, i), "tokens");
        for (size_t j = 0; same && toks && j < toks->n; j++, k++) {
            int64_t v;
            same = json_as_i64(json_at(toks, j), &v) && k < a.n_tokens && v == a.tokens[k];
        }
    }
    CHECK_MSG(same && k == a.n_tokens, "kept a draw over the greedy decoding: '%s'", a.text);
    printf("fallback: kept '%s' at temperature %g\n", a.text, a.n_segments ? a.segments[0].temperature : -1.0);
    candle_whisper_result_free(&a);

    /* temperature 1 alone: draws, seeded */
    static const float t1[1] = {1.0f};
    p = candle_whisper_transcribe_default_params();
    p.beam_size = 1; /* the goldens are greedy (beam_size=1) */
    p.temperatures = t1;
    p.n_temperatures = 1;
    p.best_of = 1;
    p.seed = 3;
    if (sampling) {
        CHECK(candle_whisper_transcribe(w, samples, n, &p, &a) == CANDLE_OK);
        CHECK(candle_whisper_transcribe(w, samples, n, &p, &b) == CANDLE_OK);
        CHECK_MSG(same_tokens(&a, &b) && a.n_segments > 0 && a.segments[0].temperature == 1.0f,
                  "sampling at 1: '%s'", a.text ? a.text : "");
        printf("temperature 1, seed 3: '%s'\n", a.text ? a.text : "");
        candle_whisper_result_free(&a);
        candle_whisper_result_free(&b);
    }

    static const float bad[1] = {-1.0f};
    p.temperatures = bad;
    CHECK(candle_whisper_transcribe(w, samples, n, &p, &a) == CANDLE_ERR_INVALID_ARG);
    p.n_temperatures = 1000;
    CHECK(candle_whisper_transcribe(w, samples, n, &p, &a) == CANDLE_ERR_INVALID_ARG);
}

/* 5 s of zeros: P(no speech) above 0.6 and a poor log-probability, so no
 * segment, as faster-whisper gives; with the check off, the decoding's
 * no-speech probability is the reference's. */
static void check_silence(const candle_whisper *w, const json_value *run) {
    size_t n = 16000 * 5;
    float *z = calloc(n, sizeof *z);
    CHECK(z != NULL);
    if (!z) return;
    candle_whisper_result r;
    candle_whisper_transcribe_params g = candle_whisper_transcribe_default_params();
    g.beam_size = 1;
    CHECK(candle_whisper_transcribe(w, z, n, &g, &r) == CANDLE_OK);
    const json_value *segs = json_get(run, "segments");
    CHECK_MSG(segs && (int64_t)segs->n == r.n_segments, "silence: %lld segments ('%s')", (long long)r.n_segments,
              r.text ? r.text : "");
    candle_whisper_result_free(&r);
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    p.beam_size = 1; /* the goldens are greedy (beam_size=1) */
    static const float t0[1] = {0.0f};
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.no_speech_threshold = NAN;
    CHECK(candle_whisper_transcribe(w, z, n, &p, &r) == CANDLE_OK);
    double want = num(run, "no_speech_prob_first");
    if (r.n_segments > 0) /* a blank decoding would leave no segment to read it from */
        CHECK_MSG(fabs(r.segments[0].no_speech_prob - want) < 2e-3, "silence: P(no speech) %g vs %g",
                  r.segments[0].no_speech_prob, want);
    printf("silence, no-speech check off: %lld segments '%s', P(no speech) %g (reference %g)\n",
           (long long)r.n_segments, r.text ? r.text : "", r.n_segments ? r.segments[0].no_speech_prob : NAN, want);
    candle_whisper_result_free(&r);
    free(z);
}

int main(void) {
    char dir[4096], wav[4096], gpath[4096];
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(dir, sizeof dir, "%s/models/whisper-tiny-en", cache && cache[0] ? cache : "build-data");
    test_path("tests/data/audio/jfk.wav", wav, sizeof wav);
    if (!test_need_file("whisper tiny.en (scripts/fetch-whisper.sh)", dir) || !test_need_file("jfk.wav", wav))
        return test_done("test_whisper_ts");
    if (!candle_audio_can_decode()) {
        test_skip("whisper_ts", "built without libsndfile");
        return test_done("test_whisper_ts");
    }
    candle_whisper *w = NULL;
    CHECK_MSG(candle_whisper_load(&w, dir, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    float *samples = NULL, *three = NULL;
    size_t n = 0;
    CHECK_MSG(candle_audio_load(wav, &samples, &n) == CANDLE_OK, "%s", candle_last_errmsg());
    test_path("tests/data/whisper/whisper_ts_goldens.json", gpath, sizeof gpath);
    size_t glen = 0;
    char *gtext = test_read_file(gpath, &glen);
    json_doc *doc = NULL;
    CHECK(gtext && json_parse(&doc, gtext, glen, gpath, NULL) == CANDLE_OK);
    if (samples) three = malloc(3 * n * sizeof *three);
    for (size_t i = 0; three && i < 3; i++) memcpy(three + i * n, samples, n * sizeof *three);
    const json_value *runs = doc ? json_get(json_root(doc), "runs") : NULL, *greedy = NULL;
    const bool sanitized = test_sanitized();
    if (sanitized) printf("sanitizer run: conditioning on only, no seeded repeat at temperature 1\n");
    for (size_t i = 0; w && three && runs && i < runs->n; i++) {
        const json_value *run = json_at(runs, i);
        const json_value *temps = json_get(run, "temperatures");
        const char *clip = "";
        json_as_str(json_get(run, "clip"), &clip, NULL);
        if (!strcmp(clip, "jfk") && temps && temps->n == 1) greedy = run;
        bool three_times = !strcmp(clip, "jfk3"), cond = false;
        json_as_bool(json_get(run, "condition_on_previous_text"), &cond);
        if (!strcmp(clip, "silence")) {
            check_silence(w, run);
            continue;
        }
        if (!temps || (temps->n != 1 && three_times)) continue; /* jfk3's fallback draws unseeded samples */
        /* jfk, one window: once, with the fallback (which does not fall back) */
        if (!three_times && (!cond || temps->n == 1)) continue;
        if (sanitized && !cond) continue; /* conditioning off: the same code, fewer tokens in the prompt */
        check_run(w, run, three_times ? three : samples, three_times ? 3 * n : n, !three_times);
    }
    CHECK(greedy != NULL);
    if (w && samples && greedy) check_fallback(w, samples, n, greedy, !sanitized);
    free(three);
    json_free(doc);
    free(gtext);
    candle_free(samples);
    candle_whisper_free(w);
    return test_done("test_whisper_ts");
}
