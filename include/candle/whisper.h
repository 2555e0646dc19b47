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
} candle_whisper_params;

CANDLE_API candle_whisper_params candle_whisper_default_params(void);

/* dir: model.bin, config.json (suppress_ids, suppress_ids_begin) and
 * tokenizer.json. Errors: CANDLE_ERR_IO, CANDLE_ERR_FORMAT (a variable
 * missing or of the wrong shape), CANDLE_ERR_UNSUPPORTED (not a WhisperSpec
 * model). NULL p: the defaults. */
CANDLE_API candle_status candle_whisper_load(candle_whisper **out, const char *dir,
                                             const candle_whisper_params *p);
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

typedef struct candle_whisper_transcribe_params {
    int n_threads;      /* 0: the default */
    int64_t max_tokens; /* tokens generated per window, 0: up to the text context (448) */
} candle_whisper_transcribe_params;

CANDLE_API candle_whisper_transcribe_params candle_whisper_transcribe_default_params(void);

/* Free with candle_whisper_result_free. */
typedef struct candle_whisper_result {
    char *text;       /* the decoded text tokens, NUL-terminated */
    int32_t *tokens;  /* the generated tokens, without the prompt and <|endoftext|> */
    int64_t n_tokens;
} candle_whisper_result;

/* Greedy transcription of 16 kHz mono samples as faster-whisper's
 * transcribe(beam_size=1, temperature=0, without_timestamps=True) for an
 * English-only model: each 30 s window is decoded from
 * <|startoftranscript|><|notimestamps|>, config.json's suppress_ids
 * suppressed at every step and suppress_ids_begin at the first, up to
 * <|endoftext|>. Longer audio is cut into consecutive 30 s windows (the
 * last padded with zeros), each decoded alone, as faster-whisper does with
 * without_timestamps and condition_on_previous_text=False; no window is
 * skipped as silence (its no_speech check is not done). */
CANDLE_API candle_status candle_whisper_transcribe(const candle_whisper *w, const float *samples,
                                                   size_t n,
                                                   const candle_whisper_transcribe_params *p,
                                                   candle_whisper_result *out);
CANDLE_API void candle_whisper_result_free(candle_whisper_result *r);

#ifdef __cplusplus
}
#endif
#endif
