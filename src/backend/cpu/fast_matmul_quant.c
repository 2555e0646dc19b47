/* Matmul with a quantized weight: a [..., M, K] (f32) x b [..., K, N] where b
 * is the transpose view of a row-major quantized [N, K] weight (b's K stride
 * is one block, its N stride one weight row).
 *
 * Phase 1: the M activation rows of every batch are quantized once to the
 * weight type's vec_dot_type (threads split the rows). Barrier. Phase 2:
 * threads split N; each block of weight rows is multiplied with all the
 * activation rows by cdl_qgemm_rows (src/quant/qgemm.c: packed multi-row
 * integer kernels where the type has them, else one traits vec_dot per
 * output).
 *
 * One activation row (batch-1 decoding) with a type that has a
 * matrix-vector kernel (src/quant/gemv.c): phase 0 prepares the row on the
 * calling thread alone (no wake-up for a few microseconds of work), phase 1
 * streams the weight rows once in guided chunks (large first, small last),
 * so that a late or preempted thread leaves little to wait for. */
#include <stdlib.h>
#include <string.h>

#include "fast-impl.h"
#include "quant/gemv-impl.h"
#include "quant/qgemm-impl.h"

/* Weight rows per block in phase 2 for the per-output dots (the rows stay
 * in L1 over the activation rows). Types with packed panels take a task's
 * rows in one cdl_qgemm_rows call instead, split on panel boundaries: it
 * prepares the activation rows' aux records (q4_0, q5_0) once per call, and
 * per block of 16 rows that preparation cost as much as a third of the
 * products (SmolLM2-135M q4_0 prefill). */
#define QBLOCK_ROWS 16
/* Matrix-vector products: guided chunks of rows, the last ones down to
 * GEMV_MIN_CHUNK_BYTES of weights and at least GEMV_MIN_ROWS rows. */
#define GEMV_MIN_CHUNK_BYTES 16384
#define GEMV_MIN_ROWS 16

/* Activation rows up to which the integer path beats dequantizing the
 * weight into the f32 GEMM: with a multi-row kernel (measured on
 * SmolLM2-135M q4_1/q8_0 shapes and q4_K 1024 x 1024: the packed kernels
 * beat it up to M 256 and tie at 512; the AVX512-VNNI ones still win at
 * 512: pp512 2 threads, SmolLM2-135M Q4_1 422-478 -> 535-785 t/s,
 * gemma-3-270m Q4_K_M 431-495 -> 545-781), and with one vec_dot per
 * output. */
#define QMM_MAX_M_TILE 256
#define QMM_MAX_M_VNNI 512
#define QMM_MAX_M_DOT 4

int64_t cpu_qmm_max_m(candle_dtype t) {
    int set = cpu_config_get()->qmm_max_m;
    if (set >= 0) return set;
    if (!cdl_qgemm_has_fast(t)) { /* q5_K on AVX2: its few-row limit (one for every K) */
        int64_t few = cdl_qgemm_few_rows(t, 256);
        return few > QMM_MAX_M_DOT ? few : QMM_MAX_M_DOT;
    }
    return cdl_qgemm_uses_vnni() ? QMM_MAX_M_VNNI : QMM_MAX_M_TILE;
}

static bool match_quant(const candle_tensor *dst) {
    mm_geom g;
    if (dst->op != CANDLE_OP_MATMUL || cpu_mm_float_act(dst) || !cpu_mm_geom(dst, &g)) return false;
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    if (g.M > cpu_qmm_max_m(b->dtype)) return false;
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    if (!bt->is_quantized || !bt->vec_dot || a->dtype != CANDLE_DTYPE_F32) return false;
    const candle_dtype_traits *vt = cpu_dtype(bt->vec_dot_type);
    if (!vt->from_f32 || g.K % bt->block_size || g.K % vt->block_size) return false;
    /* more rows go to the dequantizing GEMM in fast_matmul.c when it can */
    return b->stride[b->rank - 2] == (int64_t)bt->type_size;
}

static size_t xq_row_bytes(const candle_tensor *dst, int64_t K) {
    candle_dtype vdt = cpu_dtype(dst->src[1]->dtype)->vec_dot_type;
    return (candle_dtype_row_size(vdt, K) + 63) & ~(size_t)63;
}

/* Per thread: the f32 copy of a strided activation row (phase 0), then the
 * packed weight panel of cdl_qgemm_rows (phase 1). */
static size_t tmp_bytes(const candle_tensor *dst, int64_t K) {
    size_t f = (size_t)K * sizeof(float), q = cdl_qgemm_scratch_bytes(dst->src[1]->dtype, K);
    return ((f > q ? f : q) + 63) & ~(size_t)63;
}

/* Bytes of the prepared activation when the product runs as a
 * matrix-vector kernel, else 0. */
static size_t gemv_bytes(const candle_tensor *dst, const mm_geom *g) {
    if (g->M != 1 || g->n_batch != 1) return 0;
    return cdl_gemv_x_bytes(dst->src[1]->dtype, g->K);
}

/* Guided chunks of a product's N rows: about half the rows left per thread
 * pair first, shrinking to the minimum, multiples of 4 rows (the K kernels'
 * pass). Claimed in order, the large first chunks keep claims few and the
 * small last ones keep the tail short when the threads stream at unequal
 * speeds: with equal static tasks one thread often streamed alone at the end
 * of each product, at about half the pair's bandwidth. */
int cpu_gemv_chunks(int64_t N, int64_t row_bytes, int n_threads, int64_t *bounds, int max_chunks) {
    int64_t min_rows = row_bytes > 0 ? GEMV_MIN_CHUNK_BYTES / row_bytes : GEMV_MIN_ROWS, r = 0;
    if (min_rows < GEMV_MIN_ROWS) min_rows = GEMV_MIN_ROWS;
    int c = 0;
    bounds[0] = 0;
    while (r < N) {
        int64_t n = (N - r) / (2 * (int64_t)n_threads);
        n = (n < min_rows ? min_rows : n + 3) & ~(int64_t)3;
        if (r + n > N || c == max_chunks - 1) n = N - r;
        r += n;
        bounds[++c] = r;
    }
    return c;
}

static void plan_gemv(const candle_tensor *dst, const mm_geom *g, int n_threads, size_t xb, cpu_plan *p) {
    int64_t bounds[CPU_GEMV_MAX_CHUNKS + 1], rb = dst->src[1]->stride[dst->src[1]->rank - 1];
    bool par = cpu_tasks_for((double)g->N * (double)g->K, 1e5, n_threads, 1) > 1;
    p->nth = par ? cpu_gemv_chunks(g->N, rb, n_threads, bounds, CPU_GEMV_MAX_CHUNKS) : 1;
    p->nth0 = 1;
    p->n_phases = 2;
    /* the caller's f32 copy of a strided row, then the prepared row */
    p->wsize = 64 + (((size_t)g->K * sizeof(float) + 63) & ~(size_t)63) + xb;
}

static void plan_quant(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    mm_geom g;
    cpu_mm_geom(dst, &g);
    size_t xb = gemv_bytes(dst, &g);
    if (xb) {
        plan_gemv(dst, &g, n_threads, xb, p);
        return;
    }
    double work = (double)g.M * (double)g.N * (double)g.K * (double)g.n_batch;
    p->nth = cpu_tasks_for(work, 1e5, n_threads, 4);
    p->n_phases = 2; /* quantize the activations, then the dot products */
    /* per-thread f32 row buffers first, then the shared quantized rows */
    p->wsize = 64 + (size_t)n_threads * tmp_bytes(dst, g.K) +
               (size_t)(g.n_batch * g.M) * xq_row_bytes(dst, g.K);
}

/* Phase 0: activation rows [r0, r1) of all batches to the vec_dot type. */
static void quantize_rows(const candle_tensor *dst, const mm_geom *g, int64_t r0, int64_t r1,
                          float *tmp, char *xq, size_t xrow) {
    const candle_tensor *a = dst->src[0];
    candle_dtype vdt = cpu_dtype(dst->src[1]->dtype)->vec_dot_type;
    candle_from_f32_fn from_f32 = cpu_dtype(vdt)->from_f32;
    int64_t sam = a->stride[a->rank - 2], sak = a->stride[a->rank - 1];
    for (int64_t r = r0; r < r1; r++) {
        int64_t oa, ob;
        cpu_mm_batch(dst, r / g->M, &oa, &ob);
        const char *row = tensor_ptr(a) + oa + (r % g->M) * sam;
        const float *src = (const float *)row;
        if (sak != 4) {
            for (int64_t k = 0; k < g->K; k++) memcpy(tmp + k, row + k * sak, sizeof(float));
            src = tmp;
        }
        from_f32(src, xq + (size_t)r * xrow, g->K);
    }
}

static candle_status run_gemv(const cpu_task *t, candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    char *base = (char *)(((uintptr_t)t->wdata + 63) & ~(uintptr_t)63);
    float *tmp = (float *)base;
    void *xv = base + (((size_t)g->K * sizeof(float) + 63) & ~(size_t)63);
    if (t->phase == 0) {
        int64_t oa, ob, sak = a->stride[a->rank - 1];
        cpu_mm_batch(dst, 0, &oa, &ob);
        const char *row = tensor_ptr(a) + oa;
        const float *src = (const float *)row;
        if (sak != 4) {
            for (int64_t k = 0; k < g->K; k++) memcpy(tmp + k, row + k * sak, sizeof(float));
            src = tmp;
        }
        cdl_gemv_prep(b->dtype, g->K, src, xv);
        return CANDLE_OK;
    }
    int64_t oa, ob, n0 = 0, n1 = g->N, sbn = b->stride[b->rank - 1];
    cpu_mm_batch(dst, 0, &oa, &ob);
    if (t->nth > 1) {
        int64_t bounds[CPU_GEMV_MAX_CHUNKS + 1];
        cpu_gemv_chunks(g->N, sbn, t->n_threads, bounds, CPU_GEMV_MAX_CHUNKS);
        n0 = bounds[t->ith], n1 = bounds[t->ith + 1];
    }
    if (n1 > n0)
        cdl_gemv_rows(b->dtype, g->K, n1 - n0, tensor_ptr(b) + ob + n0 * sbn, (size_t)sbn, xv,
                         (float *)tensor_ptr(dst) + n0);
    return CANDLE_OK;
}

static candle_status run_quant(const cpu_task *t, candle_tensor *dst) {
    mm_geom g;
    cpu_mm_geom(dst, &g);
    if (gemv_bytes(dst, &g)) return run_gemv(t, dst, &g);
    const candle_tensor *b = dst->src[1];
    size_t xrow = xq_row_bytes(dst, g.K), tb = tmp_bytes(dst, g.K);
    float *tmp = cpu_thread_scratch(t, tb);
    /* the quantized rows follow the per-thread buffers */
    char *xq = (char *)tmp + (size_t)(t->n_threads - t->tid) * tb;
    if (t->phase == 0) {
        int64_t r0, r1;
        cpu_split(g.n_batch * g.M, 1, t->ith, t->nth, &r0, &r1);
        quantize_rows(dst, &g, r0, r1, tmp, xq, xrow);
        return CANDLE_OK;
    }
    int64_t n0, n1, sbn = b->stride[b->rank - 1];
    bool panels = cdl_qgemm_has_fast(b->dtype);
    cpu_split(g.N, panels ? CANDLE_QGEMM_NR : QBLOCK_ROWS, t->ith, t->nth, &n0, &n1);
    int64_t step = panels ? (n1 > n0 ? n1 - n0 : 1) : QBLOCK_ROWS;
    for (int64_t bi = 0; bi < g.n_batch; bi++) {
        int64_t oa, ob;
        cpu_mm_batch(dst, bi, &oa, &ob);
        const char *pb = tensor_ptr(b) + ob;
        float *pc = (float *)tensor_ptr(dst) + bi * g.M * g.N;
        for (int64_t nb = n0; nb < n1; nb += step) {
            int64_t ne = n1 - nb < step ? n1 : nb + step;
            (cpu_mm_row_steps(dst) ? cdl_qgemm_rows_steps : cdl_qgemm_rows)(
                b->dtype, g.K, g.M, ne - nb, pb + nb * sbn, (size_t)sbn, xq + (size_t)(bi * g.M) * xrow, xrow,
                pc + nb, g.N, tmp);
        }
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_matmul_quant = {
    .name = "matmul quantized weight, small M (activations quantized once, multi-row integer kernels)",
    .match = match_quant,
    .plan = plan_quant,
    .run = run_quant,
};
