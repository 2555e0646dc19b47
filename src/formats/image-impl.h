/* File images shared by the format readers (GGUF, safetensors): a weights
 * file is mapped read-only into a refcounted storage, or read into aligned
 * anonymous memory (no_mmap), so tensors loaded from it keep the image alive
 * after the reader's handle is closed.
 *
 * `fmt` prefixes the messages ("gguf: PATH: mmap: ..."); errors go to the
 * thread-local last error. */
#ifndef CANDLE_IMAGE_IMPL_H
#define CANDLE_IMAGE_IMPL_H

#include "core/core-impl.h"

/* Open a regular file read-only: its descriptor (close it) and size. */
candle_status cimage_open(const char *fmt, const char *path, int *fd, size_t *size);
/* The file's first size bytes mapped (MMAP storage, owner = the mapping);
 * size > 0. */
candle_storage *cimage_map(const char *fmt, int fd, const char *path, size_t size);
/* The same read into anonymous memory (HEAP storage). */
candle_storage *cimage_read(const char *fmt, int fd, const char *path, size_t size);

/* A reader's parse of one image into its handle (*handle): takes over the
 * reference to s, also on failure; name is the file's path. */
typedef candle_status (*cimage_parse_fn)(void **handle, candle_storage *s, const char *name);
typedef void (*cimage_close_fn)(void *handle);

/* A reader's open of the file at path: the image is mapped and parsed.
 * With no_mmap it is validated through the mapping first, which touches
 * only the header's pages, so a malformed file costs no file-sized
 * allocation; the mapping is then released and the file read into memory
 * and parsed again, so the header's pages (a whole 2 MiB folio where the
 * page cache holds the file in large ones) do not stay resident through the
 * copy. An empty file, which cannot be mapped, is parsed as an empty image,
 * so the reader reports it as it reports any truncated file. */
candle_status cimage_load(const char *fmt, const char *path, bool no_mmap, cimage_parse_fn parse,
                          cimage_close_fn close_handle, void **handle);

#endif
