/* Writing a file in place of another: a temporary beside it, renamed over it
 * once complete, so a failed write never leaves a truncated file under the
 * real name. The temporary is created with O_EXCL|O_NOFOLLOW under a unique
 * name, so a file or symlink planted in the directory is never written
 * through; an existing target that is not a regular file (a device, a FIFO,
 * a directory) is refused, since the rename would replace it. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core-impl.h"

candle_status cdl_out_file_check(const char *path, const char *what) {
    struct stat st;
    /* stat follows a symlink: one to a device is refused like the device */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "%s: output '%s' exists and is not a regular file; refusing to "
                                "replace it",
                                what, path);
    return CANDLE_OK;
}

/* "DIR/.NAME.XXXXXX" into a new buffer, XXXXXX filled from seed. */
static char *tmp_name(const char *path, uint64_t seed) {
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 16;
    char *t = malloc(n);
    if (!t) return NULL;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    char sfx[7];
    for (int i = 0; i < 6; i++, seed /= 36) sfx[i] = digits[seed % 36];
    sfx[6] = 0;
    snprintf(t, n, "%.*s.%s.%s", (int)dlen, path, path + dlen, sfx);
    return t;
}

candle_status cdl_out_file_open(cdl_out_file *o, const char *path, const char *what) {
    memset(o, 0, sizeof *o);
    candle_status s = cdl_out_file_check(path, what);
    if (s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)getpid() << 20 ^
                    (uint64_t)(uintptr_t)o;
    for (int tries = 0; tries < 100; tries++, seed = seed * 6364136223846793005u + 1442695040888963407u) {
        char *t = tmp_name(path, seed >> 16);
        if (!t) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s path", what);
        int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) {
            free(t);
            continue;
        }
        if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) {
                close(fd);
                unlink(t);
            }
            s = cdl_set_error(NULL, CANDLE_ERR_IO, "%s: %s: cannot create %s: %s", what, path,
                                 t, strerror(e));
            free(t);
            return s;
        }
        o->tmp = t;
        o->path = path;
        return CANDLE_OK;
    }
    return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: no unique temporary name beside '%s'", what,
                            path);
}

void cdl_out_file_abort(cdl_out_file *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

candle_status cdl_out_file_commit(cdl_out_file *o, bool ok, const char *what) {
    int err = errno;
    if (fclose(o->f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    o->f = NULL;
    /* checked again: the target may have been replaced while we wrote */
    candle_status s = ok ? cdl_out_file_check(o->path, what) : CANDLE_OK;
    if (ok && !s && rename(o->tmp, o->path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok && !s) s = cdl_set_error(NULL, CANDLE_ERR_IO, "%s: %s: %s", what, o->path, strerror(err));
    if (s) unlink(o->tmp);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    return s;
}
