/* Time of Whisper's encoder on one 30 s window, and of the log-mel of that
 * window, for bench/whisper_compare.sh (notes/issue-20-wbench.md): the first
 * 30 s of AUDIO (zero-padded), one warm-up, then REPS timed runs; prints the
 * median and the minimum in milliseconds, one `key value` a line.
 *
 * usage: bench_whisper_encode MODEL_DIR AUDIO THREADS [REPS]   (REPS 5) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "candle/audio.h"
#include "candle/candle.h"
#include "candle/whisper.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_whisper_encode MODEL_DIR AUDIO THREADS [REPS]\n");
        return 2;
    }
    int n_threads = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 5;
    if (reps < 1 || reps > 100 || n_threads < 0) {
        fprintf(stderr, "bench_whisper_encode: bad THREADS or REPS\n");
        return 2;
    }
    candle_whisper *w = NULL;
    float *samples = NULL;
    size_t n = 0;
    if (candle_whisper_load(&w, argv[1], NULL) || candle_audio_load(argv[2], &samples, &n)) {
        fprintf(stderr, "bench_whisper_encode: %s\n", candle_last_errmsg());
        return 1;
    }
    candle_whisper_dims d = candle_whisper_get_dims(w);
    const size_t win = 480000, frames = 3000; /* 30 s at 16 kHz; 100 frames a second */
    size_t ns = n < win ? n : win;
    /* openai-whisper's padding: the window's samples then 30 s of zeros */
    size_t nf = candle_whisper_mel_frames(ns, win);
    float *mel = malloc(sizeof(float) * (size_t)d.n_mels * nf);
    float *win_mel = malloc(sizeof(float) * (size_t)d.n_mels * frames);
    size_t out_len = (size_t)d.n_audio_ctx * (size_t)d.n_state;
    float *out = malloc(sizeof(float) * out_len);
    double *te = malloc(sizeof(double) * (size_t)reps), *tm = malloc(sizeof(double) * (size_t)reps);
    if (!mel || !win_mel || !out || !te || !tm) {
        fprintf(stderr, "bench_whisper_encode: out of memory\n");
        return 1;
    }
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        if (candle_whisper_log_mel(samples, ns, (int)d.n_mels, win, mel, nf)) goto fail;
        candle_whisper_pad_or_trim(mel, (int)d.n_mels, nf, 0, win_mel);
        double t1 = now();
        if (candle_whisper_encode(w, win_mel, n_threads, out, out_len)) goto fail;
        double t2 = now();
        if (r >= 0) {
            tm[r] = (t1 - t0) * 1e3;
            te[r] = (t2 - t1) * 1e3;
        }
    }
    qsort(te, (size_t)reps, sizeof(double), cmp);
    qsort(tm, (size_t)reps, sizeof(double), cmp);
    printf("threads %d\nreps %d\nencode_ms_median %.1f\nencode_ms_min %.1f\nmel_ms_median %.1f\n", n_threads, reps,
           te[reps / 2], te[0], tm[reps / 2]);
    free(mel), free(win_mel), free(out), free(te), free(tm);
    candle_free(samples);
    candle_whisper_free(w);
    return 0;
fail:
    fprintf(stderr, "bench_whisper_encode: %s\n", candle_last_errmsg());
    return 1;
}
