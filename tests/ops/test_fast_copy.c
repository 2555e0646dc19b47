/* The fast copy kernel (contiguous rows: row memcpy within one plain dtype,
 * the row converters between f32 and f16/bf16) against the values written
 * by a plain loop here: copy_into a KV-cache-like slot of a larger tensor,
 * strided and broadcast sources, every plain dtype, 1 and 2 threads with the
 * split forced; a transposed source (not the kernel's layout) goes to the
 * reference and must agree too. Conversions (an f16 KV cache written from
 * f32 rows) must give the reference's bits: rounding to nearest even, ties,
 * f16 subnormals, overflow to inf; rows into a block type (q8_0, q4_0) the
 * bytes of the type's own row quantization. */
#include <math.h>
#include <string.h>

#include "backend/cpu/fast-impl.h"
#include "test.h"

static candle_ctx *new_ctx(int threads) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = true;
    p.n_threads = threads;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

static candle_tensor *iota(candle_ctx *ctx, candle_dtype t, int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 251) - 100.0f; /* exact in every dtype */
    candle_tensor *x = candle_tensor_from_f32(ctx, t, rank, shape, v);
    free(v);
    return x;
}

static double at(const candle_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
    return cdl_load_f64(t->dtype, (const char *)candle_tensor_data(t) + off);
}

/* Every element of got equals want's (same shape, any layouts). */
static void check_same(const candle_tensor *got, const candle_tensor *want, const char *what) {
    int64_t idx[CANDLE_MAX_RANK] = {0}, n = candle_tensor_numel(got), bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) {
        if (at(got, idx) != at(want, idx)) bad = i + 1;
        nd_next(got->rank, got->shape, idx);
    }
    CHECK_MSG(!bad, "%s %s: element %lld differs", what, candle_dtype_name(got->dtype), (long long)bad - 1);
}

static void check_dtype(candle_ctx *ctx, candle_dtype t) {
    /* a [8, 3, 16] cache, rows 5..6 written from [2, 3, 16] */
    int64_t cs[3] = {8, 3, 16}, ss[3] = {2, 3, 16};
    candle_tensor *cache = iota(ctx, t, 3, cs), *src = iota(ctx, t, 3, ss);
    candle_tensor *slot = candle_narrow(ctx, cache, 0, 5, 2);
    candle_tensor *w = candle_copy_into(ctx, slot, src);
    CHECK(w && cpu_fast_kernel_for(w) == &cpu_fast_copy);
    if (w) check_same(slot, src, "copy_into");
    /* a narrowed middle dim: outer strides of dst and src both uneven */
    candle_tensor *mid = candle_narrow(ctx, cache, 1, 1, 2);
    candle_tensor *src2 = candle_narrow(ctx, iota(ctx, t, 3, cs), 1, 0, 2);
    candle_tensor *w2 = candle_copy_into(ctx, mid, src2);
    CHECK(w2 && cpu_fast_kernel_for(w2) == &cpu_fast_copy);
    if (w2) check_same(mid, src2, "narrowed");
    /* a broadcast source (outer stride 0) */
    candle_tensor *row = iota(ctx, t, 3, (int64_t[]){1, 3, 16});
    candle_tensor *bc = candle_expand(ctx, row, 3, ss);
    candle_tensor *w3 = candle_copy_into(ctx, slot, bc);
    CHECK(w3 && cpu_fast_kernel_for(w3) == &cpu_fast_copy);
    if (w3) check_same(slot, bc, "broadcast");
    /* transposed: the last dim is strided, so the reference copies it */
    candle_tensor *tr = candle_transpose(ctx, iota(ctx, t, 2, (int64_t[]){5, 7}), 0, 1);
    candle_tensor *c = candle_contiguous(ctx, tr);
    CHECK(c && cpu_fast_kernel_for(c) != &cpu_fast_copy);
    if (c) check_same(c, tr, "transposed");
    /* rank 1 */
    candle_tensor *v = iota(ctx, t, 1, (int64_t[]){33});
    candle_tensor *dst1 = iota(ctx, t, 1, (int64_t[]){40});
    candle_tensor *part = candle_narrow(ctx, dst1, 0, 7, 33);
    candle_tensor *w4 = candle_copy_into(ctx, part, v);
    CHECK(w4 && cpu_fast_kernel_for(w4) == &cpu_fast_copy);
    if (w4) check_same(part, v, "rank 1");
}

/* Values that f16/bf16 must round: ties both ways, subnormal f16, past
 * f16's range, signed zeros, infinities. */
static float tricky(int64_t i) {
    static const float special[] = {0.0f, -0.0f, 65504.0f, 65520.0f, -70000.0f, 1e-5f, -3e-8f, 6.1e-5f,
                                    1.0009765625f, 1.00048828125f, 1.00146484375f, (float)INFINITY,
                                    -(float)INFINITY, 1.00390625f, 1.01171875f, 3.3895e38f};
    if (i % 3 == 0) return special[(i / 3) % 16];
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    return (float)((double)(h >> 40) / (double)(1 << 24) - 0.5) * (float)(1 << (h % 19));
}

/* copy_into a [8, 3, 16] cache of dtype `to` from [2, 3, 16] of `from`:
 * the fast kernel, each element the reference's store of the source value. */
static void check_convert(candle_ctx *ctx, candle_dtype from, candle_dtype to) {
    int64_t cs[3] = {8, 3, 16}, ss[3] = {2, 3, 16}, n = 2 * 3 * 16;
    float v[96];
    for (int64_t i = 0; i < n; i++) v[i] = tricky(i);
    candle_tensor *cache = iota(ctx, to, 3, cs), *src = candle_tensor_from_f32(ctx, from, 3, ss, v);
    candle_tensor *slot = candle_narrow(ctx, cache, 0, 5, 2);
    candle_tensor *w = candle_copy_into(ctx, slot, src);
    CHECK(w && cpu_fast_kernel_for(w) == &cpu_fast_copy);
    if (!w) return;
    size_t es = cpu_dtype(to)->type_size, fs = cpu_dtype(from)->type_size;
    const char *got = (const char *)candle_tensor_data(cache) + 5 * 3 * 16 * es;
    const char *in = (const char *)candle_tensor_data(src);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        char want[8];
        cdl_store_f64(to, want, cdl_load_f64(from, in + i * fs));
        if (memcmp(got + i * es, want, es)) bad = i;
    }
    CHECK_MSG(bad < 0, "copy %s -> %s: element %lld differs from the reference", candle_dtype_name(from),
              candle_dtype_name(to), (long long)bad);
}

/* copy_into a [8, 3, 64] cache of a block type from [2, 3, 64] f32 (a
 * quantized KV cache's write): the fast kernel, each row the bytes of the
 * type's own row quantization, as the reference writes them. */
static void check_blocks(candle_ctx *ctx, candle_dtype to) {
    const candle_dtype_traits *tr = cpu_dtype(to);
    int64_t cs[3] = {8, 3, 64}, ss[3] = {2, 3, 64}, n = 2 * 3 * 64;
    float v[384];
    for (int64_t i = 0; i < n; i++) v[i] = tricky(i + 1) * (i % 2 ? 1e-3f : 1.0f);
    candle_tensor *f = candle_zeros(ctx, CANDLE_DTYPE_F32, 3, cs);
    candle_tensor *cache = f ? candle_cast(ctx, f, to) : NULL;
    candle_tensor *src = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 3, ss, v);
    candle_tensor *slot = cache ? candle_narrow(ctx, cache, 0, 5, 2) : NULL;
    candle_tensor *w = slot && src ? candle_copy_into(ctx, slot, src) : NULL;
    CHECK_MSG(w && cpu_fast_kernel_for(w) == &cpu_fast_copy, "copy f32 -> %s: %s", tr->name, candle_errmsg(ctx));
    if (!w) return;
    size_t rb = candle_dtype_row_size(to, 64);
    const char *got = (const char *)candle_tensor_data(cache) + 5 * 3 * rb;
    char want[64 * 4];
    bool same = true;
    for (int64_t r = 0; r < 6 && same; r++) {
        tr->from_f32(v + r * 64, want, 64);
        same = memcmp(got + r * rb, want, rb) == 0;
    }
    CHECK_MSG(same, "copy f32 -> %s: a row differs from the type's own quantization", tr->name);
}

int main(void) {
    const candle_dtype types[] = {CANDLE_DTYPE_F32, CANDLE_DTYPE_F16, CANDLE_DTYPE_BF16, CANDLE_DTYPE_I32};
    for (int threads = 1; threads <= 2; threads++)
        for (int always = 0; always <= 1; always++) {
            cpu_set_always_parallel(always);
            candle_ctx *ctx = new_ctx(threads);
            for (size_t i = 0; ctx && i < sizeof types / sizeof types[0]; i++) check_dtype(ctx, types[i]);
            for (int h = 1; ctx && h <= 2; h++) {
                candle_dtype half = types[h];
                check_convert(ctx, CANDLE_DTYPE_F32, half);
                check_convert(ctx, half, CANDLE_DTYPE_F32);
            }
            if (ctx) check_blocks(ctx, CANDLE_DTYPE_Q8_0), check_blocks(ctx, CANDLE_DTYPE_Q4_0);
            candle_ctx_free(ctx);
        }
    cpu_set_always_parallel(false);
    return test_done("fast_copy");
}
