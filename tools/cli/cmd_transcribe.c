/* candle transcribe: speech to text with a Whisper model (whisper.h):
 * greedy decoding as faster-whisper's transcribe(beam_size=1), segments
 * with timestamps. Output to stdout as text, SRT or WebVTT (as
 * openai-whisper's writers write them) or JSON (with each segment's words
 * under --word-timestamps); timings to stderr. Text,
 * SRT and VTT are printed segment by segment as the windows are decoded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "subtitles.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle transcribe -m MODEL -f AUDIO [options]\n"
            "  -m MODEL          a Whisper model: a CTranslate2 directory (model.bin,\n"
            "                    config.json, tokenizer.json; scripts/fetch-whisper.sh's),\n"
            "                    a Hugging Face directory (config.json, model.safetensors,\n"
            "                    tokenizer.json) or a whisper.cpp ggml file\n"
            "  -f AUDIO          an audio file (WAV, FLAC, OGG, MP3: whatever libsndfile reads)\n"
            "  -o txt|srt|vtt|json\n"
            "                    output: the segments' text one a line (txt, the default;\n"
            "                    \"text\" too), SubRip or WebVTT subtitles, or one JSON object\n"
            "                    {\"text\", \"language\", \"segments\", \"tokens\", \"duration\"}\n"
            "  --timestamps      txt: each line as [start --> end] text\n"
            "  --no-timestamps   decode without timestamp tokens: one segment a 30 s window\n"
            "  --no-condition    do not prompt a window with the text before it\n"
            "  --temperature T   the first temperature (0: greedy); a window that fails the\n"
            "                    compression-ratio (2.4) or log-probability (-1.0) check is\n"
            "                    decoded again 0.2 hotter, up to 1.0, as openai-whisper's\n"
            "                    --temperature_increment_on_fallback 0.2\n"
            "  --no-fallback     decode each window at the first temperature only\n"
            "  --best-of N       samples per temperature above 0 (5)\n"
            "  --beam N          beam search with N beams at temperature 0 (5, as\n"
            "                    faster-whisper; 1: greedy; at most 16)\n"
            "  --patience P      beam search: stop after round(N * P) finished hypotheses (1.0)\n"
            "  --language xx|auto  the spoken language of a multilingual model (auto: detected\n"
            "                    on the first 30 s, the default); English-only models: en\n"
            "  --task transcribe|translate\n"
            "                    translate: English text from speech in another language\n"
            "  --prompt TEXT     an initial prompt (faster-whisper's initial_prompt): text\n"
            "                    the first window is decoded after, as if already said\n"
            "                    (names, spelling, style); its last 223 tokens are kept\n"
            "  --word-timestamps words with their times (faster-whisper's word_timestamps):\n"
            "                    -o json: each segment gets \"words\": [{\"word\", \"start\",\n"
            "                    \"end\", \"probability\"}]; segments start and end at their words\n"
            "  --seed N          the sampler's seed (0)\n"
            "  -t N              threads\n"
            "  --no-mmap         read the weights into memory instead of mapping them\n"
            "  --dtype T         f32 (weights widened to f32, as CTranslate2 on a CPU), f16,\n"
            "                    bf16 (whisper.cpp's f16 bytes; bf16 on the CPU's bf16 dot\n"
            "                    products where it has them) or q8_0 (int8, as faster-whisper's\n"
            "                    int8: quantized at load, the integer dot products)\n");
}

typedef enum { OUT_TXT, OUT_SRT, OUT_VTT, OUT_JSON } out_fmt;

typedef struct targs {
    const char *model, *audio;
    out_fmt fmt;
    bool no_mmap, timestamps, no_timestamps, no_condition, no_fallback, word_timestamps;
    candle_dtype weight_dtype; /* --dtype */
    const char *prompt;
    int n_threads, best_of, beam;
    double temperature, patience;
    const char *language;
    bool translate;
    unsigned long long seed;
} targs;

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

typedef struct printer {
    const targs *a;
    double duration;
    int64_t n;
} printer;

static int on_segment(const candle_whisper_segment *s, void *user) {
    printer *p = user;
    p->n++;
    switch (p->a->fmt) {
    case OUT_TXT: cue_write(stdout, s, p->n, p->a->timestamps ? CUE_TXT_TIMES : CUE_TXT); break;
    case OUT_SRT: cue_write(stdout, s, p->n, CUE_SRT); break;
    case OUT_VTT: cue_write(stdout, s, p->n, CUE_VTT); break;
    case OUT_JSON: break;
    }
    fflush(stdout);
    if (p->duration > 30) fprintf(stderr, "progress: %.0f%%\n", fmin(100.0, 100.0 * s->t1 / p->duration));
    return 0;
}

static void print_json(const candle_whisper_result *r, double duration) {
    size_t n;
    const char *t = cue_trimmed(r->text, &n);
    printf("{\"text\": ");
    print_json_str(t, n);
    printf(", \"language\": ");
    print_json_str(r->language, strlen(r->language));
    printf(", \"language_probability\": %.6f, \"segments\": [", r->language_probability);
    for (int64_t i = 0; i < r->n_segments; i++) {
        const candle_whisper_segment *s = &r->segments[i];
        printf("%s{\"id\": %lld, \"seek\": %lld, \"start\": %.2f, \"end\": %.2f, \"text\": ", i ? ", " : "",
               (long long)i, (long long)s->seek, s->t0, s->t1);
        print_json_str(s->text, strlen(s->text));
        printf(", \"tokens\": [");
        for (int64_t k = 0; k < s->n_tokens; k++) printf("%s%d", k ? ", " : "", (int)s->tokens[k]);
        printf("], \"temperature\": %.1f, \"avg_logprob\": %.6f, \"compression_ratio\": %.6f, \"no_speech_prob\": %.6f",
               s->temperature, s->avg_logprob, s->compression_ratio, s->no_speech_prob);
        if (s->words) {
            printf(", \"words\": [");
            for (int64_t k = 0; k < s->n_words; k++) {
                const candle_whisper_word *wd = &s->words[k];
                printf("%s{\"word\": ", k ? ", " : "");
                print_json_str(wd->word, strlen(wd->word));
                printf(", \"start\": %.2f, \"end\": %.2f, \"probability\": %.6f}", wd->t0, wd->t1, wd->probability);
            }
            putchar(']');
        }
        putchar('}');
    }
    printf("], \"tokens\": [");
    for (int64_t i = 0; i < r->n_tokens; i++) printf("%s%d", i ? ", " : "", (int)r->tokens[i]);
    printf("], \"duration\": %.3f}\n", duration);
}

/* A number in [lo, hi], the whole of v. */
static bool num_arg(const char *v, double lo, double hi, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi)) return false;
    *out = d;
    return true;
}

/* 0: go on; -1: --help; 2: usage error. */
static int parse(int argc, char **argv, targs *a) {
    double d;
    a->best_of = 5;
    a->beam = 5;
    a->patience = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return usage(stdout), -1;
        bool *flag = !strcmp(o, "--no-mmap")           ? &a->no_mmap
                     : !strcmp(o, "--timestamps")      ? &a->timestamps
                     : !strcmp(o, "--no-timestamps")   ? &a->no_timestamps
                     : !strcmp(o, "--no-condition")    ? &a->no_condition
                     : !strcmp(o, "--no-fallback")     ? &a->no_fallback
                     : !strcmp(o, "--word-timestamps") ? &a->word_timestamps
                                                       : NULL;
        if (flag) {
            *flag = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "candle transcribe: %s: unknown option or missing value\n", o);
            return usage(stderr), 2;
        }
        i++;
        if (!strcmp(o, "-m")) a->model = v;
        else if (!strcmp(o, "-f")) a->audio = v;
        else if (!strcmp(o, "-t")) a->n_threads = atoi(v);
        else if (!strcmp(o, "--dtype") && cli_weight_dtype(v, &a->weight_dtype)) {
        }
        else if (!strcmp(o, "--temperature") && num_arg(v, 0, 100, &a->temperature)) {
        } else if (!strcmp(o, "--best-of") && num_arg(v, 1, 1000, &d)) a->best_of = (int)d;
        else if (!strcmp(o, "--beam") && num_arg(v, 1, 16, &d)) a->beam = (int)d;
        else if (!strcmp(o, "--patience") && num_arg(v, 0.01, 100, &a->patience)) {
        } else if (!strcmp(o, "--language") && strlen(v) > 0 && strlen(v) < 16) a->language = v;
        else if (!strcmp(o, "--task") && !strcmp(v, "transcribe")) a->translate = false;
        else if (!strcmp(o, "--task") && !strcmp(v, "translate")) a->translate = true;
        else if (!strcmp(o, "--prompt")) a->prompt = v;
        else if (!strcmp(o, "--seed") && num_arg(v, 0, 1e18, &d)) a->seed = (unsigned long long)d;
        else if (!strcmp(o, "-o") && (!strcmp(v, "txt") || !strcmp(v, "text"))) a->fmt = OUT_TXT;
        else if (!strcmp(o, "-o") && !strcmp(v, "srt")) a->fmt = OUT_SRT;
        else if (!strcmp(o, "-o") && !strcmp(v, "vtt")) a->fmt = OUT_VTT;
        else if (!strcmp(o, "-o") && !strcmp(v, "json")) a->fmt = OUT_JSON;
        else {
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
    wp.weight_dtype = a.weight_dtype;
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
    tp.timestamps = !a.no_timestamps;
    tp.condition_on_previous_text = !a.no_condition;
    float temps[8];
    int nt = 0;
    for (double t = a.temperature; nt < 8 && (nt == 0 || (!a.no_fallback && t <= 1.0 + 1e-6)); t = a.temperature + 0.2 * nt)
        temps[nt++] = (float)t;
    tp.temperatures = temps;
    tp.n_temperatures = nt;
    tp.best_of = a.best_of;
    tp.seed = a.seed;
    tp.beam_size = a.beam;
    tp.patience = (float)a.patience;
    tp.language = a.language;
    tp.translate = a.translate;
    tp.initial_prompt = a.prompt;
    tp.word_timestamps = a.word_timestamps;
    printer pr = {.a = &a, .duration = duration};
    tp.on_segment = on_segment;
    tp.user = &pr;
    if (candle_whisper_transcribe(w, samples, n, &tp, &r)) {
        fprintf(stderr, "candle transcribe: %s\n", candle_last_errmsg());
        rc = 1;
        goto out;
    }
    double t2 = cli_now();
    if (a.fmt == OUT_JSON) print_json(&r, duration);
    fprintf(stderr, "load time: %.3f s\ntranscribe: %.2f s of audio in %.3f s (real-time factor %.3f), %lld segments, %lld tokens\n",
            t1 - t0, duration, t2 - t1, (t2 - t1) / duration, (long long)r.n_segments, (long long)r.n_tokens);
out:
    candle_whisper_result_free(&r);
    candle_free(samples);
    candle_whisper_free(w);
    return rc;
}
