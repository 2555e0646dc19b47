/* The weight-row path (wt): prefill on a plain-float weight seen through a
 * transpose, computed on the weight's rows. */
#include "fast-matmul-impl.h"

/* ---- prefill on weight rows (wt): the weight's elements broadcast ----
 * For a weight seen through a transpose (b's K contiguous: [N, K] rows),
 * C = A W^T runs six weight rows at a time, each element broadcast,
 * against panels of 16 activation rows packed transposed ([k][16], once
 * per product in phase 0, split by panels). The weight is only converted
 * to f32 row by row (read in place when f32), where the packed GEMM
 * transposes it into B panels, and 16-row panels fit 64- and 128-token
 * prompts exactly where 6-row ones leave a partial panel: faster than the
 * dot tiles at M = 64 and the packed GEMM at M = 128. Phase 1 splits N
 * into guided tasks (guided_range: large first, small last), since with
 * equal tasks one thread waited out the other's last task and more equal
 * tasks lose each task's first prefetches; a task takes its rows six at
 * a time, each K slice of them against every panel, so each weight row is
 * read and converted once and the 16 x 6 tiles of C stay in L1 across the
 * slices. A table's own tile (wt_ukr, wt_panels panels a call: the avx512
 * one 64 x 6 on zmm) takes more rows at once. Where the table has the
 * C-transposed tile (wt_ukr_t) C goes through a per-thread scratch
 * (whole-vector stores) in blocks of a task's columns, each block's
 * groups one K slice at a time (A from L2), then written out by the
 * table's wt_ct_out: C rows a power of two floats apart share L1 sets,
 * and storing 6-float pieces through them missed every time; those tiles
 * also spread the next group's prefetches over their k loop rather than
 * in one burst before the tile. Other tables: past WT_A_INNER_BYTES of
 * packed A, the K slices outside the groups instead. Figures:
 * bench/RESULTS.md (issue 17). */
#ifndef WT_MIN_M
#define WT_MIN_M 16
#endif
/* Where the table has the k-pair tile (wt_ukr_p: the avx512 one), f32 /
 * f16 weights (bf16 ones too where they do not take its bf16 dot
 * products), WT_PAIR_MIN_M to WT_PAIR_MAX_M rows, below 64 or off a
 * multiple of 16: 8-row panels of k pairs, up to WT_PAIR_PANELS per call,
 * 2 + 6 loads per 12 FMAs at 16 rows where the 16-row panel tile did 7 per
 * 6; A packed in that layout. Whole 64-row tiles (M 64, 128) are a little
 * faster on the 16-row panels and stay there; fewer than 16 rows stay on
 * the dot tiles (one panel, too few chains). bf16 weights through the
 * bf16 dot products take the same rows but 48 in k quads (wt_bf16_ukr_p).
 * Figures: bench/RESULTS.md (issue 17). */
#ifndef WT_PAIR_MIN_M
#define WT_PAIR_MIN_M 16
#endif
#ifndef WT_PAIR_MAX_M
#define WT_PAIR_MAX_M WT_MAX_M
#endif
#define WT_PAIR_PANELS 4
/* bf16 weights leave the dot tiles (which widen them to f32) for the bf16
 * dot products at smaller products than f32 ones leave them for panels. */
#ifndef WT_BF16_MIN_FLOPS
#define WT_BF16_MIN_FLOPS 1e6
#endif
#ifndef WT_MAX_M
#define WT_MAX_M GEMM_MC
#endif
/* bf16 weights through the bf16 dot products stay on the weight-row tiles
 * up to more rows than f32 ones: past WT_MAX_M the GEMM packs every weight
 * panel (8 x 8 transposes of its words) for each call, and that took more
 * than the tiles lose to the GEMM's (bench/RESULTS.md, issue 19). */
#ifndef WT_BF16_MAX_M
#define WT_BF16_MAX_M 512
#endif
#define WT_MR 16
#define WT_NR 6
/* Six f32 rows of a slice (at most 24 KiB) stay in L1 beside the panel's
 * stream; shorter slices were slower (more passes over C). */
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

/* The C-transposed tile (wt_ukr_t) writes into this much per-thread
 * scratch (a block of a task's columns, all K slices), written out to C
 * a block at a time (wt_ct_out). */
#ifndef WT_CT_BYTES
#define WT_CT_BYTES (96 * 1024)
#endif

/* C through the table's transposed tile (wt_ukr_t) and its scratch. */
static bool wt_ct(void) { return cpu_simd_get()->wt_ukr_t != NULL; }

/* A bf16 weight through the table's bf16 dot products (wt_bf16_ukr): A
 * packed in bf16 k pairs in place of f32 (same offsets, half used), the
 * weight rows read in place (a quantized weight's dequantized to bf16,
 * where cpu_mm_wt_path lets it: float activations). */
static bool wt_bf16_for(candle_dtype at, int64_t sam, int64_t sak, candle_dtype bt) {
    const cpu_simd *simd = cpu_simd_get();
    const candle_dtype_traits *tr = cpu_dtype(bt);
    return simd->wt_bf16_ukr && (bt == CANDLE_DTYPE_BF16 || (tr->is_quantized && tr->to_f32 && simd->f32_to_bf16)) &&
           at == CANDLE_DTYPE_F32 && sak == 4 && sam % 4 == 0;
}

/* M rows through the k-pair tile (WT_PAIR_MIN_M), or for a bf16 weight
 * through the bf16 dot products, the k-quad one */
static bool wt_pair_m(int64_t M, int64_t max_m) {
    return cpu_simd_get()->wt_ukr_p && M >= WT_PAIR_MIN_M && M <= max_m && (M < 4 * WT_MR || M % WT_MR != 0);
}

static bool wt_pair_for(candle_dtype at, int64_t sam, int64_t sak, candle_dtype bt, int64_t M) {
    return wt_pair_m(M, WT_PAIR_MAX_M) && !wt_bf16_for(at, sam, sak, bt);
}

/* A quantized weight takes the bf16 tile on its rows dequantized to bf16
 * (wt_bf16_rows) only where the node keeps its activations float (the
 * integer kernels take the others), in slices of whole blocks. */
bool cpu_mm_wt_path(const candle_tensor *dst, const mm_geom *g) {
    const candle_tensor *a = dst->src[0], *b = dst->src[1];
    const candle_dtype_traits *bt = cpu_dtype(b->dtype);
    int64_t esz = (int64_t)bt->type_size;
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    bool bf = wt_bf16_for(a->dtype, a->stride[a->rank - 2], a->stride[a->rank - 1], b->dtype);
    bool m_ok = g->M >= WT_MIN_M || (bf && g->M > MV_MAX_M) ||
                wt_pair_for(a->dtype, a->stride[a->rank - 2], a->stride[a->rank - 1], b->dtype, g->M);
    bool rows_ok = mm_plain_float(b->dtype) ? b->stride[b->rank - 1] % esz == 0
                                            : bf && cpu_mm_float_act(dst) && g->K % bt->block_size == 0 &&
                                                  WT_KC % bt->block_size == 0;
    return rows_ok && b->stride[b->rank - 2] == esz && m_ok && g->M <= (bf ? WT_BF16_MAX_M : WT_MAX_M) &&
           g->n_batch == 1 && g->K > 0 && flops >= (bf ? WT_BF16_MIN_FLOPS : PANEL_MIN_FLOPS);
}

/* A MATMUL's bias added as C is written out of the transposed scratch
 * (wt_ct_out): the same f32 add as after the product. */
bool cpu_mm_wt_adds_bias(const candle_tensor *dst) { return dst->n_src > 2 && dst->src[2] && wt_ct(); }

/* guided (see guided_range) in whole groups of rows */
int cpu_mm_wt_tasks(const mm_geom *g, int n_threads) { return guided_tasks(g->N, WT_NR, n_threads); }

static int64_t wt_m_pad(const mm_geom *g) { return (g->M + WT_MR - 1) / WT_MR * WT_MR; }

/* K in equal slices of at most WT_KC, multiples of 8 (of a quantized
 * weight's blocks) */
static int64_t wt_kc(int64_t K, candle_dtype bt) {
    int64_t n = (K + WT_KC - 1) / WT_KC, unit = cpu_dtype(bt)->is_quantized ? cpu_dtype(bt)->block_size : 8;
    return ((K + n - 1) / n + unit - 1) / unit * unit;
}

/* (K + 1: the k-pair layout's last slice rounded up to even k) */
size_t cpu_mm_wt_a_bytes(const mm_geom *g) {
    return ((size_t)wt_m_pad(g) * (size_t)(g->K + 1) * sizeof(float) + 63) & ~(size_t)63;
}

size_t cpu_mm_wt_thread_bytes(void) {
    return (((size_t)WT_NR * WT_KC * sizeof(float) + 63) & ~(size_t)63) + WT_CT_BYTES;
}

static bool wt_bf16(const gemm_args *g) { return wt_bf16_for(g->at, g->sam, g->sak, g->bt); }

static bool wt_pair(const gemm_args *g, int64_t M) { return wt_pair_for(g->at, g->sam, g->sak, g->bt, M); }

/* (the 16-row bf16 tile keeps 48 rows: faster there than in quads) */
static bool wt_quad(const gemm_args *g, int64_t M) {
    return wt_pair_m(M, WT_BF16_MAX_M) && M != 3 * WT_MR && wt_bf16(g) && cpu_simd_get()->wt_bf16_ukr_p;
}

/* The micro-kernel of a table without one (the wt_ukr contract, one panel). */
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
                    i < rows && p < kc ? (float)cdl_load_f64(g->at, a + i * g->sam + p * g->sak) : 0.0f;
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
            dst[p * WT_MR + i] = i < rows ? (float)cdl_load_f64(g->at, a + i * g->sam + p * g->sak) : 0.0f;
}

/* Weight rows n0 .. n0+nw, K slice at pc, kc deep: nw rows of k from
 * pc, read by a wt_group; in the block of columns c0 .. c1 (C transposed). */
typedef struct wt_item {
    int64_t pc, kc, n0;
    int nw;
    int64_t c0, c1;
} wt_item;

/* Byte offset of element k in a weight row, and the bytes of kc elements
 * from there (whole blocks for a quantized weight). */
static int64_t wt_row_at(const gemm_args *g, int64_t k) {
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    return bt->is_quantized ? k / bt->block_size * (int64_t)bt->type_size : k * (int64_t)bt->type_size;
}

/* One item's rows as bf16 for the bf16 tile (*ldw elements apart): a bf16
 * weight's in place, a quantized one's dequantized into wbuf (through f32
 * in its second half, then rounded as the bf16 panels round). */
static const uint16_t *wt_bf16_rows(const gemm_args *g, wt_item it, float *wbuf, int64_t *ldw) {
    if (g->bt == CANDLE_DTYPE_BF16) {
        *ldw = g->sbn / 2;
        return (const uint16_t *)(g->b + it.n0 * g->sbn + it.pc * 2);
    }
    const candle_dtype_traits *bt = cpu_dtype(g->bt);
    const cpu_simd *simd = cpu_simd_get();
    uint16_t *rows = (uint16_t *)wbuf;
    float *f = wbuf + (size_t)WT_NR * WT_KC / 2;
    for (int r = 0; r < it.nw; r++) {
        const char *src = g->b + (it.n0 + r) * g->sbn + wt_row_at(g, it.pc);
        if (g->bt == CANDLE_DTYPE_Q8_0 && simd->q8_0_to_bf16) {
            simd->q8_0_to_bf16(src, rows + r * it.kc, it.kc);
            continue;
        }
        bt->to_f32(src, f, it.kc);
        simd->f32_to_bf16(f, rows + r * it.kc, it.kc);
    }
    *ldw = it.kc;
    return rows;
}

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
    const uint16_t *wb = bf16 ? wt_bf16_rows(g, it, wbuf, &ldw) : NULL;
    /* the C-transposed tile spreads its share of the prefetches over its
     * k loop */
    bool pf_tile = ct != NULL;
    int64_t pf_at = wt_row_at(g, next.pc), pf_bytes = wt_row_at(g, next.kc);
    if (ct && (wt_pair(g, M) || wt_quad(g, M))) {
        /* 8-row panels of k pairs (bf16 dot products: k quads), up to
         * WT_PAIR_PANELS per tile, in balanced steps (5 panels: 3 + 2) */
        int64_t np = (M + 7) / 8, kcp = it.kc + (it.kc & 1), kp = (it.kc + 1) / 2, kpp = kp + (kp & 1);
        n_steps = (np + WT_PAIR_PANELS - 1) / WT_PAIR_PANELS;
        for (int64_t mi = 0; mi < n_steps; mi++) {
            int64_t r0 = mi * next.nw / n_steps, r1 = (mi + 1) * next.nw / n_steps;
            int64_t q0 = mi * np / n_steps, q1 = (mi + 1) * np / n_steps;
            const char *pf = g->b + (next.n0 + r0) * g->sbn + pf_at;
            int pf_rows = r1 > r0 ? (int)(r1 - r0) : 0;
            if (bf16)
                simd->wt_bf16_ukr_p(it.kc, wb, ldw, it.nw, (const uint32_t *)ap + q0 * 8 * kpp, (int)(q1 - q0),
                                    ct + (it.n0 - it.c0) * ldt + 8 * q0, ldt, it.pc > 0, pf, g->sbn, pf_rows,
                                    pf_bytes);
            else
                simd->wt_ukr_p(it.kc, w, ldw, it.nw, ap + q0 * 8 * kcp, (int)(q1 - q0),
                                    ct + (it.n0 - it.c0) * ldt + 8 * q0, ldt, it.pc > 0, pf, g->sbn, pf_rows,
                                    pf_bytes);
        }
        return;
    }
    for (int64_t mi = 0; mi < n_steps; mi++) {
        int64_t r0 = mi * next.nw / n_steps, r1 = (mi + 1) * next.nw / n_steps;
        if (r1 > r0 && !pf_tile) cpu_mm_prefetch_b_panel(g, next.pc, next.kc, next.n0 + r0, (int)(r1 - r0));
        int64_t m0 = mi * step;
        int nm = M - m0 < step ? (int)(M - m0) : (int)step;
        float *c = g->c + m0 * g->ldc + it.n0;
        if (bf16) {
            if (ct && simd->wt_bf16_ukr_t) {
                simd->wt_bf16_ukr_t(it.kc, wb, ldw, it.nw, (const uint32_t *)(ap + m0 * it.kc), nm,
                                    ct + (it.n0 - it.c0) * ldt + m0, ldt, it.pc > 0,
                                    g->b + (next.n0 + r0) * g->sbn + pf_at, g->sbn, r1 > r0 ? (int)(r1 - r0) : 0,
                                    pf_bytes);
                continue;
            }
            simd->wt_bf16_ukr(it.kc, wb, ldw, it.nw, (const uint32_t *)(ap + m0 * it.kc), nm, c, g->ldc,
                              it.pc > 0);
            continue;
        }
        if (ct) {
            simd->wt_ukr_t(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, ct + (it.n0 - it.c0) * ldt + m0, ldt,
                           it.pc > 0, g->b + (next.n0 + r0) * g->sbn + pf_at, g->sbn, r1 > r0 ? (int)(r1 - r0) : 0,
                           pf_bytes);
            continue;
        }
        if (simd->wt_ukr) {
            simd->wt_ukr(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, c, g->ldc, it.pc > 0);
            continue;
        }
        wt_ukr_generic(it.kc, w, ldw, it.nw, ap + m0 * it.kc, nm, c, g->ldc, it.pc > 0);
    }
}

void cpu_mm_wt_run(const cpu_task *t, candle_tensor *dst, const mm_geom *geo) {
    float *ap = (float *)(((uintptr_t)t->wdata + 63) & ~(uintptr_t)63);
    float *wbuf = (float *)((char *)ap + cpu_mm_wt_a_bytes(geo) + (size_t)t->tid * cpu_mm_wt_thread_bytes());
    gemm_args g = cpu_mm_gemm_args_for(dst, geo, 0, NULL);
    int64_t mpad = wt_m_pad(geo), KC = wt_kc(geo->K, g.bt), K = geo->K, lo, hi;
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
    bool ct = wt_ct(), slice_outer = !ct && cpu_mm_wt_a_bytes(geo) > WT_A_INNER_BYTES;
    const float *bias = cpu_mm_wt_adds_bias(dst) ? (const float *)tensor_ptr(dst->src[2]) : NULL;
    float *ctb = (float *)((char *)wbuf + (cpu_mm_wt_thread_bytes() - WT_CT_BYTES));
    int64_t ch = ct ? WT_CT_BYTES / (int64_t)sizeof(float) / mpad / WT_NR * WT_NR : hi - lo;
    ch = ch < WT_NR ? WT_NR : ch;
    wt_item it = {0, KC < K ? KC : K, lo, hi - lo < WT_NR ? (int)(hi - lo) : WT_NR, lo, hi - lo < ch ? hi : lo + ch};
    if (ct && it.c1 - it.n0 < it.nw) it.nw = (int)(it.c1 - it.n0);
    cpu_mm_prefetch_b_panel(&g, it.pc, it.kc, it.n0, it.nw);
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
                cpu_simd_get()->wt_ct_out(ctb, mpad, geo->M, it.c1 - it.c0, g.c + it.c0, g.ldc, bias ? bias + it.c0 : NULL);
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

