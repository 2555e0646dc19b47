/* candle bench -m MODEL: prompt processing and generation speed, like
 * llama-bench (same tests, same JSON field names), plus per-token latency,
 * allocations per generated token, peak resident memory and the share of the
 * bandwidth roofline that generation reaches. */
#include <dlfcn.h>
#include <inttypes.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench_roofline.h"
#include "candle/model.h"
#include "cli.h"
/* The session's context, for its allocation counter: the public API has no
 * accessor for it (yet). */
#include "models/model-impl.h"

static const char *usage =
    "usage: candle bench [-m MODEL] [-p N] [-n N] [-r N] [-t N] [-o md|json] [options]\n"
    "  -m MODEL        GGUF file (default: " CLI_DEFAULT_MODEL ")\n"
    "  -p N            prompt tokens, evaluated as one batch (default 512; 0 = skip)\n"
    "  -n N            generated tokens, one at a time (default 128; 0 = skip)\n"
    "  -r N            repetitions (default 5)\n"
    "  -t N            threads (default 2)\n"
    "                  -p, -n and -t take comma lists, as llama-bench's (-p 16,32,512\n"
    "                  -n 32,128 -t 1,2): a pp row per -p value and a tg row per -n\n"
    "                  value, for each -t value (at most 16 values each)\n"
    "  -o md|json      markdown table (default) or llama-bench's JSON\n"
    "  -d N            depth: the context holds N tokens before each test, so pp and\n"
    "                  tg run at positions N.. (as llama-bench's -d; default 0)\n"
    "  -ctk, -ctv T    KV cache type: f16 (default, as llama.cpp), f32, q8_0 or q4_0;\n"
    "                  K and V share one type here, so the two must agree\n"
    "  --no-mmap       read the weights into memory (also -mmp 0, as llama-bench)\n"
    "  --latency N     also generate N tokens one at a time after a 16-token warm-up:\n"
    "                  per-token latency P50/P90/P99, allocations and copies between\n"
    "                  memories (the scheduler's) per token, peak RSS;\n"
    "                  then the machine floor: N passes of the same threads reading\n"
    "                  memory for the token's P50, whose P99/P50 no engine can beat\n"
    "  --latency-fixed with --latency: every timed token at the same position (the\n"
    "                  session is truncated back after each), so the spread is the\n"
    "                  run-to-run jitter, not attention growing with the context\n"
    "  --roofline      also measure read bandwidth and FMA peak; report the share of\n"
    "                  the bandwidth roofline that generation reaches\n"
    "Tokens are random ids. Allocations per token count\n"
    "the session's tensor allocations and, when libcandle_malloc_count.so is\n"
    "preloaded (LD_PRELOAD), every malloc/calloc/realloc of the process.\n"
    "`candle bench ops` runs the kernel benchmarks.\n";

#define MAX_LIST 16

typedef struct bench_opts {
    const char *model;
    int64_t n_lat, n_depth;
    int64_t pp[MAX_LIST], tg[MAX_LIST]; /* -p and -n values */
    int threads[MAX_LIST];              /* -t values */
    int n_pp, n_tg, n_thr;
    int64_t n_prompt, n_gen; /* the largest -p and -n (the context's size) */
    int reps, n_threads;     /* n_threads: of the tests being run */
    candle_dtype kv_type; /* -ctk / -ctv */
    bool json, no_mmap, roofline, lat_fixed;
} bench_opts;

typedef struct test_result {
    int64_t n_prompt, n_gen;
    int n_threads;
    double *ns; /* [reps] */
    int n;
} test_result;

typedef struct lat_result {
    int64_t n;
    double p50, p90, p99;    /* seconds */
    double allocs_per_tok;   /* session tensor allocations */
    double copies_per_tok;   /* the scheduler's copies between memories */
    double mallocs_per_tok;  /* -1 without the preloaded counter */
    double mallocs_per_pp;   /* one prompt evaluation, -1 without the counter */
    double floor_p50, floor_p99; /* the machine's own, bench_read_jitter; 0 = not measured */
} lat_result;

typedef struct machine {
    double bw, fma; /* bytes/s, FLOP/s; 0 = not measured */
    size_t rss;     /* peak resident bytes of the model runs (before the probes' buffer) */
    size_t rss0;    /* resident bytes before the model was loaded */
} machine;

static bool parse_i64(const char *s, int64_t lo, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo) return false;
    *out = v;
    return true;
}

/* A comma list of values in [lo, hi], as llama-bench's -p 16,32,512. */
static bool parse_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int *n) {
    *n = 0;
    char item[32];
    while (*n < MAX_LIST) {
        size_t len = strcspn(s, ",");
        if (!len || len >= sizeof item) return false;
        memcpy(item, s, len);
        item[len] = 0;
        if (!parse_i64(item, lo, &out[*n]) || out[*n] > hi) return false;
        ++*n;
        if (!s[len]) return true;
        s += len + 1;
    }
    return false; /* more than MAX_LIST values */
}

/* 0 to go on, -1 after --help, 2 on a usage error. */
static int parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.pp = {512}, .tg = {128}, .threads = {2}, .n_pp = 1, .n_tg = 1, .n_thr = 1,
                      .reps = 5, .kv_type = CANDLE_DTYPE_F16};
    const char *ctk = NULL, *ctv = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return -1;
        }
        if (!strcmp(a, "--no-mmap")) { o->no_mmap = true; continue; }
        if (!strcmp(a, "--roofline")) { o->roofline = true; continue; }
        if (!strcmp(a, "--latency-fixed")) { o->lat_fixed = true; continue; }
        if (i + 1 >= argc) {
            fprintf(stderr, "candle bench: unknown option or missing value: %s\n%s", a, usage);
            return 2;
        }
        const char *v = argv[++i];
        int64_t x = 0;
        bool ok = true;
        if (!strcmp(a, "-m")) o->model = v;
        else if (!strcmp(a, "-p")) ok = parse_list(v, 0, INT32_MAX, o->pp, &o->n_pp);
        else if (!strcmp(a, "-n")) ok = parse_list(v, 0, INT32_MAX, o->tg, &o->n_tg);
        else if (!strcmp(a, "-d")) ok = parse_i64(v, 0, &o->n_depth) && o->n_depth <= (1 << 20);
        else if (!strcmp(a, "--latency")) ok = parse_i64(v, 0, &o->n_lat);
        else if (!strcmp(a, "-ctk")) ctk = v;
        else if (!strcmp(a, "-ctv")) ctv = v;
        else if (!strcmp(a, "-r")) {
            ok = parse_i64(v, 1, &x) && x <= 1000;
            o->reps = (int)x;
        } else if (!strcmp(a, "-t")) {
            int64_t t[MAX_LIST];
            ok = parse_list(v, 1, 256, t, &o->n_thr);
            for (int k = 0; ok && k < o->n_thr; k++) o->threads[k] = (int)t[k];
        } else if (!strcmp(a, "-mmp")) {
            ok = parse_i64(v, 0, &x) && x <= 1;
            o->no_mmap = x == 0;
        } else if (!strcmp(a, "-o")) {
            ok = !strcmp(v, "md") || !strcmp(v, "json");
            o->json = !strcmp(v, "json");
        } else {
            fprintf(stderr, "candle bench: unknown option %s\n%s", a, usage);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "candle bench: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if ((o->n_lat > 0 || o->roofline) && o->n_thr > 1) {
        fprintf(stderr, "candle bench: --latency and --roofline take one -t value\n");
        return 2;
    }
    o->n_prompt = o->n_gen = 0;
    for (int k = 0; k < o->n_pp; k++)
        if (o->pp[k] > o->n_prompt) o->n_prompt = o->pp[k];
    for (int k = 0; k < o->n_tg; k++)
        if (o->tg[k] > o->n_gen) o->n_gen = o->tg[k];
    o->n_threads = o->threads[0];
    return cli_kv_pair("bench", ctk, ctv, &o->kv_type);
}

/* ---- counters ---- */

/* The preloaded counter (bench/malloc_count.c), if any. */
typedef unsigned long long (*malloc_count_fn)(void);

static long long mallocs_now(void) {
    static malloc_count_fn fn;
    static bool looked;
    if (!looked) {
        looked = true;
        *(void **)&fn = dlsym(RTLD_DEFAULT, "candle_malloc_count");
    }
    return fn ? (long long)fn() : -1;
}

/* A /proc/self/status field in bytes ("VmHWM", "VmRSS"), 0 if unknown. */
static size_t proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t klen = strlen(key), kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            kib = (size_t)strtoull(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kib * 1024;
}

/* The high-water mark of this process image. Not getrusage's ru_maxrss: Linux
 * carries that over from the parent's image across fork and exec, so a child
 * of a big process reports the parent's peak. */
static size_t peak_rss(void) {
    size_t hwm = proc_status_bytes("VmHWM");
    if (hwm) return hwm;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024;
}

/* ---- runs ---- */

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

static void random_tokens(int32_t *ids, int64_t n, int64_t n_vocab, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(rng_next(&seed) % (uint64_t)n_vocab);
}

static int fail(candle_session *s, const char *what) {
    fprintf(stderr, "candle bench: %s: %s\n", what, candle_session_errmsg(s));
    return 1;
}

/* One repetition: a prompt batch, or n_gen single-token steps, from position
 * `depth` (what llama-bench times as pp and tg, with its -d): the session is
 * cut back to the depth tokens that fill_depth evaluated, so only the test's
 * own tokens are timed. */
static int run_once(candle_session *s, const int32_t *ids, int64_t depth, int64_t n_prompt,
                    int64_t n_gen, double *secs) {
    if (depth > 0 ? candle_session_truncate(s, depth) != CANDLE_OK : (candle_session_reset(s), false))
        return fail(s, "depth");
    ids += depth;
    double t0 = cli_now();
    if (n_prompt > 0 && candle_session_eval(s, ids, n_prompt, NULL, false))
        return fail(s, "prompt");
    for (int64_t i = 0; i < n_gen; i++)
        if (candle_session_eval(s, ids + i, 1, NULL, false)) return fail(s, "generation");
    *secs = cli_now() - t0;
    return 0;
}

/* The depth tokens, once per test (not timed). */
static int fill_depth(candle_session *s, const int32_t *ids, int64_t depth) {
    candle_session_reset(s);
    if (depth > 0 && candle_session_eval(s, ids, depth, NULL, false)) return fail(s, "depth");
    return 0;
}

static int run_test(candle_session *s, const int32_t *ids, const bench_opts *o, test_result *r) {
    double warm;
    /* A warm-up repetition, as llama-bench: first-touch page faults and the
     * thread pool's start are not what is measured. */
    if (fill_depth(s, ids, o->n_depth) ||
        run_once(s, ids, o->n_depth, r->n_prompt, r->n_gen ? 1 : 0, &warm))
        return 1;
    for (r->n = 0; r->n < o->reps; r->n++) {
        double t;
        if (run_once(s, ids, o->n_depth, r->n_prompt, r->n_gen, &t)) return 1;
        r->ns[r->n] = t * 1e9;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, int64_t n, double p) {
    int64_t k = (int64_t)ceil(p * (double)n) - 1;
    return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* CANDLE_LATENCY_DUMP=FILE: per token, in order, its time in ms and the
 * process's involuntary context switches and minor page faults during it
 * (getrusage), to tell slow tokens that lost a core to another process from
 * slow ones that did not. */
typedef struct lat_sample {
    long ivcsw, minflt;
} lat_sample;

static bool lat_dump_on(void) {
    const char *p = getenv("CANDLE_LATENCY_DUMP");
    return p && *p;
}

/* A debugging dump written in place: a symlink at the path is refused
 * (O_NOFOLLOW) rather than written through. */
static FILE *open_dump(const char *path) {
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

static lat_sample lat_sample_now(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return (lat_sample){0, 0};
    return (lat_sample){ru.ru_nivcsw, ru.ru_minflt};
}

static void dump_latencies(const double *t, const lat_sample *d, int64_t n) {
    FILE *f = d ? open_dump(getenv("CANDLE_LATENCY_DUMP")) : NULL;
    if (!f) return;
    fprintf(f, "ms ivcsw minflt\n");
    for (int64_t i = 0; i < n; i++) fprintf(f, "%.4f %ld %ld\n", t[i] * 1e3, d[i].ivcsw, d[i].minflt);
    fclose(f);
}

/* n_lat generated tokens after a short warm-up, timed one by one; the
 * allocation counters are read around the steady-state part only. */
#define LAT_WARMUP 16
static int run_latency(candle_session *s, const int32_t *ids, const bench_opts *o, lat_result *r) {
    int64_t n = o->n_lat;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return fprintf(stderr, "candle bench: out of memory\n"), 1;
    candle_session_reset(s);
    long long m0 = mallocs_now();
    if (o->n_prompt > 0 && candle_session_eval(s, ids, o->n_prompt, NULL, false)) {
        free(t);
        return fail(s, "prompt");
    }
    long long m1 = mallocs_now();
    r->mallocs_per_pp = m0 < 0 ? -1 : (double)(m1 - m0);
    candle_session_reset(s);
    for (int64_t i = 0; i < LAT_WARMUP; i++)
        if (candle_session_eval(s, ids + i, 1, NULL, false)) {
            free(t);
            return fail(s, "generation");
        }
    /* allocated before the counters are read, so not counted per token */
    lat_sample *d = lat_dump_on() ? calloc((size_t)n, sizeof *d) : NULL;
    uint64_t a0 = candle_ctx_alloc_count(s->ctx), c0, c1;
    candle_ctx_transfer_stats(s->ctx, &c0, NULL, NULL);
    m0 = mallocs_now();
    for (int64_t i = 0; i < n; i++) {
        lat_sample s0 = d ? lat_sample_now() : (lat_sample){0, 0};
        double t0 = cli_now();
        if (candle_session_eval(s, ids + LAT_WARMUP + i, 1, NULL, false)) {
            free(t), free(d);
            return fail(s, "generation");
        }
        t[i] = cli_now() - t0;
        if (d) {
            lat_sample s1 = lat_sample_now();
            d[i] = (lat_sample){s1.ivcsw - s0.ivcsw, s1.minflt - s0.minflt};
        }
        if (o->lat_fixed) candle_session_truncate(s, LAT_WARMUP);
    }
    m1 = mallocs_now();
    r->allocs_per_tok = (double)(candle_ctx_alloc_count(s->ctx) - a0) / (double)n;
    candle_ctx_transfer_stats(s->ctx, &c1, NULL, NULL);
    r->copies_per_tok = (double)(c1 - c0) / (double)n;
    r->mallocs_per_tok = m0 < 0 ? -1 : (double)(m1 - m0) / (double)n;
    dump_latencies(t, d, n);
    free(d);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    r->n = n;
    r->p50 = percentile(t, n, 0.50);
    r->p90 = percentile(t, n, 0.90);
    r->p99 = percentile(t, n, 0.99);
    free(t);
    return 0;
}

/* As many memory-bound passes of the token's median time as timed tokens, on
 * the same threads: the P99/P50 that this machine allows at all. */
static void run_latency_floor(const bench_opts *o, lat_result *r) {
    double *t = malloc((size_t)r->n * sizeof *t);
    if (t && !bench_read_jitter(o->n_threads, r->p50, (int)r->n, t)) {
        qsort(t, (size_t)r->n, sizeof *t, cmp_double);
        r->floor_p50 = percentile(t, r->n, 0.50);
        r->floor_p99 = percentile(t, r->n, 0.99);
    }
    free(t);
}

/* ---- the model and the machine ---- */

typedef struct model_info {
    char type[96];          /* "llama 135M Q4_1", as llama-bench's model_type */
    char cpu[128];
    uint64_t n_params;
    size_t file_size, weight_bytes;
    size_t bytes_per_token; /* weights read for one generated token (the chosen experts') */
    const char *kv_type;
} model_info;

/* general.file_type (llama.cpp's ftype numbers) as llama.cpp names it. */
static const char *ftype_name(uint32_t t) {
    static const struct { uint32_t t; const char *name; } names[] = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},   {30, "IQ4_XS"}, {32, "BF16"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].t == t) return names[i].name;
    return NULL;
}

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = 0;
        snprintf(buf, n, "%s", colon);
        break;
    }
    fclose(f);
}

static void describe(const candle_model *m, model_info *mi) {
    const candle_weights *w = candle_model_weights(m);
    const candle_gguf *g = candle_weights_gguf(w);
    const candle_weights_tensor_info *biggest = NULL;
    mi->n_params = 0;
    for (int64_t i = 0; i < candle_weights_n_tensors(w); i++) {
        const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
        uint64_t n = 1;
        for (int d = 0; d < ti->rank; d++) n *= (uint64_t)ti->shape[d];
        mi->n_params += n;
        if (!biggest || ti->size > biggest->size) biggest = ti;
    }
    uint32_t ft;
    const char *ftn = g && candle_gguf_get_u32(g, "general.file_type", &ft) ? ftype_name(ft) : NULL;
    char size[16];
    double np = (double)mi->n_params;
    if (np >= 1e9) snprintf(size, sizeof size, "%.1fB", np / 1e9);
    else if (np >= 1e6) snprintf(size, sizeof size, "%.0fM", np / 1e6);
    else snprintf(size, sizeof size, "%.0fK", np / 1e3);
    snprintf(mi->type, sizeof mi->type, "%s %s %s",
             candle_arch_name(candle_model_get_config(m)->arch), size,
             ftn ? ftn : biggest ? candle_dtype_name(biggest->dtype) : "?");
    mi->file_size = candle_weights_file_size(w);
    mi->weight_bytes = candle_model_weight_bytes(m);
    /* Only one row of the embedding table is read per token, unless the
     * output projection is tied to it. */
    int64_t emb = candle_weights_find_tensor(w, "token_embd.weight");
    mi->bytes_per_token = mi->weight_bytes;
    if (emb >= 0 && candle_weights_find_tensor(w, "output.weight") >= 0)
        mi->bytes_per_token -= candle_weights_tensor(w, emb)->size;
    /* Of stacked experts (ffn_*_exps), a token reads the chosen ones. */
    const candle_model_config *c = candle_model_get_config(m);
    for (int64_t i = 0; c->n_expert > 0 && i < candle_weights_n_tensors(w); i++) {
        const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
        if (strstr(ti->name, "_exps."))
            mi->bytes_per_token -= ti->size - (size_t)((double)ti->size * (double)c->n_expert_used /
                                                       (double)c->n_expert);
    }
    cpu_model(mi->cpu, sizeof mi->cpu);
}

/* ---- output ---- */

static void stats(const test_result *r, int64_t n_tok, double *avg_ns, double *sd_ns,
                  double *avg_ts, double *sd_ts) {
    double s = 0, s2 = 0, t = 0, t2 = 0;
    for (int i = 0; i < r->n; i++) {
        double ts = (double)n_tok * 1e9 / r->ns[i];
        s += r->ns[i];
        s2 += r->ns[i] * r->ns[i];
        t += ts;
        t2 += ts * ts;
    }
    double n = r->n;
    *avg_ns = s / n;
    *avg_ts = t / n;
    /* sample standard deviation, as llama-bench */
    *sd_ns = n > 1 ? sqrt(fmax(0, (s2 - s * s / n) / (n - 1))) : 0;
    *sd_ts = n > 1 ? sqrt(fmax(0, (t2 - t * t / n) / (n - 1))) : 0;
}

static int64_t test_tokens(const test_result *r) { return r->n_prompt + r->n_gen; }

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void print_json(const bench_opts *o, const model_info *mi, const test_result *tests, int nt,
                       const lat_result *lat, const machine *mc) {
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("[\n");
    for (int k = 0; k < nt; k++) {
        const test_result *r = &tests[k];
        double an, sn, at, st;
        stats(r, test_tokens(r), &an, &sn, &at, &st);
        printf("  {\n    \"build_commit\": \"candle-%s\",\n    \"build_number\": 0,\n", CANDLE_VERSION);
        printf("    \"cpu_info\": ");
        json_str(stdout, mi->cpu);
        printf(",\n    \"gpu_info\": \"\",\n    \"backends\": \"CPU\",\n    \"model_filename\": ");
        json_str(stdout, o->model);
        printf(",\n    \"model_type\": ");
        json_str(stdout, mi->type);
        printf(",\n    \"model_size\": %zu,\n    \"model_n_params\": %" PRIu64 ",\n", mi->weight_bytes,
               mi->n_params);
        printf("    \"n_batch\": 512,\n    \"n_ubatch\": 512,\n    \"n_threads\": %d,\n", r->n_threads);
        printf("    \"type_k\": \"%s\",\n    \"type_v\": \"%s\",\n    \"n_gpu_layers\": 0,\n",
               mi->kv_type, mi->kv_type);
        printf("    \"flash_attn\": true,\n    \"use_mmap\": %s,\n", o->no_mmap ? "false" : "true");
        printf("    \"n_prompt\": %" PRId64 ",\n    \"n_gen\": %" PRId64 ",\n    \"n_depth\": %" PRId64 ",\n",
               r->n_prompt, r->n_gen, o->n_depth);
        printf("    \"test_time\": \"%s\",\n", when);
        printf("    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n", an, sn);
        printf("    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n", at, st);
        printf("    \"samples_ns\": [");
        for (int i = 0; i < r->n; i++) printf("%s%.0f", i ? ", " : " ", r->ns[i]);
        printf(" ],\n    \"samples_ts\": [");
        for (int i = 0; i < r->n; i++)
            printf("%s%.6f", i ? ", " : " ", (double)test_tokens(r) * 1e9 / r->ns[i]);
        printf(" ],\n    \"file_size\": %zu,\n    \"peak_rss\": %zu,\n    \"start_rss\": %zu", mi->file_size,
               mc->rss, mc->rss0);
        if (mc->bw > 0)
            printf(",\n    \"bw_read_gbs\": %.3f,\n    \"fma_gflops\": %.3f,\n"
                   "    \"weight_bytes_per_token\": %zu",
                   mc->bw / 1e9, mc->fma / 1e9, mi->bytes_per_token);
        if (mc->bw > 0 && r->n_prompt == 0)
            printf(",\n    \"roofline_pct\": %.3f", 100.0 * at * (double)mi->bytes_per_token / mc->bw);
        if (lat->n > 0 && r->n_prompt == 0) {
            printf(",\n    \"lat_tokens\": %" PRId64 ",\n    \"lat_p50_ms\": %.4f,\n"
                   "    \"lat_p90_ms\": %.4f,\n    \"lat_p99_ms\": %.4f,\n    \"lat_p99_p50\": %.4f,\n"
                   "    \"allocs_per_token\": %.3f,\n    \"mallocs_per_token\": %.3f,\n"
                   "    \"mallocs_per_prompt\": %.0f,\n    \"copies_per_token\": %.3f",
                   lat->n, lat->p50 * 1e3, lat->p90 * 1e3, lat->p99 * 1e3, lat->p99 / lat->p50,
                   lat->allocs_per_tok, lat->mallocs_per_tok, lat->mallocs_per_pp, lat->copies_per_tok);
            if (lat->floor_p50 > 0)
                printf(",\n    \"lat_floor_p50_ms\": %.4f,\n    \"lat_floor_p99_p50\": %.4f",
                       lat->floor_p50 * 1e3, lat->floor_p99 / lat->floor_p50);
        }
        printf("\n  }%s\n", k + 1 < nt ? "," : "");
    }
    printf("]\n");
}

static const char *mib(size_t n, char *buf, size_t len) {
    snprintf(buf, len, "%.2f MiB", (double)n / (1024.0 * 1024.0));
    return buf;
}

static void print_md(const bench_opts *o, const model_info *mi, const test_result *tests, int nt,
                     const lat_result *lat, const machine *mc) {
    char a[32], b[32];
    printf("| model | size | params | backend | threads | mmap | test | t/s |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    const test_result *tg = NULL;
    for (int k = 0; k < nt; k++) {
        const test_result *r = &tests[k];
        double an, sn, at, st;
        stats(r, test_tokens(r), &an, &sn, &at, &st);
        if (r->n_prompt == 0) tg = r;
        char depth[32] = "";
        if (o->n_depth > 0) snprintf(depth, sizeof depth, " @ d%" PRId64, o->n_depth);
        printf("| %s | %s | %.2f M | CPU | %d | %d | %s%" PRId64 "%s | %.2f ± %.2f |\n", mi->type,
               mib(mi->weight_bytes, a, sizeof a), (double)mi->n_params / 1e6, r->n_threads,
               !o->no_mmap, r->n_prompt ? "pp" : "tg", r->n_prompt ? r->n_prompt : r->n_gen, depth,
               at, st);
    }
    if (lat->n > 0) {
        printf("\n| tokens | P50 ms | P90 ms | P99 ms | P99/P50 | tensor allocs/token | "
               "mallocs/token | copies/token | peak RSS | file | RSS/file |\n");
        printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        char ml[32];
        if (lat->mallocs_per_tok < 0) snprintf(ml, sizeof ml, "n/a (no LD_PRELOAD)");
        else snprintf(ml, sizeof ml, "%.2f", lat->mallocs_per_tok);
        size_t rss = mc->rss;
        printf("| %" PRId64 " | %.3f | %.3f | %.3f | %.2f | %.2f | %s | %.2f | %s | %s | %.2f |\n", lat->n,
               lat->p50 * 1e3, lat->p90 * 1e3, lat->p99 * 1e3, lat->p99 / lat->p50,
               lat->allocs_per_tok, ml, lat->copies_per_tok, mib(rss, a, sizeof a), mib(mi->file_size, b, sizeof b),
               (double)rss / (double)mi->file_size);
        if (lat->floor_p50 > 0)
            printf("\nmachine floor: %" PRId64 " passes of %d threads reading memory for about the "
                   "token P50: P50 %.3f ms, P99 %.3f ms, P99/P50 %.2f\n",
                   lat->n, o->n_threads, lat->floor_p50 * 1e3, lat->floor_p99 * 1e3,
                   lat->floor_p99 / lat->floor_p50);
    }
    if (mc->bw > 0) {
        printf("\nmachine: %s; read bandwidth %.2f GB/s, FMA peak %.1f GFLOP/s (%s), %d threads\n",
               mi->cpu, mc->bw / 1e9, mc->fma / 1e9, bench_fma_kind(), o->n_threads);
        printf("weights read per generated token: %s (roofline %.1f t/s)\n",
               mib(mi->bytes_per_token, a, sizeof a), mc->bw / (double)mi->bytes_per_token);
        if (tg) {
            double an, sn, at, st;
            stats(tg, test_tokens(tg), &an, &sn, &at, &st);
            printf("tg%" PRId64 ": %.2f GB/s of weights, %.1f%% of the bandwidth roofline\n",
                   tg->n_gen, at * (double)mi->bytes_per_token / 1e9,
                   100.0 * at * (double)mi->bytes_per_token / mc->bw);
        }
    }
}

/* ---- the command ---- */

/* A session of the -t value's threads (the first shares the model's). */
static candle_session *open_session(candle_model *m, const bench_opts *o, int64_t n_ctx, int n_threads) {
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_threads = n_threads;
    sp.kv_type = o->kv_type;
    candle_session *s = NULL;
    if (candle_session_init(&s, m, &sp)) {
        fprintf(stderr, "candle bench: %s\n", candle_last_errmsg());
        return NULL;
    }
    return s;
}

static int bench(bench_opts *o, candle_model *m, candle_session *s0, const model_info *mi,
                 size_t rss0) {
    int64_t n_vocab = candle_model_get_config(m)->n_vocab;
    int64_t n_ids = candle_session_n_ctx(s0);
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids);
    int max_tests = (o->n_pp + o->n_tg) * o->n_thr;
    double *ns = malloc(((size_t)max_tests * (size_t)o->reps + 1) * sizeof *ns);
    test_result tests[(MAX_LIST + MAX_LIST) * MAX_LIST];
    int nt = 0, r = 0;
    candle_session *s = s0;
    lat_result lat = {0};
    machine mc = {.rss0 = rss0};
    if (!ids || !ns) {
        r = 1;
        fprintf(stderr, "candle bench: out of memory\n");
        goto done;
    }
    random_tokens(ids, n_ids, n_vocab, 42);
    /* as llama-bench: for each thread count, the pp tests, then the tg tests */
    for (int h = 0; h < o->n_thr && !r; h++) {
        int first = nt;
        for (int k = 0; k < o->n_pp; k++)
            if (o->pp[k] > 0)
                tests[nt++] = (test_result){.n_prompt = o->pp[k], .n_threads = o->threads[h]};
        for (int k = 0; k < o->n_tg; k++)
            if (o->tg[k] > 0)
                tests[nt++] = (test_result){.n_gen = o->tg[k], .n_threads = o->threads[h]};
        if (h > 0) {
            if (s != s0) candle_session_free(s);
            if (!(s = open_session(m, o, n_ids, o->threads[h]))) {
                r = 1;
                break;
            }
        }
        o->n_threads = o->threads[h];
        for (int k = first; k < nt && !r; k++) {
            tests[k].ns = ns + (size_t)k * (size_t)o->reps;
            r = run_test(s, ids, o, &tests[k]);
            if (!o->json) fprintf(stderr, ".");
        }
    }
    if (s != s0) candle_session_free(s);
    s = s0;
    if (!r && o->n_lat > 0) r = run_latency(s, ids, o, &lat);
    mc.rss = peak_rss();
    if (!r && lat.n > 0) run_latency_floor(o, &lat);
    if (!r && o->roofline) {
        mc.bw = bench_read_bandwidth(o->n_threads);
        mc.fma = bench_fma_peak(o->n_threads);
    }
    if (!o->json) fprintf(stderr, "\n");
    if (!r && o->json) print_json(o, mi, tests, nt, &lat, &mc);
    else if (!r) print_md(o, mi, tests, nt, &lat, &mc);
done:
    free(ids);
    free(ns);
    return r;
}

int cmd_bench_model(int argc, char **argv) {
    static bench_opts o; /* its lists: kept off the stack */
    int r = parse(argc, argv, &o);
    if (r) return r < 0 ? 0 : r;
    char buf[4096];
    cli_args a = {.model = o.model};
    if (!(o.model = cli_model_path(&a, buf, sizeof buf))) return 1;
    candle_model_params mp = candle_model_default_params();
    mp.n_threads = o.n_threads;
    mp.no_mmap = o.no_mmap;
    candle_model *m = NULL;
    size_t rss0 = proc_status_bytes("VmRSS");
    if (candle_model_load(&m, o.model, &mp)) {
        fprintf(stderr, "candle bench: %s\n", candle_last_errmsg());
        return 1;
    }
    int64_t n_ctx = o.n_depth + (o.n_prompt > o.n_gen ? o.n_prompt : o.n_gen);
    if (o.n_lat > 0 && LAT_WARMUP + o.n_lat > n_ctx) n_ctx = LAT_WARMUP + o.n_lat;
    if (n_ctx < LAT_WARMUP) n_ctx = LAT_WARMUP;
    candle_session *s = open_session(m, &o, n_ctx, o.n_threads);
    if (!s) {
        candle_model_free(m);
        return 1;
    }
    model_info mi;
    describe(m, &mi);
    mi.kv_type = candle_dtype_name(o.kv_type);
    r = bench(&o, m, s, &mi, rss0);
    candle_session_free(s);
    candle_model_free(m);
    return r;
}
