/* Audio internals: the FFT the spectrogram uses, exposed for its test. */
#ifndef CANDLE_AUDIO_IMPL_H
#define CANDLE_AUDIO_IMPL_H

#include <stddef.h>

#include "core/core-impl.h"

typedef struct cplx {
    double re, im;
} cplx;

/* A complex FFT of any size n >= 1: mixed radix over n's factors (4, 2, 3,
 * 5, then any other prime, whose butterflies cost O(p) per point, so a
 * large prime factor is slow but still right). Whisper's n_fft is 400 =
 * 4 * 4 * 5 * 5, not a power of two. */
#define FFT_MAX_FACTORS 32
typedef struct fft_plan {
    int n;
    int factors[2 * FFT_MAX_FACTORS]; /* (radix, remaining length) pairs */
    cplx *tw;                         /* [n]: exp(-2 pi i k / n) */
    cplx *scratch;                    /* [largest radix] */
} fft_plan;

candle_status fft_plan_init(fft_plan *p, int n);
void fft_plan_free(fft_plan *p);
/* out[k] = sum_j in[j] exp(-2 pi i j k / n); in and out must not overlap. */
void fft_run(fft_plan *p, const cplx *in, cplx *out);

#endif
