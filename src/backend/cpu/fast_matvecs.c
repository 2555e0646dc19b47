/* Batch-1 products run as one job: a layer's q, k, v (or gate and up) read
 * the same activation row, so it is prepared once per weight type on the
 * calling thread (products of other rows of the same length -- the down
 * products of a decode step's chosen experts -- may join: each distinct row
 * is prepared once) and the rows of all the weights are streamed in a single
 * pool dispatch, one wake-up and one wait instead of one per product.
 *
 * Rows of all the weights, taken as one list, are split into one
 * contiguous range per thread. Each thread streams its own range from the
 * front in claims of about CLAIM_BYTES; a thread done with its own range
 * takes the back half of what is left of another's (halving again and
 * again), so the tail stays short when the threads stream at unequal
 * speeds (a busy or preempted vCPU: a thread that never starts leaves its
 * whole range to the others). Each thread so reads one sequential stream
 * per product, plus one per steal at the end: with guided chunks claimed
 * in turn (before), every chunk started a new stream on a thread, and a
 * product paid the DRAM ramp several times (SmolLM2-135M Q8_0 products,
 * standalone harness, 2 threads: 576 x 576 9.0 -> 6.5 us, q/k/v 13.5 ->
 * 10.3 us, gate/up 30.2 -> 25.2 us).
 *
 * Each row's dot product is the same cdl_gemv_rows call as in
 * fast_matmul_quant.c (quantized weights) or the same dot_rows call as in
 * fast_matmul.c's matrix-vector path (f32/f16/bf16, which read the f32
 * activation as it is), so results equal the one-by-one products bit for
 * bit. dot_rows takes f32 rows eight at a time with sums in another order
 * than its four-row tail, so every claim bound falls on a multiple of 16
 * rows of its weight (or the weight's end), as in fast_matmul.c's split.
 *
 * A MATMUL_GROUP_CORR product (asymmetric 4-bit weights) is one of them: its
 * activation's group sums are taken once when the row is prepared, and each
 * claim adds its rows' corrections (dot_rows on the rows of corr^T, read in
 * the same order as the weight's rows) right after their products. */
#include <stdatomic.h>

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
    const float *x;      /* [K] the f32 activation row */
    const char *corr;    /* MATMUL_GROUP_CORR: row n's [ng] corrections at corr + n * cs, else NULL */
    size_t cs;
    int64_t ng, group;   /* groups, inputs per group */
    const float *xs;     /* [ng] x summed over each group */
} mv_item;

/* A thread's range of global rows, [front, back) packed in one word
 * (front << 32 | back): its owner claims from the front, others from the
 * back. One cache line each. */
typedef struct mv_range {
    _Alignas(64) _Atomic uint64_t fb;
} mv_range;

#define MV_MAX_THREADS 64
/* Rows per front claim: about this many bytes of weights (and at least 16
 * rows); the larger the claims, the fewer kernel calls, the longer a thread
 * done may wait for the other's last claim (harness: 39 KiB claims 1-6%
 * faster than 20 KiB). */
#define CLAIM_BYTES 32768

typedef struct mv_job {
    const cpu_simd *simd;
    int n_items;
    int64_t K;
    mv_item items[CPU_MATVECS_MAX];
    int n_ranges;
    int64_t claim_rows;
    mv_range ranges[MV_MAX_THREADS];
} mv_job;

static const candle_tensor *weight_of(const candle_tensor *dst) { return dst->src[1]; }

static bool is_plain_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

candle_tensor cpu_group_corr_product(const candle_tensor *dst) {
    candle_tensor p = *dst;
    p.op = CANDLE_OP_MATMUL;
    p.n_src = 2;
    p.iparams[0] = 0; /* the group size there, a MATMUL's flags here */
    return p;
}

static bool corr_ok(const candle_tensor *dst) {
    const candle_tensor *c = dst->src[2];
    candle_tensor p = cpu_group_corr_product(dst);
    return c && c->dtype == CANDLE_DTYPE_F32 && c->stride[0] == sizeof(float) && cpu_matvec_ok(&p);
}

bool cpu_matvec_ok(const candle_tensor *dst) {
    mm_geom g;
    if (dst->op == CANDLE_OP_MATMUL_GROUP_CORR) return corr_ok(dst);
    if (dst->op != CANDLE_OP_MATMUL || !cpu_mm_geom(dst, &g) || g.M != 1 || g.n_batch != 1 || g.K < 1)
        return false;
    const candle_tensor *a = dst->src[0], *b = weight_of(dst);
    if (a->dtype != CANDLE_DTYPE_F32 || a->stride[a->rank - 1] != 4) return false;
    /* only what the matmul kernels would take themselves (their conditions,
     * reference_only and qmm_max_m included): fast_matmul.c's
     * matrix-vector path reads rows of K contiguous elements */
    if (is_plain_float(b->dtype))
        return b->stride[b->rank - 2] == (int64_t)candle_dtype_info(b->dtype)->type_size &&
               cpu_fast_kernel_for(dst) == &cpu_fast_matmul;
    if (cdl_gemv_x_bytes(b->dtype, g.K) == 0) return false;
    return cpu_fast_kernel_for(dst) == &cpu_fast_matmul_quant;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t cpu_matvecs_scratch(candle_tensor *const *nodes, int n) {
    size_t total = 64;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= weight_of(nodes[j])->dtype == weight_of(nodes[i])->dtype &&
                    tensor_ptr(nodes[j]->src[0]) == tensor_ptr(nodes[i]->src[0]);
        if (!seen && !is_plain_float(weight_of(nodes[i])->dtype)) {
            const candle_tensor *a = nodes[i]->src[0];
            total += round64(cdl_gemv_x_bytes(weight_of(nodes[i])->dtype, a->shape[a->rank - 1]));
        }
        if (nodes[i]->op == CANDLE_OP_MATMUL_GROUP_CORR) total += round64((size_t)nodes[i]->src[2]->shape[0] * 4);
    }
    return total;
}

/* Prepare each activation once per weight type (the caller's thread). */
static void prepare(mv_job *j, candle_tensor *const *nodes, int n, void *work) {
    char *base = (char *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    const candle_tensor *a = nodes[0]->src[0];
    j->simd = cpu_simd_get();
    j->n_items = n;
    j->K = a->shape[a->rank - 1];
    for (int i = 0; i < n; i++) {
        const float *x = (const float *)tensor_ptr(nodes[i]->src[0]);
        const candle_tensor *b = weight_of(nodes[i]);
        mv_item *it = &j->items[i];
        int64_t oa, ob;
        cpu_mm_batch(nodes[i], 0, &oa, &ob);
        bool plain = is_plain_float(b->dtype);
        *it = (mv_item){b->dtype, plain, b->shape[b->rank - 1], tensor_ptr(b) + ob,
                        (size_t)b->stride[b->rank - 1], (float *)tensor_ptr(nodes[i]),
                        plain ? (const void *)x : NULL, x, NULL, 0, 0, 0, NULL};
        if (nodes[i]->op == CANDLE_OP_MATMUL_GROUP_CORR) {
            const candle_tensor *c = nodes[i]->src[2];
            it->corr = tensor_ptr(c), it->cs = (size_t)c->stride[1], it->ng = c->shape[0];
            it->group = nodes[i]->iparams[0];
            for (int k = 0; k < i && !it->xs; k++)
                if (j->items[k].xs && j->items[k].x == x && j->items[k].group == it->group) it->xs = j->items[k].xs;
            if (!it->xs) {
                cpu_group_sums((const char *)x, sizeof(float), it->ng, it->group, (float *)base);
                it->xs = (const float *)base;
                base += round64((size_t)it->ng * 4);
            }
        }
        for (int k = 0; k < i && !it->xv; k++)
            if (j->items[k].wt == it->wt && j->items[k].x == x) it->xv = j->items[k].xv;
        if (!it->xv) {
            cdl_gemv_prep(it->wt, j->K, x, base);
            it->xv = base;
            base += round64(cdl_gemv_x_bytes(it->wt, j->K));
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

static uint64_t pack(int64_t front, int64_t back) { return (uint64_t)front << 32 | (uint64_t)back; }

/* n contiguous ranges over all the rows, bounds snapped to 16 rows. */
static void schedule(mv_job *j, int n) {
    int64_t rows = 0, row_bytes = 1, lo = 0;
    for (int i = 0; i < j->n_items; i++) {
        rows += j->items[i].N;
        if ((int64_t)j->items[i].ws > row_bytes) row_bytes = (int64_t)j->items[i].ws;
    }
    if (n > MV_MAX_THREADS) n = MV_MAX_THREADS;
    j->n_ranges = n;
    j->claim_rows = (CLAIM_BYTES / row_bytes + 15) & ~(int64_t)15;
    if (j->claim_rows < 16) j->claim_rows = 16;
    if (n == 1) j->claim_rows = rows; /* no one to share with: one call per weight */
    for (int t = 0; t < n; t++) {
        int64_t hi = t == n - 1 ? rows : snap16(j, rows * (t + 1) / n);
        if (hi < lo) hi = lo;
        atomic_init(&j->ranges[t].fb, pack(lo, hi));
        lo = hi;
    }
}

/* The next claim_rows rows (to a 16-row bound) at the front of range t. */
static bool claim_front(mv_job *j, int t, int64_t *lo, int64_t *hi) {
    _Atomic uint64_t *fb = &j->ranges[t].fb;
    uint64_t v = atomic_load_explicit(fb, memory_order_relaxed);
    for (;;) {
        int64_t f = (int64_t)(v >> 32), b = (int64_t)(v & 0xffffffffu);
        if (f >= b) return false;
        int64_t nf = snap16(j, f + j->claim_rows < b ? f + j->claim_rows : b);
        if (nf > b) nf = b;
        if (atomic_compare_exchange_weak_explicit(fb, &v, pack(nf, b), memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *lo = f, *hi = nf;
            return true;
        }
    }
}

/* The back half (to a 16-row bound) of what is left of range t. */
static bool claim_back(mv_job *j, int t, int64_t *lo, int64_t *hi) {
    _Atomic uint64_t *fb = &j->ranges[t].fb;
    uint64_t v = atomic_load_explicit(fb, memory_order_relaxed);
    for (;;) {
        int64_t f = (int64_t)(v >> 32), b = (int64_t)(v & 0xffffffffu);
        if (f >= b) return false;
        int64_t nb = snap16(j, b - (b - f) / 2);
        if (nb >= b) nb = f; /* within one 16-row block: all of it */
        if (atomic_compare_exchange_weak_explicit(fb, &v, pack(f, nb), memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *lo = nb, *hi = b;
            return true;
        }
    }
}

void cpu_group_sums(const char *x, int64_t sx, int64_t n_groups, int64_t group, float *out) {
    for (int64_t g = 0; g < n_groups; g++) {
        const char *p = x + g * group * sx;
        float acc[8] = {0};
        int64_t k = 0;
        if (sx == sizeof(float))
            for (; k + 8 <= group; k += 8)
                for (int l = 0; l < 8; l++) acc[l] += ((const float *)p)[k + l];
        for (; k < group; k++) acc[0] += *(const float *)(p + k * sx);
        out[g] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

/* out[r] += dot(corr row r, xs) for rows [r0, r1), CORR_ROWS at a time
 * (from r0, a multiple of 16 rows or the weight's end, so that dot_rows sums
 * each row the same way whatever the claims). */
#define CORR_ROWS 64
static void add_corr(const mv_job *j, const mv_item *it, int64_t r0, int64_t r1) {
    float c[CORR_ROWS];
    for (int64_t r = r0; r < r1; r += CORR_ROWS) {
        int64_t n = r1 - r < CORR_ROWS ? r1 - r : CORR_ROWS;
        j->simd->dot_rows(CANDLE_DTYPE_F32, it->ng, it->corr + r * (int64_t)it->cs, it->cs, n, it->xs, c, 1);
        for (int64_t i = 0; i < n; i++) it->out[r + i] += c[i];
    }
}

static void run_rows(const mv_job *j, int64_t lo, int64_t hi) {
    int64_t base = 0;
    for (int i = 0; i < j->n_items && base < hi; base += j->items[i++].N) {
        const mv_item *it = &j->items[i];
        int64_t r0 = lo > base ? lo - base : 0, r1 = hi - base < it->N ? hi - base : it->N;
        if (r1 <= r0) continue;
        if (it->plain)
            j->simd->dot_rows(it->wt, j->K, it->w + r0 * (int64_t)it->ws, it->ws, r1 - r0, it->xv,
                              it->out + r0, 1);
        else
            cdl_gemv_rows(it->wt, j->K, r1 - r0, it->w + r0 * (int64_t)it->ws, it->ws, it->xv,
                             it->out + r0);
        if (it->corr) add_corr(j, it, r0, r1);
    }
}

static atomic_int idle_owner = -1;

void cpu_matvecs_set_idle_owner(int task) { atomic_store(&idle_owner, task); }

/* Task `task`: its range, then the others' backs (the fullest first). */
static void run_range(void *arg, int task, int n_tasks, int thread) {
    (void)n_tasks, (void)thread;
    mv_job *j = arg;
    int64_t lo, hi;
    if (task < j->n_ranges && task != atomic_load_explicit(&idle_owner, memory_order_relaxed))
        while (claim_front(j, task, &lo, &hi)) run_rows(j, lo, hi);
    for (;;) {
        int victim = -1;
        int64_t most = 0;
        for (int u = 0; u < j->n_ranges; u++) {
            uint64_t v = atomic_load_explicit(&j->ranges[u].fb, memory_order_relaxed);
            int64_t left = (int64_t)(v & 0xffffffffu) - (int64_t)(v >> 32);
            if (left > most) most = left, victim = u;
        }
        if (victim < 0) return;
        if (claim_back(j, victim, &lo, &hi)) run_rows(j, lo, hi);
    }
}

void cpu_matvecs_run(cpu_pool *pool, candle_tensor *const *nodes, int n, void *work) {
    mv_job j;
    prepare(&j, nodes, n, work);
    int nt = cpu_pool_size(pool);
    double elems = 0;
    for (int i = 0; i < n; i++) elems += (double)j.items[i].N * (double)j.K;
    bool par = cpu_tasks_for(elems, 1e5, nt, 1) > 1;
    schedule(&j, par ? nt : 1);
    /* claimed like any job's tasks, not one per thread: a thread that has
     * not started (preempted) is not waited for, its range is run by
     * whoever claims its task, from the front, as an owner */
    cpu_pool_run(pool, j.n_ranges, run_range, &j);
}
