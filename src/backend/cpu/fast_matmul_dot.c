/* The small-M path: 4 x 3 tiles of dot products (the table's gemm_dot) on
 * the weight rows as they are, with no packing. */
#include <string.h>

#include "fast-matmul-impl.h"

/* Quantized weights take this path too: three rows at a time are
 * dequantized into the thread's scratch (DOT_KC is a whole number of blocks). */
bool cpu_mm_dot_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    size_t besz = cpu_dtype(b->dtype)->type_size;
    bool w_ok = (mm_plain_float(b->dtype) && b->stride[b->rank - 2] == (int64_t)besz) ||
                (cpu_mm_dequant_path(dst, g) && DOT_KC % cpu_dtype(b->dtype)->block_size == 0);
    return g->M > MV_MAX_M && g->M <= DOT_MAX_M && w_ok && a->dtype == CANDLE_DTYPE_F32 &&
           a->stride[a->rank - 1] == 4 && a->stride[a->rank - 2] % 4 == 0;
}

size_t cpu_mm_dot_thread_bytes(void) { return (size_t)CPU_DOT_NR * DOT_KC * sizeof(float); }


/* ---- small M: dot-product tiles on the weight rows as they are ---- */

/* Three weight rows from k0, kc deep, as rows the tile kernel reads: in
 * place for plain floats, dequantized into buf for block dtypes. */
static const char *dot_rows_at(const candle_tensor *b, const char *pb, int64_t nb, int nr, int64_t k0,
                               int64_t kc, float *buf, int64_t *ldw, candle_dtype *wt) {
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    int64_t sbn = b->stride[b->rank - 1];
    if (!bt->is_quantized) {
        *ldw = sbn;
        *wt = b->dtype;
        return pb + nb * sbn + k0 * (int64_t)bt->type_size;
    }
    cpu_mm_dequant_rows(b->dtype, pb, sbn, nb, nr, k0, kc, buf);
    *ldw = kc * 4;
    *wt = CANDLE_DTYPE_F32;
    return (const char *)buf;
}

void cpu_mm_dot_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    float *wbuf = cpu_thread_scratch(t, cpu_mm_dot_thread_bytes());
    int64_t lda = a->stride[a->rank - 2] / 4, n0, n1;
    cpu_split(g->N, 4 * CPU_DOT_NR, t->ith, t->nth, &n0, &n1);
    for (int64_t bi = 0; bi < g->n_batch; bi++) {
        int64_t oa, ob;
        cpu_mm_batch(dst, bi, &oa, &ob);
        const float *pa = (const float *)(tensor_ptr(a) + oa);
        const char *pb = tensor_ptr(b) + ob;
        float *pc = (float *)tensor_ptr(dst) + bi * g->M * g->N;
        if (g->K == 0)
            for (int64_t m = 0; m < g->M && n0 < n1; m++) memset(pc + m * g->N + n0, 0, sizeof(float) * (size_t)(n1 - n0));
        for (int64_t k0 = 0; k0 < g->K; k0 += DOT_KC) {
            int64_t kc = g->K - k0 < DOT_KC ? g->K - k0 : DOT_KC;
            for (int64_t nb = n0; nb < n1; nb += CPU_DOT_NR) {
                int nr = n1 - nb < CPU_DOT_NR ? (int)(n1 - nb) : CPU_DOT_NR;
                int64_t ldw;
                candle_dtype wt;
                const char *w = dot_rows_at(b, pb, nb, nr, k0, kc, wbuf, &ldw, &wt);
                for (int64_t mb = 0; mb < g->M; mb += CPU_DOT_MR) {
                    int mr = g->M - mb < CPU_DOT_MR ? (int)(g->M - mb) : CPU_DOT_MR;
                    simd->gemm_dot(kc, pa + mb * lda + k0, lda, w, ldw, wt, pc + mb * g->N + nb, g->N, mr,
                                   nr, k0 > 0);
                }
            }
        }
    }
}

