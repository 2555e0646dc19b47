/* candle info: the CPU's features and kernels, or a model's (GGUF file or
 * Hugging Face directory) summary, metadata and tensor table, or a
 * CTranslate2 model.bin's variables. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: candle info [--no-mmap] [FILE.gguf | DIR | model.bin]\n\n"
            "Without a model: CPU features and the kernels in use.\n"
            "With a GGUF file or a Hugging Face directory (config.json + safetensors):\n"
            "architecture, parameter count, tensors per dtype, file size, bits per weight,\n"
            "metadata (long values abbreviated; a directory's config.json as GGUF keys)\n"
            "and the tensor table (GGUF names; a directory's own names beside them).\n"
            "With a CTranslate2 model.bin: its version, spec, variables and aliases.\n");
}

/* 292352 -> "292.35K" */
static const char *human_count(uint64_t n, char *buf, size_t len) {
    static const char *units[] = {"", "K", "M", "B", "T"};
    double v = (double)n;
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%" PRIu64, n);
    else snprintf(buf, len, "%.2f%s", v, units[u]);
    return buf;
}

/* "1.13 MiB" (the CLI uses the public API only) */
static const char *fmt_bytes(size_t n, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%zu B", n);
    else snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

static uint64_t numel(const candle_weights_tensor_info *ti) {
    uint64_t n = 1;
    for (int d = 0; d < ti->rank; d++) n *= (uint64_t)ti->shape[d];
    return n;
}

/* Names and strings from the file, escaped for the terminal (issue 22). */
#define SAFE(s, buf) candle_escape_text((s), SIZE_MAX, (buf), sizeof(buf))

/* A metadata string printed as text, or nothing when absent. */
static void print_str_key(const candle_weights *w, const char *label, const char *key) {
    const char *s;
    size_t len;
    char esc[256];
    if (candle_weights_get_str(w, key, &s, &len))
        printf("%-14s %s\n", label, candle_escape_text(s, len > 200 ? 200 : len, esc, sizeof esc));
}

static void print_format(const candle_weights *w) {
    const candle_gguf *g = candle_weights_gguf(w);
    if (g)
        printf("%-14s GGUF v%" PRIu32 ", alignment %zu, %" PRId64 " keys, %" PRId64 " tensors\n",
               "format:", candle_gguf_version(g), candle_gguf_alignment(g), candle_gguf_n_kv(g),
               candle_gguf_n_tensors(g));
    else
        printf("%-14s Hugging Face directory, safetensors in %d file%s, %" PRId64
               " keys (from config.json, as GGUF keys), %" PRId64 " tensors\n",
               "format:", candle_weights_n_files(w), candle_weights_n_files(w) == 1 ? "" : "s",
               candle_weights_n_kv(w), candle_weights_n_tensors(w));
}

static void print_summary(const candle_weights *w, const char *path) {
    char a[32], b[32];
    uint64_t params = 0, per_n[CANDLE_DTYPE_COUNT + 1] = {0}, per_p[CANDLE_DTYPE_COUNT + 1] = {0};
    size_t per_b[CANDLE_DTYPE_COUNT + 1] = {0}, data_bytes = 0;
    for (int64_t i = 0; i < candle_weights_n_tensors(w); i++) {
        const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
        params += numel(ti);
        per_n[ti->dtype]++;
        per_p[ti->dtype] += numel(ti);
        per_b[ti->dtype] += ti->size;
        data_bytes += ti->size;
    }
    size_t fsize = candle_weights_file_size(w);
    printf("%-14s %s\n", "file:", path);
    print_format(w);
    print_str_key(w, "architecture:", "general.architecture");
    print_str_key(w, "name:", "general.name");
    printf("%-14s %s (%zu bytes)\n", "file size:", fmt_bytes(fsize, a, sizeof a), fsize);
    printf("%-14s %s (%" PRIu64 ")\n", "parameters:", human_count(params, b, sizeof b), params);
    if (params)
        printf("%-14s %.2f (file), %.2f (tensor data)\n", "bits/weight:",
               (double)fsize * 8.0 / (double)params, (double)data_bytes * 8.0 / (double)params);
    printf("tensors by dtype:\n");
    for (int t = 0; t <= CANDLE_DTYPE_COUNT; t++)
        if (per_n[t])
            printf("  %-8s %6" PRIu64 " tensors %12" PRIu64 " params %12s\n",
                   t < CANDLE_DTYPE_COUNT ? candle_dtype_name((candle_dtype)t) : "unusable",
                   per_n[t], per_p[t], fmt_bytes(per_b[t], a, sizeof a));
}

static void print_metadata(const candle_weights *w) {
    char buf[512], key[256];
    printf("metadata:\n");
    for (int64_t i = 0; i < candle_weights_n_kv(w); i++)
        printf("  %-44s %-4s %s\n", SAFE(candle_weights_key(w, i), key),
               candle_gguf_type_name(candle_weights_kv_type(w, i)),
               candle_weights_kv_str(w, i, buf, sizeof buf));
}

/* GGUF: offsets in the file; a directory: each tensor's name and file there. */
static void print_tensors(const candle_weights *w) {
    char shape[128], size[32], name[256], file[256], src[256];
    bool dir = !candle_weights_gguf(w);
    printf("tensors:\n  %5s %-40s %-7s %-22s %12s %12s%s\n", "#", "name", "dtype", "shape",
           "offset", "size", dir ? "  source" : "");
    for (int64_t i = 0; i < candle_weights_n_tensors(w); i++) {
        const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
        printf("  %5" PRId64 " %-40s %-7s %-22s %12zu %12s", i, SAFE(ti->name, name),
               ti->dtype < CANDLE_DTYPE_COUNT ? candle_dtype_name(ti->dtype) : "?",
               candle_shape_str(ti->rank, ti->shape, shape, sizeof shape), ti->offset,
               fmt_bytes(ti->size, size, sizeof size));
        if (dir) printf("  %s:%s", SAFE(ti->file, file), SAFE(ti->src_name, src));
        printf("\n");
    }
}

/* Whether the file starts as a CTranslate2 model.bin does. */
static bool is_ct2(const char *path) {
    unsigned char head[512];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return candle_ct2_probe(head, n);
}

static void print_shape(const candle_ct2_var_info *v) {
    char buf[96];
    int k = snprintf(buf, sizeof buf, "[");
    for (int d = 0; d < v->rank; d++)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%" PRId64, d ? ", " : "", v->shape[d]);
    snprintf(buf + k, sizeof buf - (size_t)k, "]");
    printf("%-30s", buf);
}

/* A CTranslate2 model.bin: the header, then each variable and alias. */
static int info_ct2(const char *path, bool no_mmap) {
    candle_ct2 *m = NULL;
    candle_ct2_open_params p = {.no_mmap = no_mmap};
    if (candle_ct2_open(&m, path, &p) != CANDLE_OK) {
        cli_error_file("info", path, candle_last_errmsg());
        return 1;
    }
    char b[32], e1[256], e2[256];
    printf("%-14s CTranslate2 model.bin v%" PRIu32 ", spec %s revision %" PRIu32 ", %" PRId64
           " variables, %" PRId64 " aliases\n",
           "format:", candle_ct2_version(m), SAFE(candle_ct2_spec(m), e1), candle_ct2_revision(m),
           candle_ct2_n_vars(m), candle_ct2_n_aliases(m));
    printf("%-14s %s\n", "file size:", fmt_bytes(candle_ct2_file_size(m), b, sizeof b));
    for (int64_t i = 0; i < candle_ct2_n_vars(m); i++) {
        const candle_ct2_var_info *v = candle_ct2_var(m, i);
        printf("%-50s %-8s ", SAFE(v->name, e1), candle_ct2_dtype_name(v->ct2_dtype));
        print_shape(v);
        printf(" %zu\n", v->offset);
    }
    for (int64_t i = 0; i < candle_ct2_n_aliases(m); i++) {
        const char *a, *t;
        int64_t v;
        candle_ct2_alias(m, i, &a, &t, &v);
        printf("alias %s -> %s%s\n", SAFE(a, e1), SAFE(t, e2), v < 0 ? " (ignored: no such variable or name taken)" : "");
    }
    candle_ct2_close(m);
    return 0;
}

/* Whether the file starts as whisper.cpp's ggml files do. */
static bool is_ggml_whisper(const char *path) {
    unsigned char head[64];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return candle_ggml_whisper_probe(head, n);
}

/* A whisper.cpp ggml file: the hparams, then each tensor. */
static int info_ggml_whisper(const char *path, bool no_mmap) {
    candle_ggml_whisper *m = NULL;
    candle_ggml_whisper_open_params p = {.no_mmap = no_mmap};
    if (candle_ggml_whisper_open(&m, path, &p) != CANDLE_OK) {
        cli_error_file("info", path, candle_last_errmsg());
        return 1;
    }
    const candle_ggml_whisper_hparams *h = candle_ggml_whisper_get_hparams(m);
    char b[32], e1[256], shape[128];
    int32_t nm, nf;
    candle_ggml_whisper_mel_filters(m, &nm, &nf);
    printf("%-14s whisper.cpp ggml, %" PRId64 " tensors, %" PRId64 " tokens, mel filters %d x %d\n", "format:",
           candle_ggml_whisper_n_tensors(m), candle_ggml_whisper_n_tokens(m), (int)nm, (int)nf);
    printf("%-14s %s\n", "file size:", fmt_bytes(candle_ggml_whisper_file_size(m), b, sizeof b));
    printf("%-14s n_vocab %d, audio ctx %d state %d heads %d layers %d, text ctx %d state %d heads %d "
           "layers %d, n_mels %d, ftype %d (quantization version %d)\n",
           "hparams:", h->n_vocab, h->n_audio_ctx, h->n_audio_state, h->n_audio_head, h->n_audio_layer,
           h->n_text_ctx, h->n_text_state, h->n_text_head, h->n_text_layer, h->n_mels, h->ftype % 1000,
           h->ftype / 1000);
    for (int64_t i = 0; i < candle_ggml_whisper_n_tensors(m); i++) {
        const candle_ggml_whisper_tensor_info *v = candle_ggml_whisper_tensor(m, i);
        printf("%-50s %-8s %-22s %zu\n", SAFE(v->name, e1), candle_dtype_name(v->dtype),
               candle_shape_str(v->rank, v->shape, shape, sizeof shape), v->offset);
    }
    candle_ggml_whisper_close(m);
    return 0;
}

static int info_file(const char *path, bool no_mmap) {
    if (is_ct2(path)) return info_ct2(path, no_mmap);
    if (is_ggml_whisper(path)) return info_ggml_whisper(path, no_mmap);
    candle_weights *w = NULL;
    candle_weights_params p = {.no_mmap = no_mmap};
    if (candle_weights_open(&w, path, &p) != CANDLE_OK) {
        cli_error_file("info", path, candle_last_errmsg());
        return 1;
    }
    print_summary(w, path);
    print_metadata(w);
    print_tensors(w);
    candle_weights_close(w);
    return 0;
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool no_mmap = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--no-mmap")) {
            no_mmap = true;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "candle info: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (path) return info_file(path, no_mmap);
    char buf[4096];
    for (int i = 0; i < candle_backend_count(); i++)
        printf("backend: %s: %s\n", candle_backend_reg_name(i), candle_backend_reg_description(i));
    candle_cpu_params cpu = candle_cpu_get_defaults();
    printf("cpu settings: isa %s, quant %s, prefetch %s%s%s\n", candle_cpu_isa_name(cpu.isa),
           candle_cpu_quant_name(cpu.quant), candle_cpu_prefetch_name(cpu.prefetch),
           cpu.reference_only ? ", reference kernels only" : "", cpu.bf16_exact ? ", bf16 exact" : "");
    fputs(candle_cpu_info(buf, sizeof buf), stdout);
    return 0;
}
