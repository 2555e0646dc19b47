/* Time of one sampler step over a vocabulary of random logits: greedy and
 * llama-server's default sampling, plain, with logit_bias (10 tokens) and
 * with logprobs (0, 5 and 20 alternatives): what those options add to a
 * decode step (notes/issue-21.md).
 *
 * usage: bench_sampler [N_VOCAB ...]   (default 49152 151936) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "candle/sampler.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* microseconds per step; n_top < 0: candle_sampler_sample */
static double run(int32_t nv, const float *logits, float temp, int n_bias, int n_top) {
    candle_sampler_params p = candle_sampler_default_params();
    p.temp = temp;
    p.seed = 1;
    candle_sampler *s = NULL;
    if (candle_sampler_init(&s, nv, &p)) return -1;
    int32_t bt[10];
    float bv[10];
    for (int i = 0; i < 10; i++) {
        bt[i] = (int32_t)((i * 7919) % nv);
        bv[i] = i % 2 ? -100.0f : 2.0f;
    }
    if (n_bias && candle_sampler_set_logit_bias(s, bt, bv, n_bias)) return -1;
    candle_token_logprob ch, top[CANDLE_MAX_TOP_LOGPROBS];
    int iters = 0;
    volatile int32_t sink = 0;
    double t0 = now(), t;
    do {
        for (int k = 0; k < 20; k++, iters++)
            sink += n_top < 0 ? candle_sampler_sample(s, logits)
                              : candle_sampler_sample_logprobs(s, logits, n_top, &ch, top, NULL);
        t = now();
    } while (t - t0 < 0.3);
    (void)sink;
    candle_sampler_free(s);
    return (t - t0) / iters * 1e6;
}

int main(int argc, char **argv) {
    int32_t sizes[8] = {49152, 151936};
    int n_sizes = argc > 1 ? argc - 1 : 2;
    for (int i = 1; i < argc && i <= 8; i++) sizes[i - 1] = (int32_t)atol(argv[i]);
    if (n_sizes > 8) n_sizes = 8;
    for (int si = 0; si < n_sizes; si++) {
        int32_t nv = sizes[si];
        float *l = malloc((size_t)nv * sizeof *l);
        if (nv <= 0 || !l) return 1;
        uint64_t x = 42;
        for (int32_t i = 0; i < nv; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            l[i] = (float)(x >> 40) / (float)(1 << 24) * 20.0f - 10.0f;
        }
        printf("n_vocab %d, us per step:\n", (int)nv);
        for (int g = 0; g < 2; g++) {
            float temp = g ? 0.8f : 0.0f;
            printf("  %-8s plain %8.1f  logit_bias %8.1f  logprobs 0: %8.1f  5: %8.1f  20: %8.1f\n",
                   g ? "sampled" : "greedy", run(nv, l, temp, 0, -1), run(nv, l, temp, 10, -1),
                   run(nv, l, temp, 0, 0), run(nv, l, temp, 0, 5), run(nv, l, temp, 0, 20));
        }
        free(l);
    }
    return 0;
}
