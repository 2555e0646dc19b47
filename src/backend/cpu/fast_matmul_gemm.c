/* The packed, cache-blocked f32 GEMM (B packed into NR-wide panels, A
 * into MR-tall ones, the table's micro-kernel over them) and its prefill
 * form with A packed once for all tasks. */
#include <string.h>

#include "fast-matmul-impl.h"

/* A block, B block, and for quantized B the dequantized rows of one panel
 * (and the bf16 packing's scratch after them). */
size_t cpu_mm_gemm_thread_floats(void) {
    return (size_t)GEMM_MC * GEMM_KC + (size_t)GEMM_KC * GEMM_NC + (size_t)2 * CPU_GEMM_NR * GEMM_KC + 16;
}



/* One B panel: columns n0 .. n0+nr, k from k0, kc deep. Quantized columns
 * (weight rows) are dequantized first, then packed as f32 rows, or with
 * float activations on the bf16 panels rounded to bf16 pairs. */
static void pack_b_panel(const cpu_simd *simd, const gemm_args *g, int64_t k0, int64_t kc,
                         int64_t n0, int nr, float *dst) {
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    if (g->bf16dot && bt->is_quantized) {
        cpu_mm_dequant_rows(g->bt, g->b, g->sbn, n0, nr, k0, kc, g->rows);
        simd->pack_at16_bf16(g->rows, kc, nr, kc, (uint32_t *)dst, g->rows + (size_t)CPU_GEMM_NR * GEMM_KC);
        return;
    }
    if (g->bf16dot) {
        simd->pack_b16_bf16(g->b + k0 * g->sbk + n0 * g->sbn, g->sbk, g->sbn, kc, nr, dst);
        return;
    }
    if (!bt->is_quantized) {
        simd->pack_b(g->bt, g->b + k0 * g->sbk + n0 * g->sbn, g->sbk, g->sbn, kc, nr, dst);
        return;
    }
    cpu_mm_dequant_rows(g->bt, g->b, g->sbn, n0, nr, k0, kc, g->rows); /* sbk: the block's bytes */
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
                    d[p * CPU_GEMM_MR + i] = (float)cdl_load_f64(g->at, row + p * g->sak);
            }
        }
    }
}

static inline void cpu_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/* Starts the loads of one B panel's source (columns n0 .. n0+nr, k from
 * k0, kc deep) so that they overlap the packing or the compute before it:
 * a weight's rows are read a few hundred bytes each, more streams at once
 * than the hardware prefetcher follows (it shortened the B packing by more
 * than the prefetch loop costs; figures: bench/RESULTS.md, issue 17). */
void cpu_mm_prefetch_b_panel(const gemm_args *g, int64_t k0, int64_t kc, int64_t n0, int nr) {
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
    if (j < end) cpu_mm_prefetch_b_panel(g, k0, kc, j, end - j < CPU_GEMM_NR ? (int)(end - j) : CPU_GEMM_NR);
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
 * block-quantized one 4 (dequantized). One task per thread: a 2 x 2 grid
 * of two tasks per thread claimed dynamically was slower. Figures:
 * bench/RESULTS.md (issue 17). */
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

gemm_args cpu_mm_gemm_args_for(const candle_tensor *dst, const mm_geom *geo, int64_t bi, float *rows) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t oa, ob;
    cpu_mm_batch(dst, bi, &oa, &ob);
    return (gemm_args){
        .a = tensor_ptr(a) + oa, .sam = a->stride[a->rank - 2], .sak = a->stride[a->rank - 1],
        .at = a->dtype, .b = tensor_ptr(b) + ob, .sbk = b->stride[b->rank - 2],
        .sbn = b->stride[b->rank - 1], .bt = b->dtype,
        .c = (float *)tensor_ptr(dst) + bi * geo->M * geo->N, .ldc = geo->N, .rows = rows,
        .bf16dot = (b->dtype == CANDLE_DTYPE_BF16 || (cpu_dtype(b->dtype)->is_quantized && cpu_mm_float_act(dst))) &&
                   cpu_simd_get()->gemm_bf16_ukr2 != NULL,
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

bool cpu_mm_panel_path(const candle_tensor *dst, const mm_geom *g) {
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    return g->M <= GEMM_MC && g->n_batch == 1 && g->K > 0 && flops >= PANEL_MIN_FLOPS && !cpu_mm_mv_path(dst, g) &&
           !cpu_mm_dot_path(dst, g);
}

static int64_t panel_m_pad(const mm_geom *g) { return (g->M + CPU_GEMM_MR - 1) / CPU_GEMM_MR * CPU_GEMM_MR; }

/* K slice at pc of the packed A: panel_m_pad x kc floats from pc * m_pad. */
size_t cpu_mm_panel_a_bytes(const mm_geom *g) {
    return ((size_t)panel_m_pad(g) * (size_t)g->K * sizeof(float) + 63) & ~(size_t)63;
}

/* two B panels (the wide tile's), and for quantized B the dequantized
 * rows of one panel and the bf16 packing's scratch */
size_t cpu_mm_panel_thread_bytes(void) {
    return ((size_t)4 * CPU_GEMM_NR * GEMM_KC * sizeof(float) + 63) & ~(size_t)63;
}

void cpu_mm_panel_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *ap = (float *)(((uintptr_t)t->wdata + 63) & ~(uintptr_t)63);
    float *bpanel = (float *)((char *)ap + cpu_mm_panel_a_bytes(geo) + (size_t)t->tid * cpu_mm_panel_thread_bytes());
    gemm_args g = cpu_mm_gemm_args_for(dst, geo, 0, bpanel + (size_t)2 * CPU_GEMM_NR * GEMM_KC);
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


void cpu_mm_gemm_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *abuf = cpu_thread_scratch(t, cpu_mm_gemm_thread_floats() * sizeof(float));
    float *bbuf = abuf + (size_t)GEMM_MC * GEMM_KC;
    int gm = 1, gn = 1;
    int64_t m0, m1, n0, n1;
    gemm_grid(dst, geo, t->nth, &gm, &gn);
    cpu_split(geo->M, CPU_GEMM_MR, t->ith / gn, gm, &m0, &m1);
    cpu_split(geo->N, CPU_GEMM_NR, t->ith % gn, gn, &n0, &n1);
    if (m0 >= m1 || n0 >= n1) return;
    for (int64_t bi = 0; bi < geo->n_batch; bi++) {
        gemm_args g = cpu_mm_gemm_args_for(dst, geo, bi, bbuf + (size_t)GEMM_KC * GEMM_NC);
        if (geo->K == 0) {
            for (int64_t m = m0; m < m1; m++) memset(g.c + m * g.ldc + n0, 0, sizeof(float) * (size_t)(n1 - n0));
            continue;
        }
        gemm_block(&g, m0, m1, n0, n1, geo->K, abuf, bbuf);
    }
}

