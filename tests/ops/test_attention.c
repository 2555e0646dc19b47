/* Scaled dot-product attention against a naive double-precision reference:
 * causal and not, grouped-query heads, decode (Sq < Skv), additive masks of
 * several broadcast shapes (and -inf padding), explicit scale, large scores
 * (softmax stability), every input layout, f32/f16/bf16, keys and values of
 * a block type (a quantized KV cache: q8_0, q4_0, against the reference on
 * their dequantized values), and errors. */
#include "mathtest.h"

static const candle_dtype kDtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

typedef enum mask_kind {
    MASK_NONE,
    MASK_FULL,    /* [B, Hq, Sq, Skv] */
    MASK_2D,      /* [Sq, Skv] */
    MASK_PADDING, /* [B, 1, 1, Skv], -inf on padded keys */
    MASK_ROW_OFF, /* [Sq, Skv], one query row all -inf: its output is zero */
} mask_kind;

typedef struct attn_case {
    int64_t b, hq, hkv, sq, skv, d, dv;
    bool causal;
    mask_kind mask;
    double scale; /* 0: 1/sqrt(D) */
    double range; /* q and k values in [-range, range) */
} attn_case;

static const attn_case kCases[] = {
    {2, 3, 3, 5, 5, 8, 8, false, MASK_NONE, 0, 1},
    {1, 2, 2, 7, 7, 8, 8, true, MASK_NONE, 0, 1},     /* causal prefill */
    {2, 6, 2, 4, 4, 4, 4, true, MASK_NONE, 0, 1},     /* GQA, 3 q heads per kv head */
    {1, 4, 1, 1, 9, 8, 8, true, MASK_NONE, 0, 1},     /* MQA decode: one query, sees all */
    {1, 4, 2, 3, 8, 8, 8, true, MASK_2D, 0, 1},       /* chunk: Sq < Skv, causal + mask */
    {2, 2, 2, 3, 6, 4, 6, false, MASK_FULL, 0.3, 1},  /* Dv != D, explicit scale */
    {2, 4, 2, 2, 5, 8, 8, false, MASK_PADDING, 0, 1}, /* padded keys */
    {1, 2, 1, 4, 4, 8, 4, false, MASK_ROW_OFF, 0, 1},
    {1, 2, 2, 3, 5, 16, 8, true, MASK_NONE, 1, 30},   /* scores ~1e4: exp overflows unless stable */
    {1, 1, 1, 1, 1, 3, 5, true, MASK_NONE, 0, 1},
};

/* out[b, h, i, :] with the same definitions as the op's header. */
static void ref_attention(const attn_case *c, const double *q, const double *k, const double *v,
                          const double *m, double *out) {
    double scale = c->scale ? c->scale : 1.0 / sqrt((double)c->d);
    double *s = malloc(sizeof(double) * (size_t)c->skv);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->hq; h++) {
            int64_t hk = h / (c->hq / c->hkv);
            for (int64_t i = 0; i < c->sq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c->skv; j++) {
                    double dot = 0;
                    for (int64_t e = 0; e < c->d; e++)
                        dot += q[((b * c->hq + h) * c->sq + i) * c->d + e] *
                               k[((b * c->hkv + hk) * c->skv + j) * c->d + e];
                    s[j] = dot * scale + (m ? m[((b * c->hq + h) * c->sq + i) * c->skv + j] : 0);
                    if (c->causal && j > c->skv - c->sq + i) s[j] = -INFINITY;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = 0; j < c->skv; j++) {
                    s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t e = 0; e < c->dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < c->skv; j++)
                        acc += s[j] * v[((b * c->hkv + hk) * c->skv + j) * c->dv + e];
                    out[((b * c->hq + h) * c->sq + i) * c->dv + e] = sum > 0 ? acc / sum : 0;
                }
            }
        }
    free(s);
}

/* The mask tensor and its values expanded to [B, Hq, Sq, Skv]. */
static candle_tensor *make_mask(candle_ctx *ctx, const attn_case *c, uint64_t seed, double **full) {
    *full = NULL;
    if (c->mask == MASK_NONE) return NULL;
    int64_t fs[4] = {c->b, c->hq, c->sq, c->skv}, ps[4] = {c->b, 1, 1, c->skv};
    int64_t n = mt_numel(4, fs);
    candle_tensor *m;
    if (c->mask == MASK_FULL) {
        m = mt_input(ctx, CANDLE_DTYPE_F32, 4, fs, MT_TRANSPOSED, seed, -2, 2);
    } else if (c->mask == MASK_PADDING) {
        float *d = malloc(sizeof(float) * (size_t)(c->b * c->skv));
        for (int64_t i = 0; i < c->b * c->skv; i++) d[i] = (i % c->skv) >= c->skv - 1 - i / c->skv ? -INFINITY : 0.f;
        m = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 4, ps, d);
        free(d);
    } else if (c->mask == MASK_ROW_OFF) {
        m = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, fs + 2);
        float *d = candle_tensor_data(m);
        for (int64_t i = 0; i < c->sq * c->skv; i++) d[i] = i / c->skv == 1 ? -INFINITY : 0.5f * (float)(i % 3);
    } else {
        m = mt_input(ctx, CANDLE_DTYPE_F32, 2, fs + 2, MT_SLICED, seed, -2, 2);
    }
    double *mv = mt_values(m);
    *full = malloc(sizeof(double) * (size_t)n);
    int64_t at[4];
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = 3; d >= 0; d--) {
            at[d] = r % fs[d];
            r /= fs[d];
        }
        int64_t o = 0;
        for (int d = 4 - m->rank; d < 4; d++) o = o * m->shape[d - (4 - m->rank)] + (m->shape[d - (4 - m->rank)] == 1 ? 0 : at[d]);
        (*full)[i] = mv[o];
    }
    free(mv);
    return m;
}

/* k/v heads-second from a [B, S, H, D] tensor, as models lay them out. */
static candle_tensor *bshd(candle_ctx *ctx, candle_dtype dt, const int64_t *s, uint64_t seed, double r) {
    int64_t t[4] = {s[0], s[2], s[1], s[3]};
    return candle_transpose(ctx, mt_input(ctx, dt, 4, t, MT_CONTIG, seed, -r, r), 1, 2);
}

/* q (and the output) in dt, k and v in kvt. */
static void run_case(candle_ctx *ctx, const attn_case *c, candle_dtype dt, candle_dtype kvt, int lay,
                     uint64_t seed) {
    int64_t qs[4] = {c->b, c->hq, c->sq, c->d}, ks[4] = {c->b, c->hkv, c->skv, c->d};
    int64_t vs[4] = {c->b, c->hkv, c->skv, c->dv}, os[4] = {c->b, c->hq, c->sq, c->dv};
    candle_tensor *q = mt_input(ctx, dt, 4, qs, (mt_layout)(lay % MT_LAYOUT_COUNT), seed, -c->range, c->range);
    candle_tensor *k, *v;
    if (lay == MT_LAYOUT_COUNT) { /* an extra layout: [B, S, H, D] transposed */
        k = bshd(ctx, kvt, ks, seed + 1, c->range);
        v = bshd(ctx, kvt, vs, seed + 2, 1);
    } else {
        k = mt_input(ctx, kvt, 4, ks, (mt_layout)((lay + 1) % MT_LAYOUT_COUNT), seed + 1, -c->range, c->range);
        v = mt_input(ctx, kvt, 4, vs, (mt_layout)((lay + 2) % MT_LAYOUT_COUNT), seed + 2, -1, 1);
    }
    double *mfull;
    candle_tensor *m = make_mask(ctx, c, seed + 3, &mfull);
    double *qv = mt_values(q), *kv = mt_values(k), *vv = mt_values(v);
    candle_tensor *y = candle_attention(ctx, q, k, v, m, c->scale, c->causal);
    bool ok = y && candle_compute(ctx, y) == CANDLE_OK;
    int ci = (int)(c - kCases);
    CHECK_MSG(ok && mt_same_shape(y, 4, os) && y->dtype == dt, "attention case %d %s/%s layout %d: %s",
              ci, candle_dtype_name(dt), candle_dtype_name(kvt), lay, candle_errmsg(ctx));
    double *got = ok ? mt_values(y) : NULL;
    if (got && qv && kv && vv) {
        int64_t n = mt_numel(4, os);
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_attention(c, qv, kv, vv, mfull, want);
        double e = mt_nmse(got, want, n);
        double bound = mt_bound(dt) > mt_bound(kvt) ? mt_bound(dt) : mt_bound(kvt);
        CHECK_MSG(e <= bound, "attention case %d %s/%s layout %d: nmse %g", ci,
                  candle_dtype_name(dt), candle_dtype_name(kvt), lay, e);
        if (c->mask == MASK_ROW_OFF) /* fully masked query row 1 */
            for (int64_t h = 0; h < c->hq; h++)
                for (int64_t e2 = 0; e2 < c->dv; e2++) CHECK(got[((h * c->sq) + 1) * c->dv + e2] == 0);
        free(want);
    }
    free(got);
    free(qv);
    free(kv);
    free(vv);
    free(mfull);
}

static void test_values(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    uint64_t seed = 10;
    for (size_t c = 0; c < sizeof kCases / sizeof kCases[0]; c++)
        for (int di = 0; di < 3; di++)
            for (int lay = 0; lay <= MT_LAYOUT_COUNT; lay++) {
                run_case(ctx, &kCases[c], kDtypes[di], kDtypes[di], lay, seed);
                seed += 4;
            }
    /* f32 queries over an f16 or bf16 KV cache */
    for (size_t c = 0; c < sizeof kCases / sizeof kCases[0]; c++)
        for (int di = 1; di < 3; di++) {
            run_case(ctx, &kCases[c], CANDLE_DTYPE_F32, kDtypes[di], (int)(c % MT_LAYOUT_COUNT), seed);
            seed += 4;
        }
    candle_ctx_free(ctx);
}

/* Keys and values of a block type, as a quantized KV cache holds them: the
 * rows of a [B, Hkv, cap, D] cache (cap > Skv, so the view's outer strides
 * are not the contiguous ones), against the double reference on the values
 * the blocks hold (cast back to f32). Decoding (split keys past 256),
 * prefill, grouped-query heads, Dv != D. */
static void test_block_kv(void) {
    static const attn_case cases[] = {
        {1, 9, 3, 1, 300, 64, 64, true, MASK_NONE, 0, 1},  /* decode, keys split in chunks */
        {1, 9, 3, 1, 40, 64, 64, true, MASK_NONE, 0, 1},
        {1, 8, 1, 1, 33, 32, 64, true, MASK_NONE, 0, 1},   /* 8 rows: the packed path */
        {2, 4, 2, 7, 7, 32, 32, true, MASK_NONE, 0, 1},    /* causal prefill */
        {1, 4, 2, 3, 9, 64, 32, true, MASK_2D, 0, 1},      /* chunk with a mask */
    };
    static const candle_dtype types[] = {CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_0};
    candle_ctx *ctx = mt_ctx(false);
    uint64_t seed = 500;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (size_t ti = 0; ti < 2; ti++, seed += 4) {
            const attn_case *c = &cases[ci];
            candle_dtype bt = types[ti];
            int64_t cap = c->skv + 5;
            int64_t qs[4] = {c->b, c->hq, c->sq, c->d}, kc[4] = {c->b, c->hkv, cap, c->d};
            int64_t vc[4] = {c->b, c->hkv, cap, c->dv}, os[4] = {c->b, c->hq, c->sq, c->dv};
            candle_tensor *q = mt_input(ctx, CANDLE_DTYPE_F32, 4, qs, MT_CONTIG, seed, -1, 1);
            candle_tensor *kq = candle_cast(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 4, kc, MT_CONTIG, seed + 1, -1, 1), bt);
            candle_tensor *vq = candle_cast(ctx, mt_input(ctx, CANDLE_DTYPE_F32, 4, vc, MT_CONTIG, seed + 2, -1, 1), bt);
            candle_tensor *k = candle_narrow(ctx, kq, 2, 0, c->skv), *v = candle_narrow(ctx, vq, 2, 0, c->skv);
            candle_tensor *kf = candle_cast(ctx, k, CANDLE_DTYPE_F32), *vf = candle_cast(ctx, v, CANDLE_DTYPE_F32);
            double *mfull;
            candle_tensor *m = make_mask(ctx, c, seed + 3, &mfull);
            candle_tensor *y = candle_attention(ctx, q, k, v, m, c->scale, c->causal);
            bool ok = y && kf && vf && candle_compute(ctx, y) == CANDLE_OK && candle_compute(ctx, kf) == CANDLE_OK &&
                      candle_compute(ctx, vf) == CANDLE_OK;
            CHECK_MSG(ok && mt_same_shape(y, 4, os), "block kv case %zu %s: %s", ci, candle_dtype_name(bt),
                      candle_errmsg(ctx));
            if (ok) {
                double *got = mt_values(y), *qv = mt_values(q), *kv = mt_values(kf), *vv = mt_values(vf);
                int64_t n = mt_numel(4, os);
                double *want = malloc(sizeof(double) * (size_t)n);
                ref_attention(c, qv, kv, vv, mfull, want);
                double e = mt_nmse(got, want, n);
                CHECK_MSG(e <= mt_bound(CANDLE_DTYPE_F32), "block kv case %zu %s: nmse %g", ci,
                          candle_dtype_name(bt), e);
                free(got), free(qv), free(kv), free(vv), free(want);
            }
            free(mfull);
        }
    /* rows that are not whole blocks are refused with the reason */
    int64_t ks[4] = {1, 1, 4, 48};
    candle_tensor *kx = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, ks);
    candle_tensor *kbad = candle_cast(ctx, candle_narrow(ctx, kx, 3, 0, 32), CANDLE_DTYPE_Q8_0);
    candle_tensor *kt = kbad ? candle_transpose(ctx, kbad, 2, 3) : NULL;
    CHECK(kbad && kt);
    if (kt)
        MT_CHECK_ERR(ctx, candle_attention(ctx, candle_zeros(ctx, CANDLE_DTYPE_F32, 4, (int64_t[]){1, 1, 1, 4}), kt, kt,
                                           NULL, 0, false),
                     CANDLE_ERR_DTYPE, "attention: q8_0 k/v need rows of whole 32-element blocks");
    candle_ctx_free(ctx);
}

/* The mask may be f32 while q/k/v are f16 or bf16, and causal attention of
 * one query over all keys equals non-causal attention. */
static void test_mixed(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t qs[4] = {1, 2, 1, 8}, ks[4] = {1, 2, 6, 8}, ms[2] = {1, 6};
    candle_tensor *q = mt_input(ctx, CANDLE_DTYPE_F16, 4, qs, MT_CONTIG, 1, -1, 1);
    candle_tensor *k = mt_input(ctx, CANDLE_DTYPE_F16, 4, ks, MT_CONTIG, 2, -1, 1);
    candle_tensor *v = mt_input(ctx, CANDLE_DTYPE_F16, 4, ks, MT_CONTIG, 3, -1, 1);
    candle_tensor *m = mt_input(ctx, CANDLE_DTYPE_BF16, 2, ms, MT_CONTIG, 4, -1, 1);
    candle_tensor *a = candle_attention(ctx, q, k, v, m, 0, true);
    candle_tensor *b = candle_attention(ctx, q, k, v, m, 0, false);
    CHECK_MSG(a && b && a->dtype == CANDLE_DTYPE_F16, "%s", candle_errmsg(ctx));
    CHECK(a && b && memcmp(candle_tensor_data(a), candle_tensor_data(b), candle_tensor_nbytes(a)) == 0);
    candle_ctx_free(ctx);
}

static void test_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t q4[4] = {1, 3, 2, 4}, k4[4] = {1, 2, 2, 4}, q3[3] = {3, 2, 4}, kd[4] = {1, 3, 2, 5};
    int64_t qlong[4] = {1, 2, 5, 4}, kshort[4] = {1, 2, 3, 4}, ms[2] = {3, 5};
    candle_tensor *q = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, q4);
    candle_tensor *k = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, k4);
    MT_CHECK_ERR(ctx, candle_attention(ctx, q, k, k, NULL, 0, false), CANDLE_ERR_SHAPE,
                 "attention: shape mismatch: q [1, 3, 2, 4] k [1, 2, 2, 4] v [1, 2, 2, 4]");
    candle_tensor *q3t = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, q3);
    MT_CHECK_ERR(ctx, candle_attention(ctx, q3t, q, q, NULL, 0, false), CANDLE_ERR_SHAPE,
                 "attention: shape mismatch: q [3, 2, 4]");
    candle_tensor *k5 = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, kd);
    MT_CHECK_ERR(ctx, candle_attention(ctx, q, k5, q, NULL, 0, false), CANDLE_ERR_SHAPE,
                 "k [1, 3, 2, 5]");
    candle_tensor *qh = candle_zeros(ctx, CANDLE_DTYPE_F16, 4, q4);
    candle_tensor *kh = candle_zeros(ctx, CANDLE_DTYPE_F16, 4, k4);
    candle_tensor *k32 = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, k4);
    MT_CHECK_ERR(ctx, candle_attention(ctx, qh, kh, k32, NULL, 0, false), CANDLE_ERR_DTYPE,
                 "attention: dtype mismatch: lhs f16 rhs f32");
    candle_tensor *qi = candle_zeros(ctx, CANDLE_DTYPE_I32, 4, q4);
    MT_CHECK_ERR(ctx, candle_attention(ctx, qi, qi, qi, NULL, 0, false), CANDLE_ERR_DTYPE,
                 "attention: dtype i32 not supported (needs f32, f16 or bf16)");
    candle_tensor *ql = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, qlong);
    candle_tensor *ks = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, kshort);
    MT_CHECK_ERR(ctx, candle_attention(ctx, ql, ks, ks, NULL, 0, true), CANDLE_ERR_SHAPE,
                 "attention: causal needs Sq <= Skv, got Sq 5 Skv 3");
    CHECK(candle_attention(ctx, ql, ks, ks, NULL, 0, false) != NULL); /* fine without causal */
    candle_tensor *mask = candle_zeros(ctx, CANDLE_DTYPE_F32, 2, ms);
    MT_CHECK_ERR(ctx, candle_attention(ctx, ql, ks, ks, mask, 0, false), CANDLE_ERR_SHAPE,
                 "attention: mask [3, 5] does not broadcast to [1, 2, 5, 3]");
    MT_CHECK_ERR(ctx, candle_attention(ctx, ql, ks, ks, qi, 0, false), CANDLE_ERR_DTYPE,
                 "attention: dtype i32 not supported");
    MT_CHECK_ERR(ctx, candle_attention(ctx, ql, ks, ks, NULL, NAN, false), CANDLE_ERR_INVALID_ARG,
                 "attention: invalid scale nan");
    CHECK(candle_attention(ctx, NULL, ks, ks, NULL, 0, false) == NULL && candle_errcode(ctx) == CANDLE_OK);
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    test_values(true);
    test_values(false);
    test_mixed();
    test_block_kv();
    test_errors();
}

/* f32 attention goes to the fast kernel; the reference is tested again alone. */
int main(void) { return mt_run_passes(run_checks, "test_attention"); }
