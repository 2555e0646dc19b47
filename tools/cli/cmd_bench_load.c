/* candle bench load -m PATH [-m PATH ...] [--reps N] [--no-mmap] [--json]:
 * what loading weights costs, per file format: the time to open the weights,
 * load every tensor and fault in every page of its data (one byte read per
 * 4 KiB, which is what a first inference pays for mapped weights), the peak
 * resident memory of that, and the time of candle_model_load on the same
 * path.
 *
 * Every measurement runs in a fresh child process (fork), so the peak RSS is
 * one load's and nothing stays mapped between repetitions. By default the
 * page cache is left alone, so after the warm-up run the files are read from
 * it (what a second start of a program sees); --cold drops the benchmarked
 * files' own cached pages (posix_fadvise DONTNEED, nothing else's) before
 * every run, so each reads them from disk. The figures are medians of
 * --reps runs.
 *
 * How fast a warm file maps depends on the folios the page cache holds it
 * in: a file the kernel read with readahead is held in large folios that
 * map with 2 MiB entries (FilePmdMapped in smaps, with MADV_HUGEPAGE), while
 * one that is still cached from being written may be in small ones and take
 * several times longer to fault in, whatever its format. Compare formats
 * with the same history: --cold, or a warm run after one.
 *
 * Readers, by path:
 *   DIR           candle_weights_open (config.json + safetensors, names and
 *                 conventions mapped as the models see them)
 *   *.safetensors candle_safetensors_open (the raw reader: any model_type,
 *                 encoders included)
 *   *.gguf        candle_gguf_open (the raw reader)
 * candle_model_load is tried on directories and GGUF files; "n/a" when the
 * weights are not a model kind Candle loads (an encoder, today). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "candle/model.h"
#include "candle/safetensors.h"
#include "candle/weights.h"
#include "cli.h"

#define MAX_PATHS 16
#define MAX_REPS 100
#define PAGE 4096

static const char *usage =
    "usage: candle bench load -m PATH [-m PATH ...] [--reps N] [--no-mmap] [--cold] [--json]\n"
    "  -m PATH      a Hugging Face directory (config.json + safetensors), a\n"
    "               .safetensors file or a .gguf file; up to 16\n"
    "  --reps N     timed runs per path after one warm-up (default 5; medians)\n"
    "  --no-mmap    read the weights into memory instead of mapping them\n"
    "  --cold       drop the files' cached pages before every run (read from disk)\n"
    "  --json       one JSON object per path instead of the table\n"
    "Each run is a fresh child process: open + load every tensor + read one byte\n"
    "per 4 KiB page of its data (wall time, then peak RSS), and candle_model_load\n"
    "(its own child; n/a for weights that are not a model Candle loads).\n";

typedef enum reader { READ_WEIGHTS, READ_SAFETENSORS, READ_GGUF } reader;
static const char *const reader_names[] = {"weights", "safetensors", "gguf"};

/* What a child sends back through its pipe. */
typedef struct child_result {
    int ok;               /* 1: measured; 0: failed (msg) */
    double seconds;
    int64_t n_tensors;
    uint64_t tensor_bytes; /* bytes of the loaded tensors */
    uint64_t file_bytes;
    uint64_t peak_rss;     /* ru_maxrss, bytes */
    uint64_t start_rss;    /* VmRSS when the child started, bytes */
    int64_t majflt;        /* major page faults (pages read from disk through a mapping) */
    char format[16];       /* "safetensors" or "gguf" */
    char msg[256];
} child_result;

typedef struct path_result {
    const char *path;
    reader rd;
    child_result info;      /* of the first timed load */
    int64_t model_majflt;   /* of the first timed model_load */
    double load_s[MAX_REPS];
    uint64_t rss[MAX_REPS];
    double model_s[MAX_REPS];
    uint64_t model_rss[MAX_REPS];
    bool model_ok;
    char model_msg[256];
} path_result;

static volatile uint64_t g_sink;

static void evict_file(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* The file's pages, or those of every file of a directory, out of the page
 * cache (clean pages only: nothing is lost). */
static void evict(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        evict_file(path);
        return;
    }
    struct dirent *e;
    char buf[4096];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && snprintf(buf, sizeof buf, "%s/%s", path, e->d_name) < (int)sizeof buf)
            evict_file(buf);
    closedir(d);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static uint64_t proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t klen = strlen(key);
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            kib = strtoull(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kib * 1024;
}

static uint64_t maxrss_bytes(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024;
}

static int64_t majflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)ru.ru_majflt;
}

/* One byte of every page of t's data, so mapped weights are faulted in. */
static bool touch(const candle_tensor *t, child_result *r) {
    const uint8_t *p = candle_tensor_data(t);
    size_t n = candle_tensor_nbytes(t);
    if (!p && n) return false;
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += PAGE) s += p[i];
    if (n) s += p[n - 1];
    g_sink += s;
    r->tensor_bytes += n;
    return true;
}

static void fail_msg(child_result *r, const char *what, const char *msg) {
    r->ok = 0;
    snprintf(r->msg, sizeof r->msg, "%s: %s", what, msg && *msg ? msg : "failed");
}

/* (a): open, load every tensor into one ctx, touch; wall time. The ctx is
 * made before the clock starts (it is the same for every format). */
static void measure_load(const char *path, reader rd, bool no_mmap, child_result *r) {
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, NULL)) {
        fail_msg(r, "ctx", candle_last_errmsg());
        return;
    }
    candle_weights *w = NULL;
    candle_safetensors *st = NULL;
    candle_gguf *g = NULL;
    double t0 = bench_now_s();
    candle_status s;
    if (rd == READ_WEIGHTS) {
        candle_weights_params wp = {.no_mmap = no_mmap};
        s = candle_weights_open(&w, path, &wp);
    } else if (rd == READ_SAFETENSORS) {
        candle_safetensors_open_params sp = {.no_mmap = no_mmap};
        s = candle_safetensors_open(&st, path, &sp);
    } else {
        candle_gguf_open_params gp = {.no_mmap = no_mmap};
        s = candle_gguf_open(&g, path, &gp);
    }
    if (s) {
        fail_msg(r, "open", candle_last_errmsg());
        candle_ctx_free(ctx);
        return;
    }
    int64_t n = w ? candle_weights_n_tensors(w) : st ? candle_safetensors_n_tensors(st) : candle_gguf_n_tensors(g);
    r->ok = 1;
    for (int64_t i = 0; i < n && r->ok; i++) {
        candle_tensor *t;
        if (w) t = candle_weights_load_tensor(w, ctx, candle_weights_tensor(w, i)->name);
        else if (st) t = candle_safetensors_load_tensor(st, ctx, candle_safetensors_tensor(st, i)->name);
        else t = candle_gguf_load_tensor(g, ctx, candle_gguf_tensor(g, i)->name);
        if (!t) fail_msg(r, "load_tensor", candle_errmsg(ctx));
        else if (!touch(t, r)) fail_msg(r, "load_tensor", "tensor data not in host memory");
    }
    r->seconds = bench_now_s() - t0;
    r->peak_rss = maxrss_bytes();
    r->majflt = majflt() - r->majflt;
    r->n_tensors = n;
    if (w) {
        r->file_bytes = candle_weights_file_size(w);
        snprintf(r->format, sizeof r->format, "%s", candle_weights_format_name(w));
    } else {
        struct stat sb;
        r->file_bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
        snprintf(r->format, sizeof r->format, "%s", st ? "safetensors" : "gguf");
    }
    candle_weights_close(w);
    candle_safetensors_close(st);
    candle_gguf_close(g);
    candle_ctx_free(ctx);
}

/* (b): candle_model_load, wall time. */
static void measure_model(const char *path, bool no_mmap, child_result *r) {
    candle_model_params mp = candle_model_default_params();
    mp.no_mmap = no_mmap;
    candle_model *m = NULL;
    double t0 = bench_now_s();
    candle_status s = candle_model_load(&m, path, &mp);
    r->seconds = bench_now_s() - t0;
    r->peak_rss = maxrss_bytes();
    r->majflt = majflt() - r->majflt;
    if (s) {
        fail_msg(r, candle_status_name(s), candle_last_errmsg());
        return;
    }
    r->ok = 1;
    candle_model_free(m);
}

/* Run one measurement in a child; false (with r->msg) if the child died. */
static bool in_child(const char *path, reader rd, bool model, bool no_mmap, bool cold, child_result *r) {
    memset(r, 0, sizeof *r);
    if (cold) evict(path);
    int fd[2];
    if (pipe(fd)) {
        snprintf(r->msg, sizeof r->msg, "pipe: %s", strerror(errno));
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->msg, sizeof r->msg, "fork: %s", strerror(errno));
        close(fd[0]), close(fd[1]);
        return false;
    }
    if (pid == 0) {
        close(fd[0]);
        child_result c = {0};
        c.start_rss = proc_status_bytes("VmRSS");
        c.majflt = majflt();
        if (model) measure_model(path, no_mmap, &c);
        else measure_load(path, rd, no_mmap, &c);
        const char *p = (const char *)&c;
        size_t left = sizeof c;
        while (left) {
            ssize_t k = write(fd[1], p, left);
            if (k <= 0) _exit(3);
            p += k, left -= (size_t)k;
        }
        _exit(0);
    }
    close(fd[1]);
    char *p = (char *)r;
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t k = read(fd[0], p + got, sizeof *r - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(st)) snprintf(r->msg, sizeof r->msg, "child killed by signal %d", WTERMSIG(st));
        else snprintf(r->msg, sizeof r->msg, "child exited %d without a result", WEXITSTATUS(st));
        return false;
    }
    return true;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_d(const double *v, int n) {
    double s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static uint64_t median_u(const uint64_t *v, int n) {
    uint64_t s[MAX_REPS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_u);
    return n % 2 ? s[n / 2] : s[n / 2 - 1] / 2 + s[n / 2] / 2;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_json(const path_result *r, int reps, bool no_mmap, bool cold) {
    const child_result *c = &r->info;
    printf("{\"path\": ");
    json_str(r->path);
    printf(", \"format\": \"%s\", \"reader\": \"%s\", \"use_mmap\": %s, \"file_bytes\": %" PRIu64
           ", \"n_tensors\": %" PRId64 ", \"tensor_bytes\": %" PRIu64 ", \"reps\": %d, \"page_cache\": \"%s\"",
           c->format, reader_names[r->rd], no_mmap ? "false" : "true", c->file_bytes, c->n_tensors,
           c->tensor_bytes, reps, cold ? "cold" : "warm");
    printf(", \"load_ms\": %.3f, \"load_ms_samples\": [", median_d(r->load_s, reps) * 1e3);
    for (int i = 0; i < reps; i++) printf("%s%.3f", i ? ", " : "", r->load_s[i] * 1e3);
    printf("], \"peak_rss_bytes\": %" PRIu64 ", \"start_rss_bytes\": %" PRIu64 ", \"major_faults\": %" PRId64,
           median_u(r->rss, reps), c->start_rss, c->majflt);
    if (r->model_ok) {
        printf(", \"model_load_ms\": %.3f, \"model_load_ms_samples\": [", median_d(r->model_s, reps) * 1e3);
        for (int i = 0; i < reps; i++) printf("%s%.3f", i ? ", " : "", r->model_s[i] * 1e3);
        printf("], \"model_load_peak_rss_bytes\": %" PRIu64 ", \"model_load_major_faults\": %" PRId64 "}\n",
               median_u(r->model_rss, reps), r->model_majflt);
    } else {
        printf(", \"model_load_ms\": null, \"model_load_note\": ");
        json_str(r->model_msg);
        printf("}\n");
    }
}

static void print_table(const path_result *rs, int n, int reps, bool no_mmap, bool cold) {
    printf("loading weights: median of %d runs after a warm-up, each a fresh process; %s; page cache %s\n",
           reps, no_mmap ? "read into memory (--no-mmap)" : "mmap",
           cold ? "dropped before each run (--cold)" : "warm");
    printf("| path | format | reader | file MiB | tensors | open+load+touch ms | peak RSS MiB | model_load ms | "
           "model_load RSS MiB |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        const path_result *r = &rs[i];
        const child_result *c = &r->info;
        printf("| %s | %s | %s | %.1f | %" PRId64 " | %.2f | %.1f | ", r->path, c->format, reader_names[r->rd],
               (double)c->file_bytes / (1 << 20), c->n_tensors, median_d(r->load_s, reps) * 1e3,
               (double)median_u(r->rss, reps) / (1 << 20));
        if (r->model_ok)
            printf("%.2f | %.1f |\n", median_d(r->model_s, reps) * 1e3,
                   (double)median_u(r->model_rss, reps) / (1 << 20));
        else printf("n/a | n/a |\n");
    }
    for (int i = 0; i < n; i++)
        if (!rs[i].model_ok && rs[i].model_msg[0]) printf("model_load n/a for %s: %s\n", rs[i].path, rs[i].model_msg);
}

/* All runs of one path; 0, or 1 after a message. */
static int bench_path(path_result *r, int reps, bool no_mmap, bool cold) {
    child_result c;
    bool try_model = r->rd != READ_SAFETENSORS;
    for (int i = -1; i < reps; i++) { /* -1: the warm-up */
        if (!in_child(r->path, r->rd, false, no_mmap, cold, &c) || !c.ok) {
            fprintf(stderr, "candle bench load: %s: %s\n", r->path, c.msg);
            return 1;
        }
        if (i < 0) continue;
        if (i == 0) r->info = c;
        r->load_s[i] = c.seconds;
        r->rss[i] = c.peak_rss;
    }
    if (!try_model) {
        snprintf(r->model_msg, sizeof r->model_msg, "a single .safetensors file is not a model path");
        return 0;
    }
    for (int i = -1; i < reps; i++) {
        if (!in_child(r->path, r->rd, true, no_mmap, cold, &c)) {
            fprintf(stderr, "candle bench load: %s: model_load: %s\n", r->path, c.msg);
            return 1;
        }
        if (!c.ok) { /* not a model kind Candle loads: say why, once */
            snprintf(r->model_msg, sizeof r->model_msg, "%s", c.msg);
            return 0;
        }
        if (i < 0) continue;
        if (i == 0) r->model_majflt = c.majflt;
        r->model_s[i] = c.seconds;
        r->model_rss[i] = c.peak_rss;
    }
    r->model_ok = true;
    return 0;
}

int cmd_bench_load(int argc, char **argv) {
    static path_result rs[MAX_PATHS];
    int n = 0, reps = 5;
    bool json = false, no_mmap = false, cold = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!strcmp(a, "--no-mmap")) { no_mmap = true; continue; }
        if (!strcmp(a, "--cold")) { cold = true; continue; }
        if ((!strcmp(a, "-m") || !strcmp(a, "--reps")) && i + 1 >= argc) {
            fprintf(stderr, "candle bench load: %s wants a value\n%s", a, usage);
            return 2;
        }
        if (!strcmp(a, "-m")) {
            if (n == MAX_PATHS) {
                fprintf(stderr, "candle bench load: at most %d paths\n", MAX_PATHS);
                return 2;
            }
            memset(&rs[n], 0, sizeof rs[n]);
            rs[n++].path = argv[++i];
        } else if (!strcmp(a, "--reps")) {
            const char *v = argv[++i];
            char *end;
            long x = strtol(v, &end, 10);
            if (!*v || *end || x < 1 || x > MAX_REPS) {
                fprintf(stderr, "candle bench load: bad value '%s' for --reps (1..%d)\n", v, MAX_REPS);
                return 2;
            }
            reps = (int)x;
        } else {
            fprintf(stderr, "candle bench load: unknown option '%s'\n%s", a, usage);
            return 2;
        }
    }
    if (!n) {
        fprintf(stderr, "candle bench load: no -m PATH\n%s", usage);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        const char *p = rs[i].path;
        struct stat sb;
        if (stat(p, &sb)) {
            fprintf(stderr, "candle bench load: %s: %s\n", p, strerror(errno));
            return 1;
        }
        if (S_ISDIR(sb.st_mode)) rs[i].rd = READ_WEIGHTS;
        else if (ends_with(p, ".safetensors")) rs[i].rd = READ_SAFETENSORS;
        else if (ends_with(p, ".gguf")) rs[i].rd = READ_GGUF;
        else {
            fprintf(stderr, "candle bench load: %s: not a directory, .safetensors or .gguf\n", p);
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (bench_path(&rs[i], reps, no_mmap, cold)) return 1;
        if (json) {
            print_json(&rs[i], reps, no_mmap, cold);
            fflush(stdout);
        }
    }
    if (!json) print_table(rs, n, reps, no_mmap, cold);
    return 0;
}
