/* The encoder pipeline's internals (encoder.h), shared by the embedding
 * path (embedder.c) and the classification / rerank heads (encoder_head.c). */
#ifndef CANDLE_EMBEDDER_IMPL_H
#define CANDLE_EMBEDDER_IMPL_H

#include "candle/encoder.h"
#include "core/json-impl.h"
#include "model-impl.h"

#define MAX_DENSE 4

typedef struct dense_layer {
    int64_t n_in, n_out;
    float *w; /* [n_out, n_in] */
    float *b; /* [n_out] or NULL */
    bool tanh;
} dense_layer;

/* What turns scores into the numbers reported. */
typedef enum head_act { HEAD_IDENTITY = 0, HEAD_SIGMOID, HEAD_SOFTMAX } head_act;

/* A sequence-classification head on the first token's state: tanh(pre)
 * when the model has one (BERT's pooler, RoBERTa's classifier.dense), then
 * the projection to the labels. */
typedef struct encoder_head {
    dense_layer pre;   /* [n_embd, n_embd], n_out 0 when absent */
    dense_layer out;   /* [n_labels, n_embd] */
    char **labels;     /* [n_labels], id2label or LABEL_i */
    head_act classify; /* problem_type, else softmax for > 1 label, else `score` */
    head_act score;    /* a cross-encoder's activation_fn (default: sigmoid for 1 label) */
} encoder_head;

struct candle_encoder {
    candle_model *model;
    candle_tokenizer *tok;
    candle_output_kind pool;
    bool normalize;
    dense_layer dense[MAX_DENSE];
    int n_dense;
    int64_t max_tokens;
    int64_t dim;   /* after the Dense layers */
    int64_t width; /* the widest vector along the pipeline */
    encoder_head head; /* out.n_out 0: no classifier */
    /* config_sentence_transformers.json's prompts */
    char **prompt_names, **prompts;
    int64_t n_prompts;
    int64_t default_prompt; /* -1: none */
    bool exclude_prompt;    /* Pooling's include_prompt false */
};

/* Inputs per candle_model_forward of the wrappers, at most: it packs their
 * tokens into graphs of thousands of rows, and the padded id matrix it is
 * handed stays small. */
#define ENCODER_CHUNK 256

/* One chunk's tokenized inputs, their ids (and types) one after another in
 * the workspace's WS_EMB_IDS buffer, which grows while the chunk fills:
 * ids[k] and types[k] are set by tok_chunk_ptrs once it is full. */
typedef struct tok_chunk {
    size_t off[ENCODER_CHUNK]; /* int32 offset of input k's ids; its types follow them */
    int64_t n_ids[ENCODER_CHUNK];
    bool typed[ENCODER_CHUNK];
    const int32_t *ids[ENCODER_CHUNK], *types[ENCODER_CHUNK]; /* types[k] NULL: untyped */
    int n;
    size_t used; /* int32s of the buffer in use */
} tok_chunk;
/* The chunk table of ws, emptied; NULL with the error set on OOM. */
tok_chunk *tok_chunk_begin(model_ws *ws);
/* Appends ids [n] (and types [n], or NULL) as the chunk's next input. */
candle_status tok_chunk_add(model_ws *ws, tok_chunk *c, const int32_t *ids, const int32_t *types, int64_t n);
void tok_chunk_ptrs(model_ws *ws, tok_chunk *c);

candle_status encoder_read_json(const char *path, json_doc **out);
/* Does a module type ("sentence_transformers.models.Pooling", ...) name X? */
bool encoder_type_is(const json_value *type, const char *x);
/* ids of one text, cut to max tokens around the template's special tokens,
 * in ws's WS_TOK_A buffer (valid until the next tokenization in ws). */
candle_status encoder_tokenize(const candle_encoder *e, model_ws *ws, const char *text, size_t len,
                               bool no_truncate, const int32_t **ids, int64_t *n);
void encoder_dense_apply(const dense_layer *L, const float *x, float *y);
/* The pooled states [n, n_embd] of n tokenized inputs (ids[k], n_ids[k];
 * types NULL or types[k] NULL: all 0) in one candle_model_forward. */
candle_status encoder_forward_pooled(const candle_model *m, model_ws *ws, const int32_t *const *ids,
                                     const int32_t *const *types, const int64_t *n_ids, int64_t n,
                                     candle_output_kind kind, float *pooled);
/* The classifier head of the model's weights (cls.*), if any, with its labels
 * and activations from the directory's config files. */
candle_status encoder_head_load(candle_encoder *e, const char *dir);
void encoder_head_free(encoder_head *h);

#endif
