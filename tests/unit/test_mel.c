/* Whisper's front end: the FFT against a naive DFT in double, the mel
 * filterbank and log-mel spectrograms against the goldens of
 * tests/data/whisper/gen_mel_goldens.py (faster-whisper's FeatureExtractor
 * and openai-whisper's torch code; max abs diff < 1e-4), pad_or_trim, the
 * argument checks; and audio decoding (when built with libsndfile/libsoxr):
 * jfk.wav as its PCM, WAV images built here at 44.1 kHz stereo resampled to
 * 16 kHz, unreadable, empty and absurd input. Prints the figures. */
#include <stdint.h>
#include <time.h>

#include "audio/audio-impl.h"
#include "candle/audio.h"
#include "test.h"

#define MEL_TOL 1e-4

static char src_dir[512], jfk_path[600];

/* ---- the FFT ---- */
static double fft_error(int n) {
    fft_plan p;
    if (fft_plan_init(&p, n)) return 1e9;
    cplx *in = malloc(sizeof *in * n), *out = malloc(sizeof *out * n);
    uint32_t s = 12345u + (uint32_t)n;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        double a = (double)(s >> 8) / (1 << 24) - 0.5;
        s = s * 1664525u + 1013904223u;
        in[i] = (cplx){a, (double)(s >> 8) / (1 << 24) - 0.5};
    }
    fft_run(&p, in, out);
    double err = 0, mag = 0;
    for (int k = 0; k < n; k++) {
        long double re = 0, im = 0;
        for (int j = 0; j < n; j++) {
            long double a = -2.0L * 3.14159265358979323846264338327950288L * (long double)((long long)j * k % n) / n;
            re += in[j].re * cosl(a) - in[j].im * sinl(a);
            im += in[j].re * sinl(a) + in[j].im * cosl(a);
        }
        double d = hypot((double)(re - out[k].re), (double)(im - out[k].im));
        err = d > err ? d : err;
        double m = hypot((double)re, (double)im);
        mag = m > mag ? m : mag;
    }
    free(in), free(out);
    fft_plan_free(&p);
    return err / (mag > 0 ? mag : 1);
}

static void test_fft(void) {
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 25, 97, 100, 128, 400, 1000, 1024};
    double worst = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double e = fft_error(sizes[i]);
        CHECK_MSG(e < 1e-13, "fft n=%d: relative error %.3g", sizes[i], e);
        worst = e > worst ? e : worst;
    }
    printf("fft: max error relative to max |X| over %zu sizes (400 = 4*4*5*5 incl.): %.3g\n",
           sizeof sizes / sizeof *sizes, worst);
    fft_plan p;
    CHECK(fft_plan_init(&p, 0) == CANDLE_ERR_INVALID_ARG);
}

/* ---- goldens ---- */
static float *read_f32(const char *name, size_t want) {
    char path[700];
    snprintf(path, sizeof path, "%s/tests/data/whisper/%s.bin", src_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *v = malloc(sizeof *v * (want + 1));
    size_t got = fread(v, sizeof *v, want + 1, f);
    fclose(f);
    CHECK_MSG(got == want, "%s: %zu floats, want %zu", path, got, want);
    if (got != want) free(v), v = NULL;
    return v;
}

/* jfk.wav's samples / 32768, read here (16-bit PCM mono) so the spectrogram
 * test needs no libsndfile. */
static float *read_jfk(size_t *n) {
    FILE *f = fopen(jfk_path, "rb");
    if (!f) return NULL;
    uint8_t hdr[12], ch[8];
    float *x = NULL;
    if (fread(hdr, 1, 12, f) == 12 && !memcmp(hdr, "RIFF", 4) && !memcmp(hdr + 8, "WAVE", 4)) {
        while (fread(ch, 1, 8, f) == 8) {
            uint32_t len = ch[4] | ch[5] << 8 | ch[6] << 16 | (uint32_t)ch[7] << 24;
            if (memcmp(ch, "data", 4)) {
                fseek(f, (long)(len + (len & 1)), SEEK_CUR);
                continue;
            }
            int16_t *pcm = malloc(len);
            *n = fread(pcm, 2, len / 2, f);
            x = malloc(sizeof *x * *n);
            for (size_t i = 0; i < *n; i++) x[i] = pcm[i] / 32768.0f;
            free(pcm);
            break;
        }
    }
    fclose(f);
    return x;
}

static void test_filters(void) {
    for (int n_mels = 80; n_mels <= 128; n_mels += 48) {
        char name[32];
        snprintf(name, sizeof name, "filters_%d", n_mels);
        float *want = read_f32(name, (size_t)n_mels * 201), *got = malloc(sizeof *got * n_mels * 201);
        if (!want) {
            test_skip(name, "golden missing");
            free(got);
            continue;
        }
        CHECK_OK(NULL, candle_whisper_mel_filters(n_mels, got));
        double d = 0;
        for (int i = 0; i < n_mels * 201; i++) d = fmax(d, fabs(got[i] - want[i]));
        CHECK_MSG(d < 1e-7, "%s: max abs diff %.3g", name, d);
        printf("mel filters %d: max abs diff vs faster-whisper (librosa slaney) %.3g\n", n_mels, d);
        free(want), free(got);
    }
}

typedef struct mel_case {
    const char *golden, *input;
    int n_mels;
    size_t padding, frame_start, frames, total_frames, n_input;
} mel_case;

static double run_case(const mel_case *c, const float *x, size_t n) {
    size_t total = candle_whisper_mel_frames(n, c->padding);
    CHECK_MSG(total == c->total_frames, "%s: %zu frames, reference %zu", c->golden, total,
              c->total_frames);
    float *want = read_f32(c->golden, (size_t)c->n_mels * c->frames);
    float *mel = malloc(sizeof *mel * (size_t)c->n_mels * (total ? total : 1));
    double d = -1;
    if (want && total == c->total_frames) {
        CHECK_OK(NULL, candle_whisper_log_mel(x, n, c->n_mels, c->padding, mel, total));
        d = 0;
        for (int m = 0; m < c->n_mels; m++)
            for (size_t t = 0; t < c->frames; t++)
                d = fmax(d, fabs(mel[(size_t)m * total + c->frame_start + t] -
                                 want[(size_t)m * c->frames + t]));
        CHECK_MSG(d < MEL_TOL, "%s: max abs diff %.3g", c->golden, d);
    }
    free(want), free(mel);
    return d;
}

static void test_mel_goldens(void) {
    size_t n_jfk = 0;
    float *jfk = read_jfk(&n_jfk);
    float *tone = read_f32("tone_input", 16000), *tiny = read_f32("tiny_input", 100);
    static const mel_case cases[] = {
        {"jfk_fw_80", "jfk", 80, 160, 0, 50, 1101, 0},
        {"jfk_fw_128", "jfk", 128, 160, 0, 50, 1101, 0},
        {"jfk_whisper_80_0", "jfk", 80, 480000, 0, 50, 4100, 0},
        {"jfk_whisper_80_1080", "jfk", 80, 480000, 1080, 50, 4100, 0},
        {"tone_fw_80", "tone", 80, 160, 0, 101, 101, 16000},
        {"tiny_fw_80", "tiny", 80, 100, 0, 1, 1, 100},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const mel_case *c = &cases[i];
        const float *x = !strcmp(c->input, "jfk") ? jfk : !strcmp(c->input, "tone") ? tone : tiny;
        size_t n = !strcmp(c->input, "jfk") ? n_jfk : c->n_input;
        if (!x) {
            test_skip(c->golden, "input %s missing", c->input);
            continue;
        }
        double d = run_case(c, x, n);
        printf("log-mel %-20s max abs diff %.3g\n", c->golden, d);
        worst = d > worst ? d : worst;
    }
    printf("log-mel: worst max abs diff %.3g (bound %g)\n", worst, MEL_TOL);
    if (jfk) { /* speed: 30 s of audio, as a Whisper window */
        float *x = calloc(CANDLE_WHISPER_CHUNK_SAMPLES, sizeof *x);
        memcpy(x, jfk, n_jfk * sizeof *x);
        float *mel = malloc(sizeof *mel * 80 * CANDLE_WHISPER_CHUNK_FRAMES);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        CHECK_OK(NULL, candle_whisper_log_mel(x, CANDLE_WHISPER_CHUNK_SAMPLES - 160, 80, 160, mel,
                                              CANDLE_WHISPER_CHUNK_FRAMES));
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("log-mel of 30 s (3000 frames x 80): %.1f ms\n",
               (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
        free(x), free(mel);
    }
    free(jfk), free(tone), free(tiny);
}

static void test_mel_args(void) {
    float x[400] = {0}, out[80 * 4];
    CHECK(candle_whisper_log_mel(x, 400, 81, 0, out, 4) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "n_mels 81");
    CHECK(candle_whisper_log_mel(x, 0, 80, 0, out, 4) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_whisper_log_mel(x, 800, 80, 0, out, 4) == CANDLE_ERR_INVALID_ARG); /* 5 frames */
    CHECK_CONTAINS(candle_last_errmsg(), "5 frames do not fit");
    CHECK(candle_whisper_log_mel(NULL, 400, 80, 0, out, 4) == CANDLE_ERR_INVALID_ARG);
    /* silence: every value is the floor, (-10 + 4) / 4 */
    CHECK_OK(NULL, candle_whisper_log_mel(x, 400, 80, 240, out, 4));
    for (int i = 0; i < 80 * 4; i++) CHECK_NEAR(out[i], -1.5, 1e-6);
    CHECK(candle_whisper_mel_frames(480000, 480000) == 6000 && candle_whisper_mel_frames(1, 0) == 0);

    /* pad_or_trim: rows of 3000, zeros past the end */
    float mel[2 * 5] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, *o = malloc(sizeof *o * 2 * 3000);
    candle_whisper_pad_or_trim(mel, 2, 5, 3, o);
    CHECK(o[0] == 4 && o[1] == 5 && o[2] == 0 && o[2999] == 0 && o[3000] == 9 && o[3001] == 10);
    candle_whisper_pad_or_trim(mel, 2, 5, 7, o);
    CHECK(o[0] == 0 && o[3000] == 0);
    free(o);
}

/* ---- decoding ---- */
/* A PCM16 WAV image of `frames` frames (channels interleaved, from f). */
static uint8_t *wav16(int rate, int ch, size_t frames, uint32_t data_len_claim,
                      float (*f)(size_t, int), size_t *size) {
    size_t data = frames * ch * 2;
    *size = 44 + data;
    uint8_t *b = malloc(*size);
    uint32_t len = data_len_claim ? data_len_claim : (uint32_t)data;
#define LE32(p, v) (p)[0] = (uint8_t)(v), (p)[1] = (uint8_t)((v) >> 8), (p)[2] = (uint8_t)((v) >> 16), (p)[3] = (uint8_t)((v) >> 24)
    memcpy(b, "RIFF", 4);
    LE32(b + 4, (uint32_t)(36 + data));
    memcpy(b + 8, "WAVEfmt ", 8);
    LE32(b + 16, 16u);
    b[20] = 1, b[21] = 0, b[22] = (uint8_t)ch, b[23] = 0;
    LE32(b + 24, (uint32_t)rate);
    LE32(b + 28, (uint32_t)(rate * ch * 2));
    b[32] = (uint8_t)(ch * 2), b[33] = 0, b[34] = 16, b[35] = 0;
    memcpy(b + 36, "data", 4);
    LE32(b + 40, len);
#undef LE32
    for (size_t i = 0; i < frames; i++)
        for (int c = 0; c < ch; c++) {
            int16_t v = (int16_t)lrintf(f(i, c) * 32767);
            b[44 + (i * ch + c) * 2] = (uint8_t)v, b[45 + (i * ch + c) * 2] = (uint8_t)((uint16_t)v >> 8);
        }
    return b;
}

/* 440 Hz at 44.1 kHz, the same on both channels but opposite noise-free
 * offsets that the downmix cancels. */
static float stereo_tone(size_t i, int c) {
    return (float)(0.5 * sin(2 * M_PI * 440.0 * (double)i / 44100.0)) + (c ? 0.25f : -0.25f);
}
static float zero(size_t i, int c) { return (void)i, (void)c, 0.0f; }

static void test_decode(void) {
    if (!candle_audio_can_decode()) {
        float *s;
        size_t n;
        CHECK(candle_audio_load(jfk_path, &s, &n) == CANDLE_ERR_UNSUPPORTED);
        CHECK_CONTAINS(candle_last_errmsg(), "libsndfile");
        return;
    }
    float *s = NULL;
    size_t n = 0, n_ref = 0;
    float *ref = read_jfk(&n_ref);
    if (ref) {
        CHECK_OK(NULL, candle_audio_load(jfk_path, &s, &n));
        CHECK(n == n_ref && s && !memcmp(s, ref, n * sizeof *s));
        candle_free(s);
        free(ref);
    }
    size_t size;
    uint8_t *w = wav16(44100, 2, 44100, 0, stereo_tone, &size);
    if (candle_audio_can_resample()) {
        CHECK_OK(NULL, candle_audio_from_memory(w, size, "tone.wav", &s, &n));
        CHECK_MSG(n >= 15990 && n <= 16010, "%zu samples", n);
        double d = 0;
        for (size_t i = 1000; i + 1000 < n; i++)
            d = fmax(d, fabs(s[i] - 0.5 * sin(2 * M_PI * 440.0 * (double)i / 16000.0)));
        CHECK_MSG(d < 1e-3, "resampled tone off by %.3g", d);
        printf("decode: 44.1 kHz stereo tone -> %zu samples at 16 kHz, max deviation %.3g\n", n, d);
        candle_free(s);
    } else {
        CHECK(candle_audio_from_memory(w, size, "tone.wav", &s, &n) == CANDLE_ERR_UNSUPPORTED);
        CHECK_CONTAINS(candle_last_errmsg(), "libsoxr");
    }
    free(w);

    CHECK(candle_audio_load("/nonexistent/x.wav", &s, &n) == CANDLE_ERR_IO && !s && !n);
    CHECK_CONTAINS(candle_last_errmsg(), "/nonexistent/x.wav");
    if (candle_audio_can_decode()) { /* a file that is there but no audio: its contents are named */
        char junk[] = "/tmp/candle-junk-XXXXXX";
        int fd = mkstemp(junk);
        CHECK(fd >= 0 && write(fd, "not audio at all", 16) == 16);
        if (fd >= 0) close(fd);
        CHECK(candle_audio_load(junk, &s, &n) == CANDLE_ERR_FORMAT && !s && !n);
        CHECK_CONTAINS(candle_last_errmsg(), "not audio libsndfile decodes");
        unlink(junk);
        CHECK(candle_audio_load("/tmp", &s, &n) == CANDLE_ERR_IO);
        CHECK_CONTAINS(candle_last_errmsg(), "not a regular file");
    }
    CHECK(candle_audio_from_memory("not audio at all, just text", 27, "junk.wav", &s, &n) ==
          CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "audio: junk.wav: ");
    CHECK(candle_audio_from_memory("", 0, "empty.wav", &s, &n) == CANDLE_ERR_FORMAT);
    w = wav16(16000, 1, 0, 0, zero, &size);
    candle_status st = candle_audio_from_memory(w, size, "silent.wav", &s, &n);
    CHECK_MSG(st == CANDLE_ERR_INVALID_ARG || st == CANDLE_ERR_FORMAT, "%s", candle_status_name(st));
    free(w);
    /* a header claiming ~37 h of 16 kHz mono: refused before decoding */
    w = wav16(16000, 1, 100, 0xfffffff0u, zero, &size);
    st = candle_audio_from_memory(w, size, "long.wav", &s, &n);
    printf("decode: a header claiming 37 h: %s (%s)\n", candle_status_name(st), st ? candle_last_errmsg() : "");
    /* libsndfile clamps the claim to the bytes there (100 samples) */
    CHECK(st == CANDLE_OK ? n == 100 : st == CANDLE_ERR_INVALID_ARG);
    if (st == CANDLE_OK) candle_free(s);
    free(w);
    if (candle_audio_can_resample()) {
        float one = 0;
        CHECK(candle_audio_resample(&one, (size_t)CANDLE_AUDIO_MAX_SECONDS * 1000 + 1, 1000, &s, &n) ==
              CANDLE_ERR_INVALID_ARG);
        CHECK_CONTAINS(candle_last_errmsg(), "more than the limit");
    }
}

int main(void) {
    const char *sd = getenv("CANDLE_SOURCE_DIR"), *shared = getenv("CANDLE_SHARED_DIR");
    snprintf(src_dir, sizeof src_dir, "%s", sd ? sd : ".");
    snprintf(jfk_path, sizeof jfk_path, "%s/data/audio/jfk.wav", shared ? shared : "../shared");
    test_fft();
    test_filters();
    test_mel_goldens();
    test_mel_args();
    test_decode();
    return test_done("test_mel");
}
