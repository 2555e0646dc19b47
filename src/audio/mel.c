/* Whisper's log-mel spectrogram (whisper/audio.py log_mel_spectrogram,
 * faster-whisper's FeatureExtractor): see include/candle/audio.h. Computed
 * in double, so the result is within float rounding of the references'
 * float32 arithmetic (tests/unit/test_mel.c measures it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio-impl.h"
#include "candle/audio.h"

#define N_FFT CANDLE_WHISPER_N_FFT
#define HOP CANDLE_WHISPER_HOP
#define N_BINS (N_FFT / 2 + 1)
#define SR 16000.0

/* librosa's Slaney mel scale: linear below 1 kHz (200/3 Hz per mel), log
 * above (27 mels per factor 6.4). */
static double mel_to_hz(double mel) {
    const double f_sp = 200.0 / 3, min_log_mel = 1000.0 / f_sp, logstep = log(6.4) / 27.0;
    return mel >= min_log_mel ? 1000.0 * exp(logstep * (mel - min_log_mel)) : f_sp * mel;
}

/* Triangles between neighbouring mel points, each scaled by 2 / its width
 * in Hz ("slaney" normalisation: about constant energy per channel). The
 * top mel is librosa's hz_to_mel(8000) (the Nyquist frequency). */
static void mel_filters_f64(int n_mels, double *w /* [n_mels][N_BINS] */) {
    const double max_mel = 45.245640471924965;
    double f[130];
    for (int i = 0; i < n_mels + 2; i++) f[i] = mel_to_hz(max_mel * i / (n_mels + 1));
    for (int m = 0; m < n_mels; m++) {
        double enorm = 2.0 / (f[m + 2] - f[m]);
        for (int k = 0; k < N_BINS; k++) {
            double hz = k * SR / N_FFT;
            double lower = (hz - f[m]) / (f[m + 1] - f[m]);
            double upper = (f[m + 2] - hz) / (f[m + 2] - f[m + 1]);
            double v = lower < upper ? lower : upper;
            w[m * N_BINS + k] = v > 0 ? v * enorm : 0;
        }
    }
}

static candle_status check_mels(int n_mels) {
    if (n_mels != 80 && n_mels != 128)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper mel: n_mels %d (Whisper uses 80 or 128)", n_mels);
    return CANDLE_OK;
}

candle_status candle_whisper_mel_filters(int n_mels, float *out) {
    candle_status r = check_mels(n_mels);
    if (r) return r;
    if (!out) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "whisper mel: NULL output");
    double *w = malloc(sizeof *w * (size_t)n_mels * N_BINS);
    if (!w) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: mel filters");
    mel_filters_f64(n_mels, w);
    for (int i = 0; i < n_mels * N_BINS; i++) out[i] = (float)w[i];
    free(w);
    return CANDLE_OK;
}

size_t candle_whisper_mel_frames(size_t n, size_t padding) {
    /* the centred STFT has 1 + (n + padding) / HOP frames; the last is dropped */
    return n > SIZE_MAX - padding ? 0 : (n + padding) / HOP;
}

/* The working state of one spectrogram. */
typedef struct mel_state {
    const float *x;
    size_t len; /* samples + padding */
    size_t n;   /* samples; the rest are zeros */
    int n_mels;
    double *w;  /* [n_mels][N_BINS] */
    int *lo, *hi; /* each filter's nonzero bins */
    double window[N_FFT];
    fft_plan plan;
} mel_state;

/* Sample i of the padded signal reflected at both ends as numpy's
 * np.pad(mode="reflect") does (repeatedly, for a signal shorter than the
 * 200 samples of padding). i counts from the start of the left pad. */
static double sample(const mel_state *s, long long i) {
    long long len = (long long)s->len;
    if (len == 1) return s->n ? s->x[0] : 0;
    long long j = i - N_FFT / 2, period = 2 * (len - 1);
    j %= period;
    if (j < 0) j += period;
    if (j >= len) j = period - j;
    return j < (long long)s->n ? s->x[j] : 0;
}

static void frame_logmel(mel_state *s, size_t t, float *out, size_t stride, double *mx) {
    cplx in[N_FFT], f[N_FFT];
    long long start = (long long)t * HOP;
    for (int j = 0; j < N_FFT; j++) in[j] = (cplx){sample(s, start + j) * s->window[j], 0};
    fft_run(&s->plan, in, f);
    double pw[N_BINS];
    for (int k = 0; k < N_BINS; k++) pw[k] = f[k].re * f[k].re + f[k].im * f[k].im;
    for (int m = 0; m < s->n_mels; m++) {
        double acc = 0;
        for (int k = s->lo[m]; k < s->hi[m]; k++) acc += s->w[m * N_BINS + k] * pw[k];
        double v = log10(acc > 1e-10 ? acc : 1e-10);
        out[(size_t)m * stride + t] = (float)v;
        if (v > *mx) *mx = v;
    }
}

static candle_status state_init(mel_state *s, int n_mels) {
    s->w = malloc(sizeof *s->w * (size_t)n_mels * N_BINS);
    s->lo = malloc(sizeof *s->lo * (size_t)n_mels);
    s->hi = malloc(sizeof *s->hi * (size_t)n_mels);
    if (!s->w || !s->lo || !s->hi)
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: whisper mel");
    mel_filters_f64(n_mels, s->w);
    for (int m = 0; m < n_mels; m++) {
        int lo = 0, hi = N_BINS;
        while (lo < hi && s->w[m * N_BINS + lo] == 0) lo++;
        while (hi > lo && s->w[m * N_BINS + hi - 1] == 0) hi--;
        s->lo[m] = lo, s->hi[m] = hi;
    }
    /* periodic Hann (torch.hann_window, np.hanning(401)[:-1]) */
    for (int j = 0; j < N_FFT; j++) s->window[j] = 0.5 - 0.5 * cos(2.0 * M_PI * j / N_FFT);
    return fft_plan_init(&s->plan, N_FFT);
}

static void state_free(mel_state *s) {
    free(s->w);
    free(s->lo);
    free(s->hi);
    fft_plan_free(&s->plan);
}

candle_status candle_whisper_log_mel(const float *samples, size_t n, int n_mels, size_t padding,
                                     float *out, size_t out_frames) {
    candle_status r = check_mels(n_mels);
    if (r) return r;
    size_t frames = candle_whisper_mel_frames(n, padding);
    if (!out || (n && !samples) || n > SIZE_MAX - padding || n + padding == 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper mel: NULL argument or no samples");
    if (frames > out_frames)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "whisper mel: %zu frames do not fit an output of %zu", frames,
                                out_frames);
    mel_state s = {.x = samples, .len = n + padding, .n = n, .n_mels = n_mels};
    r = state_init(&s, n_mels);
    double mx = -HUGE_VAL;
    for (size_t t = 0; !r && t < frames; t++) frame_logmel(&s, t, out, out_frames, &mx);
    state_free(&s);
    if (r) return r;
    /* whisper floors the whole spectrogram at its maximum - 8 (80 dB): the
     * floor depends on every frame, so it is a second pass */
    float floor_v = (float)(mx - 8.0);
    for (int m = 0; m < n_mels; m++)
        for (size_t t = 0; t < frames; t++) {
            float *v = &out[(size_t)m * out_frames + t];
            *v = ((*v > floor_v ? *v : floor_v) + 4.0f) / 4.0f;
        }
    return CANDLE_OK;
}

void candle_whisper_pad_or_trim(const float *mel, int n_mels, size_t n_frames, size_t start,
                                float *out) {
    const size_t W = CANDLE_WHISPER_CHUNK_FRAMES;
    size_t have = start < n_frames ? n_frames - start : 0;
    if (have > W) have = W;
    for (int m = 0; m < n_mels; m++) {
        float *row = out + (size_t)m * W;
        if (have) memcpy(row, mel + (size_t)m * n_frames + start, have * sizeof *row);
        memset(row + have, 0, (W - have) * sizeof *row);
    }
}
