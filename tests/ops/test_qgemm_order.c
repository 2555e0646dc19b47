/* A row's quantized product does not depend on how many rows share it: for
 * q4_0, q4_1, q5_0, q5_1 and q8_0 the packed multi-row kernels (cdl_qgemm_rows, any
 * M, every 1-4 row tail) give the matrix-vector kernels' bits
 * (cdl_gemv_rows, the batch-1 path), and through candle_matmul a row
 * alone (M = 1) equals the same row among others (1 and 2 threads); so do
 * q4_K, q5_K, q6_K and q4_z128 up to their few-row limit (cdl_qgemm_few_rows), and a
 * step verifying drafted tokens (CDL_MM_ROW_STEPS) up to AVX2's limits on VNNI
 * too (cdl_qgemm_few_rows_steps). This is what lets a server's concurrent
 * greedy streams equal the same requests run one at a time. Exact equality: the kernels promise the same float
 * operations in the same order. Where the CPU has no such kernels the
 * checks pass vacuously (the per-output vec_dot is then the only path). */
#include <string.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/fast-impl.h"
#include "mathtest.h"
#include "backend/cpu/quant/gemv-impl.h"
#include "backend/cpu/quant/qgemm-impl.h"
#include "vnni-rerun.h"

static const candle_dtype types[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q5_1,
                                     CANDLE_DTYPE_Q8_0};
#define N_TYPES (int)(sizeof types / sizeof types[0])

/* n rows of k values: mostly in [-1, 1), with a few large ones so that the
 * block scales differ widely (as in real activations). */
static float *rand_rows(int64_t n, int64_t k, uint64_t seed) {
    float *v = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) {
        v[i] = (float)mt_uniform(&seed, -1, 1);
        if (i % 37 == 5) v[i] *= 30.0f;
    }
    return v;
}

/* Every weight at -1 (the largest code: 15, q5 31) and the activation rows
 * at +1 and -1 (codes +-127): the largest 16-bit partial sums the kernels
 * form, which wrong run lengths would saturate. */
static void fill_extreme(float *wf, int64_t nw, float *xf, int64_t M, int64_t K) {
    for (int64_t i = 0; i < nw; i++) wf[i] = -1.0f;
    for (int64_t i = 0; i < M * K; i++) xf[i] = (i / K) % 2 ? -1.0f : 1.0f;
}

/* cdl_qgemm_rows over M rows against cdl_gemv_rows row by row. */
static void check_rows(candle_dtype t, int64_t M, int64_t N, int64_t K, bool extreme) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    size_t xb = cdl_gemv_x_bytes(t, K);
    if (!xb || !cdl_qgemm_has_fast(t)) return;
    float *wf = rand_rows(N, K, (uint64_t)(N * 13 + K)), *xf = rand_rows(M, K, (uint64_t)(M * 5 + K));
    if (extreme) fill_extreme(wf, N * K, xf, M, K);
    size_t ws, xs;
    char *w = mt_quantize_rows(t, wf, N, K, &ws), *x = mt_quantize_rows(wt->vec_dot_type, xf, M, K, &xs);
    void *scratch = aligned_alloc(64, (cdl_qgemm_scratch_bytes(t, K) + 63) & ~(size_t)63);
    void *xv = aligned_alloc(64, xb);
    float *c = malloc(sizeof(float) * (size_t)(M * N)), *want = malloc(sizeof(float) * (size_t)N);
    cdl_qgemm_rows(t, K, M, N, w, ws, x, xs, c, N, scratch);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++) {
        cdl_gemv_prep(t, K, xf + m * K, xv);
        cdl_gemv_rows(t, K, N, w, ws, xv, want);
        for (int64_t n = 0; n < N && !bad; n++)
            if (memcmp(&c[m * N + n], &want[n], sizeof(float)) != 0) {
                CHECK_MSG(0, "%s M %lld N %lld K %lld%s: c[%lld][%lld] = %.9g, gemv %.9g", wt->name, (long long)M,
                          (long long)N, (long long)K, extreme ? " (extreme codes)" : "", (long long)m,
                          (long long)n, c[m * N + n], want[n]);
                bad = 1;
            }
    }
    CHECK(!bad);
    free(wf), free(xf), free(w), free(x), free(scratch), free(xv), free(c), free(want);
}

static void test_rows(void) {
    /* K: tail blocks only, one group of 8, a group and a tail, SmolLM2's
     * 576 (2 groups, 2 tail blocks) and 1536, a long row */
    static const int64_t Ks[] = {32, 96, 256, 288, 576, 1536, 2048 + 224};
    /* 13, 16, 32: the VNNI direct kernel where the CPU has it */
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 9, 17, 13, 16, 32};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int k = 0; k < 7; k++)
            for (int m = 0; m < 12; m++) check_rows(types[ti], Ms[m], m % 2 ? 19 : 8, Ks[k], false);
    /* the extreme codes: exact sums K * 15 * 127 (q5: 31), sign by row */
    for (int ti = 0; ti < N_TYPES; ti++) {
        check_rows(types[ti], 5, 9, 288, true);
        check_rows(types[ti], 2, 8, 64, true);
        check_rows(types[ti], 16, 7, 288, true);
    }
}

#if defined(__x86_64__) || defined(_M_X64)
#include "backend/cpu/quant/x86/quant-x86-impl.h"

/* The AVX512-VNNI panel kernels against the AVX2 ones on the same packed
 * panels, every type with panels (the K types too): the integer block sums
 * are exact in both, so the bits must match. Panels of nn < 8 rows, M
 * with every 1-4 row tail, activation rows off the usual 64-byte
 * alignment (4-byte aligned only), random and extreme codes. */
static const candle_dtype panel_types[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0, CANDLE_DTYPE_Q5_1,
                                           CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q6_K};

/* One case's operands: weights [n, K] and activations [M, K], random (or
 * the extreme codes) from the two seeds, quantized; the activation rows
 * copied xs = row bytes + pad apart from x + 4, so 4-byte aligned only (the
 * blocks' own alignment: q8_K's float d). */
typedef struct qcase {
    float *wf, *xf;
    char *w, *x0, *x; /* x: the copied rows begin at x + 4 */
    size_t ws, xs;
} qcase;

static qcase make_case(candle_dtype t, int64_t M, int64_t n, int64_t K, bool extreme, uint64_t seed_w,
                       uint64_t seed_x, size_t pad) {
    qcase q;
    q.wf = rand_rows(n, K, seed_w);
    q.xf = rand_rows(M, K, seed_x);
    if (extreme) fill_extreme(q.wf, n * K, q.xf, M, K);
    size_t xs0;
    q.w = mt_quantize_rows(t, q.wf, n, K, &q.ws);
    q.x0 = mt_quantize_rows(cpu_dtype(t)->vec_dot_type, q.xf, M, K, &xs0);
    q.xs = xs0 + pad;
    q.x = malloc(q.xs * (size_t)M + 4);
    for (int64_t m = 0; m < M; m++) memcpy(q.x + 4 + (size_t)m * q.xs, q.x0 + (size_t)m * xs0, xs0);
    return q;
}

static void free_case(qcase *q) { free(q->wf), free(q->xf), free(q->w), free(q->x0), free(q->x); }

static void check_vnni(candle_dtype t, int64_t M, int nn, int64_t K, bool extreme) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    qcase q = make_case(t, M, nn, K, extreme, (uint64_t)(nn * 17 + K), (uint64_t)(M * 7 + K + 1), 4);
    const char *w = q.w, *x = q.x;
    size_t ws = q.ws, xs = q.xs;
    void *p = aligned_alloc(64, (cdl_qgemm_panel_bytes_avx2(t, K) + 63) & ~(size_t)63);
    size_t ab = cdl_qgemm_aux_bytes_avx2(t, K);
    void *aux = ab ? malloc(ab * (size_t)M) : NULL;
    float *a = malloc(sizeof(float) * (size_t)(M * 9)), *b = malloc(sizeof(float) * (size_t)(M * 9));
    for (int64_t i = 0; i < M * 9; i++) a[i] = b[i] = -7.0f;
    cdl_qgemm_pack_avx2(t, K, nn, w, ws, p);
    cdl_qgemm_prep_avx2(t, K, M, x + 4, xs, aux);
    cdl_qgemm_panel_rows_avx2(t, K, nn, p, x + 4, xs, aux, M, a, 9);
    cdl_qgemm_panel_rows_vnni(t, K, nn, p, x + 4, xs, aux, M, b, 9);
    int bad = 0;
    for (int64_t i = 0; i < M * 9 && !bad; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 || (i % 9 >= nn && a[i] != -7.0f)) {
            CHECK_MSG(0, "%s M %lld nn %d K %lld%s: c[%lld][%lld] = %.9g VNNI, %.9g AVX2", wt->name, (long long)M, nn,
                      (long long)K, extreme ? " (extreme codes)" : "", (long long)(i / 9), (long long)(i % 9), b[i],
                      a[i]);
            bad = 1;
        }
    CHECK(!bad);
    free_case(&q), free(p), free(aux), free(a), free(b);
}

/* The 16-row VNNI kernels (two panels at once) against the AVX2 kernel on
 * each panel: nn2 rows in the second panel (1..8). */
static void check_pairs(candle_dtype t, int64_t M, int nn2, int64_t K, bool extreme) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    int nn = 8 + nn2;
    qcase q = make_case(t, M, nn, K, extreme, (uint64_t)(nn * 19 + K), (uint64_t)(M * 11 + K + 3), 12);
    const char *w = q.w, *x = q.x;
    size_t ws = q.ws, xs = q.xs;
    size_t pb = cdl_qgemm_panel_bytes_avx2(t, K), ab = cdl_qgemm_aux_bytes_avx2(t, K);
    char *p = aligned_alloc(64, (2 * pb + 63) & ~(size_t)63);
    void *aux = ab ? malloc(ab * (size_t)M) : NULL;
    const int64_t ldc = 17;
    float *a = malloc(sizeof(float) * (size_t)(M * ldc)), *b = malloc(sizeof(float) * (size_t)(M * ldc));
    for (int64_t i = 0; i < M * ldc; i++) a[i] = b[i] = -7.0f;
    cdl_qgemm_pack_avx2(t, K, 8, w, ws, p);
    cdl_qgemm_pack_avx2(t, K, nn2, w + 8 * ws, ws, p + pb);
    cdl_qgemm_prep_avx2(t, K, M, x + 4, xs, aux);
    cdl_qgemm_panel_rows_avx2(t, K, 8, p, x + 4, xs, aux, M, a, ldc);
    cdl_qgemm_panel_rows_avx2(t, K, nn2, p + pb, x + 4, xs, aux, M, a + 8, ldc);
    cdl_qgemm_pair_rows_vnni(t, K, nn, p, x + 4, xs, aux, M, b, ldc);
    int bad = 0;
    for (int64_t i = 0; i < M * ldc && !bad; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 || (i % ldc >= nn && b[i] != -7.0f)) {
            CHECK_MSG(0, "%s pairs M %lld nn %d K %lld%s: c[%lld][%lld] = %.9g VNNI, %.9g AVX2", wt->name,
                      (long long)M, nn, (long long)K, extreme ? " (extreme codes)" : "", (long long)(i / ldc),
                      (long long)(i % ldc), b[i], a[i]);
            bad = 1;
        }
    CHECK(!bad);
    free_case(&q), free(p), free(aux), free(a), free(b);
}

static void test_vnni(void) {
    if (!cdl_quant_uses_vnni()) {
        test_skip("test_qgemm_order", "no AVX512-VNNI kernels in use (none on this CPU, or the no-VNNI pass): VNNI checks");
        return;
    }
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 13};
    static const int nns[] = {8, 1, 5};
    for (int ti = 0; ti < (int)(sizeof panel_types / sizeof panel_types[0]); ti++) {
        candle_dtype t = panel_types[ti];
        bool kq = cpu_dtype(t)->block_size == 256;
        const int64_t Ks[] = {kq ? 256 : 32, kq ? 512 : 288, kq ? 2048 : 2048 + 224};
        for (int k = 0; k < 3; k++)
            for (int m = 0; m < 8; m++) check_vnni(t, Ms[m], nns[(m + k) % 3], Ks[k], false);
        check_vnni(t, 5, 8, kq ? 512 : 288, true);
        check_vnni(t, 4, 3, kq ? 256 : 64, true);
        if (!cdl_qgemm_has_pairs_vnni(t)) continue;
        for (int k = 0; k < 3; k++)
            for (int m = 0; m < 8; m++) check_pairs(t, Ms[m], 1 + (m + 3 * k) % 8, Ks[k], false);
        check_pairs(t, 5, 8, kq ? 512 : 288, true);
        check_pairs(t, 3, 2, kq ? 256 : 64, true);
    }
}

/* The direct kernel (no panels: activation rows in the lanes, weight blocks
 * read in place) against cdl_gemv_rows, called directly for every M
 * (partial 16-row tiles and several tiles), N not a multiple of its 6-row
 * pass, activation rows 4-byte aligned only; the output's other columns
 * untouched. */
static void check_direct(candle_dtype t, int64_t M, int64_t N, int64_t K, bool extreme) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    qcase q = make_case(t, M, N, K, extreme, (uint64_t)(N * 23 + K), (uint64_t)(M * 3 + K + 5), 4);
    const char *w = q.w, *x = q.x;
    const float *xf = q.xf;
    size_t ws = q.ws, xs = q.xs;
    void *scratch = malloc(cdl_qgemm_direct_bytes_vnni(t, K, M));
    size_t xb = cdl_gemv_x_bytes(t, K);
    void *xv = aligned_alloc(64, (xb + 63) & ~(size_t)63);
    const int64_t ldc = N + 3;
    float *c = malloc(sizeof(float) * (size_t)(M * ldc)), *want = malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < M * ldc; i++) c[i] = -7.0f;
    cdl_qgemm_direct_vnni(t, K, M, N, w, ws, x + 4, xs, c, ldc, scratch);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++) {
        cdl_gemv_prep(t, K, xf + m * K, xv);
        cdl_gemv_rows(t, K, N, w, ws, xv, want);
        for (int64_t n = 0; n < ldc && !bad; n++)
            if (n < N ? memcmp(&c[m * ldc + n], &want[n], sizeof(float)) != 0 : c[m * ldc + n] != -7.0f) {
                CHECK_MSG(0, "%s direct M %lld N %lld K %lld%s: c[%lld][%lld] = %.9g, gemv %.9g", wt->name,
                          (long long)M, (long long)N, (long long)K, extreme ? " (extreme codes)" : "", (long long)m,
                          (long long)n, c[m * ldc + n], n < N ? want[n] : -7.0f);
                bad = 1;
            }
    }
    CHECK(!bad);
    free_case(&q), free(scratch), free(xv), free(c), free(want);
}

static void test_direct(void) {
    if (!cdl_quant_uses_vnni()) {
        test_skip("test_qgemm_order", "no AVX512-VNNI kernels in use (none on this CPU, or the no-VNNI pass): direct checks");
        return;
    }
    static const candle_dtype dtypes[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q8_0};
    static const int64_t Ks[] = {32, 224, 256, 576, 1536, 2048 + 224};
    for (int ti = 0; ti < 3; ti++) {
        CHECK(cdl_qgemm_has_direct_vnni(dtypes[ti]));
        for (int64_t M = 1; M <= 20; M++) check_direct(dtypes[ti], M, 1 + (M * 7) % 17, Ks[M % 6], false);
        check_direct(dtypes[ti], 33, 13, 576, false);
        check_direct(dtypes[ti], 64, 12, 288, false);
        check_direct(dtypes[ti], 16, 6, 1536, false);
        check_direct(dtypes[ti], 16, 11, 288, true);
        check_direct(dtypes[ti], 7, 5, 64, true);
    }
    CHECK(!cdl_qgemm_has_direct_vnni(CANDLE_DTYPE_Q5_0) && !cdl_qgemm_has_direct_vnni(CANDLE_DTYPE_Q4_K));
}

/* The few-row kernels (kquants-impl.h, gemv-rows-impl.h) through
 * cdl_qgemm_rows against cdl_gemv_rows, for every M up to their limit: each
 * row group, activation rows 4-byte aligned only, the output's other columns
 * untouched; random and extreme codes. */
static void check_few(candle_dtype t, int64_t M, int64_t N, int64_t K, bool extreme, bool steps) {
    const candle_dtype_traits *wt = cpu_dtype(t);
    qcase q = make_case(t, M, N, K, extreme, (uint64_t)(N * 29 + K), (uint64_t)(M * 13 + K + 7), 8);
    size_t xb = cdl_gemv_x_bytes(t, K);
    void *xv = aligned_alloc(64, (xb + 63) & ~(size_t)63);
    void *scratch = aligned_alloc(64, (cdl_qgemm_scratch_bytes(t, K) + 127) & ~(size_t)63);
    const int64_t ldc = N + 5;
    float *c = malloc(sizeof(float) * (size_t)(M * ldc)), *want = malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < M * ldc; i++) c[i] = -7.0f;
    (steps ? cdl_qgemm_rows_steps : cdl_qgemm_rows)(t, K, M, N, q.w, q.ws, q.x + 4, q.xs, c, ldc, scratch);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++) {
        cdl_gemv_prep(t, K, q.xf + m * K, xv);
        cdl_gemv_rows(t, K, N, q.w, q.ws, xv, want);
        for (int64_t n = 0; n < ldc && !bad; n++)
            if (n < N ? memcmp(&c[m * ldc + n], &want[n], sizeof(float)) != 0 : c[m * ldc + n] != -7.0f) {
                CHECK_MSG(0, "%s few rows%s M %lld N %lld K %lld%s: c[%lld][%lld] = %.9g, gemv %.9g", wt->name,
                          steps ? " (row steps)" : "", (long long)M, (long long)N, (long long)K,
                          extreme ? " (extreme codes)" : "", (long long)m,
                          (long long)n, c[m * ldc + n], n < N ? want[n] : -7.0f);
                bad = 1;
            }
    }
    CHECK(!bad);
    free_case(&q), free(xv), free(scratch), free(c), free(want);
}

static void test_few(void) {
    static const candle_dtype ftypes[] = {CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_Q6_K,
                                          CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1, CANDLE_DTYPE_Q5_0,
                                          CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_Z128};
    static const int64_t k_Ks[] = {256, 512, 1536, 2304}, Ks[] = {32, 288, 1536, 2048 + 224},
                         z_Ks[] = {128, 384, 1536, 2048 + 128};
    int ran = 0;
    for (int ti = 0; ti < (int)(sizeof ftypes / sizeof ftypes[0]); ti++) {
        candle_dtype t = ftypes[ti];
        bool kq = cpu_dtype(t)->block_size == 256, zq = t == CANDLE_DTYPE_Q4_Z128;
        const int64_t *k = kq ? k_Ks : zq ? z_Ks : Ks;
        int64_t most = cdl_qgemm_few_rows(t, k[3]);
        if (!most) continue;
        ran = 1;
        /* every M up to the limit; the nibble types' few-row kernels take
         * long rows only (the others: short rows too) */
        for (int64_t M = 1; M <= most; M++) {
            int64_t K = cdl_qgemm_few_rows(t, k[M % 4]) >= M ? k[M % 4] : k[3];
            check_few(t, M, 1 + (M * 5) % 11, K, false, false);
        }
        check_few(t, most, 3, k[3], true, false);
        check_few(t, 3, 2, kq ? 256 : zq ? 1152 : 1056, true, false);
        /* a step verifying drafted tokens: the K types' few rows past the VNNI
         * limits (cdl_qgemm_few_rows_steps) */
        int64_t steps = cdl_qgemm_few_rows_steps(t, k[3]);
        for (int64_t M = most + 1; M <= steps; M++) check_few(t, M, 1 + (M * 3) % 7, k[3], M == steps, true);
    }
    if (!ran) test_skip("test_qgemm_order", "no few-row kernels on this CPU (they need AVX2)");
}
#else
static void test_vnni(void) {}
static void test_direct(void) {}
static void test_few(void) {}
#endif

/* x [M, K] times w^T through candle_matmul: row r's outputs with all M rows
 * against x's row r alone. */
static void check_matmul(candle_ctx *ctx, candle_dtype t, int64_t M, int64_t N, int64_t K, unsigned flags) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    float *wf = rand_rows(N, K, (uint64_t)(N + 3)), *xf = rand_rows(M, K, (uint64_t)(M + 29));
    int64_t wsh[2] = {N, K}, xsh[2] = {M, K}, one[2] = {1, K};
    candle_tensor *w = candle_tensor_from_f32(ctx, t, 2, wsh, wf);
    candle_tensor *wt = candle_transpose(ctx, w, 0, 1);
    candle_tensor *all = cdl_matmul_ex(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, xsh, xf), wt, NULL, flags);
    CHECK_MSG(all != NULL, "%s matmul: %s", cpu_dtype(t)->name, candle_errmsg(ctx));
    int bad = !all;
    for (int64_t r = 0; r < M && !bad; r++) {
        candle_tensor *y = candle_matmul(ctx, candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, one, xf + r * K), wt);
        if (!y) {
            CHECK_MSG(0, "%s matmul: %s", cpu_dtype(t)->name, candle_errmsg(ctx));
            break;
        }
        const float *a = (const float *)tensor_ptr(all) + r * N, *b = (const float *)tensor_ptr(y);
        for (int64_t n = 0; n < N && !bad; n++)
            if (memcmp(&a[n], &b[n], sizeof(float)) != 0) {
                CHECK_MSG(0, "%s M %lld N %lld K %lld: row %lld col %lld: %.9g among %lld rows, %.9g alone",
                          cpu_dtype(t)->name, (long long)M, (long long)N, (long long)K, (long long)r,
                          (long long)n, a[n], (long long)M, b[n]);
                bad = 1;
            }
    }
    free(wf), free(xf);
    candle_ctx_reset(ctx, mark);
}

static void test_matmul(int threads) {
    candle_ctx *ctx = mt_ctx_threads(true, threads);
    for (int ti = 0; ti < N_TYPES; ti++) {
        if (!cdl_qgemm_has_fast(types[ti]) || !cdl_gemv_x_bytes(types[ti], 576)) continue;
        check_matmul(ctx, types[ti], 2, 70, 576, 0);
        check_matmul(ctx, types[ti], 7, 45, 576, 0);
        check_matmul(ctx, types[ti], 16, 33, 1536, 0);
        check_matmul(ctx, types[ti], 14, 150, 576, 0);
    }
    /* the K types up to their few-row limit (more rows take the panels,
     * whose bits differ from the matrix-vector kernels') */
    static const candle_dtype ktypes[] = {CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_Q6_K};
    for (int ti = 0; ti < 3; ti++) {
        int64_t most = cdl_qgemm_few_rows(ktypes[ti], 1536);
        if (!most || !cdl_gemv_x_bytes(ktypes[ti], 512)) continue;
        check_matmul(ctx, ktypes[ti], 2, 70, 512, 0);
        check_matmul(ctx, ktypes[ti], most, 45, 1536, 0);
        check_matmul(ctx, ktypes[ti], 5, 150, 768, 0);
        /* a verification step's product (CDL_MM_ROW_STEPS): up to 12 rows on VNNI too */
        int64_t steps = cdl_qgemm_few_rows_steps(ktypes[ti], 1536);
        if (steps > most) check_matmul(ctx, ktypes[ti], steps, 45, 1536, CDL_MM_ROW_STEPS);
    }
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    test_rows();
    test_vnni();
    test_direct();
    test_few();
    test_matmul(1);
    test_matmul(2);
}

int main(void) {
    cpu_set_always_parallel(true);
    return vnni_run_passes(run_checks, "test_qgemm_order");
}
