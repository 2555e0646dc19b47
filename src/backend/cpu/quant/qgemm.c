/* The quantized multi-row product: packed panels where the type has a
 * multi-row kernel, else one traits vec_dot per output (the exact
 * single-row path; without AVX2 for every type, up to the tile's M). */
#include "qgemm-impl.h"

#include <stdbool.h>
#include <stdlib.h>

#include "arm/quant-arm-impl.h"
#include "gemv-impl.h"
#include "quant-kernels-impl.h"
#include "x86/quant-x86-impl.h"

/* Activation rows whose aux records (see cdl_qgemm_prep_avx2) fit the
 * scratch: the quantized matmul's largest M without VNNI (QMM_MAX_M_TILE),
 * so each weight panel is packed once; more rows (with VNNI up to 512) go
 * in turns, packing again. */
#define AUX_ROWS 256
/* The VNNI types with a direct kernel (qgemm_direct_avx512.c) skip the
 * panels up to the config's qgemm_direct_max_m activation rows (64 unless
 * lowered; 0 keeps the panels) where the 16-row tiles are full enough:
 * a tile costs the same for 1 row as for 16, and the panels' packing is
 * amortized over all M rows: the direct kernel wins when its tiles are at
 * least 13 rows full (q8_0: 11). Figures: bench/RESULTS.md (issue 17).
 * q4_z128 takes the direct tiles at any M, qgemm_direct_max_m rows at a
 * time: q8_0's panels on its rewritten rows cost more (pp128 of a
 * TinyLlama-shaped AWQ model: bench/RESULTS.md). Returns the rows per
 * direct call, or 0 for the panels. */
#ifdef CANDLE_QUANT_HAVE_X86
static int64_t direct_rows(candle_dtype t, int64_t M) {
    int64_t dm = cpu_config_get()->qgemm_direct_max_m, m = t == CANDLE_DTYPE_Q4_Z128 ? dm : M;
    if (m < 1 || m > dm || !cdl_quant_uses_vnni() || !cdl_qgemm_has_direct_vnni(t)) return 0;
    int64_t tiles = (m + 15) / 16, fill = t == CANDLE_DTYPE_Q8_0 || t == CANDLE_DTYPE_Q4_Z128 ? 11 : 13; /* rows per tile (q4_z128 runs as q8_0) */
    return m >= fill * tiles ? m : 0;
}
#endif

/* Without the AVX2 kernels (other CPUs, quant scalar) every type
 * with a vec_dot takes the blocked per-output dots (nested_dot) up to the
 * tile's M rows rather than the dequantizing f32 GEMM from 5 rows up: each
 * output is then the single-row product's vec_dot, bit for bit, however
 * many activation rows are batched (concurrent decode streams give the
 * sequential ones' tokens). */
static int portable_rows(candle_dtype t) {
    const candle_dtype_traits *tt = cpu_dtype(t);
    return tt && tt->is_quantized && tt->vec_dot != NULL;
}

int cdl_qgemm_has_fast(candle_dtype t) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2())
        return t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_0 || t == CANDLE_DTYPE_Q5_1 ||
               t == CANDLE_DTYPE_Q8_0 || t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q6_K || t == CANDLE_DTYPE_Q4_Z128;
#endif
    return portable_rows(t);
}

int cdl_qgemm_rows_exact(candle_dtype t) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2()) return 0;
#endif
    return portable_rows(t);
}

int cdl_qgemm_uses_vnni(void) {
#ifdef CANDLE_QUANT_HAVE_X86
    return cdl_quant_uses_avx2() && cdl_quant_uses_vnni();
#else
    return 0;
#endif
}

/* q4_z128 takes the panels of q8_0 (VNNI) or q5_0 (AVX2, whose q8_0
 * panels are 1.7x slower than its q5_0 ones): its rows are first rewritten
 * as rows of that type with the same values, which its packing then
 * interleaves (exact; the panels' bits are that type's, the few rows' and
 * the matrix-vector rows' are q4_z128's own). */
#ifdef CANDLE_QUANT_HAVE_X86
static candle_dtype panel_type(candle_dtype t) {
    if (t != CANDLE_DTYPE_Q4_Z128) return t;
    return cdl_quant_uses_vnni() ? CANDLE_DTYPE_Q8_0 : CANDLE_DTYPE_Q5_0;
}
#endif

size_t cdl_qgemm_scratch_bytes(candle_dtype t, int64_t K) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (cdl_quant_uses_avx2() && cdl_qgemm_has_fast(t)) {
        candle_dtype pt = panel_type(t);
        size_t b = 2 * cdl_qgemm_panel_bytes_avx2(pt, K) + AUX_ROWS * cdl_qgemm_aux_bytes_avx2(pt, K);
        if (pt != t) b += 2 * CANDLE_QGEMM_NR * candle_dtype_row_size(pt, K); /* the rewritten rows */
        size_t few = (size_t)cdl_qgemm_few_rows_steps(t, K) * cdl_gemv_x_bytes(t, K); /* the few-row kernels' rows */
        if (few > b) b = few;
        if (cdl_quant_uses_vnni() && cdl_qgemm_has_direct_vnni(t)) {
            size_t d = cdl_qgemm_direct_bytes_vnni(t, K, CPU_QGEMM_DIRECT_MAX_M);
            if (d > b) b = d;
        }
        return b;
    }
#endif
    (void)t;
    (void)K;
    return 0;
}

/* The legacy types take the panels from one row up: their panels give
 * the matrix-vector kernels' bits (see qgemm_avx2.c), the per-output
 * vec_dot does not. For the K types, packing a panel costs about one
 * activation row's dots (their single-row dot is already fast): fewer rows
 * keep the plain dots (measured against the AVX2 vec_dot, one thread, K 576
 * and 1024). */
#ifdef CANDLE_QUANT_HAVE_X86
static int64_t min_rows(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q6_K ? 4 : 1;
}
#endif

/* Activation rows up to which a type takes the few-row kernels on AVX2
 * without VNNI (kquants-impl.h, gemv-rows-impl.h): they decode each weight
 * block once for several rows and repack nothing, and every output keeps
 * the matrix-vector kernel's bits. More rows go to the panels, whose
 * repacking is then amortized (q5_K, which has none, to the dequantizing
 * GEMM past 32). Limits from `candle bench quant --m` with
 * CANDLE_QGEMM_FEW_MAX_M 0 against the default (bench/RESULTS.md). */
#ifdef CANDLE_QUANT_HAVE_X86
static int64_t few_rows_of(candle_dtype t, int64_t K) {
    if (t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q6_K) return 12;
    if (t == CANDLE_DTYPE_Q5_K) return CPU_QGEMM_FEW_MAX_M;
    if (t == CANDLE_DTYPE_Q4_Z128) return 12; /* the K types' limit: more rows take the direct tiles or panels */
    /* on rows shorter than 1024 the per-output sums and tail blocks weigh
     * more: q8_0 keeps 4 rows there, the nibble types' panels win (and
     * theirs from 5 rows on any row) */
    if (t == CANDLE_DTYPE_Q8_0) return K >= 1024 ? 8 : 4;
    if (t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_0 || t == CANDLE_DTYPE_Q5_1)
        return K >= 1024 ? 4 : 0;
    return 0;
}

/* With AVX512-VNNI the legacy types take the direct tiles or panels from
 * one row; the K types' few-row kernels (their madds as vpdpwssd) beat the
 * panels up to 6 rows (q4_K) and 10 (q6_K), and q5_K has no panels;
 * q4_z128's few rows, its matrix-vector rows (z_rows), beat the direct
 * tiles on rewritten rows up to 4. Limits from
 * `candle bench quant --m` with CANDLE_QGEMM_FEW_MAX_M 0 against the default
 * (bench/RESULTS.md). */
static int64_t few_rows_vnni(candle_dtype t) {
    if (t == CANDLE_DTYPE_Q4_K) return 6;
    if (t == CANDLE_DTYPE_Q6_K) return 10;
    if (t == CANDLE_DTYPE_Q5_K) return CPU_QGEMM_FEW_MAX_M;
    if (t == CANDLE_DTYPE_Q4_Z128) return 4;
    return 0;
}
#endif

/* steps: rows that must keep their one-row bits take AVX2's limits on VNNI
 * too where its panels would part from them (the K types, q4_z128; the
 * legacy types' VNNI tiles and panels keep those bits already). */
static int64_t few_limit(candle_dtype t, int64_t K, bool steps) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (!cdl_quant_uses_avx2()) return 0;
    bool k_type = t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q5_K || t == CANDLE_DTYPE_Q6_K || t == CANDLE_DTYPE_Q4_Z128;
    int64_t own = cdl_quant_uses_vnni() && !(steps && k_type) ? few_rows_vnni(t) : few_rows_of(t, K);
    int64_t set = cpu_config_get()->qgemm_few_max_m;
    return set >= 0 && set < own ? set : own;
#else
    (void)t;
    (void)K;
    (void)steps;
    return 0;
#endif
}

int64_t cdl_qgemm_few_rows(candle_dtype t, int64_t K) { return few_limit(t, K, false); }

int64_t cdl_qgemm_few_rows_steps(candle_dtype t, int64_t K) { return few_limit(t, K, true); }

/* One vec_dot per output, NESTED_ROWS weight rows (kept in L1) over all the
 * activation rows at a time. */
#define NESTED_ROWS 16
static void nested_dot(candle_dtype t, int64_t K, int64_t M, int64_t N, const char *w, size_t ws,
                       const char *x, size_t xs, float *c, int64_t ldc) {
    candle_vec_dot_fn dot = cpu_dtype(t)->vec_dot;
    for (int64_t n0 = 0; n0 < N; n0 += NESTED_ROWS) {
        int64_t n1 = N - n0 < NESTED_ROWS ? N : n0 + NESTED_ROWS;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = n0; n < n1; n++) dot(K, c + m * ldc + n, w + (size_t)n * ws, x + (size_t)m * xs);
    }
}

/* q4_z128's few rows: the matrix-vector rows of NESTED_ROWS weight rows
 * (kept in L1) against each prepared activation row (xb bytes apart), so
 * every output has the matrix-vector bits. */
#ifdef CANDLE_QUANT_HAVE_X86
static void z_rows(int64_t K, int64_t M, int64_t N, const char *w, size_t ws, const char *xv, size_t xb, float *c,
                   int64_t ldc) {
    for (int64_t n0 = 0; n0 < N; n0 += NESTED_ROWS) {
        int64_t nn = N - n0 < NESTED_ROWS ? N - n0 : NESTED_ROWS;
        for (int64_t m = 0; m < M; m++)
            cdl_gemv_rows(CANDLE_DTYPE_Q4_Z128, K, nn, w + (size_t)n0 * ws, ws, xv + (size_t)m * xb, c + m * ldc + n0);
    }
}
#endif

/* The few-row kernels: each output the matrix-vector product's bits. */
#ifdef CANDLE_QUANT_HAVE_X86
static void few_rows_run(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws, const void *x,
                         size_t xs, float *c, int64_t ldc, void *scratch) {
    if ((cdl_quant_uses_vnni() ? cdl_qgemm_rows_k_vnni : cdl_qgemm_rows_k_avx2)(t, K, M, N, w, ws, x, xs, c, ldc))
        return;
    /* the legacy types and q4_z128: each row in the matrix-vector layout first */
    size_t xb = cdl_gemv_x_bytes(t, K);
    for (int64_t m = 0; m < M; m++)
        cdl_gemv_prep_q8_avx2(t, K, (const char *)x + (size_t)m * xs, (char *)scratch + (size_t)m * xb);
    if (t == CANDLE_DTYPE_Q4_Z128) z_rows(K, M, N, w, ws, scratch, xb, c, ldc);
    else cdl_qgemm_rows_few_avx2(t, K, M, N, w, ws, scratch, xb, c, ldc);
}
#endif

/* cdl_qgemm_rows with the few-row kernels up to `few` rows. */
static void qgemm_rows(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws, const void *x,
                       size_t xs, float *c, int64_t ldc, void *scratch, int64_t few) {
#ifdef CANDLE_QUANT_HAVE_X86
    if (M <= few) {
        few_rows_run(t, K, M, N, w, ws, x, xs, c, ldc, scratch);
        return;
    }
    if (M >= min_rows(t) && cdl_quant_uses_avx2() && cdl_qgemm_has_fast(t)) {
        int64_t dr = direct_rows(t, M);
        if (dr) {
            for (int64_t m = 0; m < M; m += dr)
                cdl_qgemm_direct_vnni(t, K, M - m < dr ? M - m : dr, N, w, ws, (const char *)x + (size_t)m * xs, xs,
                                      c + m * ldc, ldc, scratch);
            return;
        }
        const candle_dtype t0 = t;
        t = panel_type(t);
        size_t pb = cdl_qgemm_panel_bytes_avx2(t, K), ab = cdl_qgemm_aux_bytes_avx2(t, K);
        char *aux = (char *)scratch + 2 * pb;
        /* q4_z128: its panel's rows rewritten (panel_type) after the aux records */
        char *rows = aux + AUX_ROWS * ab;
        size_t rs = candle_dtype_row_size(t, K);
        bool vnni = cdl_quant_uses_vnni(), pairs = vnni && cdl_qgemm_has_pairs_vnni(t);
        void (*panel_rows)(candle_dtype, int64_t, int, const void *, const void *, size_t, const void *, int64_t,
                           float *, int64_t) = vnni ? cdl_qgemm_panel_rows_vnni : cdl_qgemm_panel_rows_avx2;
        int64_t step = pairs ? 2 * CANDLE_QGEMM_NR : CANDLE_QGEMM_NR;
        for (int64_t m = 0; m < M; m += AUX_ROWS) {
            int64_t mm = M - m < AUX_ROWS ? M - m : AUX_ROWS;
            const char *xm = (const char *)x + (size_t)m * xs;
            cdl_qgemm_prep_avx2(t, K, mm, xm, xs, aux);
            for (int64_t n = 0; n < N; n += step) {
                int nn = (int)(N - n < step ? N - n : step);
                const char *wn = (const char *)w + (size_t)n * ws;
                size_t wsn = ws;
                if (t != t0) {
                    void (*rewrite)(const void *, void *, int64_t) =
                        t == CANDLE_DTYPE_Q8_0 ? cdl_q4_z128_to_q8_0_avx2 : cdl_q4_z128_to_q5_0_avx2;
                    for (int r = 0; r < nn; r++) rewrite(wn + (size_t)r * ws, rows + r * rs, K);
                    wn = (const char *)rows;
                    wsn = rs;
                }
                if (nn > CANDLE_QGEMM_NR) { /* two panels, 16 rows at once */
                    cdl_qgemm_pack_avx2(t, K, CANDLE_QGEMM_NR, wn, wsn, scratch);
                    cdl_qgemm_pack_avx2(t, K, nn - CANDLE_QGEMM_NR, wn + CANDLE_QGEMM_NR * wsn, wsn,
                                           (char *)scratch + pb);
                    cdl_qgemm_pair_rows_vnni(t, K, nn, scratch, xm, xs, ab ? aux : NULL, mm, c + m * ldc + n, ldc);
                    continue;
                }
                cdl_qgemm_pack_avx2(t, K, nn, wn, wsn, scratch);
                panel_rows(t, K, nn, scratch, xm, xs, ab ? aux : NULL, mm, c + m * ldc + n, ldc);
            }
        }
        return;
    }
#endif
    (void)scratch;
    (void)few;
#ifdef CANDLE_QUANT_HAVE_NEON
    /* the NEON multi-row dots: the traits vec_dot's bits, four activation
     * rows per weight block load */
    if (cdl_quant_uses_neon() &&
        (cdl_quant_uses_dotprod() ? cdl_qgemm_rows_dotprod : cdl_qgemm_rows_neon)(t, K, M, N, w, ws, x, xs,
                                                                                           c, ldc))
        return;
#endif
    nested_dot(t, K, M, N, w, ws, x, xs, c, ldc);
}

void cdl_qgemm_rows(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                       const void *x, size_t xs, float *c, int64_t ldc, void *scratch) {
    qgemm_rows(t, K, M, N, w, ws, x, xs, c, ldc, scratch, cdl_qgemm_few_rows(t, K));
}

void cdl_qgemm_rows_steps(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                          const void *x, size_t xs, float *c, int64_t ldc, void *scratch) {
    qgemm_rows(t, K, M, N, w, ws, x, xs, c, ldc, scratch, cdl_qgemm_few_rows_steps(t, K));
}
