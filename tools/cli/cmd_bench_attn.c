/* candle bench attn [--json] [-t N] [--quick]: causal attention prefill
 * (Sq = Skv = S, f32, grouped-query heads) through the flash kernel
 * (candle_attention) against the materialised chain built from ops:
 * matmul q.k^T, scale, causal mask add, softmax, matmul with v.
 *
 * Each method runs in its own lazy context on the CPU backend (N threads),
 * so the memory plan reuses intermediates as a model's graph would; the
 * context's peak bytes (inputs, the chain's [S, S] mask, and the plan
 * buffer) are reported for each. Times: best of a few runs after a warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define TARGET_SPEEDUP 3.0 /* the goal at S = 2048 */
#define TARGET_S 2048

typedef struct attn_case {
    const char *name;
    int64_t hq, hkv, d, s;
} attn_case;

static const attn_case CASES[] = {
    {"smollm2", 9, 3, 64, 512},  {"smollm2", 9, 3, 64, 1024}, {"smollm2", 9, 3, 64, 2048},
    {"smollm2", 9, 3, 64, 4096}, {"llama", 32, 8, 64, 2048},
};
static const attn_case QUICK_CASES[] = {{"smollm2", 9, 3, 64, 256}};

typedef struct attn_result {
    const attn_case *c;
    double flash_s, mat_s;         /* best seconds per prefill */
    size_t flash_peak, mat_peak;   /* candle_ctx_mem_peak of each context */
} attn_result;

typedef struct attn_opts {
    bool json, quick;
    int threads;
} attn_opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Uniform in [-1, 1), reproducible. */
static void fill(float *v, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

typedef struct attn_inputs {
    candle_tensor *q;    /* [1, Hq, S, D] */
    candle_tensor *k;    /* [1, Hkv, S, D] */
    candle_tensor *v;    /* [1, Hkv, S, D] */
    candle_tensor *mask; /* [S, S], -inf above the diagonal; materialised only */
} attn_inputs;

static candle_tensor *input(candle_ctx *ctx, int64_t h, const attn_case *c, uint32_t seed) {
    int64_t shape[4] = {1, h, c->s, c->d};
    size_t n = (size_t)(h * c->s * c->d);
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return NULL;
    fill(buf, n, seed);
    candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 4, shape, buf);
    free(buf);
    return t;
}

static candle_tensor *causal_mask(candle_ctx *ctx, int64_t s) {
    int64_t shape[2] = {s, s};
    float *buf = malloc((size_t)(s * s) * sizeof *buf);
    if (!buf) return NULL;
    for (int64_t i = 0; i < s; i++)
        for (int64_t j = 0; j < s; j++) buf[i * s + j] = j > i ? -INFINITY : 0.0f;
    candle_tensor *t = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, shape, buf);
    free(buf);
    return t;
}

/* q [1, Hq, S, D] seen as [1, Hkv, G*S, D]: each kv head meets its group of
 * query heads (h / G) in one batched matmul, with no copy of k or v. */
static candle_tensor *materialised(candle_ctx *ctx, const attn_case *c, const attn_inputs *in) {
    int64_t g = c->hq / c->hkv;
    int64_t qs[4] = {1, c->hkv, g * c->s, c->d}, ss[4] = {1, c->hq, c->s, c->s};
    int64_t gs[4] = {1, c->hkv, g * c->s, c->s}, os[4] = {1, c->hq, c->s, c->d};
    candle_tensor *s = candle_matmul(ctx, candle_reshape(ctx, in->q, 4, qs), candle_transpose(ctx, in->k, 2, 3));
    s = candle_scale(ctx, candle_reshape(ctx, s, 4, ss), 1.0 / sqrt((double)c->d));
    s = candle_softmax(ctx, candle_add(ctx, s, in->mask), -1);
    return candle_reshape(ctx, candle_matmul(ctx, candle_reshape(ctx, s, 4, gs), in->v), 4, os);
}

static int run_once(candle_ctx *ctx, const attn_case *c, const attn_inputs *in, bool flash) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    candle_tensor *o = flash ? candle_attention(ctx, in->q, in->k, in->v, NULL, 0, true) : materialised(ctx, c, in);
    int rc = o && candle_compute(ctx, o) == CANDLE_OK ? 0 : 1;
    if (rc) fprintf(stderr, "candle bench attn: %s S=%lld: %s\n", flash ? "flash" : "materialised",
                    (long long)c->s, candle_errmsg(ctx));
    candle_ctx_reset(ctx, mark);
    return rc;
}

/* Best seconds of `reps` runs after one warm-up, in a fresh context whose
 * peak bytes land in *peak. */
static int time_method(const attn_opts *o, const attn_case *c, bool flash, int reps, double *best, size_t *peak) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.n_threads = o->threads;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return 1;
    attn_inputs in = {input(ctx, c->hq, c, 1), input(ctx, c->hkv, c, 2), input(ctx, c->hkv, c, 3),
                      flash ? NULL : causal_mask(ctx, c->s)};
    int rc = in.q && in.k && in.v && (flash || in.mask) ? run_once(ctx, c, &in, flash) : 1;
    *best = 1e30;
    for (int r = 0; r < reps && !rc; r++) {
        double t0 = now_s();
        rc = run_once(ctx, c, &in, flash);
        double dt = now_s() - t0;
        *best = dt < *best ? dt : *best;
    }
    *peak = candle_ctx_mem_peak(ctx);
    candle_ctx_free(ctx);
    return rc;
}

static void print_table(const attn_opts *o, const attn_result *r, int n) {
    printf("candle bench attn: causal f32 prefill, %d thread%s, best of runs after a warm-up\n\n", o->threads,
           o->threads > 1 ? "s" : "");
    printf("| heads | Hq | Hkv | D | S | flash ms | materialised ms | speedup | flash peak MiB | materialised peak MiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        printf("| %s | %lld | %lld | %lld | %lld | %.2f | %.2f | %.2fx | %.1f | %.1f |\n", r[i].c->name,
               (long long)r[i].c->hq, (long long)r[i].c->hkv, (long long)r[i].c->d, (long long)r[i].c->s,
               r[i].flash_s * 1e3, r[i].mat_s * 1e3, r[i].mat_s / r[i].flash_s, r[i].flash_peak / 1048576.0,
               r[i].mat_peak / 1048576.0);
    for (int i = 0; i < n; i++)
        if (r[i].c->s == TARGET_S)
            printf("\ntarget %s S=%d: flash %.2fx faster than materialised (goal %.0fx): %s", r[i].c->name,
                   TARGET_S, r[i].mat_s / r[i].flash_s, TARGET_SPEEDUP,
                   r[i].mat_s / r[i].flash_s >= TARGET_SPEEDUP ? "met" : "NOT met");
    printf("\n");
}

static void print_json(const attn_opts *o, const attn_result *r, int n) {
    printf("{\"bench\": \"attn\", \"threads\": %d, \"quick\": %s, \"causal\": true, \"dtype\": \"f32\",\n"
           " \"results\": [",
           o->threads, o->quick ? "true" : "false");
    for (int i = 0; i < n; i++)
        printf("%s\n  {\"heads\": \"%s\", \"hq\": %lld, \"hkv\": %lld, \"d\": %lld, \"s\": %lld, "
               "\"flash_ms\": %.4f, \"materialised_ms\": %.4f, \"speedup\": %.4f, "
               "\"flash_peak_bytes\": %zu, \"materialised_peak_bytes\": %zu}",
               i ? "," : "", r[i].c->name, (long long)r[i].c->hq, (long long)r[i].c->hkv, (long long)r[i].c->d,
               (long long)r[i].c->s, r[i].flash_s * 1e3, r[i].mat_s * 1e3, r[i].mat_s / r[i].flash_s,
               r[i].flash_peak, r[i].mat_peak);
    printf("\n ],\n \"target\": [");
    int k = 0;
    for (int i = 0; i < n; i++)
        if (r[i].c->s == TARGET_S)
            printf("%s{\"heads\": \"%s\", \"s\": %d, \"goal_speedup\": %.0f, \"speedup\": %.4f, \"met\": %s}",
                   k++ ? ", " : "", r[i].c->name, TARGET_S, TARGET_SPEEDUP, r[i].mat_s / r[i].flash_s,
                   r[i].mat_s / r[i].flash_s >= TARGET_SPEEDUP ? "true" : "false");
    printf("]}\n");
}

static int parse(attn_opts *o, int argc, char **argv) {
    *o = (attn_opts){false, false, 2};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o->json = true;
        else if (!strcmp(argv[i], "--quick")) o->quick = true;
        else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) && i + 1 < argc) o->threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: candle bench attn [--json] [-t N] [--quick]\n"
                   "  causal f32 attention prefill: flash kernel vs the materialised chain\n"
                   "  (matmul, scale, mask, softmax, matmul) on N threads (default 2);\n"
                   "  --quick runs S = 256 only\n");
            return 0;
        } else {
            fprintf(stderr, "candle bench attn: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (o->threads < 1 || o->threads > 256) {
        fprintf(stderr, "candle bench attn: -t wants 1..256 threads\n");
        return 2;
    }
    return -1;
}

int cmd_bench_attn(int argc, char **argv) {
    attn_opts o;
    int rc = parse(&o, argc, argv);
    if (rc >= 0) return rc;
    const attn_case *cases = o.quick ? QUICK_CASES : CASES;
    int n = o.quick ? (int)(sizeof QUICK_CASES / sizeof *QUICK_CASES) : (int)(sizeof CASES / sizeof *CASES);
    attn_result res[sizeof CASES / sizeof *CASES];
    int reps = o.quick ? 2 : 3;
    for (int i = 0; i < n; i++) {
        res[i] = (attn_result){.c = &cases[i]};
        if (time_method(&o, &cases[i], true, reps, &res[i].flash_s, &res[i].flash_peak) ||
            time_method(&o, &cases[i], false, reps, &res[i].mat_s, &res[i].mat_peak))
            return 1;
    }
    if (o.json) print_json(&o, res, n);
    else print_table(&o, res, n);
    return 0;
}
