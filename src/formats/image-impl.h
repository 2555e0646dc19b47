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

#endif
