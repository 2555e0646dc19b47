/* Option parsing for the generation commands. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "candle/speculative.h"
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

typedef enum { T_STR, T_I64, T_INT, T_FLOAT, T_SEED, T_FLAG } opt_type;

/* The commands cli_parse serves, as bits of an option's `cmds`. */
enum { C_RUN = 1, C_CHAT = 2, C_LOGITS = 4, C_PPL = 8, C_GEN = C_RUN | C_CHAT, C_ALL = 15 };

typedef struct opt {
    const char *s, *l; /* short and long spellings */
    opt_type type;
    size_t off;
    unsigned cmds; /* the commands that use it; others refuse it */
} opt;

/* -t bound: past any machine the project runs on; a typo like -t 1000 no
 * longer starts a thousand threads. */
#define CLI_MAX_THREADS 512
#define OFF(f) offsetof(cli_args, f)
/* Spellings as llama.cpp's: -s is the seed, -sys the system prompt. */
static const opt opts[] = {
    {"-m", "--model", T_STR, OFF(model), C_ALL},
    {"-p", "--prompt", T_STR, OFF(prompt), C_RUN | C_LOGITS},
    {"-f", "--file", T_STR, OFF(file), C_RUN | C_PPL},
    {"-sys", "--system", T_STR, OFF(system), C_CHAT},
    {NULL, "--chat-template", T_STR, OFF(chat_template), C_CHAT},
    {NULL, "--grammar", T_STR, OFF(grammar_file), C_GEN},
    {NULL, "--grammar-text", T_STR, OFF(grammar_text), C_GEN},
    {NULL, "--json-schema", T_STR, OFF(json_schema), C_GEN},
    {"-n", "--n-predict", T_I64, OFF(n_predict), C_GEN},
    {"-c", "--ctx-size", T_I64, OFF(n_ctx), C_ALL},
    {"-t", "--threads", T_INT, OFF(n_threads), C_ALL},
    {NULL, "--top", T_INT, OFF(top), C_LOGITS},
    {NULL, "--kl-divergence-base", T_STR, OFF(kld_base), C_PPL},
    {NULL, "--kl-divergence", T_FLAG, OFF(kld), C_PPL},
    {NULL, "--no-mmap", T_FLAG, OFF(no_mmap), C_ALL},
    {NULL, "--dtype", T_STR, OFF(dtype), C_ALL},
    {NULL, "--ctx-shift", T_FLAG, OFF(ctx_shift), C_GEN},
    {NULL, "--kv-f16", T_FLAG, OFF(kv_f16), C_ALL},
    {"-ctk", "--cache-type-k", T_STR, OFF(ctk), C_ALL},
    {"-ctv", "--cache-type-v", T_STR, OFF(ctv), C_ALL},
    {NULL, "--temp", T_FLOAT, OFF(sp.temp), C_GEN},
    {NULL, "--top-k", T_INT, OFF(sp.top_k), C_GEN},
    {NULL, "--top-p", T_FLOAT, OFF(sp.top_p), C_GEN},
    {NULL, "--min-p", T_FLOAT, OFF(sp.min_p), C_GEN},
    {NULL, "--repeat-penalty", T_FLOAT, OFF(sp.repeat_penalty), C_GEN},
    {NULL, "--presence-penalty", T_FLOAT, OFF(sp.presence_penalty), C_GEN},
    {NULL, "--frequency-penalty", T_FLOAT, OFF(sp.frequency_penalty), C_GEN},
    {NULL, "--repeat-last-n", T_INT, OFF(sp.penalty_last_n), C_GEN},
    {"-s", "--seed", T_SEED, OFF(sp.seed), C_GEN},
    {"-md", "--draft-model", T_STR, OFF(draft_model), C_RUN},
    {NULL, "--draft-max", T_INT, OFF(draft_max), C_RUN},
    {NULL, "--draft-p-min", T_FLOAT, OFF(draft_p_min), C_RUN},
    {NULL, "--draft-no-timing", T_FLAG, OFF(draft_no_timing), C_RUN},
    {NULL, "--lookup", T_INT, OFF(lookup), C_RUN},
};

static unsigned command_bit(const char *cmd) {
    if (!strcmp(cmd, "run")) return C_RUN;
    if (!strcmp(cmd, "chat")) return C_CHAT;
    if (!strcmp(cmd, "logits")) return C_LOGITS;
    if (!strcmp(cmd, "perplexity")) return C_PPL;
    return C_ALL;
}

/* A seed nobody chose: the kernel's random bytes, else the clock and pid. */
static uint64_t random_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    }
    if (f) fclose(f);
    /* printed and typed back as a decimal below 2^63 (-s takes an int64) */
    return s & (((uint64_t)1 << 63) - 1);
}

static bool set(cli_args *a, const opt *o, const char *v) {
    char *p = (char *)a + o->off;
    int64_t i;
    switch (o->type) {
    case T_STR: *(const char **)p = v; return true;
    case T_FLOAT: return to_float(v, (float *)p);
    case T_SEED: /* -1 asks for a random seed, as llama.cpp's */
        if (!to_i64(v, &i) || i < -1) return false;
        a->seed_given = i >= 0;
        *(uint64_t *)p = i >= 0 ? (uint64_t)i : 0;
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

bool cli_weight_dtype(const char *name, candle_dtype *out) {
    static const struct {
        const char *a, *b;
        candle_dtype t;
    } names[] = {{"f32", "float32", CANDLE_DTYPE_F32}, {"f16", "float16", CANDLE_DTYPE_F16},
                 {"bf16", "bfloat16", CANDLE_DTYPE_BF16}, {"q8_0", "int8", CANDLE_DTYPE_Q8_0}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].a) || !strcmp(name, names[i].b)) {
            *out = names[i].t;
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
    if (a->dtype && !cli_weight_dtype(a->dtype, &a->weight_dtype)) {
        fprintf(stderr, "candle %s: --dtype %s: want f32, f16, bf16 or q8_0\n", cmd, a->dtype);
        return 2;
    }
    if (a->kv_f16 && t != CANDLE_DTYPE_F16) {
        fprintf(stderr, "candle %s: --kv-f16 and -ctk/-ctv differ: K and V share one cache type\n", cmd);
        return 2;
    }
    a->kv_type = t;
    return 0;
}

int cli_parse(int argc, char **argv, cli_args *a, const char *usage) {
    memset(a, 0, sizeof *a);
    unsigned cmd = command_bit(argv[0]);
    a->n_predict = cmd == C_CHAT ? CLI_CHAT_N_PREDICT : -1;
    a->top = 10;
    a->sp = candle_sampler_default_params();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s", usage);
            return -1;
        }
        bool scaled = !strcmp(argv[i], "--lora-scaled");
        if (scaled || !strcmp(argv[i], "--lora")) {
            int need = scaled ? 2 : 1;
            float scale = 1.0f;
            if (i + need >= argc) {
                fprintf(stderr, "candle %s: %s needs %s\n", argv[0], argv[i], scaled ? "FILE SCALE" : "FILE");
                return 2;
            }
            if (scaled && (!to_float(argv[i + 2], &scale) || !isfinite(scale))) {
                fprintf(stderr, "candle %s: bad scale '%s' for --lora-scaled\n", argv[0], argv[i + 2]);
                return 2;
            }
            if (a->n_lora == CLI_MAX_LORA) {
                fprintf(stderr, "candle %s: at most %d LoRA adapters\n", argv[0], CLI_MAX_LORA);
                return 2;
            }
            a->lora[a->n_lora].path = argv[i + 1];
            a->lora[a->n_lora++].scale = scale;
            i += need;
            continue;
        }
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !o; k++)
            if ((opts[k].s && !strcmp(argv[i], opts[k].s)) || !strcmp(argv[i], opts[k].l))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "candle %s: unknown option '%s'\n%s", argv[0], argv[i], usage);
            return 2;
        }
        if (!(o->cmds & cmd)) { /* accepted and ignored before: say so */
            fprintf(stderr, "candle %s: %s is not an option of %s (see candle %s --help)\n", argv[0],
                    argv[i], argv[0], argv[0]);
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
    if (a->draft_model && a->lookup) {
        fprintf(stderr, "candle %s: --draft-model and --lookup: give one of them\n", argv[0]);
        return 2;
    }
    bool spec = a->draft_model || a->lookup;
    if (a->lookup < 0 || a->draft_max < 0 || a->draft_max > CANDLE_SPEC_MAX_DRAFT ||
        !(a->draft_p_min >= 0 && a->draft_p_min <= 1)) {
        fprintf(stderr, "candle %s: --lookup must be >= 1, --draft-max in 1..%d, --draft-p-min in [0, 1]\n",
                argv[0], CANDLE_SPEC_MAX_DRAFT);
        return 2;
    }
    if (!spec && (a->draft_max || a->draft_p_min > 0 || a->draft_no_timing)) {
        fprintf(stderr, "candle %s: --draft-max, --draft-p-min and --draft-no-timing need --draft-model or --lookup\n",
                argv[0]);
        return 2;
    }
    if (spec && a->ctx_shift) {
        fprintf(stderr, "candle %s: speculative decoding (--draft-model, --lookup) does not combine "
                        "with --ctx-shift yet\n", argv[0]);
        return 2;
    }
    if (candle_sampler_params_check(&a->sp)) {
        fprintf(stderr, "candle %s: %s\n", argv[0], candle_last_errmsg());
        return 2;
    }
    return resolve_kv(argv[0], a);
}

void cli_choose_seed(cli_args *a) {
    if (!a->seed_given) a->sp.seed = random_seed();
    fprintf(stderr, "seed: %llu\n", (unsigned long long)a->sp.seed);
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

void cli_error_file(const char *cmd, const char *path, const char *msg) {
    if (path && *path && !strstr(msg, path)) fprintf(stderr, "candle %s: %s: %s\n", cmd, path, msg);
    else fprintf(stderr, "candle %s: %s\n", cmd, msg);
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
