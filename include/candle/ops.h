/* Ops. Each function checks its inputs and creates a graph node in ctx (and
 * computes it at once when the context is eager). On a bad input it returns
 * NULL and records the error on ctx; a NULL input returns NULL without
 * touching the recorded error, so a model can build a whole graph and check
 * candle_errcode(ctx) once. */
#ifndef CANDLE_OPS_H
#define CANDLE_OPS_H

#include "api.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_op {
    CANDLE_OP_NONE = 0, /* leaf */
    CANDLE_OP_VIEW,     /* reshape/transpose/permute/narrow/expand/squeeze */
    CANDLE_OP_COPY,     /* contiguous copy and cast: dst dtype from node */
    /* unary, elementwise */
    CANDLE_OP_NEG,
    CANDLE_OP_ABS,
    CANDLE_OP_EXP,
    CANDLE_OP_LOG,
    CANDLE_OP_SQRT,
    CANDLE_OP_RSQRT,
    CANDLE_OP_SIN,
    CANDLE_OP_COS,
    CANDLE_OP_TANH,
    CANDLE_OP_SIGMOID,
    CANDLE_OP_RELU,
    CANDLE_OP_SILU,
    CANDLE_OP_GELU_ERF,
    CANDLE_OP_GELU_TANH,
    CANDLE_OP_AFFINE, /* x * fparams[0] + fparams[1] */
    CANDLE_OP_CLAMP,  /* min(max(x, fparams[0]), fparams[1]) */
    /* binary, NumPy broadcasting */
    CANDLE_OP_ADD,
    CANDLE_OP_SUB,
    CANDLE_OP_MUL,
    CANDLE_OP_DIV,
    CANDLE_OP_MAXIMUM,
    CANDLE_OP_MINIMUM,
    CANDLE_OP_POW,
    /* comparisons -> bool */
    CANDLE_OP_EQ,
    CANDLE_OP_NE,
    CANDLE_OP_LT,
    CANDLE_OP_LE,
    CANDLE_OP_GT,
    CANDLE_OP_GE,
    CANDLE_OP_WHERE, /* src: cond, a, b */
    /* reductions over iparams[0] = dim (kept as size 1 in the node, squeezed
     * by a view when keepdim is false) */
    CANDLE_OP_SUM,
    CANDLE_OP_MEAN,
    CANDLE_OP_MAX,
    CANDLE_OP_MIN,
    CANDLE_OP_ARGMAX, /* -> i64 */
    CANDLE_OP_SOFTMAX,     /* over iparams[0] = dim */
    CANDLE_OP_LOG_SOFTMAX, /* over iparams[0] = dim */
    CANDLE_OP_MATMUL,      /* [..., M, K] x [..., K, N] -> [..., M, N]; src[2]: bias [N] (candle_matmul_bias) */
    CANDLE_OP_RMS_NORM,    /* src: x, weight?; fparams[0] = eps; last dim */
    CANDLE_OP_LAYER_NORM,  /* src: x, weight?, bias?; fparams[0] = eps */
    CANDLE_OP_ROPE,        /* src: x [..., S, H, D], positions? (i32 [S]), freq_factors? */
    CANDLE_OP_INDEX_SELECT, /* src: x, idx (i32/i64 1-D); iparams[0] = dim */
    CANDLE_OP_GATHER,       /* src: x, idx (same rank); iparams[0] = dim */
    CANDLE_OP_CONCAT,       /* src: n tensors; iparams[0] = dim */
    CANDLE_OP_ARANGE,       /* fparams: start, step */
    CANDLE_OP_FILL,         /* fparams[0] = value */
    CANDLE_OP_RAND,         /* iparams: seed, dist (0 uniform, 1 normal);
                               fparams: lo/mean, hi/std */
    CANDLE_OP_CONV1D,       /* src: x [N, C, L], w [O, C/g, K], bias? [O] */
    CANDLE_OP_CONV2D,       /* src: x [N, C, H, W], w [O, C/g, KH, KW], bias? */
    CANDLE_OP_ATTENTION,    /* src: q, k, v, mask?; see candle_attention */
    CANDLE_OP_PAGED_ATTENTION, /* src: q, k, v, k_cache, v_cache, table; see candle_paged_attention */
    CANDLE_OP_MOE_FFN, /* src: x, weights, gate, up, down; iparams[0] = act; see candle_moe_ffn */
    CANDLE_OP_TOPK_MASK, /* iparams[0] = dim, iparams[1] = k; fparams[0] = fill; see candle_topk_mask */
    CANDLE_OP_MATMUL_GROUP_CORR, /* src: a, b, corr; iparams[0] = group; see candle_matmul_group_corr */
    CANDLE_OP_COUNT
} candle_op;

CANDLE_API const char *candle_op_name(candle_op op);

/* ---- views: zero-copy, share storage ---- */

/* One dim may be -1. Errors on a non-contiguous input; see reshape_copy. */
CANDLE_API candle_tensor *candle_reshape(candle_ctx *ctx, candle_tensor *x, int rank,
                                         const int64_t *shape);
/* Reshape, copying first when the layout needs it. */
CANDLE_API candle_tensor *candle_reshape_copy(candle_ctx *ctx, candle_tensor *x, int rank,
                                              const int64_t *shape);
/* Dims may be negative (counted from the end) in all the view calls. */
CANDLE_API candle_tensor *candle_transpose(candle_ctx *ctx, candle_tensor *x, int d0, int d1);
CANDLE_API candle_tensor *candle_permute(candle_ctx *ctx, candle_tensor *x, const int *perm);
/* Elements start, start+step, ... below end along dim (step >= 1). */
CANDLE_API candle_tensor *candle_slice(candle_ctx *ctx, candle_tensor *x, int dim, int64_t start,
                                       int64_t end, int64_t step);
CANDLE_API candle_tensor *candle_narrow(candle_ctx *ctx, candle_tensor *x, int dim, int64_t start,
                                        int64_t len);
/* Broadcast to shape (size-1 dims stretch, new dims in front); -1 keeps. */
CANDLE_API candle_tensor *candle_expand(candle_ctx *ctx, candle_tensor *x, int rank,
                                        const int64_t *shape);
CANDLE_API candle_tensor *candle_squeeze(candle_ctx *ctx, candle_tensor *x, int dim);
CANDLE_API candle_tensor *candle_unsqueeze(candle_ctx *ctx, candle_tensor *x, int dim);
/* General strided view (bytes), checked against the source's storage extent. */
CANDLE_API candle_tensor *candle_as_strided(candle_ctx *ctx, candle_tensor *x, int rank,
                                            const int64_t *shape, const int64_t *stride,
                                            size_t offset);
/* Returns x itself when already contiguous, else a copy. */
CANDLE_API candle_tensor *candle_contiguous(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_cast(candle_ctx *ctx, candle_tensor *x, candle_dtype dtype);
/* Write src (converted, broadcast) into dst's memory, which may be a strided
 * view (a KV cache slot). The result aliases dst; compute it before reading
 * dst. */
CANDLE_API candle_tensor *candle_copy_into(candle_ctx *ctx, candle_tensor *dst, candle_tensor *src);

/* ---- elementwise ---- */

CANDLE_API candle_tensor *candle_unary(candle_ctx *ctx, candle_op op, candle_tensor *x);
CANDLE_API candle_tensor *candle_neg(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_abs(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_exp(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_log(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_sqrt(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_rsqrt(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_sin(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_cos(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_tanh(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_sigmoid(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_relu(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_silu(candle_ctx *ctx, candle_tensor *x);
CANDLE_API candle_tensor *candle_gelu(candle_ctx *ctx, candle_tensor *x);      /* erf form */
CANDLE_API candle_tensor *candle_gelu_tanh(candle_ctx *ctx, candle_tensor *x); /* tanh approx */
CANDLE_API candle_tensor *candle_affine(candle_ctx *ctx, candle_tensor *x, double mul, double add);
CANDLE_API candle_tensor *candle_scale(candle_ctx *ctx, candle_tensor *x, double s);
CANDLE_API candle_tensor *candle_clamp(candle_ctx *ctx, candle_tensor *x, double lo, double hi);

CANDLE_API candle_tensor *candle_binary(candle_ctx *ctx, candle_op op, candle_tensor *a,
                                        candle_tensor *b);
CANDLE_API candle_tensor *candle_add(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_sub(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_mul(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_div(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_maximum(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_minimum(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_pow(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_eq(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_ne(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_lt(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_le(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_gt(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
CANDLE_API candle_tensor *candle_ge(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
/* cond (bool) ? a : b, all three broadcast together. */
CANDLE_API candle_tensor *candle_where(candle_ctx *ctx, candle_tensor *cond, candle_tensor *a,
                                       candle_tensor *b);

/* ---- reductions ---- */

CANDLE_API candle_tensor *candle_reduce(candle_ctx *ctx, candle_op op, candle_tensor *x, int dim,
                                        bool keepdim);
CANDLE_API candle_tensor *candle_sum(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim);
CANDLE_API candle_tensor *candle_mean(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim);
CANDLE_API candle_tensor *candle_max(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim);
CANDLE_API candle_tensor *candle_min(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim);
CANDLE_API candle_tensor *candle_argmax(candle_ctx *ctx, candle_tensor *x, int dim, bool keepdim);
CANDLE_API candle_tensor *candle_softmax(candle_ctx *ctx, candle_tensor *x, int dim);
CANDLE_API candle_tensor *candle_log_softmax(candle_ctx *ctx, candle_tensor *x, int dim);
/* x where an element is among the k largest of its line along dim, fill
 * elsewhere (a mixture-of-experts router's top-k). Exactly min(k, line)
 * elements are kept per line: of equal values the lower index ranks first;
 * NaN ranks below every number. Float dtypes; k >= 1. */
CANDLE_API candle_tensor *candle_topk_mask(candle_ctx *ctx, candle_tensor *x, int64_t k, int dim, double fill);

/* ---- linear algebra and nn ---- */

/* Batched; batch dims broadcast; transposed operands work through strides.
 * b may be quantized when it is the transpose of a row-major [N, K] weight. */
CANDLE_API candle_tensor *candle_matmul(candle_ctx *ctx, candle_tensor *a, candle_tensor *b);
/* candle_matmul(a, b) + bias, bias [N] added to every row: the values of
 * candle_add(candle_matmul(a, b), bias). With f32 activations (so an f32
 * product) and a contiguous f32 bias it is one MATMUL node with the bias
 * as its third source, so a backend adds it as it writes the product (no
 * pass of its own); otherwise the add. bias NULL: candle_matmul. */
CANDLE_API candle_tensor *candle_matmul_bias(candle_ctx *ctx, candle_tensor *a, candle_tensor *b,
                                             candle_tensor *bias);
/* a [..., M, K] (f32) x b [K, N] (a weight as candle_matmul takes it: any
 * float or quantized dtype) + s [..., M, K / group] x corr [K / group, N]
 * (f32; fastest as the transpose of a row-major [N, K / group]), where s
 * sums a over each run of `group` consecutive k. This is an
 * asymmetric quantized weight w = scale (q - zero) stored symmetric, b =
 * scale (q - 8), with corr = scale (8 - zero) per group (see
 * candle_weights_load_linear_split): one node, the correction added in the
 * product's own pass. K % group == 0. */
CANDLE_API candle_tensor *candle_matmul_group_corr(candle_ctx *ctx, candle_tensor *a, candle_tensor *b,
                                                   candle_tensor *corr, int64_t group);
/* x [..., K] . w [N, K]^T (+ bias [N]) -> [..., N], as torch.nn.Linear. */
CANDLE_API candle_tensor *candle_linear(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                                        candle_tensor *bias);
/* Over the last dim; weight [D] optional (NULL). */
/* Mixture-of-experts gated FFN: row r of the result [n, d_out] is
 *   sum over experts e with weights[r, e] != 0 of
 *   weights[r, e] * down_e (act(gate_e x_r) * (up_e x_r))
 * x [n, d_in] f32; weights [n, n_expert] f32 (zero: expert not chosen);
 * gate, up [n_expert, d_ff, d_in] and down [n_expert, d_out, d_ff], each
 * expert's rows as a linear layer stores them (any float or quantized
 * dtype). Only the chosen experts' weights are read, and each expert's rows
 * are multiplied together. act: CANDLE_OP_SILU or CANDLE_OP_GELU_TANH. */
CANDLE_API candle_tensor *candle_moe_ffn(candle_ctx *ctx, candle_tensor *x, candle_tensor *weights,
                                         candle_tensor *gate, candle_tensor *up, candle_tensor *down,
                                         candle_op act);
CANDLE_API candle_tensor *candle_rms_norm(candle_ctx *ctx, candle_tensor *x, candle_tensor *weight,
                                          double eps);
CANDLE_API candle_tensor *candle_layer_norm(candle_ctx *ctx, candle_tensor *x,
                                            candle_tensor *weight, candle_tensor *bias, double eps);

typedef enum candle_rope_mode {
    CANDLE_ROPE_INTERLEAVED = 0, /* pairs (2i, 2i+1): original Llama/GPT-J */
    CANDLE_ROPE_HALF = 1,        /* pairs (i, i + d/2): NeoX, HF Llama */
} candle_rope_mode;

/* The rotation of pair i at position p, as ggml_rope_ext computes it:
 *     extrap_i = p * freq_base^(-2i / n_dims) / freq_factors[i]
 *     interp_i = freq_scale * extrap_i
 *     angle_i  = interp_i                                   (ext_factor 0)
 *              = interp_i (1 - r_i) + extrap_i r_i           (YaRN)
 * with r_i = ext_factor * (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)),
 * lo = max(0, floor(c(beta_fast))), hi = min(n_dims - 1, ceil(c(beta_slow))),
 * c(b) = n_dims ln(n_ctx_orig / (2 pi b)) / (2 ln freq_base); cos and sin are
 * multiplied by mscale = attn_factor, times 1 + 0.1 ln(1 / freq_scale) when
 * ext_factor != 0 (YaRN's magnitude correction, folded in as ggml does). Zero
 * fields keep the plain rotation: no factors, no ramp, attn_factor 1. */
typedef struct candle_rope_params {
    candle_rope_mode mode;
    int n_dims;         /* rotated dims (<= D, even); 0 = D */
    double freq_base;   /* theta, 10000 */
    double freq_scale;  /* position multiplier, 1 */
    int64_t pos_offset; /* position of row 0 when positions is NULL */
    /* Per-pair divisors of the frequencies (Llama 3.1 rope_freqs, Phi-3
     * rope_factors_short/long): f32 [n_dims / 2] or NULL. An input of the
     * node, so a device backend may hold it. */
    candle_tensor *freq_factors;
    double ext_factor;  /* YaRN ramp weight: 0 off, 1 YaRN */
    double attn_factor; /* cos/sin magnitude; 0 = 1 */
    double beta_fast;   /* YaRN ramp ends in rotations; 0 = 32 */
    double beta_slow;   /* 0 = 1 */
    int64_t n_ctx_orig; /* context the model was trained on (YaRN, > 0 when ext_factor != 0) */
} candle_rope_params;

/* x [..., S, H, D]; positions NULL (pos_offset + s) or i32 [S]. */
CANDLE_API candle_tensor *candle_rope(candle_ctx *ctx, candle_tensor *x, candle_tensor *positions,
                                      const candle_rope_params *p);

/* Rows of x along dim picked by idx (i32/i64, 1-D). embedding = dim 0. */
CANDLE_API candle_tensor *candle_index_select(candle_ctx *ctx, candle_tensor *x, int dim,
                                              candle_tensor *idx);
CANDLE_API candle_tensor *candle_embedding(candle_ctx *ctx, candle_tensor *table,
                                           candle_tensor *ids);
/* torch.gather: out[i][j] = x[idx[i][j]][j] for dim 0, etc. */
CANDLE_API candle_tensor *candle_gather(candle_ctx *ctx, candle_tensor *x, int dim,
                                        candle_tensor *idx);
CANDLE_API candle_tensor *candle_concat(candle_ctx *ctx, candle_tensor *const *xs, int n, int dim);
CANDLE_API candle_tensor *candle_stack(candle_ctx *ctx, candle_tensor *const *xs, int n, int dim);

CANDLE_API candle_tensor *candle_arange(candle_ctx *ctx, candle_dtype dtype, double start,
                                        double end, double step);
CANDLE_API candle_tensor *candle_full(candle_ctx *ctx, candle_dtype dtype, int rank,
                                      const int64_t *shape, double value);
CANDLE_API candle_tensor *candle_zeros(candle_ctx *ctx, candle_dtype dtype, int rank,
                                       const int64_t *shape);
CANDLE_API candle_tensor *candle_ones(candle_ctx *ctx, candle_dtype dtype, int rank,
                                      const int64_t *shape);
/* Seeded, reproducible: uniform in [lo, hi) and normal(mean, std). */
CANDLE_API candle_tensor *candle_rand(candle_ctx *ctx, candle_dtype dtype, int rank,
                                      const int64_t *shape, uint64_t seed, double lo, double hi);
CANDLE_API candle_tensor *candle_randn(candle_ctx *ctx, candle_dtype dtype, int rank,
                                       const int64_t *shape, uint64_t seed, double mean,
                                       double std);

typedef struct candle_conv_params {
    int stride[2];
    int padding[2];
    int dilation[2];
    int groups;
} candle_conv_params;

/* x [N, C, L], w [O, C/groups, K], bias [O] or NULL -> [N, O, L'] */
CANDLE_API candle_tensor *candle_conv1d(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                                        candle_tensor *bias, const candle_conv_params *p);
/* x [N, C, H, W], w [O, C/groups, KH, KW] -> [N, O, H', W'] */
CANDLE_API candle_tensor *candle_conv2d(candle_ctx *ctx, candle_tensor *x, candle_tensor *w,
                                        candle_tensor *bias, const candle_conv_params *p);

/* Scaled dot-product attention.
 * q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] -> [B, Hq, Sq, Dv];
 * Hq a multiple of Hkv (grouped-query heads). mask (optional) is added to the
 * scores and broadcasts to [B, Hq, Sq, Skv]. causal: query i (absolute
 * position Skv - Sq + i) sees keys j <= that position. scale 0 = 1/sqrt(D). */
CANDLE_API candle_tensor *candle_attention(candle_ctx *ctx, candle_tensor *q, candle_tensor *k,
                                           candle_tensor *v, candle_tensor *mask, double scale,
                                           bool causal);

/* Attention of n query rows over a paged KV cache, after storing their own
 * keys and values in it (in place: the caches are written).
 * q [n, Hq, D], k [n, Hkv, D], v [n, Hkv, Dv]: the new rows (after RoPE);
 * k_cache [P, Hkv, D], v_cache [P, Hkv, Dv]: cache rows in blocks of `block`;
 * table i32 [n, 1 + T]: row i holds its position p_i, then its sequence's
 * block ids: position j of that sequence is cache row
 * table[i][1 + j / block] * block + j % block. Row i's k, v go to the row of
 * p_i; it sees positions max(0, p_i - window + 1) .. p_i (window 0: all of
 * them), so rows of one sequence also see each other's new keys. Rows must
 * not store to the same cache row. scale 0 = 1/sqrt(D). -> [n, Hq, Dv]. */
CANDLE_API candle_tensor *candle_paged_attention(candle_ctx *ctx, candle_tensor *q,
                                                 candle_tensor *k, candle_tensor *v,
                                                 candle_tensor *k_cache, candle_tensor *v_cache,
                                                 candle_tensor *table, int64_t block,
                                                 int64_t window, double scale);

#ifdef __cplusplus
}
#endif
#endif
