/* candle perplexity --kl-divergence-base FILE [--kl-divergence]: llama.cpp's
 * KL-divergence mode. A base (reference) model's next-token distributions at
 * the scored positions are saved once (include/candle/kld.h has the file);
 * another model, typically a quantization of it, is then run over the same
 * tokens and its distributions compared with the saved ones. The statistics
 * are llama-perplexity's: KL(base || model) per position (mean with its
 * standard error, percentiles), "same top p" (the two argmaxes agree), both
 * PPLs, ln(PPL(Q)/PPL(base)) and the ratio, and delta p = p_model(next) -
 * p_base(next) (its RMS). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/kld.h"
#include "ppl.h"

/* ---- saving ---- */

typedef struct save_ctx {
    candle_kld_writer *w;
} save_ctx;

static int save_row(void *p, const float *logits, int32_t next, double nll) {
    (void)nll;
    save_ctx *s = p;
    if (candle_kld_write_row(s->w, logits, next)) {
        fprintf(stderr, "\ncandle perplexity: %s\n", candle_last_errmsg());
        return 1;
    }
    return 0;
}

int kld_save(gen *g, const char *path, const int32_t *ids, int64_t n, int64_t n_chunk, int64_t len) {
    candle_kld_header h = {g->n_vocab, len, n_chunk, len / 2, n};
    save_ctx s = {NULL};
    if (candle_kld_create(&s.w, path, &h, ids)) {
        fprintf(stderr, "candle perplexity: %s\n", candle_last_errmsg());
        return 1;
    }
    int r = ppl_eval(g, ids, n_chunk, len, save_row, &s);
    if (candle_kld_commit(s.w, r == 0) && !r) {
        fprintf(stderr, "candle perplexity: %s\n", candle_last_errmsg());
        r = 1;
    }
    if (!r)
        fprintf(stderr, "saved %lld distributions (%lld chunks of %lld tokens) to %s\n",
                (long long)candle_kld_n_rows(&h), (long long)n_chunk, (long long)len, path);
    return r;
}

/* ---- comparing ---- */

typedef struct cmp_ctx {
    candle_kld_reader *rd;
    int64_t n_vocab, n; /* rows compared */
    float *base;        /* [n_vocab] the base's log-probs at this row */
    double *kld;        /* [n_rows] per position */
    double *dp;         /* [n_rows] p_model(next) - p_base(next) */
    double *nll_q, *nll_b; /* [n_rows] */
    int64_t same_top;
} cmp_ctx;

static int cmp_row(void *p, const float *logits, int32_t next, double nll) {
    cmp_ctx *c = p;
    candle_kld_row row;
    if (candle_kld_read_row(c->rd, c->base, &row)) {
        fprintf(stderr, "\ncandle perplexity: %s\n", candle_last_errmsg());
        return 1;
    }
    int64_t V = c->n_vocab, am = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[am]) am = i;
    double mx = logits[am], sum = 0;
    for (int64_t i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum), kl = 0;
    /* KL(base || model) = sum_i p_b,i (log p_b,i - log p_q,i) */
    for (int64_t i = 0; i < V; i++) {
        double lb = c->base[i];
        kl += exp(lb) * (lb - ((double)logits[i] - lse));
    }
    c->kld[c->n] = kl;
    c->nll_q[c->n] = nll;
    c->nll_b[c->n] = -(double)row.logp_next;
    c->dp[c->n] = exp(-nll) - exp((double)row.logp_next);
    c->same_top += am == row.argmax;
    c->n++;
    (void)next;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile of sorted v[n], interpolated linearly between ranks. */
static double quantile(const double *v, int64_t n, double p) {
    double at = p * (double)(n - 1);
    int64_t lo = (int64_t)floor(at);
    if (lo >= n - 1) return v[n - 1];
    return v[lo] + (at - (double)lo) * (v[lo + 1] - v[lo]);
}

/* Mean and standard error of the mean. */
static void mean_se(const double *v, int64_t n, double *mean, double *se) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (v[i] - *mean) * (v[i] - *mean);
    *se = n > 1 ? sqrt(s2 / (double)(n - 1) / (double)n) : 0.0;
}

static void report(cmp_ctx *c) {
    int64_t n = c->n;
    double m, se, mq, seq, mb, seb;
    mean_se(c->nll_q, n, &mq, &seq);
    mean_se(c->nll_b, n, &mb, &seb);
    double *d = malloc((size_t)n * sizeof *d);
    if (!d) {
        fprintf(stderr, "candle perplexity: out of memory\n");
        return;
    }
    /* correlation of the per-position losses, as llama.cpp reports it */
    double sxy = 0, sxx = 0, syy = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = c->nll_q[i] - mq, y = c->nll_b[i] - mb;
        sxy += x * y, sxx += x * x, syy += y * y;
        d[i] = c->nll_q[i] - c->nll_b[i];
    }
    printf("positions                 : %lld\n", (long long)n);
    printf("Mean PPL(Q)               : %10.6f +/- %10.6f\n", exp(mq), exp(mq) * seq);
    printf("Mean PPL(base)            : %10.6f +/- %10.6f\n", exp(mb), exp(mb) * seb);
    printf("Cor(ln PPL(Q), ln PPL(base)): %7.2f%%\n",
           sxx > 0 && syy > 0 ? 100.0 * sxy / sqrt(sxx * syy) : 100.0);
    mean_se(d, n, &m, &se);
    printf("Mean ln(PPL(Q)/PPL(base)) : %10.6f +/- %10.6f\n", m, se);
    printf("Mean PPL(Q)/PPL(base)     : %10.6f +/- %10.6f\n", exp(m), exp(m) * se);
    printf("Mean PPL(Q)-PPL(base)     : %10.6f\n", exp(mq) - exp(mb));

    mean_se(c->kld, n, &m, &se);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f +/- %10.6f\n", m, se);
    memcpy(d, c->kld, (size_t)n * sizeof *d);
    qsort(d, (size_t)n, sizeof *d, cmp_double);
    printf("Maximum KLD: %10.6f\n", d[n - 1]);
    printf("99.9%%   KLD: %10.6f\n", quantile(d, n, 0.999));
    printf("99.0%%   KLD: %10.6f\n", quantile(d, n, 0.99));
    printf("95.0%%   KLD: %10.6f\n", quantile(d, n, 0.95));
    printf("90.0%%   KLD: %10.6f\n", quantile(d, n, 0.90));
    printf("Median  KLD: %10.6f\n", quantile(d, n, 0.5));
    printf("10.0%%   KLD: %10.6f\n", quantile(d, n, 0.10));
    printf(" 5.0%%   KLD: %10.6f\n", quantile(d, n, 0.05));
    printf(" 1.0%%   KLD: %10.6f\n", quantile(d, n, 0.01));
    printf(" 0.1%%   KLD: %10.6f\n", quantile(d, n, 0.001));
    printf("Minimum KLD: %10.6f\n", d[0]);

    printf("\n====== Token probability statistics ======\n");
    mean_se(c->dp, n, &m, &se);
    printf("Mean    Δp: %8.4f +/- %.4f %%\n", 100 * m, 100 * se);
    memcpy(d, c->dp, (size_t)n * sizeof *d);
    qsort(d, (size_t)n, sizeof *d, cmp_double);
    printf("Maximum Δp: %8.4f%%\n", 100 * d[n - 1]);
    printf("99.0%%   Δp: %8.4f%%\n", 100 * quantile(d, n, 0.99));
    printf("Median  Δp: %8.4f%%\n", 100 * quantile(d, n, 0.5));
    printf(" 1.0%%   Δp: %8.4f%%\n", 100 * quantile(d, n, 0.01));
    printf("Minimum Δp: %8.4f%%\n", 100 * d[0]);
    /* RMS dp = sqrt(mean dp^2); its error from that of the mean of dp^2 */
    for (int64_t i = 0; i < n; i++) d[i] = c->dp[i] * c->dp[i];
    mean_se(d, n, &m, &se);
    double rms = sqrt(m);
    printf("RMS Δp    : %8.4f +/- %.4f %%\n", 100 * rms, rms > 0 ? 100 * se / (2 * rms) : 0.0);
    double f = (double)c->same_top / (double)n;
    printf("Same top p: %8.4f +/- %.4f %%\n", 100 * f,
           n > 1 ? 100 * sqrt(f * (1 - f) / (double)(n - 1)) : 0.0);
    free(d);
}

int kld_compare(cli_args *a, const char *text) {
    cmp_ctx c = {0};
    if (candle_kld_open(&c.rd, a->kld_base)) {
        fprintf(stderr, "candle perplexity: %s\n", candle_last_errmsg());
        return 1;
    }
    const candle_kld_header *h = candle_kld_header_of(c.rd);
    const int32_t *base_ids = candle_kld_tokens(c.rd);
    if (a->n_ctx && a->n_ctx != h->n_ctx) {
        fprintf(stderr, "candle perplexity: -c %lld differs from the context of %s (%lld)\n",
                (long long)a->n_ctx, a->kld_base, (long long)h->n_ctx);
        candle_kld_close(c.rd);
        return 1;
    }
    a->n_ctx = h->n_ctx;
    gen g;
    int r = gen_open(&g, "perplexity", a, h->n_ctx);
    if (r) {
        candle_kld_close(c.rd);
        return r;
    }
    int32_t *ids = NULL;
    int64_t n = 0, rows = candle_kld_n_rows(h);
    if (g.n_vocab != h->n_vocab)
        r = 1, fprintf(stderr, "candle perplexity: the model's vocabulary has %lld tokens, %s was "
                               "written with %lld\n",
                       (long long)g.n_vocab, a->kld_base, (long long)h->n_vocab);
    else if (candle_session_n_ctx(g.sess) < h->n_ctx)
        r = 1, fprintf(stderr, "candle perplexity: the model's context is %lld, below the %lld of %s\n",
                       (long long)candle_session_n_ctx(g.sess), (long long)h->n_ctx, a->kld_base);
    else if (text && !(r = gen_tokenize(&g, text, true, false, &ids, &n))) {
        if (n != h->n_tokens)
            r = 1, fprintf(stderr, "candle perplexity: %s tokenizes to %lld tokens, %s holds %lld "
                                   "(a different text or tokenizer)\n",
                           a->file, (long long)n, a->kld_base, (long long)h->n_tokens);
        for (int64_t i = 0; !r && i < n; i++)
            if (ids[i] != base_ids[i])
                r = 1, fprintf(stderr, "candle perplexity: %s differs from the tokens of %s at "
                                       "token %lld (%d, not %d): a different text or tokenizer\n",
                               a->file, a->kld_base, (long long)i, (int)ids[i], (int)base_ids[i]);
    }
    if (!r) {
        c.n_vocab = h->n_vocab;
        c.base = malloc((size_t)h->n_vocab * sizeof *c.base);
        c.kld = malloc((size_t)rows * sizeof *c.kld);
        c.dp = malloc((size_t)rows * sizeof *c.dp);
        c.nll_q = malloc((size_t)rows * sizeof *c.nll_q);
        c.nll_b = malloc((size_t)rows * sizeof *c.nll_b);
        if (!c.base || !c.kld || !c.dp || !c.nll_q || !c.nll_b)
            r = 1, fprintf(stderr, "candle perplexity: out of memory\n");
    }
    if (!r) r = ppl_eval(&g, base_ids, h->n_chunk, h->n_ctx, cmp_row, &c);
    /* the checksum covers the whole file: nothing is reported from a corrupted one */
    if (!r && candle_kld_finish(c.rd))
        r = 1, fprintf(stderr, "candle perplexity: %s\n", candle_last_errmsg());
    if (!r) report(&c);
    free(c.base);
    free(c.kld);
    free(c.dp);
    free(c.nll_q);
    free(c.nll_b);
    free(ids);
    candle_kld_close(c.rd);
    gen_close(&g);
    return r;
}
