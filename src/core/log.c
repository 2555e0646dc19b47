/* The log callback (log.h). One process-wide (fn, user_data) pair behind a
 * mutex, so a message never sees a callback with another callback's
 * user_data; the callback itself runs outside the lock so it may log or
 * set a new callback. */
#include <pthread.h>
#include <stdio.h>

#include "core-impl.h"

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static candle_log_fn g_log_fn;
static void *g_log_user;

void candle_log_set_callback(candle_log_fn fn, void *user_data) {
    pthread_mutex_lock(&g_log_lock);
    g_log_fn = fn;
    g_log_user = fn ? user_data : NULL;
    pthread_mutex_unlock(&g_log_lock);
}

const char *candle_log_level_name(candle_log_level level) {
    static const char *const names[CANDLE_LOG_LEVEL_COUNT] = {"error", "warn", "info", "debug"};
    return (unsigned)level < CANDLE_LOG_LEVEL_COUNT ? names[level] : "invalid";
}

void cdl_log_msg(candle_log_level level, const char *fmt, ...) {
    /* Longer messages are cut: a log line is not the place for bulk data. */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_log_lock);
    candle_log_fn fn = g_log_fn;
    void *user = g_log_user;
    pthread_mutex_unlock(&g_log_lock);
    if (fn) fn(level, msg, user);
    else fprintf(stderr, "%s\n", msg);
}
