/* The CPU backend: memory from the heap, nodes run by the kernel table. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast-impl.h"
#if defined(__aarch64__)
#include "quant/quant-kernels-impl.h" /* candle info: the quantized dots chosen */
#endif

/* Backend state: the thread pool and the scratch that fast kernels ask for
 * in their plan (grown on demand, kept between nodes). */
typedef struct cpu_impl {
    const cpu_config *cfg; /* the kernels chosen from the backend's params */
    pthread_mutex_t busy; /* one fast node at a time: the pool and scratch are shared */
    cpu_pool *pool;
    void *work;
    size_t work_size;
    char (*errmsgs)[256]; /* [n_threads]: one per thread of a fast kernel */
    candle_status *status; /* [n_threads] */
} cpu_impl;

static cpu_kernel_fn kernels[CANDLE_OP_COUNT] = {
    [CANDLE_OP_COPY] = cpu_ref_copy,
    [CANDLE_OP_NEG] = cpu_ref_unary,
    [CANDLE_OP_ABS] = cpu_ref_unary,
    [CANDLE_OP_EXP] = cpu_ref_unary,
    [CANDLE_OP_LOG] = cpu_ref_unary,
    [CANDLE_OP_SQRT] = cpu_ref_unary,
    [CANDLE_OP_RSQRT] = cpu_ref_unary,
    [CANDLE_OP_SIN] = cpu_ref_unary,
    [CANDLE_OP_COS] = cpu_ref_unary,
    [CANDLE_OP_TANH] = cpu_ref_unary,
    [CANDLE_OP_SIGMOID] = cpu_ref_unary,
    [CANDLE_OP_RELU] = cpu_ref_unary,
    [CANDLE_OP_SILU] = cpu_ref_unary,
    [CANDLE_OP_GELU_ERF] = cpu_ref_unary,
    [CANDLE_OP_GELU_TANH] = cpu_ref_unary,
    [CANDLE_OP_AFFINE] = cpu_ref_unary,
    [CANDLE_OP_CLAMP] = cpu_ref_unary,
    [CANDLE_OP_ADD] = cpu_ref_binary,
    [CANDLE_OP_SUB] = cpu_ref_binary,
    [CANDLE_OP_MUL] = cpu_ref_binary,
    [CANDLE_OP_DIV] = cpu_ref_binary,
    [CANDLE_OP_MAXIMUM] = cpu_ref_binary,
    [CANDLE_OP_MINIMUM] = cpu_ref_binary,
    [CANDLE_OP_POW] = cpu_ref_binary,
    [CANDLE_OP_EQ] = cpu_ref_binary,
    [CANDLE_OP_NE] = cpu_ref_binary,
    [CANDLE_OP_LT] = cpu_ref_binary,
    [CANDLE_OP_LE] = cpu_ref_binary,
    [CANDLE_OP_GT] = cpu_ref_binary,
    [CANDLE_OP_GE] = cpu_ref_binary,
    [CANDLE_OP_WHERE] = cpu_ref_where,
    [CANDLE_OP_SUM] = cpu_ref_reduce,
    [CANDLE_OP_MEAN] = cpu_ref_reduce,
    [CANDLE_OP_MAX] = cpu_ref_reduce,
    [CANDLE_OP_MIN] = cpu_ref_reduce,
    [CANDLE_OP_ARGMAX] = cpu_ref_reduce,
    [CANDLE_OP_SOFTMAX] = cpu_ref_softmax,
    [CANDLE_OP_LOG_SOFTMAX] = cpu_ref_softmax,
    [CANDLE_OP_MATMUL] = cpu_ref_matmul,
    [CANDLE_OP_RMS_NORM] = cpu_ref_rms_norm,
    [CANDLE_OP_LAYER_NORM] = cpu_ref_layer_norm,
    [CANDLE_OP_ROPE] = cpu_ref_rope,
    [CANDLE_OP_INDEX_SELECT] = cpu_ref_index_select,
    [CANDLE_OP_GATHER] = cpu_ref_gather,
    [CANDLE_OP_CONCAT] = cpu_ref_concat,
    [CANDLE_OP_ARANGE] = cpu_ref_arange,
    [CANDLE_OP_FILL] = cpu_ref_fill,
    [CANDLE_OP_RAND] = cpu_ref_rand,
    [CANDLE_OP_CONV1D] = cpu_ref_conv1d,
    [CANDLE_OP_CONV2D] = cpu_ref_conv2d,
    [CANDLE_OP_ATTENTION] = cpu_ref_attention,
    [CANDLE_OP_PAGED_ATTENTION] = cpu_ref_paged_attention,
    [CANDLE_OP_MOE_FFN] = cpu_ref_moe_ffn,
    [CANDLE_OP_TOPK_MASK] = cpu_ref_topk_mask,
    [CANDLE_OP_MATMUL_GROUP_CORR] = cpu_ref_matmul_group_corr,
};

candle_status cpu_error(const cpu_task *task, candle_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->errmsg, task->errmsg_len, fmt, ap);
    va_end(ap);
    return s;
}

static void release_heap(candle_storage *s) {
    free(s->data);
    free(s);
}

static candle_status cpu_buffer_alloc(candle_backend *be, size_t size, candle_storage **out) {
    (void)be;
    candle_storage *s = calloc(1, sizeof *s);
    /* 64-byte alignment for SIMD loads; size rounded up as aligned_alloc needs. */
    size_t rounded = (size + 63) & ~(size_t)63;
    void *data = s && rounded >= size ? aligned_alloc(64, rounded) : NULL;
    if (!data) {
        char a[32];
        free(s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM,
                                "out of memory: requested %s on cpu (allocation failed)",
                                cdl_format_bytes(size, a, sizeof a));
    }
    s->data = data;
    s->size = size;
    s->refcount = 1;
    s->kind = CANDLE_STORAGE_HEAP;
    s->device = be->device;
    s->release = release_heap;
    *out = s;
    return CANDLE_OK;
}

/* Host memory: the buffer calls are plain copies (the core does them in
 * place without asking; these serve callers of the interface itself). */
static candle_status cpu_buffer_set(candle_backend *be, candle_storage *s, size_t offset, const void *src,
                                    size_t size) {
    (void)be;
    memcpy((char *)s->data + offset, src, size);
    return CANDLE_OK;
}

static candle_status cpu_buffer_get(candle_backend *be, const candle_storage *s, size_t offset, void *dst,
                                    size_t size) {
    (void)be;
    memcpy(dst, (const char *)s->data + offset, size);
    return CANDLE_OK;
}

static candle_status cpu_buffer_memset(candle_backend *be, candle_storage *s, size_t offset, int value,
                                       size_t size) {
    (void)be;
    memset((char *)s->data + offset, value, size);
    return CANDLE_OK;
}

static candle_status cpu_buffer_copy(candle_backend *be, candle_storage *dst, size_t dst_offset,
                                     const candle_storage *src, size_t src_offset, size_t size) {
    (void)be;
    memmove((char *)dst->data + dst_offset, (const char *)src->data + src_offset, size);
    return CANDLE_OK;
}

static bool cpu_supports_op(candle_backend *be, const candle_tensor *node) {
    (void)be;
    return (unsigned)node->op < CANDLE_OP_COUNT && kernels[node->op] != NULL;
}

typedef struct fast_job {
    const cpu_fast_kernel *fk;
    candle_tensor *node;
    cpu_impl *im;
    int phase;
} fast_job;

/* Task `task` of n_tasks of a pool job, run by `thread`. */
static cpu_task task_of(const cpu_impl *im, int task, int n_tasks, int thread, int phase) {
    return (cpu_task){.ith = task, .nth = n_tasks, .errmsg = im->errmsgs[thread], .errmsg_len = 256,
                      .tid = thread, .n_threads = cpu_pool_size(im->pool), .phase = phase,
                      .wdata = im->work, .wsize = im->work_size};
}

static void fast_job_run(void *arg, int task, int n_tasks, int thread) {
    fast_job *j = arg;
    cpu_task t = task_of(j->im, task, n_tasks, thread, j->phase);
    candle_status s = j->fk->run(&t, j->node);
    if (s) j->im->status[thread] = s; /* each thread writes only its own slot */
}

/* One pool job of nth tasks whose threads report into im->status; the
 * first error, with its message as the calling thread's backend error. */
static candle_status run_job(candle_backend *be, int nth, cpu_pool_fn fn, void *arg) {
    cpu_impl *im = be->impl;
    int n = cpu_pool_size(im->pool);
    for (int i = 0; i < n; i++) im->status[i] = CANDLE_OK;
    cpu_pool_run(im->pool, nth, fn, arg);
    for (int i = 0; i < n; i++)
        if (im->status[i]) {
            candle_backend_set_errmsg("%s", im->errmsgs[i]);
            return im->status[i];
        }
    return CANDLE_OK;
}

static bool ensure_work(cpu_impl *im, size_t size) {
    if (size <= im->work_size) return true;
    size_t rounded = (size + 4095) & ~(size_t)4095;
    void *w = aligned_alloc(64, rounded);
    if (!w) return false;
    free(im->work);
    im->work = w;
    im->work_size = rounded;
    return true;
}

static candle_status run_fast(candle_backend *be, const cpu_fast_kernel *fk, candle_tensor *node,
                              const cpu_plan *plan) {
    for (int phase = 0; phase < plan->n_phases; phase++) {
        fast_job job = {fk, node, be->impl, phase};
        int nth = phase == 0 && plan->nth0 > 0 ? plan->nth0 : plan->nth;
        candle_status s = run_job(be, nth, fast_job_run, &job);
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status run_matvecs(cpu_impl *im, candle_tensor *const *mv, int n_mv) {
    pthread_mutex_lock(&im->busy);
    bool ran = ensure_work(im, cpu_matvecs_scratch(mv, n_mv));
    if (ran) cpu_matvecs_run(im->pool, mv, n_mv, im->work);
    pthread_mutex_unlock(&im->busy);
    return ran ? CANDLE_OK : CANDLE_ERR_OOM;
}

/* The fast kernel when its conditions hold (cpu_dispatch.c), else the
 * reference kernel on one thread. */
static candle_status compute_node(candle_backend *be, candle_tensor *node);
static candle_status compute_group(candle_backend *be, candle_tensor *const *nodes, int n);

/* A host tensor over caller memory, for the products moe_ffn runs. */
static void moe_plain(candle_tensor *t, candle_storage *st, float *data, int64_t rows, int64_t cols) {
    memset(t, 0, sizeof *t);
    memset(st, 0, sizeof *st);
    st->data = data;
    st->size = (size_t)(rows * cols) * sizeof(float);
    st->refcount = 1;
    t->dtype = CANDLE_DTYPE_F32;
    t->rank = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->stride[1] = sizeof(float);
    t->stride[0] = cols * (int64_t)sizeof(float);
    t->storage = st;
    t->computed = true;
}

/* Expert e of a stacked weight [n_expert, rows, cols] as the transposed
 * [cols, rows] view a linear layer's matmul takes. */
static void moe_expert(candle_tensor *t, const candle_tensor *w, int64_t e) {
    memset(t, 0, sizeof *t);
    t->dtype = w->dtype;
    t->rank = 2;
    t->shape[0] = w->shape[2];
    t->shape[1] = w->shape[1];
    t->stride[0] = w->stride[2];
    t->stride[1] = w->stride[1];
    t->storage = w->storage;
    t->offset = w->offset + (size_t)(e * w->stride[0]);
    t->computed = true;
}

/* dst = a x b as a MATMUL node for the usual kernels (matrix-vector,
 * quantized, GEMM, threads). */
static void moe_product(candle_tensor *a, candle_tensor *b, candle_tensor *dst) {
    dst->op = CANDLE_OP_MATMUL;
    dst->src[0] = a;
    dst->src[1] = b;
    dst->n_src = 2;
}

static float moe_act(int act, float v) {
    return act == CANDLE_OP_SILU ? v / (1.0f + expf(-v))
                                 : 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

/* The chosen experts of one row (a decode step) run in at most this many:
 * their gate and up products are one matrix-vector job. */
#define MOE_ROW_MAX (CPU_MATVECS_MAX / 2)

typedef struct moe_row_bufs {
    candle_tensor a, h[MOE_ROW_MAX], wg[MOE_ROW_MAX], wu[MOE_ROW_MAX], wd[MOE_ROW_MAX];
    candle_tensor og[MOE_ROW_MAX], ou[MOE_ROW_MAX], oy[MOE_ROW_MAX];
    candle_storage sa, sh[MOE_ROW_MAX], sg[MOE_ROW_MAX], su[MOE_ROW_MAX], sy[MOE_ROW_MAX];
} moe_row_bufs;

/* One row: all the chosen experts' gate and up products as one
 * matrix-vector job over the row, then all their down products as a second
 * (each over its own expert's hidden row), so the threads stream the k
 * experts' weights back to back with two waits per layer instead of two per
 * expert (Qwen3-MoE: 8 experts of 768 x 2048, 1.7 MB each in Q4_0, are too
 * small for a job of their own). The products are the ones the per-expert
 * loop runs, and the weighted sum is taken in the same order, so the result
 * is the same bit for bit. *done stays false when the row does not fit
 * (more than MOE_ROW_MAX experts, or weights the matrix-vector job does not
 * take); then the caller runs the general loop. */
static candle_status moe_ffn_row(candle_backend *be, candle_tensor *node, bool *done) {
    const candle_tensor *x = node->src[0], *wt = node->src[1], *g = node->src[2], *u = node->src[3],
                        *d = node->src[4];
    int64_t d_in = x->shape[1], ne = wt->shape[1], d_ff = g->shape[1], d_out = d->shape[1];
    int act = (int)node->iparams[0], k = 0;
    int64_t ex[MOE_ROW_MAX];
    float rw[MOE_ROW_MAX];
    const char *pw = tensor_ptr(wt), *px = tensor_ptr(x);
    *done = false;
    for (int64_t e = 0; e < ne; e++) {
        float w = *(const float *)(pw + e * wt->stride[1]);
        if (w == 0) continue;
        if (k == MOE_ROW_MAX) return CANDLE_OK;
        ex[k] = e;
        rw[k++] = w;
    }
    if (!k) return CANDLE_OK;
    moe_row_bufs *b = malloc(sizeof *b);
    float *xs = malloc((size_t)(d_in + 2 * k * d_ff + k * d_out) * sizeof *xs);
    if (!b || !xs) {
        free(b), free(xs);
        candle_backend_set_errmsg("moe_ffn: out of memory (one row, %d experts)", k);
        return CANDLE_ERR_OOM;
    }
    float *hg = xs + d_in, *hu = hg + k * d_ff, *y = hu + k * d_ff;
    for (int64_t i = 0; i < d_in; i++) xs[i] = *(const float *)(px + i * x->stride[1]);
    candle_tensor *mv[CPU_MATVECS_MAX];
    bool ok = true;
    moe_plain(&b->a, &b->sa, xs, 1, d_in);
    for (int i = 0; i < k; i++) {
        moe_expert(&b->wg[i], g, ex[i]);
        moe_expert(&b->wu[i], u, ex[i]);
        moe_expert(&b->wd[i], d, ex[i]);
        moe_plain(&b->og[i], &b->sg[i], hg + i * d_ff, 1, d_ff);
        moe_plain(&b->ou[i], &b->su[i], hu + i * d_ff, 1, d_ff);
        moe_plain(&b->h[i], &b->sh[i], hg + i * d_ff, 1, d_ff);
        moe_plain(&b->oy[i], &b->sy[i], y + i * d_out, 1, d_out);
        moe_product(&b->a, &b->wg[i], &b->og[i]);
        moe_product(&b->a, &b->wu[i], &b->ou[i]);
        moe_product(&b->h[i], &b->wd[i], &b->oy[i]);
        ok = ok && cpu_matvec_ok(&b->og[i]) && cpu_matvec_ok(&b->ou[i]) && cpu_matvec_ok(&b->oy[i]);
        mv[2 * i] = &b->og[i];
        mv[2 * i + 1] = &b->ou[i];
    }
    candle_status s = CANDLE_OK;
    cpu_impl *im = be->impl;
    if (ok && !(s = run_matvecs(im, mv, 2 * k))) {
        for (int64_t i = 0; i < k * d_ff; i++) hg[i] = moe_act(act, hg[i]) * hu[i];
        for (int i = 0; i < k; i++) mv[i] = &b->oy[i];
        s = run_matvecs(im, mv, k);
    }
    if (ok && !s) {
        char *pd = tensor_ptr(node);
        for (int64_t c = 0; c < d_out; c++) {
            float acc = 0;
            for (int i = 0; i < k; i++) acc += rw[i] * y[i * d_out + c];
            *(float *)(pd + c * node->stride[1]) = acc;
        }
        *done = true;
    }
    if (s) candle_backend_set_errmsg("moe_ffn: out of memory (scratch of one row's experts)");
    free(b), free(xs);
    return s;
}

/* MOE_FFN: per expert, the rows routed to it gathered into one activation,
 * then its gate, up and down products as matmuls of those rows alone, so a
 * decode step reads only the chosen experts' weights and a prefill runs
 * each expert once over all of its rows. */
static candle_status moe_ffn(candle_backend *be, candle_tensor *node) {
    const candle_tensor *x = node->src[0], *wt = node->src[1], *g = node->src[2], *u = node->src[3],
                        *d = node->src[4];
    int64_t n = x->shape[0], d_in = x->shape[1], ne = wt->shape[1], d_ff = g->shape[1], d_out = d->shape[1];
    int act = (int)node->iparams[0];
    if (n == 1) {
        bool done;
        candle_status rs = moe_ffn_row(be, node, &done);
        if (rs || done) return rs;
    }
    float *xs = malloc((size_t)(n * d_in) * sizeof *xs), *hg = malloc((size_t)(n * d_ff) * sizeof *hg);
    float *hu = malloc((size_t)(n * d_ff) * sizeof *hu), *y = malloc((size_t)(n * d_out) * sizeof *y);
    float *acc = calloc((size_t)(n * d_out), sizeof *acc), *rw = malloc((size_t)n * sizeof *rw);
    int64_t *rows = malloc((size_t)n * sizeof *rows);
    candle_status s = CANDLE_OK;
    if (!xs || !hg || !hu || !y || !acc || !rw || !rows) {
        candle_backend_set_errmsg("moe_ffn: out of memory (%" PRId64 " rows)", n);
        s = CANDLE_ERR_OOM;
    }
    const char *px = tensor_ptr(x), *pw = tensor_ptr(wt);
    for (int64_t e = 0; !s && e < ne; e++) {
        int64_t m = 0;
        for (int64_t r = 0; r < n; r++) {
            float w = *(const float *)(pw + r * wt->stride[0] + e * wt->stride[1]);
            if (w == 0) continue;
            rows[m] = r;
            rw[m] = w;
            for (int64_t k = 0; k < d_in; k++)
                xs[m * d_in + k] = *(const float *)(px + r * x->stride[0] + k * x->stride[1]);
            m++;
        }
        if (!m) continue;
        candle_tensor a, bg, bu, og, ou;
        candle_storage sa, sg, su;
        moe_plain(&a, &sa, xs, m, d_in);
        moe_expert(&bg, g, e);
        moe_expert(&bu, u, e);
        moe_plain(&og, &sg, hg, m, d_ff);
        moe_plain(&ou, &su, hu, m, d_ff);
        moe_product(&a, &bg, &og);
        moe_product(&a, &bu, &ou);
        /* gate and up share the activation: one job for a decode row */
        candle_tensor *const pair[2] = {&og, &ou};
        if ((s = compute_group(be, pair, 2))) break;
        for (int64_t i = 0; i < m * d_ff; i++) hg[i] = moe_act(act, hg[i]) * hu[i];
        moe_plain(&a, &sa, hg, m, d_ff);
        moe_expert(&bg, d, e);
        moe_plain(&og, &sg, y, m, d_out);
        moe_product(&a, &bg, &og);
        if ((s = compute_node(be, &og))) break;
        for (int64_t i = 0; i < m; i++)
            for (int64_t k = 0; k < d_out; k++) acc[rows[i] * d_out + k] += rw[i] * y[i * d_out + k];
    }
    char *pd = tensor_ptr(node);
    for (int64_t r = 0; !s && r < n; r++)
        for (int64_t k = 0; k < d_out; k++)
            *(float *)(pd + r * node->stride[0] + k * node->stride[1]) = acc[r * d_out + k];
    free(xs), free(hg), free(hu), free(y), free(acc), free(rw), free(rows);
    return s;
}

/* MATMUL_GROUP_CORR of several rows (one row is a matrix-vector job), as
 * the usual kernels' nodes: the product into the output, the rows' group
 * sums s [rows, ng] here, s x corr into a scratch [rows, N] (the f32
 * products), then added to the output in place. */
static candle_status group_corr(candle_backend *be, candle_tensor *node) {
    const candle_tensor *a = node->src[0];
    candle_tensor *c = node->src[2];
    int r = node->rank;
    int64_t N = node->shape[r - 1], G = node->iparams[0], ng = c->shape[0], rows = candle_tensor_numel(node) / N;
    candle_tensor prod = cpu_group_corr_product(node);
    candle_status s = compute_node(be, &prod);
    if (s) return s;
    float *sums = malloc((size_t)(rows * ng) * sizeof *sums), *corr = malloc((size_t)(rows * N) * sizeof *corr);
    if (!sums || !corr) {
        free(sums), free(corr);
        candle_backend_set_errmsg("matmul_group_corr: out of memory (%" PRId64 " rows' corrections)", rows);
        return CANDLE_ERR_OOM;
    }
    int64_t idx[CANDLE_MAX_RANK] = {0}, m = 0;
    do {
        cpu_group_sums(tensor_ptr(a) + nd_offset(r - 1, idx, a->stride), a->stride[r - 1], ng, G, sums + m++ * ng);
    } while (nd_next(r - 1, a->shape, idx));
    candle_tensor ts, tc, tout, tsum;
    candle_storage ss, sc, sout, ssum;
    moe_plain(&ts, &ss, sums, rows, ng);
    moe_plain(&tc, &sc, corr, rows, N);
    moe_product(&ts, c, &tc);
    s = compute_node(be, &tc);
    if (!s) {
        float *out = (float *)tensor_ptr(node);
        moe_plain(&tout, &sout, out, rows, N);
        moe_plain(&tsum, &ssum, out, rows, N);
        tsum.op = CANDLE_OP_ADD;
        tsum.src[0] = &tout;
        tsum.src[1] = &tc;
        tsum.n_src = 2;
        s = compute_node(be, &tsum);
    }
    free(sums), free(corr);
    return s;
}

/* A MATMUL's bias after a kernel that did not add it: an ADD of the bias
 * seen as [rows, N] with a zero row stride into the output, in place, on
 * the usual binary kernel (group_corr adds its corrections so). */
static candle_status add_bias(candle_backend *be, candle_tensor *node) {
    int64_t n = node->shape[node->rank - 1], rows = candle_tensor_numel(node) / n;
    float *out = (float *)tensor_ptr(node);
    candle_tensor tout, tb, tsum;
    candle_storage sout, sb, ssum;
    moe_plain(&tout, &sout, out, rows, n);
    moe_plain(&tsum, &ssum, out, rows, n);
    moe_plain(&tb, &sb, (float *)tensor_ptr(node->src[2]), 1, n);
    tb.shape[0] = rows;
    tb.stride[0] = 0;
    tsum.op = CANDLE_OP_ADD;
    tsum.src[0] = &tout;
    tsum.src[1] = &tb;
    tsum.n_src = 2;
    return compute_node(be, &tsum);
}

static bool has_bias(const candle_tensor *t) { return t->op == CANDLE_OP_MATMUL && t->n_src > 2 && t->src[2]; }

/* The node on the fast kernel, the batch-1 matvec job or the reference;
 * *bias_done: a MATMUL's bias added there (the reference adds it). */
static candle_status compute_kernel(candle_backend *be, candle_tensor *node, bool *bias_done) {
    cpu_impl *im = be->impl;
    if (node->op == CANDLE_OP_MOE_FFN && !cpu_config_get()->reference_only) return moe_ffn(be, node);
    if (cpu_matvec_ok(node) && !run_matvecs(im, &node, 1)) return CANDLE_OK;
    if (node->op == CANDLE_OP_MATMUL_GROUP_CORR && !cpu_config_get()->reference_only &&
        candle_tensor_is_contiguous(node))
        return group_corr(be, node);
    const cpu_fast_kernel *fk = candle_tensor_numel(node) > 0 ? cpu_fast_kernel_for(node) : NULL;
    if (fk) {
        cpu_plan plan = {1, 1, 0, 0, false};
        fk->plan(node, cpu_pool_size(im->pool), &plan);
        if (plan.nth < 1) plan.nth = 1;
        if (plan.n_phases < 1) plan.n_phases = 1;
        /* without scratch, the reference kernel (which needs little) runs */
        pthread_mutex_lock(&im->busy);
        candle_status s = CANDLE_ERR_OOM;
        bool ran = ensure_work(im, plan.wsize);
        if (ran) s = run_fast(be, fk, node, &plan);
        pthread_mutex_unlock(&im->busy);
        *bias_done = plan.bias_done;
        if (ran) return s;
    }
    cpu_task task = {.ith = 0, .nth = 1, .errmsg = cdl_backend_errmsg_buffer(),
                     .errmsg_len = CANDLE_BACKEND_ERRMSG_MAX};
    *bias_done = true;
    return kernels[node->op](&task, node);
}

static candle_status compute_node(candle_backend *be, candle_tensor *node) {
    bool bias_done = false;
    candle_status s = compute_kernel(be, node, &bias_done);
    if (s == CANDLE_OK && !bias_done && has_bias(node) && candle_tensor_numel(node) > 0) s = add_bias(be, node);
    return s;
}

/* The kernels run on the calling thread with the backend's config (its
 * pool's workers have it from the start). */
static candle_status cpu_compute_node(candle_backend *be, candle_tensor *node) {
    const cpu_config *prev = cpu_config_swap(((cpu_impl *)be->impl)->cfg);
    candle_status s = compute_node(be, node);
    cpu_config_swap(prev);
    return s;
}

/* Independent products of one activation: the batch-1 quantized ones run as
 * one job (fast_matvecs.c), any other one by one. */
static candle_status compute_group(candle_backend *be, candle_tensor *const *nodes, int n) {
    cpu_impl *im = be->impl;
    candle_tensor *mv[CPU_MATVECS_MAX];
    int n_mv = 0;
    for (int i = 0; i < n; i++) {
        if (n_mv < CPU_MATVECS_MAX && cpu_matvec_ok(nodes[i]) &&
            (!n_mv || nodes[i]->src[0] == mv[0]->src[0])) {
            mv[n_mv++] = nodes[i];
            continue;
        }
        candle_status s = compute_node(be, nodes[i]);
        if (s) return s;
    }
    if (n_mv < 2) return n_mv ? compute_node(be, mv[0]) : CANDLE_OK;
    if (!run_matvecs(im, mv, n_mv)) return CANDLE_OK;
    for (int i = 0; i < n_mv; i++) {
        candle_status s = compute_node(be, mv[i]);
        if (s) return s;
    }
    return CANDLE_OK;
}

static candle_status cpu_compute_group(candle_backend *be, candle_tensor *const *nodes, int n) {
    const cpu_config *prev = cpu_config_swap(((cpu_impl *)be->impl)->cfg);
    candle_status s = compute_group(be, nodes, n);
    cpu_config_swap(prev);
    return s;
}

static bool cpu_fusable(candle_backend *be, const candle_tensor *u, const candle_tensor *b) {
    (void)be;
    return cpu_fused_ok(u, b);
}

typedef struct fused_job {
    candle_tensor *u, *b;
    cpu_impl *im;
} fused_job;

static void fused_job_run(void *arg, int task, int n_tasks, int thread) {
    fused_job *j = arg;
    cpu_task t = task_of(j->im, task, n_tasks, thread, 0);
    candle_status s = cpu_fused_run(&t, j->u, j->b);
    if (s) j->im->status[thread] = s;
}

/* A unary fused into its reader (graph.c's fuse_elementwise): one job. */
static candle_status cpu_compute_fused(candle_backend *be, candle_tensor *u, candle_tensor *b) {
    cpu_impl *im = be->impl;
    if (!cpu_fused_ok(u, b)) return CANDLE_ERR_UNSUPPORTED;
    int nth = cpu_fused_tasks(u, b, cpu_pool_size(im->pool));
    fused_job job = {u, b, im};
    pthread_mutex_lock(&im->busy);
    const cpu_config *prev = cpu_config_swap(im->cfg);
    candle_status s = run_job(be, nth < 1 ? 1 : nth, fused_job_run, &job);
    cpu_config_swap(prev);
    pthread_mutex_unlock(&im->busy);
    return s;
}

static candle_status cpu_synchronize(candle_backend *be) {
    (void)be;
    return CANDLE_OK;
}

static void cpu_free(candle_backend *be) {
    cpu_impl *im = be->impl;
    if (im) {
        cpu_pool_free(im->pool);
        pthread_mutex_destroy(&im->busy);
        free(im->work);
        free(im->errmsgs);
        free(im->status);
        free(im);
    }
    free(be);
}

static const candle_backend_iface cpu_iface = {
    .name = "cpu",
    .host_visible = true,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_set = cpu_buffer_set,
    .buffer_get = cpu_buffer_get,
    .buffer_memset = cpu_buffer_memset,
    .buffer_copy = cpu_buffer_copy,
    .supports_op = cpu_supports_op,
    .compute_node = cpu_compute_node,
    .synchronize = cpu_synchronize,
    .free = cpu_free,
    .compute_group = cpu_compute_group,
    .fusable = cpu_fusable,
    .compute_fused = cpu_compute_fused,
};

static void set_worker_config(void *arg, int task, int n_tasks, int thread) {
    (void)task, (void)n_tasks, (void)thread;
    cpu_config_swap(arg);
}

candle_status candle_backend_cpu_init_params(candle_backend **out, const candle_cpu_params *p) {
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "backend_cpu_init: out is NULL");
    *out = NULL;
    candle_cpu_params def = candle_cpu_get_defaults();
    if (!p) p = &def;
    const cpu_config *cfg = cpu_config_for(p);
    if (!cfg) return candle_last_error();
    candle_backend *be = calloc(1, sizeof *be);
    if (!be) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: cpu backend");
    be->iface = &cpu_iface;
    be->device = (candle_device){CANDLE_DEVICE_CPU, 0};
    be->n_threads = p->n_threads > 0 ? p->n_threads : cpu_get_features()->n_physical;
    if (be->n_threads < 1) be->n_threads = 1;
    cpu_impl *im = calloc(1, sizeof *im);
    be->impl = im;
    if (im) {
        im->cfg = cfg;
        pthread_mutex_init(&im->busy, NULL);
        im->pool = cpu_pool_new(be->n_threads);
        im->errmsgs = calloc((size_t)be->n_threads, sizeof *im->errmsgs);
        im->status = calloc((size_t)be->n_threads, sizeof *im->status);
    }
    if (!im || !im->pool || !im->errmsgs || !im->status) {
        int n = be->n_threads;
        cpu_free(be);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: cpu backend (%d threads)", n);
    }
    /* the workers belong to this backend alone: they keep its config */
    const cpu_config *prev = cpu_config_swap(cfg);
    cpu_pool_run_team(im->pool, set_worker_config, (void *)cfg);
    cpu_config_swap(prev);
    *out = be;
    return CANDLE_OK;
}

candle_backend *candle_backend_cpu_init(int n_threads) {
    candle_cpu_params p = candle_cpu_get_defaults();
    if (n_threads > 0) p.n_threads = n_threads;
    candle_backend *be = NULL;
    candle_backend_cpu_init_params(&be, &p);
    return be;
}

bool candle_backend_cpu_params(const candle_backend *be, candle_cpu_params *out) {
    if (!be || be->iface != &cpu_iface || !out) return false;
    *out = ((const cpu_impl *)be->impl)->cfg->params;
    out->n_threads = be->n_threads;
    return true;
}

void candle_backend_free(candle_backend *be) {
    if (be) be->iface->free(be);
}

const char *candle_backend_name(const candle_backend *be) { return be ? be->iface->name : "none"; }

/* Appends to buf (size n) at *len, keeping it NUL-terminated. */
static void info_add(char *buf, size_t n, size_t *len, const char *fmt, ...) CANDLE_PRINTF(4, 5);
static void info_add(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    if (*len >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len += (size_t)w < n - *len ? (size_t)w : n - *len - 1;
}

const char *candle_cpu_info(char *buf, size_t n) {
    if (!buf || !n) return buf;
    const cpu_features *f = cpu_get_features();
    const cpu_simd *simd = cpu_simd_get();
    size_t len = 0;
    buf[0] = '\0';
#if defined(__aarch64__)
    info_add(buf, n, &len, "cpu features: neon %s, dotprod %s, fp16 %s\n", f->neon ? "yes" : "no",
             f->dotprod ? "yes" : "no", f->fp16 ? "yes" : "no");
    info_add(buf, n, &len, "quantized dots: %s\n",
             cdl_quant_uses_dotprod() ? "neon dotprod (q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K; others scalar)"
             : cdl_quant_uses_neon()  ? "neon (q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K; others scalar)"
                                         : "scalar");
#else
    info_add(buf, n, &len, "cpu features: avx2 %s, fma %s, f16c %s, avx512f %s, avx512bw %s, "
             "avx512vl %s, avx512vnni %s, avx512bf16 %s\n",
             f->avx2 ? "yes" : "no", f->fma ? "yes" : "no", f->f16c ? "yes" : "no",
             f->avx512f ? "yes" : "no", f->avx512bw ? "yes" : "no", f->avx512vl ? "yes" : "no",
             f->avx512vnni ? "yes" : "no", f->avx512bf16 ? "yes" : "no");
#endif
    info_add(buf, n, &len, "physical cores: %d (default threads)\n", f->n_physical);
    info_add(buf, n, &len, "primitives: %s%s\n", simd->name,
             !strcmp(simd->name, "avx512") ? " (avx512 gemm micro-kernel, avx2 elsewhere)" : "");
    static const cpu_fast_kernel *const fast[] = {
        &cpu_fast_matmul, &cpu_fast_matmul_quant, &cpu_fast_unary, &cpu_fast_binary,
        &cpu_fast_softmax, &cpu_fast_rms_norm, &cpu_fast_layer_norm, &cpu_fast_rope, &cpu_fast_attention,
        &cpu_fast_index_select, &cpu_fast_copy};
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
        info_add(buf, n, &len, "kernel: %s [%s]\n", fast[i]->name, simd->name);
    info_add(buf, n, &len, "kernel: every other op and layout: reference (scalar, 1 thread)\n");
    return buf;
}
