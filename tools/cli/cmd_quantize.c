/* candle quantize IN OUT.gguf TYPE (IN: GGUF or a Hugging Face directory), or IN OUT.bin TYPE for a
 * Whisper model (IN: a CTranslate2 or Hugging Face directory or a whisper.cpp file; OUT: a whisper.cpp
 * ggml file): a progress bar (or, when stderr is not a terminal, a line per tenth) on stderr and a
 * summary on stdout.
 *
 * Ctrl-C while converting cancels through the progress callback (nothing has
 * been written yet); while writing, the handler removes the writer's
 * temporary file (OUT.tmp, see gguf_writer.c) before the process dies, so an
 * interrupted run never leaves a partial file behind. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle quantize [options] IN OUT.gguf TYPE\n"
            "       candle quantize [options] WHISPER_MODEL OUT.bin TYPE\n\n"
            "Converts an f32/f16/bf16 GGUF file or Hugging Face directory (config.json +\n"
            "safetensors; written with llama.cpp's conventions, its tokenizer.json kept as\n"
            "tokenizer.huggingface.json) to TYPE, a llama.cpp file type: its base dtype\n"
            "for the weight matrices, with the tensors llama.cpp keeps at higher precision\n"
            "(output, attn_v and ffn_down in the _M mixes, ...) given more bits. Norms, biases\n"
            "and 1-D tensors stay as they are. Metadata is copied; general.file_type is set.\n"
            "The input is never overwritten; the output appears only once complete.\n\n"
            "options:\n"
            "  -t N                threads (default: all cores)\n"
            "  --pure              every weight matrix in TYPE's base dtype (no mixture rules)\n"
            "  --allow-requantize  accept already quantized tensors: dequantize, quantize again\n"
            "  --output-tensor-type T     output.weight (and a tied token_embd.weight) in dtype T\n"
            "  --token-embedding-type T   token_embd.weight in dtype T (f16, q8_0, q6_K, ...)\n"
            "  -q, --quiet         no progress output\n\n"
            "TYPE: %s\n\n"
            "A Whisper model (a CTranslate2 directory, a Hugging Face directory or a\n"
            "whisper.cpp ggml file) is written as a whisper.cpp ggml file that whisper.cpp\n"
            "and Candle both load: the linear weights and the token embedding in TYPE, the\n"
            "conv kernels f16, norms, biases and positional embeddings f32, as whisper.cpp's\n"
            "quantize tool does (--pure, --allow-requantize and the type options do not\n"
            "apply; a quantized input is dequantized first).\n"
            "Whisper TYPE: %s\n",
            candle_ftype_names(), candle_whisper_ggml_types());
}

static volatile sig_atomic_t interrupted;
static volatile sig_atomic_t writing;
static char tmp_path[4096]; /* OUT.tmp, removed if interrupted while writing */

static void on_signal(int sig) {
    if (writing || interrupted) {
        if (writing) unlink(tmp_path);
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted = 1;
}

typedef struct progress_state {
    bool tty, quiet;
    double last_draw;
    int last_tenth;
} progress_state;

static void draw_bar(const candle_quantize_progress *p) {
    double f = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 1.0;
    char bar[31];
    int fill = (int)(f * 30.0 + 0.5);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r\033[K[%s] %3d%% %" PRId64 "/%" PRId64 " %.40s %s -> %s", bar,
            (int)(f * 100.0), p->i_tensor + 1, p->n_tensors, p->name ? p->name : "",
            candle_dtype_name(p->src_dtype), candle_dtype_name(p->dst_dtype));
}

static bool on_progress(const candle_quantize_progress *p, void *user) {
    progress_state *s = user;
    if (p->writing) writing = 1;
    if (interrupted) return false;
    if (s->quiet) return true;
    if (p->note) {
        fprintf(stderr, "%snote: %s\n", s->tty ? "\r\033[K" : "", p->note);
        return true;
    }
    if (p->writing) {
        fprintf(stderr, "%swriting...\n", s->tty ? "\r\033[K" : "");
        return true;
    }
    if (s->tty) {
        double t = cli_now();
        if (t - s->last_draw >= 0.1 || p->bytes_done == p->bytes_total) {
            s->last_draw = t;
            draw_bar(p);
        }
    } else {
        int tenth = p->bytes_total ? (int)(p->bytes_done * 10 / p->bytes_total) : 10;
        if (tenth > s->last_tenth) {
            s->last_tenth = tenth;
            fprintf(stderr, "quantize: %3d%% (tensor %" PRId64 "/%" PRId64 ")\n", tenth * 10,
                    p->i_tensor + 1, p->n_tensors);
        }
    }
    return true;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_summary(const candle_quantize_stats *st, const char *in, const char *out,
                          candle_ftype ft, bool pure, int n_threads) {
    printf("quantize: %s -> %s as %s%s (general.file_type %d), %d thread%s\n", in, out,
           candle_ftype_name(ft), pure ? " (pure)" : "", (int)ft, n_threads,
           n_threads == 1 ? "" : "s");
    printf("tensors:  %" PRId64 " (%" PRId64 " converted, %" PRId64 " copied, %" PRId64
           " fallbacks, %" PRId64 " requantized)\n",
           st->n_tensors, st->n_converted, st->n_copied, st->n_fallback, st->n_requantized);
    for (int d = 0; d < CANDLE_DTYPE_COUNT; d++)
        if (st->n_by_dtype[d])
            printf("  %-8s %" PRId64 "\n", candle_dtype_name((candle_dtype)d), st->n_by_dtype[d]);
    printf("size:     tensors %.2f MiB -> %.2f MiB, file %.2f MiB -> %.2f MiB\n",
           mib(st->bytes_in), mib(st->bytes_out), mib(st->file_in), mib(st->file_out));
    double ne = st->n_elements ? (double)st->n_elements : 1.0;
    printf("bpw:      %.2f -> %.2f bits per weight\n", (double)st->bytes_in * 8.0 / ne,
           (double)st->bytes_out * 8.0 / ne);
    double sec = st->seconds_convert > 0 ? st->seconds_convert : 1e-9;
    printf("time:     %.3f s converting, %.3f s in all; %.1f MB/s of input\n",
           st->seconds_convert, st->seconds_total, (double)st->bytes_in / 1e6 / sec);
    if (st->n_requantized)
        printf("note:     %" PRId64 " tensors were dequantized and quantized again "
               "(error compounds)\n", st->n_requantized);
}

typedef struct qargs {
    const char *pos[3];
    int n_pos, n_threads;
    bool pure, allow_requantize, quiet;
    candle_dtype output_type, token_embd_type; /* CANDLE_DTYPE_COUNT: by the rules */
} qargs;

static int parse_type(const char *opt, const char *v, candle_dtype *out) {
    candle_dtype t = candle_dtype_from_name(v);
    const candle_dtype_traits *tr = t == CANDLE_DTYPE_COUNT ? NULL : candle_dtype_info(t);
    if (!tr || tr->gguf_id < 0 || !(tr->is_float || (tr->is_quantized && tr->from_f32))) {
        fprintf(stderr, "candle quantize: %s wants a weight dtype (f32, f16, bf16, q8_0, q6_K, ...), got '%s'\n",
                opt, v);
        return 2;
    }
    *out = t;
    return 0;
}

/* 0: go on; -1: --help printed; 2: usage error. */
static int parse(int argc, char **argv, qargs *a) {
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(s, "-t") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "candle quantize: -t wants a thread count, got '%s'\n", argv[i]);
                return 2;
            }
            a->n_threads = (int)v;
        } else if (!strcmp(s, "--pure")) {
            a->pure = true;
        } else if (!strcmp(s, "--allow-requantize")) {
            a->allow_requantize = true;
        } else if ((!strcmp(s, "--output-tensor-type") || !strcmp(s, "--token-embedding-type")) && i + 1 < argc) {
            if (parse_type(s, argv[++i], s[2] == 'o' ? &a->output_type : &a->token_embd_type)) return 2;
        } else if (!strcmp(s, "-q") || !strcmp(s, "--quiet")) {
            a->quiet = true;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "candle quantize: unknown option '%s'\n\n", s);
            usage(stderr);
            return 2;
        } else if (a->n_pos < 3) {
            a->pos[a->n_pos++] = s;
        } else {
            fprintf(stderr, "candle quantize: too many arguments\n\n");
            usage(stderr);
            return 2;
        }
    }
    if (a->n_pos != 3) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* A Whisper model to a whisper.cpp file (candle_whisper_write_ggml). */
static int quantize_whisper(const qargs *a) {
    if (a->output_type != CANDLE_DTYPE_COUNT || a->token_embd_type != CANDLE_DTYPE_COUNT) {
        fprintf(stderr, "candle quantize: --output-tensor-type and --token-embedding-type do not apply to "
                        "a Whisper model\n");
        return 2;
    }
    candle_dtype t = candle_dtype_from_name(a->pos[2]);
    if (t == CANDLE_DTYPE_COUNT) {
        fprintf(stderr, "candle quantize: %s is not a type; a Whisper model takes %s\n", a->pos[2],
                candle_whisper_ggml_types());
        return 2;
    }
    if ((size_t)snprintf(tmp_path, sizeof tmp_path, "%s.tmp", a->pos[1]) >= sizeof tmp_path) {
        fprintf(stderr, "candle quantize: output path too long\n");
        return 2;
    }
    progress_state ps = {.tty = isatty(2), .quiet = a->quiet, .last_tenth = 0};
    candle_quantize_stats st;
    candle_ggml_whisper_write_params p = {.progress = on_progress, .progress_user = &ps, .stats = &st};
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    writing = 1; /* the file is written as the tensors are converted */
    candle_status s = candle_whisper_write_ggml(a->pos[0], a->pos[1], t, &p);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (ps.tty && !a->quiet) fprintf(stderr, "\r\033[K");
    if (s) {
        fprintf(stderr, "candle %s\n", candle_last_errmsg());
        return interrupted ? 130 : s == CANDLE_ERR_INVALID_ARG ? 2 : 1;
    }
    printf("quantize: %s -> %s as whisper.cpp %s\n", a->pos[0], a->pos[1], candle_dtype_name(t));
    printf("tensors:  %" PRId64 " (%" PRId64 " converted, %" PRId64 " copied)\n", st.n_tensors,
           st.n_converted, st.n_copied);
    for (int d = 0; d < CANDLE_DTYPE_COUNT; d++)
        if (st.n_by_dtype[d])
            printf("  %-8s %" PRId64 "\n", candle_dtype_name((candle_dtype)d), st.n_by_dtype[d]);
    printf("size:     tensors %.2f MiB -> %.2f MiB, file %.2f MiB\n", mib(st.bytes_in),
           mib(st.bytes_out), mib(st.file_out));
    printf("time:     %.3f s\n", st.seconds_total);
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    qargs a = {.output_type = CANDLE_DTYPE_COUNT, .token_embd_type = CANDLE_DTYPE_COUNT};
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (candle_whisper_probe(a.pos[0])) return quantize_whisper(&a);
    candle_ftype ft;
    if (candle_ftype_from_name(a.pos[2], &ft)) {
        fprintf(stderr, "candle %s\n", candle_last_errmsg());
        return 2;
    }
    if ((size_t)snprintf(tmp_path, sizeof tmp_path, "%s.tmp", a.pos[1]) >= sizeof tmp_path) {
        fprintf(stderr, "candle quantize: output path too long\n");
        return 2;
    }
    progress_state ps = {.tty = isatty(2), .quiet = a.quiet, .last_tenth = 0};
    candle_quantize_stats st;
    candle_quantize_params p = candle_quantize_default_params();
    p.n_threads = a.n_threads > 0 ? a.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    p.pure = a.pure;
    p.allow_requantize = a.allow_requantize;
    p.output_type = a.output_type;
    p.token_embd_type = a.token_embd_type;
    p.progress = on_progress;
    p.progress_user = &ps;
    p.stats = &st;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    candle_status s = candle_quantize_file(a.pos[0], a.pos[1], ft, &p);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (ps.tty && !a.quiet) fprintf(stderr, "\r\033[K");
    if (s) {
        fprintf(stderr, "candle %s\n", candle_last_errmsg());
        return interrupted ? 130 : 1;
    }
    print_summary(&st, a.pos[0], a.pos[1], ft, a.pure, p.n_threads < 1 ? 1 : p.n_threads);
    return 0;
}
