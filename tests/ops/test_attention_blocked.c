/* The blocked flash attention kernel (src/backend/cpu/fast_attention.c)
 * against a naive double-precision reference, at sizes that cut its blocks
 * unevenly: sequence lengths off the key tiles, the query blocks and the
 * 6-row register tiles (several tiles and blocks: the online rescale),
 * causal queries at the end of a longer KV (offset), grouped-query heads
 * (several query blocks per kv head when the group is large), decode
 * rows (the direct-score path, keys split into chunks over threads and
 * merged), short prefills cut into smaller blocks, f16/bf16 K/V, head sizes off the vector
 * width, KV cache views, [B, S, H, D] views, masks with causal, row groups
 * that straddle positions or see no key of a tile, f32 queries over f16/bf16
 * K/V. Each runs on the scalar, the AVX2 (on arm64 the NEON) and (where the CPU has it) the
 * AVX-512 tile primitives, on 1 and 2 threads (every block a task), and checks
 * that the fast kernel ran with that table and that the thread count does
 * not change a bit of the output; the AVX-512 table's output must be the
 * AVX2 table's bit for bit. The tile primitives (the online-softmax step also against
 * exp2 in double) and the primitive tables' exp_sum are also compared one
 * by one (AVX2 vs scalar; AVX-512 vs AVX2, bit for bit) on odd sizes. */
#include "backend/cpu/attention-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "core/core-impl.h"
#include "mathtest.h"

typedef struct blk_case {
    const char *what;
    int64_t b, hq, hkv, sq, skv, d, dv;
    bool causal, mask, cache_view;
    bool permuted; /* q, k, v as [B, S, H, D] tensors seen as [B, H, S, D] */
} blk_case;

static const blk_case kCases[] = {
    {"prefill off the tiles", 1, 2, 2, 130, 130, 64, 64, true, false, false, false},
    {"prefill, GQA 3", 1, 6, 2, 67, 67, 32, 32, true, false, false, false},
    {"causal with offset", 2, 4, 2, 70, 201, 16, 16, true, false, false, false},
    {"GQA 8: two head chunks of rows", 1, 8, 1, 45, 45, 8, 8, true, false, false, false},
    {"GQA 64: blocks of 4 positions", 1, 64, 1, 9, 9, 8, 8, true, false, false, false},
    {"decode, GQA 3 (direct scores)", 2, 6, 2, 1, 150, 64, 64, true, false, true, false},
    {"decode, MHA (one row)", 1, 3, 3, 1, 77, 40, 40, false, false, false, false},
    {"two positions, GQA 2 (direct)", 1, 4, 2, 2, 70, 20, 20, true, false, true, false},
    {"three positions, GQA 2 (packed)", 1, 4, 2, 3, 70, 20, 20, true, false, true, false},
    {"odd head sizes, Dv tail", 1, 3, 1, 23, 90, 13, 24, false, false, false, false},
    {"Dv below a panel", 1, 2, 2, 17, 17, 9, 5, true, false, false, false},
    {"mask with causal, offset", 1, 4, 2, 20, 100, 16, 16, true, true, true, false},
    {"mask, no causal", 2, 2, 1, 7, 65, 12, 40, false, true, false, false},
    {"decode with a mask (direct)", 1, 4, 2, 1, 90, 16, 16, true, true, true, false},
    {"two positions, mask, offset", 2, 2, 1, 2, 130, 64, 64, true, true, false, false},
    {"GQA 4: groups across positions, two blocks", 1, 8, 2, 150, 150, 24, 24, true, false, false, false},
    {"GQA 3: a second block of one position", 1, 3, 1, 129, 129, 32, 32, true, false, false, false},
    {"permuted [B, S, H, D] views, GQA 2", 2, 4, 2, 40, 40, 16, 16, true, false, false, true},
    {"no causal, long KV, GQA 5", 1, 5, 1, 31, 200, 24, 24, false, false, false, true},
    {"causal offset, two blocks, groups past the keys", 2, 6, 2, 140, 333, 16, 16, true, false, true, false},
    {"decode, GQA 4 (direct, four rows)", 1, 8, 2, 1, 300, 64, 64, true, false, true, false},
    {"three key tiles, mask, offset", 1, 4, 2, 40, 600, 16, 16, true, true, false, false},
    {"prefill over two key tiles and three blocks", 1, 2, 1, 270, 270, 16, 16, true, false, false, false},
    /* decoding blocks split their keys into chunks (merged in a second phase) */
    {"decode, long cache: 16 key chunks", 1, 6, 2, 1, 2100, 64, 64, true, false, true, false},
    {"two positions, MHA: row 0 sees no key of the last chunk", 1, 2, 2, 2, 257, 32, 32, true, false, false, false},
    {"decode, mask, three key chunks", 1, 4, 1, 1, 300, 32, 24, false, true, false, true},
    /* a short prefill of one kv head: position blocks shrink to feed both threads */
    {"Gemma 3 shape: GQA 4, D 256, 64 positions", 1, 4, 1, 64, 64, 256, 256, true, false, false, false},
};

/* out[b, h, i, :]; m: the additive mask as [Sq, Skv] or NULL. */
static void ref_attention(const blk_case *c, const double *q, const double *k, const double *v, const double *m,
                          double *out) {
    double scale = 1.0 / sqrt((double)c->d);
    double *s = malloc(sizeof(double) * (size_t)c->skv);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->hq; h++) {
            int64_t hk = h / (c->hq / c->hkv);
            for (int64_t i = 0; i < c->sq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c->skv; j++) {
                    double dot = 0;
                    bool hidden = c->causal && j > c->skv - c->sq + i; /* -inf below: skip its product */
                    for (int64_t e = 0; e < c->d && !hidden; e++)
                        dot += q[((b * c->hq + h) * c->sq + i) * c->d + e] * k[((b * c->hkv + hk) * c->skv + j) * c->d + e];
                    s[j] = dot * scale + (m ? m[i * c->skv + j] : 0);
                    if (c->causal && j > c->skv - c->sq + i) s[j] = -INFINITY;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < c->skv; j++) {
                    s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t e = 0; e < c->dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < c->skv; j++) acc += s[j] * v[((b * c->hkv + hk) * c->skv + j) * c->dv + e];
                    out[((b * c->hq + h) * c->sq + i) * c->dv + e] = sum > 0 ? acc / sum : 0;
                }
            }
        }
    free(s);
}

static candle_ctx *ctx_threads(int n) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    p.n_threads = n;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
        fprintf(stderr, "ctx_init failed: %s\n", candle_last_errmsg());
        exit(1);
    }
    return ctx;
}

/* [Sq, Skv] in [-1, 1) with -inf holes, and query row 1 fully masked. */
static candle_tensor *make_mask(candle_ctx *ctx, const blk_case *c, uint64_t seed) {
    int64_t ms[2] = {c->sq, c->skv};
    float *mv = malloc(sizeof(float) * (size_t)(c->sq * c->skv));
    for (int64_t i = 0; i < c->sq * c->skv; i++) {
        double u = mt_uniform(&seed, 0, 1);
        mv[i] = u < 0.15 ? -INFINITY : (float)(2 * u - 1);
    }
    for (int64_t j = 0; c->sq > 1 && j < c->skv; j++) mv[c->skv + j] = -INFINITY;
    candle_tensor *m = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, ms, mv);
    free(mv);
    return m;
}

/* K/V dtype when not dt (f32 queries over an f16/bf16 cache), else COUNT. */
static candle_dtype g_kv_dt = CANDLE_DTYPE_COUNT;
/* cdl_attention_rows's flags (CDL_ATTN_BF16: checked to the bf16 bound). */
static unsigned g_attn_flags = 0;

/* The output of one case (NULL on failure), checked against the reference. */
static double *run_case(const blk_case *c, candle_dtype dt, int threads, const char *isa, uint64_t seed) {
    candle_ctx *ctx = ctx_threads(threads);
    candle_dtype qt = dt, kvt = g_kv_dt != CANDLE_DTYPE_COUNT ? g_kv_dt : dt;
    int64_t extra = c->cache_view ? 7 : 0; /* a KV cache longer than its filled part */
    int64_t qs[4] = {c->b, c->hq, c->sq, c->d}, ks[4] = {c->b, c->hkv, c->skv + extra, c->d};
    int64_t vs[4] = {c->b, c->hkv, c->skv + extra, c->dv}, os[4] = {c->b, c->hq, c->sq, c->dv};
    candle_tensor *q, *k, *v;
    if (c->permuted) {
        int64_t qp[4] = {qs[0], qs[2], qs[1], qs[3]}, kp[4] = {ks[0], ks[2], ks[1], ks[3]};
        int64_t vp[4] = {vs[0], vs[2], vs[1], vs[3]};
        q = candle_transpose(ctx, mt_input(ctx, qt, 4, qp, MT_CONTIG, seed, -2, 2), 1, 2);
        k = candle_transpose(ctx, mt_input(ctx, kvt, 4, kp, MT_CONTIG, seed + 1, -2, 2), 1, 2);
        v = candle_transpose(ctx, mt_input(ctx, kvt, 4, vp, MT_CONTIG, seed + 2, -1, 1), 1, 2);
    } else {
        q = mt_input(ctx, qt, 4, qs, MT_CONTIG, seed, -2, 2);
        k = mt_input(ctx, kvt, 4, ks, MT_CONTIG, seed + 1, -2, 2);
        v = mt_input(ctx, kvt, 4, vs, MT_CONTIG, seed + 2, -1, 1);
    }
    if (c->cache_view) {
        k = candle_narrow(ctx, k, 2, 0, c->skv);
        v = candle_narrow(ctx, v, 2, 0, c->skv);
    }
    candle_tensor *m = c->mask ? make_mask(ctx, c, seed + 3) : NULL;
    candle_tensor *y = cdl_attention_rows(ctx, q, k, v, m, 0, c->causal, g_attn_flags);
    CHECK_MSG(y && mt_same_shape(y, 4, os), "%s %s %s x%d: %s", c->what, candle_dtype_name(dt), isa, threads,
              candle_errmsg(ctx));
    double *got = NULL;
    if (y) {
        CHECK_MSG(cpu_fast_kernel_for(y) == &cpu_fast_attention, "%s: not the flash kernel", c->what);
        double *qv = mt_values(q), *kv = mt_values(k), *vv = mt_values(v), *mv = m ? mt_values(m) : NULL;
        int64_t n = mt_numel(4, os);
        got = mt_values(y);
        /* two threads must match one bit for bit (check_threads): the
         * reference, the test's slowest part, is computed for one */
        double *want = threads == 1 ? malloc(sizeof(double) * (size_t)n) : NULL;
        if (want) {
            ref_attention(c, qv, kv, vv, mv, want);
            double e = mt_nmse(got, want, n);
            CHECK_MSG(e <= mt_bound(g_attn_flags & CDL_ATTN_BF16 ? CANDLE_DTYPE_BF16 : kvt), "%s %s/%s %s x%d: nmse %g", c->what, candle_dtype_name(dt),
                      candle_dtype_name(kvt), isa, threads, e);
        }
        if (c->mask && c->sq > 1) /* the fully masked query row outputs zeros */
            for (int64_t r = 0; r < c->b * c->hq; r++)
                for (int64_t e2 = 0; e2 < c->dv; e2++) CHECK(got[(r * c->sq + 1) * c->dv + e2] == 0);
        free(want);
        free(qv);
        free(kv);
        free(vv);
        free(mv);
    }
    candle_ctx_free(ctx);
    return got;
}

static void check_threads(const blk_case *c, candle_dtype dt, const char *isa, uint64_t seed) {
    double *one = run_case(c, dt, 1, isa, seed), *two = run_case(c, dt, 2, isa, seed);
    int64_t n = c->b * c->hq * c->sq * c->dv;
    CHECK_MSG(one && two && memcmp(one, two, sizeof(double) * (size_t)n) == 0, "%s %s %s: 1 and 2 threads differ",
              c->what, candle_dtype_name(dt), isa);
    free(one);
    free(two);
}

/* Every case in f32; every other one also with f16 or bf16 q/k/v, the
 * others with f32 q over f16 or bf16 K/V. The flash kernel must take the
 * isa's primitive table. */
static void test_cases(const char *isa) {
    if (!cpu_simd_force(isa)) return;
    CHECK_MSG(!strcmp(cpu_attn_ops_get()->name, isa), "%s: the flash kernel takes the %s table", isa,
              cpu_attn_ops_get()->name);
    for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
        check_threads(&kCases[i], CANDLE_DTYPE_F32, isa, 100 + 10 * i);
        candle_dtype half = i % 4 < 2 ? CANDLE_DTYPE_F16 : CANDLE_DTYPE_BF16;
        if (i % 2) {
            check_threads(&kCases[i], half, isa, 105 + 10 * i);
        } else {
            g_kv_dt = half;
            check_threads(&kCases[i], CANDLE_DTYPE_F32, isa, 107 + 10 * i);
            g_kv_dt = CANDLE_DTYPE_COUNT;
        }
    }
}

/* The AVX-512 table does the AVX2 table's arithmetic lane for lane: the
 * whole kernel's output is the same bits (2 threads, no reference). */
static void test_avx512_same_as_avx2(void) {
    if (!cpu_simd_force("avx512")) return;
    for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
        const blk_case *c = &kCases[i];
        for (int mixed = 0; mixed < 2; mixed++) {
            candle_dtype dt = mixed || i % 3 == 0 ? CANDLE_DTYPE_F32
                              : i % 3 == 1        ? CANDLE_DTYPE_F16
                                                  : CANDLE_DTYPE_BF16;
            g_kv_dt = mixed ? (i % 2 ? CANDLE_DTYPE_BF16 : CANDLE_DTYPE_F16) : CANDLE_DTYPE_COUNT;
            cpu_simd_force("avx2");
            double *a = run_case(c, dt, 2, "avx2", 300 + 10 * i + mixed);
            cpu_simd_force("avx512");
            double *b = run_case(c, dt, 2, "avx512", 300 + 10 * i + mixed);
            int64_t n = c->b * c->hq * c->sq * c->dv;
            CHECK_MSG(a && b && memcmp(a, b, sizeof(double) * (size_t)n) == 0, "%s %s%s: avx512 differs from avx2",
                      c->what, candle_dtype_name(dt), mixed ? " (f16/bf16 K/V)" : "");
            free(a);
            free(b);
        }
    }
    g_kv_dt = CANDLE_DTYPE_COUNT;
}

/* bf16 products allowed (CDL_ATTN_BF16) on f32 q, k, v: where the table
 * has the bf16 dot products (AVX512_BF16), every packed block takes them:
 * the output is within the bf16 bound of the reference, the same bits on
 * 1 and 2 threads, and not the f32 products' (the path ran); the direct
 * blocks of decoding (at most 4 rows) keep the f32 products' bits. On
 * other tables the flag changes no bit. */
static void test_bf16_products(const char *isa) {
    if (!cpu_simd_force(isa)) return;
    bool dots = cpu_simd_get()->gemm_bf16_ukr2 != NULL;
    int taken = 0;
    for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
        const blk_case *c = &kCases[i];
        uint64_t seed = 500 + 10 * i;
        g_attn_flags = CDL_ATTN_BF16;
        check_threads(c, CANDLE_DTYPE_F32, isa, seed);
        double *b = run_case(c, CANDLE_DTYPE_F32, 2, isa, seed);
        g_attn_flags = 0;
        double *a = run_case(c, CANDLE_DTYPE_F32, 2, isa, seed);
        int64_t n = c->b * c->hq * c->sq * c->dv;
        bool same = a && b && memcmp(a, b, sizeof(double) * (size_t)n) == 0;
        bool direct = c->sq * (c->hq / c->hkv) <= 4;
        CHECK_MSG(a && b && same == (!dots || direct), "%s %s: bf16 products %s", c->what, isa,
                  same ? "not taken" : "taken where they must not be");
        taken += !same;
        free(a);
        free(b);
    }
    printf("%s: bf16 products in %d of %zu cases%s\n", isa, taken, sizeof kCases / sizeof kCases[0],
           dots ? "" : " (no bf16 dot products in this table)");
}

/* ---- the tile primitives, AVX2 against scalar ---- */

#if defined(__x86_64__)
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

static void test_primitives_once(candle_dtype kt, int64_t r, int64_t d, int64_t nk, int64_t dv, uint64_t seed) {
    const cpu_attn_ops *x = &cpu_attn_avx2, *ref = &cpu_attn_scalar;
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR, lds = 64, ldo = (dv + ATTN_NR - 1) / ATTN_NR * ATTN_NR;
    size_t esz = kt == CANDLE_DTYPE_F32 ? 4 : 2;
    int64_t sk = d + 3; /* keys a few elements apart: not a dense matrix */
    float *kf = malloc(sizeof(float) * (size_t)(nk * sk)), *q = malloc(sizeof(float) * (size_t)(r * d));
    char *k = malloc(esz * (size_t)(nk * sk));
    float *kt1 = malloc(sizeof(float) * (size_t)(nkp * d)), *kt2 = malloc(sizeof(float) * (size_t)(nkp * d));
    float *s1 = calloc((size_t)(r * lds), sizeof(float)), *s2 = calloc((size_t)(r * lds), sizeof(float));
    float *s3 = calloc((size_t)(r * lds), sizeof(float));
    fill(kf, nk * sk, seed);
    fill(q, r * d, seed + 1);
    cpu_dtype(kt)->from_f32(kf, k, nk * sk);
    x->pack_kt(kt, k, sk * (int64_t)esz, nk, d, kt1);
    ref->pack_kt(kt, k, sk * (int64_t)esz, nk, d, kt2);
    CHECK_MSG(memcmp(kt1, kt2, sizeof(float) * (size_t)(nkp * d)) == 0, "pack_kt %s nk %lld d %lld",
              candle_dtype_name(kt), (long long)nk, (long long)d);
    x->scores(q, d, r, d, kt1, nk, s1, lds);
    ref->scores(q, d, r, d, kt2, nk, s2, lds);
    x->scores_rows(q, d, r, d, kt, k, sk * (int64_t)esz, nk, s3, lds);
    /* f32 sums in another order: one cancelling dot product may lose ~1e-5 */
    double e1 = 0, e2 = 0;
    for (int64_t i = 0; i < r; i++) {
        e1 += rel_err(s1 + i * lds, s2 + i * lds, nk);
        e2 += rel_err(s3 + i * lds, s2 + i * lds, nk);
    }
    CHECK_MSG(e1 < 1e-9 && e2 < 1e-9, "scores r %lld d %lld nk %lld: %g %g", (long long)r, (long long)d,
              (long long)nk, e1, e2);
    /* accum: p from the scores, v rows with a stride, o with padding */
    int64_t ldv = dv + 5;
    float *v = malloc(sizeof(float) * (size_t)(nk * ldv)), *corr = malloc(sizeof(float) * (size_t)r);
    float *o1 = malloc(sizeof(float) * (size_t)(r * ldo)), *o2 = malloc(sizeof(float) * (size_t)(r * ldo));
    fill(v, nk * ldv, seed + 2);
    fill(corr, r, seed + 3);
    fill(o1, r * ldo, seed + 4);
    memcpy(o2, o1, sizeof(float) * (size_t)(r * ldo));
    x->accum(s2, lds, r, corr, v, ldv, nk, dv, o1, ldo);
    ref->accum(s2, lds, r, corr, v, ldv, nk, dv, o2, ldo);
    double e3 = 0;
    for (int64_t i = 0; i < r; i++) e3 += rel_err(o1 + i * ldo, o2 + i * ldo, dv);
    CHECK_MSG(e3 < 1e-9, "accum r %lld nk %lld dv %lld: %g", (long long)r, (long long)nk, (long long)dv, e3);
    float mx1 = x->max(s2, nk), mx2 = ref->max(s2, nk);
    CHECK(mx1 == mx2);
    CHECK(fabs(x->sum(s2, nk) - ref->sum(s2, nk)) <= 1e-5 * (1 + fabs(ref->sum(s2, nk))));
    CHECK(x->max(s2, 0) == -INFINITY && x->sum(s2, 0) == 0);
    x->sub(s1, nk, mx1);
    ref->sub(s2, nk, mx2);
    CHECK(rel_err(s1, s2, nk) < 1e-11);
    free(kf), free(q), free(k), free(kt1), free(kt2), free(s1), free(s2), free(s3), free(v), free(corr), free(o1),
        free(o2);
}

/* The online-softmax step of the primitive tables: exp(x - m) and its sum,
 * AVX2 (four-vector steps, single vectors, tail) against the scalar expf;
 * -inf scores give 0. Where every x - m <= 0 (scores minus their maximum)
 * the AVX2 table takes a shorter exp: it must match the table's unary exp
 * bit for bit down to -87 (and give at most a denormal's worth below). */
static void test_exp_sum(void) {
    float x[70], y[70], z[70];
    uint64_t seed = 3;
    for (int n = 0; n <= 70; n += n < 9 ? 1 : 7) {
        for (int pos = 0; pos < 2; pos++) {
            float m = pos ? 1.5f : 2.0f; /* x < 2: all shifted values negative */
            for (int j = 0; j < n; j++) x[j] = j % 5 == 2 ? -INFINITY : (float)mt_uniform(&seed, -30, 2);
            memcpy(y, x, sizeof x);
            memcpy(z, x, sizeof x);
            float sa = cpu_simd_avx2.exp_sum(y, n, m), ss = cpu_simd_scalar.exp_sum(z, n, m);
            CHECK_MSG(fabsf(sa - ss) <= 1e-6f * ss, "exp_sum n %d: %g vs %g", n, sa, ss);
            for (int j = 0; j < n; j++)
                CHECK_MSG(fabsf(y[j] - z[j]) <= 2e-7f * z[j] && (x[j] != -INFINITY || y[j] == 0), "exp_sum n %d [%d]", n,
                          j);
        }
    }
    static const double none[2] = {0, 0};
    for (int j = 0; j < 70; j++) x[j] = j == 69 ? -87.0f : (float)mt_uniform(&seed, -87, 0);
    memcpy(y, x, sizeof x);
    cpu_simd_avx2.exp_sum(y, 70, 0.0f);
    cpu_simd_avx2.unary(CANDLE_OP_EXP, x, z, 70, none);
    CHECK_MSG(memcmp(y, z, sizeof y) == 0, "exp_sum differs from the unary exp on [-87, 0]");
    for (int j = 0; j < 64; j++) x[j] = (float)mt_uniform(&seed, -120, -87.4);
    cpu_simd_avx2.exp_sum(x, 64, 0.0f);
    for (int j = 0; j < 64; j++) CHECK(x[j] >= 0 && x[j] < 1.2e-38f);
}

/* The online-softmax step (scores in log2 units), AVX2 against scalar
 * exp2f and the AVX2 probabilities against exp2 in double: row counts
 * around the 6-row groups and the 8-lane blocks, tails off the 8 and 16
 * columns, -inf scores, a row that has seen no key (m = -inf, all -inf),
 * a row that sees none in this tile but did before, and scores far below
 * the maximum (2^-126 and under: 0 or a true tiny value). */
static void test_softmax_once(int64_t r, int64_t nk, uint64_t seed) {
    enum { LDS = 72 };
    float s1[13 * LDS] = {0}, s2[13 * LDS], m1[13] = {0}, m2[13], l1[13] = {0}, l2[13], c1[13], c2[13];
    double x[13 * LDS];
    for (int64_t i = 0; i < r; i++) {
        m1[i] = i % 3 == 0 ? -INFINITY : (float)mt_uniform(&seed, -4, 4);
        l1[i] = m1[i] == -INFINITY ? 0.0f : (float)mt_uniform(&seed, 0.5, 20);
        for (int64_t j = 0; j < LDS; j++) {
            double u = mt_uniform(&seed, 0, 1);
            s1[i * LDS + j] = u < 0.15 ? -INFINITY : u < 0.2 ? (float)mt_uniform(&seed, -300, -100)
                                                             : (float)mt_uniform(&seed, -20, 6);
            if (i == 1 || i == 2) s1[i * LDS + j] = -INFINITY;
        }
    }
    if (r > 1) m1[1] = -INFINITY, l1[1] = 0.0f; /* row 1: no key seen at all */
    for (int64_t i = 0; i < r * LDS; i++) x[i] = s1[i];
    memcpy(s2, s1, sizeof s1);
    memcpy(m2, m1, sizeof m1);
    memcpy(l2, l1, sizeof l1);
    cpu_attn_avx2.softmax(s1, LDS, r, nk, m1, l1, c1);
    cpu_attn_scalar.softmax(s2, LDS, r, nk, m2, l2, c2);
    for (int64_t i = 0; i < r; i++) {
        CHECK_MSG(m1[i] == m2[i] || (isnan(m1[i]) && isnan(m2[i])), "softmax r %lld nk %lld: m[%lld] %g vs %g",
                  (long long)r, (long long)nk, (long long)i, m1[i], m2[i]);
        CHECK_MSG(fabsf(c1[i] - c2[i]) <= 3e-7f * c2[i] && fabsf(l1[i] - l2[i]) <= 1e-6f * l2[i],
                  "softmax r %lld nk %lld: row %lld corr %g vs %g, l %g vs %g", (long long)r, (long long)nk,
                  (long long)i, c1[i], c2[i], l1[i], l2[i]);
        if (r > 1 && i == 1) CHECK(m1[i] == -INFINITY && l1[i] == 0 && c1[i] == 0);
        for (int64_t j = 0; j < nk; j++) {
            float a = s1[i * LDS + j];
            /* the kernel's argument: the difference rounded to f32 */
            double want = m1[i] == -INFINITY ? 0 : exp2((double)((float)x[i * LDS + j] - m1[i]));
            /* below 2^-126 the AVX2 exp2 may give 0 (no denormals) */
            bool ok = fabs(a - want) <= 2.5e-7 * want || (want < 1.2e-38 && a >= 0 && a < 1.2e-38f);
            CHECK_MSG(ok && fabsf(a - s2[i * LDS + j]) <= 4e-7f * s2[i * LDS + j] + 1.2e-38f,
                      "softmax r %lld nk %lld [%lld, %lld]: %g vs %g (scalar %g)", (long long)r, (long long)nk,
                      (long long)i, (long long)j, a, want, s2[i * LDS + j]);
        }
    }
}

static void test_softmax(void) {
    static const int64_t rs[] = {1, 2, 5, 6, 7, 8, 9, 13}, nks[] = {1, 7, 8, 15, 16, 17, 33, 48, 64};
    uint64_t seed = 11;
    for (size_t a = 0; a < sizeof rs / sizeof *rs; a++)
        for (size_t b = 0; b < sizeof nks / sizeof *nks; b++, seed += 3) test_softmax_once(rs[a], nks[b], seed);
}

static void test_primitives(void) {
    static const int64_t rs[] = {1, 2, 5, 6, 7, 13}, ds[] = {1, 8, 13, 64}, nks[] = {1, 3, 15, 17, 64};
    static const int64_t dvs[] = {5, 16, 24, 40};
    static const candle_dtype kts[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    if (!cpu_simd_force("avx2")) return;
    test_exp_sum();
    test_softmax();
    uint64_t seed = 7;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 5; c++, seed += 5) test_primitives_once(kts[(a + c) % 3], rs[a], ds[b], nks[c], dvs[(a + b) % 4], seed);
}

/* The AVX-512 products and softmax step against the AVX2 table's, bit for
 * bit: row counts around the 6-row groups, key counts around the 16-key
 * panels and the 4-panel tiles, d and dv off 16 and 64, pointers off the
 * 64-byte lines (one float over). */
static void test_avx512_prims_once(int64_t r, int64_t d, int64_t nk, int64_t dv, uint64_t seed) {
    const cpu_attn_ops *x = &cpu_attn_avx512, *ref = &cpu_attn_avx2;
    int64_t nkp = (nk + ATTN_NR - 1) / ATTN_NR * ATTN_NR, lds = nkp + 3;
    int64_t ldo = (dv + ATTN_NR - 1) / ATTN_NR * ATTN_NR + 1;
    float *q = malloc(sizeof(float) * (size_t)(r * d + 1)), *kb = malloc(sizeof(float) * (size_t)(nkp * d + 1));
    float *s1 = calloc((size_t)(r * lds + 1), sizeof(float)), *s2 = calloc((size_t)(r * lds + 1), sizeof(float));
    float *kt = kb + 1, *q1 = q + 1;
    fill(q, r * d + 1, seed);
    fill(kb, nkp * d + 1, seed + 1);
    x->scores(q1, d, r, d, kt, nk, s1 + 1, lds);
    ref->scores(q1, d, r, d, kt, nk, s2 + 1, lds);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(s1 + 1 + i * lds, s2 + 1 + i * lds, sizeof(float) * (size_t)nkp) == 0,
                  "avx512 scores r %lld d %lld nk %lld: row %lld differs", (long long)r, (long long)d, (long long)nk,
                  (long long)i);
    /* softmax: scores scaled up, some -inf, NaN in one row, one row that
     * has seen no key (all -inf), one that saw keys before but none here */
    float *m1 = malloc(sizeof(float) * (size_t)r), *m2 = malloc(sizeof(float) * (size_t)r);
    float *l1 = malloc(sizeof(float) * (size_t)r), *l2 = malloc(sizeof(float) * (size_t)r);
    float *c1 = malloc(sizeof(float) * (size_t)r), *c2 = malloc(sizeof(float) * (size_t)r);
    uint64_t st = seed + 7;
    for (int64_t i = 0; i < r; i++) {
        m1[i] = i % 4 == 0 ? -INFINITY : (float)mt_uniform(&st, -3, 3);
        l1[i] = m1[i] == -INFINITY ? 0.0f : (float)mt_uniform(&st, 0.5, 9);
        for (int64_t j = 0; j < nk; j++) {
            float *e = s1 + 1 + i * lds + j;
            double u = mt_uniform(&st, 0, 1);
            *e = u < 0.1 ? -INFINITY : *e * 4;
            if ((i == 1 && m1[i] == -INFINITY) || i == 2) *e = -INFINITY;
            if (i == 3 && j == nk / 2) *e = NAN;
        }
    }
    if (r > 1) m1[1] = -INFINITY, l1[1] = 0;
    memcpy(s2, s1, sizeof(float) * (size_t)(r * lds + 1));
    memcpy(m2, m1, sizeof(float) * (size_t)r);
    memcpy(l2, l1, sizeof(float) * (size_t)r);
    x->softmax(s1 + 1, lds, r, nk, m1, l1, c1);
    ref->softmax(s2 + 1, lds, r, nk, m2, l2, c2);
    bool same = memcmp(m1, m2, sizeof(float) * (size_t)r) == 0 && memcmp(l1, l2, sizeof(float) * (size_t)r) == 0 &&
                memcmp(c1, c2, sizeof(float) * (size_t)r) == 0;
    for (int64_t i = 0; i < r; i++)
        same = same && memcmp(s1 + 1 + i * lds, s2 + 1 + i * lds, sizeof(float) * (size_t)nk) == 0;
    CHECK_MSG(same, "avx512 softmax r %lld nk %lld differs", (long long)r, (long long)nk);
    /* accum: p from the softmax, v rows with a stride off the lines */
    int64_t ldv = dv + 3;
    float *vb = malloc(sizeof(float) * (size_t)(nk * ldv + 1)), *o1 = malloc(sizeof(float) * (size_t)(r * ldo + 1));
    float *o2 = malloc(sizeof(float) * (size_t)(r * ldo + 1));
    fill(vb, nk * ldv + 1, seed + 2);
    fill(o1, r * ldo + 1, seed + 3);
    memcpy(o2, o1, sizeof(float) * (size_t)(r * ldo + 1));
    x->accum(s2 + 1, lds, r, c2, vb + 1, ldv, nk, dv, o1 + 1, ldo);
    ref->accum(s2 + 1, lds, r, c2, vb + 1, ldv, nk, dv, o2 + 1, ldo);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(o1 + 1 + i * ldo, o2 + 1 + i * ldo, sizeof(float) * (size_t)dv) == 0,
                  "avx512 accum r %lld nk %lld dv %lld: row %lld differs", (long long)r, (long long)nk, (long long)dv,
                  (long long)i);
    free(q), free(kb), free(s1), free(s2), free(m1), free(m2), free(l1), free(l2), free(c1), free(c2), free(vb),
        free(o1), free(o2);
}

/* Decoding primitives of the AVX-512 table against the AVX2 table's, bit
 * for bit, straight from stored rows (f32, f16, bf16; keys and values
 * further apart than a row, pointers off the lines):
 *   scores_rows: up to 4 rows a pass and 4 keys a group on zmm against
 *     the AVX2 rows (d a multiple of 16: the same summation order; else
 *     the AVX2 kernel itself);
 *   accum_rows: the value rows converted in registers against the AVX2
 *     accum on the rows converted first (AVX2 has no accum_rows);
 *   both on q8_0 rows (test_avx512_q8_0_once). */
static void test_avx512_rows_once(candle_dtype t, int64_t r, int64_t d, int64_t nk, int64_t dv, uint64_t seed) {
    const cpu_attn_ops *x = &cpu_attn_avx512, *ref = &cpu_attn_avx2;
    size_t esz = cpu_dtype(t)->type_size;
    int64_t sk = d + 5, sv = dv + 7, lds = nk + 3, ldo = (dv + ATTN_NR - 1) / ATTN_NR * ATTN_NR + 1;
    float *q = malloc(sizeof(float) * (size_t)(r * d + 1)), *f = malloc(sizeof(float) * (size_t)(nk * (sk + sv)));
    char *k = malloc(esz * (size_t)(nk * sk + 1)), *v = malloc(esz * (size_t)(nk * sv + 1));
    float *s1 = calloc((size_t)(r * lds), sizeof(float)), *s2 = calloc((size_t)(r * lds), sizeof(float));
    fill(q, r * d + 1, seed);
    fill(f, nk * (sk + sv), seed + 1);
    cpu_dtype(t)->from_f32(f, k + esz, nk * sk);
    cpu_dtype(t)->from_f32(f + nk * sk, v + esz, nk * sv);
    x->scores_rows(q + 1, d, r, d, t, k + esz, sk * (int64_t)esz, nk, s1, lds);
    ref->scores_rows(q + 1, d, r, d, t, k + esz, sk * (int64_t)esz, nk, s2, lds);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(s1 + i * lds, s2 + i * lds, sizeof(float) * (size_t)nk) == 0,
                  "avx512 scores_rows %s r %lld d %lld nk %lld: row %lld differs", candle_dtype_name(t), (long long)r,
                  (long long)d, (long long)nk, (long long)i);
    float *corr = malloc(sizeof(float) * (size_t)r), *vf = malloc(sizeof(float) * (size_t)(nk * dv));
    float *o1 = malloc(sizeof(float) * (size_t)(r * ldo)), *o2 = malloc(sizeof(float) * (size_t)(r * ldo));
    fill(corr, r, seed + 2);
    fill(o1, r * ldo, seed + 3);
    memcpy(o2, o1, sizeof(float) * (size_t)(r * ldo));
    for (int64_t j = 0; j < nk; j++) cpu_dtype(t)->to_f32(v + esz + (size_t)(j * sv) * esz, vf + j * dv, dv);
    x->accum_rows(s1, lds, r, corr, t, v + esz, sv * (int64_t)esz, nk, dv, o1, ldo);
    ref->accum(s1, lds, r, corr, vf, dv, nk, dv, o2, ldo);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(o1 + i * ldo, o2 + i * ldo, sizeof(float) * (size_t)dv) == 0,
                  "avx512 accum_rows %s r %lld nk %lld dv %lld: row %lld differs", candle_dtype_name(t), (long long)r,
                  (long long)nk, (long long)dv, (long long)i);
    free(q), free(f), free(k), free(v), free(s1), free(s2), free(corr), free(vf), free(o1), free(o2);
}

/* q8_0 rows (a quantized KV cache) read by the AVX-512 decoding primitives
 * against the AVX2 ones on the same rows converted to f32: the same bits
 * (the dequantized values are exact products). Rows a block further apart
 * than their length. */
static void test_avx512_q8_0_once(int64_t r, int64_t d, int64_t nk, int64_t dv, uint64_t seed) {
    const cpu_attn_ops *x = &cpu_attn_avx512, *ref = &cpu_attn_avx2;
    const candle_dtype_traits *tr = cpu_dtype(CANDLE_DTYPE_Q8_0);
    int64_t sk = (int64_t)candle_dtype_row_size(CANDLE_DTYPE_Q8_0, d + 32);
    int64_t sv = (int64_t)candle_dtype_row_size(CANDLE_DTYPE_Q8_0, dv + 32);
    int64_t lds = nk + 3, ldo = (dv + ATTN_NR - 1) / ATTN_NR * ATTN_NR + 1;
    float *q = malloc(sizeof(float) * (size_t)(r * d)), *row = malloc(sizeof(float) * (size_t)(d + dv));
    float *kf = malloc(sizeof(float) * (size_t)(nk * d)), *vf = malloc(sizeof(float) * (size_t)(nk * dv));
    char *k = malloc((size_t)(nk * sk)), *v = malloc((size_t)(nk * sv));
    float *s1 = calloc((size_t)(r * lds), sizeof(float)), *s2 = calloc((size_t)(r * lds), sizeof(float));
    fill(q, r * d, seed);
    for (int64_t j = 0; j < nk; j++) {
        fill(row, d + dv, seed + 10 + (uint64_t)j);
        tr->from_f32(row, k + j * sk, d);
        tr->from_f32(row + d, v + j * sv, dv);
        tr->to_f32(k + j * sk, kf + j * d, d);
        tr->to_f32(v + j * sv, vf + j * dv, dv);
    }
    x->scores_rows(q, d, r, d, CANDLE_DTYPE_Q8_0, k, sk, nk, s1, lds);
    ref->scores_rows(q, d, r, d, CANDLE_DTYPE_F32, (const char *)kf, d * 4, nk, s2, lds);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(s1 + i * lds, s2 + i * lds, sizeof(float) * (size_t)nk) == 0,
                  "avx512 scores_rows q8_0 r %lld d %lld nk %lld: row %lld differs", (long long)r, (long long)d,
                  (long long)nk, (long long)i);
    float *corr = malloc(sizeof(float) * (size_t)r);
    float *o1 = malloc(sizeof(float) * (size_t)(r * ldo)), *o2 = malloc(sizeof(float) * (size_t)(r * ldo));
    fill(corr, r, seed + 2);
    fill(o1, r * ldo, seed + 3);
    memcpy(o2, o1, sizeof(float) * (size_t)(r * ldo));
    x->accum_rows(s1, lds, r, corr, CANDLE_DTYPE_Q8_0, v, sv, nk, dv, o1, ldo);
    ref->accum(s1, lds, r, corr, vf, dv, nk, dv, o2, ldo);
    for (int64_t i = 0; i < r; i++)
        CHECK_MSG(memcmp(o1 + i * ldo, o2 + i * ldo, sizeof(float) * (size_t)dv) == 0,
                  "avx512 accum_rows q8_0 r %lld nk %lld dv %lld: row %lld differs", (long long)r, (long long)nk,
                  (long long)dv, (long long)i);
    free(q), free(row), free(kf), free(vf), free(k), free(v), free(s1), free(s2), free(corr), free(o1), free(o2);
}

static void test_avx512_rows(void) {
    static const candle_dtype ts[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
    static const int64_t rs[] = {1, 2, 3, 4, 5, 8, 9}, ds[] = {13, 16, 64, 80, 128};
    static const int64_t nks[] = {1, 3, 4, 5, 7, 128, 130}, dvs[] = {5, 16, 64, 72, 128};
    if (!cpu_simd_force("avx512")) return;
    uint64_t seed = 71;
    for (size_t a = 0; a < sizeof ts / sizeof *ts; a++)
        for (size_t b = 0; b < sizeof rs / sizeof *rs; b++)
            for (size_t c = 0; c < sizeof ds / sizeof *ds; c++)
                for (size_t e = 0; e < sizeof nks / sizeof *nks; e++, seed += 3)
                    test_avx512_rows_once(ts[a], rs[b], ds[c], nks[e], dvs[(b + c + e) % 5], seed);
    static const int64_t qds[] = {32, 64, 128}, qdvs[] = {32, 64, 96, 128};
    for (size_t b = 0; b < sizeof rs / sizeof *rs; b++)
        for (size_t c = 0; c < 3; c++)
            for (size_t e = 0; e < sizeof nks / sizeof *nks; e++, seed += 3)
                test_avx512_q8_0_once(rs[b], qds[c], nks[e], qdvs[(b + c + e) % 4], seed);
}

static void test_primitives_avx512(void) {
    static const int64_t rs[] = {1, 2, 5, 6, 7, 12, 13}, ds[] = {1, 13, 16, 64, 80};
    static const int64_t nks[] = {1, 15, 16, 17, 48, 64, 65, 100, 256}, dvs[] = {5, 16, 40, 64, 72, 130};
    if (!cpu_simd_force("avx512")) return;
    uint64_t seed = 29;
    for (size_t a = 0; a < sizeof rs / sizeof *rs; a++)
        for (size_t b = 0; b < sizeof ds / sizeof *ds; b++)
            for (size_t c = 0; c < sizeof nks / sizeof *nks; c++, seed += 5)
                test_avx512_prims_once(rs[a], ds[b], nks[c], dvs[(a + b + c) % 6], seed);
}
#else
static void test_primitives(void) {}
static void test_primitives_avx512(void) {}
static void test_avx512_rows(void) {}
#endif

/* Attention of a step of k positions with K/V [1, hkv, skv, d] (a
 * session's cache) or [1, skv, hkv, d] viewed as such (a pool's gathered
 * rows); NULL when it fails. */
static double *step_values(candle_ctx *ctx, candle_tensor *q, candle_dtype t, int64_t hkv, int64_t skv, int64_t d,
                           bool pos_major, uint64_t seed, candle_tensor **kk, candle_tensor **v) {
    int64_t ks[4] = {1, hkv, skv, d}, kp[4] = {1, skv, hkv, d};
    *kk = mt_input(ctx, t, 4, pos_major ? kp : ks, MT_CONTIG, seed + 1, -2, 2);
    *v = mt_input(ctx, t, 4, pos_major ? kp : ks, MT_CONTIG, seed + 2, -1, 1);
    if (pos_major) {
        *kk = candle_transpose(ctx, *kk, 1, 2);
        *v = candle_transpose(ctx, *v, 1, 2);
    }
    return mt_values(cdl_attention_rows(ctx, q, *kk, *v, NULL, 0, true, true));
}

/* A row step of k positions (verifying k - 1 drafted tokens) gives
 * each row the bits of the one-position step at its position: the step
 * whose K/V end there; and the same bits whether the K/V rows are
 * head-major or position-major. Kv heads of up to 4 query heads (the
 * direct scores), caches shorter and longer than a key chunk,
 * f32/f16/q8_0/q4_0 K/V, 1 and 2 threads; and a step that sees too many
 * heads per kv head (the packed scores in both) also. */
static void test_step_invariance(const char *isa) {
    static const struct { int64_t hq, hkv, k, skv, d; } cs[] = {
        {3, 1, 5, 60, 64},  {3, 1, 5, 130, 64},  {4, 2, 9, 300, 32},  {2, 2, 17, 260, 64},
        {9, 3, 17, 400, 64}, {6, 1, 3, 140, 32}, {1, 1, 2, 129, 32},  {3, 1, 8, 2100, 64},
        {9, 3, 2, 37, 64},
    };
    static const candle_dtype kvts[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_0};
    if (!cpu_simd_force(isa)) return;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t t = 0; t < sizeof kvts / sizeof kvts[0]; t++)
            for (int threads = 1; threads <= 2; threads++)
                for (int pm = 0; pm < 2; pm++) {
                    candle_ctx *ctx = ctx_threads(threads);
                    int64_t hq = cs[i].hq, hkv = cs[i].hkv, k = cs[i].k, skv = cs[i].skv, d = cs[i].d;
                    int64_t qs[4] = {1, hq, k, d};
                    uint64_t seed = 900 + 10 * i + (uint64_t)t;
                    candle_tensor *q = mt_input(ctx, CANDLE_DTYPE_F32, 4, qs, MT_CONTIG, seed, -2, 2), *kk, *v;
                    double *all = step_values(ctx, q, kvts[t], hkv, skv, d, pm, seed, &kk, &v);
                    bool same = all != NULL;
                    if (pm) { /* the same values head-major */
                        double *hm = mt_values(cdl_attention_rows(ctx, q, candle_contiguous(ctx, kk),
                                                                  candle_contiguous(ctx, v), NULL, 0, true, true));
                        same = same && hm && !memcmp(hm, all, sizeof(double) * (size_t)(hq * k * d));
                        free(hm);
                    }
                    for (int64_t r = 0; r < k && same; r++) {
                        int64_t n = skv - k + r + 1;
                        double *one = mt_values(candle_attention(ctx, candle_narrow(ctx, q, 2, r, 1),
                                                                 candle_narrow(ctx, kk, 2, 0, n),
                                                                 candle_narrow(ctx, v, 2, 0, n), NULL, 0, true));
                        for (int64_t h = 0; one && h < hq; h++)
                            same = same && memcmp(one + h * d, all + (h * k + r) * d, sizeof(double) * (size_t)d) == 0;
                        same = same && one;
                        free(one);
                    }
                    CHECK_MSG(same, "%s: %lld heads over %lld, %lld positions at %lld keys, %s K/V %s x%d: a row "
                              "differs from its one-position step or from the other layout", isa, (long long)hq,
                              (long long)hkv, (long long)k, (long long)skv, candle_dtype_name(kvts[t]),
                              pm ? "position-major" : "head-major", threads);
                    free(all);
                    candle_ctx_free(ctx);
                }
}

int main(void) {
    cpu_set_always_parallel(true);
    test_cases("scalar");
    test_cases("avx2");
    test_cases("avx512"); /* where the CPU has AVX-512 F/BW/VL */
    test_cases("neon");   /* aarch64 */
    test_avx512_same_as_avx2();
    test_bf16_products("avx2");
    test_bf16_products("avx512");
    test_primitives();
    test_primitives_avx512();
    test_avx512_rows();
    test_step_invariance("scalar");
    test_step_invariance("avx2");
    test_step_invariance("avx512");
    test_step_invariance("neon");
    cpu_simd_force("auto");
    return test_done("test_attention_blocked");
}
