/* Fast row kernels for contiguous f32: unary and binary elementwise ops,
 * softmax / log_softmax over the last dim, rms_norm. Inputs need only a
 * contiguous last dim (outer dims may be strided, sliced or broadcast);
 * outputs are the node's own contiguous storage. Threads split rows, or
 * elements when the whole input is one contiguous run. */
#include <stdio.h>
#include <string.h>

#include "fast-impl.h"

/* Ops below this many elements run on one thread: waking workers costs
 * more than the loop. */
#define PAR_MIN_ELEMS 32768

static int64_t last_dim(const candle_tensor *t) { return t->rank ? t->shape[t->rank - 1] : 1; }
static int64_t last_stride(const candle_tensor *t) { return t->rank ? t->stride[t->rank - 1] : 4; }

static int64_t n_rows(const candle_tensor *dst) {
    int64_t d = last_dim(dst);
    return d ? candle_tensor_numel(dst) / d : 0;
}

/* Byte offset of row r (row-major over dst's outer dims) in t, which has
 * dst's shape. */
static int64_t row_offset(const candle_tensor *t, int64_t r) {
    int64_t off = 0;
    for (int d = t->rank - 2; d >= 0; d--) {
        off += (r % t->shape[d]) * t->stride[d];
        r /= t->shape[d];
    }
    return off;
}

static bool f32_out(const candle_tensor *dst) {
    return dst->dtype == CANDLE_DTYPE_F32 && candle_tensor_is_contiguous(dst);
}

static bool f32_rows_in(const candle_tensor *x, const candle_tensor *dst) {
    return x && x->dtype == CANDLE_DTYPE_F32 && candle_tensor_same_shape(x, dst) &&
           (last_stride(x) == 4 || last_dim(x) == 1);
}

static void plan_rows(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    p->nth = cpu_tasks_for((double)candle_tensor_numel(dst), PAR_MIN_ELEMS, n_threads, 4);
    p->wsize = 0;
}

/* Elements of a unary op as plain ones (an add's): the transcendental ones
 * cost about 8 (silu 0.5-0.7 ns an element on the AVX2 table, add 0.05-0.1),
 * so they are split from 4096 elements (a batched decode step's
 * silu(gate) * up: 16 rows x 1536 ran 16.6 us on one thread). */
static double unary_cost(candle_op op) {
    switch (op) {
    case CANDLE_OP_EXP: case CANDLE_OP_LOG: case CANDLE_OP_SIN: case CANDLE_OP_COS: case CANDLE_OP_TANH:
    case CANDLE_OP_SIGMOID: case CANDLE_OP_SILU: case CANDLE_OP_GELU_ERF: case CANDLE_OP_GELU_TANH: return 8;
    default: return 1;
    }
}

static void plan_unary(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    double work = (double)candle_tensor_numel(dst) * unary_cost((candle_op)dst->op);
    p->nth = cpu_tasks_for(work, PAR_MIN_ELEMS, n_threads, 4);
    p->wsize = 0;
}

/* ---- unary ---- */

static bool match_unary(const candle_tensor *dst) {
    return dst->op >= CANDLE_OP_NEG && dst->op <= CANDLE_OP_CLAMP && f32_out(dst) &&
           f32_rows_in(dst->src[0], dst);
}

static candle_status run_unary(const cpu_task *t, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *x = dst->src[0];
    candle_op op = (candle_op)dst->op;
    float *y = (float *)tensor_ptr(dst);
    if (candle_tensor_is_contiguous(x)) {
        int64_t lo, hi;
        cpu_split(candle_tensor_numel(dst), 64, t->ith, t->nth, &lo, &hi);
        if (lo < hi) simd->unary(op, (const float *)tensor_ptr(x) + lo, y + lo, hi - lo, dst->fparams);
        return CANDLE_OK;
    }
    int64_t d = last_dim(dst), r0, r1;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        simd->unary(op, (const float *)(tensor_ptr(x) + row_offset(x, r)), y + r * d, d, dst->fparams);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_unary = {"unary f32", match_unary, plan_unary, run_unary};

/* ---- binary ---- */

static bool match_binary(const candle_tensor *dst) {
    if (dst->op < CANDLE_OP_ADD || dst->op > CANDLE_OP_POW || !f32_out(dst)) return false;
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    if (!f32_rows_in(a, dst) || !b || b->dtype != CANDLE_DTYPE_F32 || !candle_tensor_same_shape(b, dst))
        return false;
    return last_stride(b) == 4 || last_stride(b) == 0 || last_dim(b) == 1;
}

static candle_status run_binary(const cpu_task *t, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    candle_op op = (candle_op)dst->op;
    float *y = (float *)tensor_ptr(dst);
    if (candle_tensor_is_contiguous(a) && candle_tensor_is_contiguous(b)) {
        int64_t lo, hi;
        cpu_split(candle_tensor_numel(dst), 64, t->ith, t->nth, &lo, &hi);
        if (lo < hi)
            simd->binary(op, (const float *)tensor_ptr(a) + lo, (const float *)tensor_ptr(b) + lo, 1,
                         y + lo, hi - lo);
        return CANDLE_OK;
    }
    int64_t d = last_dim(dst), r0, r1;
    int64_t b_step = last_stride(b) == 4 ? 1 : 0;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        simd->binary(op, (const float *)(tensor_ptr(a) + row_offset(a, r)),
                     (const float *)(tensor_ptr(b) + row_offset(b, r)), b_step, y + r * d, d);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_binary = {"binary f32", match_binary, plan_rows, run_binary};

/* ---- unary fused into a binary, add into a layer_norm (graph.c's fuse_elementwise) ---- */

/* The other pair, an add of two same-shape rows into the layer_norm that
 * reads it (a post-norm encoder's residual): the norm's kernel adds the rows
 * as the add's (one exactly rounded f32 add), then normalises the sum. */
static bool add_norm_ok(const candle_tensor *u, const candle_tensor *b) {
    return u->op == CANDLE_OP_ADD && b->op == CANDLE_OP_LAYER_NORM && b->src[0] == u &&
           f32_rows_in(u->src[0], u) && f32_rows_in(u->src[1], u) && cpu_fast_kernel_for(b) == &cpu_fast_layer_norm;
}

/* The pair's form (b an add, sub, mul or div of u's shape reading u once)
 * is the graph's to check (fuse_elementwise, the backend iface's contract);
 * here, whether both nodes would run the fast kernels above. The binary
 * being exactly rounded, each element then comes out of the same vector
 * code whatever the block it sits in (the unary's tail goes through its
 * vector code too), so blocks give the unfused bits. */
bool cpu_fused_ok(const candle_tensor *u, const candle_tensor *b) {
    if (candle_tensor_numel(b) <= 0) return false;
    if (u->op == CANDLE_OP_ADD) return add_norm_ok(u, b);
    return cpu_fast_kernel_for(u) == &cpu_fast_unary && cpu_fast_kernel_for(b) == &cpu_fast_binary;
}

int cpu_fused_tasks(const candle_tensor *u, const candle_tensor *b, int n_threads) {
    double per = u->op == CANDLE_OP_ADD ? 3 : 1 + unary_cost((candle_op)u->op);
    return cpu_tasks_for((double)candle_tensor_numel(b) * per, PAR_MIN_ELEMS, n_threads, 4);
}

/* Elements per block: the unary's result stays in L1 for the binary. */
#define FUSED_BLOCK 512

static void fused_span(const cpu_simd *simd, const candle_tensor *u, const candle_tensor *b,
                       const float *x, const float *o, int64_t o_step, float *y, int64_t n) {
    _Alignas(64) float tmp[FUSED_BLOCK];
    bool u_first = b->src[0] == u;
    for (int64_t k = 0; k < n; k += FUSED_BLOCK) {
        int64_t len = n - k < FUSED_BLOCK ? n - k : FUSED_BLOCK;
        simd->unary((candle_op)u->op, x + k, tmp, len, u->fparams);
        const float *ob = o + k * o_step;
        if (u_first) simd->binary((candle_op)b->op, tmp, ob, o_step, y + k, len);
        else simd->binary((candle_op)b->op, ob, tmp, 1, y + k, len);
    }
}

/* dst = layer_norm(x (+ r)) over the task's rows; r (NULL: none) has x's shape. */
static void ln_rows(const cpu_task *t, const candle_tensor *x, const candle_tensor *r, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *w = dst->n_src > 1 ? dst->src[1] : NULL, *b = dst->n_src > 2 ? dst->src[2] : NULL;
    const float *wp = w ? (const float *)tensor_ptr(w) : NULL, *bp = b ? (const float *)tensor_ptr(b) : NULL;
    int64_t d = last_dim(dst), r0, r1;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t i = r0; i < r1; i++)
        simd->layer_norm((const float *)(tensor_ptr(x) + row_offset(x, i)),
                         r ? (const float *)(tensor_ptr(r) + row_offset(r, i)) : NULL, wp, bp,
                         (float *)tensor_ptr(dst) + i * d, d, dst->fparams[0]);
}

/* The unfused kernels' split (whole runs where the inputs are contiguous,
 * else rows); within it, blocks. An add into its norm: the norm's rows. */
candle_status cpu_fused_run(const cpu_task *t, const candle_tensor *u, candle_tensor *b) {
    if (u->op == CANDLE_OP_ADD) {
        ln_rows(t, u->src[0], u->src[1], b);
        return CANDLE_OK;
    }
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *x = u->src[0], *o = b->src[0] == u ? b->src[1] : b->src[0];
    bool u_first = b->src[0] == u;
    float *y = (float *)tensor_ptr(b);
    if (candle_tensor_is_contiguous(x) && candle_tensor_is_contiguous(o)) {
        int64_t lo, hi;
        cpu_split(candle_tensor_numel(b), 64, t->ith, t->nth, &lo, &hi);
        if (lo < hi)
            fused_span(simd, u, b, (const float *)tensor_ptr(x) + lo, (const float *)tensor_ptr(o) + lo,
                       1, y + lo, hi - lo);
        return CANDLE_OK;
    }
    /* o broadcast along the row (stride 0) only as the second operand, as
     * the binary kernel takes it */
    int64_t d = last_dim(b), r0, r1;
    int64_t o_step = last_stride(o) == 4 || last_dim(o) == 1 ? 1 : 0;
    if (!u_first && o_step == 0) {
        /* the first operand broadcast: not a layout match_binary accepts */
        snprintf(t->errmsg, t->errmsg_len, "fused: broadcast first operand");
        return CANDLE_ERR_UNSUPPORTED;
    }
    cpu_split(n_rows(b), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        fused_span(simd, u, b, (const float *)(tensor_ptr(x) + row_offset(x, r)),
                   (const float *)(tensor_ptr(o) + row_offset(o, r)), o_step, y + r * d, d);
    return CANDLE_OK;
}

/* ---- softmax over the last dim ---- */

static bool match_softmax(const candle_tensor *dst) {
    if ((dst->op != CANDLE_OP_SOFTMAX && dst->op != CANDLE_OP_LOG_SOFTMAX) || !f32_out(dst)) return false;
    int64_t dim = dst->iparams[0];
    if (dim < 0) dim += dst->rank;
    return dst->rank > 0 && dim == dst->rank - 1 && f32_rows_in(dst->src[0], dst);
}

static candle_status run_softmax(const cpu_task *t, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *x = dst->src[0];
    int64_t d = last_dim(dst), r0, r1;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        simd->softmax((const float *)(tensor_ptr(x) + row_offset(x, r)), (float *)tensor_ptr(dst) + r * d, d,
                      dst->op == CANDLE_OP_LOG_SOFTMAX);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_softmax = {"softmax f32 (last dim)", match_softmax, plan_rows, run_softmax};

/* ---- rms_norm ---- */

static bool match_rms(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_RMS_NORM || !f32_out(dst) || !f32_rows_in(dst->src[0], dst)) return false;
    const candle_tensor *w = dst->n_src > 1 ? dst->src[1] : NULL;
    return !w || (w->dtype == CANDLE_DTYPE_F32 && w->rank == 1 && w->shape[0] == last_dim(dst) &&
                  (w->stride[0] == 4 || w->shape[0] == 1));
}

static candle_status run_rms(const cpu_task *t, candle_tensor *dst) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *x = dst->src[0], *w = dst->n_src > 1 ? dst->src[1] : NULL;
    const float *wp = w ? (const float *)tensor_ptr(w) : NULL;
    int64_t d = last_dim(dst), r0, r1;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        simd->rms_norm((const float *)(tensor_ptr(x) + row_offset(x, r)), wp, (float *)tensor_ptr(dst) + r * d,
                       d, (float)dst->fparams[0]);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_rms_norm = {"rms_norm f32", match_rms, plan_rows, run_rms};

/* ---- layer_norm (encoders): rows split across threads ---- */

static bool ln_param_ok(const candle_tensor *p, int64_t d) {
    return !p || (p->dtype == CANDLE_DTYPE_F32 && p->rank == 1 && p->shape[0] == d && p->stride[0] == 4);
}

static bool match_ln(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_LAYER_NORM || !f32_out(dst) || !f32_rows_in(dst->src[0], dst)) return false;
    int64_t d = last_dim(dst);
    return ln_param_ok(dst->n_src > 1 ? dst->src[1] : NULL, d) && ln_param_ok(dst->n_src > 2 ? dst->src[2] : NULL, d);
}

static candle_status run_ln(const cpu_task *t, candle_tensor *dst) {
    ln_rows(t, dst->src[0], NULL, dst);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_layer_norm = {"layer_norm f32", match_ln, plan_rows, run_ln};

/* ---- copy of contiguous rows (KV cache writes, reshape copies) ---- */

static int64_t last_stride_of(const candle_tensor *t) { return t->rank ? t->stride[t->rank - 1] : 0; }

static bool half_dtype(candle_dtype t) { return t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16; }

/* f32 rows into whole blocks of a block type (a quantized KV cache). */
static bool block_dtype(candle_dtype t, int64_t n) {
    const candle_dtype_traits *tr = cpu_dtype(t);
    return tr->is_quantized && tr->from_f32 && n % tr->block_size == 0;
}

/* Rows contiguous on both sides, and either one plain dtype (each row a
 * memcpy) or f32 to f16/bf16 and back, or f32 to a block type (each row
 * through the dtype's row converter, as the reference converts them: f16
 * and bf16 round to nearest even like its element loop, block types
 * quantize a row at a time like it: the same bits; a KV cache of those
 * types is written this way). dst may be a view into a larger tensor
 * (copy_into), so its outer strides are arbitrary. */
static bool match_copy(const candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    if (dst->op != CANDLE_OP_COPY || !x || dst->rank < 1 || !candle_tensor_same_shape(x, dst)) return false;
    bool same = x->dtype == dst->dtype && !cpu_dtype(dst->dtype)->is_quantized;
    bool widen = half_dtype(x->dtype) && dst->dtype == CANDLE_DTYPE_F32;
    bool narrow = x->dtype == CANDLE_DTYPE_F32 && (half_dtype(dst->dtype) || block_dtype(dst->dtype, last_dim(dst)));
    if (!same && !widen && !narrow) return false;
    return (last_stride_of(dst) == (int64_t)cpu_dtype(dst->dtype)->type_size &&
            last_stride_of(x) == (int64_t)cpu_dtype(x->dtype)->type_size) ||
           last_dim(dst) == 1;
}

static candle_status run_copy(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *x = dst->src[0];
    const candle_dtype_traits *tx = cpu_dtype(x->dtype), *td = cpu_dtype(dst->dtype);
    int64_t d = last_dim(dst), r0, r1;
    cpu_split(n_rows(dst), 1, t->ith, t->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        char *out = tensor_ptr(dst) + row_offset(dst, r);
        const char *in = tensor_ptr(x) + row_offset(x, r);
        if (x->dtype == dst->dtype) memcpy(out, in, (size_t)d * td->type_size);
        else if (x->dtype == CANDLE_DTYPE_F32) td->from_f32((const float *)in, out, d);
        else tx->to_f32(in, (float *)out, d);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_copy = {"copy (contiguous rows: one dtype, f32 <-> f16/bf16, f32 -> blocks)", match_copy,
                                       plan_rows, run_copy};
