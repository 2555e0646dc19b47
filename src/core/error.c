/* Status names, per-context and thread-local error messages. */
#include <stdio.h>
#include <string.h>

#include "core-impl.h"
#include "ctx-impl.h"

static _Thread_local candle_status tl_status;
static _Thread_local char tl_msg[CANDLE_ERRMSG_MAX];
static _Thread_local char tl_backend_msg[CANDLE_BACKEND_ERRMSG_MAX];

const char *candle_status_name(candle_status s) {
    static const char *names[] = {
        [CANDLE_OK] = "ok",
        [CANDLE_ERR_SHAPE] = "shape error",
        [CANDLE_ERR_DTYPE] = "dtype error",
        [CANDLE_ERR_DEVICE] = "device error",
        [CANDLE_ERR_OOM] = "out of memory",
        [CANDLE_ERR_IO] = "io error",
        [CANDLE_ERR_FORMAT] = "format error",
        [CANDLE_ERR_UNSUPPORTED] = "unsupported",
        [CANDLE_ERR_INVALID_ARG] = "invalid argument",
        [CANDLE_ERR_INTERNAL] = "internal error",
        [CANDLE_ERR_NUMERIC] = "numeric error",
    };
    _Static_assert(sizeof(names) / sizeof(names[0]) == CANDLE_STATUS_COUNT,
                   "status name table out of date");
    if ((unsigned)s >= CANDLE_STATUS_COUNT) return "unknown status";
    return names[s];
}

candle_status candle_set_errorv(candle_ctx *ctx, candle_status s, const char *fmt, va_list ap) {
    if (s == CANDLE_OK) return s; /* not an error: nothing to record */
    if (ctx && ctx->status != CANDLE_OK) return s; /* first error sticks */
    /* formatted apart first: a message may quote the one it replaces
     * ("%s", candle_last_errmsg()) */
    char msg[sizeof tl_msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (ctx) {
        ctx->status = s;
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", msg);
    } else {
        tl_status = s;
        memcpy(tl_msg, msg, sizeof msg);
    }
    return s;
}

candle_status candle_set_error(candle_ctx *ctx, candle_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    candle_set_errorv(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

candle_status candle_ctx_take_last_error(candle_ctx *ctx) {
    candle_status s = tl_status;
    if (s != CANDLE_OK) candle_set_error(ctx, s, "%s", tl_msg);
    return s;
}

candle_status candle_last_error(void) { return tl_status; }
const char *candle_last_errmsg(void) { return tl_status == CANDLE_OK ? "" : tl_msg; }
void candle_clear_last_error(void) {
    tl_status = CANDLE_OK;
    tl_msg[0] = 0;
}

void candle_backend_set_errmsg(const char *fmt, ...) {
    char msg[sizeof tl_backend_msg]; /* apart first: fmt's arguments may quote the buffer */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(tl_backend_msg, msg, sizeof msg);
}
char *candle_backend_errmsg_buffer(void) { return tl_backend_msg; }
const char *candle_backend_errmsg(const candle_backend *be) { return be ? tl_backend_msg : "backend is NULL"; }

candle_status candle_errcode(const candle_ctx *ctx) { return ctx ? ctx->status : tl_status; }
const char *candle_errmsg(const candle_ctx *ctx) {
    if (!ctx) return candle_last_errmsg();
    return ctx->status == CANDLE_OK ? "" : ctx->errmsg;
}
void candle_ctx_clear_error(candle_ctx *ctx) {
    if (!ctx) {
        candle_clear_last_error();
        return;
    }
    ctx->status = CANDLE_OK;
    ctx->errmsg[0] = 0;
}

const char *candle_format_bytes(size_t n, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%zu B", n);
    else snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}
