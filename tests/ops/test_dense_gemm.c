/* The dense f32 GEMM and matrix-vector paths of fast_matmul.c as changed for
 * f16 prefill and decode: the weight-row GEMM for 16-144 rows on a
 * transposed weight (six weight rows broadcast against 16-row transposed
 * activation panels, or with AVX-512 for 16-63 rows and row counts off a
 * multiple of 16, against 8-row panels of k pairs; f32 rows in place,
 * also with padded rows, f16/bf16
 * converted; K slices of at most 1024, inside each group or, past 640 KiB
 * of packed A (scalar table), outside the groups; with AVX-512 and AVX2, C
 * through a transposed scratch in column blocks; partial groups and
 * panels; N split
 * in guided tasks, large to small, the last partial), the
 * shared-A packed GEMM for plain, strided and quantized B (K cut into equal
 * slices: 576 = 2 x 288, 577, block-quantized K in whole blocks), the
 * per-panel packing used when one MC block holds a task's rows, the
 * block-packed path (M > 144), the wide 12 x 32 AVX-512 tile's row and column
 * tails, bf16 weights through AVX512_BF16 dot products (bf16-rounded
 * activations: exact against those, close to the exact product),
 * prefetching of transposed, plain and
 * strided B; the matrix-vector path's guided tasks on a weight of 32 MiB;
 * and the dot_rows primitive of every table this CPU runs (scalar, avx2,
 * avx512)
 * (f16/bf16 rows one at a time up to K = 1024, four at a time past it;
 * f32 eight/four at a time) on odd K, row tails, padded rows and strided
 * outputs, with nothing written between or after the outputs. All against
 * a naive double-precision product, on 1 and 2 threads. */
#include <math.h>
#include <string.h>

#include "core/core-impl.h"
#include "gemm-check.h"

static const gemm_case cases[] = {
    /* weight-row GEMM: 16 <= M <= 144, a transposed plain-float weight, >= 5 MFLOP */
    {128, 576, 40, true, F16, MT_CONTIG, MT_CONTIG},    /* SmolLM2 prefill, 6 x 6 + 4 rows */
    {64, 640, 100, true, F16, MT_CONTIG, MT_CONTIG},    /* gemma-3 prefill: whole panels */
    {100, 577, 70, true, BF16, MT_OFFSET, MT_CONTIG},   /* odd K, 100 = 6 x 16 + 4 */
    {144, 1536, 20, true, F16, MT_SLICED, MT_CONTIG},   /* 2 x 768 slices, strided A */
    {16, 2050, 90, true, F32, MT_CONTIG, MT_OFFSET},    /* M at the bound, 3 slices, f32 in place */
    {17, 1100, 150, true, BF16, MT_TRANSPOSED, MT_CONTIG}, /* one-row panel, transposed A */
    {33, 300, 301, true, F32, MT_OFFSET, MT_CONTIG},
    {64, 200, 1027, true, F16, MT_CONTIG, MT_CONTIG},   /* guided tasks down to a 1-column one */
    /* packed A past 640 KiB: K slices outside the groups (each slice of A
     * read by all of a task's groups), odd K and N */
    {136, 1283, 59, true, F16, MT_CONTIG, MT_OFFSET},   /* 648 + 635, group tail of 5 */
    {100, 1700, 40, true, F32, MT_CONTIG, MT_CONTIG},   /* f32 rows in place */
    {144, 1200, 100, true, BF16, MT_OFFSET, MT_CONTIG},
    /* C through the transposed scratch (AVX-512 and AVX2), several column blocks per
     * task (168 and 216 columns here) over two K slices, row tails */
    {144, 1100, 400, true, F16, MT_CONTIG, MT_CONTIG},
    {100, 1100, 301, true, F32, MT_OFFSET, MT_CONTIG},
    /* AVX-512, 16-63 rows and row counts off a multiple of 16: the tile in
     * k pairs (8-row panels, up to 4 per tile, 5 = 3 + 2, 7 = 4 + 3), A
     * packed in pairs by vector transposes (contiguous rows, offset or
     * strided) or element by element (transposed A, bf16 weight off its dot
     * products); odd K in the last slice, group tails (N % 6), column
     * blocks of the transposed scratch */
    {16, 2049, 90, true, F16, MT_CONTIG, MT_CONTIG},    /* 2 panels, 688 + 688 + 673 */
    {24, 577, 211, true, F32, MT_OFFSET, MT_CONTIG},    /* 3 panels, odd K, f32 in place */
    {40, 1031, 67, true, F16, MT_SLICED, MT_CONTIG},    /* 3 + 2, strided A, 520 + 511 */
    {47, 300, 203, true, F16, MT_TRANSPOSED, MT_CONTIG}, /* 3 + 3, 7-row last panel */
    {56, 1025, 47, true, F32, MT_CONTIG, MT_OFFSET},    /* 4 + 3, padded f32 rows */
    {63, 130, 700, true, F16, MT_CONTIG, MT_CONTIG},    /* 4 + 4, two column blocks */
    {21, 333, 1100, true, BF16, MT_SLICED, MT_CONTIG},  /* 3 panels, bf16 converted */
    {36, 700, 1100, true, F16, MT_CONTIG, MT_CONTIG},   /* 3 + 2, three column blocks */
    {79, 1500, 30, true, F16, MT_OFFSET, MT_CONTIG},    /* 10 panels: 4 + 3 + 3 */
    /* shared-A packed GEMM: plain and strided B */
    {70, 513, 80, false, F32, MT_TRANSPOSED, MT_CONTIG}, /* plain B rows */
    {97, 260, 112, false, F32, MT_CONTIG, MT_SLICED},   /* strided B: no prefetch */
    {128, 576, 40, true, F32, MT_CONTIG, MT_SLICED},    /* weight with strided K */
    /* smaller: one MC block per task, B packed panel by panel */
    {65, 96, 17, true, F32, MT_CONTIG, MT_OFFSET},      /* one slice, one partial panel */
    {120, 200, 50, true, F16, MT_CONTIG, MT_CONTIG},
    /* several MC blocks: the B block packed once per slice */
    {145, 300, 40, true, F16, MT_CONTIG, MT_CONTIG},
    {300, 257, 33, false, F32, MT_CONTIG, MT_CONTIG},
    {150, 600, 24, true, BF16, MT_OFFSET, MT_OFFSET},
    /* the wide 12 x 32 tile (AVX-512): row tails of 1 and 11, column tails
     * of 7 to 23, one and two B panels, and 7 rows on a plain B */
    {157, 300, 87, false, F32, MT_CONTIG, MT_CONTIG},
    {131, 260, 113, false, F32, MT_OFFSET, MT_CONTIG},
    {7, 2000, 190, false, F32, MT_CONTIG, MT_OFFSET},
    /* bf16 B in the packed GEMM (bf16 dot products with AVX512_BF16; a
     * bf16 weight with contiguous A rows stays on the weight-row tiles up
     * to 512 rows): weight rows by 8 x 8 word transposes, odd-length rows
     * (K = 33) and transposed A element by element, odd K */
    {600, 301, 87, true, BF16, MT_CONTIG, MT_CONTIG},
    {131, 300, 113, true, BF16, MT_TRANSPOSED, MT_CONTIG},
    {530, 260, 40, true, BF16, MT_CONTIG, MT_OFFSET},
    {200, 33, 50, true, BF16, MT_CONTIG, MT_CONTIG},
    /* ... and the bf16 weight-row tiles past 144 rows: k quads (157, 300:
     * off a multiple of 16) and the 16-row panels (256), strided A */
    {157, 301, 87, true, BF16, MT_CONTIG, MT_CONTIG},
    {300, 260, 40, true, BF16, MT_CONTIG, MT_OFFSET},
    {256, 301, 33, true, BF16, MT_SLICED, MT_CONTIG},
    /* block-quantized weights: slices in whole blocks (9 and 7 blocks) */
    {65, 576, 80, true, Q8, MT_CONTIG, MT_CONTIG},
    {150, 1056, 20, true, Q8, MT_SLICED, MT_CONTIG},
    /* matrix-vector path (M <= 4): f16/bf16 rows streamed one at a time */
    {1, 577, 45, true, F16, MT_CONTIG, MT_OFFSET},
    {1, 576, 515, true, F16, MT_CONTIG, MT_CONTIG},
    {3, 100, 19, true, BF16, MT_SLICED, MT_CONTIG},
    {2, 33, 70, true, F32, MT_CONTIG, MT_CONTIG},
    {1, 1024, 8195, true, F32, MT_CONTIG, MT_CONTIG},  /* 32 MiB: guided tasks, a partial last one */
};

static void store_elem(candle_dtype t, char *p, float v) {
    if (t == F32) memcpy(p, &v, 4);
    else {
        uint16_t h = t == F16 ? candle_f32_to_f16(v) : candle_f32_to_bf16(v);
        memcpy(p, &h, 2);
    }
}

/* dot_rows directly: n rows of k, rows pad elements longer than k, outputs
 * os floats apart; the gaps and one slot past the end keep a guard value. */
static void check_dot_rows(const char *isa, candle_dtype t, int64_t k, int64_t n, int64_t pad, int64_t os,
                           uint64_t *rng) {
    size_t esz = cpu_dtype(t)->type_size, ws = (size_t)(k + pad) * esz;
    char *w = malloc(ws * (size_t)n + 1);
    float *x = malloc(sizeof(float) * (size_t)(k ? k : 1));
    int64_t n_out = (n - 1) * os + 2;
    float *out = malloc(sizeof(float) * (size_t)n_out);
    double *want = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
    if (!w || !x || !out || !want || !mag) {
        CHECK(false);
        free(w), free(x), free(out), free(want), free(mag);
        return;
    }
    for (int64_t i = 0; i < k; i++) x[i] = (float)mt_uniform(rng, -1, 1);
    for (int64_t r = 0; r < n; r++) {
        double acc = 0, m = 0;
        for (int64_t i = 0; i < k + pad; i++) {
            char *p = w + (size_t)r * ws + (size_t)i * esz;
            /* padding holds large values: read by mistake, they show */
            store_elem(t, p, i < k ? (float)mt_uniform(rng, -1, 1) : 1000.0f);
            if (i < k) acc += (double)cdl_load_f32(t, p) * x[i], m += fabs((double)cdl_load_f32(t, p) * x[i]);
        }
        want[r] = acc, mag[r] = m;
    }
    for (int64_t i = 0; i < n_out; i++) out[i] = -7.5f;
    cpu_simd_get()->dot_rows(t, k, w, ws, n, x, out, os);
    /* f32 accumulation: error well under 1e-5 of sum |w x| for k <= 1000 */
    double worst = 0;
    bool guards = true;
    for (int64_t i = 0; i < n_out; i++) {
        if (i % os == 0 && i / os < n) {
            double rel = fabs(out[i] - want[i / os]) / (mag[i / os] + 1e-30);
            worst = rel > worst ? rel : worst;
        } else if (out[i] != -7.5f) {
            guards = false;
        }
    }
    CHECK_MSG(worst <= 1e-5, "%s dot_rows %s k %lld n %lld pad %lld os %lld: error %g of sum |w x|", isa,
              candle_dtype_name(t), (long long)k, (long long)n, (long long)pad, (long long)os, worst);
    CHECK_MSG(guards, "%s dot_rows %s k %lld n %lld pad %lld os %lld: wrote outside the outputs", isa,
              candle_dtype_name(t), (long long)k, (long long)n, (long long)pad, (long long)os);
    free(w), free(x), free(out), free(want), free(mag);
}

static void run_dot_rows(const char *isa) {
    static const candle_dtype types[] = {F32, F16, BF16};
    static const int64_t ks[] = {1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 576, 1000, 1024, 1025, 1100};
    static const int64_t ns[] = {1, 3, 7, 8, 9, 17};
    uint64_t rng = 42;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                int64_t pad = (int64_t)((ki + ni) % 3) * 3, os = ni % 2 ? 3 : 1;
                check_dot_rows(isa, types[ti], ks[ki], ns[ni], pad, os, &rng);
            }
}

/* The weight-row GEMM on a weight whose rows are longer than K (a narrow
 * of [N, K + 7] from column 3): f32 rows are read in place with their
 * stride, f16 / bf16 ones converted from it. */
static void check_padded_weight(candle_ctx *ctx, candle_dtype wt, int64_t M, int64_t K, int64_t N,
                                const char *label, uint64_t seed) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t as[2] = {M, K}, ws[2] = {N, K + 7};
    candle_tensor *a = mt_input(ctx, F32, 2, as, MT_CONTIG, seed, -1, 1);
    candle_tensor *wfull = mt_input(ctx, wt, 2, ws, MT_CONTIG, seed + 1, -1, 1);
    candle_tensor *w = wfull ? candle_narrow(ctx, wfull, 1, 3, K) : NULL;
    candle_tensor *y = a && w ? candle_matmul(ctx, a, candle_transpose(ctx, w, 0, 1)) : NULL;
    CHECK_MSG(y && cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s padded %s: %s", label, candle_dtype_name(wt),
              candle_errmsg(ctx));
    double *av = y ? mt_values(a) : NULL, *wv = y ? mt_values(w) : NULL, *got = y ? mt_values(y) : NULL;
    double *want = malloc(sizeof(double) * (size_t)(M * N));
    if (av && wv && got && want) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += av[i * K + k] * wv[j * K + k];
                want[i * N + j] = acc;
            }
        double e = mt_nmse(got, want, M * N);
        CHECK_MSG(e <= 1e-10, "%s padded %s M %lld K %lld N %lld: nmse %g", label, candle_dtype_name(wt),
                  (long long)M, (long long)K, (long long)N, e);
    } else {
        CHECK_MSG(false, "%s padded %s: values unreadable", label, candle_dtype_name(wt));
    }
    free(av), free(wv), free(got), free(want);
    candle_ctx_clear_error(ctx);
    candle_ctx_reset(ctx, mark);
}

/* bf16 weights on the weight-row path (16-row panels of k pairs, or
 * 8-row panels of k quads; past 144 rows, the packed GEMM): with the
 * table's bf16 dot products
 * (AVX512_BF16) the result is the exact product of bf16-rounded
 * activations and the weight (f32 sums only), within bf16 rounding of the
 * exact one; without them, the exact product. Weight rows pad elements
 * longer than K (read in place), M across the 64-row tile (tails of 1-3
 * panels), odd K and several K slices. */
/* want = a w^T in double (a [M, K], w [N, K]), then want_r the same with
 * both rounded to bf16 first, as the bf16 dot products see them (av and wv
 * are rounded in place; a bf16 weight's values stay). */
static void bf16_refs(double *av, double *wv, int64_t M, int64_t K, int64_t N, double *want, double *want_r) {
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += av[i * K + k] * wv[j * K + k];
                (pass ? want_r : want)[i * N + j] = acc;
            }
        for (int64_t i = 0; i < M * K; i++) av[i] = candle_bf16_to_f32(candle_f32_to_bf16((float)av[i]));
        for (int64_t i = 0; i < N * K; i++) wv[i] = candle_bf16_to_f32(candle_f32_to_bf16((float)wv[i]));
    }
}

static void check_bf16_dot(candle_ctx *ctx, int64_t M, int64_t K, int64_t N, int64_t pad, const char *label,
                           uint64_t seed) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t as[2] = {M, K}, ws[2] = {N, K + pad};
    candle_tensor *a = mt_input(ctx, F32, 2, as, MT_CONTIG, seed, -1, 1);
    candle_tensor *wfull = mt_input(ctx, BF16, 2, ws, MT_CONTIG, seed + 1, -1, 1);
    candle_tensor *w = wfull && pad ? candle_narrow(ctx, wfull, 1, pad / 2, K) : wfull;
    candle_tensor *y = a && w ? candle_matmul(ctx, a, candle_transpose(ctx, w, 0, 1)) : NULL;
    CHECK_MSG(y && cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s bf16 dot: %s", label, candle_errmsg(ctx));
    double *av = y ? mt_values(a) : NULL, *wv = y ? mt_values(w) : NULL, *got = y ? mt_values(y) : NULL;
    double *want = malloc(sizeof(double) * (size_t)(M * N)), *want_r = malloc(sizeof(double) * (size_t)(M * N));
    if (av && wv && got && want && want_r) {
        bf16_refs(av, wv, M, K, N, want, want_r);
        double e = mt_nmse(got, want, M * N), er = mt_nmse(got, want_r, M * N);
        if (cpu_simd_get()->wt_bf16_ukr)
            CHECK_MSG(er <= 1e-10 && e <= 1e-5 && e > 10 * er,
                      "%s bf16 dot M %lld K %lld N %lld pad %lld: nmse %g, %g against bf16-rounded activations",
                      label, (long long)M, (long long)K, (long long)N, (long long)pad, e, er);
        else
            CHECK_MSG(e <= 1e-10, "%s bf16 M %lld K %lld N %lld pad %lld: nmse %g", label, (long long)M,
                      (long long)K, (long long)N, (long long)pad, e);
    } else {
        CHECK_MSG(false, "%s bf16 dot: values unreadable", label);
    }
    free(av), free(wv), free(got), free(want), free(want_r);
    candle_ctx_clear_error(ctx);
    candle_ctx_reset(ctx, mark);
}

/* A quantized weight under CDL_MM_FLOAT_ACT (the encoders' products): never
 * the integer kernels; with the bf16 tiles (the weight-row tiles, the packed
 * GEMM's bf16 panels) its rows dequantized and rounded to bf16 against
 * activations rounded to bf16 (exact on those roundings, near the exact
 * product), without them (and on the dot tiles) the f32 paths (exact). */
static void check_float_act(candle_ctx *ctx, candle_dtype wt, int64_t M, int64_t K, int64_t N, const char *label,
                            uint64_t seed) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    int64_t as[2] = {M, K}, ws[2] = {N, K};
    candle_tensor *a = mt_input(ctx, F32, 2, as, MT_OFFSET, seed, -1, 1);
    candle_tensor *w = mt_input(ctx, wt, 2, ws, MT_CONTIG, seed + 1, -1, 1);
    candle_tensor *y = a && w ? cdl_matmul_ex(ctx, a, candle_transpose(ctx, w, 0, 1), NULL, CDL_MM_FLOAT_ACT) : NULL;
    CHECK_MSG(y && cpu_fast_kernel_for(y) == &cpu_fast_matmul, "%s float act %s M %lld: %s", label,
              candle_dtype_name(wt), (long long)M, candle_errmsg(ctx));
    double *av = y ? mt_values(a) : NULL, *got = y ? mt_values(y) : NULL;
    double *wv = malloc(sizeof(double) * (size_t)(N * K)), *want = malloc(sizeof(double) * (size_t)(M * N)),
           *want_r = malloc(sizeof(double) * (size_t)(M * N));
    float *row = malloc(sizeof(float) * (size_t)K);
    if (av && got && wv && want && want_r && row) {
        for (int64_t j = 0; j < N; j++) {
            cpu_dtype(wt)->to_f32(tensor_ptr(w) + j * w->stride[0], row, K);
            for (int64_t k = 0; k < K; k++) wv[j * K + k] = row[k];
        }
        bf16_refs(av, wv, M, K, N, want, want_r);
        double e = mt_nmse(got, want, M * N), er = mt_nmse(got, want_r, M * N);
        /* past 4 rows the bf16 tiles take it where the table has them; up to
         * 4 the dot tiles (f32) or, under their flops, the GEMM's panels */
        bool bf = cpu_simd_get()->wt_bf16_ukr != NULL, bf_ok = er <= 1e-10 && e <= 1e-5 && e > 10 * er;
        CHECK_MSG(bf && M > 4 ? bf_ok : e <= 1e-10 || (bf && bf_ok),
                  "%s float act %s M %lld K %lld N %lld: nmse %g, %g against bf16-rounded operands", label,
                  candle_dtype_name(wt), (long long)M, (long long)K, (long long)N, e, er);
    } else {
        CHECK_MSG(false, "%s float act: values unreadable", label);
    }
    free(av), free(wv), free(got), free(want), free(want_r), free(row);
    candle_ctx_clear_error(ctx);
    candle_ctx_reset(ctx, mark);
}

int main(void) {
    /* every quantized product goes to the dequantizing GEMM */
    candle_cpu_params cpu = candle_cpu_get_defaults();
    cpu.qmm_max_m = 0;
    CHECK(candle_cpu_set_defaults(&cpu) == CANDLE_OK);
    cpu_set_always_parallel(true);
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    const char *best = cpu_simd_get()->name;
    for (int i = 0; i < 3; i++) {
        if (!cpu_simd_force(isas[i])) continue; /* not on this CPU */
        run_dot_rows(isas[i]);
        /* 1 and 2 threads on the table this CPU uses and on the AVX2 one
         * (its own wt tile and C-transposed scratch), 2 (every split) on
         * the scalar one, which shares the drivers: keeps the run short
         * under ASan */
        for (int threads = strcmp(isas[i], best) && strcmp(isas[i], "avx2") ? 2 : 1; threads <= 2; threads++) {
            candle_ctx *ctx = mt_ctx_threads(true, threads);
            char label[48];
            snprintf(label, sizeof label, "%s x%d", isas[i], threads);
            uint64_t seed = 1;
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                gemm_check(ctx, &cases[c], label, seed += 2);
            check_padded_weight(ctx, F32, 40, 700, 100, label, seed += 2);
            check_padded_weight(ctx, F16, 64, 1030, 45, label, seed += 2);
            check_bf16_dot(ctx, 130, 2051, 45, 0, label, seed += 2);  /* 64 + 64 + 2 rows, 2 slices, odd */
            check_bf16_dot(ctx, 100, 577, 70, 7, label, seed += 2);   /* 64 + 36, padded rows */
            check_bf16_dot(ctx, 16, 1000, 170, 2, label, seed += 2);  /* one panel, nw tail */
            check_bf16_dot(ctx, 49, 3, 17101, 3, label, seed += 2);   /* K = 3: a pair and the lone last k */
            check_bf16_dot(ctx, 157, 301, 87, 3, label, seed += 2);   /* the packed GEMM (M > 144) */
            /* AVX512_BF16, 16-47 rows and counts off a multiple of 16: the
             * tile in k quads (8-row panels of bf16 pair pairs), every k % 4
             * in the last quad, several column blocks (>= 5 MFLOP: the wt
             * path) */
            check_bf16_dot(ctx, 24, 1030, 110, 5, label, seed += 2);  /* slices 520 + 510 */
            check_bf16_dot(ctx, 40, 519, 130, 0, label, seed += 2);   /* 3 + 2 panels, k % 4 = 3 */
            check_bf16_dot(ctx, 56, 130, 700, 1, label, seed += 2);   /* 4 + 3, two column blocks */
            check_bf16_dot(ctx, 47, 2049, 30, 2, label, seed += 2);   /* 688 + 688 + 673, row tail 7 */
            /* quantized weights with float activations: 3 rows (the dot tiles or the GEMM), the
             * bf16 tile in k quads (9, 40), 16-row panels (64, 256) and two K
             * slices (K 1536: 768 + 768, whole q4_K blocks), the packed GEMM past
             * 512 rows (its bf16 panels) */
            check_float_act(ctx, Q8, 3, 384, 50, label, seed += 2);
            check_float_act(ctx, Q8, 9, 384, 300, label, seed += 2);
            check_float_act(ctx, Q8, 40, 1536, 70, label, seed += 2);
            check_float_act(ctx, Q8, 256, 384, 90, label, seed += 2);
            check_float_act(ctx, CANDLE_DTYPE_Q4_K, 64, 1536, 45, label, seed += 2);
            check_float_act(ctx, Q8, 520, 96, 40, label, seed += 2);
            candle_ctx_free(ctx);
        }
    }
    cpu_simd_force("auto");
    return test_done("test_dense_gemm");
}
