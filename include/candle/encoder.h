/* Sentence embeddings: an encoder model, its tokenizer and the
 * sentence-transformers pipeline of its directory (modules.json: Pooling,
 * Dense, Normalize; sentence_bert_config.json's max_seq_length), as
 * `SentenceTransformer(path).encode(texts)` computes them; classification
 * and reranking with a model's classifier head.
 *
 * A candle_encoder is read-only after load: one may embed on many threads
 * at once. Errors go to the thread-local last error (candle_last_errmsg). */
#ifndef CANDLE_ENCODER_H
#define CANDLE_ENCODER_H

#include "api.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_encoder candle_encoder;

typedef struct candle_encoder_params {
    int n_threads; /* 0 = default */
    bool no_mmap;
    candle_dtype weight_dtype; /* as candle_model_params.weight_dtype (0: as stored) */
} candle_encoder_params;

CANDLE_API candle_encoder_params candle_encoder_default_params(void);

/* path: a Hugging Face directory (config.json, safetensors, tokenizer.json;
 * modules.json when it is a sentence-transformers model, else mean pooling
 * without normalisation). */
CANDLE_API candle_status candle_encoder_load(candle_encoder **out, const char *path,
                                             const candle_encoder_params *p);
CANDLE_API void candle_encoder_free(candle_encoder *e);

/* The model and tokenizer inside (owned by the encoder). */
CANDLE_API const candle_model *candle_encoder_model(const candle_encoder *e);
CANDLE_API const candle_tokenizer *candle_encoder_tokenizer(const candle_encoder *e);
/* Embedding size after the pipeline's Dense layers. */
CANDLE_API int64_t candle_encoder_dim(const candle_encoder *e);
/* Tokens an input is cut to (sentence_bert_config.json's max_seq_length,
 * at most the model's positions). */
CANDLE_API int64_t candle_encoder_max_tokens(const candle_encoder *e);

/* config_sentence_transformers.json's prompts: the text of the prompt
 * named name (NULL: the default_prompt_name's), NULL when there is none. */
CANDLE_API const char *candle_encoder_prompt(const candle_encoder *e, const char *name);
/* The name of prompt i (0-based, in the file's order); NULL out of range. */
CANDLE_API const char *candle_encoder_prompt_name(const candle_encoder *e, int64_t i);

typedef enum candle_pooling {
    CANDLE_POOLING_DEFAULT = 0, /* what modules.json says */
    CANDLE_POOLING_MEAN,
    CANDLE_POOLING_CLS,
    CANDLE_POOLING_LAST,
    CANDLE_POOLING_MAX,
} candle_pooling;

typedef struct candle_embed_params {
    candle_pooling pooling;
    int normalize;      /* -1: as modules.json says; 0: no; 1: L2-normalise */
    int64_t dimensions; /* 0: all; else keep the first N (Matryoshka), normalised after if normalising */
    bool no_truncate;   /* refuse an input longer than max_tokens instead of cutting it */
    int64_t *n_tokens;  /* optional out [n]: the tokens each input ran with (after any cut) */
    /* Text prepended to every text input, as sentence-transformers'
     * encode(prompt=..., prompt_name=...) does: prompt when non-NULL ("" for
     * none), else the prompt named prompt_name in
     * config_sentence_transformers.json's prompts, else its
     * default_prompt_name's (none when it has none). Token-id inputs get none. */
    const char *prompt_name;
    const char *prompt;
} candle_embed_params;

CANDLE_API candle_embed_params candle_embed_default_params(void);

/* Embed n texts (texts[i] of lens[i] bytes; lens NULL: NUL-terminated) into
 * out [n, dim] (dim: candle_encoder_dim, or p->dimensions), out_len floats.
 * CANDLE_ERR_INVALID_ARG: a short buffer, an empty text, a text too long
 * with no_truncate (the prompt's tokens count), dimensions out of range, a
 * prompt_name the model does not have. */
CANDLE_API candle_status candle_encoder_embed(const candle_encoder *e, const char *const *texts,
                                              const size_t *lens, int64_t n,
                                              const candle_embed_params *p, float *out,
                                              size_t out_len);

/* The token ids candle_encoder_embed runs for one text (len bytes; SIZE_MAX:
 * NUL-terminated) under p (its prompt and no_truncate; NULL: the defaults)
 * into ids [cap], their count in *n_ids (at most max_tokens, so cap =
 * candle_encoder_max_tokens always suffices). candle_encoder_embed_tokens on
 * them gives candle_encoder_embed's rows: a server tokenizes each request
 * apart (its own errors) and embeds several requests' inputs in one call.
 * CANDLE_ERR_INVALID_ARG: as candle_encoder_embed for one text, or cap too
 * small. */
CANDLE_API candle_status candle_encoder_tokenize(const candle_encoder *e, const char *text, size_t len,
                                                 const candle_embed_params *p, int32_t *ids, size_t cap,
                                                 int64_t *n_ids);

/* The same for inputs given as token ids (used as given: no special tokens
 * are added; a cut keeps the first max_tokens). */
CANDLE_API candle_status candle_encoder_embed_tokens(const candle_encoder *e,
                                                     const int32_t *const *ids,
                                                     const int64_t *n_ids, int64_t n,
                                                     const candle_embed_params *p, float *out,
                                                     size_t out_len);

/* ---- sequence classification and cross-encoder reranking ----
 * A model with a classifier head (BertForSequenceClassification,
 * XLMRobertaForSequenceClassification and the like: transformers'
 * `classifier.*`, BERT's `pooler.dense.*`; GGUF `cls.*`, `cls.output.*`):
 * logits = out(tanh(pre(first token's state))). */

/* Labels of the head: 0 when the model has none. */
CANDLE_API int64_t candle_encoder_n_labels(const candle_encoder *e);
/* Label i's name (config.json's id2label, else "LABEL_i"); NULL out of range. */
CANDLE_API const char *candle_encoder_label(const candle_encoder *e, int64_t i);

/* Options of classify and rerank; zero-initialised (or NULL) = the defaults. */
typedef struct candle_head_params {
    bool no_truncate;  /* refuse an input (a pair) longer than max_tokens instead of cutting it */
    int64_t *n_tokens; /* optional out [n]: the tokens each input (pair) ran with, after any cut */
} candle_head_params;

/* Classify n texts (lens NULL: NUL-terminated) into probs_out [n, n_labels]
 * (cap floats), activated as transformers' text-classification pipeline
 * does: config.json's problem_type (single_label_classification: softmax,
 * multi_label_classification: sigmoid, regression: none); without one,
 * softmax over several labels and a single label as candle_encoder_rerank
 * scores it. Inputs longer than max_tokens are cut (sentence-transformers'
 * rule) unless p->no_truncate. CANDLE_ERR_INVALID_ARG: no head, a short
 * buffer, an empty text, a text too long with no_truncate. */
CANDLE_API candle_status candle_encoder_classify(const candle_encoder *e, const char *const *texts,
                                                 const size_t *lens, int64_t n,
                                                 const candle_head_params *p, float *probs_out,
                                                 size_t cap);

/* Score n documents against a query (qlen SIZE_MAX: NUL-terminated; lens
 * NULL: NUL-terminated docs) into scores_out [n], as sentence-transformers'
 * CrossEncoder.predict does: the pair template of the tokenizer (token
 * types 1 for the document where the model has a token-type table), cut
 * longest-first to max_tokens, the one logit through activation_fn
 * (config_sentence_transformers.json; default sigmoid). Not sorted.
 * CANDLE_ERR_INVALID_ARG: no head, a head with more than one label, a pair
 * too long with p->no_truncate. */
CANDLE_API candle_status candle_encoder_rerank(const candle_encoder *e, const char *query, size_t qlen,
                                               const char *const *docs, const size_t *lens, int64_t n,
                                               const candle_head_params *p, float *scores_out);

/* ---- the heads on tokenized inputs ----
 * What candle_encoder_classify and candle_encoder_rerank run once their
 * texts are tokenized (they are wrappers over these): a server tokenizes
 * each request apart (its own errors, its own truncate) and scores several
 * requests' inputs in one call; the library packs them without padding. */

/* The ids (and token types) classify runs for one text (b NULL; types all
 * 0) or rerank for the pair a, b (alen, blen SIZE_MAX: NUL-terminated),
 * cut as those say unless p->no_truncate (NULL: the defaults), into ids
 * [cap] and types [cap] (types may be NULL), their count in *n_ids (at
 * most max_tokens, so cap = candle_encoder_max_tokens always suffices).
 * CANDLE_ERR_INVALID_ARG: an input too long with no_truncate, an empty
 * text, cap too small. */
CANDLE_API candle_status candle_encoder_tokenize_pair(const candle_encoder *e, const char *a, size_t alen,
                                                      const char *b, size_t blen, const candle_head_params *p,
                                                      int32_t *ids, int32_t *types, size_t cap, int64_t *n_ids);

/* Classify n inputs given as token ids (ids[i] [n_ids[i]], used as given:
 * no special tokens are added; one longer than max_tokens is cut to its
 * first max_tokens unless p->no_truncate) into probs_out [n, n_labels]
 * (cap floats), activated as candle_encoder_classify does; p->n_tokens as
 * there. CANDLE_ERR_INVALID_ARG: as candle_encoder_classify, an empty
 * input, a token outside the vocabulary. */
CANDLE_API candle_status candle_encoder_classify_tokens(const candle_encoder *e, const int32_t *const *ids,
                                                        const int64_t *n_ids, int64_t n,
                                                        const candle_head_params *p, float *probs_out,
                                                        size_t cap);

/* Score n query/document pairs given as token ids (ids[i] [n_ids[i]], as
 * candle_encoder_tokenize_pair gives them; types NULL or types[i] NULL:
 * all 0) into scores_out [n], activated as candle_encoder_rerank does; the
 * cut and the refusals as candle_encoder_classify_tokens. */
CANDLE_API candle_status candle_encoder_rerank_tokens(const candle_encoder *e, const int32_t *const *ids,
                                                      const int32_t *const *types, const int64_t *n_ids,
                                                      int64_t n, const candle_head_params *p,
                                                      float *scores_out);

#ifdef __cplusplus
}
#endif
#endif
