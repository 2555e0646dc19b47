/* arange, full/zeros/ones, rand and randn: values against naive references,
 * the generator against golden values computed independently (Python, from
 * the algorithm documented in src/backend/cpu/ref/create.c), determinism,
 * statistical bounds, range edges and error cases. */
#include "mathtest.h"

static const candle_dtype kFloat[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
static const candle_dtype kAll[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16,
                                    CANDLE_DTYPE_I32, CANDLE_DTYPE_I64, CANDLE_DTYPE_I8,
                                    CANDLE_DTYPE_U8};

static double *computed(candle_ctx *ctx, candle_tensor *t) {
    if (!t || candle_compute(ctx, t) != CANDLE_OK) return NULL;
    return mt_values(t);
}

static void test_arange(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const struct {
        double start, end, step;
        int64_t n;
        bool int_ok; /* whole-number values */
    } cases[] = {
        {0, 5, 1, 5, true},     {3, 10, 2, 4, true},      {1.5, -2, -0.5, 7, false},
        {0, 1, 0.3, 4, false},  {-4, 4, 3, 3, true},      {2, 2, 1, 0, true},
        {0, 1000, 7, 143, true},
    };
    for (size_t di = 0; di < sizeof kAll / sizeof kAll[0]; di++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            candle_dtype dt = kAll[di];
            const candle_dtype_traits *tr = cpu_dtype(dt);
            if (tr->is_int && !cases[c].int_ok) continue;
            if (tr->type_size == 1 && cases[c].n > 100) continue; /* saturates */
            if (dt == CANDLE_DTYPE_U8 && cases[c].start < 0) continue;
            candle_tensor *t = candle_arange(ctx, dt, cases[c].start, cases[c].end, cases[c].step);
            double *got = computed(ctx, t);
            CHECK_MSG(got && t->rank == 1 && t->shape[0] == cases[c].n && t->dtype == dt,
                      "arange %s case %zu: %s", tr->name, c, candle_errmsg(ctx));
            if (!got) continue;
            double *want = malloc(sizeof(double) * (size_t)(cases[c].n + 1));
            for (int64_t i = 0; i < cases[c].n; i++) want[i] = cases[c].start + (double)i * cases[c].step;
            double e = mt_nmse(got, want, cases[c].n);
            CHECK_MSG(tr->is_int ? e == 0 : e <= mt_bound(dt), "arange %s case %zu: nmse %g",
                      tr->name, c, e);
            free(want);
            free(got);
        }
    candle_ctx_free(ctx);
}

static void test_full(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    const int64_t shapes[4][3] = {{3, 5, 7}, {1, 1, 1}, {4, 0, 2}, {0, 0, 0}};
    const int ranks[4] = {3, 1, 3, 0};
    for (size_t di = 0; di < sizeof kAll / sizeof kAll[0]; di++)
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 3; k++) {
                candle_dtype dt = kAll[di];
                double value = k == 0 ? 0.0 : k == 1 ? 1.0 : 6.0;
                candle_tensor *t = k == 0   ? candle_zeros(ctx, dt, ranks[s], shapes[s])
                                   : k == 1 ? candle_ones(ctx, dt, ranks[s], shapes[s])
                                            : candle_full(ctx, dt, ranks[s], shapes[s], value);
                double *got = computed(ctx, t);
                CHECK_MSG(got && mt_same_shape(t, ranks[s], shapes[s]) && t->dtype == dt,
                          "full %s: %s", candle_dtype_name(dt), candle_errmsg(ctx));
                int bad = 0;
                for (int64_t i = 0; got && i < mt_numel(ranks[s], shapes[s]); i++) bad += got[i] != value;
                CHECK_MSG(bad == 0, "full %s value %g shape %d: %d wrong", candle_dtype_name(dt),
                          value, s, bad);
                free(got);
            }
    /* Values round to the dtype. */
    int64_t n = 3;
    double *h = computed(ctx, candle_full(ctx, CANDLE_DTYPE_F16, 1, &n, 0.1));
    CHECK(h && h[2] == (double)candle_f16_to_f32(candle_f32_to_f16(0.1f)));
    double *i = computed(ctx, candle_full(ctx, CANDLE_DTYPE_I32, 1, &n, -7));
    CHECK(i && i[0] == -7 && i[2] == -7);
    free(h);
    free(i);
    candle_ctx_free(ctx);
}

/* The raw bits of a computed tensor's (contiguous) data. */
static bool same_bits(const candle_tensor *a, const candle_tensor *b) {
    return a && b && candle_tensor_nbytes(a) == candle_tensor_nbytes(b) &&
           memcmp(candle_tensor_data(a), candle_tensor_data(b), candle_tensor_nbytes(a)) == 0;
}

static void test_rand_golden(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t n = 4;
    const float uni[4] = {0x1.93a37ap-1f, -0x1.0069b8p-1f, 0x1.f143e2p+0f, -0x1.4bbd9p-3f};
    const double nor[4] = {1.5861053027384835, 4.116598404324662, 0.5367464402331494,
                           2.3301920383065955};
    candle_tensor *u = candle_rand(ctx, CANDLE_DTYPE_F32, 1, &n, 42, -1, 2);
    candle_tensor *g = candle_randn(ctx, CANDLE_DTYPE_F32, 1, &n, 42, 0.5, 2);
    CHECK_MSG(u && g, "%s", candle_errmsg(ctx));
    for (int i = 0; u && g && i < 4; i++) {
        float uv = ((const float *)candle_tensor_data(u))[i], gv = ((const float *)candle_tensor_data(g))[i];
        CHECK_MSG(uv == uni[i], "uniform %d: %a want %a", i, uv, uni[i]);
        CHECK_NEAR(gv, nor[i], 1e-6 * fabs(nor[i]));
    }
    candle_ctx_free(ctx);
}

static void test_rand_determinism(void) {
    candle_ctx *e = mt_ctx(true), *g = mt_ctx(false);
    int64_t s2[2] = {37, 29}, s1 = 37 * 29;
    for (size_t di = 0; di < 3; di++) {
        candle_dtype dt = kFloat[di];
        for (int dist = 0; dist < 2; dist++) {
            candle_tensor *a = dist ? candle_randn(e, dt, 2, s2, 7, 0, 1) : candle_rand(e, dt, 2, s2, 7, 0, 1);
            /* Counter-based: same seed, same values in a graph context and for
             * another shape with as many elements. */
            candle_tensor *b = dist ? candle_randn(g, dt, 1, &s1, 7, 0, 1) : candle_rand(g, dt, 1, &s1, 7, 0, 1);
            CHECK(b && candle_compute(g, b) == CANDLE_OK);
            CHECK_MSG(same_bits(a, b), "%s dist %d: same seed differs", candle_dtype_name(dt), dist);
            candle_tensor *c = dist ? candle_randn(e, dt, 2, s2, 8, 0, 1) : candle_rand(e, dt, 2, s2, 8, 0, 1);
            double *va = mt_values(a), *vc = mt_values(c);
            int equal = 0;
            for (int64_t i = 0; va && vc && i < s1; i++) equal += va[i] == vc[i];
            /* bf16 has 256 values in [0.5, 1): a few coincidences are expected. */
            CHECK_MSG(va && vc && equal < s1 / 20, "%s dist %d: seeds 7 and 8 share %d of %lld",
                      candle_dtype_name(dt), dist, equal, (long long)s1);
            free(va);
            free(vc);
        }
    }
    candle_ctx_free(e);
    candle_ctx_free(g);
}

/* Sample mean and standard deviation of t's values. */
static void moments(const double *v, int64_t n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = sqrt(ss / (double)(n - 1));
}

static void test_rand_stats(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t n = 20000;
    for (size_t di = 0; di < 3; di++) {
        candle_dtype dt = kFloat[di];
        double lo = -3, hi = 5, mean, sd;
        double *v = mt_values(candle_rand(ctx, dt, 1, &n, 123, lo, hi));
        CHECK(v != NULL);
        if (!v) continue;
        int out = 0;
        for (int64_t i = 0; i < n; i++) out += !(v[i] >= lo && v[i] < hi);
        CHECK_MSG(out == 0, "rand %s: %d values outside [lo, hi)", candle_dtype_name(dt), out);
        /* Five standard errors: fails by chance with probability < 1e-6. */
        moments(v, n, &mean, &sd);
        double w = hi - lo, se_mean = w / sqrt(12.0 * (double)n);
        CHECK_NEAR(mean, (lo + hi) / 2, 5 * se_mean);
        CHECK_NEAR(sd, w / sqrt(12.0), 5 * w * sqrt(1.0 / 180.0 / (double)n) + 0.01 * w);
        free(v);

        double mu = 1.5, sigma = 2;
        v = mt_values(candle_randn(ctx, dt, 1, &n, 99, mu, sigma));
        CHECK(v != NULL);
        if (!v) continue;
        moments(v, n, &mean, &sd);
        CHECK_NEAR(mean, mu, 5 * sigma / sqrt((double)n));
        CHECK_NEAR(sd, sigma, 5 * sigma / sqrt(2.0 * (double)n) + 0.01 * sigma);
        /* Tails: about 4.55% beyond two sigma. */
        int tail = 0;
        for (int64_t i = 0; i < n; i++) tail += fabs(v[i] - mu) > 2 * sigma;
        CHECK_NEAR((double)tail / (double)n, 0.0455, 0.008);
        free(v);
    }
    /* std 0 gives the mean everywhere. */
    double *c = mt_values(candle_randn(ctx, CANDLE_DTYPE_F32, 1, &n, 5, 2.5, 0));
    CHECK(c && c[0] == 2.5 && c[n - 1] == 2.5);
    free(c);
    candle_ctx_free(ctx);
}

/* Ranges narrower than the dtype's spacing: rounding would reach hi, or fall
 * below a lo that is not representable; values must still be in [lo, hi). */
static void test_rand_edges(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t n = 2000;
    const struct {
        candle_dtype dt;
        double lo, hi;
    } cases[] = {
        {CANDLE_DTYPE_BF16, 1.0, 1.0078125}, /* [1, 1 + ulp): only 1.0 fits */
        {CANDLE_DTYPE_F16, 1.0, 1.0009765625},
        {CANDLE_DTYPE_BF16, 0.1, 0.2},
        {CANDLE_DTYPE_F16, -0.3, -0.1},
        {CANDLE_DTYPE_F32, 1.0, 1.0 + 0x1p-23},
        {CANDLE_DTYPE_BF16, -0.0078125, 0.0}, /* below zero */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double *v = mt_values(candle_rand(ctx, cases[c].dt, 1, &n, 11, cases[c].lo, cases[c].hi));
        int out = 0;
        for (int64_t i = 0; v && i < n; i++) out += !(v[i] >= cases[c].lo && v[i] < cases[c].hi);
        CHECK_MSG(v && out == 0, "rand %s [%g, %g): %d outside", candle_dtype_name(cases[c].dt),
                  cases[c].lo, cases[c].hi, out);
        free(v);
    }
    candle_ctx_free(ctx);
}

static void test_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t s[2] = {2, 3}, neg[2] = {2, -1};
    MT_CHECK_ERR(ctx, candle_arange(ctx, CANDLE_DTYPE_F32, 0, 5, 0), CANDLE_ERR_INVALID_ARG,
                 "arange: invalid range 0..5 step 0");
    MT_CHECK_ERR(ctx, candle_arange(ctx, CANDLE_DTYPE_F32, 0, 5, -1), CANDLE_ERR_INVALID_ARG,
                 "arange: step -1 has the wrong sign for 0..5");
    MT_CHECK_ERR(ctx, candle_arange(ctx, CANDLE_DTYPE_F32, 0, INFINITY, 1), CANDLE_ERR_INVALID_ARG,
                 "arange: invalid range");
    MT_CHECK_ERR(ctx, candle_arange(ctx, CANDLE_DTYPE_F32, 0, 1e300, 1), CANDLE_ERR_INVALID_ARG,
                 "too many elements");
    MT_CHECK_ERR(ctx, candle_arange(ctx, CANDLE_DTYPE_Q4_0, 0, 5, 1), CANDLE_ERR_DTYPE,
                 "arange: dtype q4_0 not supported");
    MT_CHECK_ERR(ctx, candle_full(ctx, CANDLE_DTYPE_F32, 2, neg, 1), CANDLE_ERR_SHAPE,
                 "invalid shape [2, -1]");
    MT_CHECK_ERR(ctx, candle_zeros(ctx, CANDLE_DTYPE_COUNT, 2, s), CANDLE_ERR_DTYPE,
                 "full: invalid dtype");
    MT_CHECK_ERR(ctx, candle_rand(ctx, CANDLE_DTYPE_F32, 2, s, 1, 1, 1), CANDLE_ERR_INVALID_ARG,
                 "rand: invalid range [1, 1)");
    MT_CHECK_ERR(ctx, candle_rand(ctx, CANDLE_DTYPE_I32, 2, s, 1, 0, 1), CANDLE_ERR_DTYPE,
                 "rand: dtype i32 not supported (needs f32, f16 or bf16)");
    MT_CHECK_ERR(ctx, candle_randn(ctx, CANDLE_DTYPE_F32, 2, s, 1, 0, -1), CANDLE_ERR_INVALID_ARG,
                 "randn: invalid mean 0 std -1");
    MT_CHECK_ERR(ctx, candle_randn(ctx, CANDLE_DTYPE_Q8_0, 2, s, 1, 0, 1), CANDLE_ERR_DTYPE,
                 "randn: dtype q8_0 not supported");
    CHECK(candle_zeros(NULL, CANDLE_DTYPE_F32, 2, s) == NULL);
    candle_ctx_free(ctx);
}

int main(void) {
    for (int eager = 0; eager < 2; eager++) {
        test_arange(eager);
        test_full(eager);
    }
    test_rand_golden();
    test_rand_determinism();
    test_rand_stats();
    test_rand_edges();
    test_errors();
    return test_done("test_create");
}
