/* Weight sources: named tensors plus typed metadata, from a GGUF file or a
 * Hugging Face model directory (config.json + *.safetensors, sharded or not).
 *
 * Models look everything up here by one vocabulary, GGUF's: tensor names
 * such as "blk.0.attn_q.weight" and metadata keys such as
 * "llama.block_count". Each source adapter translates its format into that
 * vocabulary and keeps its converter's conventions to itself, so the
 * architectures see the same weights whichever file they came from:
 * - a Hugging Face directory's names and config.json fields are mapped per
 *   model_type; its norm weights and biases are given as f32; Gemma's norm
 *   weights w are given as the (1 + w) they multiply by;
 * - "candle.rope.interleaved" (bool) says whether the q/k projection rows
 *   pair RoPE dimensions (2i, 2i+1), as llama.cpp's converter permutes Llama
 *   weights, rather than (i, i + d/2) as Hugging Face stores them.
 * Also "tokenizer.chat_template" from tokenizer_config.json.
 *
 * Errors go to the thread-local last error, naming the file, the field and
 * the reason. A source is read-only after open and may be shared by threads;
 * tensors loaded from it keep their storage alive past close. */
#ifndef CANDLE_WEIGHTS_H
#define CANDLE_WEIGHTS_H

#include "api.h"
#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_weights candle_weights;

typedef enum candle_weights_format {
    CANDLE_WEIGHTS_GGUF = 0,
    CANDLE_WEIGHTS_HF_DIR, /* Hugging Face directory of safetensors */
} candle_weights_format;

typedef struct candle_weights_params {
    bool no_mmap; /* read the weights into memory instead of mapping */
} candle_weights_params;

/* path: a GGUF file, or a directory holding config.json (and
 * model.safetensors or model.safetensors.index.json with its shards).
 * p may be NULL. */
CANDLE_API candle_status candle_weights_open(candle_weights **out, const char *path,
                                             const candle_weights_params *p);
CANDLE_API void candle_weights_close(candle_weights *w);
/* Is path a directory (a Hugging Face model) rather than a file? */
CANDLE_API bool candle_weights_path_is_dir(const char *path);

CANDLE_API candle_weights_format candle_weights_get_format(const candle_weights *w);
/* "gguf" or "safetensors". */
CANDLE_API const char *candle_weights_format_name(const candle_weights *w);
/* The path given to open. */
CANDLE_API const char *candle_weights_path(const candle_weights *w);
/* Bytes of the files holding the weights (every shard). */
CANDLE_API size_t candle_weights_file_size(const candle_weights *w);
/* Files holding the weights (1 for GGUF). */
CANDLE_API int candle_weights_n_files(const candle_weights *w);
/* The GGUF file of a GGUF source, else NULL. */
CANDLE_API const candle_gguf *candle_weights_gguf(const candle_weights *w);

/* ---- metadata, by GGUF key ----
 * Scalars convert as candle_gguf_get_* do: integers of any width that fit,
 * floats from f32/f64 or exactly representable integers. */
CANDLE_API bool candle_weights_get_i64(const candle_weights *w, const char *key, int64_t *out);
CANDLE_API bool candle_weights_get_f64(const candle_weights *w, const char *key, double *out);
CANDLE_API bool candle_weights_get_bool(const candle_weights *w, const char *key, bool *out);
CANDLE_API bool candle_weights_get_str(const candle_weights *w, const char *key, const char **s,
                                       size_t *len);
/* Listing, for `candle info`: key i and its value as text. */
CANDLE_API int64_t candle_weights_n_kv(const candle_weights *w);
CANDLE_API const char *candle_weights_key(const candle_weights *w, int64_t i);
CANDLE_API candle_gguf_type candle_weights_kv_type(const candle_weights *w, int64_t i);
CANDLE_API const char *candle_weights_kv_str(const candle_weights *w, int64_t i, char *buf,
                                             size_t n);

/* ---- tensors, by GGUF name ---- */
typedef struct candle_weights_tensor_info {
    const char *name;     /* GGUF name */
    const char *src_name; /* the name in its file (= name for GGUF) */
    const char *file;     /* the file holding it (a shard's name for a directory) */
    candle_dtype dtype;   /* as loaded (CANDLE_DTYPE_COUNT: cannot be loaded) */
    int rank;
    int64_t shape[CANDLE_MAX_RANK]; /* outermost-first */
    size_t offset;                  /* where its bytes start in its file */
    size_t size;                    /* bytes as stored in the file */
} candle_weights_tensor_info;

CANDLE_API int64_t candle_weights_n_tensors(const candle_weights *w);
CANDLE_API const candle_weights_tensor_info *candle_weights_tensor(const candle_weights *w,
                                                                   int64_t i);
/* Index of a tensor, or -1. */
CANDLE_API int64_t candle_weights_find_tensor(const candle_weights *w, const char *name);
/* A leaf tensor in ctx: a zero-copy view of the file where the tensor is used
 * as stored, else a converted copy. NULL with the error on ctx (format:
 * missing, naming the source's own name; unsupported: a dtype it cannot
 * convert). */
CANDLE_API candle_tensor *candle_weights_load_tensor(const candle_weights *w, candle_ctx *ctx,
                                                     const char *name);
/* A linear's weight [out, in] in the form its products run fastest: as
 * candle_weights_load_tensor loads it, except a GPTQ act-order linear,
 * whose groups are contiguous only once its inputs are sorted by g_idx. That
 * one comes in sorted order as its block type (column j holds input
 * (*in_order)[j], an i32 [in] tensor in ctx), so x W^T = x[:, in_order] W'^T:
 * index_select the activations' last dim by in_order before the product.
 * *in_order is NULL when the columns are in order. */
CANDLE_API candle_tensor *candle_weights_load_linear(const candle_weights *w, candle_ctx *ctx,
                                                     const char *name, candle_tensor **in_order);
/* As candle_weights_load_linear, but an asymmetric 4-bit linear (AWQ, GPTQ
 * with sym false: W = s * (q - z)) whose groups are whole 32-blocks of one
 * size comes split: the weight is Q4_0 of its codes (s * (q - 8)) and
 * *group_corr, f32 [out, in / *group], holds each group's s * (8 - z), so
 *     W[o][j] = weight[o][j] + (*group_corr)[o][j / *group]   (exactly)
 *     x W^T   = x' weight^T + groupsum(x') group_corr^T
 * (candle_matmul_group_corr of weight^T and group_corr^T),
 * x' the activations in in_order's order and groupsum(x')[g] the sum of
 * x'[g * group .. (g + 1) * group). The weight alone is not the linear:
 * only a caller that adds the correction may ask for this form (the other
 * loaders give such a linear as Q5_0, which holds it whole). *group_corr is
 * NULL (and *group 0) for every other linear, loaded as
 * candle_weights_load_linear loads it. */
CANDLE_API candle_tensor *candle_weights_load_linear_split(const candle_weights *w, candle_ctx *ctx,
                                                           const char *name, candle_tensor **in_order,
                                                           candle_tensor **group_corr, int64_t *group);
/* The name a GGUF tensor name has in this source's files ("blk.0.attn_q.weight"
 * -> "model.layers.0.self_attn.q_proj.weight"), for messages about a tensor
 * that is missing; name itself when there is no mapping. */
CANDLE_API const char *candle_weights_src_name(const candle_weights *w, const char *name,
                                               char *buf, size_t n);

/* The GGUF name of a Hugging Face tensor name ("model.layers.0.self_attn.q_proj.weight"
 * -> "blk.0.attn_q.weight") for this source's architecture: a directory's
 * model_type table, or for a GGUF file the table of the model_type spelled
 * as its general.architecture. False when the family has no such tensor
 * (or no table). Used to place adapters (lora.h) saved in Hugging Face
 * names on a model from either source. */
CANDLE_API bool candle_weights_map_hf_name(const candle_weights *w, const char *hf_name, char *buf,
                                           size_t n);

#ifdef __cplusplus
}
#endif
#endif
