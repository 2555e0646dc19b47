/* conv1d and conv2d against a naive double-precision convolution written
 * from PyTorch's definition, over dtypes, input/weight layouts, strides,
 * padding, dilation, groups, bias, and the shape errors. */
#include "mathtest.h"

static const candle_dtype kDtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

typedef struct conv_case {
    int ns;                       /* spatial dims: 1 or 2 */
    int64_t n, c, h, w, o, kh, kw; /* h, kh ignored for conv1d */
    candle_conv_params p;
    bool bias;
} conv_case;

static const conv_case kCases[] = {
    {1, 2, 3, 1, 11, 4, 1, 3, {{0, 0}, {0, 0}, {0, 0}, 0}, true},  /* zero params = defaults */
    {1, 1, 4, 1, 13, 6, 1, 3, {{2, 0}, {1, 0}, {2, 0}, 2}, false}, /* stride, pad, dilation, groups */
    {1, 3, 6, 1, 7, 6, 1, 1, {{1, 0}, {0, 0}, {1, 0}, 6}, true},   /* depthwise 1x1 */
    {1, 2, 2, 1, 5, 3, 1, 5, {{3, 0}, {2, 0}, {1, 0}, 1}, true},   /* kernel = input, pad */
    {2, 2, 3, 7, 6, 4, 3, 2, {{1, 2}, {1, 0}, {1, 2}, 1}, true},
    {2, 1, 4, 9, 8, 4, 3, 3, {{2, 1}, {2, 1}, {2, 1}, 2}, false},
    {2, 2, 6, 5, 5, 3, 1, 1, {{1, 1}, {0, 0}, {1, 1}, 3}, true},
    {2, 1, 2, 5, 4, 2, 5, 4, {{1, 1}, {0, 0}, {1, 1}, 1}, true},   /* kernel covers input */
};

/* PyTorch's formula: floor((in + 2p - d(k - 1) - 1) / s) + 1. */
static int64_t out_size(int64_t in, int64_t k, int s, int p, int d) {
    s = s ? s : 1;
    d = d ? d : 1;
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* y[n, o, i, j] = b[o] + sum over c, u, v of x[n, g*cg + c, i*s - p + u*d, ...] * w[o, c, u, v]. */
static void ref_conv(const conv_case *k, const double *x, const double *w, const double *b,
                     int64_t oh, int64_t ow, double *y) {
    int g = k->p.groups ? k->p.groups : 1;
    int64_t cg = k->c / g, og = k->o / g;
    int sh = k->ns == 2 && k->p.stride[0] ? k->p.stride[0] : 1;
    int dh = k->ns == 2 && k->p.dilation[0] ? k->p.dilation[0] : 1;
    int ph = k->ns == 2 ? k->p.padding[0] : 0;
    int si = k->ns - 1; /* index of the width params */
    int sw = k->p.stride[si] ? k->p.stride[si] : 1, dw = k->p.dilation[si] ? k->p.dilation[si] : 1;
    int pw = k->p.padding[si];
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t o = 0; o < k->o; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double acc = b ? b[o] : 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t u = 0; u < k->kh; u++)
                            for (int64_t v = 0; v < k->kw; v++) {
                                int64_t hi = i * sh - ph + u * dh, wi = j * sw - pw + v * dw;
                                if (hi < 0 || hi >= k->h || wi < 0 || wi >= k->w) continue;
                                int64_t ci = (o / og) * cg + c;
                                acc += x[((n * k->c + ci) * k->h + hi) * k->w + wi] *
                                       w[((o * cg + c) * k->kh + u) * k->kw + v];
                            }
                    y[((n * k->o + o) * oh + i) * ow + j] = acc;
                }
}

static void run_case(candle_ctx *ctx, const conv_case *k, candle_dtype dt, mt_layout xl,
                     mt_layout wl, uint64_t seed) {
    int g = k->p.groups ? k->p.groups : 1, r = k->ns + 2;
    int64_t xs4[4] = {k->n, k->c, k->h, k->w}, ws4[4] = {k->o, k->c / g, k->kh, k->kw};
    int64_t xs3[3] = {k->n, k->c, k->w}, ws3[3] = {k->o, k->c / g, k->kw};
    const int64_t *xs = k->ns == 2 ? xs4 : xs3, *ws = k->ns == 2 ? ws4 : ws3;
    candle_tensor *x = mt_input(ctx, dt, r, xs, xl, seed, -1, 1);
    candle_tensor *w = mt_input(ctx, dt, r, ws, wl, seed + 1, -1, 1);
    candle_tensor *b = k->bias ? mt_input(ctx, dt, 1, &k->o, xl == MT_SLICED ? MT_SLICED : MT_CONTIG, seed + 2, -1, 1) : NULL;
    double *xv = mt_values(x), *wv = mt_values(w), *bv = b ? mt_values(b) : NULL;
    candle_tensor *y = k->ns == 2 ? candle_conv2d(ctx, x, w, b, &k->p) : candle_conv1d(ctx, x, w, b, &k->p);
    int64_t oh = k->ns == 2 ? out_size(k->h, k->kh, k->p.stride[0], k->p.padding[0], k->p.dilation[0]) : 1;
    int64_t ow = out_size(k->w, k->kw, k->p.stride[k->ns - 1], k->p.padding[k->ns - 1], k->p.dilation[k->ns - 1]);
    int64_t os4[4] = {k->n, k->o, oh, ow}, os3[3] = {k->n, k->o, ow};
    bool ok = y && candle_compute(ctx, y) == CANDLE_OK;
    CHECK_MSG(ok && mt_same_shape(y, r, k->ns == 2 ? os4 : os3) && y->dtype == dt,
              "conv%dd %s x %s w %s: %s", k->ns, candle_dtype_name(dt), mt_layout_names[xl],
              mt_layout_names[wl], candle_errmsg(ctx));
    double *got = ok ? mt_values(y) : NULL;
    if (got && xv && wv) {
        int64_t n = k->n * k->o * oh * ow;
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_conv(k, xv, wv, bv, oh, ow, want);
        double e = mt_nmse(got, want, n);
        CHECK_MSG(e <= mt_bound(dt), "conv%dd case %d %s x %s w %s: nmse %g", k->ns,
                  (int)(k - kCases), candle_dtype_name(dt), mt_layout_names[xl], mt_layout_names[wl], e);
        free(want);
    }
    free(got);
    free(xv);
    free(wv);
    free(bv);
}

static void test_values(bool eager) {
    candle_ctx *ctx = mt_ctx(eager);
    uint64_t seed = 1;
    for (size_t c = 0; c < sizeof kCases / sizeof kCases[0]; c++)
        for (int di = 0; di < 3; di++)
            for (int xl = 0; xl < MT_LAYOUT_COUNT; xl++) {
                mt_layout wl = (mt_layout)((xl + (int)c) % MT_LAYOUT_COUNT);
                run_case(ctx, &kCases[c], kDtypes[di], (mt_layout)xl, wl, seed);
                seed += 3;
            }
    candle_ctx_free(ctx);
}

/* A NULL params pointer means all defaults. */
static void test_null_params(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t xs[3] = {1, 2, 6}, ws[3] = {3, 2, 2};
    candle_tensor *x = mt_input(ctx, CANDLE_DTYPE_F32, 3, xs, MT_CONTIG, 5, -1, 1);
    candle_tensor *w = mt_input(ctx, CANDLE_DTYPE_F32, 3, ws, MT_CONTIG, 6, -1, 1);
    candle_conv_params z;
    memset(&z, 0, sizeof z);
    candle_tensor *a = candle_conv1d(ctx, x, w, NULL, NULL), *b = candle_conv1d(ctx, x, w, NULL, &z);
    CHECK(a && b && a->shape[2] == 5 && memcmp(candle_tensor_data(a), candle_tensor_data(b), 15 * sizeof(float)) == 0);
    candle_ctx_free(ctx);
}

static void test_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t x1s[3] = {1, 6, 10}, w1s[3] = {4, 2, 3}, x2s[4] = {1, 4, 5, 5}, w2s[4] = {2, 3, 3, 3};
    candle_tensor *x1 = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, x1s);
    candle_tensor *w1 = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, w1s);
    candle_tensor *x2 = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, x2s);
    candle_tensor *w2 = candle_zeros(ctx, CANDLE_DTYPE_F32, 4, w2s);
    candle_conv_params g4 = {{1, 1}, {0, 0}, {1, 1}, 4}, g3 = {{1, 1}, {0, 0}, {1, 1}, 3};
    candle_conv_params g2 = {{1, 1}, {0, 0}, {1, 1}, 2};
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, w1, NULL, &g4), CANDLE_ERR_SHAPE,
                 "conv1d: channels not divisible by groups: in 6 out 4 groups 4");
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, w1, NULL, &g3), CANDLE_ERR_SHAPE,
                 "conv1d: channels not divisible by groups: in 6 out 4 groups 3");
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, w1, NULL, &g2), CANDLE_ERR_SHAPE,
                 "conv1d: shape mismatch: x [1, 6, 10] w [4, 2, 3] (weight has 2 input channels, "
                 "expected 3 = 6 / groups 2)");
    MT_CHECK_ERR(ctx, candle_conv2d(ctx, x2, w2, NULL, NULL), CANDLE_ERR_SHAPE,
                 "conv2d: shape mismatch: x [1, 4, 5, 5] w [2, 3, 3, 3] (weight has 3 input "
                 "channels, expected 4 = 4 / groups 1)");
    int64_t wbig[3] = {4, 6, 12};
    candle_tensor *wb = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, wbig);
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wb, NULL, NULL), CANDLE_ERR_SHAPE,
                 "conv1d: kernel larger than padded input: x [1, 6, 10] w [4, 6, 12]: dilated "
                 "kernel 12 > padded input 10");
    candle_conv_params dil = {{1, 1}, {0, 0}, {5, 1}, 1};
    int64_t w6[3] = {4, 6, 3};
    candle_tensor *wk = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, w6);
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wk, NULL, &dil), CANDLE_ERR_SHAPE,
                 "dilated kernel 11 > padded input 10");
    MT_CHECK_ERR(ctx, candle_conv2d(ctx, x1, wk, NULL, NULL), CANDLE_ERR_SHAPE,
                 "conv2d: expected rank 4 input and weight, got x [1, 6, 10] w [4, 6, 3]");
    int64_t three = 3;
    candle_tensor *b3 = candle_zeros(ctx, CANDLE_DTYPE_F32, 1, &three);
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wk, b3, NULL), CANDLE_ERR_SHAPE,
                 "conv1d: bias [3] does not match 4 output channels");
    candle_tensor *wh = candle_zeros(ctx, CANDLE_DTYPE_F16, 3, w6);
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wh, NULL, NULL), CANDLE_ERR_DTYPE,
                 "conv1d: dtype mismatch: lhs f32 rhs f16");
    candle_tensor *xi = candle_zeros(ctx, CANDLE_DTYPE_I32, 3, x1s);
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, xi, wk, NULL, NULL), CANDLE_ERR_DTYPE,
                 "conv1d: dtype i32 not supported (needs f32, f16 or bf16)");
    candle_conv_params bad = {{-1, 1}, {0, 0}, {1, 1}, 1}, badg = {{1, 1}, {0, 0}, {1, 1}, -2};
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wk, NULL, &bad), CANDLE_ERR_INVALID_ARG,
                 "conv1d: invalid params: stride -1 padding 0 dilation 1");
    MT_CHECK_ERR(ctx, candle_conv1d(ctx, x1, wk, NULL, &badg), CANDLE_ERR_INVALID_ARG,
                 "conv1d: invalid groups -2");
    CHECK(candle_conv2d(ctx, NULL, w2, NULL, NULL) == NULL && candle_errcode(ctx) == CANDLE_OK);
    candle_ctx_free(ctx);
}

int main(void) {
    test_values(true);
    test_values(false);
    test_null_params();
    test_errors();
    return test_done("test_conv");
}
