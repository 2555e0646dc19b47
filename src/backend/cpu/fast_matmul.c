/* Fast f32 matmul: a [..., M, K] (f32/f16/bf16) x b [..., K, N] (f32/f16/bf16,
 * or for M > MV_MAX_M a block-quantized weight, dequantized on the way)
 * -> f32, any strides, batch dims broadcast.
 *
 * Four paths. Decoding (M <= MV_MAX_M with b's K contiguous, the transpose
 * view of a row-major [N, K] weight) is a matrix-vector product that streams
 * each weight row once through dot_rows; threads take disjoint ranges of N.
 * Prefill on such a plain-float weight (WT_MIN_M <= M <= WT_MAX_M) runs on
 * the weight's rows (wt_run): six rows at a time, converted to f32 but not
 * transposed, broadcast against 16-row panels of A packed transposed once
 * (with AVX-512 below 64 rows or off a multiple of 16: 8-row panels of k
 * pairs, each weight pair broadcast as one 64-bit value).
 * A few rows (M <= DOT_MAX_M, fewer than WT_MIN_M for plain floats) use
 * 4 x 3 tiles of dot products on the rows as they are (gemm_dot), with no
 * packing. Everything else is a packed, cache-blocked GEMM: for each
 * NC-wide column block and KC-deep slice (K cut into equal slices,
 * gemm_kc), B is packed into NR-wide panels (converted to f32), A into
 * MR-tall panels per MC rows, and the MR x NR micro-kernel runs over the
 * panels (where the table has the wide tile, gemm_ukr2, on 2 MR x 2 NR
 * tiles of two panels each: AVX-512's 12 x 32); the B micro-panel stays in
 * L1, the A block in L2. When one MC
 * block holds all of a task's rows (prefill), each B panel is packed just
 * before its micro-kernels instead, with the next panel's source
 * prefetched. The threads take a grid of C chosen by packing cost
 * (gemm_grid), each with private pack buffers.
 *
 * bf16 weights where the table has bf16 dot products (avx512 with
 * AVX512_BF16; CANDLE_CPU_BF16_EXACT=1 turns them off): the wt path and the
 * packed GEMM pack A rounded to bf16 in k pairs and multiply with
 * vdpbf16ps against the weight's own bf16 values (wt_bf16, bf16dot), twice
 * the f32 FMA rate and no weight conversion, for the activations' rounding
 * to bf16 (nmse ~2e-6 against the exact product). */
#include <stdint.h>
#include <string.h>

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
/* Tasks per thread of the shared-A GEMM (panel_run), and the work below
 * which its second pool dispatch (a few us) would cost more than it saves. */
#define PANEL_TASKS 4
#define PANEL_MIN_FLOPS 5e6
/* Weight rows per block in the matrix-vector path, so that the block stays
 * in L2 while every row of x passes over it. */
#define MV_BLOCK_BYTES (192 * 1024)
#ifndef MV_GUIDED_BYTES
#define MV_GUIDED_BYTES ((double)(32 << 20))
#endif

static bool is_plain_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

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

static bool mv_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *b = dst->src[1];
    size_t esz = cpu_dtype(b->dtype)->type_size;
    return g->M <= MV_MAX_M && is_plain_float(b->dtype) && (b->stride[b->rank - 2] == (int64_t)esz || g->K == 1);
}

/* A block-quantized weight (transpose view of row-major [N, K]) with more
 * than MV_MAX_M activation rows: its rows are dequantized while B is packed
 * (once per product) and the f32 GEMM runs, far faster for prefill than one
 * quantized dot product per output. Fewer rows go to fast_matmul_quant. */
static bool quant_gemm(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *b = dst->src[1];
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    return bt->is_quantized && bt->to_f32 && g->M > cpu_qmm_max_m(b->dtype) && GEMM_KC % bt->block_size == 0 &&
           g->K % bt->block_size == 0 && b->stride[b->rank - 2] == (int64_t)bt->type_size;
}

/* Quantized weights take this path too: three rows at a time are
 * dequantized into the thread's scratch (DOT_KC is a whole number of blocks). */
static bool dot_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    size_t besz = cpu_dtype(b->dtype)->type_size;
    bool w_ok = (is_plain_float(b->dtype) && b->stride[b->rank - 2] == (int64_t)besz) ||
                (quant_gemm(dst, g) && DOT_KC % cpu_dtype(b->dtype)->block_size == 0);
    return g->M > MV_MAX_M && g->M <= DOT_MAX_M && w_ok && a->dtype == CANDLE_DTYPE_F32 &&
           a->stride[a->rank - 1] == 4 && a->stride[a->rank - 2] % 4 == 0;
}

static size_t dot_thread_bytes(void) { return (size_t)CPU_DOT_NR * DOT_KC * sizeof(float); }

static bool match_f32(const candle_tensor *dst) {
    mm_geom g = {0};
    if (dst->op != CANDLE_OP_MATMUL || !cpu_mm_geom(dst, &g)) return false;
    if (!is_plain_float(dst->src[0]->dtype)) return false;
    return is_plain_float(dst->src[1]->dtype) || quant_gemm(dst, &g);
}

/* A block, B block, and for quantized B the dequantized rows of one panel. */
static size_t gemm_thread_floats(void) {
    return (size_t)GEMM_MC * GEMM_KC + (size_t)GEMM_KC * GEMM_NC + (size_t)CPU_GEMM_NR * GEMM_KC + 16;
}

static size_t mv_thread_bytes(int64_t K) { return ((size_t)K * sizeof(float) + 63) & ~(size_t)63; }

/* Guided split of n columns (in units of `unit`) over n_threads: each
 * task takes 1 / (GUIDED_DIV * n_threads) of what is left, at least
 * GUIDED_MIN units, so tasks start large and end small and the thread
 * that finishes first waits for a small task only. Task i of
 * guided_tasks() is columns *lo .. *hi. */
#define GUIDED_DIV 2
#define GUIDED_MIN 4

static int64_t guided_next(int64_t left, int n_threads) {
    int64_t c = (left + GUIDED_DIV * n_threads - 1) / (GUIDED_DIV * n_threads);
    c = c < GUIDED_MIN ? GUIDED_MIN : c;
    return c < left ? c : left;
}

static int guided_tasks(int64_t n, int64_t unit, int n_threads) {
    int64_t left = (n + unit - 1) / unit;
    int tasks = 0;
    for (; left > 0; tasks++) left -= guided_next(left, n_threads);
    return tasks > 0 ? tasks : 1;
}

static void guided_range(int64_t n, int64_t unit, int n_threads, int i, int64_t *lo, int64_t *hi) {
    int64_t units = (n + unit - 1) / unit, u0 = 0;
    for (int k = 0; k < i && u0 < units; k++) u0 += guided_next(units - u0, n_threads);
    int64_t u1 = u0 < units ? u0 + guided_next(units - u0, n_threads) : u0;
    *lo = u0 * unit < n ? u0 * unit : n;
    *hi = u1 * unit < n ? u1 * unit : n;
}

static bool panel_path(const candle_tensor *dst, const mm_geom *g);
static size_t panel_a_bytes(const mm_geom *g);
static size_t panel_thread_bytes(void);
static bool wt_path(const candle_tensor *dst, const mm_geom *g);
static size_t wt_a_bytes(const mm_geom *g);
static size_t wt_thread_bytes(void);
static int wt_tasks(const mm_geom *g, int n_threads);
static bool mv_guided(const candle_tensor *dst, const mm_geom *g);

static void plan_f32(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    mm_geom g = {0};
    cpu_mm_geom(dst, &g);
    double flops = 2.0 * (double)g.M * (double)g.N * (double)g.K * (double)g.n_batch;
    /* matrix-vector: several tasks per thread balance a busy machine; GEMM:
     * one per thread, as each task packs its own A */
    bool mv = mv_path(dst, &g), dot = !mv && !wt_path(dst, &g) && dot_path(dst, &g);
    if (!mv && wt_path(dst, &g)) {
        p->n_phases = 2;
        p->nth0 = cpu_tasks_for(flops, 2e5, n_threads, 1);
        p->nth = p->nth0 > 1 ? wt_tasks(&g, n_threads) : 1;
        p->wsize = wt_a_bytes(&g) + (size_t)n_threads * wt_thread_bytes() + 64;
        return;
    }
    if (!mv && !dot && panel_path(dst, &g)) {
        /* phase 0 packs A once for all; phase 1's tasks share it */
        p->n_phases = 2;
        p->nth0 = cpu_tasks_for(flops, 2e5, n_threads, 1);
        p->nth = cpu_tasks_for(flops, 2e5, n_threads, PANEL_TASKS);
        p->wsize = panel_a_bytes(&g) + (size_t)n_threads * panel_thread_bytes() + 64;
        return;
    }
    p->nth = cpu_tasks_for(flops, 2e5, n_threads, mv || dot ? 4 : 1);
    if (mv && mv_guided(dst, &g) && p->nth > 1) p->nth = guided_tasks(g.N, 16, n_threads);
    if (mv) p->wsize = (size_t)n_threads * mv_thread_bytes(g.K) + 64;
    else if (dot) p->wsize = (size_t)n_threads * dot_thread_bytes() + 64;
    else p->wsize = (size_t)n_threads * gemm_thread_floats() * sizeof(float) + 64;
}


/* ---- matrix-vector ---- */

/* A weight past the last-level cache (an LLM's output matrix) is split
 * in guided tasks: equal tasks, four per thread, left the first thread
 * done waiting up to a task of ~5 ms on gemma-3's [262144, 640] output
 * (2 threads, 1x262144x640 f16 22 -> 27 GB/s, 1x32000x2048 f16 31 ->
 * 41 GB/s). Smaller weights keep equal tasks: their rows then tend to go
 * to the same thread from call to call, and in cache that measured
 * faster (1x2048x2048 f16 ~70 GB/s against 20-40 with guided tasks). */
static bool mv_guided(const candle_tensor *dst, const mm_geom *g) {
    double bytes = (double)g->N * (double)g->K * (double)cpu_dtype(dst->src[1]->dtype)->type_size;
    return bytes >= MV_GUIDED_BYTES;
}

static void mv_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    size_t besz = cpu_dtype(b->dtype)->type_size;
    int64_t sam = a->stride[a->rank - 2], sak = a->stride[a->rank - 1];
    int64_t sbn = b->stride[b->rank - 1];
    size_t aesz = cpu_dtype(a->dtype)->type_size;
    float *x = cpu_thread_scratch(t, mv_thread_bytes(g->K));
    int64_t n0, n1;
    if (mv_guided(dst, g) && t->nth > 1) guided_range(g->N, 16, t->n_threads, t->ith, &n0, &n1);
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
                    for (int64_t k = 0; k < g->K; k++) x[k] = (float)candle_load_f64(a->dtype, row + k * sak);
                simd->dot_rows(b->dtype, g->K, pb + nb * sbn, (size_t)sbn, nn, x, pc + m * g->N + nb, 1);
            }
        }
    }
}

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
    const char *blocks = pb + (k0 / bt->block_size) * (int64_t)bt->type_size;
    for (int j = 0; j < nr; j++) bt->to_f32(blocks + (nb + j) * sbn, buf + j * kc, kc);
    *ldw = kc * 4;
    *wt = CANDLE_DTYPE_F32;
    return (const char *)buf;
}

static void dot_run(const cpu_task *t, candle_tensor *dst, const mm_geom *g) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    float *wbuf = cpu_thread_scratch(t, dot_thread_bytes());
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

/* ---- GEMM ---- */

typedef struct gemm_args {
    const char *a;
    int64_t sam, sak;
    candle_dtype at;
    const char *b;
    int64_t sbk, sbn; /* quantized b: sbk is the block size in bytes */
    candle_dtype bt;
    float *c;
    int64_t ldc;
    float *rows; /* [NR, KC] dequantized weight rows (quantized b) */
    bool bf16dot; /* bf16 b through the table's bf16 tile: panels of bf16 k pairs */
} gemm_args;

/* One B panel: columns n0 .. n0+nr, k from k0, kc deep. Quantized columns
 * (weight rows) are dequantized first, then packed as f32 rows. */
static void pack_b_panel(const cpu_simd *simd, const gemm_args *g, int64_t k0, int64_t kc,
                         int64_t n0, int nr, float *dst) {
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    if (g->bf16dot) {
        simd->pack_b16_bf16(g->b + k0 * g->sbk + n0 * g->sbn, g->sbk, g->sbn, kc, nr, dst);
        return;
    }
    if (!bt->is_quantized) {
        simd->pack_b(g->bt, g->b + k0 * g->sbk + n0 * g->sbn, g->sbk, g->sbn, kc, nr, dst);
        return;
    }
    const char *blocks = g->b + (k0 / bt->block_size) * g->sbk;
    for (int j = 0; j < nr; j++) bt->to_f32(blocks + (n0 + j) * g->sbn, g->rows + j * kc, kc);
    simd->pack_b(CANDLE_DTYPE_F32, (const char *)g->rows, 4, kc * 4, kc, nr, dst);
}

/* A panels: dst[(i / MR) * kc * MR + p * MR + i % MR] = a(m0 + i, k0 + p). */
static void pack_a(const gemm_args *g, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float *dst) {
    if (g->bf16dot) {
        for (int64_t i0 = 0; i0 < mc; i0 += CPU_GEMM_MR)
            cpu_simd_get()->pack_a6_bf16(g->at, g->a + (m0 + i0) * g->sam + k0 * g->sak, g->sam, g->sak,
                                         mc - i0 < CPU_GEMM_MR ? (int)(mc - i0) : CPU_GEMM_MR, kc, dst + i0 * kc);
        return;
    }
    void (*pack6)(const float *, int64_t, int64_t, float *) = cpu_simd_get()->pack_a6;
    bool fast = pack6 && g->at == CANDLE_DTYPE_F32 && g->sak == 4 && g->sam % 4 == 0;
    for (int64_t i0 = 0; i0 < mc; i0 += CPU_GEMM_MR) {
        int mr = mc - i0 < CPU_GEMM_MR ? (int)(mc - i0) : CPU_GEMM_MR;
        float *d = dst + i0 * kc;
        if (fast && mr == CPU_GEMM_MR) {
            const char *row = g->a + (m0 + i0) * g->sam + k0 * g->sak;
            pack6((const float *)row, g->sam / 4, kc, d);
            continue;
        }
        for (int i = 0; i < CPU_GEMM_MR; i++) {
            if (i >= mr) {
                for (int64_t p = 0; p < kc; p++) d[p * CPU_GEMM_MR + i] = 0.0f;
                continue;
            }
            const char *row = g->a + (m0 + i0 + i) * g->sam + k0 * g->sak;
            if (g->at == CANDLE_DTYPE_F32 && g->sak == 4) {
                const float *r = (const float *)row;
                for (int64_t p = 0; p < kc; p++) d[p * CPU_GEMM_MR + i] = r[p];
            } else {
                for (int64_t p = 0; p < kc; p++)
                    d[p * CPU_GEMM_MR + i] = (float)candle_load_f64(g->at, row + p * g->sak);
            }
        }
    }
}

static inline void cpu_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/* Starts the loads of one B panel's source (columns n0 .. n0+nr, k from
 * k0, kc deep) so that they overlap the packing or the compute before it:
 * a weight's rows are read a few hundred bytes each, more streams at once
 * than the hardware prefetcher follows. In SmolLM2 F16 prefill this took
 * the B packing from 8.1% to 4.8% of the samples (+1.4% for the prefetch
 * loop itself) at equal micro-kernel work. */
static void prefetch_b_panel(const gemm_args *g, int64_t k0, int64_t kc, int64_t n0, int nr) {
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    int64_t esz = (int64_t)bt->type_size, rows, bytes, step;
    const char *base;
    if (bt->is_quantized) {
        base = g->b + (k0 / bt->block_size) * g->sbk + n0 * g->sbn;
        rows = nr, bytes = kc / bt->block_size * g->sbk, step = g->sbn;
    } else if (g->sbk == esz) { /* a weight's rows: contiguous along k */
        base = g->b + k0 * esz + n0 * g->sbn;
        rows = nr, bytes = kc * esz, step = g->sbn;
    } else if (g->sbn == esz) { /* plain [K, N] rows: contiguous along n */
        base = g->b + k0 * g->sbk + n0 * esz;
        rows = kc, bytes = nr * esz, step = g->sbk;
    } else {
        return;
    }
    for (int64_t j = 0; j < rows; j++) {
        uintptr_t lo = (uintptr_t)(base + j * step) & ~(uintptr_t)63, hi = (uintptr_t)(base + j * step + bytes - 1);
        for (uintptr_t line = lo; line <= hi; line += 64) cpu_prefetch((const void *)line);
    }
}

/* The panel of columns j .. j + NR (at most end) prefetched, if j < end. */
static void prefetch_panel_at(const gemm_args *g, int64_t k0, int64_t kc, int64_t j, int64_t end) {
    if (j < end) prefetch_b_panel(g, k0, kc, j, end - j < CPU_GEMM_NR ? (int)(end - j) : CPU_GEMM_NR);
}

/* Depth of the K slices: K split into equal slices of at most GEMM_KC (a
 * multiple of 8, or of the quantized block), so that K = 576 runs as 2 x 288
 * rather than 256 + 256 + 64, whose last pass reads and writes all of C for
 * a quarter of the work. */
static int64_t gemm_kc(const gemm_args *g, int64_t K) {
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    int64_t unit = bt->is_quantized ? bt->block_size : 8;
    int64_t n = (K + GEMM_KC - 1) / GEMM_KC;
    int64_t kc = ((K + n - 1) / n + unit - 1) / unit * unit;
    return kc < GEMM_KC ? kc : GEMM_KC;
}

/* Columns per step over the B panels: two panels where the table has the
 * wide tile (gemm_ukr2), else one. */
static int gemm_step_nr(const cpu_simd *simd) { return simd->gemm_ukr2 ? 2 * CPU_GEMM_NR : CPU_GEMM_NR; }

/* nr (at most gemm_step_nr) columns from consecutive B panels at bpanel
 * against all mc packed A rows. */
static void gemm_panels(const gemm_args *g, const float *abuf, const float *bpanel, int64_t ic,
                        int64_t mc, int64_t jn, int nr, int64_t kc, bool acc) {
    const cpu_simd *simd = cpu_simd_get();
    if (simd->gemm_ukr2) {
        void (*ukr)(int64_t, const float *, const float *, float *, int64_t, int, int, bool) =
            g->bf16dot ? simd->gemm_bf16_ukr2 : simd->gemm_ukr2;
        for (int64_t ir = 0; ir < mc; ir += 2 * CPU_GEMM_MR) {
            int mr = mc - ir < 2 * CPU_GEMM_MR ? (int)(mc - ir) : 2 * CPU_GEMM_MR;
            ukr(kc, abuf + ir * kc, bpanel, g->c + (ic + ir) * g->ldc + jn, g->ldc, mr, nr, acc);
        }
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += CPU_GEMM_MR) {
        int mr = mc - ir < CPU_GEMM_MR ? (int)(mc - ir) : CPU_GEMM_MR;
        simd->gemm_ukr(kc, abuf + ir * kc, bpanel, g->c + (ic + ir) * g->ldc + jn, g->ldc, mr, nr, acc);
    }
}

/* Columns n0 .. n1 of the K slice at pc against the packed A rows (mc of
 * them, C rows from m0): each B panel is packed into bpanel right before
 * its micro-kernels while the next panel's source is prefetched, so the
 * weight streams in under the compute instead of in one latency-bound
 * burst per block. */
static void stream_b_panels(const gemm_args *g, int64_t pc, int64_t kc, int64_t n0, int64_t n1,
                            const float *abuf, int64_t m0, int64_t mc, float *bpanel) {
    const cpu_simd *simd = cpu_simd_get();
    int step = gemm_step_nr(simd);
    for (int64_t j = n0; j < n0 + step; j += CPU_GEMM_NR) prefetch_panel_at(g, pc, kc, j, n1);
    for (int64_t jr = n0; jr < n1; jr += step) {
        int nr = n1 - jr < step ? (int)(n1 - jr) : step;
        for (int64_t j = jr + step; j < jr + 2 * step; j += CPU_GEMM_NR) prefetch_panel_at(g, pc, kc, j, n1);
        for (int j = 0; j < nr; j += CPU_GEMM_NR)
            pack_b_panel(simd, g, pc, kc, jr + j, nr - j < CPU_GEMM_NR ? nr - j : CPU_GEMM_NR, bpanel + j * kc);
        gemm_panels(g, abuf, bpanel, m0, mc, jr, nr, kc, pc > 0);
    }
}

/* When one MC block covers all of the task's rows (prefill: M = 128), the
 * B panels are streamed (stream_b_panels). */
static void gemm_block(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                       int64_t K, float *abuf, float *bbuf) {
    const cpu_simd *simd = cpu_simd_get();
    int64_t KC = gemm_kc(g, K);
    bool fused = m1 - m0 <= GEMM_MC;
    for (int64_t jc = n0; jc < n1; jc += GEMM_NC) {
        int64_t nc = n1 - jc < GEMM_NC ? n1 - jc : GEMM_NC;
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = K - pc < KC ? K - pc : KC;
            if (fused) {
                pack_a(g, m0, m1 - m0, pc, kc, abuf);
                stream_b_panels(g, pc, kc, jc, jc + nc, abuf, m0, m1 - m0, bbuf);
                continue;
            }
            for (int64_t jr = 0; jr < nc; jr += CPU_GEMM_NR) {
                int nr = nc - jr < CPU_GEMM_NR ? (int)(nc - jr) : CPU_GEMM_NR;
                prefetch_panel_at(g, pc, kc, jc + jr + CPU_GEMM_NR, jc + nc);
                pack_b_panel(simd, g, pc, kc, jc + jr, nr, bbuf + jr * kc);
            }
            for (int64_t ic = m0; ic < m1; ic += GEMM_MC) {
                int64_t mc = m1 - ic < GEMM_MC ? m1 - ic : GEMM_MC;
                pack_a(g, ic, mc, pc, kc, abuf);
                int step = gemm_step_nr(simd);
                for (int64_t jr = 0; jr < nc; jr += step) {
                    int nr = nc - jr < step ? (int)(nc - jr) : step;
                    gemm_panels(g, abuf, bbuf + jr * kc, ic, mc, jc + jr, nr, kc, pc > 0);
                }
            }
        }
    }
}

/* The tasks' grid over C: gm row groups x gn column groups, gm * gn = nth.
 * Each task packs the A rows and B columns it needs, so in all A is packed
 * gn times and B gm times: take the grid whose packing costs least, with
 * every group a few micro-panels wide. Relative cost per element: A rows 2
 * (set when A was packed by scalar code; kept, as the choices it makes were
 * the ones measured fastest), plain B rows 1 (vector copy), a transposed weight 2 (8 x 8 transposes), a
 * block-quantized one 4 (dequantized). On 2 threads, square 1024: rows
 * 152 GFLOP/s, columns 132; a 512-row prefill on a [2048, 5632] weight:
 * columns 133, rows 127. (Two tasks per thread, a 2 x 2 grid claimed
 * dynamically, measured 2-5% slower than one: left at one.) */
static void gemm_grid(const candle_tensor *dst, const mm_geom *geo, int nth, int *gm, int *gn) {
    const candle_tensor *b = dst->src[1];
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    int64_t cost_b = bt->is_quantized ? 4 : b->stride[b->rank - 2] == (int64_t)bt->type_size ? 2 : 1;
    double best = -1;
    for (int m = 1; m <= nth; m++) {
        int n = nth / m;
        if (m * n != nth || (m > 1 && geo->M < (int64_t)m * 4 * CPU_GEMM_MR) ||
            (n > 1 && geo->N < (int64_t)n * 4 * CPU_GEMM_NR))
            continue;
        double cost = (double)n * (double)geo->M * 2 + (double)m * (double)geo->N * (double)cost_b;
        if (best < 0 || cost <= best) best = cost, *gm = m, *gn = n;
    }
    if (best >= 0) return;
    /* too small for any grid to give every task a few panels: one dimension */
    bool by_n = geo->N >= (int64_t)nth * 4 * CPU_GEMM_NR || geo->M < (int64_t)nth * CPU_GEMM_MR;
    *gm = by_n ? 1 : nth;
    *gn = by_n ? nth : 1;
}

static gemm_args gemm_args_for(const candle_tensor *dst, const mm_geom *geo, int64_t bi, float *rows) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t oa, ob;
    cpu_mm_batch(dst, bi, &oa, &ob);
    return (gemm_args){
        .a = tensor_ptr(a) + oa, .sam = a->stride[a->rank - 2], .sak = a->stride[a->rank - 1],
        .at = a->dtype, .b = tensor_ptr(b) + ob, .sbk = b->stride[b->rank - 2],
        .sbn = b->stride[b->rank - 1], .bt = b->dtype,
        .c = (float *)tensor_ptr(dst) + bi * geo->M * geo->N, .ldc = geo->N, .rows = rows,
        .bf16dot = b->dtype == CANDLE_DTYPE_BF16 && cpu_simd_get()->gemm_bf16_ukr2 != NULL,
    };
}

/* ---- prefill GEMM: A packed once, shared by fine column tasks ----
 * With at most GEMM_MC rows (a 128-token prompt) the whole of A fits one
 * block: phase 0 packs it, every K slice, into the shared scratch (split by
 * row panels), and phase 1 splits N into PANEL_TASKS tasks per thread, each
 * packing its B panels one at a time (next one prefetched) and running them
 * over all of A. One task per thread packed A in every thread and left a
 * thread idle whenever the other was descheduled, as it often is on a
 * shared machine; claimed dynamically, the small tasks even that out. */

static bool panel_path(const candle_tensor *dst, const mm_geom *g) {
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    return g->M <= GEMM_MC && g->n_batch == 1 && g->K > 0 && flops >= PANEL_MIN_FLOPS && !mv_path(dst, g) &&
           !dot_path(dst, g);
}

static int64_t panel_m_pad(const mm_geom *g) { return (g->M + CPU_GEMM_MR - 1) / CPU_GEMM_MR * CPU_GEMM_MR; }

/* K slice at pc of the packed A: panel_m_pad x kc floats from pc * m_pad. */
static size_t panel_a_bytes(const mm_geom *g) {
    return ((size_t)panel_m_pad(g) * (size_t)g->K * sizeof(float) + 63) & ~(size_t)63;
}

/* two B panels (the wide tile's), and for quantized B the dequantized
 * rows of one panel */
static size_t panel_thread_bytes(void) {
    return ((size_t)3 * CPU_GEMM_NR * GEMM_KC * sizeof(float) + 63) & ~(size_t)63;
}

static void panel_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *ap = (float *)(((uintptr_t)t->wdata + 63) & ~(uintptr_t)63);
    float *bpanel = (float *)((char *)ap + panel_a_bytes(geo) + (size_t)t->tid * panel_thread_bytes());
    gemm_args g = gemm_args_for(dst, geo, 0, bpanel + (size_t)2 * CPU_GEMM_NR * GEMM_KC);
    int64_t mpad = panel_m_pad(geo), KC = gemm_kc(&g, geo->K), lo, hi;
    if (t->phase == 0) {
        cpu_split(geo->M, CPU_GEMM_MR, t->ith, t->nth, &lo, &hi);
        for (int64_t pc = 0; pc < geo->K && lo < hi; pc += KC) {
            int64_t kc = geo->K - pc < KC ? geo->K - pc : KC;
            pack_a(&g, lo, hi - lo, pc, kc, ap + pc * mpad + lo * kc);
        }
        return;
    }
    cpu_split(geo->N, CPU_GEMM_NR, t->ith, t->nth, &lo, &hi);
    for (int64_t pc = 0; pc < geo->K && lo < hi; pc += KC) {
        int64_t kc = geo->K - pc < KC ? geo->K - pc : KC;
        stream_b_panels(&g, pc, kc, lo, hi, ap + pc * mpad, 0, geo->M, bpanel);
    }
}

/* ---- prefill on weight rows (wt): the weight's elements broadcast ----
 * For a weight seen through a transpose (b's K contiguous: [N, K] rows),
 * C = A W^T runs six weight rows at a time, each element broadcast,
 * against panels of 16 activation rows packed transposed ([k][16], once
 * per product in phase 0, split by panels). The weight is only converted
 * to f32 row by row (read in place when f32), where the packed GEMM
 * transposes it into B panels, and 16-row panels fit 64- and 128-token
 * prompts exactly where 6-row ones leave a partial panel. Phase 1 splits N
 * into guided tasks (guided_range: large first, small last); a task takes
 * its rows six at a time, each K slice of them against every panel, so
 * each weight row is read and converted once and the 16 x 6 tiles of C
 * stay in L1 across the slices. One thread, hot cache: gemma-3-270m's
 * M = 64 shapes 82-86 -> 89-91 GFLOP/s against the dot tiles, SmolLM2's
 * M = 128 ones 89-91 -> 91-94 against the packed GEMM. Guided tasks
 * instead of four equal ones per thread: at four per thread (a gemma
 * product is ~1 ms on 2 threads) the second thread sat idle for a third
 * of its time (perf: worker_main 16% of all samples on [64, 640] x
 * [640, 2048], machine loaded by other work), waiting out the other's
 * last quarter-millisecond task;
 * eight or sixteen equal tasks per thread measured slower (each task's
 * first weight rows are not prefetched). gemma-3-270m F16 pp64, 2
 * threads, ten alternating runs: 569 -> 598 t/s mean. The avx512 table
 * has its own tile (wt_ukr: four panels, 64 x 6 on zmm, where AVX2 does
 * 16 x 6 on ymm): 1 thread on a Zen 5, [32..128, 2048] x [2048, 2048]^T,
 * f32 54-79 -> 105-190 GFLOP/s, bf16 60-103 -> 95-171 (loaded machine).
 * There C goes through a transposed per-thread scratch (cpu_wt_ukr_t_avx512,
 * cpu_wt_bf16_ukr_t_avx512: whole-vector stores) in blocks of a task's
 * columns, each block's groups one K slice at a time (A from L2), then
 * written out by 16 x 16 transposes: C rows 2048 floats apart share L1
 * sets, and storing 6-float pieces through 64 of them missed every time;
 * and those tiles spread the next group's prefetches over their k loop
 * (a burst of up to 192 before the tile lost ~11% on a weight read from
 * DRAM: M 64 [32000, 2048] f16 219 -> 253 GFLOP/s).
 * 1 thread, Zen 5, f16 weight, M 64 (loaded machine, CPU-time medians):
 * [2048, 5632] (down) 189-195 -> 229-230 GFLOP/s, [2048, 2048] 235 ->
 * 234-246, M 128 218-229 -> 246-250, [5632, 2048] and [256, 2048]
 * unchanged. Other tables: past WT_A_INNER_BYTES of packed A, the K
 * slices outside the groups instead. */
#ifndef WT_MIN_M
#define WT_MIN_M 16
#endif
/* The avx512 table's f32 / f16 weights (bf16 ones too where they do not
 * take its bf16 dot products), WT_PAIR_MIN_M to WT_PAIR_MAX_M rows, below
 * 64 or off a multiple of 16: the tile in k pairs (cpu_wt_ukr_p_avx512:
 * 8-row panels of k pairs, up to WT_PAIR_PANELS per call, 2 + 6 loads per
 * 12 FMAs at 16 rows where the 16-row panel tile did 7 per 6), A packed
 * in that layout. 1 thread, Zen 5, f16 [2048, 2048], CPU-time medians,
 * alternating: M 16 148 -> 181 GFLOP/s, 24 156 -> 199, 32 149 -> 184, 40
 * 174 -> 213, 48 166 -> 195, 56 198 -> 215, 100 199 -> 214; M 64 and 128
 * (whole 64-row tiles) 1-2% slower in pairs, 96 and 112 even: left on
 * the 16-row panels. Fewer than 16 rows stay on the dot tiles (M 8 155
 * against 125 in pairs: one panel, six chains). bf16 weights through the
 * bf16 dot products, same rows but 48: the tile in k quads
 * (cpu_wt_bf16_ukr_p_avx512), M 16 257 -> 405, 24 327 -> 450, 32 430 ->
 * 470, 40 407 -> 441, 56 438 -> 474, 100 437 -> 455; 48 473 -> 460 (left
 * on the 16-row tile), 80 even. */
#ifndef WT_PAIR_MIN_M
#define WT_PAIR_MIN_M 16
#endif
#ifndef WT_PAIR_MAX_M
#define WT_PAIR_MAX_M WT_MAX_M
#endif
#define WT_PAIR_PANELS 4
#ifndef WT_MAX_M
#define WT_MAX_M GEMM_MC
#endif
#define WT_MR 16
#define WT_NR 6
/* Six f32 rows of a slice (at most 24 KiB) stay in L1 beside the panel's
 * stream. Slices of at most 512 measured 2-10% slower on one thread (more
 * passes over C; gemma and SmolLM2 K are 576-2048). */
#ifndef WT_KC
#define WT_KC 1024
#endif
/* Past this much packed A (all K slices), a task runs every group of its
 * rows in one K slice before the next slice, so that one slice of A is
 * read from L2 by all the groups; below it, each group takes all its
 * slices in turn (its 16 x 6 tiles of C stay in L1). */
#ifndef WT_A_INNER_BYTES
#define WT_A_INNER_BYTES (640 * 1024)
#endif

/* The avx512 table's tile writes C transposed into this much per-thread
 * scratch (a block of a task's columns, all K slices), written out to C
 * a block at a time (cpu_wt_ukr_t_avx512). */
#ifndef WT_CT_BYTES
#define WT_CT_BYTES (96 * 1024)
#endif

/* C through the table's transposed tile (wt_ukr_t) and its scratch. */
static bool wt_ct(void) { return cpu_simd_get()->wt_ukr_t != NULL; }

/* A bf16 weight through the table's bf16 dot products (wt_bf16_ukr): A
 * packed in bf16 k pairs in place of f32 (same offsets, half used), the
 * weight rows read in place. */
static bool wt_bf16_for(candle_dtype at, int64_t sam, int64_t sak, candle_dtype bt) {
    const cpu_simd *simd = cpu_simd_get();
    return simd->wt_bf16_ukr && bt == CANDLE_DTYPE_BF16 && at == CANDLE_DTYPE_F32 && sak == 4 && sam % 4 == 0;
}

/* M rows through the k-pair tile (WT_PAIR_MIN_M), or for a bf16 weight
 * through the bf16 dot products, the k-quad one */
static bool wt_pair_m(int64_t M) {
    return cpu_simd_get()->wt_ukr_p && M >= WT_PAIR_MIN_M && M <= WT_PAIR_MAX_M && (M < 4 * WT_MR || M % WT_MR != 0);
}

static bool wt_pair_for(candle_dtype at, int64_t sam, int64_t sak, candle_dtype bt, int64_t M) {
    return wt_pair_m(M) && !wt_bf16_for(at, sam, sak, bt);
}

static bool wt_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t esz = (int64_t)cpu_dtype(b->dtype)->type_size;
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    bool m_ok = g->M >= WT_MIN_M ||
                wt_pair_for(a->dtype, a->stride[a->rank - 2], a->stride[a->rank - 1], b->dtype, g->M);
    return is_plain_float(b->dtype) && b->stride[b->rank - 2] == esz && b->stride[b->rank - 1] % esz == 0 &&
           m_ok && g->M <= WT_MAX_M && g->n_batch == 1 && g->K > 0 && flops >= PANEL_MIN_FLOPS;
}

/* guided (see guided_range) in whole groups of rows */
static int wt_tasks(const mm_geom *g, int n_threads) { return guided_tasks(g->N, WT_NR, n_threads); }

static int64_t wt_m_pad(const mm_geom *g) { return (g->M + WT_MR - 1) / WT_MR * WT_MR; }

/* K in equal slices of at most WT_KC, multiples of 8 */
static int64_t wt_kc(int64_t K) {
    int64_t n = (K + WT_KC - 1) / WT_KC;
    return ((K + n - 1) / n + 7) / 8 * 8;
}

/* (K + 1: the k-pair layout's last slice rounded up to even k) */
static size_t wt_a_bytes(const mm_geom *g) {
    return ((size_t)wt_m_pad(g) * (size_t)(g->K + 1) * sizeof(float) + 63) & ~(size_t)63;
}

static size_t wt_thread_bytes(void) {
    return (((size_t)WT_NR * WT_KC * sizeof(float) + 63) & ~(size_t)63) + WT_CT_BYTES;
}

static bool wt_bf16(const gemm_args *g) { return wt_bf16_for(g->at, g->sam, g->sak, g->bt); }

static bool wt_pair(const gemm_args *g, int64_t M) { return wt_pair_for(g->at, g->sam, g->sak, g->bt, M); }

/* (the 16-row bf16 tile keeps 48 rows: 473 against 460 GFLOP/s in quads) */
static bool wt_quad(const gemm_args *g, int64_t M) {
    return wt_pair_m(M) && M != 3 * WT_MR && wt_bf16(g) && cpu_simd_get()->wt_bf16_ukr_p;
}

/* The scalar table's micro-kernel (same contract as cpu_wt_ukr_avx2). */
static void wt_ukr_generic(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm,
                           float *c, int64_t ldc, bool accumulate) {
    for (int j = 0; j < nw; j++)
        for (int i = 0; i < nm; i++) {
            float s = 0;
            for (int64_t p = 0; p < kc; p++) s += w[j * ldw + p] * at[p * WT_MR + i];
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

/* Rows m0 .. m0+rows (<= 16) of A, k from k0, kc deep, as dst[p * 16 + i]
 * (zero past rows); pair: as two 8-row panels of k pairs,
 * dst[h * 8 * kcp + t * 16 + 2i + s] = a(m0 + 8h + i, k0 + 2t + s) (kcp:
 * kc rounded up to even, zero past kc). */
static void wt_pack_a(const gemm_args *g, int64_t m0, int rows, int64_t k0, int64_t kc, float *dst, float *tmp,
                      bool pair) {
    const cpu_simd *simd = cpu_simd_get();
    const char *a = g->a + m0 * g->sam + k0 * g->sak;
    if (pair && wt_bf16(g)) { /* k quads: pairs of bf16 pairs (wt_quad) */
        simd->pack_ap8_bf16((const float *)a, g->sam / 4, rows, kc, (uint32_t *)dst, tmp);
        return;
    }
    if (pair) {
        if (simd->pack_ap8 && g->at == CANDLE_DTYPE_F32 && g->sak == 4 && g->sam % 4 == 0) {
            simd->pack_ap8((const float *)a, g->sam / 4, rows, kc, dst);
            return;
        }
        int64_t kcp = kc + (kc & 1);
        for (int i = 0; i < WT_MR; i++)
            for (int64_t p = 0; p < kcp; p++)
                dst[(i / 8) * 8 * kcp + (p / 2) * 16 + (i % 8) * 2 + p % 2] =
                    i < rows && p < kc ? (float)candle_load_f64(g->at, a + i * g->sam + p * g->sak) : 0.0f;
        return;
    }
    if (wt_bf16(g)) {
        simd->pack_at16_bf16((const float *)a, g->sam / 4, rows, kc, (uint32_t *)dst, tmp);
        return;
    }
    if (simd->pack_at16 && g->at == CANDLE_DTYPE_F32 && g->sak == 4 && g->sam % 4 == 0) {
        simd->pack_at16((const float *)a, g->sam / 4, rows, kc, dst);
        return;
    }
    for (int64_t p = 0; p < kc; p++)
        for (int i = 0; i < WT_MR; i++)
            dst[p * WT_MR + i] = i < rows ? (float)candle_load_f64(g->at, a + i * g->sam + p * g->sak) : 0.0f;
}

/* Weight rows n0 .. n0+nw, K slice at pc, kc deep: nw rows of k from
 * pc, read by a wt_group; in the block of columns c0 .. c1 (C transposed). */
typedef struct wt_item {
    int64_t pc, kc, n0;
    int nw;
    int64_t c0, c1;
} wt_item;

/* One item's rows as f32 rows (*ldw floats apart): in place for f32,
 * converted into wbuf for f16 / bf16. */
static const float *wt_rows(const gemm_args *g, wt_item it, float *wbuf, int64_t *ldw) {
    const cpu_simd *simd = cpu_simd_get();
    int64_t esz = (int64_t)cpu_dtype(g->bt)->type_size;
    const char *rows = g->b + it.n0 * g->sbn + it.pc * esz;
    if (g->bt == CANDLE_DTYPE_F32) {
        *ldw = g->sbn / 4;
        return (const float *)rows;
    }
    if (simd->wt_half_to_f32) {
        for (int r = 0; r < it.nw; r++)
            simd->wt_half_to_f32(g->bt == CANDLE_DTYPE_F16, rows + r * g->sbn, wbuf + r * it.kc, it.kc);
        *ldw = it.kc;
        return wbuf;
    }
    for (int r = 0; r < it.nw; r++) simd->to_f32(g->bt, rows + r * g->sbn, wbuf + r * it.kc, it.kc);
    *ldw = it.kc;
    return wbuf;
}

/* One item against every activation panel (ap: its K slice). The next
 * item's rows are prefetched a share per panel, spread over the compute
 * rather than in one burst (nw 0: none). */
static void wt_group(const gemm_args *g, int64_t M, wt_item it, wt_item next, const float *ap, float *wbuf,
                     float *ct, int64_t ldt) {
    const cpu_simd *simd = cpu_simd_get();
    /* the table's own tile takes wt_panels panels at a time */
    int64_t ldw = 0, step = simd->wt_ukr ? simd->wt_panels * WT_MR : WT_MR, n_steps = (M + step - 1) / step;
    bool bf16 = wt_bf16(g);
    const float *w = bf16 ? NULL : wt_rows(g, it, wbuf, &ldw);
    /* the C-transposed tile spreads its share of the prefetches over its
     * k loop */
    bool pf_tile = ct != NULL;
    int64_t esz = (int64_t)cpu_dtype(g->bt)->type_size;
    if (ct && (wt_pair(g, M) || wt_quad(g, M))) {
        /* 8-row panels of k pairs (bf16 dot products: k quads), up to
         * WT_PAIR_PANELS per tile, in balanced steps (5 panels: 3 + 2) */
        int64_t np = (M + 7) / 8, kcp = it.kc + (it.kc & 1), kp = (it.kc + 1) / 2, kpp = kp + (kp & 1);
        n_steps = (np + WT_PAIR_PANELS - 1) / WT_PAIR_PANELS;
        for (int64_t mi = 0; mi < n_steps; mi++) {
            int64_t r0 = mi * next.nw / n_steps, r1 = (mi + 1) * next.nw / n_steps;
            int64_t q0 = mi * np / n_steps, q1 = (mi + 1) * np / n_steps;
            const char *pf = g->b + (next.n0 + r0) * g->sbn + next.pc * esz;
            int pf_rows = r1 > r0 ? (int)(r1 - r0) : 0;
            if (bf16)
                simd->wt_bf16_ukr_p(it.kc, (const uint16_t *)(g->b + it.n0 * g->sbn + it.pc * 2), g->sbn / 2,
                                         it.nw, (const uint32_t *)ap + q0 * 8 * kpp, (int)(q1 - q0),
                                         ct + (it.n0 - it.c0) * ldt + 8 * q0, ldt, it.pc > 0, pf, g->sbn, pf_rows,
                                         next.kc * esz);
            else
                simd->wt_ukr_p(it.kc, w, ldw, it.nw, ap + q0 * 8 * kcp, (int)(q1 - q0),
                                    ct + (it.n0 - it.c0) * ldt + 8 * q0, ldt, it.pc > 0, pf, g->sbn, pf_rows,
                                    next.kc * esz);
        }
        return;
    }
    for (int64_t mi = 0; mi < n_steps; mi++) {
        int64_t r0 = mi * next.nw / n_steps, r1 = (mi + 1) * next.nw / n_steps;
        if (r1 > r0 && !pf_tile) prefetch_b_panel(g, next.pc, next.kc, next.n0 + r0, (int)(r1 - r0));
        int64_t m0 = mi * step;
        int nm = M - m0 < step ? (int)(M - m0) : (int)step;
        float *c = g->c + m0 * g->ldc + it.n0;
        if (bf16) {
            const uint16_t *wb = (const uint16_t *)(g->b + it.n0 * g->sbn + it.pc * 2);
            if (ct && simd->wt_bf16_ukr_t) {
                simd->wt_bf16_ukr_t(it.kc, wb, g->sbn / 2, it.nw, (const uint32_t *)(ap + m0 * it.kc), nm,
                                         ct + (it.n0 - it.c0) * ldt + m0, ldt, it.pc > 0,
                                         g->b + (next.n0 + r0) * g->sbn + next.pc * esz, g->sbn,
                                         r1 > r0 ? (int)(r1 - r0) : 0, next.kc * esz);
                continue;
            }
            simd->wt_bf16_ukr(it.kc, wb, g->sbn / 2, it.nw, (const uint32_t *)(ap + m0 * it.kc), nm, c, g->ldc,
                              it.pc > 0);
            continue;
        }
        if (ct) {
            simd->wt_ukr_t(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, ct + (it.n0 - it.c0) * ldt + m0, ldt,
                           it.pc > 0, g->b + (next.n0 + r0) * g->sbn + next.pc * esz, g->sbn,
                           r1 > r0 ? (int)(r1 - r0) : 0, next.kc * esz);
            continue;
        }
        if (simd->wt_ukr) {
            simd->wt_ukr(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, c, g->ldc, it.pc > 0);
            continue;
        }
        wt_ukr_generic(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, c, g->ldc, it.pc > 0);
    }
}

static void wt_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *ap = (float *)(((uintptr_t)t->wdata + 63) & ~(uintptr_t)63);
    float *wbuf = (float *)((char *)ap + wt_a_bytes(geo) + (size_t)t->tid * wt_thread_bytes());
    gemm_args g = gemm_args_for(dst, geo, 0, NULL);
    int64_t mpad = wt_m_pad(geo), KC = wt_kc(geo->K), K = geo->K, lo, hi;
    if (t->phase == 0) {
        bool quad = wt_quad(&g, geo->M), pair = wt_pair(&g, geo->M) || quad;
        cpu_split(geo->M, WT_MR, t->ith, t->nth, &lo, &hi);
        for (int64_t pc = 0; pc < K && lo < hi; pc += KC) {
            /* floats (32-bit words) per row of the slice: k pairs up to
             * kc + 1, k quads (kc + 1) / 2 pairs rounded up to even */
            int64_t kc = K - pc < KC ? K - pc : KC, kp = (kc + 1) / 2;
            int64_t kcp = quad ? kp + (kp & 1) : pair ? kc + (kc & 1) : kc;
            for (int64_t m0 = lo; m0 < hi; m0 += WT_MR)
                wt_pack_a(&g, m0, hi - m0 < WT_MR ? (int)(hi - m0) : WT_MR, pc, kc, ap + pc * mpad + m0 * kcp, wbuf,
                          pair);
        }
        return;
    }
    if (t->nth > 1) guided_range(geo->N, WT_NR, t->n_threads, t->ith, &lo, &hi);
    else lo = 0, hi = geo->N;
    if (lo >= hi) return;
    /* C transposed: blocks of ch columns (whole groups), each block's
     * groups in one K slice, then the next slice (A from L2 for the
     * block's groups), then the block written out */
    bool ct = wt_ct(), slice_outer = !ct && wt_a_bytes(geo) > WT_A_INNER_BYTES;
    float *ctb = (float *)((char *)wbuf + (wt_thread_bytes() - WT_CT_BYTES));
    int64_t ch = ct ? WT_CT_BYTES / (int64_t)sizeof(float) / mpad / WT_NR * WT_NR : hi - lo;
    ch = ch < WT_NR ? WT_NR : ch;
    wt_item it = {0, KC < K ? KC : K, lo, hi - lo < WT_NR ? (int)(hi - lo) : WT_NR, lo, hi - lo < ch ? hi : lo + ch};
    if (ct && it.c1 - it.n0 < it.nw) it.nw = (int)(it.c1 - it.n0);
    prefetch_b_panel(&g, it.pc, it.kc, it.n0, it.nw);
    while (it.nw > 0) {
        wt_item next = it;
        if (ct) {
            next.n0 += it.nw;
            if (next.n0 >= it.c1) next.n0 = it.c0, next.pc += it.kc;
            if (next.pc >= K) {
                next.pc = 0, next.c0 = next.n0 = it.c1;
                next.c1 = hi - next.c0 < ch ? hi : next.c0 + ch;
            }
            next.kc = K - next.pc < KC ? K - next.pc : KC;
            next.nw = next.n0 >= hi ? 0 : next.c1 - next.n0 < WT_NR ? (int)(next.c1 - next.n0) : WT_NR;
            wt_group(&g, geo->M, it, next, ap + it.pc * mpad, wbuf, ctb, mpad);
            if (next.nw <= 0 || next.c0 != it.c0)
                cpu_simd_get()->wt_ct_out(ctb, mpad, geo->M, it.c1 - it.c0, g.c + it.c0, g.ldc);
            it = next;
            continue;
        }
        if (slice_outer) {
            /* every group of the task in one K slice, then the next slice */
            next.n0 += it.nw;
            if (next.n0 >= hi) next.n0 = lo, next.pc += it.kc;
        } else {
            /* each K slice of a group, then the next group */
            next.pc += it.kc;
            if (next.pc >= K) next.pc = 0, next.n0 += it.nw;
        }
        next.kc = K - next.pc < KC ? K - next.pc : KC;
        next.nw = next.pc >= K ? 0 : hi - next.n0 < WT_NR ? (int)(hi - next.n0) : WT_NR;
        wt_group(&g, geo->M, it, next, ap + it.pc * mpad, wbuf, NULL, 0);
        it = next;
    }
}

static void gemm_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *abuf = cpu_thread_scratch(t, gemm_thread_floats() * sizeof(float));
    float *bbuf = abuf + (size_t)GEMM_MC * GEMM_KC;
    int gm = 1, gn = 1;
    int64_t m0, m1, n0, n1;
    gemm_grid(dst, geo, t->nth, &gm, &gn);
    cpu_split(geo->M, CPU_GEMM_MR, t->ith / gn, gm, &m0, &m1);
    cpu_split(geo->N, CPU_GEMM_NR, t->ith % gn, gn, &n0, &n1);
    if (m0 >= m1 || n0 >= n1) return;
    for (int64_t bi = 0; bi < geo->n_batch; bi++) {
        gemm_args g = gemm_args_for(dst, geo, bi, bbuf + (size_t)GEMM_KC * GEMM_NC);
        if (geo->K == 0) {
            for (int64_t m = m0; m < m1; m++) memset(g.c + m * g.ldc + n0, 0, sizeof(float) * (size_t)(n1 - n0));
            continue;
        }
        gemm_block(&g, m0, m1, n0, n1, geo->K, abuf, bbuf);
    }
}

static candle_status run_f32(const cpu_task *t, candle_tensor *dst) {
    mm_geom g = {0};
    cpu_mm_geom(dst, &g);
    if (g.M == 0 || g.N == 0) return CANDLE_OK;
    if (mv_path(dst, &g)) mv_run(t, dst, &g);
    else if (wt_path(dst, &g)) wt_run(t, dst, &g);
    else if (dot_path(dst, &g)) dot_run(t, dst, &g);
    else if (panel_path(dst, &g)) panel_run(t, dst, &g);
    else gemm_run(t, dst, &g);
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_matmul = {
    .name = "matmul f32 (packed gemm 6x16, 12x32 on avx512, bf16 dot products on avx512bf16 / matvec; f16, bf16 and block weights dequantized past the integer kernels' M)",
    .match = match_f32,
    .plan = plan_f32,
    .run = run_f32,
};
