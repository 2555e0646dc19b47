/* Small helpers the `candle bench` subcommands share. */
#ifndef CANDLE_CLI_BENCH_UTIL_H
#define CANDLE_CLI_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* Monotonic seconds. */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Uniform in [-1, 1), reproducible from seed (an LCG: cheap and the same
 * on every machine). */
static inline void bench_fill_uniform(float *v, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

#endif
