/* Batch-1 products with quantized weights run as one job: a layer's q, k, v
 * (or gate and up) read the same activation row, so it is prepared once per
 * weight type on the calling thread and the rows of all the weights are
 * streamed in a single pool dispatch, one wake-up and one wait instead of
 * one per product.
 *
 * Rows of all the weights, taken as one list, are handed out in the guided
 * chunks of cpu_gemv_chunks (fast_matmul_quant.c), so the tail stays short
 * when the two threads stream at unequal speeds (a busy or preempted vCPU).
 * Each row's dot product is the same candle_gemv_rows call as in
 * fast_matmul_quant.c, so results equal the one-by-one products bit for bit. */
#include "fast-impl.h"
#include "quant/gemv-impl.h"

typedef struct mv_item {
    candle_dtype wt;
    int64_t N;           /* rows of this weight */
    const char *w;       /* row 0 */
    size_t ws;           /* bytes between rows */
    float *out;          /* [N] */
    const void *xv;      /* the activation prepared for wt */
} mv_item;

typedef struct mv_job {
    int n_items;
    int64_t K;
    mv_item items[CPU_MATVECS_MAX];
    int n_chunks;
    int64_t bounds[CPU_GEMV_MAX_CHUNKS + 1]; /* chunk c: global rows [bounds[c], bounds[c+1]) */
} mv_job;

static const candle_tensor *weight_of(const candle_tensor *dst) { return dst->src[1]; }

bool cpu_matvec_ok(const candle_tensor *dst) {
    mm_geom g;
    if (dst->op != CANDLE_OP_MATMUL || !cpu_mm_geom(dst, &g) || g.M != 1 || g.n_batch != 1)
        return false;
    const candle_tensor *a = dst->src[0], *b = weight_of(dst);
    if (a->dtype != CANDLE_DTYPE_F32 || a->stride[a->rank - 1] != 4) return false;
    if (candle_gemv_x_bytes(b->dtype, g.K) == 0) return false;
    /* only what the quantized matmul kernel would take itself (its
     * conditions, CANDLE_CPU_REF and CANDLE_QMM_MAX_M included) */
    return cpu_fast_kernel_for(dst) == &cpu_fast_matmul_quant;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t cpu_matvecs_scratch(candle_tensor *const *nodes, int n) {
    size_t total = 64;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= weight_of(nodes[j])->dtype == weight_of(nodes[i])->dtype;
        if (!seen) {
            const candle_tensor *a = nodes[i]->src[0];
            total += round64(candle_gemv_x_bytes(weight_of(nodes[i])->dtype, a->shape[a->rank - 1]));
        }
    }
    return total;
}

/* Prepare the activation once per weight type (the caller's thread). */
static void prepare(mv_job *j, candle_tensor *const *nodes, int n, void *work) {
    char *base = (char *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    const candle_tensor *a = nodes[0]->src[0];
    const float *x = (const float *)tensor_ptr(a);
    j->n_items = n;
    j->K = a->shape[a->rank - 1];
    for (int i = 0; i < n; i++) {
        const candle_tensor *b = weight_of(nodes[i]);
        mv_item *it = &j->items[i];
        int64_t oa, ob;
        cpu_mm_batch(nodes[i], 0, &oa, &ob);
        *it = (mv_item){b->dtype, b->shape[b->rank - 1], tensor_ptr(b) + ob,
                        (size_t)b->stride[b->rank - 1], (float *)tensor_ptr(nodes[i]), NULL};
        for (int k = 0; k < i && !it->xv; k++)
            if (j->items[k].wt == it->wt) it->xv = j->items[k].xv;
        if (!it->xv) {
            candle_gemv_prep(it->wt, j->K, x, base);
            it->xv = base;
            base += round64(candle_gemv_x_bytes(it->wt, j->K));
        }
    }
}

static void schedule(mv_job *j, int n_threads) {
    int64_t rows = 0, row_bytes = 0;
    for (int i = 0; i < j->n_items; i++) {
        rows += j->items[i].N;
        if ((int64_t)j->items[i].ws > row_bytes) row_bytes = (int64_t)j->items[i].ws;
    }
    j->n_chunks = cpu_gemv_chunks(rows, row_bytes, n_threads, j->bounds, CPU_GEMV_MAX_CHUNKS);
}

static void run_chunk(void *arg, int task, int n_tasks, int thread) {
    (void)n_tasks, (void)thread;
    const mv_job *j = arg;
    int64_t lo = j->bounds[task], hi = j->bounds[task + 1], base = 0;
    for (int i = 0; i < j->n_items && base < hi; base += j->items[i++].N) {
        const mv_item *it = &j->items[i];
        int64_t r0 = lo > base ? lo - base : 0, r1 = hi - base < it->N ? hi - base : it->N;
        if (r1 > r0)
            candle_gemv_rows(it->wt, j->K, r1 - r0, it->w + r0 * (int64_t)it->ws, it->ws, it->xv,
                             it->out + r0);
    }
}

void cpu_matvecs_run(cpu_pool *pool, candle_tensor *const *nodes, int n, void *work) {
    mv_job j;
    prepare(&j, nodes, n, work);
    int nt = cpu_pool_size(pool);
    double elems = 0;
    for (int i = 0; i < n; i++) elems += (double)j.items[i].N * (double)j.K;
    schedule(&j, cpu_tasks_for(elems, 1e5, nt, 1) > 1 ? nt : 1);
    cpu_pool_run(pool, j.n_chunks, run_chunk, &j);
}
