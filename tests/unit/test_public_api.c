/* The embedding API: tensor accessors (NULL-safe, negative dims), the
 * version, the log callback (library messages and the profiler's report
 * go through it) and candle_free on memory the library hands out. */
#include <sys/wait.h>
#include <unistd.h>

#include "core/core-impl.h"
#include "test.h"

static void test_accessors(void) {
    candle_ctx_params p = candle_ctx_default_params();
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, &p) == CANDLE_OK);
    if (!ctx) return;
    candle_tensor *t = candle_tensor_new(ctx, CANDLE_DTYPE_F16, 3, (int64_t[]){2, 3, 4});
    CHECK(t != NULL);
    CHECK(candle_tensor_dtype(t) == CANDLE_DTYPE_F16);
    CHECK(candle_tensor_rank(t) == 3);
    CHECK(candle_tensor_dim(t, 0) == 2 && candle_tensor_dim(t, 1) == 3 && candle_tensor_dim(t, 2) == 4);
    CHECK(candle_tensor_dim(t, -1) == 4 && candle_tensor_dim(t, -3) == 2);
    CHECK(candle_tensor_dim(t, 3) == -1 && candle_tensor_dim(t, -4) == -1);
    /* strides in bytes, outermost first */
    CHECK(candle_tensor_stride(t, 0) == 24 && candle_tensor_stride(t, 1) == 8);
    CHECK(candle_tensor_stride(t, 2) == 2 && candle_tensor_stride(t, -1) == 2);
    CHECK(candle_tensor_stride(t, 3) == 0);
    CHECK(candle_tensor_nelements(t) == 24);
    CHECK(candle_tensor_nbytes(t) == 48);

    /* a transposed view: the accessors see the view's own layout */
    candle_tensor *v = candle_transpose(ctx, t, 0, 2);
    CHECK(v != NULL);
    CHECK(candle_tensor_dim(v, 0) == 4 && candle_tensor_stride(v, 0) == 2);
    CHECK(candle_tensor_stride(v, 2) == 24 && candle_tensor_nelements(v) == 24);

    /* an expand has stride 0 on the broadcast dim */
    candle_tensor *r = candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, (int64_t[]){1, 5});
    candle_tensor *e = candle_expand(ctx, r, 2, (int64_t[]){3, 5});
    CHECK(e != NULL && candle_tensor_dim(e, 0) == 3 && candle_tensor_stride(e, 0) == 0);

    /* quantized: the innermost dim counts elements, nbytes whole blocks */
    candle_tensor *q = candle_tensor_new(ctx, CANDLE_DTYPE_Q8_0, 2, (int64_t[]){2, 64});
    CHECK(q != NULL && candle_tensor_dim(q, 1) == 64 && candle_tensor_nelements(q) == 128);
    CHECK(candle_tensor_nbytes(q) == 2 * 2 * 34);

    /* rank 0: one element, no dims */
    candle_tensor *s = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 0, NULL);
    CHECK(s != NULL && candle_tensor_rank(s) == 0 && candle_tensor_nelements(s) == 1);
    CHECK(candle_tensor_dim(s, 0) == -1 && candle_tensor_dim(s, -1) == -1);
    CHECK(candle_tensor_nbytes(s) == 4);
    candle_ctx_free(ctx);

    CHECK(candle_tensor_dtype(NULL) == CANDLE_DTYPE_COUNT);
    CHECK(candle_tensor_rank(NULL) == -1);
    CHECK(candle_tensor_dim(NULL, 0) == -1);
    CHECK(candle_tensor_stride(NULL, 0) == 0);
    CHECK(candle_tensor_nelements(NULL) == 0);
    CHECK(candle_tensor_nbytes(NULL) == 0);
}

static void test_version(void) {
    CHECK(strcmp(candle_version(), CANDLE_VERSION) == 0);
    CHECK(candle_version_number() == CANDLE_VERSION_NUMBER);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", CANDLE_VERSION_MAJOR, CANDLE_VERSION_MINOR,
             CANDLE_VERSION_PATCH);
    CHECK(strcmp(buf, candle_version()) == 0);
}

typedef struct seen {
    int n;
    candle_log_level level;
    char msg[2048];
} seen;

static void record(candle_log_level level, const char *msg, void *user) {
    seen *s = user;
    s->n++;
    s->level = level;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

static void test_log(void) {
    seen s = {0};
    candle_log_set_callback(record, &s);
    cdl_log_msg(CANDLE_LOG_WARN, "%d tokens %s", 3, "dropped");
    CHECK(s.n == 1 && s.level == CANDLE_LOG_WARN);
    CHECK(strcmp(s.msg, "3 tokens dropped") == 0);
    /* a message longer than the line buffer is cut, not overrun */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cdl_log_msg(CANDLE_LOG_DEBUG, "%s", big);
    CHECK(s.n == 2 && s.level == CANDLE_LOG_DEBUG && strlen(s.msg) > 0 && strlen(s.msg) < 1024);
    candle_log_set_callback(NULL, &s); /* back to stderr: nothing more arrives here */
    cdl_log_msg(CANDLE_LOG_INFO, "test_public_api: this line goes to stderr");
    CHECK(s.n == 2);
    CHECK(strcmp(candle_log_level_name(CANDLE_LOG_ERROR), "error") == 0);
    CHECK(strcmp(candle_log_level_name(CANDLE_LOG_DEBUG), "debug") == 0);
    CHECK(strcmp(candle_log_level_name(CANDLE_LOG_LEVEL_COUNT), "invalid") == 0);
}

/* In a child (the report runs at exit): the profile's lines reach the
 * callback, here written to a pipe. */
static int g_pipe = -1;
static void to_pipe(candle_log_level level, const char *msg, void *user) {
    (void)user;
    if (level != CANDLE_LOG_INFO) return;
    ssize_t w = write(g_pipe, msg, strlen(msg));
    w += write(g_pipe, "\n", 1);
    (void)w;
}

static void test_profile_through_log(void) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        g_pipe = fd[1];
        candle_profile_enable(true);
        candle_log_set_callback(to_pipe, NULL);
        candle_ctx_params p = candle_ctx_default_params();
        p.n_threads = 1;
        candle_ctx *ctx = NULL;
        if (candle_ctx_init(&ctx, &p) != CANDLE_OK) _exit(3);
        candle_tensor *a = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, (int64_t[]){4},
                                                  (const float[]){1, 2, 3, 4});
        candle_tensor *y = candle_exp(ctx, a);
        if (!y || candle_compute(ctx, y) != CANDLE_OK) _exit(4);
        candle_ctx_free(ctx);
        exit(0); /* runs the atexit report */
    }
    close(fd[1]);
    char out[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK_CONTAINS(out, "candle profile: ");
    CHECK_CONTAINS(out, "exp ");
}

static void test_free(void) {
    candle_chat_template t;
    CHECK(candle_chat_template_init(&t, NULL, 0, "chatml") == CANDLE_OK);
    candle_chat_msg m[] = {{.role = "user", .content = "hi"}};
    char *out = NULL;
    CHECK(candle_chat_apply(&t, m, 1, true, &out) == CANDLE_OK && out);
    if (out) CHECK_CONTAINS(out, "<|im_start|>user\nhi<|im_end|>");
    candle_free(out);
    candle_chat_template_free(&t);
    candle_free(NULL);
}

int main(void) {
    test_accessors();
    test_version();
    test_log();
    test_profile_through_log();
    test_free();
    return test_done("test_public_api");
}
