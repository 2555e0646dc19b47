/* candle embed: sentence embeddings of texts, one per line of a file or one
 * -p text, as sentence-transformers computes them (encoder.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "texts.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle embed -m MODEL (-p TEXT | -f FILE) [options]\n"
            "  -m MODEL          an encoder: a Hugging Face (sentence-transformers) directory\n"
            "  -p TEXT           one text (may be repeated)\n"
            "  -f FILE           one text per line (empty lines skipped)\n"
            "  --pool P          mean | cls | last | max (default: the model's modules.json)\n"
            "  --normalize       L2-normalise (default: as modules.json says)\n"
            "  --no-normalize    do not normalise\n"
            "  --dimensions N    keep the first N dimensions (Matryoshka)\n"
            "  --no-truncate     refuse inputs longer than the model's max_seq_length\n"
            "  --dtype T         f32 (weights as stored), f16, bf16 or q8_0 (bfloat16: the CPU's bf16 dot\n"
            "                    products where it has them): weight matrices converted at load\n"
            "  --prompt-name N   prepend the prompt named N in config_sentence_transformers.json\n"
            "                    (default: its default_prompt_name, if any)\n"
            "  --prompt TEXT     prepend TEXT instead (\"\" for no prompt)\n"
            "  -o json|tsv       output: JSON lines {\"index\", \"embedding\"} (default) or TSV\n"
            "  -t N              threads\n");
}

static bool parse_pool(const char *s, candle_pooling *p) {
    static const char *const names[] = {"mean", "cls", "last", "max"};
    static const candle_pooling kinds[] = {CANDLE_POOLING_MEAN, CANDLE_POOLING_CLS, CANDLE_POOLING_LAST,
                                           CANDLE_POOLING_MAX};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) return *p = kinds[i], true;
    return false;
}

static void print_rows(const float *v, int64_t n, int64_t dim, bool tsv) {
    for (int64_t i = 0; i < n; i++) {
        if (!tsv) printf("{\"index\": %" PRId64 ", \"embedding\": [", i);
        for (int64_t k = 0; k < dim; k++)
            printf(tsv ? "%s%.8g" : "%s%.8g", k ? (tsv ? "\t" : ", ") : "", v[i * dim + k]);
        printf(tsv ? "\n" : "]}\n");
    }
}

int cmd_embed(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *fmt = "json";
    texts t = {0};
    candle_embed_params ep = candle_embed_default_params();
    candle_encoder_params lp = candle_encoder_default_params();
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = !strcmp(a, "-m") || !strcmp(a, "-p") || !strcmp(a, "-f") || !strcmp(a, "--pool") ||
                     !strcmp(a, "--dimensions") || !strcmp(a, "-o") || !strcmp(a, "-t") ||
                     !strcmp(a, "--prompt-name") || !strcmp(a, "--prompt") || !strcmp(a, "--dtype");
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto done;
        }
        if (takes && !v) {
            fprintf(stderr, "candle embed: %s needs a value\n", a);
            goto usage;
        }
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-p") && !texts_push(&t, v, strlen(v))) goto oom;
        else if (!strcmp(a, "-f")) file = v;
        else if (!strcmp(a, "-o")) fmt = v;
        else if (!strcmp(a, "-t")) lp.n_threads = atoi(v);
        else if (!strcmp(a, "--dtype") && !cli_weight_dtype(v, &lp.weight_dtype)) {
            fprintf(stderr, "candle embed: --dtype %s: want f32, f16, bf16 or q8_0\n", v);
            goto usage;
        }
        else if (!strcmp(a, "--dimensions")) ep.dimensions = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--prompt-name")) ep.prompt_name = v;
        else if (!strcmp(a, "--prompt")) ep.prompt = v;
        else if (!strcmp(a, "--pool") && !parse_pool(v, &ep.pooling)) {
            fprintf(stderr, "candle embed: --pool %s: want mean, cls, last or max\n", v);
            goto usage;
        } else if (!strcmp(a, "--normalize")) ep.normalize = 1;
        else if (!strcmp(a, "--no-normalize")) ep.normalize = 0;
        else if (!strcmp(a, "--no-truncate")) ep.no_truncate = true;
        else if (!takes) {
            fprintf(stderr, "candle embed: unexpected argument '%s'\n", a);
            goto usage;
        }
        if (takes) i++;
    }
    if (!model || (!file && !t.n) || (strcmp(fmt, "json") && strcmp(fmt, "tsv"))) {
        fprintf(stderr, "candle embed: need -m MODEL, texts (-p or -f) and -o json|tsv\n");
        goto usage;
    }
    rc = 1;
    if (file && !texts_read_lines(&t, file)) {
        fprintf(stderr, "candle embed: cannot read %s\n", file);
        goto done;
    }
    candle_encoder *e = NULL;
    if (candle_encoder_load(&e, model, &lp)) {
        fprintf(stderr, "candle embed: %s\n", candle_last_errmsg());
        goto done;
    }
    int64_t dim = ep.dimensions ? ep.dimensions : candle_encoder_dim(e);
    float *out = dim > 0 && t.n ? malloc((size_t)(t.n * dim) * sizeof *out) : NULL;
    if (!out) {
        fprintf(stderr, "candle embed: %s\n", dim > 0 ? "out of memory" : "bad --dimensions");
    } else if (candle_encoder_embed(e, (const char *const *)t.v, NULL, t.n, &ep, out, (size_t)(t.n * dim))) {
        fprintf(stderr, "candle embed: %s\n", candle_last_errmsg());
    } else {
        print_rows(out, t.n, dim, !strcmp(fmt, "tsv"));
        rc = 0;
    }
    free(out);
    candle_encoder_free(e);
    goto done;
oom:
    fprintf(stderr, "candle embed: out of memory\n");
    rc = 1;
    goto done;
usage:
    usage(stderr);
done:
    texts_free(&t);
    return rc;
}
