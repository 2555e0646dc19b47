/* A minimal test harness: CHECK macros count failures, main returns them.
 * main ends with `return test_done(name)`: 0 when every check passed, 1 when
 * one failed or when none ran (a test that checked nothing did not pass),
 * and TEST_SKIP (77, CTest's SKIP_RETURN_CODE: "Skipped" in its summary)
 * when none ran because test_skip() noted a missing prerequisite (a model,
 * data, a CPU feature). A sub-case skipped while other checks ran passes. */
#ifndef CANDLE_TEST_H
#define CANDLE_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"

static int test_failures;
static int test_checks;
static int test_skips;

/* CTest's SKIP_RETURN_CODE for every test (tests/CMakeLists.txt). */
#define TEST_SKIP 77

/* Notes a skipped case and prints why ("SKIP: name: reason"). If no check
 * runs at all, test_done returns TEST_SKIP instead of failing. */
#define test_skip(name, ...)                                                 \
    do {                                                                     \
        test_skips++;                                                        \
        printf("SKIP: %s: ", (name));                                        \
        printf(__VA_ARGS__);                                                 \
        putchar('\n');                                                       \
        fflush(stdout);                                                      \
    } while (0)

#define CHECK(cond)                                                          \
    do {                                                                     \
        test_checks++;                                                       \
        if (!(cond)) {                                                       \
            test_failures++;                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                 \
    do {                                                                     \
        test_checks++;                                                       \
        if (!(cond)) {                                                       \
            test_failures++;                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

#define CHECK_OK(ctx, expr)                                                  \
    do {                                                                     \
        candle_status s_ = (expr);                                           \
        CHECK_MSG(s_ == CANDLE_OK, "%s: %s", candle_status_name(s_), candle_errmsg(ctx)); \
    } while (0)

/* The message contains the substring. */
#define CHECK_CONTAINS(msg, sub) CHECK_MSG(strstr((msg), (sub)) != NULL, "'%s' lacks '%s'", (msg), (sub))

#define CHECK_NEAR(a, b, tol) \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", (double)(a), (double)(b), (double)(tol))

static inline int test_done(const char *name) {
    if (test_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, test_failures, test_checks);
        return 1;
    }
    if (test_checks == 0 && test_skips) {
        printf("SKIP: %s: nothing ran (%d case%s skipped)\n", name, test_skips, test_skips == 1 ? "" : "s");
        return TEST_SKIP;
    }
    if (test_checks == 0) {
        fprintf(stderr, "%s: FAIL: no checks ran\n", name);
        return 1;
    }
    if (test_skips) printf("%s: %d checks passed, %d case%s skipped\n", name, test_checks, test_skips, test_skips == 1 ? "" : "s");
    else printf("%s: %d checks passed\n", name, test_checks);
    return 0;
}

/* For tests that run their checks more than once (on other kernels: the
 * passes of tests/ops/mathtest.h and vnni-rerun.h): the counters start again
 * for the next pass, whose test_done reports its own counts. */
static inline void test_counts_reset(void) { test_failures = test_checks = test_skips = 0; }

/* The exit status of a test of several passes from two passes' test_done:
 * a failure in either fails it, a skip counts only when both skipped. */
static inline int test_combine(int a, int b) {
    if (a != 0 && a != TEST_SKIP) return a;
    if (b != 0 && b != TEST_SKIP) return b;
    return a == TEST_SKIP && b == TEST_SKIP ? TEST_SKIP : 0;
}

/* Path under the source tree (for data files). "../shared/..." names the
 * shared data folder, wherever CMake found it (CANDLE_SHARED_DIR); a file
 * "../shared/data/X" absent there is looked for as X in the cache that
 * scripts/fetch-test-data.sh fills (CANDLE_DATA_CACHE: the reference
 * vocabularies as tokenizers/ggml-vocab-*.gguf). */
static inline const char *test_path(const char *rel, char *buf, size_t n) {
    if (strncmp(rel, "../shared/", 10) == 0) {
        const char *shared = getenv("CANDLE_SHARED_DIR");
        const char *cache = getenv("CANDLE_DATA_CACHE");
        if (shared && shared[0]) {
            snprintf(buf, n, "%s/%s", shared, rel + 10);
            if (access(buf, R_OK) == 0) return buf;
        }
        if (cache && cache[0] && strncmp(rel, "../shared/data/", 15) == 0) {
            snprintf(buf, n, "%s/%s", cache, rel + 15);
            if (access(buf, R_OK) == 0 || !(shared && shared[0])) return buf;
            snprintf(buf, n, "%s/%s", shared, rel + 10); /* name the usual place */
            return buf;
        }
        if (shared && shared[0]) return buf;
    }
    const char *root = getenv("CANDLE_SOURCE_DIR");
    snprintf(buf, n, "%s/%s", root ? root : ".", rel);
    return buf;
}

/* True in the sanitizer build's run (CANDLE_TEST_SANITIZED=1, set by
 * tests/CMakeLists.txt): the long end-to-end tests then run one case per code
 * path, not every golden, and print what they left out. */
static inline bool test_sanitized(void) {
    const char *s = getenv("CANDLE_TEST_SANITIZED");
    return s && s[0] == '1';
}

/* True when the data file at path is readable; otherwise notes a skip
 * ("SKIP: name: path absent") and returns false. For prerequisites that live
 * outside the repository (models, reference vocabularies): a file that is
 * present but does not load is a failure, not a skip. */
static inline bool test_need_file(const char *name, const char *path) {
    if (access(path, R_OK) == 0) return true;
    test_skip(name, "%s absent", path);
    return false;
}

/* The whole file, NUL-terminated, malloc'ed (*len: its bytes), or NULL. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    char *buf = n >= 0 && !fseek(f, 0, SEEK_SET) ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = buf ? (size_t)n : 0;
    return buf;
}

/* Normalised mean squared error of got against a double reference. */
static inline double test_nmse(const float *got, const double *ref, long n) {
    double num = 0, den = 0;
    for (long i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return num;
    return num / den;
}

/* The same against an f32 reference (golden logits read as floats). */
static inline double test_nmse_f32(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

#endif
