/* Error kinds and their messages: shape, dtype, device, invalid dim, rank,
 * OOM through the context's memory limit, NULL propagation, sticky first
 * error, clearing, the thread-local last error, status names. */
#include <pthread.h>

#include "test.h"

static candle_ctx *new_ctx(bool eager, size_t limit) {
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    p.mem_limit = limit;
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    return ctx;
}

static candle_tensor *zeros(candle_ctx *ctx, candle_dtype dt, int rank, const int64_t *shape) {
    candle_tensor *t = candle_tensor_new(ctx, dt, rank, shape);
    if (t) memset(candle_tensor_data(t), 0, candle_tensor_nbytes(t));
    return t;
}

static void expect(candle_ctx *ctx, candle_status s, const char *msg) {
    CHECK_MSG(candle_errcode(ctx) == s, "got %s (%s), want %s", candle_status_name(candle_errcode(ctx)),
              candle_errmsg(ctx), candle_status_name(s));
    CHECK_CONTAINS(candle_errmsg(ctx), msg);
    candle_ctx_clear_error(ctx);
    CHECK(candle_errcode(ctx) == CANDLE_OK && candle_errmsg(ctx)[0] == 0);
}

static void test_shape_dtype_dim_rank(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *a = zeros(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, 3});
    candle_tensor *b = zeros(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){4, 5});
    candle_tensor *h = zeros(ctx, CANDLE_DTYPE_F16, 2, (int64_t[]){2, 3});
    candle_tensor *i = zeros(ctx, CANDLE_DTYPE_I32, 2, (int64_t[]){2, 3});
    CHECK(candle_add(ctx, a, b) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "add: shape mismatch: lhs [2, 3] rhs [4, 5]");
    CHECK(candle_mul(ctx, b, a) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "mul: shape mismatch: lhs [4, 5] rhs [2, 3]");
    CHECK(candle_add(ctx, h, a) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "add: dtype mismatch: lhs f16 rhs f32");
    CHECK(candle_lt(ctx, a, i) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "lt: dtype mismatch: lhs f32 rhs i32");
    CHECK(candle_exp(ctx, i) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "exp: dtype i32 not supported");
    CHECK(candle_pow(ctx, i, i) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "pow: dtype i32 not supported");
    CHECK(candle_where(ctx, a, a, a) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "where: condition must be bool, got f32");
    CHECK(candle_transpose(ctx, a, 0, 5) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "transpose: dim 5 out of range for rank 2");
    CHECK(candle_squeeze(ctx, a, -3) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "squeeze: dim -3 out of range for rank 2");
    CHECK(candle_squeeze(ctx, a, 0) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "squeeze: dim 0 has size 2, not 1");
    CHECK(candle_tensor_new(ctx, CANDLE_DTYPE_F32, 7, (int64_t[]){1, 1, 1, 1, 1, 1, 1}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "tensor_new: rank 7 out of range (max 6)");
    CHECK(candle_reshape(ctx, a, 7, (int64_t[]){1, 1, 1, 1, 1, 6, 1}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "reshape: rank 7 out of range (max 6)");
    candle_tensor *r6 = candle_reshape(ctx, a, 6, (int64_t[]){1, 1, 1, 1, 2, 3});
    CHECK(r6 != NULL);
    CHECK(candle_unsqueeze(ctx, r6, 0) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "unsqueeze: rank would exceed 6");
    CHECK(candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, -1}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "tensor_new: invalid shape [2, -1]");
    CHECK(candle_tensor_new(ctx, CANDLE_DTYPE_Q4_0, 1, (int64_t[]){31}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "q4_0 rows must be a multiple of 32 elements");
    CHECK(candle_reshape(ctx, a, 2, (int64_t[]){4, 2}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "reshape: cannot view [2, 3] (6 elements) as [4, 2]");
    CHECK(candle_clamp(ctx, a, 2, 1) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "clamp: min 2 > max 1");
    CHECK(candle_cast(ctx, a, CANDLE_DTYPE_COUNT) == NULL);
    expect(ctx, CANDLE_ERR_DTYPE, "cast: invalid dtype");
    CHECK(candle_unary(ctx, CANDLE_OP_ADD, a) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "unary: add is not a unary op");
    CHECK(candle_binary(ctx, CANDLE_OP_EXP, a, a) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "binary: exp is not a binary op");
    CHECK(candle_expand(ctx, a, 2, (int64_t[]){4, 3}) == NULL);
    expect(ctx, CANDLE_ERR_SHAPE, "expand: cannot broadcast [2, 3] to [4, 3]");
    CHECK(candle_narrow(ctx, a, 1, 2, 2) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "narrow: start 2 length 2 out of range for dim 1 of size 3");
    CHECK(candle_permute(ctx, a, (int[]){1, 1}) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "permute: dim 1 repeated");

    /* device mismatch: a descriptor claiming another device */
    candle_tensor *c = zeros(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){2, 3});
    c->device = (candle_device){CANDLE_DEVICE_CUDA, 1};
    CHECK(candle_add(ctx, a, c) == NULL);
    expect(ctx, CANDLE_ERR_DEVICE, "add: device mismatch: lhs cpu rhs cuda:1");

    /* reading an uncomputed tensor is an error, not a crash */
    candle_ctx_set_eager(ctx, false);
    candle_tensor *lazy = candle_exp(ctx, a);
    float out[6];
    CHECK(candle_tensor_to_f32(lazy, out) == CANDLE_ERR_INVALID_ARG);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "tensor_to_f32: tensor not computed");
    double v;
    CHECK(candle_tensor_get_f64(a, (int64_t[]){2, 0}, &v) == CANDLE_ERR_INVALID_ARG);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "tensor_get: index 2 out of range for dim 0 of size 2");
    candle_ctx_free(ctx);
}

static void test_oom(void) {
    candle_ctx *ctx = new_ctx(true, 1 << 20);
    CHECK(candle_tensor_new(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){1 << 20}) == NULL);
    expect(ctx, CANDLE_ERR_OOM, "out of memory: requested 4.00 MiB, available 1.00 MiB on cpu");
    candle_tensor *a = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){128 * 1024});
    CHECK(a != NULL);
    CHECK(candle_ctx_mem_used(ctx) == 512 * 1024);
    /* an op's output over the limit names the op */
    candle_tensor *b = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){64 * 1024});
    CHECK(b != NULL);
    CHECK(candle_add(ctx, a, a) == NULL);
    expect(ctx, CANDLE_ERR_OOM,
           "out of memory: requested 512.00 KiB, available 256.00 KiB on cpu (tensor add)");
    /* lazily: the error comes from compute */
    candle_ctx_set_eager(ctx, false);
    candle_tensor *e = candle_exp(ctx, a);
    CHECK(e != NULL);
    CHECK(candle_compute(ctx, e) == CANDLE_ERR_OOM);
    expect(ctx, CANDLE_ERR_OOM, "requested 512.00 KiB, available 256.00 KiB on cpu (tensor exp)");
    candle_ctx_free(ctx);

    candle_ctx *big = new_ctx(true, 0);
    /* a shape whose byte size overflows is a shape error, not a wrap */
    CHECK(candle_tensor_new(big, CANDLE_DTYPE_F32, 2, (int64_t[]){INT64_MAX / 2, 4}) == NULL);
    expect(big, CANDLE_ERR_SHAPE, "tensor_new: invalid shape");
    candle_ctx_free(big);
}

static void test_null_propagation(void) {
    candle_ctx *ctx = new_ctx(true, 0);
    candle_tensor *a = zeros(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){3});
    CHECK(candle_add(ctx, a, NULL) == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_OK); /* NULL input alone records nothing */
    candle_tensor *bad = candle_transpose(ctx, a, 0, 3); /* first error */
    CHECK(bad == NULL);
    CHECK(candle_exp(ctx, bad) == NULL);
    CHECK(candle_add(ctx, bad, a) == NULL);
    CHECK(candle_where(ctx, NULL, a, a) == NULL);
    CHECK(candle_reshape(ctx, bad, 1, (int64_t[]){3}) == NULL);
    CHECK(candle_cast(ctx, bad, CANDLE_DTYPE_F16) == NULL);
    CHECK(candle_copy_into(ctx, a, bad) == NULL);
    CHECK(candle_contiguous(ctx, bad) == NULL);
    /* a second, different error does not overwrite the first */
    CHECK(candle_squeeze(ctx, a, 5) == NULL);
    CHECK(candle_compute(ctx, bad) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_graph_build(ctx, &bad, 1) == NULL);
    expect(ctx, CANDLE_ERR_INVALID_ARG, "transpose: dim 3 out of range for rank 1");
    /* ops work again after the clear */
    CHECK(candle_exp(ctx, a) != NULL);
    CHECK(candle_exp(NULL, a) == NULL);
    candle_ctx_free(ctx);
}

static void *other_thread(void *arg) {
    (void)arg;
    /* this thread's last error starts clean and its own error stays here */
    int *ok = malloc(sizeof *ok);
    *ok = candle_last_error() == CANDLE_OK && candle_last_errmsg()[0] == 0;
    candle_arena *a;
    candle_arena_init(&a, 0, 0);
    candle_arena_alloc(a, 1, 3);
    *ok = *ok && candle_last_error() == CANDLE_ERR_INVALID_ARG;
    candle_arena_free(a);
    return ok;
}

static void test_thread_local(void) {
    candle_clear_last_error();
    CHECK(candle_ctx_init(NULL, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_last_error() == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "ctx_init: out is NULL");
    CHECK(candle_errcode(NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_errmsg(NULL), "ctx_init");
    pthread_t th;
    void *ret = NULL;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, &ret);
    CHECK(ret && *(int *)ret);
    free(ret);
    /* still ours after the other thread's error */
    CHECK_CONTAINS(candle_last_errmsg(), "ctx_init: out is NULL");
    /* the thread-local error is not sticky: the latest one wins */
    candle_tensor_print(NULL, NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "tensor_print: tensor is NULL");
    candle_clear_last_error();
    CHECK(candle_last_error() == CANDLE_OK && candle_last_errmsg()[0] == 0);
    candle_ctx_clear_error(NULL); /* no crash */
}

static void test_status_names(void) {
    static const char *want[] = {"ok",           "shape error",      "dtype error",
                                 "device error", "out of memory",    "io error",
                                 "format error", "unsupported",      "invalid argument",
                                 "internal error", "numeric error",  "cancelled"};
    CHECK(sizeof want / sizeof *want == CANDLE_STATUS_COUNT);
    for (int s = 0; s < CANDLE_STATUS_COUNT; s++)
        CHECK_MSG(strcmp(candle_status_name((candle_status)s), want[s]) == 0, "%d: %s", s,
                  candle_status_name((candle_status)s));
    CHECK(strcmp(candle_status_name(CANDLE_STATUS_COUNT), "unknown status") == 0);
    CHECK(strcmp(candle_status_name((candle_status)-1), "unknown status") == 0);
}

/* Untrusted text is escaped for the terminal, and so are error messages. */
static void test_escape_text(void) {
    char b[64];
    CHECK(!strcmp(candle_escape_text("a\x1b[2Jb\x07\tc\n", SIZE_MAX, b, sizeof b), "a\\x1b[2Jb\\x07\\tc\\n"));
    CHECK(!strcmp(candle_escape_text("\xc2\x9b" "1m \xc2\xa0 \xe2\x82\xac", SIZE_MAX, b, sizeof b),
                  "\\u009b1m \xc2\xa0 \xe2\x82\xac")); /* CSI escaped; NBSP and the euro sign kept */
    CHECK(!strcmp(candle_escape_text("abcdef", 3, b, sizeof b), "abc"));
    CHECK(!strcmp(candle_escape_text("abcdefghij", SIZE_MAX, b, 8), "abcd..."));
    CHECK(!strcmp(candle_escape_text("\x1b\x1b\x1b", SIZE_MAX, b, 10), "\\x1b..."));
    CHECK(!strcmp(candle_escape_text(NULL, 4, b, sizeof b), ""));
    candle_clear_last_error();
    candle_backend *be = NULL;
    CHECK(candle_backend_init_by_name(&be, "w\x1b]0;x\x07", NULL) != CANDLE_OK);
    const char *m = candle_last_errmsg();
    CHECK_MSG(strstr(m, "w\\x1b]0;x\\x07") && !strchr(m, 0x1b), "%s", m);
}

int main(void) {
    test_escape_text();
    test_shape_dtype_dim_rank();
    test_oom();
    test_null_propagation();
    test_thread_local();
    test_status_names();
    return test_done("test_errors");
}
