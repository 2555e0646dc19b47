/* candle classify / candle rerank: a sequence-classification model's label
 * probabilities, and a cross-encoder's scores of documents for a query
 * (encoder.h), as JSON lines. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "texts.h"

static void usage_classify(FILE *f) {
    fprintf(f,
            "usage: candle classify -m MODEL (-p TEXT | -f FILE) [options]\n"
            "  -m MODEL     a sequence-classification model (Hugging Face directory)\n"
            "  -p TEXT      one text (may be repeated)\n"
            "  -f FILE      one text per line (empty lines skipped)\n"
            "  --all        every label's probability, not only the best\n"
            "  -t N         threads\n"
            "  --dtype T    f32 (weights as stored), f16, bf16 or q8_0: weight matrices converted at load\n"
            "output: one JSON line per input {\"index\", \"label\", \"score\"[, \"scores\"]}\n");
}

static void usage_rerank(FILE *f) {
    fprintf(f,
            "usage: candle rerank -m MODEL -q QUERY (-f DOCS | -p DOC...) [options]\n"
            "  -m MODEL     a cross-encoder (Hugging Face directory, one label)\n"
            "  -q QUERY     the query\n"
            "  -f DOCS      one document per line (empty lines skipped)\n"
            "  -p DOC       one document (may be repeated)\n"
            "  --top-n N    print only the N best\n"
            "  -t N         threads\n"
            "  --dtype T    f32 (weights as stored), f16, bf16 or q8_0: weight matrices converted at load\n"
            "output: one JSON line per document, best first {\"index\", \"score\", \"document\"}\n");
}

/* The options both commands share; false (with a message) on a bad one. */
typedef struct enc_args {
    const char *model, *file, *query;
    texts t;
    candle_encoder_params lp;
    int64_t top_n;
    bool all, help;
} enc_args;

static bool parse(const char *cmd, int argc, char **argv, enc_args *a) {
    a->lp = candle_encoder_default_params();
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(o, "-m") || !strcmp(o, "-p") || !strcmp(o, "-f") || !strcmp(o, "-q") ||
                     !strcmp(o, "-t") || !strcmp(o, "--top-n") || !strcmp(o, "--dtype");
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return a->help = true;
        if (takes && !v) return fprintf(stderr, "candle %s: %s needs a value\n", cmd, o), false;
        if (!strcmp(o, "-m")) a->model = v;
        else if (!strcmp(o, "-p") && !texts_push(&a->t, v, strlen(v))) return fprintf(stderr, "out of memory\n"), false;
        else if (!strcmp(o, "-f")) a->file = v;
        else if (!strcmp(o, "-q")) a->query = v;
        else if (!strcmp(o, "-t")) a->lp.n_threads = atoi(v);
        else if (!strcmp(o, "--dtype") && !cli_weight_dtype(v, &a->lp.weight_dtype))
            return fprintf(stderr, "candle %s: --dtype %s: want f32, f16, bf16 or q8_0\n", cmd, v), false;
        else if (!strcmp(o, "--top-n")) a->top_n = strtoll(v, NULL, 10);
        else if (!strcmp(o, "--all")) a->all = true;
        else if (!takes) return fprintf(stderr, "candle %s: unexpected argument '%s'\n", cmd, o), false;
        if (takes) i++;
    }
    if (a->file && !texts_read_lines(&a->t, a->file))
        return fprintf(stderr, "candle %s: cannot read %s\n", cmd, a->file), false;
    return true;
}

static candle_encoder *load(const char *cmd, const enc_args *a) {
    candle_encoder *e = NULL;
    if (candle_encoder_load(&e, a->model, &a->lp)) fprintf(stderr, "candle %s: %s\n", cmd, candle_last_errmsg());
    return e;
}

static void print_class(const candle_encoder *e, int64_t i, const float *p, int64_t L, bool all) {
    int64_t best = 0;
    for (int64_t k = 1; k < L; k++)
        if (p[k] > p[best]) best = k;
    printf("{\"index\": %" PRId64 ", \"label\": ", i);
    texts_json_str(stdout, candle_encoder_label(e, best));
    printf(", \"score\": %.8g", p[best]);
    if (all) {
        printf(", \"scores\": {");
        for (int64_t k = 0; k < L; k++) {
            printf("%s", k ? ", " : "");
            texts_json_str(stdout, candle_encoder_label(e, k));
            printf(": %.8g", p[k]);
        }
        printf("}");
    }
    printf("}\n");
}

int cmd_classify(int argc, char **argv) {
    enc_args a = {0};
    int rc = 2;
    if (!parse("classify", argc, argv, &a) || a.help || !a.model || !a.t.n) {
        if (!a.help) fprintf(stderr, "candle classify: need -m MODEL and texts (-p or -f)\n");
        usage_classify(a.help ? stdout : stderr);
        rc = a.help ? 0 : 2;
        goto done;
    }
    rc = 1;
    candle_encoder *e = load("classify", &a);
    int64_t L = e ? candle_encoder_n_labels(e) : 0;
    float *p = L ? malloc((size_t)(a.t.n * L) * sizeof *p) : NULL;
    if (e && !L) fprintf(stderr, "candle classify: %s has no classifier head\n", a.model);
    else if (e && !p) fprintf(stderr, "candle classify: out of memory\n");
    else if (e && candle_encoder_classify(e, (const char *const *)a.t.v, NULL, a.t.n, NULL, p, (size_t)(a.t.n * L)))
        fprintf(stderr, "candle classify: %s\n", candle_last_errmsg());
    else if (e) {
        for (int64_t i = 0; i < a.t.n; i++) print_class(e, i, p + i * L, L, a.all);
        rc = 0;
    }
    free(p);
    candle_encoder_free(e);
done:
    texts_free(&a.t);
    return rc;
}

static const float *g_scores; /* qsort's comparator has no user argument */

static int by_score(const void *x, const void *y) {
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    float a = g_scores[i], b = g_scores[j];
    return a > b ? -1 : a < b ? 1 : (i > j) - (i < j); /* ties keep the input order */
}

int cmd_rerank(int argc, char **argv) {
    enc_args a = {0};
    int rc = 2;
    if (!parse("rerank", argc, argv, &a) || a.help || !a.model || !a.query || !a.t.n || a.top_n < 0) {
        if (!a.help) fprintf(stderr, "candle rerank: need -m MODEL, -q QUERY and documents (-f or -p)\n");
        usage_rerank(a.help ? stdout : stderr);
        rc = a.help ? 0 : 2;
        goto done;
    }
    rc = 1;
    candle_encoder *e = load("rerank", &a);
    float *s = malloc((size_t)a.t.n * sizeof *s);
    int64_t *idx = malloc((size_t)a.t.n * sizeof *idx);
    if (e && (!s || !idx)) fprintf(stderr, "candle rerank: out of memory\n");
    else if (e && candle_encoder_rerank(e, a.query, SIZE_MAX, (const char *const *)a.t.v, NULL, a.t.n, NULL, s))
        fprintf(stderr, "candle rerank: %s\n", candle_last_errmsg());
    else if (e) {
        for (int64_t i = 0; i < a.t.n; i++) idx[i] = i;
        g_scores = s;
        qsort(idx, (size_t)a.t.n, sizeof *idx, by_score);
        int64_t top = a.top_n && a.top_n < a.t.n ? a.top_n : a.t.n;
        for (int64_t k = 0; k < top; k++) {
            printf("{\"index\": %" PRId64 ", \"score\": %.8g, \"document\": ", idx[k], s[idx[k]]);
            texts_json_str(stdout, a.t.v[idx[k]]);
            printf("}\n");
        }
        rc = 0;
    }
    free(s);
    free(idx);
    candle_encoder_free(e);
done:
    texts_free(&a.t);
    return rc;
}
