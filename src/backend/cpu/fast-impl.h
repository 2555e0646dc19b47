/* Helpers shared by the fast kernels (fast_*.c). */
#ifndef CANDLE_CPU_FAST_IMPL_H
#define CANDLE_CPU_FAST_IMPL_H

#include "cpu-impl.h"
#include "threadpool.h"

/* A matmul node's sizes: a [..., M, K] x b [..., K, N] -> dst [..., M, N]. */
typedef struct mm_geom {
    int64_t M, N, K, n_batch; /* n_batch: product of dst's batch dims */
} mm_geom;

/* False unless dst is a contiguous f32 matmul node with consistent shapes. */
bool cpu_mm_geom(const candle_tensor *dst, mm_geom *g);
/* Products with a block-quantized weight of dtype t and at most this many
 * activation rows use the integer dot products (fast_matmul_quant.c); more
 * rows are dequantized into the f32 GEMM (fast_matmul.c). */
int64_t cpu_qmm_max_m(candle_dtype t);
/* Byte offsets of batch bi (row-major over dst's batch dims) in a and b;
 * size-1 or missing batch dims broadcast. */
void cpu_mm_batch(const candle_tensor *dst, int64_t bi, int64_t *oa, int64_t *ob);

/* The running thread's part of the scratch, 64-byte aligned; the plan must
 * have asked for n_threads * per_thread bytes + 64 (per_thread a multiple
 * of 64). */
static inline void *cpu_thread_scratch(const cpu_task *t, size_t per_thread) {
    uintptr_t base = ((uintptr_t)t->wdata + 63) & ~(uintptr_t)63;
    return (char *)base + (size_t)t->tid * per_thread;
}

/* Copies within one plain dtype, rows contiguous (fast_ops.c). */
extern const cpu_fast_kernel cpu_fast_copy;

/* Guided row chunks for matrix-vector products (fast_matmul_quant.c):
 * bounds[c] .. bounds[c + 1] are chunk c's rows of N, row_bytes each;
 * returns the number of chunks (at most max_chunks). */
#define CPU_GEMV_MAX_CHUNKS 256
int cpu_gemv_chunks(int64_t N, int64_t row_bytes, int n_threads, int64_t *bounds, int max_chunks);

/* Batch-1 products with quantized weights as one job (fast_matvecs.c). */
#define CPU_MATVECS_MAX 32
/* dst is a 1-row product that the quantized matrix-vector kernel takes. */
bool cpu_matvec_ok(const candle_tensor *dst);
/* Scratch bytes for n such products (at most CPU_MATVECS_MAX) whose
 * activations have one length (K); they may be different rows. */
size_t cpu_matvecs_scratch(candle_tensor *const *nodes, int n);
/* Run them on the pool; work: cpu_matvecs_scratch bytes. */
void cpu_matvecs_run(cpu_pool *pool, candle_tensor *const *nodes, int n, void *work);
/* For tests: the task whose range of rows is left to the others (it only
 * takes from their backs), as if its thread were preempted (-1: none, the
 * default). */
void cpu_matvecs_set_idle_owner(int task);

/* The product part of a MATMUL_GROUP_CORR node: the node as a MATMUL of
 * its first two sources into the same output (fast_matvecs.c). */
candle_tensor cpu_group_corr_product(const candle_tensor *dst);
/* MATMUL_GROUP_CORR's group sums (fast_matvecs.c): out[g] = the sum of x's
 * elements g * group .. (g + 1) * group - 1, x's elements sx bytes apart. */
void cpu_group_sums(const char *x, int64_t sx, int64_t n_groups, int64_t group, float *out);

#endif
