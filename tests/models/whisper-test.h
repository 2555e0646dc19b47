/* What the Whisper model tests share: the optional whisper-base and the
 * goldens file. Include after test.h and core/json-impl.h. */
#ifndef CANDLE_TESTS_WHISPER_TEST_H
#define CANDLE_TESTS_WHISPER_TEST_H

#include <stdio.h>

/* whisper-base from dir, or NULL (said so) when scripts/fetch-whisper.sh
 * base has not fetched it; a load that fails is a failed check. */
static inline candle_whisper *wtest_load_optional(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP (part): whisper base absent at %s (scripts/fetch-whisper.sh base)\n", dir);
        return NULL;
    }
    fclose(f);
    candle_whisper *w = NULL;
    CHECK_MSG(candle_whisper_load(&w, dir, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    return w;
}

/* tests/data/whisper/<name> parsed into *doc (its text in *text, both freed
 * by the caller); a missing or malformed file is a failed check, gen the
 * script that makes it. */
static inline void wtest_goldens(const char *name, const char *gen, char **text, json_doc **doc) {
    char rel[512], path[4096];
    snprintf(rel, sizeof rel, "tests/data/whisper/%s", name);
    test_path(rel, path, sizeof path);
    size_t len = 0;
    *text = test_read_file(path, &len);
    *doc = NULL;
    CHECK_MSG(*text && json_parse(doc, *text, len, path, NULL) == CANDLE_OK, "%s (made by tests/data/whisper/%s)",
              path, gen);
}

/* A segment's token ids equal the golden's "tokens" array (toks may be NULL). */
static inline bool wtest_tokens_equal(const json_value *toks, const candle_whisper_segment *s) {
    bool same = toks && (int64_t)toks->n == s->n_tokens;
    for (size_t k = 0; same && k < toks->n; k++) {
        int64_t v;
        same = json_as_i64(json_at(toks, k), &v) && v == s->tokens[k];
    }
    return same;
}

#endif
