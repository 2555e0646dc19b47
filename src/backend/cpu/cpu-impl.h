/* CPU backend internals: kernel signature, the kernel table, strided
 * iteration helpers shared by the reference kernels. */
#ifndef CANDLE_CPU_IMPL_H
#define CANDLE_CPU_IMPL_H

#include <stdio.h>

#include "../../core/core-impl.h"
#include "../../core/elem-impl.h"
#include "cpu-config.h"

/* One kernel invocation. Reference kernels run with ith = 0, nth = 1; fast
 * kernels split their work by ith/nth across the thread pool. */
typedef struct cpu_task {
    int ith, nth;
    char *errmsg; /* kernels write a message here and return a status */
    size_t errmsg_len;
    /* Fast kernels only: ith/nth number the tasks of a phase, which threads
     * claim in any order; tid is the running thread (< n_threads), for
     * per-thread parts of the scratch the plan asked for; phase counts the
     * plan's phases (all tasks of one finish before the next starts). */
    int tid, n_threads, phase;
    void *wdata;
    size_t wsize;
} cpu_task;

typedef candle_status (*cpu_kernel_fn)(const cpu_task *task, candle_tensor *dst);

/* Record a kernel error on the task. */
candle_status cpu_error(const cpu_task *task, candle_status s, const char *fmt, ...)
    CANDLE_PRINTF(3, 4);

/* ---- reference kernels (ref/), one per op family ---- */
candle_status cpu_ref_copy(const cpu_task *t, candle_tensor *dst);        /* COPY */
candle_status cpu_ref_unary(const cpu_task *t, candle_tensor *dst);       /* NEG..CLAMP */
candle_status cpu_ref_binary(const cpu_task *t, candle_tensor *dst);      /* ADD..GE */
candle_status cpu_ref_where(const cpu_task *t, candle_tensor *dst);       /* WHERE */
candle_status cpu_ref_reduce(const cpu_task *t, candle_tensor *dst);      /* SUM..ARGMAX */
candle_status cpu_ref_topk_mask(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_softmax(const cpu_task *t, candle_tensor *dst);     /* (LOG_)SOFTMAX */
candle_status cpu_ref_matmul(const cpu_task *t, candle_tensor *dst);      /* MATMUL */
/* Rows [r0, r1) of a MATMUL node's f32 output (contiguous, rows of N) plus
 * its bias (src[2], f32 [N]), an f32 add: the reference kernel's last step
 * (after a fast kernel that does not add it, the backend runs an ADD). */
void cpu_matmul_bias_rows(candle_tensor *dst, int64_t r0, int64_t r1);
/* A MATMUL whose activations stay float (CDL_MM_FLOAT_ACT, iparams[0]): no
 * integer kernel takes it, a quantized weight is dequantized. */
static inline bool cpu_mm_float_act(const candle_tensor *dst) {
    return dst->op == CANDLE_OP_MATMUL && (dst->iparams[0] & CDL_MM_FLOAT_ACT) != 0;
}
/* A MATMUL whose rows must each keep their one-row bits (CDL_MM_ROW_STEPS). */
static inline bool cpu_mm_row_steps(const candle_tensor *dst) {
    return dst->op == CANDLE_OP_MATMUL && (dst->iparams[0] & CDL_MM_ROW_STEPS) != 0;
}
candle_status cpu_ref_moe_ffn(const cpu_task *t, candle_tensor *dst);     /* MOE_FFN */
candle_status cpu_ref_matmul_group_corr(const cpu_task *t, candle_tensor *dst); /* MATMUL_GROUP_CORR */
candle_status cpu_ref_rms_norm(const cpu_task *t, candle_tensor *dst);    /* RMS_NORM */
candle_status cpu_ref_layer_norm(const cpu_task *t, candle_tensor *dst);  /* LAYER_NORM */
candle_status cpu_ref_rope(const cpu_task *t, candle_tensor *dst);        /* ROPE */
/* RoPE pair i of node dst: frequency w (with its freq factor) and position
 * multiplier sc (freq_scale, YaRN-blended): its angle at p is (p * sc) * w.
 * Shared by the reference and fast kernels so both turn by the same angle. */
void cpu_rope_pair(const candle_tensor *dst, int64_t i, double *w, double *sc);
candle_status cpu_ref_index_select(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_gather(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_concat(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_arange(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_fill(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_rand(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_conv1d(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_conv2d(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_attention(const cpu_task *t, candle_tensor *dst);
candle_status cpu_ref_paged_attention(const cpu_task *t, candle_tensor *dst);

/* ---- run-time dispatch (cpu_features.c, cpu_dispatch.c) ---- */

typedef struct cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    bool neon, dotprod, fp16; /* aarch64 (AT_HWCAP: ASIMD, ASIMDDP, FPHP + ASIMDHP) */
    bool amd;                 /* x86-64: an AMD (or Hygon) CPU, by the cpuid vendor */
    int n_physical; /* physical cores this process may use */
} cpu_features;

const cpu_features *cpu_get_features(void);

/* Vector primitives the fast kernels are built from, one table per ISA. The
 * scalar table is complete and portable; SIMD tables implement the same
 * contracts and are tested against it and against the reference kernels. */
#define CPU_GEMM_MR 6
#define CPU_GEMM_NR 16
#define CPU_DOT_MR 4 /* gemm_dot tile */
#define CPU_DOT_NR 3

typedef struct cpu_simd {
    const char *name; /* "avx2", "scalar" */
    /* C[mr, nr] (+)= A [k, MR] (packed) x B [k, NR] (packed); ldc in floats. */
    void (*gemm_ukr)(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                     int nr, bool accumulate);
    /* Optional (NULL: gemm_ukr tiles only): the same product on a tile of up
     * to 2 MR x 2 NR, from two consecutive A panels (a, a + k * MR) and two
     * consecutive B panels (b, b + k * NR); the second of each is read only
     * when mr > MR (nr > NR). */
    void (*gemm_ukr2)(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                      int nr, bool accumulate);
    /* Optional (NULL: a portable loop, one panel a call): the weight-row
     * GEMM tile (wt path): C[i, j] (+)= dot(activation row i, weight row j)
     * over kc, i < nm <= 16 * wt_panels from consecutive panels [kc][16] at
     * `at`, j < nw <= 6 from f32 weight rows ldw floats apart. */
    void (*wt_ukr)(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                   int64_t ldc, bool accumulate);
    int wt_panels;
    /* Optional (NULL: the wt path writes C through wt_ukr): wt_ukr's
     * product written transposed, ct[j * ldt + i] (whole-vector stores into
     * a task's scratch, which wt_ct_out writes to C[i * ldc + j], i < rows,
     * j < cols, adding bias[j] unless bias is NULL), issuing the next group's weight-row prefetches itself:
     * pf_rows rows of pf_bytes, pf_stride apart, spread over its k loop. */
    void (*wt_ukr_t)(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *ct,
                     int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                     int64_t pf_bytes);
    void (*wt_ct_out)(const float *ct, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                      const float *bias);
    /* Optional (NULL: none), with wt_ukr_t: the wt tile in k pairs, np <= 4
     * panels of 8 activation rows (pack_ap8: rows <= 16 as two such
     * panels, dst[h * 8 * kcp + t * 16 + 2i + s] = a(8h + i, 2t + s), kcp:
     * kc rounded up to even), C transposed as wt_ukr_t. */
    void (*wt_ukr_p)(int64_t kc, const float *w, int64_t ldw, int nw, const float *ap, int np, float *ct,
                     int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                     int64_t pf_bytes);
    void (*pack_ap8)(const float *a, int64_t lda, int rows, int64_t kc, float *dst);
    /* Optional (NULL: to_f32): f16 (f16 true) or bf16 weight rows to f32
     * for the wt tiles. */
    void (*wt_half_to_f32)(bool f16, const void *src, float *dst, int64_t n);
    /* Optional (NULL: none; AVX512_BF16): the wt tile for a bf16 weight read
     * in place, against activations rounded to bf16 and packed in k pairs
     * by pack_at16_bf16 (dst[t * 16 + i] = a[i, 2t] | a[i, 2t + 1] << 16;
     * tmp: 4096 floats of scratch); panels 16 * kc uint32 apart. */
    void (*wt_bf16_ukr)(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                        float *c, int64_t ldc, bool accumulate);
    void (*pack_at16_bf16)(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp);
    /* Optional (NULL: none; with wt_bf16_ukr): wt_bf16_ukr writing C
     * transposed (as wt_ukr_t), and in k quads on 8-row panels (as wt_ukr_p;
     * pack_ap8_bf16: lane 2i + s of a panel holds row i's bf16 pair 2u + s). */
    void (*wt_bf16_ukr_t)(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                          float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                          int pf_rows, int64_t pf_bytes);
    void (*wt_bf16_ukr_p)(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *ap, int np,
                          float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                          int pf_rows, int64_t pf_bytes);
    void (*pack_ap8_bf16)(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp);
    /* Optional (NULL: none; AVX512_BF16, with gemm_ukr2): bf16 B in the
     * packed GEMM as bf16 k pairs in 32-bit words, same panel offsets as
     * f32: A panels [t][MR] of bf16-rounded a (pack_a6_bf16: `rows` rows of
     * a(i, p) at a + i * sam + p * sak, dtype at), B panels [t][NR] of b's
     * own values (pack_b16_bf16: pack_b's contract for bf16), t < (kc + 1)
     * / 2; gemm_bf16_ukr2: gemm_ukr2 on them. */
    void (*gemm_bf16_ukr2)(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                           bool accumulate);
    void (*pack_a6_bf16)(candle_dtype at, const char *a, int64_t sam, int64_t sak, int rows, int64_t kc,
                         float *dst);
    void (*pack_b16_bf16)(const char *src, int64_t sk, int64_t sn, int64_t kc, int nr, float *dst);
    /* Optional (with gemm_bf16_ukr2): a B panel of f32 rows rounded to bf16
     * pairs, dst[t * NR + j] = bf16(b(2t, j)) | bf16(b(2t + 1, j)) << 16
     * with b(p, j) = src[p * sk + j] for j < nr <= NR (zero past nr and
     * past kc): how the flash kernel packs a value tile (keys as k). */
    void (*pack_b16_f32_bf16)(const float *src, int64_t sk, int64_t kc, int nr, uint32_t *dst);
    /* Optional (with wt_bf16_ukr): dst[i] = bf16(src[i]) for i < n, rounded
     * as the bf16 panels round (vcvtneps2bf16: nearest even, denormals
     * flushed): a quantized weight's rows dequantized for the bf16 tile. */
    void (*f32_to_bf16)(const float *src, uint16_t *dst, int64_t n);
    /* Optional (with f32_to_bf16): q8_0 blocks of n elements (n a multiple
     * of 32) straight to bf16, f32_to_bf16's bits on the f32 values. */
    void (*q8_0_to_bf16)(const void *blocks, uint16_t *dst, int64_t n);
    /* out[r * out_stride] = dot(row r of w, x), w rows of wt (f32/f16/bf16)
     * k elements long and w_stride bytes apart. */
    void (*dot_rows)(candle_dtype wt, int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                     const float *x, float *out, int64_t out_stride);
    /* Small-M GEMM on unpacked rows, for a weight seen through a transpose:
     * C[i, j] (+)= dot(a row i, w row j) over k, i < mr <= 4, j < nr <= 3;
     * a: f32 rows lda floats apart; w: rows of wt (f32/f16/bf16) ldw bytes
     * apart; ldc in floats. */
    void (*gemm_dot)(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw,
                     candle_dtype wt, float *c, int64_t ldc, int mr, int nr, bool accumulate);
    /* Optional (NULL: a portable loop): the packed GEMM's A panel of
     * CPU_GEMM_MR full f32 rows lda floats apart, kc deep (pack_a's layout). */
    void (*pack_a6)(const float *a, int64_t lda, int64_t kc, float *dst);
    /* Optional (NULL: a portable loop): the wt path's A panel, rows <= 16
     * f32 rows lda floats apart as dst[p * 16 + i] (zero past rows). */
    void (*pack_at16)(const float *a, int64_t lda, int rows, int64_t kc, float *dst);
    /* Plain float row to f32 (wt f32/f16/bf16, contiguous). */
    void (*to_f32)(candle_dtype wt, const void *src, float *dst, int64_t n);
    /* B panel for the GEMM: dst[p * NR + j] = b(k0 + p, n0 + j) for p < kc,
     * j < nr (zero beyond nr), where b(k, n) is at src + k * sk + n * sn. */
    void (*pack_b)(candle_dtype bt, const char *src, int64_t sk, int64_t sn, int64_t kc, int nr,
                   float *dst);
    /* Contiguous f32 rows. p: the node's fparams. */
    void (*unary)(candle_op op, const float *x, float *y, int64_t n, const double *p);
    /* y = a op b with b's element stride 0 (broadcast scalar) or 1. */
    void (*binary)(candle_op op, const float *a, const float *b, int64_t b_step, float *y,
                   int64_t n);
    void (*softmax)(const float *x, float *y, int64_t n, bool log);
    void (*rms_norm)(const float *x, const float *w, float *y, int64_t n, float eps);
    /* y = (v - mean) / sqrt(var + eps) * w + b over v = x (+ r where r is not
     * NULL, the f32 sum; it goes through y, which may be x or r itself but
     * not overlap them otherwise); w, b NULL: 1, 0. Mean and variance in
     * double, as the reference kernel, so the two agree to f32 rounding; the
     * per-element pass is f32. */
    void (*layer_norm)(const float *x, const float *r, const float *w, const float *b, float *y, int64_t n,
                       double eps);
    /* Flash attention pieces: s[j] = dot(q, k row j) for j < n. */
    float (*dot)(const float *a, const float *b, int64_t n);
    /* y = y * s + w * v (online softmax rescale and accumulate). */
    void (*scale_axpy)(float *y, float s, float w, const float *v, int64_t n);
    /* x[j] = exp(x[j] - m) for j < n, returning their sum (the blocked flash
     * attention's online softmax, with the same exp as unary). */
    float (*exp_sum)(float *x, int64_t n, float m);
} cpu_simd;

extern const cpu_simd cpu_simd_scalar;
#if defined(__x86_64__)
extern const cpu_simd cpu_simd_avx2;
#endif
#if defined(__aarch64__)
const cpu_simd *cpu_simd_neon_table(void); /* arm/simd_neon.c */
#endif

/* The primitive table of isa (AUTO: the widest this CPU runs), bf16_exact
 * leaving out the AVX512_BF16 tiles; NULL where the CPU lacks it. */
const cpu_simd *cpu_simd_table(candle_cpu_isa isa, bool bf16_exact);
/* The running thread's table (its backend's, cpu-config.h). */
static inline const cpu_simd *cpu_simd_get(void) { return cpu_config_get()->simd; }
/* Tests: the defaults' ISA becomes `name`'s ("auto" too) for backends made
 * from now on and for kernels called outside a backend; false if unknown or
 * unsupported (nothing changed). */
bool cpu_simd_force(const char *name);

/* A fast kernel: used when match() holds, else the op's reference kernel. */
typedef struct cpu_plan {
    int nth;        /* tasks per phase (1: the calling thread alone) */
    int n_phases;   /* 1 unless set */
    size_t wsize;   /* scratch bytes, all threads together */
    int nth0;       /* tasks of phase 0 when > 0 (1: run inline, no wake-up) */
    bool bias_done; /* a MATMUL's bias (src[2]) added by the kernel as it writes C */
} cpu_plan;

typedef struct cpu_fast_kernel {
    const char *name;
    bool (*match)(const candle_tensor *dst);
    void (*plan)(const candle_tensor *dst, int n_threads, cpu_plan *plan);
    candle_status (*run)(const cpu_task *task, candle_tensor *dst);
} cpu_fast_kernel;

extern const cpu_fast_kernel cpu_fast_matmul;
extern const cpu_fast_kernel cpu_fast_paged_attention;
extern const cpu_fast_kernel cpu_fast_matmul_quant;
extern const cpu_fast_kernel cpu_fast_unary;
extern const cpu_fast_kernel cpu_fast_binary;
extern const cpu_fast_kernel cpu_fast_softmax;
extern const cpu_fast_kernel cpu_fast_rms_norm;
extern const cpu_fast_kernel cpu_fast_layer_norm;
extern const cpu_fast_kernel cpu_fast_rope;
extern const cpu_fast_kernel cpu_fast_attention;
extern const cpu_fast_kernel cpu_fast_index_select;

/* Benchmark probes (cpu_probe.c): `iters` rounds of independent FMA chains,
 * returning the flops done; and a vector read of n floats (the sum keeps the
 * loads from being optimised away). */
double cpu_probe_fma(int64_t iters);
float cpu_probe_read(const float *p, size_t n);

/* Tasks for `work` units: 1 below min_work (waking workers would cost more
 * than the work), else tasks_per_thread * n_threads. */
int cpu_tasks_for(double work, double min_work, int n_threads, int tasks_per_thread);
/* Tests: use every thread even for tiny ops, so splits are exercised. */
void cpu_set_always_parallel(bool on);

/* The fast kernel compute_node would use for dst, or NULL (tests, info). */
const cpu_fast_kernel *cpu_fast_kernel_for(const candle_tensor *dst);

/* A unary node u fused into its reader b (fast_ops.c): whether the fast
 * unary and binary kernels would run them (then the fused run gives their
 * bits), the tasks for b, and task t's share: b computed from u's input,
 * u never stored. */
bool cpu_fused_ok(const candle_tensor *u, const candle_tensor *b);
int cpu_fused_tasks(const candle_tensor *u, const candle_tensor *b, int n_threads);
candle_status cpu_fused_run(const cpu_task *t, const candle_tensor *u, candle_tensor *b);

/* Split [0, n) into nth nearly equal parts, each a multiple of `align`
 * (except the last): part ith is [*lo, *hi). */
static inline void cpu_split(int64_t n, int64_t align, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t units = (n + align - 1) / align;
    int64_t per = units / nth, extra = units % nth;
    int64_t u0 = ith * per + (ith < extra ? ith : extra);
    int64_t u1 = u0 + per + (ith < extra ? 1 : 0);
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

/* ---- strided iteration ---- */

/* Advance a row-major multi-index over shape; false after the last one. */
static inline bool nd_next(int rank, const int64_t *shape, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Byte offset of a multi-index (plain dtypes). */
static inline int64_t nd_offset(int rank, const int64_t *idx, const int64_t *stride) {
    int64_t o = 0;
    for (int d = 0; d < rank; d++) o += idx[d] * stride[d];
    return o;
}

static inline char *tensor_ptr(const candle_tensor *t) { return (char *)candle_tensor_data(t); }

#endif
