/* A backend's error detail belongs to the thread whose call failed: two
 * threads making one shared backend fail, each with its own op, always read
 * back their own message (a field in the backend struct, as before, raced:
 * ThreadSanitizer reports it, and a thread could read the other's text).
 * Labelled "threads" so `make test-tsan` runs it under ThreadSanitizer. */
#include <pthread.h>
#include <string.h>

#include "common/hidden_backend.h"
#include "test.h"

enum { ROUNDS = 2000 };

typedef struct worker {
    candle_backend *be;
    candle_tensor *node; /* a computed host tensor: the hidden backend refuses its output */
    const char *want;    /* the op name its message must name */
    int wrong;           /* rounds whose message was not this thread's */
    int accepted;        /* rounds the backend did not refuse */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        candle_status s = w->be->iface->compute_node(w->be, w->node);
        if (s == CANDLE_OK) w->accepted++;
        else if (!strstr(candle_backend_errmsg(w->be), w->want)) w->wrong++;
    }
    return NULL;
}

int main(void) {
    candle_backend *be = test_hidden_backend_init(1, NULL);
    CHECK(be != NULL);
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, NULL) == CANDLE_OK);
    if (!be || !ctx) return test_done("test_backend_errmsg");
    const int64_t shape[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    candle_tensor *a = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, shape, v);
    candle_tensor *b = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 1, shape, v);
    worker w[2] = {
        {be, candle_add(ctx, a, b), candle_op_name(CANDLE_OP_ADD), 0, 0},
        {be, candle_mul(ctx, a, b), candle_op_name(CANDLE_OP_MUL), 0, 0},
    };
    CHECK(w[0].node && w[1].node);
    if (w[0].node && w[1].node) {
        pthread_t th[2];
        for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(w[i].accepted == 0, "%s: %d rounds not refused", w[i].want, w[i].accepted);
            CHECK_MSG(w[i].wrong == 0, "%s: %d of %d messages were not this thread's", w[i].want, w[i].wrong,
                      ROUNDS);
        }
    }
    /* a thread that made no backend call has no detail */
    CHECK(strcmp(candle_backend_errmsg(be), "") == 0);
    candle_ctx_free(ctx);
    candle_backend_free(be);
    return test_done("test_backend_errmsg");
}
