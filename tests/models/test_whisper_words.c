/* Whisper's initial prompt and word timestamps against faster-whisper 1.2.1 /
 * CTranslate2 4.8.5 (tests/data/whisper/gen_whisper_words_goldens.py,
 * temperature 0 alone, vad_filter=False):
 *   - initial_prompt on jfk.wav (tiny.en greedy and beam 5, base beam 5) and
 *     on jfk.wav three times over (tiny.en greedy, conditioning on and off):
 *     every segment's tokens, text and times identical, avg_logprob and
 *     no_speech_prob close;
 *   - word_timestamps on jfk.wav (tiny.en and base beam 5, tiny.en greedy and
 *     beam 5 with the prompt, greedy without timestamp tokens) and on jfk
 *     three times over (tiny.en greedy): the same, and
 *     every word's text identical, its start and end within WORD_TOL, its
 *     probability within 2e-3.
 * WORD_TOL: the reference rounds the times to 0.01 s, and they come from the
 * dynamic time warping's jumps at the 0.02 s of a frame pair; a one-frame
 * shift of a jump (float sums ordered otherwise than in CTranslate2 tipping a
 * near tie) moves a time by 0.02 s, anything more is a bug.
 * A prompt longer than the context is cut as the reference cuts it (the last
 * n_text_ctx / 2 - 1 tokens of it prompt the window): the long prompt's
 * tokens equal those of the same prompt given as its last 223 ids. Bad
 * initial_prompt_tokens are refused. Skips when tiny.en or the audio is
 * absent; the base runs are skipped (and said so) without whisper-base. The
 * sanitizer run (test_sanitized) checks the greedy runs on jfk.wav with the
 * prompt or without timestamps and the long prompt only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"
#include "whisper-test.h"

#define WORD_TOL 0.0201

static double num(const json_value *o, const char *k) {
    double v = NAN;
    json_as_f64(k ? json_get(o, k) : o, &v);
    return v;
}

static const char *str(const json_value *o, const char *k) {
    const char *s = NULL;
    if (!json_as_str(k ? json_get(o, k) : o, &s, NULL)) return NULL;
    return s;
}

static int n_words_checked;
static double worst_dt, worst_dp;

static void check_words(const char *tag, int64_t si, const candle_whisper_segment *s, const json_value *gw) {
    CHECK_MSG(gw && (int64_t)gw->n == s->n_words, "%s segment %lld: %lld words, golden %zu", tag, (long long)si,
              (long long)s->n_words, gw ? gw->n : 0);
    for (int64_t k = 0; gw && k < s->n_words && k < (int64_t)gw->n; k++) {
        const json_value *g = json_at(gw, (size_t)k);
        const candle_whisper_word *w = &s->words[k];
        const char *text = str(json_at(g, 2), NULL);
        double t0 = num(json_at(g, 0), NULL), t1 = num(json_at(g, 1), NULL), pr = num(json_at(g, 3), NULL);
        CHECK_MSG(text && w->word && !strcmp(w->word, text), "%s segment %lld word %lld: '%s' vs '%s'", tag,
                  (long long)si, (long long)k, w->word ? w->word : "(null)", text ? text : "");
        double dt = fmax(fabs(w->t0 - t0), fabs(w->t1 - t1)), dp = fabs(w->probability - pr);
        CHECK_MSG(dt <= WORD_TOL, "%s word %lld '%s': [%.2f %.2f] vs [%.2f %.2f]", tag, (long long)k, text ? text : "",
                  w->t0, w->t1, t0, t1);
        CHECK_MSG(dp < 2e-3, "%s word %lld '%s': probability %g vs %g", tag, (long long)k, text ? text : "",
                  (double)w->probability, pr);
        worst_dt = fmax(worst_dt, dt);
        worst_dp = fmax(worst_dp, dp);
        n_words_checked++;
    }
}

static void check_run(const candle_whisper *w, const json_value *run, const float *x, size_t n) {
    const char *name = str(run, "model"), *cl = str(run, "clip"), *prompt = str(run, "initial_prompt");
    bool cond = true, words = false, no_ts = false;
    int64_t beam = 5;
    json_as_bool(json_get(run, "without_timestamps"), &no_ts);
    json_as_bool(json_get(run, "condition_on_previous_text"), &cond);
    json_as_bool(json_get(run, "word_timestamps"), &words);
    json_as_i64(json_get(run, "beam_size"), &beam);
    char tag[128];
    snprintf(tag, sizeof tag, "%s %s beam %d cond %d prompt %d words %d%s", name, cl, (int)beam, cond,
             prompt != NULL, words, no_ts ? " no timestamps" : "");
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    static const float t0[1] = {0.0f};
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.beam_size = (int)beam;
    p.condition_on_previous_text = cond;
    p.initial_prompt = prompt;
    p.word_timestamps = words;
    p.timestamps = !no_ts;
    if (name && !strcmp(name, "base")) p.language = "en";
    candle_whisper_result r;
    CHECK_MSG(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_OK, "%s: %s", tag, candle_last_errmsg());
    const json_value *segs = json_get(run, "segments");
    CHECK_MSG(segs && (int64_t)segs->n == r.n_segments, "%s: %lld segments, golden %zu ('%s')", tag,
              (long long)r.n_segments, segs ? segs->n : 0, r.text ? r.text : "");
    for (int64_t i = 0; segs && i < r.n_segments && i < (int64_t)segs->n; i++) {
        const json_value *g = json_at(segs, (size_t)i), *toks = json_get(g, "tokens");
        const candle_whisper_segment *s = &r.segments[i];
        bool same = wtest_tokens_equal(toks, s);
        const char *text = str(g, "text");
        CHECK_MSG(same, "%s segment %lld: tokens differ ('%s' vs '%s')", tag, (long long)i, s->text, text ? text : "");
        CHECK_MSG(text && !strcmp(s->text, text), "%s segment %lld: '%s' vs '%s'", tag, (long long)i, s->text,
                  text ? text : "");
        CHECK_MSG(s->seek == (int64_t)num(g, "seek"), "%s segment %lld: seek %lld vs %g", tag, (long long)i,
                  (long long)s->seek, num(g, "seek"));
        /* with words the segment's start and end are its words' (rounded the same way) */
        double tol = words ? WORD_TOL : 1e-6;
        CHECK_MSG(fabs(s->t0 - num(g, "start")) <= tol && fabs(s->t1 - num(g, "end")) <= tol,
                  "%s segment %lld: [%.3f, %.3f] vs [%.3f, %.3f]", tag, (long long)i, s->t0, s->t1, num(g, "start"),
                  num(g, "end"));
        CHECK_MSG(fabs(s->avg_logprob - num(g, "avg_logprob")) < 2e-3, "%s: avg_logprob %g vs %g", tag,
                  (double)s->avg_logprob, num(g, "avg_logprob"));
        CHECK_MSG(fabs(s->no_speech_prob - num(g, "no_speech_prob")) < 2e-3, "%s: no_speech_prob %g vs %g", tag,
                  (double)s->no_speech_prob, num(g, "no_speech_prob"));
        if (words)
            check_words(tag, i, s, json_get(g, "words"));
        else
            CHECK_MSG(s->words == NULL && s->n_words == 0, "%s: words without word_timestamps", tag);
        printf("%s [%5.2f -> %5.2f]%s (%lld words)\n", tag, s->t0, s->t1, s->text, (long long)s->n_words);
    }
    candle_whisper_result_free(&r);
}

/* The reference keeps the last n_text_ctx / 2 - 1 tokens of what came
 * before; a prompt longer than that is cut, never refused. */
static void check_long_prompt(const candle_whisper *w, const float *x, size_t n, const char *prompt) {
    size_t plen = strlen(prompt), len = 0;
    char *text = malloc(40 * (plen + 1) + 2);
    if (!text) {
        CHECK(text != NULL);
        return;
    }
    text[len++] = ' ';
    for (int i = 0; i < 40; i++) {
        memcpy(text + len, prompt, plen);
        len += plen;
        text[len++] = ' ';
    }
    text[len] = 0;
    int64_t cap = 4096, n_ids = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    /* the library encodes " " + the text stripped */
    CHECK(ids && candle_tokenizer_encode(candle_whisper_tokenizer(w), text, len - 1, false, true, ids, cap, &n_ids) ==
                     CANDLE_OK);
    const int64_t keep = candle_whisper_get_dims(w).n_text_ctx / 2 - 1;
    CHECK_MSG(n_ids > keep && n_ids <= cap, "%lld prompt tokens", (long long)n_ids);
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    static const float t0[1] = {0.0f};
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.beam_size = 1;
    p.initial_prompt = text;
    candle_whisper_result a = {0}, b = {0};
    CHECK_MSG(candle_whisper_transcribe(w, x, n, &p, &a) == CANDLE_OK, "long prompt: %s", candle_last_errmsg());
    p.initial_prompt = NULL;
    if (ids && n_ids > keep && n_ids <= cap) {
        p.initial_prompt_tokens = ids + (n_ids - keep);
        p.n_initial_prompt_tokens = keep;
        CHECK_MSG(candle_whisper_transcribe(w, x, n, &p, &b) == CANDLE_OK, "%s", candle_last_errmsg());
        bool same = a.n_tokens == b.n_tokens && a.n_tokens > 0;
        for (int64_t i = 0; same && i < a.n_tokens; i++) same = a.tokens[i] == b.tokens[i];
        CHECK_MSG(same, "long prompt '%s' vs its last %lld tokens '%s'", a.text ? a.text : "", (long long)keep,
                  b.text ? b.text : "");
        printf("prompt of %lld tokens (cut to %lld):%s\n", (long long)n_ids, (long long)keep, a.text ? a.text : "");
    }
    candle_whisper_result_free(&a);
    candle_whisper_result_free(&b);
    free(ids);
    free(text);
}

static void check_refusals(const candle_whisper *w, const float *x, size_t n) {
    candle_whisper_transcribe_params p = candle_whisper_transcribe_default_params();
    candle_whisper_result r;
    int32_t bad[2] = {220, (int32_t)candle_whisper_get_dims(w).n_vocab};
    p.initial_prompt_tokens = bad;
    p.n_initial_prompt_tokens = 2;
    CHECK(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_ERR_INVALID_ARG);
    bad[1] = -1;
    CHECK(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_ERR_INVALID_ARG);
    p.n_initial_prompt_tokens = -1;
    CHECK(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_ERR_INVALID_ARG);
    p.initial_prompt_tokens = NULL;
    p.n_initial_prompt_tokens = 3;
    CHECK(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_ERR_INVALID_ARG);
    printf("refused: %s\n", candle_last_errmsg());
    /* a blank prompt is " " alone, as the reference's " " + "".strip() */
    p = candle_whisper_transcribe_default_params();
    static const float t0[1] = {0.0f};
    p.temperatures = t0;
    p.n_temperatures = 1;
    p.beam_size = 1;
    p.initial_prompt = "  \n ";
    p.word_timestamps = true;
    p.max_tokens = 4;
    CHECK_MSG(candle_whisper_transcribe(w, x, n, &p, &r) == CANDLE_OK, "%s", candle_last_errmsg());
    candle_whisper_result_free(&r);
}

int main(void) {
    char tiny[2048], base[2048], wav[4096];
    const char *cache = getenv("CANDLE_DATA_CACHE");
    snprintf(tiny, sizeof tiny, "%s/models/whisper-tiny-en", cache && cache[0] ? cache : "build-data");
    snprintf(base, sizeof base, "%s/models/whisper-base", cache && cache[0] ? cache : "build-data");
    test_path("tests/data/audio/jfk.wav", wav, sizeof wav);
    if (!test_need_file("whisper tiny.en (scripts/fetch-whisper.sh)", tiny) || !test_need_file("jfk.wav", wav))
        return test_done("test_whisper_words");
    if (!candle_audio_can_decode()) {
        test_skip("whisper_words", "built without libsndfile");
        return test_done("test_whisper_words");
    }
    float *x = NULL, *three = NULL;
    size_t n = 0;
    CHECK_MSG(candle_audio_load(wav, &x, &n) == CANDLE_OK, "%s", candle_last_errmsg());
    if (x) three = malloc(3 * n * sizeof *three);
    for (size_t i = 0; three && i < 3; i++) memcpy(three + i * n, x, n * sizeof *three);
    candle_whisper *wt = NULL, *wb = wtest_load_optional(base);
    CHECK_MSG(candle_whisper_load(&wt, tiny, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    char *gtext;
    json_doc *doc;
    wtest_goldens("whisper_words_goldens.json", "gen_whisper_words_goldens.py (/work/venv-fw)", &gtext, &doc);
    const json_value *runs = doc ? json_get(json_root(doc), "runs") : NULL;
    const char *prompt = doc ? str(json_root(doc), "prompt") : NULL;
    const bool sanitized = test_sanitized();
    if (sanitized)
        printf("sanitizer run: the greedy runs on jfk.wav with the prompt or without timestamps, the long prompt\n");
    int n_runs = 0, n_word_runs = 0;
    for (size_t i = 0; wt && three && runs && i < runs->n; i++) {
        const json_value *run = json_at(runs, i);
        const char *m = str(run, "model"), *cl = str(run, "clip");
        const candle_whisper *w = m && !strcmp(m, "base") ? wb : wt;
        int64_t beam = 5;
        bool words = false;
        json_as_i64(json_get(run, "beam_size"), &beam);
        json_as_bool(json_get(run, "word_timestamps"), &words);
        if (!w || !cl) continue;
        bool jfk3 = !strcmp(cl, "jfk3");
        bool no_ts = false;
        json_as_bool(json_get(run, "without_timestamps"), &no_ts);
        if (sanitized && (w != wt || jfk3 || beam != 1 || !(str(run, "initial_prompt") || no_ts))) continue;
        check_run(w, run, jfk3 ? three : x, jfk3 ? 3 * n : n);
        n_runs++;
        n_word_runs += words;
    }
    CHECK_MSG(n_runs >= (sanitized ? 3 : 5) && n_word_runs >= 1, "%d runs, %d with words", n_runs, n_word_runs);
    printf("%d runs (%d with words): %d words, worst |dt| %.3f s, worst |dp| %.2g\n", n_runs, n_word_runs,
           n_words_checked, worst_dt, worst_dp);
    if (wt && x && prompt) check_long_prompt(wt, x, n, prompt);
    if (wt && x) check_refusals(wt, x, n);
    json_free(doc);
    free(gtext);
    free(three);
    candle_free(x);
    candle_whisper_free(wt);
    candle_whisper_free(wb);
    return test_done("test_whisper_words");
}
