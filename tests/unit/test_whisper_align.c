/* The model-free parts of Whisper's word timestamps (src/models/whisper_align.c):
 *   - cdl_whisper_place_words against faster-whisper 1.2.1's
 *     add_word_timestamps on hand-made alignments
 *     (tests/data/whisper/gen_whisper_place_goldens.py: punctuation merged
 *     both ways, long words cut at sentence ends, after a pause and at the
 *     segments' ends, zero durations, a segment left without words);
 *   - cdl_whisper_dtw_neg on paths one can check by hand, ties broken as
 *     openai-whisper's dtw_cpu breaks them (to the left move);
 *   - cdl_round2 as Python's round(x, 2).
 * test_whisper_words checks the whole on models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json-impl.h"
#include "models/whisper-impl.h"
#include "test.h"

static double num(const json_value *v) {
    double d = NAN;
    json_as_f64(v, &d);
    return d;
}

static void check_case(size_t ci, const json_value *c, const char *prepend, const char *append) {
    const json_value *words = json_get(c, "words"), *subs = json_get(c, "subs"), *want = json_get(c, "want");
    const json_value *wsubs = json_get(want, "subs");
    if (!words || !subs || !wsubs || wsubs->n != subs->n) {
        CHECK_MSG(false, "case %zu: malformed", ci);
        return;
    }
    int64_t na = (int64_t)words->n, ns = (int64_t)subs->n;
    cdl_wword *a = calloc((size_t)na, sizeof *a);
    cdl_wsub *g = calloc((size_t)ns, sizeof *g);
    if (!a || !g) {
        CHECK(a && g);
        free(a);
        free(g);
        return;
    }
    for (int64_t i = 0; i < na; i++) {
        const json_value *w = json_at(words, (size_t)i);
        const char *s = "";
        json_as_str(json_at(w, 0), &s, NULL);
        a[i].word = malloc(strlen(s) + 1);
        if (a[i].word) strcpy(a[i].word, s);
        a[i].ntok = (int64_t)num(json_at(w, 1));
        a[i].start = num(json_at(w, 2));
        a[i].end = num(json_at(w, 3));
        a[i].prob = num(json_at(w, 4));
    }
    for (int64_t i = 0; i < ns; i++) {
        const json_value *s = json_at(subs, (size_t)i);
        g[i].n_text = (int64_t)num(json_at(s, 0));
        g[i].start = num(json_at(s, 1));
        g[i].end = num(json_at(s, 2));
    }
    double last = num(json_get(c, "last"));
    CHECK_MSG(cdl_whisper_place_words(a, na, g, ns, num(json_get(c, "seek")) / 100.0, prepend, append, &last) ==
                  CANDLE_OK,
              "case %zu: %s", ci, candle_last_errmsg());
    CHECK_MSG(fabs(last - num(json_get(want, "last"))) < 1e-9, "case %zu: last speech %g vs %g", ci, last,
              num(json_get(want, "last")));
    for (int64_t i = 0; i < ns; i++) {
        const json_value *ws = json_at(wsubs, (size_t)i), *ww = json_at(ws, 2);
        CHECK_MSG(fabs(g[i].start - num(json_at(ws, 0))) < 1e-9 && fabs(g[i].end - num(json_at(ws, 1))) < 1e-9,
                  "case %zu segment %lld: [%g %g] vs [%g %g]", ci, (long long)i, g[i].start, g[i].end,
                  num(json_at(ws, 0)), num(json_at(ws, 1)));
        CHECK_MSG(ww && (int64_t)ww->n == g[i].n_words, "case %zu segment %lld: %lld words vs %zu", ci, (long long)i,
                  (long long)g[i].n_words, ww ? ww->n : 0);
        for (int64_t k = 0; ww && k < g[i].n_words && k < (int64_t)ww->n; k++) {
            const json_value *e = json_at(ww, (size_t)k);
            const candle_whisper_word *w = &g[i].words[k];
            const char *s = NULL;
            json_as_str(json_at(e, 2), &s, NULL);
            CHECK_MSG(s && w->word && !strcmp(s, w->word) && fabs(w->t0 - num(json_at(e, 0))) < 1e-9 &&
                          fabs(w->t1 - num(json_at(e, 1))) < 1e-9 && fabs(w->probability - num(json_at(e, 3))) < 1e-6,
                      "case %zu segment %lld word %lld: '%s' [%.17g %.17g] %g vs '%s' [%.17g %.17g] %g", ci,
                      (long long)i, (long long)k, w->word ? w->word : "", w->t0, w->t1, (double)w->probability,
                      s ? s : "", num(json_at(e, 0)), num(json_at(e, 1)), num(json_at(e, 3)));
        }
        for (int64_t k = 0; k < g[i].n_words; k++) free(g[i].words[k].word);
        free(g[i].words);
    }
    cdl_whisper_words_free(a, na);
    free(g);
}

static void check_dtw(void) {
    int64_t ti[16], fi[16];
    /* a diagonal: one step down and right each (off it a cost, so no tie) */
    const float eye[9] = {1, -1, -1, -1, 1, -1, -1, -1, 1};
    int64_t n = cdl_whisper_dtw_neg(eye, 3, 3, ti, fi);
    CHECK(n == 3 && ti[0] == 0 && fi[0] == 0 && ti[1] == 1 && fi[1] == 1 && ti[2] == 2 && fi[2] == 2);
    /* row 0 over frames 0-1, row 1 over 2-3 */
    const float two[8] = {1, 1, -1, -1, -1, -1, 1, 1};
    n = cdl_whisper_dtw_neg(two, 2, 4, ti, fi);
    CHECK_MSG(n == 4 && ti[0] == 0 && ti[1] == 0 && ti[2] == 1 && ti[3] == 1 && fi[0] == 0 && fi[1] == 1 &&
                  fi[2] == 2 && fi[3] == 3,
              "%lld steps", (long long)n);
    /* all ties: dtw_cpu's trace at (2, 2) is 2 (left), then 1 (up), then the diagonal */
    const float zero[4] = {0, 0, 0, 0};
    n = cdl_whisper_dtw_neg(zero, 2, 2, ti, fi);
    CHECK_MSG(n == 3 && ti[0] == 0 && fi[0] == 0 && ti[1] == 1 && fi[1] == 0 && ti[2] == 1 && fi[2] == 1,
              "%lld steps: (%lld %lld) (%lld %lld)", (long long)n, (long long)ti[0], (long long)fi[0],
              (long long)ti[1], (long long)fi[1]);
}

static void check_round2(void) {
    /* Python: round(2.675, 2) 2.67, round(0.125, 2) 0.12, round(0.375, 2) 0.38,
     * round(1.005, 2) 1.0, round(8.015, 2) 8.02, round(0.145, 2) 0.14 */
    const double x[] = {2.675, 0.125, 0.375, 1.005, 8.015, 0.145, 10.5, 0.0};
    const double y[] = {2.67, 0.12, 0.38, 1.0, 8.02, 0.14, 10.5, 0.0};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        CHECK_MSG(cdl_round2(x[i]) == y[i], "round2(%.17g) = %.17g, Python %.17g", x[i], cdl_round2(x[i]), y[i]);
}

int main(void) {
    char path[4096];
    test_path("tests/data/whisper/whisper_place_goldens.json", path, sizeof path);
    size_t len = 0;
    char *text = test_read_file(path, &len);
    json_doc *doc = NULL;
    CHECK_MSG(text && json_parse(&doc, text, len, path, NULL) == CANDLE_OK,
              "%s (make it with /work/venv-fw/bin/python tests/data/whisper/gen_whisper_place_goldens.py)", path);
    const json_value *root = doc ? json_root(doc) : NULL, *cases = root ? json_get(root, "cases") : NULL;
    const char *prepend = NULL, *append = NULL;
    if (root) {
        json_as_str(json_get(root, "prepend"), &prepend, NULL);
        json_as_str(json_get(root, "append"), &append, NULL);
    }
    CHECK(cases && cases->n >= 5 && prepend && append);
    for (size_t i = 0; cases && prepend && append && i < cases->n; i++)
        check_case(i, json_at(cases, i), prepend, append);
    check_dtw();
    check_round2();
    json_free(doc);
    free(text);
    return test_done("test_whisper_align");
}
