/* Samplers: greedy, truncation (top-k, top-p, min-p), temperature, penalties,
 * and reproducibility for a seed, checked against counted frequencies;
 * logit_bias; log-probabilities against a double-precision reference. */
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

/* --- logprobs --------------------------------------------------------------- */

#define LV 5000 /* above the vectorized argmax's lane threshold */

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/* The reference: the logits after bias and penalties (float, as the sampler
 * applies them), log-softmax over all of them in double, and the top n by
 * (logit desc, id asc), found by full scans. */
static void reference(const float *l, const int32_t *bt, const float *bv, int nb,
                      const candle_sampler_params *p, const int32_t *hist, int nh, double *lp,
                      int32_t *top, int n_top) {
    static float f[LV];
    memcpy(f, l, sizeof f);
    for (int i = 0; i < nb; i++) f[bt[i]] += bv[i];
    bool pen = p->penalty_last_n > 0 &&
               (p->repeat_penalty != 1 || p->presence_penalty != 0 || p->frequency_penalty != 0);
    int from = nh > p->penalty_last_n ? nh - p->penalty_last_n : 0;
    for (int id = 0; pen && id < LV; id++) {
        int c = 0;
        for (int i = from; i < nh; i++) c += hist[i] == id;
        if (!c) continue;
        if (f[id] > 0) f[id] /= p->repeat_penalty;
        else f[id] *= p->repeat_penalty;
        f[id] -= (float)c * p->frequency_penalty + p->presence_penalty;
    }
    double m = -INFINITY, z = 0;
    for (int i = 0; i < LV; i++) m = f[i] > m ? f[i] : m;
    for (int i = 0; i < LV; i++) z += exp((double)f[i] - m);
    for (int i = 0; i < LV; i++) lp[i] = (double)f[i] - m - log(z);
    static bool used[LV];
    memset(used, 0, sizeof used);
    for (int k = 0; k < n_top; k++) {
        int best = -1;
        for (int i = 0; i < LV; i++)
            if (!used[i] && (best < 0 || f[i] > f[best])) best = i;
        used[best] = true;
        top[k] = best;
    }
}

/* Over 30 steps of a drifting random row, with and without penalties, bias
 * and truncation: the reported numbers are the reference's (1e-5), the top
 * list is the reference's ids in order, and the drawn tokens are exactly
 * those of candle_sampler_sample with the same seed (asking for logprobs
 * does not move the draw). */
static void test_logprobs_reference(void) {
    static float l[LV];
    static double ref[LV];
    uint64_t x = 7;
    for (int i = 0; i < LV; i++) l[i] = (float)(lcg(&x) % 20000) / 2000.0f - 5.0f;
    const int32_t bt[3] = {17, 4000, 17};
    const float bv[3] = {3.5f, -100.0f, 1.0f};
    struct { float temp; int32_t top_k; float top_p, min_p, rep, pres, freq; int nb, n_top; } cfg[] = {
        {0, 0, 1, 0, 1, 0, 0, 0, 5},          /* greedy in place */
        {0, 0, 1, 0, 1.3f, 0.2f, 0.1f, 0, 20}, /* greedy over penalised candidates */
        {0.7f, 40, 0.9f, 0.05f, 1, 0, 0, 3, 3}, /* truncated sampling, biased */
        {1.5f, 0, 1, 0, 1.1f, 0, 0.3f, 3, 0},  /* penalties, bias, no alternatives */
    };
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        candle_sampler_params p = plain(cfg[ci].temp, 11 + ci);
        p.top_k = cfg[ci].top_k;
        p.top_p = cfg[ci].top_p;
        p.min_p = cfg[ci].min_p;
        p.repeat_penalty = cfg[ci].rep;
        p.presence_penalty = cfg[ci].pres;
        p.frequency_penalty = cfg[ci].freq;
        p.penalty_last_n = 8;
        candle_sampler *a = NULL, *b = NULL;
        CHECK_OK(NULL, candle_sampler_init(&a, LV, &p));
        CHECK_OK(NULL, candle_sampler_init(&b, LV, &p));
        CHECK_OK(NULL, candle_sampler_set_logit_bias(a, bt, bv, cfg[ci].nb));
        CHECK_OK(NULL, candle_sampler_set_logit_bias(b, bt, bv, cfg[ci].nb));
        int32_t hist[64];
        int nh = 0;
        double worst = 0;
        for (int step = 0; step < 30; step++) {
            for (int i = 0; i < 40; i++) l[lcg(&x) % LV] += (float)(lcg(&x) % 1000) / 250.0f - 2.0f;
            candle_token_logprob chosen, top[CANDLE_MAX_TOP_LOGPROBS];
            int32_t n_out = -1, rtop[CANDLE_MAX_TOP_LOGPROBS];
            int32_t id = candle_sampler_sample_logprobs(a, l, cfg[ci].n_top, &chosen, top, &n_out);
            int32_t id2 = candle_sampler_sample(b, l);
            CHECK(id == id2 && id >= 0 && chosen.token == id);
            if (id < 0) break;
            reference(l, bt, bv, cfg[ci].nb, &p, hist, nh, ref, rtop, cfg[ci].n_top);
            CHECK(n_out == cfg[ci].n_top);
            double d = fabs(chosen.logprob - ref[id]);
            for (int k = 0; k < n_out && k < cfg[ci].n_top; k++) {
                CHECK(top[k].token == rtop[k]);
                double e = fabs(top[k].logprob - ref[rtop[k]]);
                d = e > d ? e : d;
                CHECK(top[k].logprob <= 0 && (k == 0 || top[k].logprob <= top[k - 1].logprob));
            }
            worst = d > worst ? d : worst;
            if (p.temp <= 0 && n_out > 0) CHECK(top[0].token == id && top[0].logprob == chosen.logprob);
            candle_sampler_accept(a, id);
            candle_sampler_accept(b, id);
            hist[nh++] = id;
        }
        CHECK(worst < 1e-5);
        if (worst >= 1e-5) printf("logprobs config %zu: worst difference %g\n", ci, worst);
        candle_sampler_free(a);
        candle_sampler_free(b);
    }
    /* bounds */
    candle_sampler *s = make(plain(0, 1));
    candle_token_logprob c, top[CANDLE_MAX_TOP_LOGPROBS + 1];
    const float six[V] = {0, 1, 2, 3, 4, 5};
    CHECK(candle_sampler_sample_logprobs(s, six, CANDLE_MAX_TOP_LOGPROBS + 1, &c, top, NULL) == -1);
    CHECK_CONTAINS(candle_last_errmsg(), "top logprobs");
    /* more alternatives asked than tokens with a probability: the -inf ones are not listed */
    const float some[V] = {0, -INFINITY, 2, -INFINITY, 1, -INFINITY};
    int32_t n_out = 0;
    CHECK(candle_sampler_sample_logprobs(s, some, 5, &c, top, &n_out) == 2);
    CHECK(n_out == 3 && top[0].token == 2 && top[1].token == 4 && top[2].token == 0);
    double z = log(1 + exp(2.0) + exp(1.0));
    CHECK_NEAR(c.logprob, 2 - z, 1e-6);
    CHECK_NEAR(top[2].logprob, -z, 1e-6);
    /* NaN counts as -inf: never listed, nothing in the normaliser */
    const float nan6[V] = {1, NAN, 0, NAN, 2, -INFINITY};
    CHECK(candle_sampler_sample_logprobs(s, nan6, 5, &c, top, &n_out) == 4);
    CHECK(n_out == 3 && top[0].token == 4 && top[1].token == 0 && top[2].token == 2);
    CHECK_NEAR(c.logprob, 2 - z, 1e-6);
    candle_sampler_free(s);
}

static void test_logit_bias(void) {
    const float l[V] = {0.5f, 2.0f, -1.0f, 1.0f, 1.9f, 0.0f};
    candle_sampler *s = make(plain(0.0f, 1));
    CHECK(candle_sampler_sample(s, l) == 1);
    int32_t t = 1;
    float b = -100;
    CHECK_OK(NULL, candle_sampler_set_logit_bias(s, &t, &b, 1));
    CHECK(candle_sampler_sample(s, l) == 4); /* banned: the next best */
    t = 2, b = 100;
    CHECK_OK(NULL, candle_sampler_set_logit_bias(s, &t, &b, 1));
    CHECK(candle_sampler_sample(s, l) == 2); /* forced */
    CHECK(l[2] == -1.0f);                    /* the caller's logits are left alone */
    CHECK_OK(NULL, candle_sampler_set_logit_bias(s, NULL, NULL, 0));
    CHECK(candle_sampler_sample(s, l) == 1);
    /* sampled: +100 on one token leaves the others a probability of e^-100 */
    candle_sampler_free(s);
    s = make(plain(1.0f, 5));
    t = 5;
    b = 100;
    CHECK_OK(NULL, candle_sampler_set_logit_bias(s, &t, &b, 1));
    int count[V];
    draw(s, l, 500, count);
    CHECK(count[5] == 500);
    /* refused: out of range tokens and biases, NaN */
    t = V;
    CHECK(candle_sampler_set_logit_bias(s, &t, &b, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "logit_bias token 6");
    t = 0, b = 100.5f;
    CHECK(candle_sampler_set_logit_bias(s, &t, &b, 1) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "logit_bias");
    b = NAN;
    CHECK(candle_sampler_set_logit_bias(s, &t, &b, 1) == CANDLE_ERR_INVALID_ARG);
    draw(s, l, 50, count); /* the refused calls left the old bias */
    CHECK(count[5] == 50);
    candle_sampler_free(s);
}

int main(void) {
    test_logprobs_reference();
    test_logit_bias();
    test_greedy();
    test_distribution();
    test_truncation();
    test_penalties();
    test_seeds();
    test_errors();
    return test_done("test_sampler");
}
