/* CTranslate2 model.bin files (the weights of a CTranslate2 model directory,
 * e.g. the faster-whisper packages): a validating reader over a read-only
 * mapping of the file. The config.json and vocabulary beside it are not read
 * here.
 *
 * Layout (ctranslate2 src/models/model.cc, python/.../specs/model_spec.py),
 * all little-endian, packed with no alignment or padding:
 *   u32 binary version (1..6; the converters write 6)
 *   version >= 2: string spec name ("WhisperSpec"), u32 spec revision
 *   u32 n_vars; each: string name, u8 rank, rank x u32 dims,
 *     version >= 4: u8 dtype id (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16),
 *                   u32 nbytes
 *     version < 4:  u8 item size (4 f32, 2 i16, 1 i8), u32 element count
 *     then the data
 *   version >= 3: u32 n_aliases; each: string alias, string target
 * A string is a u16 length counting a terminating NUL, then the bytes. The
 * file must end there.
 *
 * An alias names another variable (Whisper's decoder/projection/weight is
 * decoder/embeddings/weight): CTranslate2 registers it only when its target
 * (a variable or an earlier alias) exists and its own name is not taken;
 * find_var resolves aliases the same way.
 *
 * Stricter than CTranslate2 where it only tolerates a malformed file: a
 * string must end in its NUL and hold no other (ctranslate2 drops the last
 * byte unread), names must be non-empty and unique, nbytes must equal the
 * shape's size (ctranslate2 checks this too), and nothing may follow the
 * aliases. A malformed file gives CANDLE_ERR_FORMAT with
 * "<file>: <variable or field>: <problem>" in the thread-local last error.
 *
 * Variables start at any byte (the format has no alignment): load_tensor
 * gives a zero-copy view when the data happens to be aligned for its type
 * and a copy otherwise; info.data always points into the image. */
#ifndef CANDLE_CT2_H
#define CANDLE_CT2_H

#include "api.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CANDLE_CT2_MAX_VERSION 6

typedef enum candle_ct2_dtype {
    CANDLE_CT2_F32 = 0,
    CANDLE_CT2_I8,
    CANDLE_CT2_I16,
    CANDLE_CT2_I32,
    CANDLE_CT2_F16,
    CANDLE_CT2_BF16,
    CANDLE_CT2_DTYPE_COUNT
} candle_ct2_dtype;

typedef struct candle_ct2 candle_ct2;

typedef struct candle_ct2_open_params {
    bool no_mmap; /* read the file into anonymous memory instead of mapping it */
} candle_ct2_open_params;

/* NULL params = mmap. Errors (io, format) go to the thread-local last
 * error; *out is NULL then. */
CANDLE_API candle_status candle_ct2_open(candle_ct2 **out, const char *path,
                                         const candle_ct2_open_params *p);
/* Parse an in-memory image (not copied; it must outlive the handle and every
 * tensor loaded from it). name is for messages (NULL: "ct2"). */
CANDLE_API candle_status candle_ct2_open_memory(candle_ct2 **out, const void *data, size_t size,
                                                const char *name);
/* Tensors loaded from the handle stay valid after it (they hold the image).
 * NULL is a no-op. */
CANDLE_API void candle_ct2_close(candle_ct2 *m);

/* Whether the first n bytes of a file look like a model.bin header (a
 * version 2..6 and a NUL-terminated spec name ending in "Spec"): a cheap
 * probe for tools, not a validation. */
CANDLE_API bool candle_ct2_probe(const void *head, size_t n);

CANDLE_API uint32_t candle_ct2_version(const candle_ct2 *m);
/* "" for version 1 files, which have none. */
CANDLE_API const char *candle_ct2_spec(const candle_ct2 *m);
CANDLE_API uint32_t candle_ct2_revision(const candle_ct2 *m);
CANDLE_API size_t candle_ct2_file_size(const candle_ct2 *m);
/* The storage holding the whole image, borrowed. */
CANDLE_API candle_storage *candle_ct2_storage(const candle_ct2 *m);
CANDLE_API const char *candle_ct2_dtype_name(candle_ct2_dtype t);

/* ---- variables, in file order ---- */
typedef struct candle_ct2_var_info {
    const char *name;
    candle_ct2_dtype ct2_dtype;
    candle_dtype dtype;      /* what load_tensor gives (I32 for I16, widened exactly) */
    int rank;                /* 0: a scalar (the spec's attributes, e.g. num_heads) */
    int64_t shape[CANDLE_MAX_RANK]; /* outermost-first */
    size_t offset;           /* bytes from the file start */
    size_t size;             /* bytes */
    const void *data;        /* the bytes in the image: any alignment */
} candle_ct2_var_info;

CANDLE_API int64_t candle_ct2_n_vars(const candle_ct2 *m);
/* NULL when i is out of range. */
CANDLE_API const candle_ct2_var_info *candle_ct2_var(const candle_ct2 *m, int64_t i);
/* Index of a variable by name or alias, or -1. */
CANDLE_API int64_t candle_ct2_find_var(const candle_ct2 *m, const char *name);

/* ---- aliases, in file order ---- */
CANDLE_API int64_t candle_ct2_n_aliases(const candle_ct2 *m);
/* Entry i: alias and target names and the variable it resolves to (-1 when
 * CTranslate2 would ignore it). false when out of range; outs may be NULL. */
CANDLE_API bool candle_ct2_alias(const candle_ct2 *m, int64_t i, const char **alias,
                                 const char **target, int64_t *var);

/* A leaf tensor in ctx named `name` (a variable or alias): a view of the
 * image when the bytes are aligned for the type, else a copy (I16 widened
 * to I32). Errors on ctx: CANDLE_ERR_FORMAT when the file lacks it. */
CANDLE_API candle_tensor *candle_ct2_load_tensor(const candle_ct2 *m, candle_ctx *ctx,
                                                 const char *name);

#ifdef __cplusplus
}
#endif
#endif
