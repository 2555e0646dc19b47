/* Op parity over the backends (the role of ggml's test-backend-ops), through
 * the public API only: every op x dtype x layout is built in a context on
 * each backend configuration, computed (eagerly or as a lazy graph), read
 * back with candle_tensor_to_f32 and compared with a double-precision
 * reference computed here from the op's inputs as read back (so the inputs'
 * dtype rounding is already applied):
 *
 *   cpu          the CPU backend with the process defaults (candle_cpu_get_defaults:
 *                candle_cpu_default_params() unless an environment switch set them)
 *   cpu-ref      reference_only = true (the scalar ground-truth kernels)
 *   cpu-scalar   isa = CANDLE_CPU_ISA_SCALAR
 *   hidden       tests/common/hidden_backend.c: memory the host cannot address
 *   hidden-fb    the same refusing exp and matmul, so those run on the
 *                scheduler's CPU fallback with their data copied over and back
 *   (others)     every other backend the registry lists, with its defaults
 *                (candle_backend_init_by_name): a CUDA build's runs here too
 *
 * The hidden backends run the CPU kernels with the process defaults, so their
 * results must be the cpu backend's bits (memcmp). Builders that refuse a
 * dtype (CANDLE_ERR_DTYPE / CANDLE_ERR_UNSUPPORTED, checked on a lazy build
 * that computes nothing) skip the case on every backend; most must run.
 * Set CANDLE_PARITY_VERBOSE=1 for the worst error per op and dtype. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/candle.h"
#include "common/hidden_backend.h"
#include "test.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define N_THREADS 2
#define MAX_OPND 6
#define MIN_CASES 200

/* The CPU from the registry and its test variants, then every other
 * backend the registry lists (a GPU build's), each checked against the
 * double-precision reference; the hidden ones also against the CPU's bits. */
enum { BE_CPU, BE_REF, BE_SCALAR, BE_HIDDEN, BE_HIDDEN_FB, N_BE_FIXED, MAX_BE = N_BE_FIXED + 8 };
static const char *kBeName[MAX_BE] = {"cpu", "cpu-ref", "cpu-scalar", "hidden", "hidden-fb"};
static candle_backend *g_be[MAX_BE];
static int N_BE = N_BE_FIXED;
static long g_run[MAX_BE], g_fail[MAX_BE], g_skip, g_cases, g_lazy_cases;

static bool is_hidden(int be) { return be == BE_HIDDEN || be == BE_HIDDEN_FB; }
static bool g_verbose;

/* ---- layouts: how an operand reaches the op ---- */
enum {
    L_CONT,  /* a contiguous leaf */
    L_TRANS, /* transpose(-1, -2) of a leaf stored the other way */
    L_BCAST, /* dim 0 of size 1 expanded (binary ops: b a row vector, broadcast by the op) */
    L_SLICE, /* narrow(0, 1, n) and slice(-1, 1, 2n, 2): an offset and stride 2 */
    L_PERM,  /* rank 3: permute {2, 0, 1} of a leaf */
    L_OUTER, /* binary ops: a [M, 1] and b [N] broadcast to [M, N] */
    L_BATCH, /* matmul: batched operands, b transposed per batch */
    L_COUNT
};
static const char *const kLayoutName[L_COUNT] = {"contiguous", "transposed", "broadcast", "sliced",
                                                 "permuted", "outer", "batched"};

/* ---- value distributions ---- */
enum { D_NORMAL, D_POS, D_GRID, D_NONZERO, D_BOOL, D_SMALL, D_INT };

/* ---- op families ---- */
enum {
    K_UNARY, K_BINARY, K_WHERE, K_REDUCE, K_SOFTMAX, K_RMS, K_LN, K_MATMUL, K_ROPE,
    K_INDEX, K_EMBED, K_CONCAT, K_COPY, K_ATTN, K_CHAIN, K_MOE, K_COUNT
};

typedef struct tcase {
    int kind;
    candle_op op, op2; /* op2: K_CHAIN's unary */
    candle_dtype dt;   /* input dtype */
    candle_dtype dt2;  /* matmul weight / embedding table / cast target */
    int layout;
    int dim;
    bool keepdim, lazy, flag; /* flag: per family (rms/ln weight, rope positions, attention causal) */
    bool scaled;              /* rope: freq factors and YaRN (ramp, magnitude) */
    int64_t m, k, n;
    double p0, p1;
    char desc[64]; /* extra parameters for messages */
} tcase;

typedef struct arr {
    int rank;
    int64_t shape[CANDLE_MAX_RANK];
    double *v;
} arr;

static int64_t arr_numel(const arr *a) {
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->shape[i];
    return n;
}

/* ---- deterministic inputs ---- */
static uint64_t g_rng;
static double rnd(void) { /* [0, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}
static float gen(int dist) {
    double u = rnd();
    switch (dist) {
    case D_POS: return (float)(0.1 + 2.9 * u);
    case D_GRID: return (float)(floor(u * 9.0) * 0.5 - 2.0);
    case D_NONZERO: return (float)((0.5 + 1.5 * u) * (rnd() < 0.5 ? -1 : 1));
    case D_BOOL: return u < 0.5 ? 0.0f : 1.0f;
    case D_SMALL: return (float)(u - 0.5);
    case D_INT: return (float)(floor(u * 41.0) - 20.0);
    default: return (float)(4.0 * u - 2.0);
    }
}

/* One build of a case in one context. */
typedef struct run {
    candle_ctx *ctx;
    const tcase *c;
    int n_op;
    candle_tensor *opnd[MAX_OPND];
    candle_tensor *opnd_wt[MAX_OPND]; /* quantized weights: read this leaf [N, K] and transpose */
    bool failed_make;
} run;

static candle_tensor *leaf(run *r, candle_dtype dt, int rank, const int64_t *shape, int dist) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = gen(dist);
    candle_tensor *t = candle_tensor_from_f32(r->ctx, dt, rank, shape, v);
    free(v);
    if (!t) r->failed_make = true;
    return t;
}

/* An operand of logical shape `shape` reaching the op in `layout`. */
static candle_tensor *mk(run *r, candle_dtype dt, int rank, const int64_t *shape, int layout, int dist) {
    int64_t ls[CANDLE_MAX_RANK];
    memcpy(ls, shape, (size_t)rank * sizeof *ls);
    candle_tensor *t = NULL;
    switch (layout) {
    case L_TRANS:
        if (rank >= 2) {
            ls[rank - 1] = shape[rank - 2];
            ls[rank - 2] = shape[rank - 1];
            t = candle_transpose(r->ctx, leaf(r, dt, rank, ls, dist), -1, -2);
            break;
        }
        t = leaf(r, dt, rank, ls, dist);
        break;
    case L_BCAST:
        ls[0] = 1;
        t = candle_expand(r->ctx, leaf(r, dt, rank, ls, dist), rank, shape);
        break;
    case L_SLICE:
        if (rank >= 2) ls[0] += 2;
        ls[rank - 1] = 2 * shape[rank - 1] + 1;
        t = leaf(r, dt, rank, ls, dist);
        if (rank >= 2) t = candle_narrow(r->ctx, t, 0, 1, shape[0]);
        t = candle_slice(r->ctx, t, -1, 1, 1 + 2 * shape[rank - 1], 2);
        break;
    case L_PERM:
        if (rank == 3) {
            const int perm[3] = {2, 0, 1};
            ls[0] = shape[1], ls[1] = shape[2], ls[2] = shape[0];
            t = candle_permute(r->ctx, leaf(r, dt, rank, ls, dist), perm);
            break;
        }
        t = leaf(r, dt, rank, ls, dist);
        break;
    default: t = leaf(r, dt, rank, ls, dist); break;
    }
    if (r->n_op < MAX_OPND) r->opnd[r->n_op++] = t;
    return t;
}

static candle_tensor *reg(run *r, candle_tensor *t) {
    if (r->n_op < MAX_OPND) r->opnd[r->n_op++] = t;
    return t;
}

static candle_tensor *build(run *r) {
    const tcase *c = r->c;
    candle_ctx *ctx = r->ctx;
    int64_t M = c->m, N = c->n, K = c->k;
    switch (c->kind) {
    case K_UNARY: {
        int64_t s2[2] = {M, N}, s3[3] = {3, 5, N};
        candle_tensor *x = c->layout == L_PERM ? mk(r, c->dt, 3, s3, L_PERM, D_NORMAL)
                                               : mk(r, c->dt, 2, s2, c->layout,
                                                    (c->op == CANDLE_OP_LOG || c->op == CANDLE_OP_SQRT ||
                                                     c->op == CANDLE_OP_RSQRT)
                                                        ? D_POS
                                                        : D_NORMAL);
        if (c->op == CANDLE_OP_AFFINE) return candle_affine(ctx, x, c->p0, c->p1);
        if (c->op == CANDLE_OP_CLAMP) return candle_clamp(ctx, x, c->p0, c->p1);
        return candle_unary(ctx, c->op, x);
    }
    case K_BINARY:
    case K_CHAIN: {
        bool cmp = c->op >= CANDLE_OP_EQ && c->op <= CANDLE_OP_GE;
        bool mm = c->op == CANDLE_OP_MAXIMUM || c->op == CANDLE_OP_MINIMUM;
        int da = c->dt == CANDLE_DTYPE_I32 ? D_INT : cmp || mm ? D_GRID : c->op == CANDLE_OP_POW ? D_POS : D_NORMAL;
        int db = c->dt == CANDLE_DTYPE_I32 ? D_INT : cmp || mm ? D_GRID : c->op == CANDLE_OP_DIV ? D_NONZERO : D_NORMAL;
        if (c->kind == K_CHAIN && c->op2 == CANDLE_OP_SQRT) da = D_POS;
        candle_tensor *a, *b;
        int64_t s[2] = {M, N}, col[2] = {M, 1}, row[1] = {N};
        if (c->layout == L_BCAST) {
            a = mk(r, c->dt, 2, s, L_CONT, da);
            b = mk(r, c->dt, 1, row, L_CONT, db);
        } else if (c->layout == L_OUTER) {
            a = mk(r, c->dt, 2, col, L_CONT, da);
            b = mk(r, c->dt, 1, row, L_CONT, db);
        } else {
            a = mk(r, c->dt, 2, s, c->layout, da);
            b = mk(r, c->dt, 2, s, c->layout == L_TRANS ? L_CONT : c->layout, db);
        }
        if (c->kind == K_CHAIN) {
            candle_tensor *u = candle_unary(ctx, c->op2, a);
            return c->flag ? candle_binary(ctx, c->op, b, u) : candle_binary(ctx, c->op, u, b);
        }
        return candle_binary(ctx, c->op, a, b);
    }
    case K_WHERE: {
        int64_t s[2] = {M, N}, row[1] = {N}, col[2] = {M, 1};
        candle_tensor *cond = mk(r, CANDLE_DTYPE_BOOL, 2, c->layout == L_BCAST ? col : s,
                                 c->layout == L_BCAST ? L_CONT : c->layout, D_BOOL);
        candle_tensor *a = mk(r, c->dt, 2, s, c->layout == L_BCAST ? L_CONT : c->layout, D_NORMAL);
        candle_tensor *b = c->layout == L_BCAST ? mk(r, c->dt, 1, row, L_CONT, D_NORMAL)
                                                : mk(r, c->dt, 2, s, L_CONT, D_NORMAL);
        return candle_where(ctx, cond, a, b);
    }
    case K_REDUCE:
    case K_SOFTMAX: {
        int64_t s2[2] = {M, N}, s3[3] = {3, 5, N};
        int dist = c->flag ? D_GRID : D_NORMAL; /* topk_mask: D_GRID for ties */
        candle_tensor *x = c->layout == L_PERM ? mk(r, c->dt, 3, s3, L_PERM, dist)
                                               : mk(r, c->dt, 2, s2, c->layout, dist);
        if (c->op == CANDLE_OP_TOPK_MASK) return candle_topk_mask(ctx, x, (int64_t)c->p0, c->dim, c->p1);
        if (c->kind == K_SOFTMAX)
            return c->op == CANDLE_OP_SOFTMAX ? candle_softmax(ctx, x, c->dim) : candle_log_softmax(ctx, x, c->dim);
        return candle_reduce(ctx, c->op, x, c->dim, c->keepdim);
    }
    case K_RMS:
    case K_LN: {
        int64_t s[2] = {M, N}, d[1] = {N};
        candle_tensor *x = mk(r, c->dt, 2, s, c->layout, D_NORMAL);
        candle_tensor *w = c->flag ? mk(r, c->dt2, 1, d, L_CONT, D_POS) : NULL;
        if (c->kind == K_RMS) return candle_rms_norm(ctx, x, w, c->p0);
        candle_tensor *bias = c->flag ? mk(r, c->dt2, 1, d, L_CONT, D_NORMAL) : NULL;
        return candle_layer_norm(ctx, x, w, bias, c->p0);
    }
    case K_MOE: {
        /* x [M, K]; routing weights [M, E] with zeros (expert E-1 chosen by
         * no row); gate, up [E, N, K], down [E, K, N] of dtype dt2 */
        const int64_t E = 4;
        int64_t sx[2] = {M, K}, sw[2] = {M, E}, sg[3] = {E, N, K}, sd[3] = {E, K, N};
        candle_tensor *x = mk(r, c->dt, 2, sx, c->layout == L_SLICE ? L_SLICE : L_CONT, D_NORMAL);
        float *wv = malloc((size_t)(M * E) * sizeof *wv);
        for (int64_t i = 0; i < M; i++)
            for (int64_t e = 0; e < E; e++)
                wv[i * E + e] = e == E - 1 || (i + e) % 3 == 0 ? 0.0f : (float)(0.25 + rnd());
        candle_tensor *w = reg(r, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, sw, wv));
        free(wv);
        candle_tensor *g = reg(r, leaf(r, c->dt2, 3, sg, D_NORMAL));
        candle_tensor *u = reg(r, leaf(r, c->dt2, 3, sg, D_NORMAL));
        candle_tensor *d = reg(r, leaf(r, c->dt2, 3, sd, D_NORMAL));
        return candle_moe_ffn(ctx, x, w, g, u, d, c->op2);
    }
    case K_MATMUL: {
        bool weight = c->dt2 != c->dt;
        int64_t sa[3] = {2, M, K}, sb[3] = {2, K, N};
        candle_tensor *a, *b;
        if (weight) {
            /* x [M, K] @ transpose(w [N, K]), as the models use it; flag: plus
             * the sums of x over groups of p0 times corr [K / p0, N]
             * (matmul_group_corr; batched: x [2, M, K]) */
            bool batched = c->flag && c->layout == L_BATCH;
            a = batched ? mk(r, c->dt, 3, sa, L_CONT, D_NORMAL)
                        : mk(r, c->dt, 2, sa + 1, c->layout == L_SLICE ? L_SLICE : L_CONT, D_NORMAL);
            int64_t sw[2] = {N, K};
            candle_tensor *w = leaf(r, c->dt2, 2, sw, D_NORMAL);
            b = reg(r, candle_transpose(ctx, w, 0, 1));
            r->opnd_wt[1] = w;
            if (c->flag) { /* corr transposed as the models store it, or contiguous */
                int64_t G = (int64_t)c->p0, sc[2] = {K / G, N};
                int lc = c->layout == L_SLICE && G == 128 ? L_CONT : L_TRANS;
                return candle_matmul_group_corr(ctx, a, b, mk(r, CANDLE_DTYPE_F32, 2, sc, lc, D_NORMAL), G);
            }
        } else if (c->layout == L_BATCH || c->layout == L_BCAST) {
            a = mk(r, c->dt, 3, sa, L_CONT, D_NORMAL);
            b = mk(r, c->dt, 3, sb, c->layout == L_BATCH ? L_TRANS : L_BCAST, D_NORMAL);
        } else {
            a = mk(r, c->dt, 2, sa + 1, c->layout == L_SLICE ? L_SLICE : c->layout == L_PERM ? L_TRANS : L_CONT,
                   D_NORMAL);
            b = mk(r, c->dt, 2, sb + 1, c->layout == L_TRANS || c->layout == L_SLICE ? L_TRANS : L_CONT, D_NORMAL);
        }
        return candle_matmul(ctx, a, b);
    }
    case K_ROPE: {
        int64_t s[4] = {2, M, 3, N}; /* [B, S, H, D] */
        candle_tensor *x = c->layout == L_SLICE ? mk(r, c->dt, 3, s + 1, L_SLICE, D_NORMAL)
                           : c->layout == L_TRANS ? mk(r, c->dt, 3, s + 1, L_TRANS, D_NORMAL)
                                                  : mk(r, c->dt, 4, s, L_CONT, D_NORMAL);
        candle_rope_params p = {.mode = c->dim ? CANDLE_ROPE_HALF : CANDLE_ROPE_INTERLEAVED,
                                .n_dims = (int)c->k, .freq_base = c->p0, .freq_scale = c->p1, .pos_offset = 3};
        candle_tensor *pos = NULL;
        if (c->flag) {
            int32_t ids[64];
            for (int64_t i = 0; i < M; i++) ids[i] = (int32_t)((i * 7 + 2) % 23);
            int64_t ps[1] = {M};
            pos = reg(r, candle_tensor_from_i32(ctx, 1, ps, ids));
        }
        if (c->scaled) { /* the factors are the last operand */
            float ff[32];
            int64_t nf = (c->k ? c->k : N) / 2;
            for (int64_t i = 0; i < nf; i++) ff[i] = 1.0f + 0.75f * (float)(i % 5);
            p.freq_factors = reg(r, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, &nf, ff));
            p.ext_factor = 1.0;
            p.attn_factor = 1.2;
            p.n_ctx_orig = 8;
        }
        return candle_rope(ctx, x, pos, &p);
    }
    case K_INDEX:
    case K_EMBED: {
        int32_t ids[6] = {3, 0, 7, 3, 5, 1};
        int64_t ni[1] = {6};
        if (c->kind == K_EMBED) {
            int64_t s[2] = {M, N};
            candle_tensor *tab = mk(r, c->dt2, 2, s, L_CONT, D_NORMAL);
            return candle_embedding(ctx, tab, reg(r, candle_tensor_from_i32(ctx, 1, ni, ids)));
        }
        int64_t s[2] = {M, N};
        candle_tensor *x = mk(r, c->dt, 2, s, c->layout, D_NORMAL);
        return candle_index_select(ctx, x, c->dim, reg(r, candle_tensor_from_i32(ctx, 1, ni, ids)));
    }
    case K_CONCAT: {
        candle_tensor *xs[3];
        int n = c->flag ? 3 : 2;
        for (int i = 0; i < n; i++) {
            int64_t s[2] = {M, N};
            s[c->dim] += i * 3;
            xs[i] = mk(r, c->dt, 2, s, i == 1 ? c->layout : L_CONT, D_NORMAL);
        }
        return candle_concat(ctx, xs, n, c->dim);
    }
    case K_COPY: {
        int64_t s2[2] = {M, N}, s3[3] = {3, 5, N};
        candle_tensor *x = c->layout == L_PERM ? mk(r, c->dt, 3, s3, L_PERM, D_NORMAL)
                                               : mk(r, c->dt, 2, s2, c->layout, D_NORMAL);
        return c->dt2 == c->dt ? candle_contiguous(ctx, x) : candle_cast(ctx, x, c->dt2);
    }
    case K_ATTN: {
        int64_t sq[4] = {1, 4, M, K}, sk[4] = {1, 2, N, K}, sm[2] = {M, N};
        candle_tensor *q = mk(r, c->dt, 4, sq, L_CONT, D_NORMAL);
        candle_tensor *k = mk(r, c->dt, 4, sk, c->layout == L_TRANS ? L_TRANS : L_CONT, D_NORMAL);
        candle_tensor *v = mk(r, c->dt, 4, sk, L_CONT, D_NORMAL);
        candle_tensor *mask = c->dim ? mk(r, c->dt, 2, sm, L_CONT, D_NORMAL) : NULL;
        return candle_attention(ctx, q, k, v, mask, c->p0, c->flag);
    }
    }
    return NULL;
}

/* ---- the double reference ---- */

static int norm_dim(int dim, int rank) { return dim < 0 ? dim + rank : dim; }

/* Linear index into a of the output multi-index oi (NumPy broadcasting). */
static int64_t bidx(const arr *a, int R, const int64_t *oi) {
    int64_t li = 0;
    for (int d = 0; d < a->rank; d++) {
        int od = R - a->rank + d;
        li = li * a->shape[d] + (a->shape[d] == 1 ? 0 : oi[od]);
    }
    return li;
}

static void bshape(const arr *x, int n, arr *out) {
    out->rank = 0;
    for (int i = 0; i < n; i++)
        if (x[i].rank > out->rank) out->rank = x[i].rank;
    for (int d = 0; d < out->rank; d++) {
        out->shape[d] = 1;
        for (int i = 0; i < n; i++) {
            int sd = d - (out->rank - x[i].rank);
            if (sd >= 0 && x[i].shape[sd] != 1) out->shape[d] = x[i].shape[sd];
        }
    }
}

static bool next_index(int rank, const int64_t *shape, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

static double ref_unary(candle_op op, double x, double p0, double p1) {
    switch (op) {
    case CANDLE_OP_NEG: return -x;
    case CANDLE_OP_ABS: return fabs(x);
    case CANDLE_OP_EXP: return exp(x);
    case CANDLE_OP_LOG: return log(x);
    case CANDLE_OP_SQRT: return sqrt(x);
    case CANDLE_OP_RSQRT: return 1.0 / sqrt(x);
    case CANDLE_OP_SIN: return sin(x);
    case CANDLE_OP_COS: return cos(x);
    case CANDLE_OP_TANH: return tanh(x);
    case CANDLE_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CANDLE_OP_RELU: return x > 0 ? x : 0.0;
    case CANDLE_OP_SILU: return x / (1.0 + exp(-x));
    case CANDLE_OP_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case CANDLE_OP_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case CANDLE_OP_AFFINE: return x * p0 + p1;
    case CANDLE_OP_CLAMP: return x < p0 ? p0 : x > p1 ? p1 : x;
    default: return NAN;
    }
}

static double ref_binary(candle_op op, double a, double b) {
    switch (op) {
    case CANDLE_OP_ADD: return a + b;
    case CANDLE_OP_SUB: return a - b;
    case CANDLE_OP_MUL: return a * b;
    case CANDLE_OP_DIV: return a / b;
    case CANDLE_OP_MAXIMUM: return a > b ? a : b;
    case CANDLE_OP_MINIMUM: return a < b ? a : b;
    case CANDLE_OP_POW: return pow(a, b);
    case CANDLE_OP_EQ: return a == b;
    case CANDLE_OP_NE: return a != b;
    case CANDLE_OP_LT: return a < b;
    case CANDLE_OP_LE: return a <= b;
    case CANDLE_OP_GT: return a > b;
    case CANDLE_OP_GE: return a >= b;
    default: return NAN;
    }
}

static void alloc_out(arr *o) { o->v = calloc((size_t)(arr_numel(o) ? arr_numel(o) : 1), sizeof *o->v); }

/* Expected output of c from its operands x; false when the family has none. */
static bool reference(const tcase *c, const arr *x, int n_x, arr *o) {
    memset(o, 0, sizeof *o);
    switch (c->kind) {
    case K_UNARY:
    case K_COPY:
        *o = (arr){.rank = x[0].rank};
        memcpy(o->shape, x[0].shape, sizeof o->shape);
        alloc_out(o);
        for (int64_t i = 0; i < arr_numel(o); i++)
            o->v[i] = c->kind == K_COPY ? x[0].v[i] : ref_unary(c->op, x[0].v[i], c->p0, c->p1);
        return true;
    case K_BINARY:
    case K_CHAIN:
    case K_WHERE: {
        bshape(x, n_x, o);
        alloc_out(o);
        int64_t idx[CANDLE_MAX_RANK] = {0}, i = 0;
        do {
            if (c->kind == K_WHERE) {
                o->v[i] = x[0].v[bidx(&x[0], o->rank, idx)] != 0 ? x[1].v[bidx(&x[1], o->rank, idx)]
                                                                 : x[2].v[bidx(&x[2], o->rank, idx)];
            } else {
                double a = x[0].v[bidx(&x[0], o->rank, idx)], b = x[1].v[bidx(&x[1], o->rank, idx)];
                if (c->kind == K_CHAIN) a = ref_unary(c->op2, a, 0, 0);
                o->v[i] = c->kind == K_CHAIN && c->flag ? ref_binary(c->op, b, a) : ref_binary(c->op, a, b);
            }
            i++;
        } while (o->rank && next_index(o->rank, o->shape, idx));
        return true;
    }
    case K_REDUCE:
    case K_SOFTMAX: {
        const arr *a = &x[0];
        int d = norm_dim(c->dim, a->rank);
        int64_t outer = 1, len = a->shape[d], inner = 1;
        for (int i = 0; i < d; i++) outer *= a->shape[i];
        for (int i = d + 1; i < a->rank; i++) inner *= a->shape[i];
        *o = (arr){.rank = 0};
        for (int i = 0; i < a->rank; i++) {
            if (i == d && c->kind == K_REDUCE) {
                if (c->keepdim) o->shape[o->rank++] = 1;
            } else {
                o->shape[o->rank++] = a->shape[i];
            }
        }
        alloc_out(o);
        for (int64_t p = 0; p < outer; p++)
            for (int64_t q = 0; q < inner; q++) {
                const double *v = a->v + p * len * inner + q;
                double acc = 0, mx = -INFINITY, mn = INFINITY;
                int64_t am = 0;
                for (int64_t j = 0; j < len; j++) {
                    double e = v[j * inner];
                    acc += e;
                    if (e > mx) mx = e, am = j;
                    if (e < mn) mn = e;
                }
                if (c->op == CANDLE_OP_TOPK_MASK) { /* keep the k best: larger value, then lower index */
                    for (int64_t j = 0; j < len; j++) {
                        int64_t above = 0;
                        for (int64_t i = 0; i < len; i++)
                            above += v[i * inner] > v[j * inner] || (v[i * inner] == v[j * inner] && i < j);
                        o->v[p * len * inner + j * inner + q] = above < (int64_t)c->p0 ? v[j * inner] : c->p1;
                    }
                } else if (c->kind == K_REDUCE) {
                    double r = c->op == CANDLE_OP_SUM    ? acc
                               : c->op == CANDLE_OP_MEAN ? acc / (double)len
                               : c->op == CANDLE_OP_MAX  ? mx
                               : c->op == CANDLE_OP_MIN  ? mn
                                                         : (double)am;
                    o->v[p * inner + q] = r;
                } else {
                    double s = 0;
                    for (int64_t j = 0; j < len; j++) s += exp(v[j * inner] - mx);
                    for (int64_t j = 0; j < len; j++) {
                        double e = v[j * inner] - mx;
                        o->v[p * len * inner + j * inner + q] = c->op == CANDLE_OP_SOFTMAX ? exp(e) / s : e - log(s);
                    }
                }
            }
        return true;
    }
    case K_RMS:
    case K_LN: {
        const arr *a = &x[0];
        *o = *a;
        o->v = NULL;
        alloc_out(o);
        int64_t D = a->shape[a->rank - 1], rows = arr_numel(a) / D;
        for (int64_t r = 0; r < rows; r++) {
            const double *v = a->v + r * D;
            double mean = 0, ss = 0;
            if (c->kind == K_LN) {
                for (int64_t j = 0; j < D; j++) mean += v[j];
                mean /= (double)D;
            }
            for (int64_t j = 0; j < D; j++) ss += (v[j] - mean) * (v[j] - mean);
            double inv = 1.0 / sqrt(ss / (double)D + c->p0);
            for (int64_t j = 0; j < D; j++) {
                double y = (v[j] - mean) * inv;
                if (n_x > 1) y *= x[1].v[j];
                if (n_x > 2) y += x[2].v[j];
                o->v[r * D + j] = y;
            }
        }
        return true;
    }
    case K_MOE: {
        const arr *xa = &x[0], *wa = &x[1], *ga = &x[2], *ua = &x[3], *da = &x[4];
        int64_t M = xa->shape[0], K = xa->shape[1], E = wa->shape[1], N = ga->shape[1];
        *o = (arr){.rank = 2, .shape = {M, K}};
        alloc_out(o);
        double *h = malloc((size_t)N * sizeof *h);
        for (int64_t i = 0; i < M; i++)
            for (int64_t e = 0; e < E; e++) {
                double w = wa->v[i * E + e];
                if (w == 0) continue;
                for (int64_t j = 0; j < N; j++) {
                    double sg = 0, su = 0;
                    for (int64_t l = 0; l < K; l++) {
                        sg += ga->v[(e * N + j) * K + l] * xa->v[i * K + l];
                        su += ua->v[(e * N + j) * K + l] * xa->v[i * K + l];
                    }
                    double act = c->op2 == CANDLE_OP_SILU
                                     ? sg / (1 + exp(-sg))
                                     : 0.5 * sg * (1 + tanh(0.7978845608028654 * (sg + 0.044715 * sg * sg * sg)));
                    h[j] = act * su;
                }
                for (int64_t l = 0; l < K; l++) {
                    double s = 0;
                    for (int64_t j = 0; j < N; j++) s += da->v[(e * K + l) * N + j] * h[j];
                    o->v[i * K + l] += w * s;
                }
            }
        free(h);
        return true;
    }
    case K_MATMUL: {
        const arr *a = &x[0], *b = &x[1];
        int64_t M = a->shape[a->rank - 2], K = a->shape[a->rank - 1], N = b->shape[b->rank - 1];
        int64_t B = a->rank == 3 ? a->shape[0] : 1;
        bool bb = b->rank == 3 && b->shape[0] > 1;
        *o = (arr){.rank = a->rank};
        if (a->rank == 3) o->shape[0] = B;
        o->shape[o->rank - 2] = M;
        o->shape[o->rank - 1] = N;
        alloc_out(o);
        for (int64_t z = 0; z < B; z++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t l = 0; l < K; l++)
                        s += a->v[(z * M + i) * K + l] * b->v[((bb ? z : 0) * K + l) * N + j];
                    o->v[(z * M + i) * N + j] = s;
                }
        if (c->flag) { /* matmul_group_corr: x[2] is corr [K / G, N] */
            int64_t G = (int64_t)c->p0;
            for (int64_t z = 0; z < B; z++)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t g = 0; g < K / G; g++) {
                        double sum = 0;
                        for (int64_t l = g * G; l < (g + 1) * G; l++) sum += a->v[(z * M + i) * K + l];
                        for (int64_t j = 0; j < N; j++) o->v[(z * M + i) * N + j] += sum * x[2].v[g * N + j];
                    }
        }
        return true;
    }
    case K_ROPE: {
        const arr *a = &x[0];
        *o = *a;
        o->v = NULL;
        alloc_out(o);
        int r = a->rank;
        int64_t S = a->shape[r - 3], H = a->shape[r - 2], D = a->shape[r - 1];
        int64_t nd = c->k ? c->k : D, half = nd / 2, rows = arr_numel(a) / D;
        bool inter = c->dim == 0;
        const double *ff = c->scaled ? x[n_x - 1].v : NULL;
        /* YaRN (n_ctx_orig 8, betas 32 and 1): the share of the unscaled angle
         * falls from 1 to 0 between pairs lo and hi */
        double twopi = 2 * 3.14159265358979323846, mag = c->scaled ? 1.2 * (1 + 0.1 * log(1 / c->p1)) : 1;
        double lo = fmax(0, floor(nd * log(8 / (32 * twopi)) / (2 * log(c->p0))));
        double hi = fmin(nd - 1, ceil(nd * log(8 / (1 * twopi)) / (2 * log(c->p0))));
        for (int64_t row = 0; row < rows; row++) {
            int64_t s = (row / H) % S;
            double pos = c->flag ? x[1].v[s] : (double)(3 + s);
            const double *v = a->v + row * D;
            double *w = o->v + row * D;
            for (int64_t k = 0; k < D; k++) w[k] = v[k];
            for (int64_t i = 0; i < half; i++) {
                double ex = pos * pow(c->p0, -2.0 * (double)i / (double)nd) / (ff ? ff[i] : 1);
                double ang = c->p1 * ex;
                if (ff) {
                    double y = ((double)i - lo) / (hi > lo ? hi - lo : 0.001);
                    double share = 1 - fmin(1, fmax(0, y));
                    ang = ang * (1 - share) + ex * share;
                }
                int64_t k0 = inter ? 2 * i : i, k1 = inter ? 2 * i + 1 : i + half;
                double cs = mag * cos(ang), sn = mag * sin(ang);
                w[k0] = v[k0] * cs - v[k1] * sn;
                w[k1] = v[k0] * sn + v[k1] * cs;
            }
        }
        return true;
    }
    case K_INDEX:
    case K_EMBED: {
        const arr *a = &x[0], *id = &x[1];
        int d = c->kind == K_EMBED ? 0 : norm_dim(c->dim, a->rank);
        int64_t n = arr_numel(id);
        *o = *a;
        o->v = NULL;
        o->shape[d] = n;
        alloc_out(o);
        int64_t R = a->shape[0], C = a->shape[1];
        for (int64_t i = 0; i < o->shape[0]; i++)
            for (int64_t j = 0; j < o->shape[1]; j++) {
                int64_t si = d == 0 ? (int64_t)id->v[i] : i, sj = d == 1 ? (int64_t)id->v[j] : j;
                (void)R;
                o->v[i * o->shape[1] + j] = a->v[si * C + sj];
            }
        return true;
    }
    case K_CONCAT: {
        int d = c->dim;
        *o = x[0];
        o->v = NULL;
        for (int i = 1; i < n_x; i++) o->shape[d] += x[i].shape[d];
        alloc_out(o);
        int64_t at = 0;
        for (int i = 0; i < n_x; i++) {
            for (int64_t p = 0; p < x[i].shape[0]; p++)
                for (int64_t q = 0; q < x[i].shape[1]; q++) {
                    int64_t op = d == 0 ? p + at : p, oq = d == 1 ? q + at : q;
                    o->v[op * o->shape[1] + oq] = x[i].v[p * x[i].shape[1] + q];
                }
            at += x[i].shape[d];
        }
        return true;
    }
    case K_ATTN: {
        const arr *q = &x[0], *k = &x[1], *v = &x[2], *mask = n_x > 3 ? &x[3] : NULL;
        int64_t Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3], Hkv = k->shape[1], Skv = k->shape[2],
                Dv = v->shape[3];
        double scale = c->p0 ? c->p0 : 1.0 / sqrt((double)D);
        *o = (arr){.rank = 4, .shape = {1, Hq, Sq, Dv}};
        alloc_out(o);
        double *sc = malloc((size_t)Skv * sizeof *sc);
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / (Hq / Hkv);
            for (int64_t i = 0; i < Sq; i++) {
                int64_t last = c->flag ? Skv - Sq + i : Skv - 1;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= last; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < D; e++) s += q->v[(h * Sq + i) * D + e] * k->v[(hk * Skv + j) * D + e];
                    s = s * scale + (mask ? mask->v[i * Skv + j] : 0);
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                for (int64_t j = 0; j <= last; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t e = 0; e < Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= last; j++) acc += sc[j] * v->v[(hk * Skv + j) * Dv + e];
                    o->v[(h * Sq + i) * Dv + e] = acc / sum;
                }
            }
        }
        free(sc);
        return true;
    }
    }
    return false;
}

/* ---- tolerances (normalised MSE) ---- */
static double tolerance(const tcase *c, candle_dtype out) {
    if (out == CANDLE_DTYPE_BOOL || out == CANDLE_DTYPE_I64 || out == CANDLE_DTYPE_I32) return 0;
    if (c->kind == K_MOE) { /* two products in a row, the second of a rounded activation */
        const candle_dtype_traits *tr = candle_dtype_info(c->dt2);
        return tr->is_quantized ? 1e-3 : c->dt2 == CANDLE_DTYPE_F32 ? 1e-9 : 1e-4;
    }
    if (c->kind == K_MATMUL && c->dt2 != c->dt) {
        const candle_dtype_traits *tr = candle_dtype_info(c->dt2);
        if (tr->is_quantized) return 2e-4; /* the activation is quantized for the integer dots */
        if (c->dt2 == CANDLE_DTYPE_BF16) return 1e-4;
        return 1e-5;
    }
    /* f16 chains: the unary's result is rounded to f16 before the binary, and
     * a division by it doubles that error (observed 4.5e-7) */
    if (out == CANDLE_DTYPE_F16 && c->kind == K_CHAIN) return 4e-6;
    if (out == CANDLE_DTYPE_F16) return 1e-6;
    if (out == CANDLE_DTYPE_BF16) return 1e-4;
    return 1e-9;
}

/* ---- error tracking for the verbose table ---- */
static double g_worst[K_COUNT][CANDLE_OP_COUNT][3];
static const char *const kKindName[K_COUNT] = {"unary", "binary", "where", "reduce", "softmax", "rms_norm",
                                               "layer_norm", "matmul", "rope", "index_select", "embedding",
                                               "concat", "copy", "attention", "chain", "moe_ffn"};

static const char *case_str(const tcase *c, char *buf, size_t n) {
    const char *opn = c->kind == K_RMS ? "rms_norm" : c->kind == K_LN ? "layer_norm"
                      : c->kind == K_INDEX ? "index_select" : c->kind == K_EMBED ? "embedding"
                      : c->kind == K_CONCAT ? "concat" : c->kind == K_COPY ? (c->dt2 == c->dt ? "contiguous" : "cast")
                      : c->kind == K_ATTN ? "attention" : c->kind == K_ROPE ? "rope"
                                                                           : candle_op_name(c->op);
    char chain[48] = "";
    if (c->kind == K_CHAIN)
        snprintf(chain, sizeof chain, "(%s(a)%s)", candle_op_name(c->op2), c->flag ? ", swapped" : "");
    snprintf(buf, n, "%s%s %s%s%s layout=%s %s m,k,n=%" PRId64 ",%" PRId64 ",%" PRId64 "%s%s", opn, chain,
             candle_dtype_name(c->dt), c->dt2 != c->dt ? "/" : "", c->dt2 != c->dt ? candle_dtype_name(c->dt2) : "",
             kLayoutName[c->layout], c->lazy ? "lazy" : "eager", c->m, c->k, c->n, c->desc[0] ? " " : "", c->desc);
    return buf;
}

/* Reads t (any backend, any layout) as doubles; quantized transposed
 * weights through their leaf. */
static bool read_arr(run *r, int i, arr *a) {
    candle_tensor *t = r->opnd[i], *src = r->opnd_wt[i] ? r->opnd_wt[i] : t;
    a->rank = candle_tensor_rank(t);
    for (int d = 0; d < a->rank; d++) a->shape[d] = candle_tensor_dim(t, d);
    int64_t n = candle_tensor_nelements(t);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    a->v = malloc((size_t)(n ? n : 1) * sizeof *a->v);
    candle_status s = candle_tensor_to_f32(src, f);
    if (s != CANDLE_OK) {
        free(f);
        return false;
    }
    if (r->opnd_wt[i]) { /* leaf [N, K] -> [K, N] */
        int64_t N = candle_tensor_dim(src, 0), K = candle_tensor_dim(src, 1);
        for (int64_t p = 0; p < N; p++)
            for (int64_t q = 0; q < K; q++) a->v[q * N + p] = f[p * K + q];
        /* the transpose view itself reads back as the same values */
        float *fv = malloc((size_t)n * sizeof *fv);
        candle_status sv = candle_tensor_to_f32(t, fv);
        int64_t bad = 0, first = -1;
        for (int64_t j = 0; sv == CANDLE_OK && j < n; j++)
            if ((double)fv[j] != a->v[j] && !bad++) first = j;
        char cs[256];
        CHECK_MSG(sv == CANDLE_OK && bad == 0,
                  "%s: to_f32 of transpose(w) (%s): %" PRId64 " of %" PRId64 " values differ from w's, first at %" PRId64
                  " (%.9g, w's %.9g)",
                  case_str(r->c, cs, sizeof cs), candle_status_name(sv), bad, n, first, first >= 0 ? fv[first] : 0.0,
                  first >= 0 ? a->v[first] : 0.0);
        free(fv);
    } else {
        for (int64_t j = 0; j < n; j++) a->v[j] = f[j];
    }
    free(f);
    return true;
}

/* Is got[i] right where ref says argmax j (ties allowed)? */
static bool argmax_ok(const tcase *c, const arr *x, const arr *o, const float *got) {
    const arr *a = &x[0];
    int d = norm_dim(c->dim, a->rank);
    int64_t outer = 1, len = a->shape[d], inner = 1;
    for (int i = 0; i < d; i++) outer *= a->shape[i];
    for (int i = d + 1; i < a->rank; i++) inner *= a->shape[i];
    for (int64_t p = 0; p < outer; p++)
        for (int64_t q = 0; q < inner; q++) {
            int64_t g = (int64_t)got[p * inner + q], e = (int64_t)o->v[p * inner + q];
            if (g == e) continue;
            if (g < 0 || g >= len) return false;
            if (a->v[p * len * inner + g * inner + q] != a->v[p * len * inner + e * inner + q]) return false;
        }
    return true;
}

static candle_ctx *make_ctx(int be, bool lazy) {
    candle_ctx_params p = candle_ctx_default_params();
    p.backend = g_be[be];
    p.eager = !lazy;
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return NULL;
    return ctx;
}

/* Whether the builders take the case at all (a lazy build computes nothing). */
static bool supported(const tcase *c, char *why, size_t n) {
    candle_ctx *ctx = make_ctx(BE_CPU, true);
    run r = {.ctx = ctx, .c = c};
    g_rng = 1;
    candle_tensor *out = build(&r);
    candle_status s = candle_errcode(ctx);
    bool ok = out != NULL && !r.failed_make;
    if (!ok) {
        snprintf(why, n, "%s: %s", candle_status_name(s), candle_errmsg(ctx));
        if (s != CANDLE_ERR_DTYPE && s != CANDLE_ERR_UNSUPPORTED) {
            char cs[256];
            CHECK_MSG(0, "%s: the builder failed: %s", case_str(c, cs, sizeof cs), why);
            why[0] = 0;
        }
    }
    candle_ctx_free(ctx);
    return ok;
}

static void run_case(const tcase *c, uint64_t seed) {
    char cs[256], why[512];
    if (!supported(c, why, sizeof why)) {
        if (why[0]) {
            g_skip++;
            if (g_verbose) printf("skip %s: %s\n", case_str(c, cs, sizeof cs), why);
        }
        return;
    }
    g_cases++;
    g_lazy_cases += c->lazy;
    float *first = NULL;
    int64_t first_n = 0;
    for (int be = 0; be < N_BE; be++) {
        candle_ctx *ctx = make_ctx(be, c->lazy);
        run r = {.ctx = ctx, .c = c};
        g_rng = seed;
        candle_tensor *out = ctx ? build(&r) : NULL;
        candle_status s = out && !r.failed_make ? (c->lazy ? candle_compute(ctx, out) : candle_errcode(ctx))
                                                : candle_errcode(ctx);
        g_run[be]++;
        bool fail = false;
        if (!out || s != CANDLE_OK) {
            CHECK_MSG(0, "%s on %s: %s: %s", case_str(c, cs, sizeof cs), kBeName[be], candle_status_name(s),
                      candle_errmsg(ctx));
            g_fail[be]++;
            candle_ctx_free(ctx);
            continue;
        }
        arr x[MAX_OPND] = {{0}}, o;
        bool read_ok = true;
        for (int i = 0; i < r.n_op; i++) read_ok = read_ok && read_arr(&r, i, &x[i]);
        int64_t n = candle_tensor_nelements(out);
        float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
        candle_status rs = candle_tensor_to_f32(out, got);
        CHECK_MSG(read_ok && rs == CANDLE_OK, "%s on %s: read back: %s", case_str(c, cs, sizeof cs), kBeName[be],
                  candle_errmsg(ctx));
        if (!read_ok || rs != CANDLE_OK) fail = true;
        if (!fail && reference(c, x, r.n_op, &o)) {
            /* shape */
            bool shape_ok = o.rank == candle_tensor_rank(out) && arr_numel(&o) == n;
            for (int d = 0; shape_ok && d < o.rank; d++) shape_ok = o.shape[d] == candle_tensor_dim(out, d);
            CHECK_MSG(shape_ok, "%s on %s: output shape rank %d, %" PRId64 " elements; expected rank %d, %" PRId64,
                      case_str(c, cs, sizeof cs), kBeName[be], candle_tensor_rank(out), n, o.rank, arr_numel(&o));
            if (!shape_ok) fail = true;
            candle_dtype odt = candle_tensor_dtype(out);
            if (!fail && c->kind == K_REDUCE && c->op == CANDLE_OP_ARGMAX) {
                bool ok = argmax_ok(c, x, &o, got);
                CHECK_MSG(ok, "%s on %s: argmax differs", case_str(c, cs, sizeof cs), kBeName[be]);
                fail = !ok;
            } else if (!fail) {
                double tol = tolerance(c, odt);
                double num = 0, den = 0, maxerr = 0;
                int64_t worst = 0, bad = 0;
                for (int64_t i = 0; i < n; i++) {
                    double e = (double)got[i] - o.v[i];
                    if (isnan(e) && !(isnan(got[i]) && isnan(o.v[i]))) e = INFINITY;
                    if (isnan(e)) e = 0;
                    num += e * e;
                    den += o.v[i] * o.v[i];
                    if (fabs(e) > maxerr) maxerr = fabs(e), worst = i;
                    if (tol == 0 && e != 0) bad++;
                }
                double nmse = den > 0 ? num / den : num;
                bool ok = tol == 0 ? bad == 0 : nmse <= tol;
                CHECK_MSG(ok,
                          "%s on %s: nmse %.3g > %.3g (max abs err %.3g at %" PRId64 ": expected %.9g got %.9g; "
                          "%" PRId64 " of %" PRId64 " differ)",
                          case_str(c, cs, sizeof cs), kBeName[be], nmse, tol, maxerr, worst, o.v[worst],
                          (double)got[worst], bad, n);
                fail = !ok;
                int di = c->dt == CANDLE_DTYPE_F16 ? 1 : c->dt == CANDLE_DTYPE_BF16 ? 2 : 0;
                candle_op key = c->kind == K_MATMUL ? (candle_op)c->dt2 : c->op;
                if ((unsigned)key < CANDLE_OP_COUNT && nmse > g_worst[c->kind][key][di])
                    g_worst[c->kind][key][di] = nmse;
            }
            free(o.v);
        }
        /* every backend agrees with the cpu backend bit for bit where it runs the same kernels */
        if (be == BE_CPU) {
            first = got;
            first_n = n;
            got = NULL;
        } else if (is_hidden(be) && first && !fail) {
            bool same = first_n == n && memcmp(first, got, (size_t)n * sizeof *got) == 0;
            int64_t at = 0;
            while (!same && at < n && at < first_n && memcmp(&first[at], &got[at], sizeof *got) == 0) at++;
            CHECK_MSG(same, "%s on %s: not the cpu backend's bits (first at %" PRId64 ": cpu %.9g, %s %.9g)",
                      case_str(c, cs, sizeof cs), kBeName[be], at, at < first_n ? first[at] : 0.0, kBeName[be],
                      at < n ? got[at] : 0.0);
            fail = fail || !same;
        }
        if (is_hidden(be)) {
            uint64_t copies = 0, bytes = 0, fb = 0;
            candle_ctx_transfer_stats(ctx, &copies, &bytes, &fb);
            bool refused = c->op == CANDLE_OP_EXP || c->op2 == CANDLE_OP_EXP || c->op == CANDLE_OP_MATMUL;
            CHECK_MSG(!candle_tensor_is_host(out), "%s on %s: output in host memory", case_str(c, cs, sizeof cs),
                      kBeName[be]);
            if (be == BE_HIDDEN) {
                CHECK_MSG(fb == 0, "%s on hidden: %" PRIu64 " fallback nodes", case_str(c, cs, sizeof cs), fb);
            } else if (refused) {
                CHECK_MSG(fb > 0 && copies > 0, "%s on %s: %" PRIu64 " fallback nodes, %" PRIu64 " copies",
                          case_str(c, cs, sizeof cs), kBeName[be], fb, copies);
            }
        }
        if (fail) g_fail[be]++;
        for (int i = 0; i < r.n_op; i++) free(x[i].v);
        free(got);
        candle_ctx_free(ctx);
    }
    free(first);
}

/* ---- the cases ---- */
static const candle_dtype kFloat[3] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};
static uint64_t g_seed = 12345;
static int g_case_no;

static void add(tcase c) {
    if (c.kind != K_MATMUL && c.kind != K_EMBED && c.kind != K_COPY && c.kind != K_RMS && c.kind != K_LN &&
        c.kind != K_MOE)
        c.dt2 = c.dt;
    c.lazy = c.lazy || (g_case_no++ % 3 == 1); /* a third of the cases as lazy graphs */
    run_case(&c, g_seed++);
}

static void cases_unary(void) {
    const candle_op ops[] = {CANDLE_OP_NEG, CANDLE_OP_ABS, CANDLE_OP_EXP, CANDLE_OP_LOG, CANDLE_OP_SQRT,
                             CANDLE_OP_RSQRT, CANDLE_OP_SIN, CANDLE_OP_COS, CANDLE_OP_TANH, CANDLE_OP_SIGMOID,
                             CANDLE_OP_RELU, CANDLE_OP_SILU, CANDLE_OP_GELU_ERF, CANDLE_OP_GELU_TANH,
                             CANDLE_OP_AFFINE, CANDLE_OP_CLAMP};
    const int layouts[] = {L_CONT, L_TRANS, L_BCAST, L_SLICE, L_PERM};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        for (int d = 0; d < 3; d++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
                if (layouts[l] == L_PERM && d) continue;
                tcase c = {.kind = K_UNARY, .op = ops[i], .dt = kFloat[d], .layout = layouts[l], .m = 7, .n = 37};
                if (ops[i] == CANDLE_OP_AFFINE) c.p0 = 0.75, c.p1 = -0.5;
                if (ops[i] == CANDLE_OP_CLAMP) c.p0 = -0.8, c.p1 = 1.1;
                add(c);
            }
}

/* Block dtypes into elementwise ops and reductions: the builders refuse
 * them (counted as skipped, never run). */
static void cases_refused(void) {
    add((tcase){.kind = K_UNARY, .op = CANDLE_OP_EXP, .dt = CANDLE_DTYPE_Q8_0, .layout = L_CONT, .m = 2, .n = 64});
    add((tcase){.kind = K_BINARY, .op = CANDLE_OP_ADD, .dt = CANDLE_DTYPE_Q4_0, .layout = L_CONT, .m = 2, .n = 64});
    add((tcase){.kind = K_SOFTMAX, .op = CANDLE_OP_SOFTMAX, .dt = CANDLE_DTYPE_Q8_0, .layout = L_CONT, .dim = -1,
                .m = 2, .n = 64});
}

static void cases_binary(void) {
    const candle_op ops[] = {CANDLE_OP_ADD, CANDLE_OP_SUB, CANDLE_OP_MUL, CANDLE_OP_DIV, CANDLE_OP_MAXIMUM,
                             CANDLE_OP_MINIMUM, CANDLE_OP_POW, CANDLE_OP_EQ, CANDLE_OP_NE, CANDLE_OP_LT,
                             CANDLE_OP_LE, CANDLE_OP_GT, CANDLE_OP_GE};
    const int layouts[] = {L_CONT, L_TRANS, L_BCAST, L_SLICE, L_OUTER};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        for (int d = 0; d < 3; d++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
                add((tcase){.kind = K_BINARY, .op = ops[i], .dt = kFloat[d], .layout = layouts[l], .m = 7, .n = 37});
    /* i32 operands: exact integer arithmetic (division and pow left out: they truncate) */
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        for (int l = 0; l < 3; l++) {
            if (ops[i] == CANDLE_OP_DIV || ops[i] == CANDLE_OP_POW) continue;
            add((tcase){.kind = K_BINARY, .op = ops[i], .dt = CANDLE_DTYPE_I32, .layout = layouts[l * 2], .m = 7,
                        .n = 37});
        }
    /* where */
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < 4; l++)
            add((tcase){.kind = K_WHERE, .op = CANDLE_OP_WHERE, .dt = kFloat[d], .layout = l, .m = 6, .n = 19});
    /* a unary feeding a binary (fused in lazy graphs on the CPU) */
    const candle_op us[] = {CANDLE_OP_SILU, CANDLE_OP_EXP, CANDLE_OP_NEG, CANDLE_OP_SQRT, CANDLE_OP_GELU_TANH};
    const candle_op bs[] = {CANDLE_OP_MUL, CANDLE_OP_ADD, CANDLE_OP_SUB, CANDLE_OP_DIV};
    for (size_t u = 0; u < sizeof us / sizeof *us; u++)
        for (size_t b = 0; b < sizeof bs / sizeof *bs; b++)
            for (int d = 0; d < 2; d++)
                add((tcase){.kind = K_CHAIN, .op = bs[b], .op2 = us[u], .dt = kFloat[d], .layout = L_CONT,
                            .lazy = true, .flag = (u + b) % 2 == 1, .m = 5, .n = 41});
}

static void cases_reduce(void) {
    const candle_op ops[] = {CANDLE_OP_SUM, CANDLE_OP_MEAN, CANDLE_OP_MAX, CANDLE_OP_MIN, CANDLE_OP_ARGMAX};
    const int layouts[] = {L_CONT, L_TRANS, L_BCAST, L_SLICE, L_PERM};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        for (int d = 0; d < 3; d++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
                for (int dim = 0; dim < 2; dim++) {
                    tcase c = {.kind = K_REDUCE, .op = ops[i], .dt = kFloat[d], .layout = layouts[l],
                               .dim = dim ? -1 : (layouts[l] == L_PERM ? 1 : 0), .keepdim = (l + dim) % 2 == 0,
                               .m = 9, .n = 33};
                    snprintf(c.desc, sizeof c.desc, "dim=%d keepdim=%d", c.dim, c.keepdim);
                    add(c);
                }
    /* topk_mask: k below, at and past the line's length, ties (grid values) */
    const int64_t ks[] = {1, 2, 8, 45};
    for (int d = 0; d < 3; d++)
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
            for (int ki = 0; ki < 4; ki++) {
                tcase c = {.kind = K_SOFTMAX, .op = CANDLE_OP_TOPK_MASK, .dt = kFloat[d], .layout = layouts[l],
                           .dim = ki % 2 ? 0 : -1, .m = 6, .n = 45, .p0 = (double)ks[ki] + (ki == 3 ? 5 : 0),
                           .p1 = ki == 2 ? -1.5 : 0.0, .flag = ki >= 2};
                snprintf(c.desc, sizeof c.desc, "dim=%d k=%g fill=%g%s", c.dim, c.p0, c.p1, c.flag ? " ties" : "");
                add(c);
            }
    const candle_op sm[] = {CANDLE_OP_SOFTMAX, CANDLE_OP_LOG_SOFTMAX};
    for (int i = 0; i < 2; i++)
        for (int d = 0; d < 3; d++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
                for (int dim = 0; dim < 2; dim++) {
                    tcase c = {.kind = K_SOFTMAX, .op = sm[i], .dt = kFloat[d], .layout = layouts[l],
                               .dim = dim ? -1 : 0, .m = 6, .n = 45};
                    snprintf(c.desc, sizeof c.desc, "dim=%d", c.dim);
                    add(c);
                }
}

static void cases_norm(void) {
    const int layouts[] = {L_CONT, L_TRANS, L_BCAST, L_SLICE};
    for (int kind = K_RMS; kind <= K_LN; kind++)
        for (int d = 0; d < 3; d++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
                for (int w = 0; w < 3; w++) {
                    /* w: 0 none, 1 weights of x's dtype, 2 f32 weights */
                    if (w == 2 && d == 0) continue;
                    tcase c = {.kind = kind, .op = kind == K_RMS ? CANDLE_OP_RMS_NORM : CANDLE_OP_LAYER_NORM,
                               .dt = kFloat[d], .dt2 = w == 2 ? CANDLE_DTYPE_F32 : kFloat[d], .layout = layouts[l],
                               .flag = w > 0, .m = 5, .n = 64, .p0 = 1e-5};
                    snprintf(c.desc, sizeof c.desc, "%s", w ? "weighted" : "unweighted");
                    add(c);
                }
}

static void cases_matmul(void) {
    const int64_t shapes[][3] = {{1, 64, 48}, {7, 32, 16}, {33, 64, 64}, {64, 64, 64}};
    const int layouts[] = {L_CONT, L_TRANS, L_SLICE, L_PERM, L_BATCH, L_BCAST};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
                if (shapes[s][0] == 64 && layouts[l] != L_TRANS && layouts[l] != L_CONT) continue;
                tcase c = {.kind = K_MATMUL, .op = CANDLE_OP_MATMUL, .dt = kFloat[d], .dt2 = kFloat[d],
                           .layout = layouts[l], .m = shapes[s][0], .k = shapes[s][1], .n = shapes[s][2]};
                if (layouts[l] == L_PERM) snprintf(c.desc, sizeof c.desc, "a transposed");
                add(c);
            }
    /* x f32 [M, K] @ transpose(w [N, K]) for weight dtypes */
    const candle_dtype wts[] = {CANDLE_DTYPE_F16,  CANDLE_DTYPE_BF16, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_0,
                                CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q4_K,
                                CANDLE_DTYPE_Q6_K, CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_IQ4_NL, CANDLE_DTYPE_Q4_Z128};
    const int64_t ms[] = {1, 4, 40}, ns[] = {32, 64, 48};
    for (size_t w = 0; w < sizeof wts / sizeof *wts; w++)
        for (size_t m = 0; m < 3; m++)
            for (int sl = 0; sl < 2; sl++) {
                if (sl && m != 1) continue;
                add((tcase){.kind = K_MATMUL, .op = CANDLE_OP_MATMUL, .dt = CANDLE_DTYPE_F32, .dt2 = wts[w],
                            .layout = sl ? L_SLICE : L_TRANS, .m = ms[m], .k = 256, .n = ns[m]});
            }
    /* q4_z128 rows of an odd block count (the matrix-vector tail) */
    for (int64_t m = 1; m <= 3; m += 2)
        add((tcase){.kind = K_MATMUL, .op = CANDLE_OP_MATMUL, .dt = CANDLE_DTYPE_F32, .dt2 = CANDLE_DTYPE_Q4_Z128,
                    .layout = L_TRANS, .m = m, .k = 384, .n = 24});
}

/* matmul_group_corr (asymmetric 4-bit weights as Q4_0 plus a correction):
 * one row (the matrix-vector job), a few, many (the dequantizing GEMM),
 * sliced and batched activations, groups of one block and of several */
static void cases_group_corr(void) {
    const candle_dtype wts[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_F16, CANDLE_DTYPE_Q4_K};
    const int64_t ms[] = {1, 3, 300}, groups[] = {32, 128};
    const int layouts[] = {L_TRANS, L_SLICE, L_BATCH};
    for (size_t w = 0; w < sizeof wts / sizeof *wts; w++)
        for (size_t m = 0; m < 3; m++)
            for (int l = 0; l < 3; l++)
                for (int g = 0; g < 2; g++) {
                    if ((wts[w] == CANDLE_DTYPE_Q4_K && groups[g] != 128) || (m == 2 && l == 2)) continue;
                    tcase c = {.kind = K_MATMUL, .op = CANDLE_OP_MATMUL_GROUP_CORR, .dt = CANDLE_DTYPE_F32,
                               .dt2 = wts[w], .layout = layouts[l], .flag = true, .m = ms[m], .k = 256,
                               .n = m == 2 ? 40 : 72, .p0 = (double)groups[g]};
                    snprintf(c.desc, sizeof c.desc, "group corr, groups of %d", (int)groups[g]);
                    add(c);
                }
}

/* moe_ffn: one row (decode) and many (prefill), float and quantized experts */
static void cases_moe(void) {
    const candle_dtype wts[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_Q8_0,
                                CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_K};
    const int64_t ms[] = {1, 9};
    for (size_t w = 0; w < sizeof wts / sizeof *wts; w++)
        for (int m = 0; m < 2; m++)
            for (int sl = 0; sl < 2; sl++) {
                tcase c = {.kind = K_MOE, .op = CANDLE_OP_MOE_FFN, .op2 = sl ? CANDLE_OP_GELU_TANH : CANDLE_OP_SILU,
                           .dt = CANDLE_DTYPE_F32, .dt2 = wts[w], .layout = sl ? L_SLICE : L_CONT, .m = ms[m],
                           .k = 256, .n = wts[w] == CANDLE_DTYPE_Q4_K ? 256 : 32};
                snprintf(c.desc, sizeof c.desc, "4 experts, %s", sl ? "gelu_tanh" : "silu");
                add(c);
            }
}

static void cases_misc(void) {
    /* rope: mode, n_dims, positions */
    const int layouts[] = {L_CONT, L_SLICE, L_TRANS};
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < 3; l++)
            for (int mode = 0; mode < 2; mode++)
                for (int v = 0; v < 4; v++) { /* v >= 2: freq factors and YaRN */
                    tcase c = {.kind = K_ROPE, .op = CANDLE_OP_ROPE, .dt = kFloat[d], .layout = layouts[l],
                               .dim = mode, .flag = v & 1, .scaled = v >= 2, .m = 5, .k = (v & 1) ? 8 : 0,
                               .n = 16, .p0 = 10000.0, .p1 = v ? 0.5 : 1.0};
                    snprintf(c.desc, sizeof c.desc, "%s n_dims=%d %s%s", mode ? "half" : "interleaved", (int)c.k,
                             (v & 1) ? "positions" : "offset 3", v >= 2 ? " factors+yarn" : "");
                    add(c);
                }
    /* index_select and embedding */
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < 4; l++)
            for (int dim = 0; dim < 2; dim++) {
                tcase c = {.kind = K_INDEX, .op = CANDLE_OP_INDEX_SELECT, .dt = kFloat[d], .layout = l, .dim = dim,
                           .m = 9, .n = 12};
                snprintf(c.desc, sizeof c.desc, "dim=%d", dim);
                add(c);
            }
    const candle_dtype tabs[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_Q8_0,
                                 CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_K};
    for (size_t t = 0; t < sizeof tabs / sizeof *tabs; t++)
        add((tcase){.kind = K_EMBED, .op = CANDLE_OP_INDEX_SELECT, .dt = CANDLE_DTYPE_F32, .dt2 = tabs[t],
                    .layout = L_CONT, .m = 10, .n = 256});
    /* concat */
    for (int d = 0; d < 3; d++)
        for (int l = 0; l < 4; l++)
            for (int dim = 0; dim < 2; dim++) {
                tcase c = {.kind = K_CONCAT, .op = CANDLE_OP_CONCAT, .dt = kFloat[d], .layout = l, .dim = dim,
                           .flag = l % 2 == 0, .m = 4, .n = 10};
                snprintf(c.desc, sizeof c.desc, "dim=%d n=%d", dim, c.flag ? 3 : 2);
                add(c);
            }
    /* contiguous copies of views, and casts */
    const int vl[] = {L_TRANS, L_BCAST, L_SLICE, L_PERM};
    for (int d = 0; d < 3; d++)
        for (int t = 0; t < 3; t++)
            for (int l = 0; l < 4; l++)
                add((tcase){.kind = K_COPY, .op = CANDLE_OP_COPY, .dt = kFloat[d], .dt2 = kFloat[t], .layout = vl[l],
                            .m = 7, .n = 29});
    /* attention: q [1, 4, Sq, D], k, v [1, 2, Skv, D] (grouped-query), mask [Sq, Skv] */
    for (int d = 0; d < 3; d++)
        for (int causal = 0; causal < 2; causal++)
            for (int mask = 0; mask < 2; mask++)
                for (int l = 0; l < 2; l++) {
                    tcase c = {.kind = K_ATTN, .op = CANDLE_OP_ATTENTION, .dt = kFloat[d], .layout = l ? L_TRANS : L_CONT,
                               .flag = causal, .dim = mask, .m = 5, .k = 16, .n = 9, .p0 = mask ? 0.3 : 0};
                    snprintf(c.desc, sizeof c.desc, "%s%s", causal ? "causal" : "full", mask ? " masked" : "");
                    add(c);
                }
}

int main(void) {
    const char *v = getenv("CANDLE_PARITY_VERBOSE");
    g_verbose = v && v[0] && v[0] != '0';
    candle_cpu_params p = candle_cpu_get_defaults();
    p.n_threads = N_THREADS;
    CHECK_OK(NULL, candle_backend_init_by_name(&g_be[BE_CPU], "cpu", &p));
    candle_cpu_params pr = p;
    pr.reference_only = true;
    CHECK_OK(NULL, candle_backend_cpu_init_params(&g_be[BE_REF], &pr));
    candle_cpu_params ps = p;
    ps.isa = CANDLE_CPU_ISA_SCALAR;
    CHECK_OK(NULL, candle_backend_cpu_init_params(&g_be[BE_SCALAR], &ps));
    g_be[BE_HIDDEN] = test_hidden_backend_init(N_THREADS, NULL);
    const candle_op refused[] = {CANDLE_OP_EXP, CANDLE_OP_MATMUL, CANDLE_OP_NONE};
    g_be[BE_HIDDEN_FB] = test_hidden_backend_init(N_THREADS, refused);
    for (int r = 0; r < candle_backend_count() && N_BE < MAX_BE; r++) {
        const char *name = candle_backend_reg_name(r);
        if (!strcmp(name, "cpu")) continue;
        kBeName[N_BE] = name;
        CHECK_OK(NULL, candle_backend_init_by_name(&g_be[N_BE], name, NULL));
        N_BE++;
    }
    for (int i = 0; i < N_BE; i++) CHECK_MSG(g_be[i] != NULL, "backend %s not made", kBeName[i]);
    for (int i = 0; i < N_BE; i++)
        if (!g_be[i]) return test_done("test_backend_ops");

    cases_unary();
    cases_binary();
    cases_reduce();
    cases_norm();
    cases_matmul();
    cases_misc();
    cases_moe();
    cases_group_corr();
    cases_refused();

    if (g_verbose) {
        printf("worst nmse per op (f32 / f16 / bf16):\n");
        for (int k = 0; k < K_COUNT; k++)
            for (int o = 0; o < CANDLE_OP_COUNT; o++) {
                const double *w = g_worst[k][o];
                if (w[0] || w[1] || w[2])
                    printf("  %-12s %-12s %9.3g %9.3g %9.3g\n", kKindName[k],
                           k == K_MATMUL ? candle_dtype_name((candle_dtype)o) : candle_op_name((candle_op)o), w[0],
                           w[1], w[2]);
            }
    }
    printf("test_backend_ops: %ld cases (%ld as lazy graphs), %ld skipped as unsupported\n", g_cases, g_lazy_cases,
           g_skip);
    for (int i = 0; i < N_BE; i++) printf("  %-10s %5ld run, %ld failed\n", kBeName[i], g_run[i], g_fail[i]);
    CHECK_MSG(g_cases >= MIN_CASES, "only %ld cases ran (want %d)", g_cases, MIN_CASES);
    CHECK_MSG(g_cases >= 4 * g_skip, "%ld cases skipped of %ld: most must run", g_skip, g_cases + g_skip);
    long live, allocs, graphs;
    for (int i = BE_HIDDEN; i <= BE_HIDDEN_FB; i++) {
        test_hidden_backend_counts(g_be[i], &allocs, &live, &graphs);
        CHECK_MSG(live == 0, "%s: %ld storages still live of %ld", kBeName[i], live, allocs);
    }
    for (int i = 0; i < N_BE; i++) candle_backend_free(g_be[i]);
    return test_done("test_backend_ops");
}
