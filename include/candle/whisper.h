/* Whisper speech recognition from a CTranslate2 model directory (the
 * faster-whisper packages: model.bin, config.json, tokenizer.json), computed
 * as CTranslate2 computes it on a CPU: float16 weights widened to f32.
 *
 * A candle_whisper is read-only after load: many threads may encode and
 * transcribe with one at once (each call makes its own context and KV
 * cache). Errors go to the thread-local last error (candle_last_errmsg). */
#ifndef CANDLE_WHISPER_H
#define CANDLE_WHISPER_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "status.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_whisper candle_whisper;

typedef struct candle_whisper_params {
    bool no_mmap; /* read model.bin into memory instead of mapping it */
    /* The linear layers' weights and the token embedding (also the output
     * projection) as CANDLE_DTYPE_F16 or CANDLE_DTYPE_BF16 (half f32's bytes:
     * decoding reads half as much; bf16 takes the CPU's bf16 dot products),
     * CANDLE_DTYPE_Q8_0 (quantized at load: the integer dot products, as
     * CTranslate2's int8), or 0 (f32's value): widened to f32 as CTranslate2
     * on a CPU computes. */
    candle_dtype weight_dtype;
} candle_whisper_params;

CANDLE_API candle_whisper_params candle_whisper_default_params(void);

/* path, in one of the formats Whisper models come in:
 * - a CTranslate2 directory (faster-whisper's): model.bin, config.json
 *   (suppress_ids, suppress_ids_begin, lang_ids, alignment_heads) and
 *   tokenizer.json;
 * - a Hugging Face directory as transformers saves Whisper: config.json
 *   (model_type "whisper"), model.safetensors (or sharded with
 *   model.safetensors.index.json), generation_config.json (suppress_tokens,
 *   begin_suppress_tokens, lang_to_id, alignment_heads) and tokenizer.json;
 * - a whisper.cpp ggml file (ggml-base.en.bin), F32, F16 or quantized: the
 *   quantized matrices are used as stored.
 * Errors: CANDLE_ERR_IO, CANDLE_ERR_FORMAT (a tensor missing or of the wrong
 * shape), CANDLE_ERR_UNSUPPORTED (not a Whisper model, or a variant Candle
 * does not implement, named). NULL p: the defaults. */
CANDLE_API candle_status candle_whisper_load(candle_whisper **out, const char *path,
                                             const candle_whisper_params *p);
/* Is path a Whisper model in one of those formats (read without loading)? */
CANDLE_API bool candle_whisper_probe(const char *path);
CANDLE_API void candle_whisper_free(candle_whisper *w);

typedef struct candle_whisper_dims {
    int64_t n_mels, n_audio_ctx, n_state, n_head, n_audio_layer;
    int64_t n_vocab, n_text_ctx, n_text_layer;
} candle_whisper_dims;

CANDLE_API candle_whisper_dims candle_whisper_get_dims(const candle_whisper *w);
CANDLE_API const candle_tokenizer *candle_whisper_tokenizer(const candle_whisper *w);

/* The encoder on one 30 s window: mel [n_mels][3000] (candle_whisper_log_mel
 * then candle_whisper_pad_or_trim) -> out [n_audio_ctx][n_state], out_len
 * floats. n_threads 0: the default. */
CANDLE_API candle_status candle_whisper_encode(const candle_whisper *w, const float *mel,
                                               int n_threads, float *out, size_t out_len);

/* The decoder's logits of every position of tokens (a prompt such as
 * <|startoftranscript|><|en|>..., n at most n_text_ctx) against the window
 * mel [n_mels][3000]: out [n][n_vocab], out_len floats. */
CANDLE_API candle_status candle_whisper_logits(const candle_whisper *w, const float *mel, const int32_t *tokens,
                                               int64_t n, int n_threads, float *out, size_t out_len);

/* A word of a segment (word_timestamps), as faster-whisper's Word: its
 * text with the space before it and the punctuation merged into it, start
 * and end in seconds from the start of the audio (rounded to 0.01 s), and
 * the mean probability of its tokens. */
typedef struct candle_whisper_word {
    double t0, t1;
    char *word; /* NUL-terminated */
    float probability;
} candle_whisper_word;

/* One segment of a transcript: the text between two timestamp tokens (or a
 * whole window when timestamps are off). */
typedef struct candle_whisper_segment {
    double t0, t1;       /* start and end in seconds from the start of the audio */
    char *text;          /* NUL-terminated, with Whisper's leading space */
    int32_t *tokens;     /* its tokens, timestamp tokens included */
    int64_t n_tokens;
    int64_t seek;        /* the first mel frame of its window (100 frames a second) */
    float temperature;   /* the temperature its window was decoded at */
    float avg_logprob;   /* of its window: sum of log-probabilities / (tokens + 1) */
    float compression_ratio; /* of its window's text: bytes / zlib-compressed bytes */
    float no_speech_prob;    /* of its window: P(<|nospeech|>) at <|startoftranscript|> */
    /* word_timestamps: its words in order (n_words of them), else NULL, 0 */
    candle_whisper_word *words;
    int64_t n_words;
} candle_whisper_segment;

/* Called with each segment as soon as its window is decoded, in order. A
 * non-zero return stops the transcription: the call then returns CANDLE_OK
 * with the segments so far. The segment is valid during the call only. */
typedef int (*candle_whisper_segment_fn)(const candle_whisper_segment *s, void *user);

/* The defaults are faster-whisper's transcribe() defaults (beam_size 5).
 * A NAN threshold is off. */
typedef struct candle_whisper_transcribe_params {
    int n_threads;      /* 0: the default */
    int64_t max_tokens; /* tokens generated per window, 0: the reference's 224 */
    bool timestamps;    /* timestamp tokens and segments (true); false: each 30 s
                           window is one segment, decoded after <|notimestamps|> */
    bool condition_on_previous_text; /* prompt each window with the text so far (true) */
    float max_initial_timestamp;     /* seconds, the first timestamp at most (1.0) */
    /* Temperature fallback: a window is decoded at each temperature in turn
     * until its text's compression ratio is at most compression_ratio_threshold
     * and its avg_logprob at least log_prob_threshold (or it is silence); if
     * none passes, the decoding with the best avg_logprob (among those under
     * the compression threshold, if any) is kept. Temperature 0 is greedy;
     * above 0, best_of samples of which the one with the best sum of
     * log-probabilities / length is kept. */
    const float *temperatures; /* NULL: 0, 0.2, 0.4, 0.6, 0.8, 1.0 */
    int n_temperatures;
    int best_of;                       /* 5 */
    uint64_t seed;                     /* of the sampler: the same seed, the same samples */
    float compression_ratio_threshold; /* 2.4 (off where built without zlib) */
    float log_prob_threshold;          /* -1.0 */
    /* A window whose P(no speech) is above this and whose avg_logprob is
     * below log_prob_threshold is silence: skipped, no segment. */
    float no_speech_threshold;         /* 0.6 */
    /* condition_on_previous_text: a window decoded above this temperature
     * does not prompt the next one. */
    float prompt_reset_on_temperature; /* 0.5 */
    candle_whisper_segment_fn on_segment;
    void *user;
    /* Beam search at temperature 0, as CTranslate2's (faster-whisper's
     * defaults): beam_size beams decoded side by side (5; 1 is greedy, at
     * most 16); the search ends when round(beam_size * patience) hypotheses
     * are finished (patience 1.0, > 0); the finished hypothesis with the best
     * sum of log-probabilities / length ^ length_penalty wins (1.0: the
     * simple length normalization; 0: the first to finish). Above 0 the
     * best_of draws are decoded side by side too. */
    int beam_size;
    float patience;
    float length_penalty;
    /* Multilingual models: the language code ("en", "de", ...; NULL or
     * "auto": detected on the first 30 s as candle_whisper_detect_language)
     * and the task. English-only models ignore both (no such tokens). */
    const char *language;
    bool translate; /* <|translate|>: English text from speech in any language */
    /* An initial prompt (faster-whisper's initial_prompt): " " + the text
     * stripped, encoded, before the first window's tokens as if it had been
     * transcribed: <|startofprev|> and the last n_text_ctx / 2 - 1 tokens of
     * it and of the text so far come before <|startoftranscript|>. With
     * condition_on_previous_text off it prompts the first window only. NULL:
     * initial_prompt_tokens (n_initial_prompt_tokens of them, ids below
     * n_vocab) if any, else none. */
    const char *initial_prompt;
    const int32_t *initial_prompt_tokens;
    int64_t n_initial_prompt_tokens;
    /* Word timestamps, as faster-whisper's word_timestamps=True: each
     * window's text tokens aligned to its frames by a second decoder pass
     * (the cross-attention of config.json's alignment_heads, else every head
     * of the last half of the decoder layers: softmax over the window's
     * frames, normalized over the tokens, a median filter of width 7, the
     * mean over the heads, dynamic time warping), split into words (at
     * spaces and punctuation; punctuation merged into the word before or
     * after it), and the reference's adjustments of long words and of the
     * segments' start and end to their words. The next window starts at the
     * last word's end. prepend/append_punctuations: NULL for the reference's
     * defaults ("'“¿([{- and "'.。,，!！?？:：”)]}、). */
    bool word_timestamps;
    const char *prepend_punctuations, *append_punctuations;
} candle_whisper_transcribe_params;

CANDLE_API candle_whisper_transcribe_params candle_whisper_transcribe_default_params(void);

/* Free with candle_whisper_result_free. */
typedef struct candle_whisper_result {
    char *text;       /* the segments' texts concatenated, NUL-terminated */
    int32_t *tokens;  /* the segments' tokens concatenated */
    int64_t n_tokens;
    candle_whisper_segment *segments;
    int64_t n_segments;
    char language[16];          /* the language decoded ("en" for English-only models) */
    float language_probability; /* its detected probability; 1 when given or English-only */
} candle_whisper_result;

/* Transcription of 16 kHz mono samples as faster-whisper's
 * transcribe(vad_filter=False) does it (beam search or greedy at temperature
 * 0, then the fallback above; a multilingual model's prompt carries the
 * language, given or detected, and the task):
 *   - each 30 s window of the mel starts at `seek` and is decoded from
 *     [<|startofprev|> previous tokens] <|startoftranscript|>, config.json's
 *     suppress_ids suppressed at every step and suppress_ids_begin at the
 *     first, up to <|endoftext|>;
 *   - with timestamps, the timestamp rules of CTranslate2 (ApplyTimestampRules):
 *     the first token is a timestamp of at most max_initial_timestamp,
 *     timestamps come in pairs and never decrease, and a timestamp is forced
 *     when the timestamps' total probability exceeds every text token's;
 *   - segments are cut at consecutive timestamps; the next window starts at
 *     the last complete timestamp, or after the window when the text ends
 *     with a single timestamp or has none;
 *   - segments whose start equals their end or whose text is blank are
 *     dropped, as the reference drops them. */
CANDLE_API candle_status candle_whisper_transcribe(const candle_whisper *w, const float *samples,
                                                   size_t n,
                                                   const candle_whisper_transcribe_params *p,
                                                   candle_whisper_result *out);
CANDLE_API void candle_whisper_result_free(candle_whisper_result *r);

/* True for a multilingual model (language tokens in its vocabulary). */
CANDLE_API bool candle_whisper_is_multilingual(const candle_whisper *w);

/* The English name of a Whisper language code ("de" -> "german"), or NULL
 * for a code Whisper has no token for. */
CANDLE_API const char *candle_whisper_language_name(const char *code);
/* The code of a Whisper language given by its code or its English name
 * ("german" or "de" -> "de", as openai-whisper accepts either), or NULL. */
CANDLE_API const char *candle_whisper_language_code(const char *code_or_name);
/* The code of language i in the order of Whisper's language tokens ("en",
 * "zh", ..., "yue"), or NULL past the last. */
CANDLE_API const char *candle_whisper_language_at(int i);

/* faster-whisper's detect_language(): the log-mel of the first 30 s of
 * samples (all its frames, zero-padded to a window), the encoder, one
 * decoder step on <|startoftranscript|>, and the softmax of the logits of
 * the language tokens (config.json's lang_ids). The languages best first:
 * codes[i] (up to 15 bytes, NUL-terminated) and probs[i] for i < min(n_out,
 * languages), *n_langs (may be NULL) the number of languages. Errors:
 * CANDLE_ERR_UNSUPPORTED for an English-only model. */
CANDLE_API candle_status candle_whisper_detect_language(const candle_whisper *w, const float *samples, size_t n,
                                                        int n_threads, char (*codes)[16], float *probs,
                                                        int n_out, int *n_langs);

#ifdef __cplusplus
}
#endif
#endif
