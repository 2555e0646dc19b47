/* Opening GGUF files: map (or load) the image, parse it, and hand out
 * zero-copy tensors over the image's storage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf-impl.h"

static void release_mmap(candle_storage *s) {
    munmap(s->data, s->size);
    free(s);
}

static void release_heap(candle_storage *s) {
    free(s->data);
    free(s);
}

static candle_status io_err(const char *path, const char *what) {
    return candle_set_error(NULL, CANDLE_ERR_IO, "gguf: %s: %s: %s", path, what, strerror(errno));
}

static candle_storage *new_storage(void *data, size_t size, candle_storage_kind kind,
                                   void (*release)(candle_storage *)) {
    candle_storage *s = calloc(1, sizeof *s);
    if (!s) {
        candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: storage descriptor");
        return NULL;
    }
    s->data = data;
    s->size = size;
    s->refcount = 1;
    s->kind = kind;
    s->device = (candle_device){CANDLE_DEVICE_CPU, 0};
    s->release = release;
    return s;
}

/* Read the whole file into anonymous memory, which once measured faster and
 * steadier than a file mapping here. Aligned to 2 MiB and advised as huge
 * pages: streaming the weights of a decoding step then walks 2 MiB pages,
 * as a file mapping partly does (the page cache's large folios are mapped
 * whole). On 4 KiB pages the copy measured slower than the mapping
 * (SmolLM2 F16 tg64, 2 threads: 73-75 against 83-87 t/s mapped), on 2 MiB
 * pages faster (95 against 91). */
#define HUGE_ALIGN ((size_t)2 << 20)
static candle_storage *load_heap(int fd, const char *path, size_t size) {
    void *buf = NULL;
    if (posix_memalign(&buf, size >= HUGE_ALIGN ? HUGE_ALIGN : 64, size)) {
        char b[32];
        candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf: loading %s (%s)", path,
                         candle_format_bytes(size, b, sizeof b));
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
            io_err(path, "read");
            free(buf);
            return NULL;
        }
        done += (size_t)n;
    }
    candle_storage *s = new_storage(buf, size, CANDLE_STORAGE_HEAP, release_heap);
    if (!s) free(buf);
    return s;
}

static candle_storage *map_file(int fd, const char *path, size_t size) {
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        io_err(path, "mmap");
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
    candle_storage *s = new_storage(p, size, CANDLE_STORAGE_MMAP, release_mmap);
    if (!s) munmap(p, size);
    else s->owner = p;
    return s;
}

/* Takes over the reference to s. */
static candle_status open_storage(candle_gguf **out, candle_storage *s) {
    candle_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        candle_storage_release(s);
        return candle_set_error(NULL, CANDLE_ERR_OOM, "out of memory: gguf handle");
    }
    g->storage = s;
    g->base = s->data;
    g->file_size = s->size;
    candle_status st = cgguf_parse(g);
    if (st) {
        candle_gguf_close(g);
        return st;
    }
    *out = g;
    return CANDLE_OK;
}

candle_status candle_gguf_open(candle_gguf **out, const char *path,
                               const candle_gguf_open_params *p) {
    if (!out || !path)
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "gguf: open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_err(path, "open");
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return io_err(path, "stat");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return candle_set_error(NULL, CANDLE_ERR_IO, "gguf: %s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < 4) { /* nothing to map; report it as the parser would */
        close(fd);
        return candle_set_error(NULL, CANDLE_ERR_FORMAT,
                                "gguf: magic: truncated (needs 4 bytes, %zu left) at offset 0",
                                size);
    }
    candle_storage *s = map_file(fd, path, size);
    if (s && p && p->no_mmap) {
        /* Validate through the mapping first (it touches only the metadata
         * pages), so a malformed file costs no file-sized allocation. */
        candle_gguf *probe = NULL;
        candle_status st = open_storage(&probe, s);
        candle_gguf_close(probe);
        if (st) {
            close(fd);
            return st;
        }
        s = load_heap(fd, path, size);
    }
    close(fd);
    if (!s) return candle_last_error();
    return open_storage(out, s);
}

candle_status candle_gguf_open_memory(candle_gguf **out, const void *data, size_t size) {
    if (!out || (!data && size))
        return candle_set_error(NULL, CANDLE_ERR_INVALID_ARG, "gguf: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    candle_storage *s = candle_storage_external((void *)(data ? data : empty), size);
    if (!s) return candle_last_error();
    return open_storage(out, s);
}

void candle_gguf_close(candle_gguf *g) {
    if (!g) return;
    cgguf_free_parsed(g);
    candle_storage_release(g->storage);
    free(g);
}

uint32_t candle_gguf_version(const candle_gguf *g) { return g ? g->version : 0; }
size_t candle_gguf_alignment(const candle_gguf *g) { return g ? g->alignment : 0; }
size_t candle_gguf_file_size(const candle_gguf *g) { return g ? g->file_size : 0; }
candle_storage *candle_gguf_storage(const candle_gguf *g) { return g ? g->storage : NULL; }

int64_t candle_gguf_n_tensors(const candle_gguf *g) { return g ? g->n_tensors : 0; }

const candle_gguf_tensor_info *candle_gguf_tensor(const candle_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_tensors) return NULL;
    return &g->tensors[i].info;
}

int64_t candle_gguf_find_tensor(const candle_gguf *g, const char *name) {
    if (!g || !name) return -1;
    return cgguf_lookup(g->tensor_sorted, g->n_tensors, name);
}

candle_tensor *candle_gguf_load_tensor(const candle_gguf *g, candle_ctx *ctx, const char *name) {
    if (!ctx) return NULL;
    if (!g || !name) {
        candle_set_error(ctx, CANDLE_ERR_INVALID_ARG, "gguf: load_tensor: NULL argument");
        return NULL;
    }
    int64_t i = candle_gguf_find_tensor(g, name);
    if (i < 0) {
        candle_set_error(ctx, CANDLE_ERR_FORMAT, "gguf: tensor '%s': not found", name);
        return NULL;
    }
    const candle_gguf_tensor_info *ti = &g->tensors[i].info;
    candle_tensor *t = candle_tensor_from_storage(ctx, ti->dtype, ti->rank, ti->shape,
                                                  g->storage, ti->offset);
    if (t) candle_tensor_set_name(t, name);
    return t;
}
