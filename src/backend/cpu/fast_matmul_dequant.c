/* Block-quantized weights with more rows than the integer kernels take:
 * dequantized on the way into the f32 paths (the packed GEMM's B panels,
 * the dot tiles' weight rows). */
#include "fast-matmul-impl.h"

/* A block-quantized weight (transpose view of row-major [N, K]) with more
 * than MV_MAX_M activation rows: its rows are dequantized while B is packed
 * (once per product) and the f32 GEMM runs, far faster for prefill than one
 * quantized dot product per output. Fewer rows go to fast_matmul_quant,
 * unless the activations must stay float (cpu_mm_float_act). */
bool cpu_mm_dequant_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *b = dst->src[1];
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    return bt->is_quantized && bt->to_f32 && (g->M > cpu_qmm_max_m(b->dtype) || cpu_mm_float_act(dst)) &&
           GEMM_KC % bt->block_size == 0 &&
           g->K % bt->block_size == 0 && b->stride[b->rank - 2] == (int64_t)bt->type_size;
}


void cpu_mm_dequant_rows(candle_dtype t, const char *w, int64_t row_stride, int64_t n0, int nr, int64_t k0,
                         int64_t kc, float *dst) {
    const candle_dtype_traits *bt = cpu_dtype(t);
    const char *blocks = w + (k0 / bt->block_size) * (int64_t)bt->type_size;
    for (int j = 0; j < nr; j++) bt->to_f32(blocks + (n0 + j) * row_stride, dst + j * kc, kc);
}
