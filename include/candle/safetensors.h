/* safetensors files (single files, not sharded indexes): a validating
 * reader over a read-only mapping of the file.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON mapping
 * each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets from the start of the data section that follows the header),
 * plus an optional "__metadata__" object of strings.
 *
 * Everything is checked at open: the header length against the file, the
 * JSON, every entry's fields, its byte range against the data section and
 * against its shape and dtype, and that no two tensors' bytes overlap. A
 * malformed file gives CANDLE_ERR_FORMAT with "<file>: <tensor or field>:
 * <problem>" in the thread-local last error.
 *
 * Tensors of dtypes Candle computes with (F32, F16, BF16, I8, I32, I64, U8,
 * BOOL) load as zero-copy views of the image. F64, F8_E4M3 and F8_E5M2 load
 * as F32 copies (exact for F8; F64 rounded to nearest). Other dtypes (I16,
 * U16, U32, U64, F8_E8M0, F4, ...) are listed but refused at load with
 * CANDLE_ERR_UNSUPPORTED. */
#ifndef CANDLE_SAFETENSORS_H
#define CANDLE_SAFETENSORS_H

#include "api.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference implementation's limit on the JSON header. */
#define CANDLE_SAFETENSORS_MAX_HEADER ((size_t)100000000)

typedef struct candle_safetensors candle_safetensors;

typedef struct candle_safetensors_open_params {
    bool no_mmap; /* read the file into anonymous memory instead of mapping it */
} candle_safetensors_open_params;

/* NULL params = mmap. Errors (io, format) go to the thread-local last
 * error; *out is NULL then. */
CANDLE_API candle_status candle_safetensors_open(candle_safetensors **out, const char *path,
                                                 const candle_safetensors_open_params *p);
/* Parse an in-memory image (not copied; it must outlive the handle and every
 * tensor loaded from it). name is the file name for messages (NULL:
 * "safetensors"). */
CANDLE_API candle_status candle_safetensors_open_memory(candle_safetensors **out, const void *data,
                                                        size_t size, const char *name);
/* Releases the handle's reference to the image: tensors loaded from it stay
 * valid (views hold their own). NULL is a no-op. */
CANDLE_API void candle_safetensors_close(candle_safetensors *st);

CANDLE_API size_t candle_safetensors_file_size(const candle_safetensors *st);
/* Where the data section starts: 8 + the header length. */
CANDLE_API size_t candle_safetensors_data_offset(const candle_safetensors *st);
/* The storage holding the whole file image (MMAP, HEAP for no_mmap,
 * EXTERNAL for open_memory), borrowed: retain it to keep it past the handle. */
CANDLE_API candle_storage *candle_safetensors_storage(const candle_safetensors *st);

/* ---- tensors, in header order ---- */
typedef struct candle_safetensors_tensor_info {
    const char *name;
    const char *st_dtype;   /* as in the header: "F32", "F8_E4M3", "U16", ... */
    candle_dtype dtype;     /* as stored; CANDLE_DTYPE_COUNT when Candle has none */
    candle_dtype load_dtype; /* what load_tensor gives; CANDLE_DTYPE_COUNT: refused */
    int rank;
    int64_t shape[CANDLE_MAX_RANK]; /* outermost-first */
    size_t offset;                  /* bytes from the file start (= storage data) */
    size_t size;                    /* bytes */
} candle_safetensors_tensor_info;

CANDLE_API int64_t candle_safetensors_n_tensors(const candle_safetensors *st);
/* NULL when i is out of range. */
CANDLE_API const candle_safetensors_tensor_info *candle_safetensors_tensor(const candle_safetensors *st,
                                                                          int64_t i);
/* Index of a tensor, or -1 (binary search). */
CANDLE_API int64_t candle_safetensors_find_tensor(const candle_safetensors *st, const char *name);
/* A leaf tensor in ctx named `name`: a zero-copy view of the image (it
 * retains the storage) when the dtype is loaded as stored and its data is
 * aligned for it, else a copy (converted to F32 for F64/F8). Errors on ctx:
 * CANDLE_ERR_FORMAT when the file lacks the tensor, CANDLE_ERR_UNSUPPORTED
 * for a dtype Candle cannot load. */
CANDLE_API candle_tensor *candle_safetensors_load_tensor(const candle_safetensors *st,
                                                         candle_ctx *ctx, const char *name);

/* ---- __metadata__ (string -> string), in header order ---- */
CANDLE_API int64_t candle_safetensors_n_metadata(const candle_safetensors *st);
/* Value of key (NUL-terminated, len bytes without it); false if absent.
 * len may be NULL. */
CANDLE_API bool candle_safetensors_metadata(const candle_safetensors *st, const char *key,
                                            const char **val, size_t *len);
/* Entry i; false when out of range. Any out pointer may be NULL. */
CANDLE_API bool candle_safetensors_metadata_at(const candle_safetensors *st, int64_t i,
                                               const char **key, const char **val, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
