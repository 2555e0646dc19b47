/* Audio input for speech models: decoding to 16 kHz mono float samples, and
 * Whisper's log-mel spectrogram.
 *
 * Decoding uses libsndfile (WAV, FLAC, OGG/Vorbis/Opus, MP3 from 1.1) and
 * resampling libsoxr; a build without them (pkg-config found neither) still
 * has the API, which then returns CANDLE_ERR_UNSUPPORTED naming the missing
 * library. A file already at 16 kHz needs no libsoxr. Channels are averaged
 * to mono, as ffmpeg's and PyAV's downmix (Whisper's and faster-whisper's
 * decoders) do for stereo.
 *
 * The spectrogram needs neither library. */
#ifndef CANDLE_AUDIO_H
#define CANDLE_AUDIO_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CANDLE_AUDIO_SAMPLE_RATE 16000
/* Longer input is refused as absurd (10 hours) rather than decoded. */
#define CANDLE_AUDIO_MAX_SECONDS 36000

/* Whisper's front end (whisper/audio.py). */
#define CANDLE_WHISPER_N_FFT 400
#define CANDLE_WHISPER_HOP 160
#define CANDLE_WHISPER_CHUNK_SAMPLES 480000 /* 30 s */
#define CANDLE_WHISPER_CHUNK_FRAMES 3000    /* frames in 30 s */

/* Whether this build decodes audio files (libsndfile) and resamples
 * (libsoxr). */
CANDLE_API bool candle_audio_can_decode(void);
CANDLE_API bool candle_audio_can_resample(void);

/* Decode a file to 16 kHz mono f32 in [-1, 1]: *samples (free with
 * candle_free) holds *n samples. Errors in the thread-local last error:
 * CANDLE_ERR_IO (cannot open), CANDLE_ERR_FORMAT (not audio libsndfile
 * reads, or broken), CANDLE_ERR_INVALID_ARG (no samples, or longer than
 * CANDLE_AUDIO_MAX_SECONDS), CANDLE_ERR_UNSUPPORTED (built without the
 * library needed). *samples is NULL and *n 0 on error. */
CANDLE_API candle_status candle_audio_load(const char *path, float **samples, size_t *n);
/* The same from an in-memory file image; name is for messages (NULL:
 * "audio"). */
CANDLE_API candle_status candle_audio_from_memory(const void *data, size_t size, const char *name,
                                                  float **samples, size_t *n);
/* Resample mono f32 from rate to 16 kHz (libsoxr, high quality). */
CANDLE_API candle_status candle_audio_resample(const float *in, size_t n, double rate,
                                               float **samples, size_t *n_out);

/* Frames of the log-mel spectrogram of n samples followed by `padding`
 * zeros: (n + padding) / 160. Whisper's log_mel_spectrogram pads 30 s
 * (CANDLE_WHISPER_CHUNK_SAMPLES), faster-whisper's FeatureExtractor 160. */
CANDLE_API size_t candle_whisper_mel_frames(size_t n, size_t padding);

/* Whisper's log-mel spectrogram of 16 kHz samples followed by `padding`
 * zeros: a centred STFT (reflect-padded by 200, periodic Hann window of 400,
 * hop 160) whose last frame is dropped, power spectrum, the Slaney mel
 * filterbank (librosa's, n_mels 80 or 128), log10 of the clamp at 1e-10,
 * floored at the spectrogram's maximum - 8, then (x + 4) / 4.
 * out: [n_mels][frames], frames = candle_whisper_mel_frames(n, padding),
 * which must not exceed out_frames (its row stride). Errors (thread-local):
 * CANDLE_ERR_INVALID_ARG for n + padding of 0, bad n_mels or a short out. */
CANDLE_API candle_status candle_whisper_log_mel(const float *samples, size_t n, int n_mels,
                                                size_t padding, float *out, size_t out_frames);

/* Whisper's pad_or_trim on a spectrogram: frames [start, start + 3000) of
 * mel ([n_mels][n_frames]) into out ([n_mels][3000]), zeros past its end. */
CANDLE_API void candle_whisper_pad_or_trim(const float *mel, int n_mels, size_t n_frames,
                                           size_t start, float *out);

/* The Slaney mel filterbank as librosa.filters.mel(sr=16000, n_fft=400,
 * n_mels, htk=False, norm="slaney") builds it: out [n_mels][201]. */
CANDLE_API candle_status candle_whisper_mel_filters(int n_mels, float *out);

#ifdef __cplusplus
}
#endif
#endif
