/* GGUF block formats: dequantization and quantization against golden files
 * from the gguf package (scripts/make_quant_golden.py) and, for the types it
 * cannot quantize, from ggml's reference quantizers
 * (scripts/make_quant_golden_ggml.sh); dot products against
 * dequantize-then-double-dot (scalar and AVX2), AVX2 quantizers against the
 * scalar ones, and round-trip error per type. */
#include <stdint.h>

#include "core/dtype-impl.h"
#include "backend/cpu/quant/x86/quant-x86-impl.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static unsigned char *read_all(const char *rel, long *size) {
    char path[1024];
    FILE *f = fopen(test_path(rel, path, sizeof path), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*size);
    if (buf && fread(buf, 1, (size_t)*size, f) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* ---- golden files ---- */

static void test_dequant_golden(const char *name) {
    candle_dtype t = candle_dtype_from_name(name);
    const candle_dtype_traits *tr = cpu_dtype(t);
    char rel[256];
    long size = 0;
    snprintf(rel, sizeof rel, "tests/data/quant/%s.deq", name);
    unsigned char *buf = read_all(rel, &size);
    CHECK_MSG(buf != NULL, "missing %s", rel);
    if (!buf) return;
    long per_block = (long)tr->type_size + 4 * (long)tr->block_size;
    CHECK_MSG(size % per_block == 0, "%s: size %ld", rel, size);
    long nb = size / per_block, n = nb * tr->block_size;
    float *got = calloc((size_t)n, sizeof(float));
    tr->to_f32(buf, got, n);
    const unsigned char *want = buf + nb * (long)tr->type_size;
    long bad = -1;
    for (long i = 0; i < n && bad < 0; i++)
        if (memcmp(&got[i], want + 4 * i, 4) != 0) bad = i;
    float w = 0;
    if (bad >= 0) memcpy(&w, want + 4 * bad, 4);
    CHECK_MSG(bad < 0, "%s dequant differs at %ld: %.9g vs %.9g", name, bad, bad >= 0 ? got[bad] : 0, w);
    free(got);
    free(buf);
}

static void check_quant_golden(const char *name, candle_from_f32_fn from, const char *which) {
    candle_dtype t = candle_dtype_from_name(name);
    const candle_dtype_traits *tr = cpu_dtype(t);
    char rel[256];
    long size = 0;
    snprintf(rel, sizeof rel, "tests/data/quant/%s.q", name);
    unsigned char *buf = read_all(rel, &size);
    CHECK_MSG(buf != NULL, "missing %s", rel);
    if (!buf) return;
    long per_block = (long)tr->type_size + 4 * (long)tr->block_size;
    long nb = size / per_block, n = nb * tr->block_size;
    CHECK(size % per_block == 0);
    float *x = malloc((size_t)n * sizeof(float));
    memcpy(x, buf, (size_t)n * sizeof(float));
    unsigned char *got = calloc((size_t)nb, tr->type_size);
    from(x, got, n);
    const unsigned char *want = buf + 4 * n;
    long bad = -1;
    for (long i = 0; i < nb * (long)tr->type_size && bad < 0; i++)
        if (got[i] != want[i]) bad = i;
    CHECK_MSG(bad < 0, "%s %s quant differs at byte %ld (block %ld): %02x vs %02x", name, which, bad,
              bad / (long)tr->type_size, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
    free(got);
    free(x);
    free(buf);
}

/* iq4_nl/iq4_xs: ggml's reference breaks codebook ties upward and derives
 * codes from the unrounded scale, so a few bytes differ (under 5%); the
 * round-trip error must be no worse than the reference's. */
static void check_quant_golden_error(const char *name) {
    candle_dtype t = candle_dtype_from_name(name);
    const candle_dtype_traits *tr = cpu_dtype(t);
    char rel[256];
    long size = 0;
    snprintf(rel, sizeof rel, "tests/data/quant/%s.q", name);
    unsigned char *buf = read_all(rel, &size);
    CHECK_MSG(buf != NULL, "missing %s", rel);
    if (!buf) return;
    long per_block = (long)tr->type_size + 4 * (long)tr->block_size;
    long nb = size / per_block, n = nb * tr->block_size, bytes = nb * (long)tr->type_size;
    float *x = malloc((size_t)n * sizeof(float)), *mine = malloc((size_t)n * sizeof(float));
    float *theirs = malloc((size_t)n * sizeof(float));
    double *ref = malloc((size_t)n * sizeof(double));
    memcpy(x, buf, (size_t)n * sizeof(float));
    unsigned char *got = calloc((size_t)nb, tr->type_size);
    tr->from_f32(x, got, n);
    tr->to_f32(got, mine, n);
    tr->to_f32(buf + 4 * n, theirs, n);
    for (long i = 0; i < n; i++) ref[i] = x[i];
    double e_mine = test_nmse(mine, ref, n), e_ref = test_nmse(theirs, ref, n);
    long differ = 0;
    for (long i = 0; i < bytes; i++) differ += got[i] != buf[4 * n + i];
    CHECK_MSG(e_mine <= e_ref * 1.001, "%s nmse %g vs reference %g", name, e_mine, e_ref);
    CHECK_MSG(differ * 20 <= bytes, "%s: %ld of %ld bytes differ from the reference", name, differ, bytes);
    free(x), free(mine), free(theirs), free(ref), free(got), free(buf);
}

/* ---- dot products ---- */

typedef struct {
    candle_dtype type;
    candle_vec_dot_fn scalar;
#ifdef CANDLE_QUANT_HAVE_X86
    candle_vec_dot_fn avx2, vnni; /* NULL if none */
#endif
} dot_case;

#ifdef CANDLE_QUANT_HAVE_X86
#define DOT(T, s, a) {CANDLE_DTYPE_##T, s, a, NULL}
#define DOTV(T, s, a, v) {CANDLE_DTYPE_##T, s, a, v}
#else
#define DOT(T, s, a) {CANDLE_DTYPE_##T, s}
#define DOTV(T, s, a, v) {CANDLE_DTYPE_##T, s}
#endif

static const dot_case dot_cases[] = {
    DOTV(Q4_0, cdl_vec_dot_q4_0_q8_0, cdl_vec_dot_q4_0_q8_0_avx2, cdl_vec_dot_q4_0_q8_0_vnni),
    DOTV(Q4_1, cdl_vec_dot_q4_1_q8_1, cdl_vec_dot_q4_1_q8_1_avx2, cdl_vec_dot_q4_1_q8_1_vnni),
    DOTV(Q5_0, cdl_vec_dot_q5_0_q8_0, cdl_vec_dot_q5_0_q8_0_avx2, cdl_vec_dot_q5_0_q8_0_vnni),
    DOTV(Q5_1, cdl_vec_dot_q5_1_q8_1, cdl_vec_dot_q5_1_q8_1_avx2, cdl_vec_dot_q5_1_q8_1_vnni),
    DOTV(Q8_0, cdl_vec_dot_q8_0_q8_0, cdl_vec_dot_q8_0_q8_0_avx2, cdl_vec_dot_q8_0_q8_0_vnni),
    DOT(Q8_1, cdl_vec_dot_q8_1_q8_1, NULL),
    DOTV(IQ4_NL, cdl_vec_dot_iq4_nl_q8_0, cdl_vec_dot_iq4_nl_q8_0_avx2, cdl_vec_dot_iq4_nl_q8_0_vnni),
    DOTV(Q2_K, cdl_vec_dot_q2_k_q8_k, cdl_vec_dot_q2_k_q8_k_avx2, cdl_vec_dot_q2_k_q8_k_vnni),
    DOTV(Q3_K, cdl_vec_dot_q3_k_q8_k, cdl_vec_dot_q3_k_q8_k_avx2, cdl_vec_dot_q3_k_q8_k_vnni),
    DOTV(Q4_K, cdl_vec_dot_q4_k_q8_k, cdl_vec_dot_q4_k_q8_k_avx2, cdl_vec_dot_q4_k_q8_k_vnni),
    DOTV(Q5_K, cdl_vec_dot_q5_k_q8_k, cdl_vec_dot_q5_k_q8_k_avx2, cdl_vec_dot_q5_k_q8_k_vnni),
    DOTV(Q6_K, cdl_vec_dot_q6_k_q8_k, cdl_vec_dot_q6_k_q8_k_avx2, cdl_vec_dot_q6_k_q8_k_vnni),
    DOT(Q8_K, cdl_vec_dot_q8_k_q8_k, NULL),
    DOTV(IQ4_XS, cdl_vec_dot_iq4_xs_q8_k, cdl_vec_dot_iq4_xs_q8_k_avx2, cdl_vec_dot_iq4_xs_q8_k_vnni),
    DOT(Q4_Z128, cdl_vec_dot_q4_z128_q8_0, NULL),
};

/* The q*_1 dots take the minimum's contribution from q8_1's s = f16(d *
 * sum(q)), which differs from d16 * sum(q) by an f16 rounding: allow it. */
static double s_rounding_slack(candle_dtype t, const void *xq, const void *yq, long nb) {
    if (t != CANDLE_DTYPE_Q4_1 && t != CANDLE_DTYPE_Q5_1) return 0;
    size_t ts = cpu_dtype(t)->type_size;
    const block_q8_1 *y = yq;
    double slack = 0;
    for (long i = 0; i < nb; i++) {
        uint16_t m;
        memcpy(&m, (const unsigned char *)xq + (size_t)i * ts + 2, 2);
        slack += fabs(candle_f16_to_f32(m)) * (fabs(candle_f16_to_f32(y[i].s)) + 1e-3) * 1e-3;
    }
    return slack;
}

static void test_dot(const dot_case *c, long nb, int shifted) {
    const candle_dtype_traits *tx = cpu_dtype(c->type);
    const candle_dtype_traits *ty = cpu_dtype(tx->vec_dot_type);
    long n = nb * tx->block_size;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *xd = malloc((size_t)n * sizeof(float)), *yd = malloc((size_t)n * sizeof(float));
    void *xq = calloc((size_t)nb, tx->type_size), *yq = calloc((size_t)n / ty->block_size, ty->type_size);
    for (long i = 0; i < n; i++) {
        x[i] = gauss() + (shifted ? 1.5f : 0.0f); /* shifted: exercises the minimums */
        y[i] = gauss();
    }
    tx->from_f32(x, xq, n);
    ty->from_f32(y, yq, n);
    tx->to_f32(xq, xd, n);
    ty->to_f32(yq, yd, n);
    double ref = 0, mag = 0;
    for (long i = 0; i < n; i++) {
        ref += (double)xd[i] * yd[i];
        mag += fabs((double)xd[i] * yd[i]);
    }
    double tol = 1e-5 * mag + s_rounding_slack(c->type, xq, yq, nb) + 1e-30;
    float got = NAN;
    c->scalar(n, &got, xq, yq);
    CHECK_MSG(fabs(got - ref) <= tol, "%s scalar dot nb=%ld: %.9g vs %.9g (tol %g)", tx->name, nb, got, ref, tol);
    float via_traits = NAN;
    tx->vec_dot(n, &via_traits, xq, yq);
    CHECK_MSG(fabs(via_traits - ref) <= tol, "%s traits dot nb=%ld: %.9g vs %.9g", tx->name, nb, via_traits, ref);
#ifdef CANDLE_QUANT_HAVE_X86
    if (c->avx2 && cdl_quant_uses_avx2()) {
        float fast = NAN;
        c->avx2(n, &fast, xq, yq);
        CHECK_MSG(fabs(fast - ref) <= tol, "%s avx2 dot nb=%ld: %.9g vs %.9g (tol %g)", tx->name, nb, fast, ref, tol);
    }
    if (c->vnni && cdl_quant_uses_vnni()) { /* only on CPUs with AVX-512 VNNI */
        float fast = NAN;
        c->vnni(n, &fast, xq, yq);
        CHECK_MSG(fabs(fast - ref) <= tol, "%s vnni dot nb=%ld: %.9g vs %.9g (tol %g)", tx->name, nb, fast, ref, tol);
    }
#endif
    free(x), free(y), free(xd), free(yd), free(xq), free(yq);
}

/* Extreme codes: every weight at its largest magnitude against activations at
 * +-127 must not saturate the 16-bit intermediate sums of the AVX2 kernels. */
static void test_dot_extremes(const dot_case *c) {
    const candle_dtype_traits *tx = cpu_dtype(c->type);
    const candle_dtype_traits *ty = cpu_dtype(tx->vec_dot_type);
    long nb = 3, n = nb * tx->block_size;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *xd = malloc((size_t)n * sizeof(float)), *yd = malloc((size_t)n * sizeof(float));
    void *xq = calloc((size_t)nb, tx->type_size), *yq = calloc((size_t)n / ty->block_size, ty->type_size);
    for (long i = 0; i < n; i++) {
        x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
        y[i] = (i % 3 == 0) ? -2.0f : 2.0f;
    }
    tx->from_f32(x, xq, n);
    ty->from_f32(y, yq, n);
    tx->to_f32(xq, xd, n);
    ty->to_f32(yq, yd, n);
    double ref = 0, mag = 0;
    for (long i = 0; i < n; i++) {
        ref += (double)xd[i] * yd[i];
        mag += fabs((double)xd[i] * yd[i]);
    }
    double tol = 1e-5 * mag + s_rounding_slack(c->type, xq, yq, nb);
    float got = NAN;
    c->scalar(n, &got, xq, yq);
    CHECK_MSG(fabs(got - ref) <= tol, "%s scalar extreme dot: %.9g vs %.9g", tx->name, got, ref);
#ifdef CANDLE_QUANT_HAVE_X86
    if (c->avx2 && cdl_quant_uses_avx2()) {
        float fast = NAN;
        c->avx2(n, &fast, xq, yq);
        CHECK_MSG(fabs(fast - ref) <= tol, "%s avx2 extreme dot: %.9g vs %.9g", tx->name, fast, ref);
    }
    if (c->vnni && cdl_quant_uses_vnni()) {
        float fast = NAN;
        c->vnni(n, &fast, xq, yq);
        CHECK_MSG(fabs(fast - ref) <= tol, "%s vnni extreme dot: %.9g vs %.9g", tx->name, fast, ref);
    }
#endif
    free(x), free(y), free(xd), free(yd), free(xq), free(yq);
}

/* Weights from the golden files' random blocks (any code pattern, scales of
 * both signs, subnormal to large): every kernel against the golden floats. */
static void test_dot_random_blocks(const dot_case *c) {
    const candle_dtype_traits *tx = cpu_dtype(c->type);
    const candle_dtype_traits *ty = cpu_dtype(tx->vec_dot_type);
    char rel[256];
    long size = 0;
    snprintf(rel, sizeof rel, "tests/data/quant/%s.deq", tx->name);
    unsigned char *buf = read_all(rel, &size);
    if (!buf) return; /* q8_1 and q8_k have no golden dequantization */
    long nb = size / ((long)tx->type_size + 4 * (long)tx->block_size), n = nb * tx->block_size;
    const unsigned char *golden = buf + nb * (long)tx->type_size;
    float *y = malloc((size_t)n * sizeof(float)), *yd = malloc((size_t)n * sizeof(float));
    void *yq = calloc((size_t)(n / ty->block_size), ty->type_size);
    for (long i = 0; i < n; i++) y[i] = gauss();
    ty->from_f32(y, yq, n);
    ty->to_f32(yq, yd, n);
    double ref = 0, mag = 0;
    for (long i = 0; i < n; i++) {
        float xv;
        memcpy(&xv, golden + 4 * i, 4);
        ref += (double)xv * yd[i];
        mag += fabs((double)xv * yd[i]);
    }
    double tol = 1e-5 * mag + s_rounding_slack(c->type, buf, yq, nb);
    candle_vec_dot_fn fns[3] = {c->scalar, NULL, NULL};
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2()) fns[1] = c->avx2;
    if (cdl_quant_uses_vnni()) fns[2] = c->vnni;
#endif
    for (int k = 0; k < 3; k++) {
        if (!fns[k]) continue;
        float got = NAN;
        fns[k](n, &got, buf, yq);
        CHECK_MSG(fabs(got - ref) <= tol, "%s kernel %d on random blocks: %.9g vs %.9g (tol %g)", tx->name, k, got, ref, tol);
    }
    free(y), free(yd), free(yq), free(buf);
}

/* ---- AVX2 activation quantizers are bit-identical to the scalar ones ---- */

static void test_avx2_quantizers(void) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return;
    struct {
        const char *name;
        candle_from_f32_fn scalar, fast;
        size_t ts;
    } qs[] = {
        {"q8_0", cdl_q8_0_from_f32, cdl_q8_0_from_f32_avx2, sizeof(block_q8_0)},
        {"q8_1", cdl_q8_1_from_f32, cdl_q8_1_from_f32_avx2, sizeof(block_q8_1)},
        {"q8_k", cdl_q8_k_from_f32, cdl_q8_k_from_f32_avx2, sizeof(block_q8_K)},
    };
    long n = 5 * QK_K;
    float *x = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = gauss();
    for (long i = 0; i < 256; i++) x[i] = (float)(i % 64) * 0.5f - 15.75f; /* many exact halves */
    for (long i = 256; i < 288; i++) x[i] = (float)(i - 256) - 127.0f + 0.5f * (float)(i % 2);
    for (long i = 288; i < 512; i++) x[i] = 0; /* zero blocks */
    x[600] = -100; /* negative extreme first */
    x[601] = 100;
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        unsigned char *a = calloc(1, (size_t)n * qs[k].ts), *b = calloc(1, (size_t)n * qs[k].ts);
        qs[k].scalar(x, a, n);
        qs[k].fast(x, b, n);
        long blocks = n / (qs[k].ts == sizeof(block_q8_K) ? QK_K : 32);
        CHECK_MSG(memcmp(a, b, (size_t)blocks * qs[k].ts) == 0, "%s avx2 quantizer differs from scalar", qs[k].name);
        free(a), free(b);
    }
    free(x);
#endif
}

/* q4_z128's AVX2 dequantization and its rewrites as q8_0 and q5_0 give the
 * scalar values bit for bit: random codes, every zero point 0..16, scales of
 * every finite f16 exponent. */
static void test_avx2_z128_dequant(void) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return;
    enum { NB = 64 };
    static block_q4_z128 b[NB];
    static float want[NB * QK4_Z], got[NB * QK4_Z];
    uint32_t r = 12345;
    for (int i = 0; i < NB; i++) {
        r = r * 1664525u + 1013904223u;
        b[i].d = (uint16_t)(((r >> 16) & 0x83FFu) | (uint32_t)(i % 31) << 10); /* exponents 0..30 */
        b[i].z = (uint8_t)(i % 17);
        for (int j = 0; j < QK4_Z / 2; j++) {
            r = r * 1664525u + 1013904223u;
            b[i].qs[j] = (uint8_t)(r >> 24);
        }
    }
    cdl_q4_z128_to_f32(b, want, NB * QK4_Z);
    cdl_q4_z128_to_f32_avx2(b, got, NB * QK4_Z);
    CHECK_MSG(memcmp(want, got, sizeof want) == 0, "q4_z128 avx2 dequantization differs from scalar");
    /* its rewrites for the panels: q8_0 and q5_0 blocks of the same values */
    static block_q8_0 q8[NB * 4];
    static block_q5_0 q5[NB * 4];
    cdl_q4_z128_to_q8_0_avx2(b, q8, NB * QK4_Z);
    cdl_q8_0_to_f32(q8, got, NB * QK4_Z);
    CHECK_MSG(memcmp(want, got, sizeof want) == 0, "q4_z128 as q8_0 differs");
    cdl_q4_z128_to_q5_0_avx2(b, q5, NB * QK4_Z);
    cdl_q5_0_to_f32(q5, got, NB * QK4_Z);
    CHECK_MSG(memcmp(want, got, sizeof want) == 0, "q4_z128 as q5_0 differs");
#endif
}

/* The AVX2 half-float row converters against the scalar conversions: every
 * f16/bf16 bit pattern up, and floats around every rounding case down. */
static void test_avx2_half_rows(void) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return;
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof(uint16_t)), *h2 = malloc(N * sizeof(uint16_t));
    float *f = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    long bad = 0;
    cdl_f16_to_f32_row_avx2(h, f, N - 3); /* odd length: the scalar tail too */
    for (int i = 0; i < N - 3; i++) {
        float w = candle_f16_to_f32(h[i]);
        bad += memcmp(&f[i], &w, 4) != 0;
    }
    cdl_bf16_to_f32_row_avx2(h, g, N - 5);
    for (int i = 0; i < N - 5; i++) {
        float w = candle_bf16_to_f32(h[i]);
        bad += memcmp(&g[i], &w, 4) != 0;
    }
    CHECK_MSG(bad == 0, "avx2 half -> f32 rows: %ld mismatches", bad);
    /* floats: each f32 of the f16/bf16 grids, plus and minus a few ulps (ties, carries) */
    bad = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t u;
            memcpy(&u, round ? &g[i] : &f[i], 4);
            u += (uint32_t)((i * 2654435761u) % 9) * ((round ? 0x8000u : 0x1000u) / 4) - (round ? 0x8000u : 0x1000u);
            memcpy(&f[i], &u, 4);
        }
        cdl_f32_to_f16_row_avx2(f, h2, N - 7);
        for (int i = 0; i < N - 7; i++) bad += h2[i] != candle_f32_to_f16(f[i]);
        cdl_f32_to_bf16_row_avx2(f, h2, N - 7);
        for (int i = 0; i < N - 7; i++) bad += h2[i] != candle_f32_to_bf16(f[i]);
    }
    CHECK_MSG(bad == 0, "avx2 f32 -> half rows: %ld mismatches", bad);
    free(h), free(h2), free(f), free(g);
#endif
}

/* ---- activation formats' side fields ---- */

static void test_activation_sums(void) {
    long n = 2 * QK_K;
    float *x = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = gauss() * 3;
    block_q8_1 b1[16];
    cpu_dtype(CANDLE_DTYPE_Q8_1)->from_f32(x, b1, n);
    for (int i = 0; i < 16; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += b1[i].qs[j];
        float want = (float)s * candle_f16_to_f32(b1[i].d);
        CHECK_NEAR(candle_f16_to_f32(b1[i].s), want, fabs(want) * 1e-3 + 1e-6);
    }
    block_q8_K bk[2];
    cpu_dtype(CANDLE_DTYPE_Q8_K)->from_f32(x, bk, n);
    for (int i = 0; i < 2; i++)
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += bk[i].qs[16 * g + j];
            CHECK(bk[i].bsums[g] == s);
        }
    free(x);
}

/* ---- round trip ---- */

typedef struct {
    candle_dtype type;
    double max_nmse; /* on unit Gaussian data */
} rt_case;

static double round_trip_nmse(candle_dtype t, const float *x, long n) {
    const candle_dtype_traits *tr = cpu_dtype(t);
    void *q = calloc((size_t)(n / tr->block_size), tr->type_size);
    float *back = malloc((size_t)n * sizeof(float));
    double *ref = malloc((size_t)n * sizeof(double));
    tr->from_f32(x, q, n);
    tr->to_f32(q, back, n);
    for (long i = 0; i < n; i++) ref[i] = x[i];
    double e = test_nmse(back, ref, n);
    free(q), free(back), free(ref);
    return e;
}

static void test_round_trip(void) {
    /* bounds about 1.3x the measured values (printed below) */
    static const rt_case cases[] = {
        {CANDLE_DTYPE_F16, 1e-7},    {CANDLE_DTYPE_BF16, 1e-5},  {CANDLE_DTYPE_Q4_0, 1.2e-2},
        {CANDLE_DTYPE_Q4_1, 8e-3},   {CANDLE_DTYPE_Q5_0, 3e-3},  {CANDLE_DTYPE_Q5_1, 2e-3},
        {CANDLE_DTYPE_Q8_0, 1e-4},   {CANDLE_DTYPE_Q8_1, 1e-4},  {CANDLE_DTYPE_Q2_K, 1.5e-1},
        {CANDLE_DTYPE_Q3_K, 4e-2},   {CANDLE_DTYPE_Q4_K, 8e-3},  {CANDLE_DTYPE_Q5_K, 2e-3},
        {CANDLE_DTYPE_Q6_K, 5e-4},   {CANDLE_DTYPE_Q8_K, 1e-4},  {CANDLE_DTYPE_IQ4_NL, 8e-3},
        {CANDLE_DTYPE_IQ4_XS, 8e-3}, {CANDLE_DTYPE_Q4_Z128, 2e-2},
    };
    long n = 32 * QK_K;
    float *x = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) x[i] = gauss();
    double e[CANDLE_DTYPE_COUNT] = {0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        e[cases[k].type] = round_trip_nmse(cases[k].type, x, n);
        printf("  round trip %-7s nmse %.3e\n", candle_dtype_name(cases[k].type), e[cases[k].type]);
        CHECK_MSG(e[cases[k].type] <= cases[k].max_nmse, "%s nmse %g > %g", candle_dtype_name(cases[k].type),
                  e[cases[k].type], cases[k].max_nmse);
    }
    /* the K types' scale search beats the legacy round-to-nearest at equal bits */
    CHECK(e[CANDLE_DTYPE_Q4_K] < e[CANDLE_DTYPE_Q4_1]);
    CHECK(e[CANDLE_DTYPE_Q5_K] < e[CANDLE_DTYPE_Q5_1]);
    CHECK(e[CANDLE_DTYPE_Q2_K] > e[CANDLE_DTYPE_Q3_K] && e[CANDLE_DTYPE_Q3_K] > e[CANDLE_DTYPE_Q4_K]);
    CHECK(e[CANDLE_DTYPE_Q6_K] < e[CANDLE_DTYPE_Q5_K]);
    CHECK(e[CANDLE_DTYPE_IQ4_NL] < e[CANDLE_DTYPE_Q4_0]);
    free(x);
}

/* The pass bars of ggml's own quantization unit test on its synthetic data
 * (0.1 + 2 cos(i + offset), 4096 values): total error sqrt(sum d^2) / n at most
 * 0.002 (q2_K 0.0075, q3_K 0.004), and |dot - exact| / n at most 0.02 (0.04
 * for 2-3 bits). */
static void test_ggml_bars(void) {
    enum { N = 4096 };
    static float a[N], b[N], back[N];
    static unsigned char qa[2 * N], qb[2 * N];
    double exact = 0;
    for (int i = 0; i < N; i++) {
        a[i] = 0.1f + 2 * cosf((float)i);
        b[i] = 0.1f + 2 * cosf((float)i + 1.0f);
        exact += (double)a[i] * b[i];
    }
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        const candle_dtype_traits *tr = cpu_dtype((candle_dtype)t);
        const candle_dtype_traits *ty = cpu_dtype(tr->vec_dot_type);
        int low = t == CANDLE_DTYPE_Q2_K || t == CANDLE_DTYPE_Q3_K;
        double bar = t == CANDLE_DTYPE_Q2_K ? 0.0075 : t == CANDLE_DTYPE_Q3_K ? 0.004 : 0.002;
        tr->from_f32(a, qa, N);
        tr->to_f32(qa, back, N);
        double e2 = 0;
        for (int i = 0; i < N; i++) e2 += (double)(back[i] - a[i]) * (back[i] - a[i]);
        double total = sqrt(e2) / N;
        CHECK_MSG(total <= bar, "%s total error %g > %g", tr->name, total, bar);
        ty->from_f32(b, qb, N);
        float dot = NAN;
        tr->vec_dot(N, &dot, qa, qb);
        double derr = fabs(dot - exact) / N;
        CHECK_MSG(derr <= (low ? 0.04 : 0.02), "%s dot error %g", tr->name, derr);
        printf("  ggml bars %-7s total error %.2e (bar %.0e)  dot error %.2e\n", tr->name, total, bar, derr);
    }
}

/* Constant, zero and tiny inputs round-trip without NaNs. */
static void test_degenerate_inputs(void) {
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        const candle_dtype_traits *tr = cpu_dtype((candle_dtype)t);
        long n = QK_K;
        float x[QK_K], back[QK_K];
        unsigned char q[2 * 292];
        for (int pat = 0; pat < 3; pat++) {
            for (long i = 0; i < n; i++) x[i] = pat == 0 ? 0.0f : pat == 1 ? 0.25f : 1e-30f * (float)(i % 7);
            tr->from_f32(x, q, n);
            tr->to_f32(q, back, n);
            int ok = 1;
            for (long i = 0; i < n; i++) ok &= isfinite(back[i]) && fabs(back[i] - x[i]) <= 0.25 * fabs(x[i]) + 1e-6;
            CHECK_MSG(ok, "%s degenerate pattern %d", tr->name, pat);
        }
    }
}

/* Non-finite inputs must not crash or hit undefined casts (UBSan build). */
static void test_non_finite_inputs(void) {
    for (int t = CANDLE_DTYPE_Q4_0; t < CANDLE_DTYPE_COUNT; t++) {
        const candle_dtype_traits *tr = cpu_dtype((candle_dtype)t);
        float x[QK_K], back[QK_K];
        unsigned char q[2 * 292];
        for (int i = 0; i < QK_K; i++) x[i] = (float)(i % 5) - 2.0f;
        x[3] = NAN;
        x[40] = INFINITY;
        x[200] = -INFINITY;
        tr->from_f32(x, q, QK_K);
        tr->to_f32(q, back, QK_K);
        CHECK(1);
    }
}

static void test_traits(void) {
    static const struct {
        candle_dtype t, dot;
        size_t size;
    } want[] = {
        {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q8_0, sizeof(block_q4_0)},
        {CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q8_1, sizeof(block_q4_1)},
        {CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q8_0, sizeof(block_q5_0)},
        {CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q8_1, sizeof(block_q5_1)},
        {CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q8_0, sizeof(block_q8_0)},
        {CANDLE_DTYPE_Q8_1, CANDLE_DTYPE_Q8_1, sizeof(block_q8_1)},
        {CANDLE_DTYPE_Q2_K, CANDLE_DTYPE_Q8_K, sizeof(block_q2_K)},
        {CANDLE_DTYPE_Q3_K, CANDLE_DTYPE_Q8_K, sizeof(block_q3_K)},
        {CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q8_K, sizeof(block_q4_K)},
        {CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_Q8_K, sizeof(block_q5_K)},
        {CANDLE_DTYPE_Q6_K, CANDLE_DTYPE_Q8_K, sizeof(block_q6_K)},
        {CANDLE_DTYPE_Q8_K, CANDLE_DTYPE_Q8_K, sizeof(block_q8_K)},
        {CANDLE_DTYPE_IQ4_NL, CANDLE_DTYPE_Q8_0, sizeof(block_iq4_nl)},
        {CANDLE_DTYPE_IQ4_XS, CANDLE_DTYPE_Q8_K, sizeof(block_iq4_xs)},
        {CANDLE_DTYPE_Q4_Z128, CANDLE_DTYPE_Q8_0, sizeof(block_q4_z128)},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const candle_dtype_traits *tr = cpu_dtype(want[k].t);
        CHECK_MSG(tr->type_size == want[k].size, "%s type_size", tr->name);
        CHECK_MSG(tr->vec_dot_type == want[k].dot, "%s vec_dot_type", tr->name);
        CHECK_MSG(tr->to_f32 && tr->from_f32 && tr->vec_dot, "%s kernels", tr->name);
    }
    for (int t = CANDLE_DTYPE_F32; t <= CANDLE_DTYPE_BF16; t++)
        CHECK(cpu_dtype((candle_dtype)t)->to_f32 && cpu_dtype((candle_dtype)t)->from_f32);
}

int main(void) {
    printf("quant kernels: %s\n", cdl_quant_uses_vnni() ? "avx2 + avx512 vnni" : cdl_quant_uses_avx2() ? "avx2" : "scalar");
    test_traits();
    static const char *deq[] = {"f16",  "bf16", "q4_0", "q4_1", "q5_0", "q5_1",   "q8_0",
                                "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"};
    for (size_t k = 0; k < sizeof deq / sizeof deq[0]; k++) test_dequant_golden(deq[k]);
    static const char *qnt[] = {"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"};
    for (size_t k = 0; k < sizeof qnt / sizeof qnt[0]; k++)
        check_quant_golden(qnt[k], cpu_dtype(candle_dtype_from_name(qnt[k]))->from_f32, "traits");
    /* from ggml's reference quantizers (scripts/make_quant_golden_ggml.sh) */
    static const char *kq[] = {"q8_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"};
    for (size_t k = 0; k < sizeof kq / sizeof kq[0]; k++)
        check_quant_golden(kq[k], cpu_dtype(candle_dtype_from_name(kq[k]))->from_f32, "traits");
    check_quant_golden_error("iq4_nl");
    check_quant_golden_error("iq4_xs");
    check_quant_golden("q8_0", cdl_q8_0_from_f32, "scalar");
    check_quant_golden("q8_1", cdl_q8_1_from_f32, "scalar");
    check_quant_golden("q8_k", cdl_q8_k_from_f32, "scalar");
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2()) {
        check_quant_golden("q8_0", cdl_q8_0_from_f32_avx2, "avx2");
        check_quant_golden("q8_1", cdl_q8_1_from_f32_avx2, "avx2");
        check_quant_golden("q8_k", cdl_q8_k_from_f32_avx2, "avx2");
    }
#endif
    static const long nbs[] = {1, 3, 7, 8, 13}; /* 8, 13: the four-block steps of the AVX2 dots, with and without a tail */
    for (size_t k = 0; k < sizeof dot_cases / sizeof dot_cases[0]; k++) {
        for (size_t j = 0; j < sizeof nbs / sizeof nbs[0]; j++) {
            test_dot(&dot_cases[k], nbs[j], 0);
            test_dot(&dot_cases[k], nbs[j], 1);
        }
        test_dot_extremes(&dot_cases[k]);
        test_dot_random_blocks(&dot_cases[k]);
    }
    test_avx2_quantizers();
    test_avx2_half_rows();
    test_avx2_z128_dequant();
    test_activation_sums();
    test_round_trip();
    test_degenerate_inputs();
    test_non_finite_inputs();
    test_ggml_bars();
    return test_done("test_quant");
}
