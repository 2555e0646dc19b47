/* The f32 GEMM (fast_matmul.c) on the shapes that pick each way of
 * splitting a product between threads (M for plain B rows and tall A, N for
 * wide products and transposed or block-quantized weights), crossing the
 * blocking (MR 6, NR 16, MC 144, KC 256, NC 2048) with tails, on 1, 2 and
 * 4 threads (2-D grids of tasks), strided and offset operands, f32, f16,
 * bf16 and Q8_0 weights, and the matrix-vector path's row groups and tails,
 * against a naive double-precision product computed here. */
#include "gemm-check.h"

static const gemm_case cases[] = {
    /* square enough for a 2 x 2 grid on 4 threads */
    {200, 64, 260, false, F32, MT_CONTIG, MT_CONTIG},
    {210, 50, 270, true, F32, MT_CONTIG, MT_OFFSET},
    /* plain B, tall enough for M on 2 threads; K over one KC slice */
    {100, 300, 130, false, F32, MT_CONTIG, MT_CONTIG},
    {97, 257, 131, false, F32, MT_SLICED, MT_OFFSET},
    /* plain B, wide: N */
    {50, 70, 260, false, F32, MT_CONTIG, MT_CONTIG},
    {49, 33, 300, false, F32, MT_TRANSPOSED, MT_SLICED},
    /* N past one NC block, both ways */
    {60, 20, 2100, false, F32, MT_CONTIG, MT_CONTIG},
    {7, 18, 2065, false, F32, MT_OFFSET, MT_CONTIG},
    /* transposed weights: N when N > M, else M; M past MC */
    {150, 260, 200, true, F32, MT_CONTIG, MT_CONTIG},
    {200, 40, 140, true, F32, MT_SLICED, MT_CONTIG},
    {70, 100, 150, true, F16, MT_CONTIG, MT_CONTIG},
    {146, 77, 129, true, BF16, MT_OFFSET, MT_CONTIG},
    /* too small in both for a split with every thread's share of MR/NR */
    {11, 9, 40, false, F32, MT_CONTIG, MT_CONTIG},
    {66, 5, 17, true, F32, MT_CONTIG, MT_CONTIG},
    /* block-quantized weights dequantized into the GEMM (M over the integer
     * kernels' limit, lowered in main) */
    {70, 64, 150, true, Q8, MT_CONTIG, MT_CONTIG},
    {150, 96, 40, true, Q8, MT_SLICED, MT_CONTIG},
    /* ... and at matrix-vector sizes (CANDLE_QMM_MAX_M=0 sends every row
     * count here; the matrix-vector path reads plain float rows only) */
    {1, 64, 40, true, Q8, MT_CONTIG, MT_CONTIG},
    {1, 576, 70, true, Q8, MT_CONTIG, MT_CONTIG},
    {2, 1536, 2100, true, Q8, MT_CONTIG, MT_CONTIG},
    {3, 96, 33, true, Q8, MT_SLICED, MT_CONTIG},
    /* matrix-vector (M <= 4): 8- and 4-row passes, row and K tails */
    {1, 1029, 77, true, F32, MT_SLICED, MT_CONTIG},
    {3, 2051, 45, true, F32, MT_CONTIG, MT_OFFSET},
    {1, 515, 40, true, F16, MT_CONTIG, MT_CONTIG},
    {2, 300, 33, true, BF16, MT_OFFSET, MT_CONTIG},
};

int main(void) {
    /* every quantized product goes to the dequantizing GEMM (read once, at
     * first use) */
    candle_cpu_params cpu = candle_cpu_get_defaults();
    cpu.qmm_max_m = 0;
    CHECK(candle_cpu_set_defaults(&cpu) == CANDLE_OK);
    cpu_set_always_parallel(true);
    /* 4 threads (oversubscribed here) take the 2-D grids */
    for (int threads = 1; threads <= 4; threads *= 2) {
        candle_ctx *ctx = mt_ctx_threads(true, threads);
        CHECK(candle_ctx_backend(ctx)->n_threads == threads);
        char label[32];
        snprintf(label, sizeof label, "%d thread%s", threads, threads > 1 ? "s" : "");
        uint64_t seed = 1;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) gemm_check(ctx, &cases[i], label, seed += 2);
        candle_ctx_free(ctx);
    }
    return test_done("test_gemm_split");
}
