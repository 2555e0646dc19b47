/* Greedy sampling (temperature 0, no penalties) reads the logits in place
 * through a vectorized argmax: the index must be the serial loop's, the
 * first largest logit, whatever the size, the alignment, the position of the
 * maximum (lanes, tail), ties, signed zeros, -inf and NaN. */
#include <stdint.h>

#include "candle/sampler.h"
#include "test.h"

/* The reference: the first i with l[i] > every earlier best (NaN never wins;
 * l[0] NaN gives 0). */
static int32_t ref_argmax(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static int n_cases;

static void check_one(const float *l, int32_t n, const char *what) {
    candle_sampler_params p = candle_sampler_default_params();
    p.temp = 0.0f;
    candle_sampler *s = NULL;
    CHECK_OK(NULL, candle_sampler_init(&s, n, &p));
    if (!s) return;
    int32_t got = candle_sampler_sample(s, l), want = ref_argmax(l, n);
    CHECK_MSG(got == want, "%s: n %d: got %d, want %d", what, (int)n, (int)got, (int)want);
    candle_sampler_free(s);
    n_cases++;
}

/* Values from a small set, so ties are common. */
static void fill(float *l, int32_t n, int kinds) {
    static const float vals[] = {1.0f, 2.0f, -3.0f, 0.0f, -0.0f, 2.0f, 0.5f, -INFINITY};
    for (int32_t i = 0; i < n; i++) l[i] = kinds ? vals[next() % (uint32_t)kinds] : (float)(next() % 20000) * 1e-3f - 10.0f;
}

int main(void) {
    enum { NMAX = 49152 + 37 };
    float *buf = malloc((NMAX + 16) * sizeof *buf);
    if (!buf) return 1;
    const int32_t sizes[] = {1, 2, 15, 16, 17, 63, 64, 65, 79, 80, 96, 127, 128, 129, 255, 1000, 1023, 4099, 49152, NMAX};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int32_t n = sizes[si];
        for (int off = 0; off < 3; off++) { /* unaligned starts too */
            float *l = buf + off;
            for (int kinds = 0; kinds <= 8; kinds += 2) {
                fill(l, n, kinds);
                check_one(l, n, kinds ? "ties" : "random");
            }
            /* the maximum at every lane, in the tail, first and last */
            int32_t at[] = {0, 1, 7, 15, 16, 31, n / 2, n - 17, n - 16, n - 15, n - 2, n - 1};
            for (size_t a = 0; a < sizeof at / sizeof *at; a++) {
                if (at[a] < 0 || at[a] >= n) continue;
                fill(l, n, 0);
                l[at[a]] = 50.0f;
                check_one(l, n, "one maximum");
                if (at[a] + 1 < n) { /* a tie just after it, and one far after */
                    l[at[a] + 1] = 50.0f;
                    l[n - 1] = 50.0f;
                    check_one(l, n, "tied maximum");
                }
            }
            /* every value -inf (the serial loop decides), then one finite */
            for (int32_t i = 0; i < n; i++) l[i] = -INFINITY;
            check_one(l, n, "all -inf");
            l[n - 1] = -5.0f;
            check_one(l, n, "-inf but the last");
            /* NaNs never win; the first one NaN gives 0 */
            fill(l, n, 0);
            for (int32_t i = 0; i < n; i += 3) l[i + (i + 1 < n)] = NAN;
            check_one(l, n, "NaNs");
            l[0] = NAN;
            check_one(l, n, "NaN first");
            for (int32_t i = 0; i < n; i++) l[i] = i % 2 ? NAN : -INFINITY;
            check_one(l, n, "-inf and NaN");
            /* +0 and -0 are equal: the first of them */
            for (int32_t i = 0; i < n; i++) l[i] = -1.0f;
            if (n > 20) {
                l[n - 20] = -0.0f;
                l[n - 3] = 0.0f;
                check_one(l, n, "signed zeros");
            }
            l[n - 1] = INFINITY;
            check_one(l, n, "+inf last");
        }
    }
    CHECK(n_cases > 1000);
    free(buf);
    return test_done("test_sampler_argmax");
}
