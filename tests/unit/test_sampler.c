/* Samplers: greedy, truncation (top-k, top-p, min-p), temperature, penalties,
 * and reproducibility for a seed, checked against counted frequencies. */
#include "candle/sampler.h"
#include "test.h"

#define V 6

static candle_sampler *make(candle_sampler_params p) {
    candle_sampler *s = NULL;
    CHECK_OK(NULL, candle_sampler_init(&s, V, &p));
    return s;
}

static candle_sampler_params plain(float temp, uint64_t seed) {
    candle_sampler_params p = candle_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

/* Frequencies of n draws. */
static void draw(candle_sampler *s, const float *logits, int n, int *count) {
    memset(count, 0, V * sizeof *count);
    for (int i = 0; i < n; i++) {
        int32_t t = candle_sampler_sample(s, logits);
        CHECK(t >= 0 && t < V);
        if (t >= 0 && t < V) count[t]++;
    }
}

static void test_greedy(void) {
    const float l[V] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
    candle_sampler *s = make(plain(0.0f, 1));
    CHECK(candle_sampler_sample(s, l) == 1); /* ties go to the lower id */
    candle_sampler_free(s);
}

/* At temperature 1 without truncation, frequencies follow softmax. */
static void test_distribution(void) {
    const float l[V] = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
    double z = 0, p[V];
    for (int i = 0; i < V; i++) z += exp(l[i]);
    for (int i = 0; i < V; i++) p[i] = exp(l[i]) / z;
    int n = 40000, count[V];
    candle_sampler *s = make(plain(1.0f, 42));
    draw(s, l, n, count);
    for (int i = 0; i < V; i++) {
        double sd = sqrt(p[i] * (1 - p[i]) / n);
        CHECK_NEAR((double)count[i] / n, p[i], 5 * sd);
    }
    candle_sampler_free(s);
    /* A low temperature sharpens towards the best token. */
    s = make(plain(0.1f, 42));
    draw(s, l, 2000, count);
    CHECK(count[2] > 1950);
    candle_sampler_free(s);
}

static void test_truncation(void) {
    const float l[V] = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
    int count[V];
    candle_sampler_params p = plain(1.0f, 3);
    p.top_k = 2; /* only ids 2 and 5 */
    candle_sampler *s = make(p);
    draw(s, l, 3000, count);
    CHECK(count[2] + count[5] == 3000 && count[2] > count[5] && count[5] > 0);
    candle_sampler_free(s);
    /* top-p 0.5: id 2 has p = 0.42, with id 5 (0.25) the mass passes 0.5. */
    p = plain(1.0f, 3);
    p.top_p = 0.5f;
    s = make(p);
    draw(s, l, 3000, count);
    CHECK(count[2] + count[5] == 3000 && count[5] > 0);
    candle_sampler_free(s);
    /* min-p 0.5 keeps p >= 0.5 * p_max: ids 2 (1.0) and 5 (e^-0.5 = 0.61). */
    p = plain(1.0f, 3);
    p.min_p = 0.5f;
    s = make(p);
    draw(s, l, 3000, count);
    CHECK(count[2] + count[5] == 3000 && count[5] > 0);
    candle_sampler_free(s);
    p.min_p = 0.7f; /* only id 2 */
    s = make(p);
    draw(s, l, 500, count);
    CHECK(count[2] == 500);
    candle_sampler_free(s);
}

static void test_penalties(void) {
    const float l[V] = {3.0f, 2.9f, -1.0f, -1.0f, -1.0f, -1.0f};
    candle_sampler_params p = plain(0.0f, 0);
    p.repeat_penalty = 1.5f;
    p.penalty_last_n = 4;
    candle_sampler *s = make(p);
    CHECK(candle_sampler_sample(s, l) == 0);
    candle_sampler_accept(s, 0); /* 3.0 / 1.5 = 2.0 < 2.9 */
    CHECK(candle_sampler_sample(s, l) == 1);
    for (int i = 0; i < 4; i++) candle_sampler_accept(s, 3); /* id 0 leaves the window */
    CHECK(candle_sampler_sample(s, l) == 0);
    candle_sampler_free(s);
    /* frequency: 3.0 - 2 * 0.1 = 2.8 < 2.9; presence alone: 3.0 - 0.05 > 2.9 */
    p = plain(0.0f, 0);
    p.frequency_penalty = 0.1f;
    p.penalty_last_n = 8;
    s = make(p);
    candle_sampler_accept(s, 0);
    CHECK(candle_sampler_sample(s, l) == 0);
    candle_sampler_accept(s, 0);
    CHECK(candle_sampler_sample(s, l) == 1);
    candle_sampler_free(s);
    p = plain(0.0f, 0);
    p.presence_penalty = 0.05f;
    p.penalty_last_n = 8;
    s = make(p);
    candle_sampler_accept(s, 0);
    candle_sampler_accept(s, 0);
    CHECK(candle_sampler_sample(s, l) == 0); /* counted once */
    candle_sampler_free(s);
}

static void test_seeds(void) {
    const float l[V] = {0.0f, 0.2f, 0.4f, 0.1f, 0.3f, 0.5f};
    int32_t a[64], b[64], c[64];
    candle_sampler *s1 = make(plain(1.0f, 99)), *s2 = make(plain(1.0f, 99)),
                   *s3 = make(plain(1.0f, 100));
    int diff = 0;
    for (int i = 0; i < 64; i++) {
        a[i] = candle_sampler_sample(s1, l);
        b[i] = candle_sampler_sample(s2, l);
        c[i] = candle_sampler_sample(s3, l);
        diff += a[i] != c[i];
    }
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(diff > 0);
    candle_sampler_reset(s1);
    for (int i = 0; i < 64; i++) CHECK(candle_sampler_sample(s1, l) == a[i]);
    candle_sampler_free(s1);
    candle_sampler_free(s2);
    candle_sampler_free(s3);
}

static void test_errors(void) {
    candle_sampler *s;
    CHECK(candle_sampler_init(&s, 0, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "n_vocab");
    candle_sampler_free(NULL);
    CHECK_OK(NULL, candle_sampler_init(&s, V, NULL)); /* defaults */
    candle_sampler_accept(s, -1);                     /* ignored */
    candle_sampler_accept(s, V);
    const float l[V] = {0, 0, 0, 0, 0, 9};
    CHECK(candle_sampler_sample(s, l) == 5);
    candle_sampler_free(s);
}

int main(void) {
    test_greedy();
    test_distribution();
    test_truncation();
    test_penalties();
    test_seeds();
    test_errors();
    return test_done("test_sampler");
}
