/* GGUF files (v2, v3): a validating mmap reader and a writer.
 * Tensor shapes are converted to outermost-first once, here.
 *
 * The reader checks every count, length, type id, offset and size against the
 * file before using it; a malformed file gives CANDLE_ERR_FORMAT with
 * "gguf: <field>: <problem> at offset <n>" in the thread-local last error. */
#ifndef CANDLE_GGUF_H
#define CANDLE_GGUF_H

#include "api.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum candle_gguf_type {
    CANDLE_GGUF_UINT8 = 0,
    CANDLE_GGUF_INT8 = 1,
    CANDLE_GGUF_UINT16 = 2,
    CANDLE_GGUF_INT16 = 3,
    CANDLE_GGUF_UINT32 = 4,
    CANDLE_GGUF_INT32 = 5,
    CANDLE_GGUF_FLOAT32 = 6,
    CANDLE_GGUF_BOOL = 7,
    CANDLE_GGUF_STRING = 8,
    CANDLE_GGUF_ARRAY = 9,
    CANDLE_GGUF_UINT64 = 10,
    CANDLE_GGUF_INT64 = 11,
    CANDLE_GGUF_FLOAT64 = 12,
    CANDLE_GGUF_TYPE_COUNT
} candle_gguf_type;

typedef struct candle_gguf candle_gguf;

typedef struct candle_gguf_open_params {
    bool no_mmap; /* read weights into anonymous memory instead of mapping */
} candle_gguf_open_params;

/* NULL params = mmap. Errors (io, format with field and byte offset) go to
 * the thread-local last error; *out is NULL then. */
CANDLE_API candle_status candle_gguf_open(candle_gguf **out, const char *path,
                                          const candle_gguf_open_params *p);
/* Parse an in-memory image (not copied; must outlive the handle and every
 * tensor loaded from it). Its storage is CANDLE_STORAGE_EXTERNAL. */
CANDLE_API candle_status candle_gguf_open_memory(candle_gguf **out, const void *data, size_t size);
/* Releases the handle's reference to the storage: tensors loaded from it
 * stay valid (they hold their own). */
CANDLE_API void candle_gguf_close(candle_gguf *g);

CANDLE_API uint32_t candle_gguf_version(const candle_gguf *g);
CANDLE_API size_t candle_gguf_alignment(const candle_gguf *g);
CANDLE_API size_t candle_gguf_file_size(const candle_gguf *g);

/* ---- metadata ---- */
CANDLE_API int64_t candle_gguf_n_kv(const candle_gguf *g);
CANDLE_API const char *candle_gguf_key(const candle_gguf *g, int64_t i);
/* Index of a key, or -1. */
CANDLE_API int64_t candle_gguf_find_key(const candle_gguf *g, const char *key);
CANDLE_API candle_gguf_type candle_gguf_kv_type(const candle_gguf *g, int64_t i);
/* Scalars, converted to the asked type when lossless; false if the key is
 * missing or of an incompatible type. get_u32/get_i64 take any integer type
 * whose value fits; get_f32 takes f32, f64 (rounded to nearest) and integers
 * exactly representable in f32; get_bool only bool. */
CANDLE_API bool candle_gguf_get_u32(const candle_gguf *g, const char *key, uint32_t *out);
CANDLE_API bool candle_gguf_get_i64(const candle_gguf *g, const char *key, int64_t *out);
CANDLE_API bool candle_gguf_get_f32(const candle_gguf *g, const char *key, float *out);
CANDLE_API bool candle_gguf_get_bool(const candle_gguf *g, const char *key, bool *out);
/* Strings are not NUL-terminated in the file: pointer + length. */
CANDLE_API bool candle_gguf_get_str(const candle_gguf *g, const char *key, const char **s,
                                    size_t *len);
/* Arrays: element type and count, then elements by index. */
CANDLE_API bool candle_gguf_get_arr(const candle_gguf *g, const char *key,
                                    candle_gguf_type *elem_type, int64_t *n);
CANDLE_API bool candle_gguf_arr_str(const candle_gguf *g, const char *key, int64_t i,
                                    const char **s, size_t *len);
/* Pointer to a numeric (or bool) array's packed little-endian elements,
 * aligned for the element type (misaligned payloads are copied once at open);
 * NULL for string arrays, arrays of arrays and missing keys. */
CANDLE_API const void *candle_gguf_arr_data(const candle_gguf *g, const char *key);
/* Human-readable value (arrays abbreviated) into buf, for `candle info`. */
/* "u32", "str", "arr", ...; "invalid" out of range. */
CANDLE_API const char *candle_gguf_type_name(candle_gguf_type t);
CANDLE_API const char *candle_gguf_kv_str(const candle_gguf *g, int64_t i, char *buf, size_t n);

/* ---- tensors ---- */
typedef struct candle_gguf_tensor_info {
    const char *name;
    candle_dtype dtype;
    int rank;
    int64_t shape[CANDLE_MAX_RANK]; /* outermost-first */
    size_t offset;                  /* bytes from the file start (= storage data) */
    size_t size;                    /* bytes */
} candle_gguf_tensor_info;

CANDLE_API int64_t candle_gguf_n_tensors(const candle_gguf *g);
CANDLE_API const candle_gguf_tensor_info *candle_gguf_tensor(const candle_gguf *g, int64_t i);
CANDLE_API int64_t candle_gguf_find_tensor(const candle_gguf *g, const char *name);
/* The storage holding the whole file image (the mapping: MMAP, or the
 * no_mmap copy: HEAP), borrowed: retain it to keep it past the handle. */
CANDLE_API candle_storage *candle_gguf_storage(const candle_gguf *g);
/* A zero-copy leaf tensor in ctx viewing tensor `name` (it retains the
 * storage); NULL + CANDLE_ERR_FORMAT on ctx if the file lacks it. */
CANDLE_API candle_tensor *candle_gguf_load_tensor(const candle_gguf *g, candle_ctx *ctx,
                                                  const char *name);

/* ---- writer ----
 * Writes GGUF v3. Setting an existing key replaces its value (so copied
 * metadata can be amended). "general.alignment" set through set_u32 or
 * copy_kv is the same as set_alignment (a power of two; default 32). Tensor
 * names are at most 63 bytes; a rank-0 tensor is stored with shape [1]. */
typedef struct candle_gguf_writer candle_gguf_writer;

CANDLE_API candle_status candle_gguf_writer_init(candle_gguf_writer **out);
CANDLE_API void candle_gguf_writer_free(candle_gguf_writer *w);
CANDLE_API candle_status candle_gguf_writer_set_u32(candle_gguf_writer *w, const char *key,
                                                    uint32_t v);
CANDLE_API candle_status candle_gguf_writer_set_i32(candle_gguf_writer *w, const char *key,
                                                    int32_t v);
CANDLE_API candle_status candle_gguf_writer_set_f32(candle_gguf_writer *w, const char *key,
                                                    float v);
CANDLE_API candle_status candle_gguf_writer_set_bool(candle_gguf_writer *w, const char *key,
                                                     bool v);
CANDLE_API candle_status candle_gguf_writer_set_str(candle_gguf_writer *w, const char *key,
                                                    const char *v);
/* Array of numbers (elem_type a numeric type) or of strings (STRING:
 * data is const char *const *). */
CANDLE_API candle_status candle_gguf_writer_set_arr(candle_gguf_writer *w, const char *key,
                                                    candle_gguf_type elem_type, const void *data,
                                                    int64_t n);
/* Copy every metadata key of an open file (for quantize). */
CANDLE_API candle_status candle_gguf_writer_copy_kv(candle_gguf_writer *w, const candle_gguf *src);
/* Tensor data is copied at write time from data (contiguous, shape
 * outermost-first). */
CANDLE_API candle_status candle_gguf_writer_add_tensor(candle_gguf_writer *w, const char *name,
                                                       candle_dtype dtype, int rank,
                                                       const int64_t *shape, const void *data);
CANDLE_API candle_status candle_gguf_writer_set_alignment(candle_gguf_writer *w, size_t alignment);
CANDLE_API candle_status candle_gguf_writer_write(candle_gguf_writer *w, const char *path);
/* The same file image into a buffer the caller frees with candle_free. */
CANDLE_API candle_status candle_gguf_writer_write_memory(candle_gguf_writer *w, void **data,
                                                         size_t *size);

#ifdef __cplusplus
}
#endif
#endif
