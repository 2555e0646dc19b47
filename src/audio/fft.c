/* Mixed-radix decimation-in-time FFT (the recursion of KISS FFT, in double):
 * see audio-impl.h. */
#include <math.h>
#include <stdlib.h>

#include "audio-impl.h"

static int factorize(int n, int *f) {
    int k = 0, p = 4;
    while (n > 1) {
        while (n % p) {
            p = p == 4 ? 2 : p == 2 ? 3 : p + 2; /* 4, 2, then odd numbers */
            if (p * p > n) p = n;
        }
        n /= p;
        f[k++] = p;
        f[k++] = n;
    }
    return k / 2;
}

candle_status fft_plan_init(fft_plan *p, int n) {
    *p = (fft_plan){0};
    if (n < 1 || n > (1 << 24))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "fft: size %d out of range", n);
    p->n = n;
    int nf = factorize(n, p->factors), maxp = 1;
    for (int i = 0; i < nf; i++) maxp = p->factors[2 * i] > maxp ? p->factors[2 * i] : maxp;
    p->tw = malloc(sizeof *p->tw * (size_t)n);
    p->scratch = malloc(sizeof *p->scratch * (size_t)maxp);
    if (!p->tw || !p->scratch) {
        fft_plan_free(p);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: fft plan of %d", n);
    }
    for (int k = 0; k < n; k++) {
        /* the angle from k in double each time: no accumulated rotation error */
        double a = -2.0 * M_PI * (double)k / (double)n;
        p->tw[k] = (cplx){cos(a), sin(a)};
    }
    return CANDLE_OK;
}

void fft_plan_free(fft_plan *p) {
    free(p->tw);
    free(p->scratch);
    *p = (fft_plan){0};
}

static cplx cmul(cplx a, cplx b) { return (cplx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

/* The p-point DFTs of out's m groups, with the twiddles of this level. */
static void butterfly(fft_plan *pl, cplx *out, int fstride, int m, int p) {
    cplx *s = pl->scratch;
    int n = pl->n;
    for (int u = 0; u < m; u++) {
        for (int q = 0; q < p; q++) s[q] = out[u + q * m];
        for (int q1 = 0, k = u; q1 < p; q1++, k += m) {
            int step = (int)(((long long)fstride * k) % n), t = 0;
            cplx acc = s[0];
            for (int q = 1; q < p; q++) {
                t += step;
                if (t >= n) t -= n;
                cplx v = cmul(s[q], pl->tw[t]);
                acc.re += v.re;
                acc.im += v.im;
            }
            out[k] = acc;
        }
    }
}

static void work(fft_plan *pl, cplx *out, const cplx *in, int fstride, const int *f) {
    int p = f[0], m = f[1];
    if (m == 1) {
        for (int i = 0; i < p; i++) out[i] = in[(size_t)i * fstride];
    } else {
        for (int i = 0; i < p; i++) work(pl, out + i * m, in + (size_t)i * fstride, fstride * p, f + 2);
    }
    butterfly(pl, out, fstride, m, p);
}

void fft_run(fft_plan *p, const cplx *in, cplx *out) {
    if (p->n == 1) {
        out[0] = in[0];
        return;
    }
    work(p, out, in, 1, p->factors);
}
