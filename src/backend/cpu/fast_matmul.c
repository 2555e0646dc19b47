/* Fast f32 matmul: a [..., M, K] (f32/f16/bf16) x b [..., K, N] (f32/f16/bf16,
 * or for M > the integer kernels' rows a block-quantized weight, dequantized
 * on the way) -> f32, any strides, batch dims broadcast.
 *
 * This file picks one algorithm per node (match, plan, run); each lives in
 * its own file (fast-matmul-impl.h):
 * - decoding (M <= MV_MAX_M, b's K contiguous: the transpose view of a
 *   row-major [N, K] weight): a matrix-vector product streaming each weight
 *   row once through dot_rows, threads on disjoint ranges of N
 *   (fast_matmul_mv.c);
 * - prefill on such a plain-float weight (WT_MIN_M <= M <= WT_MAX_M, or
 *   WT_BF16_MAX_M for bf16 weights on the bf16 dot products): the
 *   weight-row tiles, six rows at a time against 16-row panels of A packed
 *   transposed once (fast_matmul_wt.c);
 * - a few rows (M <= DOT_MAX_M): 4 x 3 tiles of dot products on the rows as
 *   they are, no packing (fast_matmul_dot.c);
 * - everything else: the packed, cache-blocked GEMM, or with all rows in
 *   one block its form with A packed once for all tasks
 *   (fast_matmul_gemm.c);
 * - block-quantized weights with many rows go through the dot tiles or the
 *   GEMM, dequantized on the way (fast_matmul_dequant.c).
 * A bias (src[2], candle_matmul_bias) is added as the weight-row tiles
 * write C out of their transposed scratch (plan.bias_done); after every
 * other path the backend adds it to the rows (cpu_backend.c).
 * Every ISA-specific kernel is reached through the primitive table
 * (cpu_simd_get()): bf16 weights where it has bf16 dot products (avx512
 * with AVX512_BF16, unless bf16 exactness is asked for) multiply the
 * activations rounded to bf16 against the weight's own values, twice the
 * f32 FMA rate and no weight conversion, for an nmse of ~2e-6 against the
 * exact product. */
#include <stdint.h>
#include <string.h>

#include "fast-matmul-impl.h"

bool cpu_mm_geom(const candle_tensor *dst, mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    if (dst->n_src < 2 || !a || !b || a->rank < 2 || b->rank < 2 || dst->rank < 2) return false;
    if (dst->dtype != CANDLE_DTYPE_F32 || !candle_tensor_is_contiguous(dst)) return false;
    g->M = a->shape[a->rank - 2];
    g->K = a->shape[a->rank - 1];
    g->N = b->shape[b->rank - 1];
    if (b->shape[b->rank - 2] != g->K || dst->shape[dst->rank - 2] != g->M ||
        dst->shape[dst->rank - 1] != g->N)
        return false;
    int br = dst->rank - 2;
    if (a->rank - 2 > br || b->rank - 2 > br) return false;
    g->n_batch = 1;
    for (int d = 0; d < br; d++) g->n_batch *= dst->shape[d];
    return true;
}

/* Byte offsets of batch bi in a and b (size-1 or missing dims broadcast). */
static int64_t batch_offset(const candle_tensor *t, const candle_tensor *dst, int64_t bi) {
    int br = dst->rank - 2, tb = t->rank - 2;
    int64_t off = 0;
    for (int d = br - 1; d >= 0; d--) {
        int64_t i = bi % dst->shape[d];
        bi /= dst->shape[d];
        int td = d - (br - tb);
        if (td >= 0 && t->shape[td] != 1) off += i * t->stride[td];
    }
    return off;
}

void cpu_mm_batch(const candle_tensor *dst, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = batch_offset(dst->src[0], dst, bi);
    *ob = batch_offset(dst->src[1], dst, bi);
}

static bool match_f32(const candle_tensor *dst) {
    mm_geom g = {0};
    if (dst->op != CANDLE_OP_MATMUL || !cpu_mm_geom(dst, &g)) return false;
    if (!mm_plain_float(dst->src[0]->dtype)) return false;
    return mm_plain_float(dst->src[1]->dtype) || cpu_mm_dequant_path(dst, &g);
}

static void plan_f32(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    mm_geom g = {0};
    cpu_mm_geom(dst, &g);
    double flops = 2.0 * (double)g.M * (double)g.N * (double)g.K * (double)g.n_batch;
    /* matrix-vector: several tasks per thread balance a busy machine; GEMM:
     * one per thread, as each task packs its own A */
    bool mv = cpu_mm_mv_path(dst, &g), dot = !mv && !cpu_mm_wt_path(dst, &g) && cpu_mm_dot_path(dst, &g);
    if (!mv && cpu_mm_wt_path(dst, &g)) {
        p->n_phases = 2;
        p->nth0 = cpu_tasks_for(flops, 2e5, n_threads, 1);
        p->nth = p->nth0 > 1 ? cpu_mm_wt_tasks(&g, n_threads) : 1;
        p->wsize = cpu_mm_wt_a_bytes(&g) + (size_t)n_threads * cpu_mm_wt_thread_bytes() + 64;
        p->bias_done = cpu_mm_wt_adds_bias(dst);
        return;
    }
    if (!mv && !dot && cpu_mm_panel_path(dst, &g)) {
        /* phase 0 packs A once for all; phase 1's tasks share it */
        p->n_phases = 2;
        p->nth0 = cpu_tasks_for(flops, 2e5, n_threads, 1);
        p->nth = cpu_tasks_for(flops, 2e5, n_threads, PANEL_TASKS);
        p->wsize = cpu_mm_panel_a_bytes(&g) + (size_t)n_threads * cpu_mm_panel_thread_bytes() + 64;
        return;
    }
    p->nth = cpu_tasks_for(flops, 2e5, n_threads, mv || dot ? 4 : 1);
    if (mv && cpu_mm_mv_guided(dst, &g) && p->nth > 1) p->nth = guided_tasks(g.N, 16, n_threads);
    if (mv) p->wsize = (size_t)n_threads * cpu_mm_mv_thread_bytes(g.K) + 64;
    else if (dot) p->wsize = (size_t)n_threads * cpu_mm_dot_thread_bytes() + 64;
    else p->wsize = (size_t)n_threads * cpu_mm_gemm_thread_floats() * sizeof(float) + 64;
}

static candle_status run_f32(const cpu_task *t, candle_tensor *dst) {
    mm_geom g = {0};
    cpu_mm_geom(dst, &g);
    if (g.M == 0 || g.N == 0) return CANDLE_OK;
    if (cpu_mm_mv_path(dst, &g)) cpu_mm_mv_run(t, dst, &g);
    else if (cpu_mm_wt_path(dst, &g)) cpu_mm_wt_run(t, dst, &g);
    else if (cpu_mm_dot_path(dst, &g)) cpu_mm_dot_run(t, dst, &g);
    else if (cpu_mm_panel_path(dst, &g)) cpu_mm_panel_run(t, dst, &g);
    else cpu_mm_gemm_run(t, dst, &g);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_matmul = {
    .name = "matmul f32 (packed gemm 6x16, 12x32 on avx512, bf16 dot products on avx512bf16 / matvec; f16, bf16 and block weights dequantized past the integer kernels' M)",
    .match = match_f32,
    .plan = plan_f32,
    .run = run_f32,
};

