/* The reference kernel's output for a computed node, for op tests that
 * check a fast kernel against the ground truth on the very same inputs. */
#ifndef CANDLE_TESTS_REF_NODE_H
#define CANDLE_TESTS_REF_NODE_H

#include <string.h>

#include "backend/cpu/cpu-impl.h"
#include "test.h"

/* y's node recomputed by `ref` into a fresh tensor; NULL (with a failed
 * check) when the reference fails. */
static candle_tensor *ref_of(candle_ctx *ctx, const candle_tensor *y, cpu_kernel_fn ref) {
    candle_tensor *r = candle_tensor_new(ctx, y->dtype, y->rank, y->shape);
    if (!r) return NULL;
    r->op = y->op;
    memcpy(r->src, y->src, sizeof r->src);
    r->n_src = y->n_src;
    memcpy(r->iparams, y->iparams, sizeof r->iparams);
    memcpy(r->fparams, y->fparams, sizeof r->fparams);
    char msg[256] = "";
    cpu_task t = {.ith = 0, .nth = 1, .errmsg = msg, .errmsg_len = sizeof msg};
    candle_status s = ref(&t, r);
    CHECK_MSG(s == CANDLE_OK, "reference kernel failed: %s", msg);
    return s == CANDLE_OK ? r : NULL;
}

#endif
