/* Library messages: warnings and diagnostics (the profiler's report)
 * go through one process-wide callback, so a host can route them to its own
 * log instead of the library writing to stderr. Errors of a call are not
 * logged: they are returned (status.h). */
#ifndef CANDLE_LOG_H
#define CANDLE_LOG_H

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_log_level {
    CANDLE_LOG_ERROR = 0,
    CANDLE_LOG_WARN,
    CANDLE_LOG_INFO,
    CANDLE_LOG_DEBUG,
    CANDLE_LOG_LEVEL_COUNT
} candle_log_level;

/* msg is one line without its newline, valid only during the call. May be
 * called from any thread (one call at a time is not guaranteed), and at
 * exit (the profile report), so keep user_data valid until then or set the
 * callback back to NULL first. */
typedef void (*candle_log_fn)(candle_log_level level, const char *msg, void *user_data);

/* NULL restores the default: each message and a newline to stderr. */
CANDLE_API void candle_log_set_callback(candle_log_fn fn, void *user_data);
/* "error", "warn", "info", "debug"; "invalid" out of range. */
CANDLE_API const char *candle_log_level_name(candle_log_level level);

#ifdef __cplusplus
}
#endif
#endif
