/* File images for the format readers: see image-impl.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image-impl.h"

static void release_mmap(candle_storage *s) {
    munmap(s->data, s->size);
    free(s);
}

static void release_heap(candle_storage *s) {
    free(s->data);
    free(s);
}

static candle_status io_err(const char *fmt, const char *path, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: %s: %s: %s", fmt, path, what,
                            strerror(errno));
}


/* Read the whole file into anonymous memory, which once measured faster and
 * steadier than a file mapping here. Aligned to 2 MiB and advised as huge
 * pages: streaming the weights of a decoding step then walks 2 MiB pages,
 * as a file mapping partly does (the page cache's large folios are mapped
 * whole). On 4 KiB pages the copy measured slower than the mapping
 * (SmolLM2 F16 tg64, 2 threads: 73-75 against 83-87 t/s mapped), on 2 MiB
 * pages faster (95 against 91). */
#define HUGE_ALIGN ((size_t)2 << 20)
candle_storage *cimage_read(const char *fmt, int fd, const char *path, size_t size) {
    void *buf = NULL;
    if (posix_memalign(&buf, size >= HUGE_ALIGN ? HUGE_ALIGN : 64, size)) {
        char b[32];
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: %s: loading %s (%s)", fmt, path,
                         cdl_format_bytes(size, b, sizeof b));
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    /* before the pages are touched, so they come as 2 MiB pages where the
     * system lets a process ask (transparent_hugepage=madvise) */
    madvise(buf, size, MADV_HUGEPAGE);
#endif
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, (char *)buf + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO; /* file shrank under us */
            io_err(fmt, path, "read");
            free(buf);
            return NULL;
        }
        done += (size_t)n;
    }
    candle_storage *s = cdl_storage_new(buf, size, CANDLE_STORAGE_HEAP, release_heap);
    if (!s) free(buf);
    return s;
}

candle_storage *cimage_map(const char *fmt, int fd, const char *path, size_t size) {
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        io_err(fmt, path, "mmap");
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    /* Before the first access: the pages this mapping faults in from disk
     * are then read into 2 MiB page-cache folios, which the kernel maps
     * with 2 MiB entries (the mapping is 2 MiB aligned). Decoding streams
     * every weight once per token, and on 4 KiB pages it walks the page
     * tables for each of them: SmolLM2-135M Q4_0 tg128, 2 threads, the same
     * file cached in 4 KiB pages vs 2 MiB folios (FilePmdMapped 0 vs 86
     * MiB), alternating: 431-472 vs 474-530 t/s. A file already cached in
     * small folios stays as it is (the advice is a no-op there). */
    madvise(p, size, MADV_HUGEPAGE);
#endif
    candle_storage *s = cdl_storage_new(p, size, CANDLE_STORAGE_MMAP, release_mmap);
    if (!s) munmap(p, size);
    else s->owner = p;
    return s;
}

candle_status cimage_open(const char *fmt, const char *path, int *fd, size_t *size) {
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) return io_err(fmt, path, "open");
    struct stat st;
    if (fstat(*fd, &st) < 0) {
        candle_status s = io_err(fmt, path, "stat");
        close(*fd);
        *fd = -1;
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return cdl_set_error(NULL, CANDLE_ERR_IO, "%s: %s: not a regular file", fmt, path);
    }
    *size = (size_t)st.st_size;
    return CANDLE_OK;
}

candle_status cimage_load(const char *fmt, const char *path, bool no_mmap, cimage_parse_fn parse,
                          cimage_close_fn close_handle, void **handle) {
    *handle = NULL;
    int fd = -1;
    size_t size = 0;
    candle_status r = cimage_open(fmt, path, &fd, &size);
    if (r) return r;
    static const uint8_t empty[1];
    candle_storage *s = size ? cimage_map(fmt, fd, path, size)
                             : candle_storage_external((void *)empty, 0);
    r = s ? parse(handle, s, path) : candle_last_error();
    if (!r && no_mmap && size) {
        close_handle(*handle);
        *handle = NULL;
        s = cimage_read(fmt, fd, path, size);
        r = s ? parse(handle, s, path) : candle_last_error();
    }
    close(fd);
    return r;
}
