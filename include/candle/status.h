/* Status codes and error messages.
 *
 * Every call that can fail returns a candle_status (or, for graph-building op
 * functions, NULL) and records a message with context on the context object,
 * readable with candle_errmsg(ctx). Calls without a context record it in a
 * thread-local last error, readable with candle_last_errmsg(). */
#ifndef CANDLE_STATUS_H
#define CANDLE_STATUS_H

#include <stddef.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_status {
    CANDLE_OK = 0,
    CANDLE_ERR_SHAPE,       /* shapes do not fit the op */
    CANDLE_ERR_DTYPE,       /* dtype not supported or operands differ */
    CANDLE_ERR_DEVICE,      /* operands on different devices, device unusable */
    CANDLE_ERR_OOM,         /* out of memory (message has requested/available) */
    CANDLE_ERR_IO,          /* open/read/write/mmap failed */
    CANDLE_ERR_FORMAT,      /* malformed file or data */
    CANDLE_ERR_UNSUPPORTED, /* valid request this build cannot do */
    CANDLE_ERR_INVALID_ARG, /* argument out of range, NULL where not allowed */
    CANDLE_ERR_INTERNAL,    /* broken internal invariant (a bug) */
    CANDLE_ERR_NUMERIC,     /* non-finite values (NaN, Inf) where a result must be finite */
    CANDLE_ERR_CANCELLED,   /* stopped by the caller's abort callback */
    CANDLE_STATUS_COUNT
} candle_status;

/* Short stable name of a status: "shape", "dtype", "out of memory", ... */
CANDLE_API const char *candle_status_name(candle_status s);

/* Thread-local last error, for calls that take no context. */
CANDLE_API candle_status candle_last_error(void);
CANDLE_API const char *candle_last_errmsg(void);
CANDLE_API void candle_clear_last_error(void);

/* Text from a file or a request, made safe to print on a terminal: the len
 * bytes of s (up to a NUL) into buf (n bytes, always NUL-terminated) with
 * control characters written as escapes (\n, \t, \xNN; the C1 controls'
 * UTF-8 encodings as \u00NN), so a crafted name cannot move the cursor or
 * retitle the terminal; "..." ends a copy that did not fit. Returns buf.
 * Error messages (candle_errmsg, candle_last_errmsg) come escaped already. */
CANDLE_API const char *candle_escape_text(const char *s, size_t len, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
