/* Internal: the fast f32 matmul's algorithms (fast_matmul.c picks one per
 * node): the matrix-vector rows (fast_matmul_mv.c), the small-M dot tiles
 * (fast_matmul_dot.c), the weight-row tiles (fast_matmul_wt.c), the packed
 * GEMM and its shared-A prefill form (fast_matmul_gemm.c), and the
 * dequantization of block-quantized weights for them
 * (fast_matmul_dequant.c). Each path has a predicate on the node (_path),
 * the scratch it asks for and a run on one task. */
#ifndef CANDLE_CPU_FAST_MATMUL_IMPL_H
#define CANDLE_CPU_FAST_MATMUL_IMPL_H

#include "fast-impl.h"

#define MV_MAX_M 4
/* Up to this many rows with a transposed weight, the unpacked dot-product
 * tiles (gemm_dot) beat packing B, whose transposition costs as much as a
 * few dozen rows of compute; K is walked in chunks that keep three weight
 * rows in L1. */
#ifndef DOT_MAX_M
#define DOT_MAX_M 64
#endif
#define DOT_KC 1024
#ifndef GEMM_MC
#define GEMM_MC 144
#endif
#ifndef GEMM_KC
#define GEMM_KC 256
#endif
#ifndef GEMM_NC
#define GEMM_NC 2048
#endif
/* Tasks per thread of the shared-A GEMM (cpu_mm_panel_run), and the work below
 * which its second pool dispatch (a few us) would cost more than it saves. */
#define PANEL_TASKS 4
#define PANEL_MIN_FLOPS 5e6

static inline bool mm_plain_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

/* Guided split of n columns (in units of `unit`) over n_threads: each
 * task takes 1 / (GUIDED_DIV * n_threads) of what is left, at least
 * GUIDED_MIN units, so tasks start large and end small and the thread
 * that finishes first waits for a small task only. Task i of
 * guided_tasks() is columns *lo .. *hi. */
#define GUIDED_DIV 2
#define GUIDED_MIN 4

static inline int64_t guided_next(int64_t left, int n_threads) {
    int64_t c = (left + GUIDED_DIV * n_threads - 1) / (GUIDED_DIV * n_threads);
    c = c < GUIDED_MIN ? GUIDED_MIN : c;
    return c < left ? c : left;
}

static inline int guided_tasks(int64_t n, int64_t unit, int n_threads) {
    int64_t left = (n + unit - 1) / unit;
    int tasks = 0;
    for (; left > 0; tasks++) left -= guided_next(left, n_threads);
    return tasks > 0 ? tasks : 1;
}

static inline void guided_range(int64_t n, int64_t unit, int n_threads, int i, int64_t *lo, int64_t *hi) {
    int64_t units = (n + unit - 1) / unit, u0 = 0;
    for (int k = 0; k < i && u0 < units; k++) u0 += guided_next(units - u0, n_threads);
    int64_t u1 = u0 < units ? u0 + guided_next(units - u0, n_threads) : u0;
    *lo = u0 * unit < n ? u0 * unit : n;
    *hi = u1 * unit < n ? u1 * unit : n;
}

/* One product's operands for the packed GEMM and the wt tiles. */
typedef struct gemm_args {
    const char *a;
    int64_t sam, sak;
    candle_dtype at;
    const char *b;
    int64_t sbk, sbn; /* quantized b: sbk is the block size in bytes */
    candle_dtype bt;
    float *c;
    int64_t ldc;
    float *rows; /* [NR, KC] dequantized weight rows (quantized b), then [NR, KC] scratch */
    bool bf16dot; /* bf16 b (or quantized b with float activations) through the table's bf16 tile: panels of bf16 k pairs */
} gemm_args;

gemm_args cpu_mm_gemm_args_for(const candle_tensor *dst, const mm_geom *geo, int64_t bi, float *rows);
/* Prefetches one B panel's source: columns n0 .. n0+nr, k from k0, kc deep. */
void cpu_mm_prefetch_b_panel(const gemm_args *g, int64_t k0, int64_t kc, int64_t n0, int nr);

/* matrix-vector (fast_matmul_mv.c) */
bool cpu_mm_mv_path(const candle_tensor *dst, const mm_geom *g);
bool cpu_mm_mv_guided(const candle_tensor *dst, const mm_geom *g);
size_t cpu_mm_mv_thread_bytes(int64_t K);
void cpu_mm_mv_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g);

/* block-quantized weights with many rows (fast_matmul_dequant.c) */
bool cpu_mm_dequant_path(const candle_tensor *dst, const mm_geom *g);
/* dst[j * kc + p] = weight row n0 + j (rows row_stride bytes apart, blocks
 * of t) at element k0 + p, for j < nr, p < kc; k0 and kc whole blocks. */
void cpu_mm_dequant_rows(candle_dtype t, const char *w, int64_t row_stride, int64_t n0, int nr, int64_t k0,
                         int64_t kc, float *dst);

/* small-M dot tiles (fast_matmul_dot.c) */
bool cpu_mm_dot_path(const candle_tensor *dst, const mm_geom *g);
size_t cpu_mm_dot_thread_bytes(void);
void cpu_mm_dot_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g);

/* packed GEMM, and the prefill form with A packed once (fast_matmul_gemm.c) */
size_t cpu_mm_gemm_thread_floats(void);
void cpu_mm_gemm_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo);
bool cpu_mm_panel_path(const candle_tensor *dst, const mm_geom *g);
size_t cpu_mm_panel_a_bytes(const mm_geom *g);
size_t cpu_mm_panel_thread_bytes(void);
void cpu_mm_panel_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo);

/* weight-row tiles (fast_matmul_wt.c) */
bool cpu_mm_wt_path(const candle_tensor *dst, const mm_geom *g);
bool cpu_mm_wt_adds_bias(const candle_tensor *dst);
size_t cpu_mm_wt_a_bytes(const mm_geom *g);
size_t cpu_mm_wt_thread_bytes(void);
int cpu_mm_wt_tasks(const mm_geom *g, int n_threads);
void cpu_mm_wt_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo);

#endif
