/* candle transcribe: speech to text with a Whisper model (whisper.h):
 * greedy decoding as faster-whisper's transcribe(beam_size=1,
 * without_timestamps=True). The text goes to stdout, timings to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle transcribe -m MODEL -f AUDIO [options]\n"
            "  -m MODEL        a CTranslate2 Whisper directory (model.bin, config.json,\n"
            "                  tokenizer.json), e.g. scripts/fetch-whisper.sh's\n"
            "  -f AUDIO        an audio file (WAV, FLAC, OGG, MP3: whatever libsndfile reads)\n"
            "  -o text|json    output: the text (default) or one JSON object\n"
            "                  {\"text\", \"tokens\", \"duration\"}\n"
            "  -t N            threads\n"
            "  --no-mmap       read model.bin into memory\n");
}

/* Whitespace Whisper puts before the first word, and any after the last. */
static const char *trimmed(const char *s, size_t *len) {
    while (*s == ' ' || *s == '\n') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) n--;
    *len = n;
    return s;
}

static void print_json_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_result(const candle_whisper_result *r, double duration, bool json) {
    size_t n;
    const char *t = trimmed(r->text, &n);
    if (!json) {
        printf("%.*s\n", (int)n, t);
        return;
    }
    printf("{\"text\": ");
    print_json_str(t, n);
    printf(", \"tokens\": [");
    for (int64_t i = 0; i < r->n_tokens; i++) printf("%s%d", i ? ", " : "", (int)r->tokens[i]);
    printf("], \"duration\": %.3f}\n", duration);
}

typedef struct targs {
    const char *model, *audio;
    bool json, no_mmap;
    int n_threads;
} targs;

/* 0: go on; -1: --help; 2: usage error. */
static int parse(int argc, char **argv, targs *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return usage(stdout), -1;
        if (!strcmp(o, "--no-mmap")) {
            a->no_mmap = true;
            continue;
        }
        if (!v) break;
        i++;
        if (!strcmp(o, "-m")) a->model = v;
        else if (!strcmp(o, "-f")) a->audio = v;
        else if (!strcmp(o, "-t")) a->n_threads = atoi(v);
        else if (!strcmp(o, "-o") && (!strcmp(v, "json") || !strcmp(v, "text"))) a->json = !strcmp(v, "json");
        else i = argc + 1; /* unknown option or value: a usage error below */
        if (i > argc) {
            fprintf(stderr, "candle transcribe: bad option %s %s\n", o, v);
            return usage(stderr), 2;
        }
    }
    if (!a->model || !a->audio || a->n_threads < 0) {
        fprintf(stderr, "candle transcribe: -m MODEL and -f AUDIO are required\n");
        return usage(stderr), 2;
    }
    return 0;
}

int cmd_transcribe(int argc, char **argv) {
    targs a = {0};
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    double t0 = cli_now();
    candle_whisper_params wp = candle_whisper_default_params();
    wp.no_mmap = a.no_mmap;
    candle_whisper *w = NULL;
    float *samples = NULL;
    size_t n = 0;
    candle_whisper_result r = {0};
    if (candle_whisper_load(&w, a.model, &wp) || candle_audio_load(a.audio, &samples, &n)) {
        fprintf(stderr, "candle transcribe: %s\n", candle_last_errmsg());
        rc = 1;
        goto out;
    }
    double t1 = cli_now(), duration = (double)n / CANDLE_AUDIO_SAMPLE_RATE;
    candle_whisper_transcribe_params tp = candle_whisper_transcribe_default_params();
    tp.n_threads = a.n_threads;
    tp.timestamps = false;
    tp.condition_on_previous_text = false;
    if (candle_whisper_transcribe(w, samples, n, &tp, &r)) {
        fprintf(stderr, "candle transcribe: %s\n", candle_last_errmsg());
        rc = 1;
        goto out;
    }
    double t2 = cli_now();
    print_result(&r, duration, a.json);
    fprintf(stderr, "load time: %.3f s\ntranscribe: %.2f s of audio in %.3f s (real-time factor %.3f), %lld tokens\n",
            t1 - t0, duration, t2 - t1, (t2 - t1) / duration, (long long)r.n_tokens);
out:
    candle_whisper_result_free(&r);
    candle_free(samples);
    candle_whisper_free(w);
    return rc;
}
