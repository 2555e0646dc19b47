/* Weight-source internals: the entries every source lists, the metadata a
 * source adds (or, for a directory, all of it) and the adapters' entry
 * points. */
#ifndef CANDLE_WEIGHTS_IMPL_H
#define CANDLE_WEIGHTS_IMPL_H

#include "candle/safetensors.h"
#include "candle/weights.h"
#include "core/core-impl.h"
#include "core/json-impl.h"

/* A GPTQ / AWQ linear's packed tensors (weights_quant.c). */
typedef struct weights_qlinear {
    const candle_safetensors *st[4];
    const candle_safetensors_tensor_info *t[4]; /* qweight, qzeros, scales, g_idx (or NULL) */
    int64_t in, out, n_groups;
    bool contiguous; /* every input's group is i / group_size */
    /* act-order (not contiguous): the block type the linear takes with its
     * inputs sorted by group (CANDLE_DTYPE_F32 when a group's size is no
     * multiple of 32, so sorting leaves blocks that span two groups) */
    candle_dtype sorted_dtype;
} weights_qlinear;

/* What loading does to a tensor beyond viewing it. */
typedef enum weights_xform {
    XF_NONE = 0,
    XF_F32,     /* converted to f32 (norm weights and biases of a half model) */
    XF_ADD_ONE, /* f32 of 1 + w (Gemma's norms as stored by transformers) */
} weights_xform;

typedef struct weights_entry {
    candle_weights_tensor_info info;
    int shard;        /* the directory's file holding it; -1 for GGUF or made */
    weights_xform xf;
    const float *made; /* f32 values an adapter made (w->made), or NULL */
    /* A directory's experts stacked as one [n_parts, rows, cols] tensor
     * (GGUF's ffn_*_exps): the per-expert entries in expert order, copied
     * into one buffer at load. NULL otherwise. */
    struct weights_entry *parts;
    int64_t n_parts;
    size_t part_off; /* as a part: where its bytes start in its source tensor */
    /* A GPTQ / AWQ linear (weights_quant.c): its packed tensors, repacked
     * into info.dtype at load. NULL otherwise. */
    struct weights_qlinear *q;
} weights_entry;

/* A tensor an adapter makes from the configuration where GGUF has one
 * (Llama 3.1's rope_freqs.weight, Phi-3's rope_factors_short/long.weight,
 * which llama.cpp's converter writes): f32 [n]. */
typedef struct weights_made {
    char *name;
    float *v; /* [n] */
    int64_t n;
} weights_made;

/* A metadata value the source provides (a GGUF source adds a few to its
 * file's; a directory's all come from its JSON files). */
typedef struct weights_kv {
    char *key;
    candle_gguf_type type; /* INT64, FLOAT64, BOOL or STRING */
    int64_t i;
    double f;
    bool b;
    char *s;
    size_t len;
} weights_kv;

struct candle_weights {
    candle_weights_format format;
    char *path;
    candle_gguf *gguf;           /* GGUF */
    candle_safetensors **shards; /* directory: [n_shards] */
    char **shard_names;          /* [n_shards], file names inside the directory */
    int n_shards;
    weights_entry *entries;      /* [n_entries] */
    int64_t n_entries;
    cdl_name_ref *by_name;        /* [n_entries] sorted by name */
    weights_kv *kv;              /* [n_kv] */
    int64_t n_kv, cap_kv;
    const struct hf_family *hf;  /* directory: the model_type's mapping */
    weights_made *made;          /* [n_made] */
    int n_made;
    struct hf_quant *quant;      /* directory: config.json's quantization_config, or NULL */
};

/* ---- shared by the adapters (weights.c) ---- */
candle_status weights_add_i64(candle_weights *w, const char *key, int64_t v);
candle_status weights_add_f64(candle_weights *w, const char *key, double v);
candle_status weights_add_bool(candle_weights *w, const char *key, bool v);
candle_status weights_add_str(candle_weights *w, const char *key, const char *s, size_t len);
const weights_kv *weights_find_kv(const candle_weights *w, const char *key);
/* A made f32 tensor [n] of the values v (copied), listed with the source's. */
candle_status weights_add_made(candle_weights *w, const char *name, const float *v, int64_t n);
/* Sort the entries' index; refuses two tensors mapped to one name. */
candle_status weights_index(candle_weights *w);
char *weights_strdup(const char *s);

/* ---- the Hugging Face directory adapter (weights_hf.c) ---- */
candle_status weights_open_hf(candle_weights *w, const candle_weights_params *p);

/* ---- the model_type tables (hf_families.c) ---- */
typedef struct hf_family hf_family;
/* The family of config.json's model_type, or NULL. */
const hf_family *hf_family_find(const char *model_type, size_t len);
const char *hf_family_model_type(const hf_family *f);
/* "llama, qwen2, ..." for messages. */
const char *hf_family_list(void);
/* Translate config.json into metadata on w (errors name config.json's field). */
candle_status hf_family_config(const hf_family *f, candle_weights *w, const json_value *cfg,
                               const char *cfg_name);
/* The GGUF name of a tensor of the directory into buf, and how loading
 * transforms it; false if the family has no such tensor. */
bool hf_family_tensor(const hf_family *f, const char *hf_name, char *buf, size_t n,
                      weights_xform *xf);
/* The directory's name of a GGUF tensor name into buf; false if none. */
bool hf_family_src_name(const hf_family *f, const char *gguf_name, char *buf, size_t n);
/* Tensors a checkpoint may hold that no model uses (buffers saved by old
 * versions of transformers). */
bool hf_family_ignored(const char *hf_name);

/* ---- GPTQ and AWQ checkpoints (weights_quant.c) ---- */
/* config.json's quantization_config onto w->quant (none: nothing); refuses
 * a method, bit width, group size or packing it does not implement, naming
 * the field and value. */
candle_status hf_quant_config(candle_weights *w, const json_value *cfg);
/* Is src a packed linear's tensor (".qweight", ".qzeros", ".scales",
 * ".g_idx") of a quantized directory? *is_weight for the qweight, which
 * stands for the linear: its "<prefix>.weight" goes into buf. */
bool hf_quant_part(const candle_weights *w, const char *src, bool *is_weight, char *buf, size_t n);
/* Every linear's packed tensors found and checked (dtypes, shapes, zero
 * points, g_idx) and its load dtype chosen; a packed tensor without its
 * qweight is refused. */
candle_status hf_quant_entries(candle_weights *w);
/* The linear's weight [out, in] as info.dtype, in ctx. With order (not
 * NULL) an act-order linear whose sorted form has a block type comes with
 * its inputs sorted by group instead: column j holds input (*order)[j], an
 * i32 [in] tensor; *order is NULL when the columns are in order. With corr
 * (not NULL) an asymmetric 4-bit linear whose groups can be summed comes as
 * Q4_0 of its codes plus *corr, f32 [out, in / *group]: the weight is the
 * Q4_0 one plus corr[o][j / *group] at column j; *corr is NULL otherwise. */
candle_tensor *hf_quant_load(const candle_weights *w, const weights_entry *e, candle_ctx *ctx,
                             const char *name, candle_tensor **order, candle_tensor **corr, int64_t *group);
void hf_quant_free(candle_weights *w);

#endif
