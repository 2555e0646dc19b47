/* Batch-1 products run as one job: a layer's q, k, v (or gate and up) read
 * the same activation row, so it is prepared once per weight type on the
 * calling thread and the rows of all the weights are streamed in a single
 * pool dispatch, one wake-up and one wait instead of one per product.
 *
 * Rows of all the weights, taken as one list, are handed out in the guided
 * chunks of cpu_gemv_chunks (fast_matmul_quant.c), so the tail stays short
 * when the two threads stream at unequal speeds (a busy or preempted vCPU).
 * Each row's dot product is the same candle_gemv_rows call as in
 * fast_matmul_quant.c (quantized weights) or the same dot_rows call as in
 * fast_matmul.c's matrix-vector path (f32/f16/bf16, which read the f32
 * activation as it is), so results equal the one-by-one products bit for
 * bit. dot_rows takes f32 rows eight at a time with sums in another order
 * than its four-row tail, so chunk bounds fall on multiples of 16 rows of
 * each weight, as in fast_matmul.c's split. */
#include "fast-impl.h"
#include "quant/gemv-impl.h"

typedef struct mv_item {
    candle_dtype wt;
    bool plain;          /* f32/f16/bf16 rows: dot_rows on the f32 activation */
    int64_t N;           /* rows of this weight */
    const char *w;       /* row 0 */
    size_t ws;           /* bytes between rows */
    float *out;          /* [N] */
    const void *xv;      /* the activation prepared for wt (plain: the f32 row) */
} mv_item;

typedef struct mv_job {
    const cpu_simd *simd;
    int n_items;
    int64_t K;
    mv_item items[CPU_MATVECS_MAX];
    int n_chunks;
    int64_t bounds[CPU_GEMV_MAX_CHUNKS + 1]; /* chunk c: global rows [bounds[c], bounds[c+1]) */
} mv_job;

static const candle_tensor *weight_of(const candle_tensor *dst) { return dst->src[1]; }

static bool is_plain_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

bool cpu_matvec_ok(const candle_tensor *dst) {
    mm_geom g;
    if (dst->op != CANDLE_OP_MATMUL || !cpu_mm_geom(dst, &g) || g.M != 1 || g.n_batch != 1 || g.K < 1)
        return false;
    const candle_tensor *a = dst->src[0], *b = weight_of(dst);
    if (a->dtype != CANDLE_DTYPE_F32 || a->stride[a->rank - 1] != 4) return false;
    /* only what the matmul kernels would take themselves (their conditions,
     * CANDLE_CPU_REF and CANDLE_QMM_MAX_M included): fast_matmul.c's
     * matrix-vector path reads rows of K contiguous elements */
    if (is_plain_float(b->dtype))
        return b->stride[b->rank - 2] == (int64_t)candle_dtype_info(b->dtype)->type_size &&
               cpu_fast_kernel_for(dst) == &cpu_fast_matmul;
    if (candle_gemv_x_bytes(b->dtype, g.K) == 0) return false;
    return cpu_fast_kernel_for(dst) == &cpu_fast_matmul_quant;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t cpu_matvecs_scratch(candle_tensor *const *nodes, int n) {
    size_t total = 64;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= weight_of(nodes[j])->dtype == weight_of(nodes[i])->dtype;
        if (!seen && !is_plain_float(weight_of(nodes[i])->dtype)) {
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
    j->simd = cpu_simd_get();
    j->n_items = n;
    j->K = a->shape[a->rank - 1];
    for (int i = 0; i < n; i++) {
        const candle_tensor *b = weight_of(nodes[i]);
        mv_item *it = &j->items[i];
        int64_t oa, ob;
        cpu_mm_batch(nodes[i], 0, &oa, &ob);
        bool plain = is_plain_float(b->dtype);
        *it = (mv_item){b->dtype, plain, b->shape[b->rank - 1], tensor_ptr(b) + ob,
                        (size_t)b->stride[b->rank - 1], (float *)tensor_ptr(nodes[i]),
                        plain ? (const void *)x : NULL};
        for (int k = 0; k < i && !it->xv; k++)
            if (j->items[k].wt == it->wt) it->xv = j->items[k].xv;
        if (!it->xv) {
            candle_gemv_prep(it->wt, j->K, x, base);
            it->xv = base;
            base += round64(candle_gemv_x_bytes(it->wt, j->K));
        }
    }
}

/* A global row moved up to a multiple of 16 rows of the weight it falls in
 * (or that weight's end). */
static int64_t snap16(const mv_job *j, int64_t row) {
    int64_t base = 0;
    for (int i = 0; i < j->n_items; base += j->items[i++].N) {
        int64_t n = j->items[i].N;
        if (row < base + n) {
            int64_t local = (row - base + 15) & ~(int64_t)15;
            return base + (local < n ? local : n);
        }
    }
    return base;
}

static void schedule(mv_job *j, int n_threads) {
    int64_t rows = 0, row_bytes = 0, guided[CPU_GEMV_MAX_CHUNKS + 1];
    for (int i = 0; i < j->n_items; i++) {
        rows += j->items[i].N;
        if ((int64_t)j->items[i].ws > row_bytes) row_bytes = (int64_t)j->items[i].ws;
    }
    int n = cpu_gemv_chunks(rows, row_bytes, n_threads, guided, CPU_GEMV_MAX_CHUNKS);
    j->n_chunks = 0;
    j->bounds[0] = 0;
    for (int c = 1; c <= n; c++) {
        int64_t b = snap16(j, guided[c]);
        if (b > j->bounds[j->n_chunks]) j->bounds[++j->n_chunks] = b;
    }
}

static void run_chunk(void *arg, int task, int n_tasks, int thread) {
    (void)n_tasks, (void)thread;
    const mv_job *j = arg;
    int64_t lo = j->bounds[task], hi = j->bounds[task + 1], base = 0;
    for (int i = 0; i < j->n_items && base < hi; base += j->items[i++].N) {
        const mv_item *it = &j->items[i];
        int64_t r0 = lo > base ? lo - base : 0, r1 = hi - base < it->N ? hi - base : it->N;
        if (r1 <= r0) continue;
        if (it->plain)
            j->simd->dot_rows(it->wt, j->K, it->w + r0 * (int64_t)it->ws, it->ws, r1 - r0, it->xv,
                              it->out + r0, 1);
        else
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
