/* The arm64 NEON tile primitives of the flash attention
 * (src/backend/cpu/arm/attention_neon.c) and the NEON table's row softmax
 * (arm/simd_neon.c) one by one, on odd sizes and pointers one float off
 * alignment:
 *   pack_kt: the scalar table's panels bit for bit (f32/f16/bf16 keys,
 *            keys wider apart than a row, key counts off 4 and 16);
 *   scores / accum: bit for bit against an fmaf chain per output (from
 *            zero along d; from o * corr along the keys: each lane's
 *            arithmetic), so a wrong lane, panel or row shows;
 *   scores_rows: against the scalar table (another summation order);
 *   softmax step: against the scalar table's exp2f and exp2 in double, -inf
 *            and NaN scores, rows that have seen no key, and the row sums
 *            unchanged (bit for bit) when the same row is given more -inf
 *            columns (what keeps 1 and 2 threads' outputs equal);
 *   max / sub / sum, and cpu_simd.softmax / log_softmax against the scalar
 *            entry.
 * The whole kernel on the NEON table is checked by test_attention_blocked
 * (test_cases("neon")) and the other attention tests (the default table on
 * arm64), under qemu-user (make test-arm64). Elsewhere it checks nothing. */
#include "backend/cpu/attention-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "mathtest.h"

#if defined(__aarch64__)
static void fill(float *x, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)mt_uniform(&seed, -1, 1);
}

static double rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

static void test_products_once(candle_dtype kt, int64_t r, int64_t d, int64_t nk, int64_t dv, uint64_t seed) {
    const cpu_attn_ops *x = &cpu_attn_neon, *ref = &cpu_attn_scalar;
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR, lds = nkp + 3;
    int64_t ldo = (dv + ATTN_NR - 1) / ATTN_NR * ATTN_NR + 1;
    size_t esz = kt == CANDLE_DTYPE_F32 ? 4 : 2;
    int64_t sk = d + 3; /* keys a few elements apart */
    float *kf = malloc(sizeof(float) * (size_t)(nk * sk)), *qb = malloc(sizeof(float) * (size_t)(r * d + 1));
    char *kb = malloc(esz * (size_t)(nk * sk) + esz), *k = kb + esz; /* one element off */
    float *kt1 = malloc(sizeof(float) * (size_t)(nkp * d + 1)), *kt2 = malloc(sizeof(float) * (size_t)(nkp * d));
    float *s1 = calloc((size_t)(r * lds + 1), sizeof(float)), *s2 = calloc((size_t)(r * lds + 1), sizeof(float));
    float *q = qb + 1;
    fill(kf, nk * sk, seed);
    fill(qb, r * d + 1, seed + 1);
    cpu_dtype(kt)->from_f32(kf, k, nk * sk);
    x->pack_kt(kt, k, sk * (int64_t)esz, nk, d, kt1 + 1);
    ref->pack_kt(kt, k, sk * (int64_t)esz, nk, d, kt2);
    CHECK_MSG(memcmp(kt1 + 1, kt2, sizeof(float) * (size_t)(nkp * d)) == 0, "pack_kt %s nk %lld d %lld",
              candle_dtype_name(kt), (long long)nk, (long long)d);
    x->scores(q, d, r, d, kt1 + 1, nk, s1 + 1, lds);
    int bad = 0;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < nkp; j++) {
            float acc = 0;
            for (int64_t p = 0; p < d; p++)
                acc = fmaf(q[i * d + p], kt2[(j / ATTN_NR) * d * ATTN_NR + p * ATTN_NR + j % ATTN_NR], acc);
            bad += memcmp(&acc, s1 + 1 + i * lds + j, sizeof acc) != 0;
        }
    CHECK_MSG(!bad, "scores r %lld d %lld nk %lld: %d of the fmaf chain's bits differ", (long long)r, (long long)d,
              (long long)nk, bad);
    /* decoding scores from the key rows, against the scalar table */
    x->scores_rows(q, d, r, d, kt, k, sk * (int64_t)esz, nk, s1 + 1, lds);
    ref->scores_rows(q, d, r, d, kt, k, sk * (int64_t)esz, nk, s2 + 1, lds);
    double e = 0;
    for (int64_t i = 0; i < r; i++) e += rel_err(s1 + 1 + i * lds, s2 + 1 + i * lds, nk);
    CHECK_MSG(e < 1e-9, "scores_rows %s r %lld d %lld nk %lld: %g", candle_dtype_name(kt), (long long)r, (long long)d,
              (long long)nk, e);
    /* accum: p from the scalar scores, v rows with a stride off alignment,
     * o with padding; the exact lane arithmetic */
    int64_t ldv = dv + 3;
    float *vb = malloc(sizeof(float) * (size_t)(nk * ldv + 1)), *corr = malloc(sizeof(float) * (size_t)r);
    float *o1 = malloc(sizeof(float) * (size_t)(r * ldo + 1)), *o2 = malloc(sizeof(float) * (size_t)(r * ldo + 1));
    float *v = vb + 1;
    fill(vb, nk * ldv + 1, seed + 2);
    fill(corr, r, seed + 3);
    fill(o1, r * ldo + 1, seed + 4);
    memcpy(o2, o1, sizeof(float) * (size_t)(r * ldo + 1));
    x->accum(s2 + 1, lds, r, corr, v, ldv, nk, dv, o1 + 1, ldo);
    bad = 0;
    for (int64_t i = 0; i < r; i++)
        for (int64_t c = 0; c < dv; c++) {
            float acc = o2[1 + i * ldo + c] * corr[i];
            for (int64_t j = 0; j < nk; j++) acc = fmaf(s2[1 + i * lds + j], v[j * ldv + c], acc);
            bad += memcmp(&acc, o1 + 1 + i * ldo + c, sizeof acc) != 0;
        }
    CHECK_MSG(!bad, "accum r %lld nk %lld dv %lld: %d outputs differ from the fmaf chain", (long long)r,
              (long long)nk, (long long)dv, bad);
    /* the paged kernel's max / sub / sum */
    const float *row = s2 + 1;
    float mx1 = x->max(row, nk), mx2 = ref->max(row, nk);
    CHECK(mx1 == mx2);
    CHECK(fabsf(x->sum(row, nk) - ref->sum(row, nk)) <= 1e-5f * (1 + fabsf(ref->sum(row, nk))));
    CHECK(x->max(row, 0) == -INFINITY && x->sum(row, 0) == 0);
    memcpy(s1, s2, sizeof(float) * (size_t)(nk + 1));
    x->sub(s1 + 1, nk, mx1);
    for (int64_t j = 0; j < nk; j++) CHECK(s1[1 + j] == row[j] - mx1);
    free(kf), free(qb), free(kb), free(kt1), free(kt2), free(s1), free(s2), free(vb), free(corr), free(o1), free(o2);
}

static void test_products(void) {
    static const int64_t rs[] = {1, 2, 3, 5, 6, 7, 13}, ds[] = {1, 3, 4, 13, 64};
    static const int64_t nks[] = {1, 3, 4, 15, 17, 64, 67}, dvs[] = {5, 16, 24, 40, 3};
    static const candle_dtype kts[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    uint64_t seed = 7;
    for (size_t a = 0; a < sizeof rs / sizeof *rs; a++)
        for (size_t b = 0; b < sizeof ds / sizeof *ds; b++)
            for (size_t c = 0; c < sizeof nks / sizeof *nks; c++, seed += 5)
                test_products_once(kts[(a + b + c) % 3], rs[a], ds[b], nks[c], dvs[(a + c) % 5], seed);
    /* NaN is passed over by max, as by the scalar max */
    float y[9] = {1, NAN, 3, 2, NAN, -1, 0, 5, NAN};
    CHECK(cpu_attn_neon.max(y, 9) == 5 && cpu_attn_neon.max(y, 4) == 3 && cpu_attn_neon.max(y + 1, 1) == -INFINITY);
}

/* The online-softmax step against the scalar table and exp2 in double. */
static void test_softmax_once(int64_t r, int64_t nk, uint64_t seed) {
    enum { LDS = 73 };
    float s1[13 * LDS + 1] = {0}, s2[13 * LDS], m1[13] = {0}, m2[13], l1[13] = {0}, l2[13], c1[13], c2[13];
    double x[13 * LDS];
    float *s = s1 + 1; /* one float off alignment */
    for (int64_t i = 0; i < r; i++) {
        m1[i] = i % 3 == 0 ? -INFINITY : (float)mt_uniform(&seed, -4, 4);
        l1[i] = m1[i] == -INFINITY ? 0.0f : (float)mt_uniform(&seed, 0.5, 20);
        for (int64_t j = 0; j < LDS; j++) {
            double u = mt_uniform(&seed, 0, 1);
            s[i * LDS + j] = u < 0.15 ? -INFINITY : u < 0.2 ? (float)mt_uniform(&seed, -300, -100)
                                                            : (float)mt_uniform(&seed, -20, 6);
            if (i == 1 || i == 2) s[i * LDS + j] = -INFINITY;
        }
    }
    if (r > 1) m1[1] = -INFINITY, l1[1] = 0.0f; /* row 1: no key seen at all */
    for (int64_t i = 0; i < r * LDS; i++) x[i] = s[i];
    memcpy(s2, s, sizeof s2);
    memcpy(m2, m1, sizeof m1);
    memcpy(l2, l1, sizeof l1);
    cpu_attn_neon.softmax(s, LDS, r, nk, m1, l1, c1);
    cpu_attn_scalar.softmax(s2, LDS, r, nk, m2, l2, c2);
    for (int64_t i = 0; i < r; i++) {
        CHECK_MSG(m1[i] == m2[i], "softmax r %lld nk %lld: m[%lld] %g vs %g", (long long)r, (long long)nk,
                  (long long)i, m1[i], m2[i]);
        CHECK_MSG(fabsf(c1[i] - c2[i]) <= 3e-7f * c2[i] && fabsf(l1[i] - l2[i]) <= 1e-6f * l2[i],
                  "softmax r %lld nk %lld: row %lld corr %g vs %g, l %g vs %g", (long long)r, (long long)nk,
                  (long long)i, c1[i], c2[i], l1[i], l2[i]);
        if (r > 1 && i == 1) CHECK(m1[i] == -INFINITY && l1[i] == 0 && c1[i] == 0);
        for (int64_t j = 0; j < nk; j++) {
            float a = s[i * LDS + j];
            double want = m1[i] == -INFINITY ? 0 : exp2((double)((float)x[i * LDS + j] - m1[i]));
            bool ok = fabs(a - want) <= 2.5e-7 * want || (want < 1.2e-38 && a >= 0 && a < 1.2e-38f);
            CHECK_MSG(ok && fabsf(a - s2[i * LDS + j]) <= 4e-7f * s2[i * LDS + j] + 1.2e-38f,
                      "softmax r %lld nk %lld [%lld, %lld]: %g vs %g (scalar %g)", (long long)r, (long long)nk,
                      (long long)i, (long long)j, a, want, s2[i * LDS + j]);
        }
    }
}

/* A row's l and its probabilities do not depend on -inf columns after its
 * scores (a causal row in a group whose tile reaches further), nor on the
 * rows beside it; a NaN score makes the sum NaN and leaves the maximum. */
static void test_softmax_invariance(void) {
    enum { LDS = 72 };
    uint64_t seed = 99;
    for (int64_t nk = 1; nk <= 40; nk++)
        for (int64_t more = 1; nk + more <= 64; more += 5) {
            float a[LDS], b[2 * LDS], m[2] = {1.0f, -2.0f}, l[2] = {3.0f, 0.5f}, c[2], mb[2], lb[2], cb[2];
            for (int64_t j = 0; j < LDS; j++) a[j] = (float)mt_uniform(&seed, -10, 3);
            for (int64_t j = 0; j < LDS; j++) b[LDS + j] = b[j] = j < nk ? a[j] : -INFINITY;
            memcpy(mb, m, sizeof m);
            memcpy(lb, l, sizeof l);
            cpu_attn_neon.softmax(a, LDS, 1, nk, m, l, c);
            cpu_attn_neon.softmax(b, LDS, 2, nk + more, mb, lb, cb);
            CHECK_MSG(m[0] == mb[0] && l[0] == lb[0] && c[0] == cb[0] && memcmp(a, b, sizeof(float) * (size_t)nk) == 0,
                      "softmax nk %lld + %lld -inf columns: l %.9g vs %.9g", (long long)nk, (long long)more, l[0],
                      lb[0]);
            for (int64_t j = nk; j < nk + more; j++) CHECK(b[j] == 0);
        }
    /* the NaN in the lane of the maximum: a NaN-propagating max would lose it */
    float s[12] = {NAN, 1, 2, 0, 3, 0.5f, 0, -1, -2, 0, 0, 0}, m = -INFINITY, l = 0, c;
    cpu_attn_neon.softmax(s, 12, 1, 9, &m, &l, &c);
    CHECK_MSG(m == 3 && isnan(l) && c == 0 && fabsf(s[4] - 1) <= 2.5e-7f, "NaN score: m %g l %g", m, l);
}

static void test_softmax_step(void) {
    static const int64_t rs[] = {1, 2, 5, 6, 7, 13}, nks[] = {1, 3, 4, 7, 8, 15, 16, 17, 33, 48, 64, 65};
    uint64_t seed = 11;
    for (size_t a = 0; a < sizeof rs / sizeof *rs; a++)
        for (size_t b = 0; b < sizeof nks / sizeof *nks; b++, seed += 3) test_softmax_once(rs[a], nks[b], seed);
    test_softmax_invariance();
}

/* cpu_simd.softmax (and log) of the NEON table against the scalar entry:
 * row lengths around the 4-lane steps, -inf entries, a row all -inf but one. */
static void test_row_softmax(void) {
    const cpu_simd *neon = cpu_simd_get();
    CHECK(neon->softmax != cpu_simd_scalar.softmax);
    float x[80], y1[81], y2[80];
    uint64_t seed = 5;
    for (int n = 1; n <= 80; n += n < 12 ? 1 : 7)
        for (int lg = 0; lg < 2; lg++) {
            for (int j = 0; j < n; j++) x[j] = j % 7 == 3 ? -INFINITY : (float)mt_uniform(&seed, -30, 30);
            if (n > 2 && lg) x[0] = 200.0f; /* the others far below: tiny or 0 */
            neon->softmax(x, y1 + 1, n, lg);
            cpu_simd_scalar.softmax(x, y2, n, lg);
            for (int j = 0; j < n; j++) {
                float a = y1[1 + j], b = y2[j];
                bool ok = lg ? (a == b || fabsf(a - b) <= 2e-6f * (1 + fabsf(b)))
                             : fabsf(a - b) <= 6e-7f * b + 1e-37f;
                CHECK_MSG(ok, "softmax%s n %d [%d]: %.9g vs %.9g", lg ? " (log)" : "", n, j, a, b);
            }
        }
}

int main(void) {
    CHECK(cpu_simd_force("scalar") && !strcmp(cpu_attn_ops_get()->name, "scalar"));
    CHECK(cpu_simd_force("neon") && !strcmp(cpu_attn_ops_get()->name, "neon"));
    test_products();
    test_softmax_step();
    test_row_softmax();
    cpu_simd_force("auto"); /* neon unless CANDLE_CPU_ISA=scalar: the attention table follows */
    CHECK(!strcmp(cpu_attn_ops_get()->name, cpu_simd_get()->name));
    return test_done("test_attention_neon");
}
#else
int main(void) {
    test_skip("test_attention_neon", "not aarch64, no NEON attention kernels");
    return test_done("test_attention_neon");
}
#endif
