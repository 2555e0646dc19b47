/* A minimal test harness: CHECK macros count failures, main returns them. */
#ifndef CANDLE_TEST_H
#define CANDLE_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"

static int test_failures;
static int test_checks;

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
    if (test_failures) fprintf(stderr, "%s: %d of %d checks failed\n", name, test_failures, test_checks);
    else printf("%s: %d checks passed\n", name, test_checks);
    return test_failures ? 1 : 0;
}

/* Path under the source tree (for data files). "../shared/..." names the
 * shared data folder, wherever CMake found it (CANDLE_SHARED_DIR). */
static inline const char *test_path(const char *rel, char *buf, size_t n) {
    const char *shared = getenv("CANDLE_SHARED_DIR");
    if (shared && shared[0] && strncmp(rel, "../shared/", 10) == 0) {
        snprintf(buf, n, "%s/%s", shared, rel + 10);
        return buf;
    }
    const char *root = getenv("CANDLE_SOURCE_DIR");
    snprintf(buf, n, "%s/%s", root ? root : ".", rel);
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

#endif
