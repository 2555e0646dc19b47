/* Where candle_whisper_load's weights, configuration and tokenizer come
 * from (whisper_src.c: the dispatch, CTranslate2 and Hugging Face
 * directories; whisper_src_ggml.c: whisper.cpp's ggml files).
 *
 * Every source presents its tensors under one vocabulary, CTranslate2
 * WhisperSpec's ("encoder/layer_0/self_attention/linear_0/weight"), with
 * CTranslate2's fused projections: self-attention linear_0 is Q|K|V
 * [3 n_state, n_state], cross-attention linear_1 is K|V. A source that keeps
 * them apart gives the parts in order and a NULL part for Whisper's absent
 * key bias (zeros). */
#ifndef CANDLE_WHISPER_SRC_IMPL_H
#define CANDLE_WHISPER_SRC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "candle/dtype.h"
#include "candle/status.h"
#include "candle/tokenizer.h"

#define WHISPER_MAX_SUPPRESS 1024
#define WHISPER_MAX_LANGS 128
#define WHISPER_MAX_ALIGN 1024 /* alignment heads */

/* Rows [r, r + rows) of a tensor along its first dimension. */
typedef struct wsrc_part {
    const void *data;   /* the bytes, any alignment; NULL: zeros */
    candle_dtype dtype; /* F32, F16, BF16 or a block type (ggml's Q8_0, ...) */
    int64_t rows;
} wsrc_part;

typedef struct wsrc_tensor {
    int rank;         /* 1..3 */
    int64_t shape[3]; /* outermost-first; shape[0] = the parts' rows */
    int n_parts;      /* 1..3 */
    wsrc_part part[3];
} wsrc_tensor;

/* What config.json (CTranslate2), generation_config.json (Hugging Face) or
 * the vocabulary (ggml) says beyond the weights. Ids are unchecked: the
 * model drops those outside its vocabulary. */
typedef struct whisper_cfg {
    int32_t suppress[WHISPER_MAX_SUPPRESS], suppress_begin[WHISPER_MAX_SUPPRESS];
    int n_suppress, n_suppress_begin;
    int32_t lang_ids[WHISPER_MAX_LANGS]; /* the language tokens, in the model's order */
    int n_lang;
    /* alignment heads (layer, head) in any order; none: the model's default */
    int16_t align_l[WHISPER_MAX_ALIGN], align_h[WHISPER_MAX_ALIGN];
    int n_align;
} whisper_cfg;

typedef struct whisper_src whisper_src;
struct whisper_src {
    char path[4096];  /* what was opened, for messages */
    const char *file; /* the weights' file name for messages: "model.bin", ... */
    int64_t n_head;   /* attention heads (encoder and decoder alike) */
    void *impl;
    /* The tensor of a CTranslate2 name; false when the source has none. */
    bool (*find)(const whisper_src *s, const char *name, wsrc_tensor *t);
    /* The tokenizer with Whisper's special tokens by their names
     * ("<|startoftranscript|>", "<|en|>", "<|notimestamps|>", ...). */
    candle_status (*tokenizer)(const whisper_src *s, candle_tokenizer **tok);
    /* The configuration; tok is the source's tokenizer. */
    candle_status (*config)(const whisper_src *s, const candle_tokenizer *tok, whisper_cfg *cfg);
    void (*close)(whisper_src *s);
};

/* Open path as the format it is: a CTranslate2 directory (model.bin), a
 * Hugging Face directory (config.json of model_type "whisper" and
 * safetensors), or a whisper.cpp ggml file. */
candle_status whisper_src_open(whisper_src *s, const char *path, bool no_mmap);
/* Is path a Whisper model of one of these formats (without loading it)? */
bool whisper_src_probe(const char *path);

/* whisper_src_ggml.c: a whisper.cpp ggml file (magic "ggml" little-endian). */
bool whisper_src_ggml_probe(const char *path);
candle_status whisper_src_open_ggml(whisper_src *s, const char *path, bool no_mmap);

#endif
