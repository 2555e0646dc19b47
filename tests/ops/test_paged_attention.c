/* Paged attention against a naive double-precision reference: rows of three
 * sequences with scattered block tables (decode rows, two rows of one
 * sequence that see each other's new keys, a first position), grouped-query
 * heads, Dv != D, sliding windows, every input layout, f32/f16/bf16, eager
 * and lazy contexts; the caches hold the new rows afterwards and nothing
 * else changes. q8_0 and q4_0 caches (a quantized pool: D 64, Dv 32)
 * against the reference on the values the blocks hold (the AVX-512 table
 * scores and sums q8_0 rows as they are stored, the others convert them:
 * test_paged_attention_isa runs this on the AVX2 and scalar tables too).
 * Errors: dtypes, shapes, block size, block-type rows that are not whole
 * contiguous blocks, and table entries outside the cache (reported when the
 * node runs). */
#include "backend/cpu/attention-impl.h"
#include "mathtest.h"

#define HQ 4
#define HKV 2
#define D 8
#define DV 6
#define BLOCK 4
#define NBLK 6
#define P (NBLK * BLOCK)
#define N 4 /* query rows */
#define T 3 /* table width in blocks */

static const candle_dtype kDtypes[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16};

/* Head sizes of the case running: D and DV, or multiples of 32 for the
 * block types. */
static int64_t g_d = D, g_dv = DV;

/* Row i: position, then its sequence's blocks (0 past its end). Sequence A
 * (blocks 4, 1, 5) has rows at 9 and 10, B (block 2) its first position,
 * C (blocks 0, 3) position 7, the last row of its second block. */
static const int32_t kTable[N][1 + T] = {{9, 4, 1, 5}, {10, 4, 1, 5}, {0, 2, 0, 0}, {7, 0, 3, 0}};

static int64_t cache_row(int64_t i, int64_t j) {
    return (int64_t)kTable[i][1 + j / BLOCK] * BLOCK + j % BLOCK;
}

/* The caches after the stores, then the output [N, HQ, g_dv]. */
static void ref_paged(const double *q, const double *k, const double *v, double *kc, double *vc,
                      int64_t window, double *out) {
    for (int64_t i = 0; i < N; i++) {
        int64_t r = cache_row(i, kTable[i][0]);
        for (int64_t h = 0; h < HKV; h++) {
            for (int64_t e = 0; e < g_d; e++) kc[(r * HKV + h) * g_d + e] = k[(i * HKV + h) * g_d + e];
            for (int64_t e = 0; e < g_dv; e++) vc[(r * HKV + h) * g_dv + e] = v[(i * HKV + h) * g_dv + e];
        }
    }
    double s[T * BLOCK];
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < HQ; h++) {
            int64_t hk = h / (HQ / HKV), pos = kTable[i][0];
            int64_t j0 = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = j0; j <= pos; j++) {
                double dot = 0;
                for (int64_t e = 0; e < g_d; e++)
                    dot += q[(i * HQ + h) * g_d + e] * kc[(cache_row(i, j) * HKV + hk) * g_d + e];
                s[j] = dot / sqrt((double)g_d);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = j0; j <= pos; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t e = 0; e < g_dv; e++) {
                double acc = 0;
                for (int64_t j = j0; j <= pos; j++)
                    acc += s[j] * vc[(cache_row(i, j) * HKV + hk) * g_dv + e];
                out[(i * HQ + h) * g_dv + e] = acc / sum;
            }
        }
}

static candle_tensor *table(candle_ctx *ctx) {
    int64_t shape[2] = {N, 1 + T};
    return candle_tensor_from_i32(ctx, 2, shape, &kTable[0][0]);
}

/* q, k, v in dt, the caches in cdt (an f16 pool under f32 rows: the stored
 * rows rounded, as the reference's copy of the caches is; a q8_0 one: the
 * rows quantized by the cast as the kernels quantize them, a row of each
 * head at a time, and the reference run on the values the blocks hold). */
static void check_case(bool eager, candle_dtype dt, candle_dtype cdt, mt_layout lay, int64_t window) {
    candle_ctx *ctx = mt_ctx(eager);
    int64_t qs[3] = {N, HQ, g_d}, ks[3] = {N, HKV, g_d}, vs[3] = {N, HKV, g_dv};
    int64_t kcs[3] = {P, HKV, g_d}, vcs[3] = {P, HKV, g_dv};
    candle_tensor *q = mt_input(ctx, dt, 3, qs, lay, 1, -1, 1);
    candle_tensor *k = mt_input(ctx, dt, 3, ks, lay, 2, -1, 1);
    candle_tensor *v = mt_input(ctx, dt, 3, vs, lay, 3, -1, 1);
    candle_tensor *kc = mt_input(ctx, cdt, 3, kcs, MT_CONTIG, 4, -1, 1);
    candle_tensor *vc = mt_input(ctx, cdt, 3, vcs, MT_CONTIG, 5, -1, 1);
    candle_tensor *kr = candle_cast(ctx, candle_contiguous(ctx, k), cdt);
    candle_tensor *vr = candle_cast(ctx, candle_contiguous(ctx, v), cdt);
    bool cast = kr && vr && (eager || (candle_compute(ctx, kr) == CANDLE_OK && candle_compute(ctx, vr) == CANDLE_OK));
    CHECK_MSG(cast, "%s %s/%s %s: cast: %s", eager ? "eager" : "lazy", candle_dtype_name(dt), candle_dtype_name(cdt),
              mt_layout_names[lay], candle_errmsg(ctx));
    if (!cast) {
        candle_ctx_free(ctx);
        return;
    }
    double *qv = mt_values(q), *kv = mt_values(kr), *vv = mt_values(vr);
    double *kcv = mt_values(kc), *vcv = mt_values(vc), *want = malloc(sizeof(double) * N * HQ * g_dv);
    ref_paged(qv, kv, vv, kcv, vcv, window, want);
    candle_tensor *o = candle_paged_attention(ctx, q, k, v, kc, vc, table(ctx), BLOCK, window, 0);
    char what[128];
    snprintf(what, sizeof what, "%s %s %s/%s %s window %lld", cpu_attn_ops_get()->name, eager ? "eager" : "lazy",
             candle_dtype_name(dt), candle_dtype_name(cdt), mt_layout_names[lay], (long long)window);
    CHECK_MSG(o != NULL, "%s: %s", what, candle_errmsg(ctx));
    if (o && !eager) CHECK_MSG(candle_compute(ctx, o) == CANDLE_OK, "%s: %s", what, candle_errmsg(ctx));
    int64_t os[3] = {N, HQ, g_dv};
    double *got = mt_same_shape(o, 3, os) ? mt_values(o) : NULL;
    CHECK_MSG(got != NULL, "%s: no output", what);
    if (got) {
        double e = mt_nmse(got, want, N * HQ * g_dv);
        CHECK_MSG(e < (mt_bound(dt) > mt_bound(cdt) ? mt_bound(dt) : mt_bound(cdt)), "%s: output nmse %g", what, e);
    }
    /* the stored rows came from k and v (rounded to the caches' dtype as
     * the cast rounds), and the reference applied the same stores to its
     * copy of the caches */
    double *kc2 = mt_values(kc), *vc2 = mt_values(vc);
    CHECK_MSG(kc2 && vc2 && mt_nmse(kc2, kcv, P * HKV * g_d) == 0 && mt_nmse(vc2, vcv, P * HKV * g_dv) == 0,
              "%s: caches differ from the reference's", what);
    free(qv), free(kv), free(vv), free(kcv), free(vcv), free(got), free(kc2), free(vc2), free(want);
    candle_ctx_free(ctx);
}

static const mt_layout kLays[] = {MT_CONTIG, MT_TRANSPOSED, MT_SLICED, MT_OFFSET};
static const int64_t kWindows[] = {0, 3, 1};

/* A quantized pool (candle serve -ctk q8_0): f32 rows (and f16 ones),
 * q8_0 or q4_0 caches, heads of whole blocks. */
static void test_blocks(void) {
    static const candle_dtype types[] = {CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q4_0};
    g_d = 64, g_dv = 32;
    for (int e = 0; e < 2; e++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++)
            for (size_t l = 0; l < sizeof kLays / sizeof *kLays; l++)
                for (size_t w = 0; w < sizeof kWindows / sizeof *kWindows; w++)
                    check_case(e == 0, CANDLE_DTYPE_F32, types[t], kLays[l], kWindows[w]);
    /* f16 rows (the reference kernel's: the fast one takes f32 rows) */
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) check_case(true, CANDLE_DTYPE_F16, types[t], MT_SLICED, 3);
    g_d = D, g_dv = DV;
}

static void test_values(void) {
    for (int e = 0; e < 2; e++)
        for (size_t d = 0; d < sizeof kDtypes / sizeof *kDtypes; d++)
            for (size_t l = 0; l < sizeof kLays / sizeof *kLays; l++)
                for (size_t w = 0; w < sizeof kWindows / sizeof *kWindows; w++)
                    check_case(e == 0, kDtypes[d], kDtypes[d], kLays[l], kWindows[w]);
    /* f32 rows over an f16 or bf16 pool (candle serve -ctk f16) */
    for (int e = 0; e < 2; e++)
        for (size_t d = 1; d < sizeof kDtypes / sizeof *kDtypes; d++)
            for (size_t l = 0; l < sizeof kLays / sizeof *kLays; l++)
                for (size_t w = 0; w < sizeof kWindows / sizeof *kWindows; w++)
                    check_case(e == 0, CANDLE_DTYPE_F32, kDtypes[d], kLays[l], kWindows[w]);
}

static void test_errors(void) {
    candle_ctx *ctx = mt_ctx(true);
    int64_t qs[3] = {N, HQ, D}, ks[3] = {N, HKV, D}, vs[3] = {N, HKV, DV};
    int64_t kcs[3] = {P, HKV, D}, vcs[3] = {P, HKV, DV}, bad[3] = {N, 3, D};
    candle_tensor *q = mt_input(ctx, CANDLE_DTYPE_F32, 3, qs, MT_CONTIG, 1, -1, 1);
    candle_tensor *k = mt_input(ctx, CANDLE_DTYPE_F32, 3, ks, MT_CONTIG, 2, -1, 1);
    candle_tensor *v = mt_input(ctx, CANDLE_DTYPE_F32, 3, vs, MT_CONTIG, 3, -1, 1);
    candle_tensor *kc = mt_input(ctx, CANDLE_DTYPE_F32, 3, kcs, MT_CONTIG, 4, -1, 1);
    candle_tensor *vc = mt_input(ctx, CANDLE_DTYPE_F32, 3, vcs, MT_CONTIG, 5, -1, 1);
    candle_tensor *k16 = mt_input(ctx, CANDLE_DTYPE_F16, 3, ks, MT_CONTIG, 2, -1, 1);
    candle_tensor *k3 = mt_input(ctx, CANDLE_DTYPE_F32, 3, bad, MT_CONTIG, 2, -1, 1);
    candle_tensor *tab = table(ctx);
    int64_t ts[2] = {N, 1 + T};
    candle_tensor *ftab = mt_input(ctx, CANDLE_DTYPE_F32, 2, ts, MT_CONTIG, 6, 0, 2);
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k16, v, kc, vc, tab, BLOCK, 0, 0), CANDLE_ERR_DTYPE,
                 "paged_attention: dtype mismatch");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, kc, vc, ftab, BLOCK, 0, 0), CANDLE_ERR_DTYPE,
                 "paged_attention: table dtype f32 (want i32)");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k3, v, kc, vc, tab, BLOCK, 0, 0), CANDLE_ERR_SHAPE,
                 "paged_attention: shape mismatch: q [4, 4, 8] k [4, 3, 8]");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, vc, kc, tab, BLOCK, 0, 0), CANDLE_ERR_SHAPE,
                 "k_cache [24, 2, 6]");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, kc, vc, tab, 5, 0, 0), CANDLE_ERR_INVALID_ARG,
                 "paged_attention: block 5 window 0 (want block > 0 dividing the cache's 24 rows");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, kc, vc, tab, BLOCK, -1, 0), CANDLE_ERR_INVALID_ARG,
                 "window -1");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, kc, vc, tab, BLOCK, 0, NAN), CANDLE_ERR_INVALID_ARG,
                 "paged_attention: invalid scale");
    /* table entries are checked when the node runs: a block id outside the
     * cache, a position past the table's blocks, a negative position */
    static const int32_t bad_tabs[3][N][1 + T] = {
        {{9, 4, 1, 5}, {10, 4, 1, 5}, {0, 2, 0, 0}, {7, 0, 6, 0}},
        {{9, 4, 1, 5}, {12, 4, 1, 5}, {0, 2, 0, 0}, {7, 0, 3, 0}},
        {{9, 4, 1, 5}, {10, 4, 1, 5}, {-1, 2, 0, 0}, {7, 0, 3, 0}}};
    static const char *const rows[3] = {"table row 3 (position 7)", "table row 1 (position 12)",
                                        "table row 2 (position -1)"};
    for (int b = 0; b < 3; b++) {
        candle_tensor *bt = candle_tensor_from_i32(ctx, 2, ts, &bad_tabs[b][0][0]);
        MT_CHECK_ERR(ctx, candle_paged_attention(ctx, q, k, v, kc, vc, bt, BLOCK, 0, 0),
                     CANDLE_ERR_INVALID_ARG, rows[b]);
    }
    CHECK(candle_paged_attention(ctx, NULL, k, v, kc, vc, tab, BLOCK, 0, 0) == NULL);
    /* q8_0 caches of whole blocks are taken; rows that are not contiguous
     * blocks (a transposed view) are refused with the reason */
    int64_t q32[3] = {N, HQ, 32}, k32[3] = {N, HKV, 32}, c32[3] = {P, HKV, 32}, ct[3] = {P, 32, 64};
    candle_tensor *qb = mt_input(ctx, CANDLE_DTYPE_F32, 3, q32, MT_CONTIG, 1, -1, 1);
    candle_tensor *kb = mt_input(ctx, CANDLE_DTYPE_F32, 3, k32, MT_CONTIG, 2, -1, 1);
    candle_tensor *kq = mt_input(ctx, CANDLE_DTYPE_Q8_0, 3, c32, MT_CONTIG, 4, -1, 1);
    candle_tensor *vq = mt_input(ctx, CANDLE_DTYPE_Q8_0, 3, c32, MT_CONTIG, 5, -1, 1);
    CHECK_MSG(candle_paged_attention(ctx, qb, kb, kb, kq, vq, tab, BLOCK, 0, 0) != NULL, "%s", candle_errmsg(ctx));
    candle_tensor *kt = candle_narrow(ctx, candle_transpose(ctx, mt_input(ctx, CANDLE_DTYPE_Q8_0, 3, ct, MT_CONTIG,
                                                                          4, -1, 1), 1, 2),
                                      1, 0, HKV);
    CHECK_MSG(kt != NULL, "%s", candle_errmsg(ctx));
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, qb, kb, kb, kt, vq, tab, BLOCK, 0, 0), CANDLE_ERR_DTYPE,
                 "paged_attention: q8_0 caches need rows of whole 32-element blocks, contiguous (row of 32)");
    MT_CHECK_ERR(ctx, candle_paged_attention(ctx, qb, kb, kb, kq, kc, tab, BLOCK, 0, 0), CANDLE_ERR_DTYPE,
                 "paged_attention: dtype mismatch");
    candle_ctx_free(ctx);
}

static void run_checks(void) {
    test_values();
    test_blocks();
    test_errors();
}

/* f32 rows go to the fast kernel; the reference is tested again alone. */
int main(void) { return mt_run_passes(run_checks, "test_paged_attention"); }
