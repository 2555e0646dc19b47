/* whisper.cpp's ggml model files (ggml-tiny.en.bin, ggml-base-q5_0.bin, ...):
 * a validating reader over a read-only mapping of the file.
 *
 * Layout (whisper.cpp src/whisper.cpp whisper_model_load, the writers
 * models/convert-pt-to-ggml.py, convert-h5-to-ggml.py and examples/quantize),
 * all little-endian, packed with no alignment or padding:
 *   u32 magic 0x67676d6c ("ggml")
 *   11 x i32 hparams: n_vocab, n_audio_ctx, n_audio_state, n_audio_head,
 *     n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer,
 *     n_mels, ftype (the file type; the quantize tool adds 1000 x its
 *     quantization version, GGML_QNT_VERSION 2 today)
 *   mel filters: i32 n_mel, i32 n_fft, n_mel x n_fft f32
 *   vocabulary: i32 count, then each token: u32 length, the bytes (no NUL)
 *   tensors until the end of the file, each: i32 n_dims, i32 name length,
 *     i32 ggml type, n_dims x i32 dims innermost-first (ggml's ne), the name
 *     (no NUL), the data (rows of ne[0] elements, whole blocks)
 *
 * Stricter than whisper.cpp, which reads what it expects and stops at the
 * first short read: every hparam but ftype must be positive and ftype not
 * negative; a tensor has 1..4 dims, each positive; its name is non-empty,
 * holds no NUL and appears once; its type is one Candle stores (F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q8_K: others are refused by
 * ggml's name); ne[0] is a whole number of blocks; and the file must end
 * exactly after a tensor's data (a partial header is truncation, not the
 * end). Which tensors a Whisper model needs is the caller's business (see
 * src/models/whisper_src_ggml.c). A malformed file gives CANDLE_ERR_FORMAT
 * with "<file>: <tensor or field>: <problem> (at byte N)" in the
 * thread-local last error.
 *
 * Tensors and tokens start at any byte: load_tensor gives a zero-copy view
 * when the data happens to be aligned for its type and a copy otherwise;
 * info.data always points into the image. */
#ifndef CANDLE_GGML_WHISPER_H
#define CANDLE_GGML_WHISPER_H

#include "api.h"
#include "quantize.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CANDLE_GGML_WHISPER_MAGIC 0x67676d6cu
#define CANDLE_GGML_WHISPER_MAX_DIMS 4

typedef struct candle_ggml_whisper candle_ggml_whisper;

typedef struct candle_ggml_whisper_open_params {
    bool no_mmap; /* read the file into anonymous memory instead of mapping it */
} candle_ggml_whisper_open_params;

typedef struct candle_ggml_whisper_hparams {
    int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels;
    int32_t ftype; /* as stored: the file type + 1000 x the quantization version */
} candle_ggml_whisper_hparams;

/* NULL params = mmap. Errors (io, format) go to the thread-local last
 * error; *out is NULL then. */
CANDLE_API candle_status candle_ggml_whisper_open(candle_ggml_whisper **out, const char *path,
                                                  const candle_ggml_whisper_open_params *p);
/* Parse an in-memory image (not copied; it must outlive the handle and every
 * tensor loaded from it). name is for messages (NULL: "ggml"). */
CANDLE_API candle_status candle_ggml_whisper_open_memory(candle_ggml_whisper **out,
                                                         const void *data, size_t size,
                                                         const char *name);
/* Tensors loaded from the handle stay valid after it. NULL is a no-op. */
CANDLE_API void candle_ggml_whisper_close(candle_ggml_whisper *m);

/* Whether the first n bytes look like a whisper.cpp file: the magic and 11
 * hparams of which the first ten are positive (GGUF files start "GGUF", and
 * llama.cpp's old ggml/ggjt files have other hparams): a cheap probe for
 * tools, not a validation. */
CANDLE_API bool candle_ggml_whisper_probe(const void *head, size_t n);

CANDLE_API const candle_ggml_whisper_hparams *candle_ggml_whisper_get_hparams(
    const candle_ggml_whisper *m);
CANDLE_API size_t candle_ggml_whisper_file_size(const candle_ggml_whisper *m);
/* The storage holding the whole image, borrowed. */
CANDLE_API candle_storage *candle_ggml_whisper_storage(const candle_ggml_whisper *m);
/* ggml's name of a ggml type id ("q5_0", "iq2_xxs", ...) or "?". */
CANDLE_API const char *candle_ggml_type_name(int ggml_type);

/* The mel filters: n_mel x n_fft little-endian f32 at any alignment in the
 * image (NULL when empty). */
CANDLE_API const void *candle_ggml_whisper_mel_filters(const candle_ggml_whisper *m,
                                                       int32_t *n_mel, int32_t *n_fft);

/* ---- the vocabulary, in file order (the id is the index) ---- */
CANDLE_API int64_t candle_ggml_whisper_n_tokens(const candle_ggml_whisper *m);
/* Token i's bytes in the image (not NUL-terminated) and length; false when
 * out of range. */
CANDLE_API bool candle_ggml_whisper_token(const candle_ggml_whisper *m, int64_t i,
                                          const char **bytes, size_t *len);

/* ---- tensors, in file order ---- */
typedef struct candle_ggml_whisper_tensor_info {
    const char *name;        /* NUL-terminated copy */
    int ggml_type;           /* as stored (GGML_TYPE_*) */
    candle_dtype dtype;      /* the same type in Candle */
    int rank;                /* 1..4 */
    int64_t shape[CANDLE_GGML_WHISPER_MAX_DIMS]; /* outermost-first (ne reversed) */
    size_t offset;           /* of the data, bytes from the file start */
    size_t size;             /* bytes */
    const void *data;        /* the bytes in the image: any alignment */
} candle_ggml_whisper_tensor_info;

CANDLE_API int64_t candle_ggml_whisper_n_tensors(const candle_ggml_whisper *m);
/* NULL when i is out of range. */
CANDLE_API const candle_ggml_whisper_tensor_info *candle_ggml_whisper_tensor(
    const candle_ggml_whisper *m, int64_t i);
/* Index of a tensor by name, or -1. */
CANDLE_API int64_t candle_ggml_whisper_find_tensor(const candle_ggml_whisper *m,
                                                   const char *name);
/* A leaf tensor in ctx: a view of the image when the bytes are aligned for
 * the type, else a copy. Errors on ctx: CANDLE_ERR_FORMAT when the file
 * lacks it. */
CANDLE_API candle_tensor *candle_ggml_whisper_load_tensor(const candle_ggml_whisper *m,
                                                          candle_ctx *ctx, const char *name);

/* ---- writing: `candle quantize` for Whisper (src/models/whisper_quantize.c) ---- */
typedef struct candle_ggml_whisper_write_params {
    bool no_mmap;                         /* read the source into memory */
    candle_quantize_progress_fn progress; /* once per tensor (bytes_* count tensors); NULL: none */
    void *progress_user;
    candle_quantize_stats *stats; /* filled when not NULL */
} candle_ggml_whisper_write_params;

/* The types candle_whisper_write_ggml writes, for usage text. */
CANDLE_API const char *candle_whisper_ggml_types(void);
/* Write the Whisper model at `model` (any candle_whisper_load reads) as a whisper.cpp
 * file of `type` at `out` (through out.tmp, renamed when complete): the
 * linear weights and the token embedding in type, the conv kernels in f16
 * (f32 when type is f32), the rest f32, as whisper.cpp's converter and
 * quantize tool lay it out, so whisper.cpp loads it. Types: f32, f16,
 * q8_0, q5_0, q5_1, q4_0, q4_1, q2_k..q6_k; a type whose block does not
 * divide the model's width is refused (CANDLE_ERR_UNSUPPORTED), since
 * whisper.cpp keeps every matrix in the file type. */
CANDLE_API candle_status candle_whisper_write_ggml(const char *model, const char *out,
                                                   candle_dtype type,
                                                   const candle_ggml_whisper_write_params *p);

#ifdef __cplusplus
}
#endif
#endif
