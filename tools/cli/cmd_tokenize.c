/* candle tokenize: print the token ids of a text, space separated, or one
 * token a line with its text (--show-tokens, as llama-tokenize prints). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: candle tokenize [-m MODEL] (-p TEXT | -f FILE) [--no-special] [--show-tokens]\n"
            "  -m MODEL        GGUF model or vocabulary file, or a Hugging Face directory\n"
            "                  (its tokenizer.json); default: " CLI_DEFAULT_MODEL "\n"
            "  -p TEXT         text to tokenize\n"
            "  -f FILE         read the text from FILE (bytes as they are)\n"
            "  --no-special    add no BOS/EOS and read special-token text as plain text\n"
            "  --show-tokens   one token a line, its id and text, as llama-tokenize prints:\n"
            "                  `   123 -> 'text'` (control characters escaped)\n"
            "Prints the ids on one line, space separated (llama-tokenize's --ids, without\n"
            "the brackets).\n");
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

/* One token a line as llama-tokenize's default output: "%6d -> '%s'". */
static void print_token(const candle_tokenizer *t, int32_t id) {
    char piece[512], esc[2048];
    size_t len = 0;
    if (candle_tokenizer_token_bytes(t, id, true, piece, sizeof piece, &len) || len >= sizeof piece)
        len = 0;
    /* candle_escape_text stops at a NUL: the <0x00> byte token has one */
    if (len == 1 && piece[0] == 0) snprintf(esc, sizeof esc, "\\x00");
    else candle_escape_text(piece, len, esc, sizeof esc);
    printf("%6d -> '%s'\n", (int)id, esc);
}

static int print_ids(const candle_tokenizer *t, const char *text, size_t len, bool special,
                     bool show) {
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
        if (show)
            for (int64_t i = 0; i < n; i++) print_token(t, ids[i]);
        else {
            for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            printf("\n");
        }
    }
    free(ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool special = true, show = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-special")) special = false;
        else if (!strcmp(a, "--show-tokens")) show = true;
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has_val) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has_val) file = argv[++i];
        else {
            fprintf(stderr, "candle tokenize: unknown or incomplete option '%s'\n", a);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if ((!prompt) == (!file)) {
        fprintf(stderr, "candle tokenize: need exactly one of -p TEXT, -f FILE\n");
        tokenize_usage(stderr);
        return 2;
    }
    /* the default model, as run's */
    char buf[4096];
    cli_args ca = {.model = model};
    if (!(model = cli_model_path(&ca, buf, sizeof buf))) return 1;
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
        cli_error_file("tokenize", model, candle_last_errmsg());
    else if (candle_tokenizer_from_weights(&t, w) != CANDLE_OK)
        cli_error_file("tokenize", model, candle_last_errmsg());
    else rc = print_ids(t, file ? text : prompt, file ? len : strlen(prompt), special, show);
    candle_tokenizer_free(t);
    candle_weights_close(w);
    free(text);
    return rc;
}
