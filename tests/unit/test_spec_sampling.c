/* Speculative rejection sampling (candle_sampler_verify) on small
 * synthetic distributions: whatever the draft distribution q (another
 * softmax, a point mass as prompt lookup drafts, a draft sampler's own
 * output from candle_sampler_sample_probs), the tokens returned follow the
 * sampler's distribution p, computed exactly here for each configuration
 * (temperature, top-k, top-p, min-p, a repetition penalty): chi-square at
 * alpha = 0.001 with fixed seeds, tokens of p = 0 never returned, and the
 * acceptance rate sum_x min(p(x), q(x)) within 5 sigma. Greedy: accepted
 * exactly when the draft is the greedy token. */
#include "candle/sampler.h"
#include "test.h"

#define V 8
#define N_TRIALS 100000

static const float logits[V] = {1.2f, 0.3f, 2.0f, -0.5f, 1.9f, -2.0f, 0.8f, 0.0f};
static const float draft_logits[V] = {0.1f, 1.5f, 1.0f, 0.2f, 2.2f, -1.0f, -0.3f, 0.9f};

typedef struct config {
    const char *name;
    candle_sampler_params sp;
    int32_t history; /* a token in the penalty history, or -1 */
} config;

static candle_sampler_params params(float temp, int32_t top_k, float top_p, float min_p) {
    candle_sampler_params p = candle_sampler_default_params();
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = 12345;
    return p;
}

/* The sampler's distribution, by its documented order: penalties, top-k,
 * top-p and min-p on the temperature-1 softmax, then the temperature. */
static void exact_p(const config *c, const float *l, double *p) {
    double x[V];
    int order[V], n = V;
    for (int i = 0; i < V; i++) {
        x[i] = l[i];
        if (i == c->history) {
            x[i] = x[i] > 0 ? x[i] / c->sp.repeat_penalty : x[i] * c->sp.repeat_penalty;
            x[i] -= c->sp.frequency_penalty + c->sp.presence_penalty;
        }
        order[i] = i;
    }
    for (int i = 0; i < V; i++) /* sort descending, ties to the lower id */
        for (int j = i + 1; j < V; j++)
            if (x[order[j]] > x[order[i]] || (x[order[j]] == x[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    if (c->sp.top_k > 0 && c->sp.top_k < n) n = c->sp.top_k;
    double q[V], sum = 0;
    for (int i = 0; i < n; i++) sum += q[i] = exp(x[order[i]] - x[order[0]]);
    for (int i = 0; i < n; i++) q[i] /= sum;
    if (c->sp.top_p < 1) {
        double cum = 0;
        for (int i = 0; i < n; i++)
            if ((cum += q[i]) >= c->sp.top_p) {
                n = i + 1;
                break;
            }
    }
    if (c->sp.min_p > 0) {
        int keep = 1;
        while (keep < n && q[keep] >= c->sp.min_p * q[0]) keep++;
        n = keep;
    }
    for (int i = 0; i < V; i++) p[i] = 0;
    sum = 0;
    for (int i = 0; i < n; i++) sum += p[order[i]] = exp((x[order[i]] - x[order[0]]) / c->sp.temp);
    for (int i = 0; i < n; i++) p[order[i]] /= sum;
}

/* alpha = 0.001 critical values of chi-square, by degrees of freedom. */
static const double chi2_crit[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double unit(void) { /* xorshift64*, independent of the sampler's generator */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

static int32_t draw_from(const float *q) {
    double u = unit(), cum = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < V; i++) {
        if (q[i] <= 0) continue;
        last = i;
        if (u < (cum += q[i])) return i;
    }
    return last;
}

/* N_TRIALS verifications of drafts from q (NULL: the point mass at fixed);
 * the output histogram against p, the acceptance rate against its
 * expectation. */
static void run(const config *c, const char *qname, const float *q, int32_t fixed) {
    double p[V];
    exact_p(c, logits, p);
    candle_sampler *s = NULL;
    CHECK_OK(NULL, candle_sampler_init(&s, V, &c->sp));
    if (!s) return;
    if (c->history >= 0) candle_sampler_accept(s, c->history);
    int count[V] = {0};
    long acc = 0;
    for (int t = 0; t < N_TRIALS; t++) {
        int32_t d = q ? draw_from(q) : fixed;
        bool ok = false;
        int32_t id = candle_sampler_verify(s, logits, d, q, &ok);
        CHECK(id >= 0 && id < V);
        if (id < 0 || id >= V) break;
        if (ok) CHECK(id == d);
        count[id]++;
        acc += ok;
    }
    double chi2 = 0, expect_acc = 0;
    int df = -1, zero_hits = 0;
    for (int i = 0; i < V; i++) {
        double qi = q ? q[i] : (double)(i == fixed);
        expect_acc += p[i] < qi ? p[i] : qi;
        if (p[i] == 0) {
            zero_hits += count[i];
            continue;
        }
        double e = N_TRIALS * p[i];
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    double rate = (double)acc / N_TRIALS, sigma = sqrt(expect_acc * (1 - expect_acc) / N_TRIALS) + 1e-9;
    printf("%-22s %-12s chi2 %6.2f (df %d, crit %.2f)  accepted %.4f (expected %.4f)\n", c->name, qname, chi2,
           df, df > 0 ? chi2_crit[df] : 0.0, rate, expect_acc);
    CHECK_MSG(zero_hits == 0, "%s/%s: %d tokens of probability 0 returned", c->name, qname, zero_hits);
    if (df > 0) CHECK_MSG(chi2 < chi2_crit[df], "%s/%s: chi2 %g >= %g", c->name, qname, chi2, chi2_crit[df]);
    CHECK_MSG(fabs(rate - expect_acc) < 5 * sigma, "%s/%s: acceptance %g, expected %g", c->name, qname, rate,
              expect_acc);
    candle_sampler_free(s);
}

/* candle_sampler_sample_probs: the distribution it reports is the exact one
 * and its draws are candle_sampler_sample's. */
static void test_sample_probs(const config *c, float *q_out) {
    double p[V];
    exact_p(c, draft_logits, p);
    candle_sampler *a = NULL, *b = NULL;
    CHECK_OK(NULL, candle_sampler_init(&a, V, &c->sp));
    CHECK_OK(NULL, candle_sampler_init(&b, V, &c->sp));
    if (c->history >= 0) {
        candle_sampler_accept(a, c->history);
        candle_sampler_accept(b, c->history);
    }
    for (int t = 0; t < 200; t++) {
        int32_t x = candle_sampler_sample_probs(a, draft_logits, q_out);
        int32_t y = candle_sampler_sample(b, draft_logits);
        CHECK(x == y);
        CHECK(q_out[x] > 0);
    }
    double sum = 0;
    for (int i = 0; i < V; i++) {
        CHECK_NEAR(q_out[i], p[i], 1e-6);
        sum += q_out[i];
    }
    CHECK_NEAR(sum, 1.0, 1e-5);
    candle_sampler_free(a);
    candle_sampler_free(b);
}

static void test_greedy(void) {
    candle_sampler *s = NULL;
    candle_sampler_params sp = params(0, 0, 1, 0);
    CHECK_OK(NULL, candle_sampler_init(&s, V, &sp));
    bool ok = false;
    CHECK(candle_sampler_verify(s, logits, 2, NULL, &ok) == 2 && ok);
    CHECK(candle_sampler_verify(s, logits, 4, NULL, &ok) == 2 && !ok);
    float q[V] = {0};
    q[4] = 1;
    CHECK(candle_sampler_verify(s, logits, 4, q, &ok) == 2 && !ok);
    CHECK(candle_sampler_sample_probs(s, logits, q) == 2);
    CHECK(q[2] == 1 && q[4] == 0);
    CHECK(candle_sampler_verify(s, logits, V, NULL, &ok) == -1 && !ok);
    CHECK_CONTAINS(candle_last_errmsg(), "draft token");
    candle_sampler_free(s);
    /* greedy with a penalty on the best token: the penalised argmax */
    sp.repeat_penalty = 2.0f;
    CHECK_OK(NULL, candle_sampler_init(&s, V, &sp));
    candle_sampler_accept(s, 2);
    CHECK(candle_sampler_verify(s, logits, 4, NULL, &ok) == 4 && ok);
    candle_sampler_free(s);
}

int main(void) {
    config cs[] = {
        {"temp 1", params(1, 0, 1, 0), -1},
        {"temp 0.7 top-k 5", params(0.7f, 5, 1, 0), -1},
        {"temp 1.3 top-p min-p", params(1.3f, 0, 0.9f, 0.05f), -1},
        {"temp 1 penalty", params(1, 0, 1, 0), 2},
    };
    cs[3].sp.repeat_penalty = 1.5f;
    cs[3].sp.presence_penalty = 0.3f;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const config *c = &cs[i];
        float soft[V], samp[V];
        double sum = 0;
        for (int k = 0; k < V; k++) sum += soft[k] = expf(draft_logits[k]);
        for (int k = 0; k < V; k++) soft[k] /= (float)sum;
        run(c, "softmax q", soft, -1);
        run(c, "lookup best", NULL, 2);
        run(c, "lookup 6", NULL, 6);
        run(c, "lookup 5", NULL, 5); /* outside the truncated sets: never accepted there */
        /* a draft sampler with the same configuration on other logits */
        test_sample_probs(c, samp);
        run(c, "sampler q", samp, -1);
    }
    test_greedy();
    return test_done("test_spec_sampling");
}
