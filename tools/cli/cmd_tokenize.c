/* candle tokenize: print the token ids of a text, space separated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: candle tokenize -m MODEL (-p TEXT | -f FILE) [--no-special]\n"
            "  -m MODEL        GGUF model or vocabulary file, or a Hugging Face directory\n"
            "                  (its tokenizer.json)\n"
            "  -p TEXT         text to tokenize\n"
            "  -f FILE         read the text from FILE (bytes as they are)\n"
            "  --no-special    add no BOS/EOS and read special-token text as plain text\n");
}

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = len;
    return buf;
}

static int print_ids(const candle_tokenizer *t, const char *text, size_t len, bool special) {
    int64_t n = 0;
    if (candle_tokenizer_encode(t, text, len, special, special, NULL, 0, &n) != CANDLE_OK) {
        fprintf(stderr, "candle tokenize: %s\n", candle_last_errmsg());
        return 1;
    }
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "candle tokenize: out of memory for %lld ids\n", (long long)n);
        return 1;
    }
    int rc = 0;
    if (candle_tokenizer_encode(t, text, len, special, special, ids, n, &n) != CANDLE_OK) {
        fprintf(stderr, "candle tokenize: %s\n", candle_last_errmsg());
        rc = 1;
    } else {
        for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool special = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-special")) special = false;
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has_val) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has_val) file = argv[++i];
        else {
            fprintf(stderr, "candle tokenize: unknown or incomplete option '%s'\n", a);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || (!prompt) == (!file)) {
        fprintf(stderr, "candle tokenize: need -m MODEL and exactly one of -p TEXT, -f FILE\n");
        tokenize_usage(stderr);
        return 2;
    }
    size_t len = 0;
    char *text = NULL;
    if (file && !(text = read_all(file, &len))) {
        fprintf(stderr, "candle tokenize: cannot read %s\n", file);
        return 1;
    }
    candle_weights *w = NULL;
    candle_tokenizer *t = NULL;
    int rc = 1;
    if (candle_weights_open(&w, model, NULL) != CANDLE_OK)
        fprintf(stderr, "candle tokenize: %s\n", candle_last_errmsg());
    else if (candle_tokenizer_from_weights(&t, w) != CANDLE_OK)
        fprintf(stderr, "candle tokenize: %s: %s\n", model, candle_last_errmsg());
    else rc = print_ids(t, file ? text : prompt, file ? len : strlen(prompt), special);
    candle_tokenizer_free(t);
    candle_weights_close(w);
    free(text);
    return rc;
}
