/* Tokenizers read from GGUF metadata: SentencePiece-style (scores, byte
 * fallback), byte-level BPE with per-family pre-tokenizers, WordPiece.
 * A tokenizer copies what it needs (the GGUF handle may be closed after
 * candle_tokenizer_from_gguf) and is read-only afterwards, so one may be
 * shared by threads. Errors go to the thread-local last error. */
#ifndef CANDLE_TOKENIZER_H
#define CANDLE_TOKENIZER_H

#include "api.h"
#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_tokenizer candle_tokenizer;

CANDLE_API candle_status candle_tokenizer_from_gguf(candle_tokenizer **out, const candle_gguf *g);
/* A Hugging Face tokenizer.json (the `tokenizers` library's format:
 * normalizer, pre-tokenizer, BPE/WordPiece/Unigram model, post-processor,
 * decoder, added tokens), with tokenizer_config.json (may be NULL) for
 * bos/eos tokens, add_bos_token/add_eos_token (used when there is no
 * post-processor) and model_max_length. Padding and truncation settings
 * are ignored. Errors: CANDLE_ERR_FORMAT for malformed JSON or missing
 * fields, CANDLE_ERR_UNSUPPORTED for a component type Candle does not
 * implement, each naming the file and the JSON path. Encoding replaces
 * invalid UTF-8 by U+FFFD (one per maximal invalid subpart, as Python's
 * errors='replace'), then gives the ids `tokenizers` gives for that text;
 * parse_special=false treats special added tokens as plain text. */
CANDLE_API candle_status candle_tokenizer_from_hf_file(candle_tokenizer **out,
                                                       const char *tokenizer_json_path,
                                                       const char *tokenizer_config_json_path);
/* The same from memory; name_for_errors names the source in messages. */
CANDLE_API candle_status candle_tokenizer_from_hf_memory(candle_tokenizer **out, const char *json,
                                                         size_t len, const char *config_json,
                                                         size_t config_len,
                                                         const char *name_for_errors);
CANDLE_API void candle_tokenizer_free(candle_tokenizer *t);

CANDLE_API int32_t candle_tokenizer_n_vocab(const candle_tokenizer *t);
CANDLE_API int32_t candle_tokenizer_bos(const candle_tokenizer *t); /* -1 if none */
CANDLE_API int32_t candle_tokenizer_eos(const candle_tokenizer *t);
/* End-of-generation tokens (eos, eot, im_end, ...). */
CANDLE_API bool candle_tokenizer_is_eog(const candle_tokenizer *t, int32_t id);
/* Is id an added token (a control or user-defined token of the vocabulary,
 * found in raw text only as itself)? False out of range. */
CANDLE_API bool candle_tokenizer_is_added(const candle_tokenizer *t, int32_t id);
/* Special token id by its text ("<|im_end|>"), or -1. */
CANDLE_API int32_t candle_tokenizer_find(const candle_tokenizer *t, const char *text);

/* add_special: add BOS/EOS as the model's metadata says.
 * parse_special: recognise special-token text ("<|im_start|>") in the input.
 * User-defined tokens (GGUF token type 4) are recognised either way, as the
 * reference tokenizers do.
 * Writes up to cap ids; *n_out gets the full count (call again with more
 * room if it exceeds cap). */
CANDLE_API candle_status candle_tokenizer_encode(const candle_tokenizer *t, const char *text,
                                                 size_t len, bool add_special, bool parse_special,
                                                 int32_t *ids, int64_t cap, int64_t *n_out);
/* candle_tokenizer_encode that gives up once more than limit ids are made
 * (BOS counted), so a text far longer than the caller can use costs about
 * limit ids of work: then *n_out is above limit but not the full count.
 * A negative limit is no limit. */
CANDLE_API candle_status candle_tokenizer_encode_limit(const candle_tokenizer *t, const char *text,
                                                       size_t len, bool add_special,
                                                       bool parse_special, int64_t limit,
                                                       int32_t *ids, int64_t cap, int64_t *n_out);
/* The most input bytes one id can stand for, or 0 where there is no such
 * bound (the encoder may drop text: WordPiece's whitespace, a character with
 * neither a piece nor a byte or unknown token, a special token that swallows
 * the blanks beside it, tokenizer.json pipelines). A text of more than
 * n * this many bytes encodes to more than n ids, so it can be refused by
 * its length without encoding it. */
CANDLE_API size_t candle_tokenizer_max_token_bytes(const candle_tokenizer *t);
/* A pair of texts (cross-encoders): the post-processor's pair template.
 * type_ids (may be NULL) gets each id's segment (0 or 1), up to cap.
 * A tokenizer not read from tokenizer.json joins the two encodings. */
CANDLE_API candle_status candle_tokenizer_encode_pair(const candle_tokenizer *t, const char *a,
                                                      size_t alen, const char *b, size_t blen,
                                                      bool add_special, int32_t *ids, int64_t cap,
                                                      int64_t *n_out, int32_t *type_ids);
/* The bytes of one token (byte-fallback and byte-level tokens decoded, the
 * SentencePiece space marker turned into ' '); may be a partial UTF-8
 * sequence. Special tokens give their text only if render_special. */
CANDLE_API candle_status candle_tokenizer_token_bytes(const candle_tokenizer *t, int32_t id,
                                                      bool render_special, char *buf, size_t cap,
                                                      size_t *len);
/* Decode a sequence into buf (NUL-terminated); *len gets the byte count. */
CANDLE_API candle_status candle_tokenizer_decode(const candle_tokenizer *t, const int32_t *ids,
                                                 int64_t n, bool render_special, char *buf,
                                                 size_t cap, size_t *len);
/* Output sizes: token_bytes and decode always set *len to the full count;
 * when that (plus decode's NUL) does not fit in cap they write what fits
 * and return CANDLE_ERR_INVALID_ARG ("buffer of N bytes too small, need M"),
 * so a caller that checks the status never reads past buf. decode drops
 * the space the encoder put before the text (SentencePiece prefix,
 * WordPiece). Invalid ids are CANDLE_ERR_INVALID_ARG too. */

/* Incremental detokenization for streamed output. A character whose bytes
 * span several tokens (<0xXX> byte-fallback pieces, byte-level BPE pieces)
 * is held back until it is complete, and bytes that can never form one come
 * out as U+FFFD, so every chunk is whole, valid UTF-8. Zero-initialise one
 * per stream. */
typedef struct candle_detok {
    bool strip_space; /* set to drop the encoder's space prefix from the first
                         piece (when the stream is the start of a text) */
    uint8_t n_pending;
    char pending[4];
} candle_detok;

/* Bytes needed in buf for any push: 3 * (longest token + 4) + 1. */
CANDLE_API size_t candle_tokenizer_detok_bufsize(const candle_tokenizer *t);
/* The text completed by token id into buf (NUL-terminated), *len its length.
 * A too-small buf is CANDLE_ERR_INVALID_ARG and leaves d unchanged. */
CANDLE_API candle_status candle_tokenizer_detok_push(const candle_tokenizer *t, candle_detok *d,
                                                     int32_t id, bool render_special, char *buf,
                                                     size_t cap, size_t *len);
/* At the end of the stream: whatever is still held back (as U+FFFD). */
CANDLE_API candle_status candle_tokenizer_detok_flush(const candle_tokenizer *t, candle_detok *d,
                                                      char *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
