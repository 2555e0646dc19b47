/* Option parsing for the generation commands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"

static bool to_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

static bool to_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

typedef enum { T_STR, T_I64, T_INT, T_FLOAT, T_U64, T_FLAG } opt_type;

typedef struct opt {
    const char *s, *l; /* short and long spellings */
    opt_type type;
    size_t off;
} opt;

/* -t bound: past any machine the project runs on; a typo like -t 1000 no
 * longer starts a thousand threads. */
#define CLI_MAX_THREADS 512
#define OFF(f) offsetof(cli_args, f)
static const opt opts[] = {
    {"-m", "--model", T_STR, OFF(model)},
    {"-p", "--prompt", T_STR, OFF(prompt)},
    {"-f", "--file", T_STR, OFF(file)},
    {"-s", "--system", T_STR, OFF(system)},
    {NULL, "--chat-template", T_STR, OFF(chat_template)},
    {NULL, "--grammar", T_STR, OFF(grammar_file)},
    {NULL, "--grammar-text", T_STR, OFF(grammar_text)},
    {NULL, "--json-schema", T_STR, OFF(json_schema)},
    {"-n", "--n-predict", T_I64, OFF(n_predict)},
    {"-c", "--ctx-size", T_I64, OFF(n_ctx)},
    {"-t", "--threads", T_INT, OFF(n_threads)},
    {NULL, "--top", T_INT, OFF(top)},
    {NULL, "--no-mmap", T_FLAG, OFF(no_mmap)},
    {NULL, "--ctx-shift", T_FLAG, OFF(ctx_shift)},
    {NULL, "--kv-f16", T_FLAG, OFF(kv_f16)},
    {"-ctk", "--cache-type-k", T_STR, OFF(ctk)},
    {"-ctv", "--cache-type-v", T_STR, OFF(ctv)},
    {NULL, "--temp", T_FLOAT, OFF(sp.temp)},
    {NULL, "--top-k", T_INT, OFF(sp.top_k)},
    {NULL, "--top-p", T_FLOAT, OFF(sp.top_p)},
    {NULL, "--min-p", T_FLOAT, OFF(sp.min_p)},
    {NULL, "--repeat-penalty", T_FLOAT, OFF(sp.repeat_penalty)},
    {NULL, "--presence-penalty", T_FLOAT, OFF(sp.presence_penalty)},
    {NULL, "--frequency-penalty", T_FLOAT, OFF(sp.frequency_penalty)},
    {NULL, "--repeat-last-n", T_INT, OFF(sp.penalty_last_n)},
    {NULL, "--seed", T_U64, OFF(sp.seed)},
};

static bool set(cli_args *a, const opt *o, const char *v) {
    char *p = (char *)a + o->off;
    int64_t i;
    switch (o->type) {
    case T_STR: *(const char **)p = v; return true;
    case T_FLOAT: return to_float(v, (float *)p);
    case T_U64:
        if (!to_i64(v, &i) || i < 0) return false;
        *(uint64_t *)p = (uint64_t)i;
        return true;
    case T_INT:
        if (!to_i64(v, &i) || i < INT_MIN || i > INT_MAX) return false;
        *(int *)p = (int)i;
        return true;
    case T_I64: return to_i64(v, (int64_t *)p);
    case T_FLAG: *(bool *)p = true; return true;
    }
    return false;
}

bool cli_kv_type(const char *name, candle_dtype *out) {
    static const struct {
        const char *name;
        candle_dtype t;
    } kv[] = {{"f32", CANDLE_DTYPE_F32},   {"f16", CANDLE_DTYPE_F16},   {"bf16", CANDLE_DTYPE_BF16},
              {"q8_0", CANDLE_DTYPE_Q8_0}, {"q4_0", CANDLE_DTYPE_Q4_0}};
    for (size_t i = 0; name && i < sizeof kv / sizeof kv[0]; i++)
        if (!strcmp(name, kv[i].name)) {
            *out = kv[i].t;
            return true;
        }
    return false;
}

int cli_kv_pair(const char *cmd, const char *ctk, const char *ctv, candle_dtype *out) {
    const char *given[2] = {ctk, ctv}, *flag[2] = {"-ctk", "-ctv"};
    candle_dtype t[2] = {*out, *out};
    for (int i = 0; i < 2; i++)
        if (given[i] && !cli_kv_type(given[i], &t[i])) {
            fprintf(stderr, "candle %s: bad value '%s' for %s (f32, f16, bf16, q8_0 or q4_0)\n", cmd, given[i],
                    flag[i]);
            return 2;
        }
    if (ctk && ctv && t[0] != t[1]) {
        fprintf(stderr, "candle %s: -ctk and -ctv differ: K and V share one cache type\n", cmd);
        return 2;
    }
    *out = ctk ? t[0] : t[1];
    return 0;
}

/* kv_type from --kv-f16, -ctk and -ctv: 0, or 2 after a message. */
static int resolve_kv(const char *cmd, cli_args *a) {
    a->kv_type = a->kv_f16 ? CANDLE_DTYPE_F16 : CANDLE_DTYPE_F32;
    candle_dtype t = a->kv_type;
    if (cli_kv_pair(cmd, a->ctk, a->ctv, &t)) return 2;
    if (a->kv_f16 && t != CANDLE_DTYPE_F16) {
        fprintf(stderr, "candle %s: --kv-f16 and -ctk/-ctv differ: K and V share one cache type\n", cmd);
        return 2;
    }
    a->kv_type = t;
    return 0;
}

int cli_parse(int argc, char **argv, cli_args *a, const char *usage) {
    memset(a, 0, sizeof *a);
    a->n_predict = -1;
    a->top = 10;
    a->sp = candle_sampler_default_params();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s", usage);
            return -1;
        }
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !o; k++)
            if ((opts[k].s && !strcmp(argv[i], opts[k].s)) || !strcmp(argv[i], opts[k].l))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "candle %s: unknown option '%s'\n%s", argv[0], argv[i], usage);
            return 2;
        }
        if (o->type == T_FLAG) {
            set(a, o, NULL);
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "candle %s: %s needs a value\n", argv[0], argv[i]);
            return 2;
        }
        if (!set(a, o, argv[i + 1])) {
            fprintf(stderr, "candle %s: bad value '%s' for %s\n", argv[0], argv[i + 1], argv[i]);
            return 2;
        }
        i++;
    }
    if (a->n_ctx < 0 || a->n_threads < 0 || a->top <= 0) {
        fprintf(stderr, "candle %s: -c, -t and --top must be positive\n", argv[0]);
        return 2;
    }
    /* 1000 threads were started when asked: far past any machine here */
    if (a->n_threads > CLI_MAX_THREADS) {
        fprintf(stderr, "candle %s: -t %d: at most %d threads\n", argv[0], a->n_threads,
                CLI_MAX_THREADS);
        return 2;
    }
    if (!!a->grammar_file + !!a->grammar_text + !!a->json_schema > 1) {
        fprintf(stderr, "candle %s: --grammar, --grammar-text and --json-schema: give one of them\n",
                argv[0]);
        return 2;
    }
    if (candle_sampler_params_check(&a->sp)) {
        fprintf(stderr, "candle %s: %s\n", argv[0], candle_last_errmsg());
        return 2;
    }
    return resolve_kv(argv[0], a);
}

static bool exists(const char *p) { return access(p, R_OK) == 0; }

const char *cli_model_path(const cli_args *a, char *buf, size_t n) {
    if (a->model) return a->model;
    if (exists(CLI_DEFAULT_MODEL)) return CLI_DEFAULT_MODEL;
    /* The binary sits in <repo>/<build>/bin/candle. */
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        for (int up = 0; up < 3; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = 0;
        }
        snprintf(buf, n, "%s/%s", exe, CLI_DEFAULT_MODEL);
        if (exists(buf)) return buf;
    }
    fprintf(stderr,
            "candle: no model given and the default model %s is not there; "
            "fetch it with `make run` or scripts/fetch-model.sh, or pass -m MODEL\n",
            CLI_DEFAULT_MODEL);
    return NULL;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
