/* candle bench quant [--json] [-t N] [--quick]: quantized matrix-vector and
 * matrix-matrix products (candle_linear through the public API, lazy
 * context, CPU backend on N threads) per weight type, against the read
 * bandwidth measured on the same thread count; and single-thread
 * quantization (from_f32) and dequantization (to_f32) throughput.
 *
 * A decoder step reads every weight once, so matvec speed is bounded by
 * bandwidth: the weights of one case are several copies taken in turn, their
 * sum past the last-level cache, so each product reads its weight from
 * memory as a model's layers do. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bench_roofline.h"
#include "cli.h"
#include "bench_util.h"
#include "backend/cpu/cpu-config.h" /* the kernels the CPU backend runs */

#define MAX_COPIES 64
#define TARGET_PCT 80.0 /* matvec at 2 threads vs read bandwidth (the goal) */

static const candle_dtype TYPES[] = {
    CANDLE_DTYPE_F16,  CANDLE_DTYPE_BF16, CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_1,   CANDLE_DTYPE_Q5_0,
    CANDLE_DTYPE_Q5_1, CANDLE_DTYPE_Q8_0, CANDLE_DTYPE_Q2_K, CANDLE_DTYPE_Q3_K,   CANDLE_DTYPE_Q4_K,
    CANDLE_DTYPE_Q5_K, CANDLE_DTYPE_Q6_K, CANDLE_DTYPE_IQ4_NL, CANDLE_DTYPE_IQ4_XS, CANDLE_DTYPE_Q4_Z128};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

static const candle_dtype TARGET_TYPES[] = {CANDLE_DTYPE_Q4_0, CANDLE_DTYPE_Q4_K, CANDLE_DTYPE_Q8_0};

typedef struct qshape {
    const char *name;
    int64_t N, K;
} qshape;

static const qshape SHAPES[] = {{"2048x2048", 2048, 2048}, {"5632x2048", 5632, 2048}};
static const qshape QUICK_SHAPES[] = {{"256x512", 256, 512}};
/* 16: a batched decode step of 16 sequences; 128: prompt processing */
static const int64_t MS[] = {1, 8, 16, 64, 128};
#define N_MS ((int)(sizeof MS / sizeof MS[0]))

typedef struct qrow {
    candle_dtype t;
    const qshape *shape;
    int64_t M;
    double secs; /* best seconds per product */
} qrow;

typedef struct qconv {
    double from_mbs, to_mbs; /* MB/s of f32 values, one thread */
} qconv;

typedef struct qopts {
    bool json, quick;
    int64_t ms[16]; /* the activation rows M of each product (--m, --m1) */
    int n_ms;
    int threads;
    const char *only; /* --type: one weight type, NULL for all */
    qshape shape;     /* --shape NxK: this shape alone (N 0: the defaults) */
    char shape_name[48];
} qopts;

static size_t llc_bytes(void) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? (size_t)l3 : (size_t)32 << 20;
}

/* ---- quantization throughput ---- */

static double best_conv(const candle_dtype_traits *tr, bool to, const float *src, void *q, float *dst,
                        int64_t n, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        if (to) tr->to_f32(q, dst, n);
        else tr->from_f32(src, q, n);
        double dt = bench_now_s() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static int measure_conv(qconv *c, candle_dtype t, const float *src, int64_t n, int reps) {
    const candle_dtype_traits *tr = cpu_dtype(t);
    void *q = malloc(candle_dtype_row_size(t, n));
    float *dst = malloc((size_t)n * sizeof *dst);
    if (!q || !dst) {
        free(q), free(dst);
        return 1;
    }
    double mb = (double)n * sizeof(float) * 1e-6;
    c->from_mbs = mb / best_conv(tr, false, src, q, dst, n, reps); /* also leaves q filled */
    c->to_mbs = mb / best_conv(tr, true, src, q, dst, n, reps);
    free(q), free(dst);
    return 0;
}

/* ---- products ---- */

typedef struct qcase {
    candle_ctx *ctx;
    candle_tensor *x;                  /* [M, K] f32 */
    candle_tensor *w[MAX_COPIES];      /* each [N, K] of the weight type, equal data */
    int n_copies, next;
} qcase;

/* One product through the public API; the node is dropped afterwards so
 * the next call builds and computes a fresh one. */
static int run_once(qcase *c) {
    candle_ctx_mark mark = candle_ctx_get_mark(c->ctx);
    candle_tensor *y = candle_linear(c->ctx, c->x, c->w[c->next], NULL);
    c->next = (c->next + 1) % c->n_copies;
    int rc = y && candle_compute(c->ctx, y) == CANDLE_OK ? 0 : 1;
    candle_ctx_reset(c->ctx, mark);
    return rc;
}

/* Best seconds per product after a warm-up pass over every copy: at least
 * 3 runs and about min_time in all. */
static double time_case(qcase *c, double min_time) {
    for (int i = 0; i < c->n_copies; i++)
        if (run_once(c)) return 0;
    double best = 1e30, total = 0;
    for (int r = 0; r < 500 && (r < 3 || total < min_time); r++) {
        double t0 = bench_now_s();
        if (run_once(c)) return 0;
        double dt = bench_now_s() - t0;
        total += dt;
        best = dt < best ? dt : best;
        if (dt > 4 * min_time) break;
    }
    return best;
}

/* Weights of one type and shape (copies past the LLC) from qw, its first N
 * quantized rows of length K; then M = o->ms[] rows of act. */
static int bench_weight(candle_ctx *ctx, candle_dtype t, const qshape *s, const void *qw, const float *act,
                        qrow *rows, const qopts *o) {
    candle_ctx_mark mark = candle_ctx_get_mark(ctx);
    qcase c = {.ctx = ctx};
    int64_t ws[2] = {s->N, s->K};
    size_t bytes = candle_dtype_row_size(t, s->K) * (size_t)s->N;
    size_t want = o->quick ? bytes : 2 * llc_bytes();
    c.n_copies = (int)((want + bytes - 1) / bytes);
    c.n_copies = c.n_copies < 1 ? 1 : c.n_copies > MAX_COPIES ? MAX_COPIES : c.n_copies;
    for (int i = 0; i < c.n_copies; i++) {
        c.w[i] = candle_tensor_new(ctx, t, 2, ws);
        if (!c.w[i]) goto fail;
        memcpy(candle_tensor_data(c.w[i]), qw, bytes);
    }
    for (int m = 0; m < o->n_ms; m++) {
        candle_ctx_mark xm = candle_ctx_get_mark(ctx);
        int64_t xs[2] = {o->ms[m], s->K};
        c.x = candle_tensor_from_f32(ctx, CANDLE_DTYPE_F32, 2, xs, act);
        if (!c.x) goto fail;
        rows[m] = (qrow){t, s, o->ms[m], time_case(&c, o->quick ? 0.005 : 0.3)};
        candle_ctx_reset(ctx, xm);
        if (rows[m].secs <= 0) goto fail;
    }
    candle_ctx_reset(ctx, mark);
    return 0;
fail:
    fprintf(stderr, "candle bench quant: %s %s: %s\n", candle_dtype_name(t), s->name, candle_errmsg(ctx));
    candle_ctx_reset(ctx, mark);
    return 1;
}

/* ---- output ---- */

typedef struct qresult {
    qrow *rows;
    int n_rows;
    qconv conv[N_TYPES];
    double bw; /* bytes/s read, measured on opts.threads threads */
    char info[2048];
    const qopts *o;
} qresult;

static double row_bytes(const qrow *r) {
    return (double)candle_dtype_row_size(r->t, r->shape->K) * (double)r->shape->N;
}
static double row_gbs(const qrow *r) { return row_bytes(r) / r->secs * 1e-9; }
static double row_gflops(const qrow *r) {
    return 2.0 * (double)r->M * (double)r->shape->N * (double)r->shape->K / r->secs * 1e-9;
}
static double row_pct_bw(const qrow *r, double bw) { return bw > 0 ? 100.0 * row_bytes(r) / r->secs / bw : 0; }
static double bits_per_weight(candle_dtype t) {
    const candle_dtype_traits *tr = cpu_dtype(t);
    return 8.0 * (double)tr->type_size / (double)tr->block_size;
}

/* The matvec figure the target is judged on: the largest shape. */
static const qrow *target_row(const qresult *q, candle_dtype t) {
    const qrow *best = NULL;
    for (int i = 0; i < q->n_rows; i++) {
        const qrow *r = &q->rows[i];
        if (r->t == t && r->M == 1 && (!best || r->shape->N * r->shape->K > best->shape->N * best->shape->K))
            best = r;
    }
    return best;
}

static void print_table(const qresult *q) {
    printf("candle bench quant: candle_linear on the CPU backend, %d thread%s, %s kernels\n\n", q->o->threads,
           q->o->threads > 1 ? "s" : "", bench_fma_kind());
    printf("%s\n", q->info);
    printf("measured read bandwidth: %d thread%s: %.1f GB/s\n\n", q->o->threads, q->o->threads > 1 ? "s" : "",
           q->bw * 1e-9);
    printf("| type | bpw | shape | M | ms | GB/s | GFLOP/s | %%bw |\n|---|---:|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < q->n_rows; i++) {
        const qrow *r = &q->rows[i];
        char pct[16] = "";
        if (r->M == 1) snprintf(pct, sizeof pct, "%.0f", row_pct_bw(r, q->bw));
        printf("| %s | %.2f | %s | %lld | %.3f | %.1f | %.1f | %s |\n", candle_dtype_name(r->t), bits_per_weight(r->t),
               r->shape->name, (long long)r->M, r->secs * 1e3, row_gbs(r), row_gflops(r), pct);
    }
    printf("\nGB/s = weight bytes / time; GFLOP/s = 2*M*N*K / time; %%bw (M = 1) against the read bandwidth above.\n\n");
    printf("| type | from_f32 MB/s | to_f32 MB/s |\n|---|---:|---:|\n");
    for (int i = 0; i < N_TYPES; i++)
        if (q->conv[i].from_mbs > 0)
            printf("| %s | %.0f | %.0f |\n", candle_dtype_name(TYPES[i]), q->conv[i].from_mbs, q->conv[i].to_mbs);
    printf("\nMB/s of f32 values (4 bytes each) converted, one thread.\n\n");
    for (size_t i = 0; i < sizeof TARGET_TYPES / sizeof TARGET_TYPES[0]; i++) {
        const qrow *r = target_row(q, TARGET_TYPES[i]);
        if (!r) continue;
        double p = row_pct_bw(r, q->bw);
        printf("target %s matvec %s: %.0f%% of read bandwidth (goal %.0f%% at 2 threads): %s\n",
               candle_dtype_name(r->t), r->shape->name, p, TARGET_PCT, p >= TARGET_PCT ? "met" : "not met");
    }
}

static void print_json(const qresult *q) {
    printf("{\"bench\": \"quant\", \"threads\": %d, \"quick\": %s, \"machine\": {\"read_gbs\": %.3f, "
           "\"kernels\": \"%s\"},\n \"results\": [\n",
           q->o->threads, q->o->quick ? "true" : "false", q->bw * 1e-9, bench_fma_kind());
    for (int i = 0; i < q->n_rows; i++) {
        const qrow *r = &q->rows[i];
        printf("  {\"type\": \"%s\", \"bpw\": %.4f, \"shape\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
               "\"weight_bytes\": %.0f, \"ms\": %.6f, \"gbs\": %.4f, \"gflops\": %.4f, \"pct_bw\": %.2f}%s\n",
               candle_dtype_name(r->t), bits_per_weight(r->t), r->shape->name, (long long)r->M,
               (long long)r->shape->N, (long long)r->shape->K, row_bytes(r), r->secs * 1e3, row_gbs(r),
               row_gflops(r), row_pct_bw(r, q->bw), i + 1 < q->n_rows ? "," : "");
    }
    printf(" ],\n \"quantize\": [\n");
    for (int i = 0; i < N_TYPES; i++)
        printf("  {\"type\": \"%s\", \"from_f32_mbs\": %.1f, \"to_f32_mbs\": %.1f}%s\n", candle_dtype_name(TYPES[i]),
               q->conv[i].from_mbs, q->conv[i].to_mbs, i + 1 < N_TYPES ? "," : "");
    printf(" ],\n \"target\": [\n");
    const char *sep = "";
    for (size_t i = 0; i < sizeof TARGET_TYPES / sizeof TARGET_TYPES[0]; i++) {
        const qrow *r = target_row(q, TARGET_TYPES[i]);
        if (!r) continue;
        double p = row_pct_bw(r, q->bw);
        printf("%s  {\"type\": \"%s\", \"shape\": \"%s\", \"pct_bw\": %.1f, \"goal_pct\": %.0f, \"met\": %s}", sep,
               candle_dtype_name(r->t), r->shape->name, p, TARGET_PCT, p >= TARGET_PCT ? "true" : "false");
        sep = ",\n";
    }
    printf("\n ]}\n");
}

/* ---- driver ---- */

static int parse(qopts *o, int argc, char **argv) {
    *o = (qopts){.threads = 2, .n_ms = N_MS};
    memcpy(o->ms, MS, sizeof MS);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o->json = true;
        else if (!strcmp(argv[i], "--quick")) o->quick = true;
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) o->only = argv[++i];
        else if (!strcmp(argv[i], "--m1")) o->ms[0] = 1, o->n_ms = 1;
        else if (!strcmp(argv[i], "--m") && i + 1 < argc) {
            o->n_ms = 0;
            for (char *p = argv[++i], *end; *p; p = *end == ',' ? end + 1 : end) {
                long long m = strtoll(p, &end, 10);
                if (end == p || m < 1 || m > 512 || o->n_ms == 16 || (*end && *end != ',')) {
                    fprintf(stderr, "candle bench quant: --m wants a comma list of at most 16 rows counts, 1..512\n");
                    return 2;
                }
                o->ms[o->n_ms++] = m;
            }
        }
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            long long n, k;
            char tail;
            if (sscanf(argv[++i], "%lldx%lld%c", &n, &k, &tail) != 2 || n < 1 || k < 32 || k % 32 ||
                n * k > (1LL << 31)) {
                fprintf(stderr, "candle bench quant: --shape wants NxK (K a multiple of 32, N*K at most 2^31)\n");
                return 2;
            }
            snprintf(o->shape_name, sizeof o->shape_name, "%lldx%lld", n, k);
            o->shape = (qshape){o->shape_name, n, k};
        }
        else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) && i + 1 < argc) o->threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: candle bench quant [--json] [-t N] [--quick] [--type T] [--shape NxK] [--m1] [--m M,..]\n"
                   "  quantized candle_linear (M = 1, 8, 16, 64, 128; --m1: M = 1 only; --m: these M) per weight type (or type T\n"
                   "  only) on N threads (default 2), on 2048x2048 and 5632x2048 weights (or NxK), against the\n"
                   "  measured read bandwidth, and from_f32/to_f32 throughput\n");
            return 0;
        } else {
            fprintf(stderr, "candle bench quant: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (o->threads < 1 || o->threads > 256) {
        fprintf(stderr, "candle bench quant: -t wants 1..256 threads\n");
        return 2;
    }
    bool known = !o->only;
    for (int i = 0; i < N_TYPES && !known; i++) known = !strcasecmp(o->only, candle_dtype_name(TYPES[i]));
    if (!known) {
        fprintf(stderr, "candle bench quant: --type %s is not one of:", o->only);
        for (int i = 0; i < N_TYPES; i++) fprintf(stderr, " %s", candle_dtype_name(TYPES[i]));
        fprintf(stderr, "\n");
        return 2;
    }
    return -1;
}

static int bench_all(qresult *q, const float *src, const qshape *shapes, int n_shapes) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.n_threads = q->o->threads;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) return 1;
    int rc = 0;
    int64_t max_n = 0;
    for (int s = 0; s < n_shapes; s++) max_n = shapes[s].N > max_n ? shapes[s].N : max_n;
    for (int i = 0; i < N_TYPES && !rc; i++) {
        const candle_dtype_traits *tr = cpu_dtype(TYPES[i]);
        if (q->o->only && strcasecmp(q->o->only, tr->name)) continue;
        if (shapes[0].K % tr->block_size) continue; /* --shape: K not whole blocks of this type */
        if (!tr->from_f32 || !tr->to_f32) {
            fprintf(stderr, "candle bench quant: %s has no conversion kernels\n", tr->name);
            rc = 1;
            break;
        }
        rc = measure_conv(&q->conv[i], TYPES[i], src, q->o->quick ? 1 << 16 : 1 << 20, q->o->quick ? 1 : 3);
        /* every shape has the same K: the smaller weights are the first rows
         * of the largest, quantized once (K-quants quantize slowly) */
        void *qw = rc ? NULL : malloc(candle_dtype_row_size(TYPES[i], shapes[0].K) * (size_t)max_n);
        if (qw) tr->from_f32(src, qw, max_n * shapes[0].K);
        else rc = 1;
        for (int s = 0; s < n_shapes && !rc; s++) {
            rc = bench_weight(ctx, TYPES[i], &shapes[s], qw, src + max_n * shapes[0].K, &q->rows[q->n_rows], q->o);
            q->n_rows += q->o->n_ms;
        }
        free(qw);
    }
    candle_ctx_free(ctx);
    return rc;
}

int cmd_bench_quant(int argc, char **argv) {
    qopts o;
    int rc = parse(&o, argc, argv);
    if (rc >= 0) return rc;
    const qshape *shapes = o.shape.N ? &o.shape : o.quick ? QUICK_SHAPES : SHAPES;
    int n_shapes = o.shape.N || o.quick ? 1 : (int)(sizeof SHAPES / sizeof SHAPES[0]);
    int64_t most = 1 << 20; /* the conversion sample */
    for (int s = 0; s < n_shapes; s++) most = shapes[s].N * shapes[s].K > most ? shapes[s].N * shapes[s].K : most;
    /* weights, then the largest activation [M, K] (all shapes share K) */
    int64_t max_m = 0;
    for (int m = 0; m < o.n_ms; m++) max_m = o.ms[m] > max_m ? o.ms[m] : max_m;
    most += max_m * shapes[0].K;
    if (most <= 0 || (uint64_t)most > SIZE_MAX / sizeof(float)) {
        fprintf(stderr, "candle bench quant: shape too large\n");
        return 2;
    }
    float *src = malloc((size_t)most * sizeof *src);
    qrow *rows = calloc((size_t)(N_TYPES * n_shapes * o.n_ms), sizeof *rows);
    qresult q = {.rows = rows, .o = &o};
    if (!src || !rows) {
        free(src), free(rows);
        fprintf(stderr, "candle bench quant: out of memory\n");
        return 1;
    }
    bench_fill_uniform(src, most, 7);
    q.bw = bench_read_bandwidth(o.threads);
    rc = bench_all(&q, src, shapes, n_shapes);
    if (!o.quick) { /* again after the products: keep the less disturbed figure */
        double bw = bench_read_bandwidth(o.threads);
        q.bw = bw > q.bw ? bw : q.bw;
    }
    candle_cpu_info(q.info, sizeof q.info);
    if (!rc) {
        if (o.json) print_json(&q);
        else print_table(&q);
    }
    free(src), free(rows);
    return rc;
}
