/* rope against the direct formula: both pairings, partial rotary, explicit
 * positions, freq_scale, per-pair freq factors, YaRN, dtypes and layouts of
 * x [..., S, H, D]. */
#include "mathtest.h"

static const candle_dtype float_types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

typedef struct shape_case {
    int rank;
    int64_t shape[4];
} shape_case;

static const shape_case shapes[] = {
    {3, {5, 2, 8}}, {4, {2, 3, 3, 6}}, {3, {1, 1, 2}}, {4, {1, 7, 2, 10}},
};

/* YaRN's blend of pair i, from the paper's (and transformers') form: the
 * share of the extrapolated (unscaled) angle, 1 below the fast end of the
 * ramp and 0 past its slow end. */
static double yarn_extrap_share(const candle_rope_params *p, int64_t nd, int64_t i) {
    double fast = p->beta_fast ? p->beta_fast : 32, slow = p->beta_slow ? p->beta_slow : 1;
    double lo = floor(nd * log(p->n_ctx_orig / (fast * 2 * 3.14159265358979323846)) / (2 * log(p->freq_base)));
    double hi = ceil(nd * log(p->n_ctx_orig / (slow * 2 * 3.14159265358979323846)) / (2 * log(p->freq_base)));
    lo = lo < 0 ? 0 : lo;
    hi = hi > nd - 1 ? nd - 1 : hi;
    if (lo == hi) hi += 0.001;
    double y = ((double)i - lo) / (hi - lo);
    return (1 - (y < 0 ? 0 : y > 1 ? 1 : y)) * p->ext_factor;
}

/* out = rope(x) for x [rows = outer * S * H, D], written from the definition:
 * pair i rotates by pos * scale * base^(-2i / n_dims) / ff_i, blended with
 * the unscaled angle by YaRN, cos and sin times the magnitude. ff: the
 * factors' values or NULL. */
static void rope_ref(const double *x, int64_t outer, int64_t S, int64_t H, int64_t D,
                     const candle_rope_params *p, const int32_t *positions, const float *ff,
                     double *out) {
    int64_t nd = p->n_dims ? p->n_dims : D;
    double m = p->attn_factor ? p->attn_factor : 1;
    if (p->ext_factor) m *= 1 + 0.1 * log(1 / p->freq_scale);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                const double *xr = x + ((o * S + s) * H + h) * D;
                double *yr = out + ((o * S + s) * H + h) * D;
                double pos = positions ? positions[s] : (double)(p->pos_offset + s);
                for (int64_t k = 0; k < D; k++) yr[k] = xr[k];
                for (int64_t i = 0; i < nd / 2; i++) {
                    double ex = pos * pow(p->freq_base, -2.0 * (double)i / (double)nd) / (ff ? ff[i] : 1);
                    double th = p->freq_scale * ex;
                    if (p->ext_factor) {
                        double r = yarn_extrap_share(p, nd, i);
                        th = th * (1 - r) + ex * r;
                    }
                    int64_t a = p->mode == CANDLE_ROPE_HALF ? i : 2 * i;
                    int64_t b = p->mode == CANDLE_ROPE_HALF ? i + nd / 2 : 2 * i + 1;
                    double c = m * cos(th), sn = m * sin(th);
                    yr[a] = xr[a] * c - xr[b] * sn;
                    yr[b] = xr[a] * sn + xr[b] * c;
                }
            }
}

static void check_rope_case(candle_ctx *ctx, candle_dtype dt, const shape_case *sc, mt_layout lay,
                            const candle_rope_params *p, const float *ff, bool with_pos,
                            uint64_t seed) {
    int r = sc->rank;
    int64_t S = sc->shape[r - 3], H = sc->shape[r - 2], D = sc->shape[r - 1];
    int64_t n = mt_numel(r, sc->shape), outer = n / (S * H * D);
    candle_tensor *x = mt_input(ctx, dt, r, sc->shape, lay, seed, -2, 2);
    if (!x) return;
    /* out of order, read through a strided view of a longer buffer */
    int32_t pos[16], buf[32];
    int64_t S2 = 2 * S;
    for (int64_t s = 0; s < S; s++) {
        pos[s] = (int32_t)((s * 37 + 11) % 101);
        buf[2 * s] = -1000;
        buf[2 * s + 1] = pos[s];
    }
    candle_tensor *pt = with_pos ? candle_slice(ctx, candle_tensor_from_i32(ctx, 1, &S2, buf), 0, 1, S2, 2) : NULL;
    candle_tensor *y = candle_rope(ctx, x, pt, p);
    double *xv = mt_values(x), *got = mt_values(y), *ref = malloc(sizeof(double) * (size_t)n);
    CHECK_MSG(got && mt_same_shape(y, r, sc->shape) && y->dtype == dt, "%s", candle_errmsg(ctx));
    if (xv && got) {
        rope_ref(xv, outer, S, H, D, p, with_pos ? pos : NULL, ff, ref);
        double e = mt_nmse(got, ref, n);
        CHECK_MSG(e <= mt_bound(dt), "rope %s %s mode %d n_dims %d pos %d ff %d ext %g: nmse %g",
                  candle_dtype_name(dt), mt_layout_names[lay], (int)p->mode, p->n_dims, with_pos,
                  ff != NULL, p->ext_factor, e);
    }
    free(xv);
    free(got);
    free(ref);
}

static void test_table(candle_ctx *ctx) {
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < 3; t++)
            for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
                for (int mode = 0; mode < 2; mode++)
                    for (int partial = 0; partial < 2; partial++)
                        for (int with_pos = 0; with_pos < 2; with_pos++) {
                            const shape_case *sc = &shapes[s];
                            int64_t D = sc->shape[sc->rank - 1];
                            candle_rope_params p = {
                                .mode = (candle_rope_mode)mode,
                                .n_dims = partial && D > 2 ? (int)(D / 2 - D / 2 % 2) : 0,
                                .freq_base = partial ? 500000.0 : 10000.0,
                                .freq_scale = partial ? 0.25 : 1.0,
                                .pos_offset = with_pos ? 0 : 3 + (int64_t)s,
                            };
                            candle_ctx_mark m = candle_ctx_get_mark(ctx);
                            check_rope_case(ctx, float_types[t], sc, (mt_layout)lay, &p, NULL, with_pos, seed++);
                            candle_ctx_reset(ctx, m);
                        }
}

/* Per-pair divisors (Llama 3.1, Phi-3) and YaRN (ramp, magnitude), alone and
 * together, against the formula written from their papers' form. */
static void test_scaled(candle_ctx *ctx) {
    static const float ff[5] = {1.0f, 1.25f, 3.0f, 8.0f, 0.5f};
    uint64_t seed = 900;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < 3; t++)
            for (int lay = 0; lay < MT_LAYOUT_COUNT; lay++)
                for (int kind = 1; kind < 4; kind++)
                    for (int partial = 0; partial < 2; partial++) {
                        const shape_case *sc = &shapes[s];
                        int64_t D = sc->shape[sc->rank - 1];
                        int nd = partial && D > 2 ? (int)(D / 2 - D / 2 % 2) : (int)D;
                        if (nd / 2 > 5) continue;
                        candle_rope_params p = {
                            .mode = (candle_rope_mode)(s % 2), .n_dims = nd, .freq_base = 100.0,
                            .freq_scale = 0.25, .pos_offset = 5 + (int64_t)s,
                        };
                        candle_ctx_mark m = candle_ctx_get_mark(ctx);
                        int64_t nf = nd / 2;
                        if (kind & 1) p.freq_factors = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &nf, ff);
                        if (kind & 2) {
                            p.ext_factor = 1.0;
                            p.n_ctx_orig = 8 << partial;
                            p.beta_fast = partial ? 4 : 0;
                            p.attn_factor = kind == 3 ? 1.1 : 0;
                        }
                        check_rope_case(ctx, float_types[t], sc, (mt_layout)lay, &p,
                                        (kind & 1) ? ff : NULL, partial, seed++);
                        candle_ctx_reset(ctx, m);
                    }
}

/* Hand-checked values: which elements pair up in each mode, and that dims
 * past n_dims pass through. x = [1, 2, 3, 4, 5, 6], pos 1, base 100, n_dims 4:
 * angles 1 and 0.1. */
static void test_pairs(candle_ctx *ctx) {
    const float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[3] = {1, 1, 6};
    candle_tensor *x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 3, shape, v);
    candle_rope_params p = {.mode = CANDLE_ROPE_INTERLEAVED, .n_dims = 4, .freq_base = 100.0,
                            .freq_scale = 1.0, .pos_offset = 1};
    double y[6], c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.1), s2 = sin(0.1);
    CHECK(mt_read(candle_rope(ctx, x, NULL, &p), y));
    CHECK_NEAR(y[0], 1 * c1 - 2 * s1, 1e-6);
    CHECK_NEAR(y[1], 1 * s1 + 2 * c1, 1e-6);
    CHECK_NEAR(y[2], 3 * c2 - 4 * s2, 1e-6);
    CHECK_NEAR(y[3], 3 * s2 + 4 * c2, 1e-6);
    CHECK(y[4] == 5 && y[5] == 6);
    p.mode = CANDLE_ROPE_HALF;
    CHECK(mt_read(candle_rope(ctx, x, NULL, &p), y));
    CHECK_NEAR(y[0], 1 * c1 - 3 * s1, 1e-6);
    CHECK_NEAR(y[2], 1 * s1 + 3 * c1, 1e-6);
    CHECK_NEAR(y[1], 2 * c2 - 4 * s2, 1e-6);
    CHECK_NEAR(y[3], 2 * s2 + 4 * c2, 1e-6);
    CHECK(y[4] == 5 && y[5] == 6);
    /* position 0 is the identity; i64 positions work too */
    int64_t one = 1, zero = 0;
    candle_tensor *pz = candle_tensor_new(ctx, CANDLE_DTYPE_I64, 1, &one);
    memcpy(candle_tensor_data(pz), &zero, sizeof zero);
    CHECK(mt_read(candle_rope(ctx, x, pz, &p), y));
    for (int i = 0; i < 6; i++) CHECK(y[i] == v[i]);
}

static void test_errors(candle_ctx *ctx) {
    int64_t s3[3] = {4, 2, 6}, s2[2] = {4, 6}, n4 = 4, n3 = 3;
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 3, s3, MT_CONTIG, 1, -1, 1);
    candle_rope_params p = {.mode = CANDLE_ROPE_HALF, .freq_base = 10000.0, .freq_scale = 1.0};
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, NULL), CANDLE_ERR_INVALID_ARG, "rope: params are NULL");
    MT_CHECK_ERR(ctx, candle_rope(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 2, s2, MT_CONTIG, 1, -1, 1), NULL, &p),
                 CANDLE_ERR_SHAPE, "rope: input [4, 6] must be [..., S, H, D]");
    p.n_dims = 3;
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_INVALID_ARG,
                 "rope: n_dims 3 must be even and at most head dim 6");
    p.n_dims = 8;
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_INVALID_ARG,
                 "rope: n_dims 8 must be even and at most head dim 6");
    p.n_dims = 0;
    p.mode = (candle_rope_mode)7;
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_INVALID_ARG, "rope: unknown mode 7");
    p.mode = CANDLE_ROPE_INTERLEAVED;
    p.freq_base = 0;
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_INVALID_ARG,
                 "rope: freq_base 0 / freq_scale 1 invalid");
    p.freq_base = 10000.0;
    int32_t pos[4] = {0, 1, 2, 3};
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, candle_tensor_from_i32(ctx, 1, &n3, pos), &p), CANDLE_ERR_SHAPE,
                 "rope: shape mismatch: input [4, 2, 6] positions [3] (want [4])");
    candle_tensor *pf = mt_input(ctx, CANDLE_DTYPE_F32, 1, &n4, MT_CONTIG, 1, 0, 4);
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, pf, &p), CANDLE_ERR_DTYPE,
                 "rope: positions must be i32 or i64, got f32");
    p.freq_factors = pf; /* [4]: three pairs want [3] */
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_SHAPE,
                 "rope: freq_factors must be contiguous f32 [3], got f32 [4]");
    p.freq_factors = NULL;
    p.ext_factor = 1;
    MT_CHECK_ERR(ctx, candle_rope(ctx, x, NULL, &p), CANDLE_ERR_INVALID_ARG,
                 "rope: YaRN needs n_ctx_orig > 0 (got 0), positive betas (32, 1) and freq_scale (1)");
    p.ext_factor = 0;
    candle_tensor *xi = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 3, s3);
    MT_CHECK_ERR(ctx, candle_rope(ctx, xi, NULL, &p), CANDLE_ERR_DTYPE,
                 "rope: dtype i32 not supported (needs f32, f16 or bf16)");
    candle_ctx_clear_error(ctx);
    CHECK(candle_rope(ctx, NULL, NULL, &p) == NULL && candle_errcode(ctx) == CANDLE_OK);
}

/* q [S, H, D] as a lazy view of a projection's output [S, H*D] */
static void test_lazy(void) {
    candle_ctx *ctx = mt_ctx(false);
    int64_t s2[2] = {3, 8}, s3[3] = {3, 2, 4};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 2, s2, MT_CONTIG, 9, -1, 1);
    candle_tensor *q = candle_reshape(ctx, candle_scale(ctx, x, 0.5), 3, s3);
    candle_rope_params p = {.mode = CANDLE_ROPE_HALF, .freq_base = 10000.0, .freq_scale = 1.0,
                            .pos_offset = 5};
    candle_tensor *y = candle_rope(ctx, q, NULL, &p);
    CHECK(y && !y->computed);
    CHECK_OK(ctx, candle_compute(ctx, y));
    CHECK_OK(ctx, candle_compute(ctx, q));
    double *qv = mt_values(q), *got = mt_values(y), ref[24];
    if (qv && got) {
        rope_ref(qv, 1, 3, 2, 4, &p, NULL, NULL, ref);
        CHECK(mt_nmse(got, ref, 24) <= 1e-10);
    } else {
        CHECK_MSG(false, "lazy rope unreadable: %s", candle_errmsg(ctx));
    }
    free(qv);
    free(got);
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    candle_ctx *ctx = mt_ctx(true);
    test_table(ctx);
    test_scaled(ctx);
    test_pairs(ctx);
    test_errors(ctx);
    candle_ctx_free(ctx);
    test_lazy();
}

int main(void) { return mt_run_passes(run_checks, "test_rope"); }
