/* Flash attention runs in O(N) memory: causal grouped-query prefill at a
 * sequence length where one [S, S] f32 score matrix per head would not fit
 * under the limits this test sets, neither the context's mem_limit (a few
 * MiB above q/k/v/out) nor, in a plain build, the process address space
 * (RLIMIT_AS at the current virtual size plus a margin). The materialised
 * chain (q.k^T, scale, causal mask, softmax, .v) fails under the same
 * mem_limit with an out-of-memory error, which shows the limit bites.
 * Sampled rows are checked against a double-precision computation. */
#include <sys/resource.h>
#include <unistd.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* Shorter in unoptimised and sanitizer builds so the test stays a few
 * seconds: [Hq, S, S] f32 scores are 1 GiB at 8192, 256 MiB at 4096 (past the
 * address-space margin) and 64 MiB at 2048 (sanitizers: no address-space
 * cap, still ten times the context's mem_limit). */
#if SANITIZED
#define SEQ 2048
#elif defined(NDEBUG)
#define SEQ 8192
#else
#define SEQ 4096
#endif

enum { B = 1, HQ = 4, HKV = 2, D = 64 };
#define AS_MARGIN ((size_t)160 << 20)
#define CTX_MARGIN ((size_t)4 << 20)

/* Cap the address space at what is mapped now plus a margin; sanitizers
 * reserve terabytes of shadow, so there the cap is skipped. */
static void cap_address_space(void) {
    if (SANITIZED) {
        printf("test_flash_memory: sanitizer build, RLIMIT_AS cap skipped (mem_limit still applies)\n");
        return;
    }
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    int got = f ? fscanf(f, "%lu", &pages) : 0;
    if (f) fclose(f);
    CHECK(got == 1 && pages > 0);
    size_t now = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
    struct rlimit rl = {.rlim_cur = now + AS_MARGIN, .rlim_max = now + AS_MARGIN};
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    printf("test_flash_memory: RLIMIT_AS %zu MiB (mapped %zu MiB + %zu MiB)\n", (now + AS_MARGIN) >> 20,
           now >> 20, AS_MARGIN >> 20);
}

/* One output row of causal attention, in double precision. */
static void ref_row(const float *q, const float *k, const float *v, int64_t h, int64_t i, double *out) {
    int64_t hk = h / (HQ / HKV);
    const float *qr = q + (h * SEQ + i) * D;
    double scale = 1.0 / sqrt((double)D), mx = -INFINITY, sum = 0;
    double *s = malloc(sizeof(double) * (size_t)(i + 1));
    for (int64_t j = 0; j <= i; j++) {
        const float *kr = k + (hk * SEQ + j) * D;
        double dot = 0;
        for (int e = 0; e < D; e++) dot += (double)qr[e] * kr[e];
        s[j] = dot * scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    for (int e = 0; e < D; e++) out[e] = 0;
    for (int64_t j = 0; j <= i; j++) {
        double p = exp(s[j] - mx);
        sum += p;
        for (int e = 0; e < D; e++) out[e] += p * v[(hk * SEQ + j) * D + e];
    }
    for (int e = 0; e < D; e++) out[e] /= sum;
    free(s);
}

static void check_rows(const float *q, const float *k, const float *v, const float *o) {
    static const int64_t heads[] = {0, 3}; /* kv heads 0 and 1 */
    static const int64_t rows[] = {0, SEQ / 2, SEQ - 1};
    double ref[D];
    for (int a = 0; a < 2; a++)
        for (int r = 0; r < 3; r++) {
            ref_row(q, k, v, heads[a], rows[r], ref);
            double e = test_nmse(o + (heads[a] * SEQ + rows[r]) * D, ref, D);
            CHECK_MSG(e < 1e-10, "head %lld row %lld: nmse %g", (long long)heads[a], (long long)rows[r], e);
        }
}

/* Additive causal mask [S, S]: -inf where key j > query i. */
static candle_tensor *causal_mask(candle_ctx *ctx) {
    int64_t col[2] = {SEQ, 1}, row[2] = {1, SEQ}, full[2] = {SEQ, SEQ};
    candle_tensor *pos = candle_arange(ctx, CANDLE_DTYPE_F32, 0, SEQ, 1);
    candle_tensor *later = candle_gt(ctx, candle_reshape(ctx, pos, 2, row), candle_reshape(ctx, pos, 2, col));
    return candle_where(ctx, later, candle_full(ctx, CANDLE_DTYPE_F32, 2, full, -INFINITY),
                        candle_zeros(ctx, CANDLE_DTYPE_F32, 2, full));
}

/* q [1, Hq, S, D] seen as [1, Hkv, G*S, D] so each kv head meets its group of
 * query heads in one batched matmul; a failed op makes the rest NULL. */
static candle_tensor *materialised(candle_ctx *ctx, candle_tensor *q, candle_tensor *k, candle_tensor *v) {
    int64_t qs[4] = {B, HKV, (HQ / HKV) * SEQ, D}, ss[4] = {B, HQ, SEQ, SEQ};
    candle_tensor *s = candle_matmul(ctx, candle_reshape(ctx, q, 4, qs), candle_transpose(ctx, k, 2, 3));
    s = candle_scale(ctx, candle_reshape(ctx, s, 4, ss), 1.0 / sqrt((double)D));
    s = candle_softmax(ctx, candle_add(ctx, s, causal_mask(ctx)), -1);
    int64_t gs[4] = {B, HKV, (HQ / HKV) * SEQ, SEQ};
    return candle_reshape(ctx, candle_matmul(ctx, candle_reshape(ctx, s, 4, gs), v), 4, qs);
}

int main(void) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    size_t qo_bytes = (size_t)B * HQ * SEQ * D * sizeof(float), kv_bytes = (size_t)B * HKV * SEQ * D * sizeof(float);
    p.mem_limit = 2 * qo_bytes + 2 * kv_bytes + CTX_MARGIN;
    candle_ctx *ctx = NULL;
    CHECK_OK(ctx, candle_ctx_init(&ctx, &p));
    if (!ctx) return test_done("test_flash_memory");

    int64_t qshape[4] = {B, HQ, SEQ, D}, kvshape[4] = {B, HKV, SEQ, D};
    candle_tensor *q = candle_rand(ctx, CANDLE_DTYPE_F32, 4, qshape, 1, -1, 1);
    candle_tensor *k = candle_rand(ctx, CANDLE_DTYPE_F32, 4, kvshape, 2, -1, 1);
    candle_tensor *v = candle_rand(ctx, CANDLE_DTYPE_F32, 4, kvshape, 3, -1, 1);
    CHECK(q && k && v);
    cap_address_space();

    candle_tensor *o = candle_attention(ctx, q, k, v, NULL, 0, true);
    CHECK_MSG(o != NULL, "%s", candle_errmsg(ctx));
    if (o) {
        const float *od = candle_tensor_data(o);
        size_t n = (size_t)candle_tensor_numel(o), bad = 0;
        for (size_t i = 0; i < n; i++) bad += !isfinite(od[i]);
        CHECK_MSG(bad == 0, "%zu non-finite outputs", bad);
        check_rows(candle_tensor_data(q), candle_tensor_data(k), candle_tensor_data(v), od);
        CHECK_MSG(candle_ctx_mem_peak(ctx) <= p.mem_limit, "peak %zu", candle_ctx_mem_peak(ctx));
    }

    candle_tensor *m = materialised(ctx, q, k, v);
    CHECK(m == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_errmsg(ctx), "out of memory");
    candle_ctx_free(ctx);
    return test_done("test_flash_memory");
}
