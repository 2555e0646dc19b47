/* Status names, per-context and thread-local error messages. */
#include <stdio.h>
#include <time.h>
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
        [CANDLE_ERR_CANCELLED] = "cancelled",
    };
    _Static_assert(sizeof(names) / sizeof(names[0]) == CANDLE_STATUS_COUNT,
                   "status name table out of date");
    if ((unsigned)s >= CANDLE_STATUS_COUNT) return "unknown status";
    return names[s];
}

candle_status cdl_set_errorv(candle_ctx *ctx, candle_status s, const char *fmt, va_list ap) {
    if (s == CANDLE_OK) return s; /* not an error: nothing to record */
    if (ctx && ctx->status != CANDLE_OK) return s; /* first error sticks */
    /* formatted apart first: a message may quote the one it replaces
     * ("%s", candle_last_errmsg()) */
    char raw[sizeof tl_msg], msg[sizeof tl_msg];
    vsnprintf(raw, sizeof raw, fmt, ap);
    candle_escape_text(raw, sizeof raw, msg, sizeof msg);
    if (ctx) {
        ctx->status = s;
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", msg);
    } else {
        tl_status = s;
        memcpy(tl_msg, msg, sizeof msg);
    }
    return s;
}

candle_status cdl_set_error(candle_ctx *ctx, candle_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl_set_errorv(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

candle_status cdl_ctx_take_last_error(candle_ctx *ctx) {
    candle_status s = tl_status;
    if (s != CANDLE_OK) cdl_set_error(ctx, s, "%s", tl_msg);
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
char *cdl_backend_errmsg_buffer(void) { return tl_backend_msg; }
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

const char *candle_escape_text(const char *s, size_t len, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    size_t o = 0, fit = 0; /* fit: the last escape boundary with room for "..." after it */
    bool cut = false;
    for (size_t i = 0; s && i < len && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t k = 1;
        esc[0] = (char)c;
        if (c == '\n' || c == '\t' || c == '\r') k = (size_t)snprintf(esc, sizeof esc, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
        else if (c < 0x20 || c == 0x7f) k = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
        else if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f)
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)s[++i]);
        if (o + k + 1 > n) {
            cut = true;
            break;
        }
        memcpy(buf + o, esc, k);
        o += k;
        if (o + 4 <= n) fit = o;
    }
    if (cut) o = fit;
    buf[o] = 0;
    if (cut && n >= 4) memcpy(buf + o, "...", 4);
    return buf;
}

const char *cdl_format_bytes(size_t n, char *buf, size_t len) {
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

double cdl_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
