/* The matrix-vector path: decoding rows against a weight seen through a
 * transpose, each weight row streamed once through the table's dot_rows. */
#include "fast-matmul-impl.h"

/* Weight rows per block in the matrix-vector path, so that the block stays
 * in L2 while every row of x passes over it. */
#define MV_BLOCK_BYTES (192 * 1024)
#ifndef MV_GUIDED_BYTES
#define MV_GUIDED_BYTES ((double)(32 << 20))
#endif


bool cpu_mm_mv_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *b = dst->src[1];
    size_t esz = cpu_dtype(b->dtype)->type_size;
    return g->M <= MV_MAX_M && mm_plain_float(b->dtype) && (b->stride[b->rank - 2] == (int64_t)esz || g->K == 1);
}


size_t cpu_mm_mv_thread_bytes(int64_t K) { return ((size_t)K * sizeof(float) + 63) & ~(size_t)63; }


/* ---- matrix-vector ---- */

/* A weight past the last-level cache (an LLM's output matrix) is split
 * in guided tasks: with equal tasks, four per thread, the first thread
 * done waited out a whole large task. Smaller weights keep equal tasks:
 * their rows then tend to go to the same thread from call to call, which
 * in cache is faster. Figures: bench/RESULTS.md (issue 17). */
bool cpu_mm_mv_guided(const candle_tensor *dst, const mm_geom *g) {
    double bytes = (double)g->N * (double)g->K * (double)cpu_dtype(dst->src[1]->dtype)->type_size;
    return bytes >= MV_GUIDED_BYTES;
}

void cpu_mm_mv_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    size_t besz = cpu_dtype(b->dtype)->type_size;
    int64_t sam = a->stride[a->rank - 2], sak = a->stride[a->rank - 1];
    int64_t sbn = b->stride[b->rank - 1];
    size_t aesz = cpu_dtype(a->dtype)->type_size;
    float *x = cpu_thread_scratch(t, cpu_mm_mv_thread_bytes(g->K));
    int64_t n0, n1;
    if (cpu_mm_mv_guided(dst, g) && t->nth > 1) guided_range(g->N, 16, t->n_threads, t->ith, &n0, &n1);
    else cpu_split(g->N, 16, t->ith, t->nth, &n0, &n1);
    int64_t rows_per_block = MV_BLOCK_BYTES / (int64_t)(besz * (size_t)(g->K ? g->K : 1));
    if (rows_per_block < 4 || g->M == 1) rows_per_block = n1 - n0;
    for (int64_t bi = 0; bi < g->n_batch; bi++) {
        int64_t oa, ob;
        cpu_mm_batch(dst, bi, &oa, &ob);
        const char *pa = tensor_ptr(a) + oa, *pb = tensor_ptr(b) + ob;
        float *pc = (float *)tensor_ptr(dst) + bi * g->M * g->N;
        for (int64_t nb = n0; nb < n1; nb += rows_per_block) {
            int64_t nn = n1 - nb < rows_per_block ? n1 - nb : rows_per_block;
            for (int64_t m = 0; m < g->M; m++) {
                const char *row = pa + m * sam;
                if (sak == (int64_t)aesz) simd->to_f32(a->dtype, row, x, g->K);
                else
                    for (int64_t k = 0; k < g->K; k++) x[k] = (float)cdl_load_f64(a->dtype, row + k * sak);
                simd->dot_rows(b->dtype, g->K, pb + nb * sbn, (size_t)sbn, nn, x, pc + m * g->N + nb, 1);
            }
        }
    }
}

