/* Helpers shared by the reduction, matmul, norm and rope tests: inputs in the
 * layouts an op must handle, read-back of any layout in double precision,
 * and the per-dtype NMSE bounds. The expected values come from the logical
 * (already dtype-rounded) input values, so a bound only has to absorb the
 * rounding of the output. */
#ifndef CANDLE_TEST_MATHTEST_H
#define CANDLE_TEST_MATHTEST_H

#include <stdint.h>

#include "backend/cpu/cpu-config.h" /* cpu_dtype: the kernels the tests check */
#include "test.h"

typedef enum mt_layout {
    MT_CONTIG,     /* fresh contiguous tensor */
    MT_TRANSPOSED, /* transpose view of a tensor with the last two dims swapped */
    MT_BROADCAST,  /* dim 0 of size 1 expanded (stride 0) */
    MT_SLICED,     /* every other element of a longer last dim, from index 1 */
    MT_OFFSET,     /* narrow of dim 0, starting 2 rows in */
    MT_LAYOUT_COUNT
} mt_layout;

static const char *const mt_layout_names[MT_LAYOUT_COUNT] = {"contig", "transposed", "broadcast",
                                                             "sliced", "offset"};

static inline uint64_t mt_rng_next(uint64_t *s) {
    /* splitmix64: seeded, reproducible, good enough for test data */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double mt_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(mt_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static inline int64_t mt_numel(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

/* A tensor of logical shape `shape` laid out as `lay`, with values uniform in
 * [lo, hi) (whole numbers for integer dtypes). NULL when the layout does not
 * apply to the rank (transposed needs 2 dims). */
static inline candle_tensor *mt_input(candle_ctx *ctx, candle_dtype dt, int rank,
                                      const int64_t *shape, mt_layout lay, uint64_t seed,
                                      double lo, double hi) {
    int64_t bs[CANDLE_MAX_RANK];
    for (int i = 0; i < rank; i++) bs[i] = shape[i];
    if (rank < 1 || (lay == MT_TRANSPOSED && rank < 2)) return NULL;
    if (lay == MT_TRANSPOSED) {
        bs[rank - 2] = shape[rank - 1];
        bs[rank - 1] = shape[rank - 2];
    } else if (lay == MT_BROADCAST) {
        bs[0] = 1;
    } else if (lay == MT_SLICED) {
        bs[rank - 1] = 2 * shape[rank - 1] + 1;
    } else if (lay == MT_OFFSET) {
        bs[0] = shape[0] + 3;
    }
    int64_t n = mt_numel(rank, bs);
    float *data = malloc(sizeof(float) * (size_t)(n ? n : 1));
    bool ints = cpu_dtype(dt)->is_int;
    for (int64_t i = 0; i < n; i++) {
        double v = mt_uniform(&seed, lo, hi);
        data[i] = (float)(ints ? floor(v) : v);
    }
    candle_tensor *t = candle_tensor_from_f32(ctx, dt, rank, bs, data);
    free(data);
    switch (lay) {
    case MT_TRANSPOSED: return candle_transpose(ctx, t, -1, -2);
    case MT_BROADCAST: return candle_expand(ctx, t, rank, shape);
    case MT_SLICED: return candle_slice(ctx, t, rank - 1, 1, bs[rank - 1], 2);
    case MT_OFFSET: return candle_narrow(ctx, t, 0, 2, shape[0]);
    default: return t;
    }
}

/* All elements of t in row-major logical order; false if t is unreadable. */
static inline bool mt_read(const candle_tensor *t, double *out) {
    if (!t) return false;
    int64_t n = candle_tensor_numel(t), idx[CANDLE_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (candle_tensor_get_f64(t, idx, &out[i]) != CANDLE_OK) return false;
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return true;
}

/* A freshly malloc'ed read-back of t (NULL if unreadable). */
static inline double *mt_values(const candle_tensor *t) {
    if (!t) return NULL;
    int64_t n = candle_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (v && !mt_read(t, v)) {
        free(v);
        return NULL;
    }
    return v;
}

static inline double mt_nmse(const double *got, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (isnan(num)) return INFINITY;
    return den == 0 ? num : num / den;
}

/* Rounding the output to the dtype costs at most half an ulp: relative
 * 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16); the bounds leave a wide margin over
 * that squared and still catch any indexing mistake. */
static inline double mt_bound(candle_dtype dt) {
    switch (dt) {
    case CANDLE_DTYPE_F16: return 1e-5;
    case CANDLE_DTYPE_BF16: return 1e-4;
    default: return 1e-10;
    }
}

/* n rows of k floats quantized row by row to t; *row: bytes per row.
 * Caller frees; NULL when out of memory. */
static inline char *mt_quantize_rows(candle_dtype t, const float *v, int64_t n, int64_t k, size_t *row) {
    *row = candle_dtype_row_size(t, k);
    char *q = malloc(*row * (size_t)(n > 0 ? n : 1));
    for (int64_t r = 0; q && r < n; r++) cpu_dtype(t)->from_f32(v + r * k, q + (size_t)r * *row, k);
    return q;
}

static inline bool mt_same_shape(const candle_tensor *t, int rank, const int64_t *shape) {
    if (!t || t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

/* Row-major element strides of a shape. */
static inline void mt_strides(int rank, const int64_t *shape, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i];
    }
}

/* A context on the CPU backend; eager ones compute each op as it is built.
 * n_threads 0: the default count. Exits the test when it cannot be made. */
static inline candle_ctx *mt_ctx_threads(bool eager, int n_threads) {
    candle_ctx *ctx = NULL;
    candle_ctx_params p = candle_ctx_default_params();
    p.eager = eager;
    if (n_threads > 0) p.n_threads = n_threads;
    if (candle_ctx_init(&ctx, &p) != CANDLE_OK) {
        fprintf(stderr, "ctx_init failed: %s\n", candle_last_errmsg());
        exit(1);
    }
    return ctx;
}

static inline candle_ctx *mt_ctx(bool eager) { return mt_ctx_threads(eager, 0); }

/* The CPU backends run reference kernels only where their settings say (the
 * reference-kernel pass of mt_run_passes, or CANDLE_CPU_REF=1 in a test's
 * environment, which sets the defaults: tests/env_init.c); otherwise fast
 * kernels take the nodes they match. */
static inline bool mt_ref_mode(void) { return candle_cpu_get_defaults().reference_only; }

/* The settings of the CPU backend a context made now gets (what a pass's
 * contexts run with); false if it is not a CPU backend. */
static inline bool mt_ctx_cpu_params(candle_cpu_params *out) {
    candle_ctx *ctx = mt_ctx(true);
    bool ok = candle_backend_cpu_params(candle_ctx_backend(ctx), out);
    candle_ctx_free(ctx);
    return ok;
}

/* A test's checks, run once per pass. It makes every context (so every
 * backend) it uses itself and keeps none across calls: backends keep the
 * settings they were made with, and kernels called directly follow the
 * calling thread's, which outside a compute are the defaults. */
typedef void (*mt_pass_fn)(void);

/* The reference kernels are the ground truth the fast ones are tested
 * against: body runs on the CPU defaults (summary "name"), then again with
 * reference kernels only (candle_cpu_set_defaults with reference_only; summary
 * "name (reference kernels)"), each pass with its own counts; the defaults
 * are restored after. Where the defaults already ask for reference kernels
 * only (CANDLE_CPU_REF=1 in the environment, a CI phase) that pass alone
 * runs. Returns main's exit status: a failure in either pass fails it. */
static inline int mt_run_passes(mt_pass_fn body, const char *name) {
    char label[160];
    snprintf(label, sizeof label, "%s (reference kernels)", name);
    const candle_cpu_params saved = candle_cpu_get_defaults();
    if (saved.reference_only) {
        body();
        return test_done(label);
    }
    body();
    int rc = test_done(name);
    fflush(NULL); /* the first pass's lines before the second's */
    test_counts_reset();
    candle_cpu_params p = saved;
    p.reference_only = true;
    if (candle_cpu_set_defaults(&p) != CANDLE_OK) {
        fprintf(stderr, "%s: reference kernels only refused: %s\n", name, candle_last_errmsg());
        return 1;
    }
    candle_cpu_params bp = {0};
    CHECK_MSG(mt_ref_mode() && mt_ctx_cpu_params(&bp) && bp.reference_only,
              "%s: the reference-kernel pass's backends are not on reference kernels only", name);
    body();
    rc = test_combine(rc, test_done(label));
    if (candle_cpu_set_defaults(&saved) != CANDLE_OK) {
        fprintf(stderr, "%s: the CPU defaults not restored: %s\n", name, candle_last_errmsg());
        rc = 1;
    }
    return rc;
}

/* The call failed with this status and a message containing sub; clears the
 * context's error for the next case. */
#define MT_CHECK_ERR(ctx, result, status, sub)                                         \
    do {                                                                               \
        candle_ctx_clear_error(ctx);                                                   \
        const candle_tensor *r_ = (result);                                            \
        CHECK_MSG(r_ == NULL, "expected failure: %s", #result);                        \
        CHECK_MSG(candle_errcode(ctx) == (status), "status %s, want %s (%s)",          \
                  candle_status_name(candle_errcode(ctx)), candle_status_name(status), \
                  candle_errmsg(ctx));                                                 \
        CHECK_CONTAINS(candle_errmsg(ctx), sub);                                       \
        candle_ctx_clear_error(ctx);                                                   \
    } while (0)

#endif
