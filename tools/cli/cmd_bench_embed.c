/* candle bench embed -m MODEL [--lengths 16,128,512] [--batch 1,32] [-t 1,2]
 *                    [--reps N] [--batch-reps M] [--no-mmap] [--json]
 *
 * Sentence-embedding latency and throughput of candle_encoder_embed (the
 * whole pipeline: tokenization, the encoder, pooling, Dense, Normalize) on
 * inputs of exactly L tokens, [CLS] and [SEP] included. Each input is one
 * word that the tokenizer keeps as one token, repeated L - 2 times; the
 * count is checked with the model's own tokenizer, and the word is printed
 * so that peers (bench/embed_compare.py) can build the same texts.
 *
 * For each thread count (candle_encoder_params.n_threads; the encoder is
 * loaded once per count), length and batch size: warm-up calls, then timed
 * calls of one batch each. Batch 1 gives latency (P50/P99 over --reps
 * calls); a larger batch gives throughput (inputs/s = batch / median call).
 * P99 is the nearest-rank percentile, so with fewer than 100 calls it is
 * the slowest or nearly so.
 *
 * Lengths beyond the model's limit (candle_encoder_max_tokens: the
 * directory's max_seq_length) are skipped, not truncated, and reported as
 * such: sentence-transformers would cut them to the limit. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "args.h"
#include "cli.h"

#define MAX_LIST 16

typedef struct int_list {
    int v[MAX_LIST];
    int n;
} int_list;

typedef struct embed_row {
    int threads, tokens, batch, reps;
    double p50_ms, p99_ms, mean_ms, min_ms, inputs_per_s;
} embed_row;

static bool parse_list(const char *s, int_list *l, int lo, int hi) {
    l->n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || l->n == MAX_LIST) return false;
        l->v[l->n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return false;
    }
    return l->n > 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle bench embed -m MODEL [options]\n"
            "  -m MODEL          an encoder (Hugging Face sentence-transformers directory)\n"
            "  --lengths L,...   tokens per input, [CLS]/[SEP] included (default 16,128,512;\n"
            "                    lengths over the model's max_seq_length are skipped)\n"
            "  --batch B,...     inputs per call (default 1,32): 1 = latency, more = throughput\n"
            "  -t T,...          thread counts (default 1,2)\n"
            "  --reps N          timed calls at batch 1 (default 20; 2 warm-up calls before)\n"
            "  --batch-reps M    timed calls at larger batches (default 3; 1 warm-up call)\n"
            "  --no-mmap         weights in anonymous memory\n"
            "  --dtype T         f32 (weights as stored), f16, bf16 or q8_0: weight matrices converted at load\n"
            "  --json            JSON instead of a markdown table\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[n]. */
static double percentile(const double *v, int n, double p) {
    int k = (int)ceil(p / 100.0 * n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

static int64_t count_tokens(const candle_tokenizer *tok, const char *s) {
    int64_t n = 0;
    if (candle_tokenizer_encode(tok, s, strlen(s), true, false, NULL, 0, &n)) return -1;
    return n;
}

/* A word that is one token alone and one token per repetition. */
static const char *pick_word(const candle_tokenizer *tok) {
    static const char *const words[] = {"hello", "the", "world", "word", "test", "a", "x", "and"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char buf[64];
        int64_t one = count_tokens(tok, words[i]);
        snprintf(buf, sizeof buf, "%s %s %s", words[i], words[i], words[i]);
        int64_t three = count_tokens(tok, buf);
        if (one >= 2 && three == one + 2) return words[i];
    }
    return NULL;
}

/* The word repeated so the text tokenizes to exactly L tokens, or NULL. */
static char *make_text(const candle_tokenizer *tok, const char *w, int L) {
    int64_t special = count_tokens(tok, w) - 1; /* [CLS] + [SEP] */
    int64_t reps = L - special;
    if (reps < 1) return NULL;
    size_t wl = strlen(w);
    char *s = malloc((size_t)reps * (wl + 1) + 1);
    if (!s) return NULL;
    char *p = s;
    for (int64_t i = 0; i < reps; i++) {
        if (i) *p++ = ' ';
        memcpy(p, w, wl);
        p += wl;
    }
    *p = 0;
    if (count_tokens(tok, s) != L) {
        free(s);
        return NULL;
    }
    return s;
}

static int run_config(const candle_encoder *e, const char *text, int threads, int L, int batch,
                      int reps, embed_row *row) {
    int64_t dim = candle_encoder_dim(e);
    const char **texts = malloc((size_t)batch * sizeof *texts);
    float *out = malloc((size_t)batch * (size_t)dim * sizeof *out);
    double *t = malloc((size_t)reps * sizeof *t);
    int rc = 1;
    if (!texts || !out || !t) {
        fprintf(stderr, "candle bench embed: out of memory\n");
        goto done;
    }
    for (int i = 0; i < batch; i++) texts[i] = text;
    candle_embed_params ep = candle_embed_default_params();
    ep.no_truncate = true;
    int warm = batch == 1 ? 2 : 1;
    for (int r = -warm; r < reps; r++) {
        double t0 = bench_now_s();
        if (candle_encoder_embed(e, texts, NULL, batch, &ep, out, (size_t)batch * (size_t)dim)) {
            fprintf(stderr, "candle bench embed: %s\n", candle_last_errmsg());
            goto done;
        }
        double dt = bench_now_s() - t0;
        if (r >= 0) t[r] = dt;
    }
    double sum = 0;
    for (int r = 0; r < reps; r++) sum += t[r];
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double p50 = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    *row = (embed_row){threads, L, batch, reps, 1e3 * p50, 1e3 * percentile(t, reps, 99),
                       1e3 * sum / reps, 1e3 * t[0], batch / p50};
    rc = 0;
done:
    free(texts);
    free(out);
    free(t);
    return rc;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

int cmd_bench_embed(int argc, char **argv) {
    const char *model = NULL;
    int_list lengths = {{16, 128, 512}, 3}, batches = {{1, 32}, 2}, threads = {{1, 2}, 2};
    int reps = 20, batch_reps = 3;
    bool json = false, no_mmap = false;
    candle_dtype wdtype = CANDLE_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(a, "-m") || !strcmp(a, "--lengths") || !strcmp(a, "--batch") ||
                     !strcmp(a, "-t") || !strcmp(a, "--threads") || !strcmp(a, "--reps") ||
                     !strcmp(a, "--batch-reps") || !strcmp(a, "--dtype");
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (takes && !v) {
            fprintf(stderr, "candle bench embed: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--no-mmap")) no_mmap = true;
        else if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--lengths") && !parse_list(v, &lengths, 3, 1 << 20)) {
            fprintf(stderr, "candle bench embed: --lengths %s: want a list of lengths >= 3\n", v);
            return 2;
        } else if (!strcmp(a, "--batch") && !parse_list(v, &batches, 1, 1 << 16)) {
            fprintf(stderr, "candle bench embed: --batch %s: want a list of sizes 1..65536\n", v);
            return 2;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && !parse_list(v, &threads, 1, 256)) {
            fprintf(stderr, "candle bench embed: -t %s: want a list of 1..256 threads\n", v);
            return 2;
        } else if (!strcmp(a, "--dtype") && !cli_weight_dtype(v, &wdtype)) {
            fprintf(stderr, "candle bench embed: --dtype %s: want f32, f16, bf16 or q8_0\n", v);
            return 2;
        } else if (!strcmp(a, "--reps") && (reps = atoi(v)) < 1) {
            fprintf(stderr, "candle bench embed: --reps must be >= 1\n");
            return 2;
        } else if (!strcmp(a, "--batch-reps") && (batch_reps = atoi(v)) < 1) {
            fprintf(stderr, "candle bench embed: --batch-reps must be >= 1\n");
            return 2;
        } else if (!takes && strcmp(a, "--json") && strcmp(a, "--no-mmap")) {
            fprintf(stderr, "candle bench embed: unknown option '%s'\n", a);
            return 2;
        }
        if (takes) i++;
    }
    if (!model) {
        fprintf(stderr, "candle bench embed: need -m MODEL\n");
        usage(stderr);
        return 2;
    }

    embed_row rows[MAX_LIST * MAX_LIST * MAX_LIST];
    int n_rows = 0, rc = 1;
    int skipped[MAX_LIST], n_skipped = 0;
    char *texts[MAX_LIST] = {0};
    const char *word = NULL;
    int64_t max_tokens = 0, dim = 0;
    double load_ms = 0;
    for (int ti = 0; ti < threads.n; ti++) {
        candle_encoder_params lp = candle_encoder_default_params();
        lp.n_threads = threads.v[ti];
        lp.no_mmap = no_mmap;
        lp.weight_dtype = wdtype;
        candle_encoder *e = NULL;
        double t0 = bench_now_s();
        if (candle_encoder_load(&e, model, &lp)) {
            cli_error_file("bench embed", model, candle_last_errmsg());
            goto done;
        }
        if (ti == 0) {
            load_ms = 1e3 * (bench_now_s() - t0);
            const candle_tokenizer *tok = candle_encoder_tokenizer(e);
            max_tokens = candle_encoder_max_tokens(e);
            dim = candle_encoder_dim(e);
            word = pick_word(tok);
            if (!word) {
                fprintf(stderr, "candle bench embed: no one-token word found in the vocabulary\n");
                candle_encoder_free(e);
                goto done;
            }
            for (int li = 0; li < lengths.n; li++) {
                if (lengths.v[li] > max_tokens) {
                    fprintf(stderr,
                            "candle bench embed: %d tokens is over the model's limit (%" PRId64
                            "; sentence-transformers truncates there): skipped\n",
                            lengths.v[li], max_tokens);
                    skipped[n_skipped++] = lengths.v[li];
                    continue;
                }
                texts[li] = make_text(tok, word, lengths.v[li]);
                if (!texts[li]) {
                    fprintf(stderr, "candle bench embed: cannot make a text of %d tokens\n",
                            lengths.v[li]);
                    candle_encoder_free(e);
                    goto done;
                }
            }
        }
        for (int li = 0; li < lengths.n; li++) {
            if (!texts[li]) continue;
            for (int bi = 0; bi < batches.n; bi++) {
                int b = batches.v[bi];
                if (run_config(e, texts[li], threads.v[ti], lengths.v[li], b, b == 1 ? reps : batch_reps,
                               &rows[n_rows])) {
                    candle_encoder_free(e);
                    goto done;
                }
                n_rows++;
            }
        }
        candle_encoder_free(e);
    }

    if (json) {
        printf("{\"bench\": \"embed\", \"model\": ");
        json_str(model);
        printf(", \"word\": ");
        json_str(word ? word : "");
        printf(", \"max_tokens\": %" PRId64 ", \"dim\": %" PRId64 ", \"load_ms\": %.3f, \"skipped\": [",
               max_tokens, dim, load_ms);
        for (int i = 0; i < n_skipped; i++) printf("%s%d", i ? ", " : "", skipped[i]);
        printf("],\n \"results\": [");
        for (int i = 0; i < n_rows; i++) {
            const embed_row *r = &rows[i];
            printf("%s\n  {\"threads\": %d, \"tokens\": %d, \"batch\": %d, \"reps\": %d, \"p50_ms\": %.4f, "
                   "\"p99_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, \"inputs_per_s\": %.3f}",
                   i ? "," : "", r->threads, r->tokens, r->batch, r->reps, r->p50_ms, r->p99_ms, r->mean_ms,
                   r->min_ms, r->inputs_per_s);
        }
        printf("\n]}\n");
    } else {
        printf("candle bench embed: %s (dim %" PRId64 ", max %" PRId64 " tokens; inputs: \"%s\" repeated)\n\n",
               model, dim, max_tokens, word ? word : "");
        printf("| threads | tokens | batch | calls | P50 ms | P99 ms | mean ms | inputs/s |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < n_rows; i++) {
            const embed_row *r = &rows[i];
            printf("| %d | %d | %d | %d | %.3f | %.3f | %.3f | %.1f |\n", r->threads, r->tokens, r->batch,
                   r->reps, r->p50_ms, r->p99_ms, r->mean_ms, r->inputs_per_s);
        }
        for (int i = 0; i < n_skipped; i++)
            printf("\n%d tokens: skipped (over the model's %" PRId64 ")\n", skipped[i], max_tokens);
    }
    rc = 0;
done:
    for (int i = 0; i < MAX_LIST; i++) free(texts[i]);
    return rc;
}
