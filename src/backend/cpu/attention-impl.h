/* Tile primitives of the blocked flash attention kernel (fast_attention.c),
 * one table per instruction set: portable C (attention_scalar.c), AVX2 +
 * FMA (x86/attention_avx2.c), AVX-512 (x86/attention_avx512.c: the
 * products and the softmax step on zmm, the same bits as the AVX2 table)
 * and NEON on aarch64 (arm/attention_neon.c), chosen with the cpu_simd
 * table (cpu_attn_ops_get). */
#ifndef CANDLE_CPU_ATTENTION_IMPL_H
#define CANDLE_CPU_ATTENTION_IMPL_H

#include "cpu-impl.h"

/* Keys per panel of the transposed key tile. */
#define ATTN_NR 16
/* Rows of the products' register tiles: the kernel walks a block's rows in
 * groups of this many, each group taking a key tile from scores to output. */
#define ATTN_MR 6

typedef struct cpu_attn_ops {
    const char *name;
    /* Transposed key tile in panels of ATTN_NR keys:
     * kt[(j / NR) * d * NR + p * NR + j % NR] = k(j, p) for j < nk, p < d,
     * and zero for nk <= j < round_up(nk, NR). Keys are rows of t (f32, f16,
     * bf16), sk bytes apart, their d elements contiguous. */
    void (*pack_kt)(candle_dtype t, const char *k, int64_t sk, int64_t nk, int64_t d, float *kt);
    /* s[i * lds + j] = dot(q row i, key j) for i < r and j < round_up(nk, NR):
     * q rows are f32, lda floats apart; kt as pack_kt wrote it. */
    void (*scores)(const float *q, int64_t lda, int64_t r, int64_t d, const float *kt, int64_t nk,
                   float *s, int64_t lds);
    /* The same scores for a few rows (decoding), straight from the key rows
     * (t, sk as for pack_kt) with no transposed copy; j < nk only. */
    void (*scores_rows)(const float *q, int64_t lda, int64_t r, int64_t d, candle_dtype t, const char *k,
                        int64_t sk, int64_t nk, float *s, int64_t lds);
    /* Online-softmax update of the output rows:
     * o[i] = o[i] * corr[i] + sum_{j < nk} p[i * ldp + j] * v(j) for i < r,
     * v rows f32 ldv floats apart (dv elements, read no further), o rows ldo
     * floats apart with ldo >= round_up(dv, NR) (the padding is scratch). */
    void (*accum)(const float *p, int64_t ldp, int64_t r, const float *corr, const float *v,
                  int64_t ldv, int64_t nk, int64_t dv, float *o, int64_t ldo);
    /* accum with the value rows as they are stored (t f32, f16 or bf16, sv
     * bytes apart, dv elements each): the same result as accum on the rows
     * converted to f32, bit for bit, without the copy. Optional (NULL: the
     * caller converts the rows and calls accum). */
    void (*accum_rows)(const float *p, int64_t ldp, int64_t r, const float *corr, candle_dtype t,
                       const char *v, int64_t sv, int64_t nk, int64_t dv, float *o, int64_t ldo);
    /* scores_rows and accum_rows also read q8_0 rows (d, dv multiples of
     * 32), dequantized in registers: the same bits as on the rows
     * converted to f32 (the products are exact), with half the bytes of
     * f16 read. */
    bool q8_0_rows;
    /* scores_rows and accum_rows prefetch the rows they read ahead where
     * the CPU's streams take T0 prefetches (not the config's stream_nta),
     * so a decoding block need not touch its tile first. */
    bool prefetches_rows;
    /* The online-softmax step of r rows over nk scores in log2 units (q
     * pre-scaled by log2(e): 2^ is cheaper than exp), s rows lds >=
     * round_up(nk, 8) floats apart, columns [nk, round_up(nk, 8)) scratch:
     * mn = max(m[i], max_j s[i, j]) (NaN scores are passed over); when mn
     * is -inf (the row has seen no key yet) s[i, j < nk] = 0 and corr[i] =
     * l[i] = 0, else s[i, j] = 2^(s[i, j] - mn), corr[i] = 2^(m[i] - mn) (0
     * when m[i] is -inf), l[i] = l[i] * corr[i] + sum_j s[i, j], m[i] = mn. */
    void (*softmax)(float *s, int64_t lds, int64_t r, int64_t nk, float *m, float *l, float *corr);
    float (*max)(const float *x, int64_t n); /* -inf when n == 0 */
    void (*sub)(float *x, int64_t n, float m); /* x[j] -= m */
    float (*sum)(const float *x, int64_t n);
} cpu_attn_ops;

/* nk rows of t, `stride` bytes apart, n elements each, into dst [nk, n] f32:
 * float dtypes by the cpu_simd table's conversion, block types (a quantized
 * KV cache) by their own row conversion, both exact: how the flash and the
 * paged kernels read rows that no primitive reads as they are. */
static inline void attn_rows_f32(const cpu_simd *simd, candle_dtype t, const char *src, int64_t stride, int64_t nk,
                                 int64_t n, float *dst) {
    const candle_dtype_traits *tr = cpu_dtype(t);
    for (int64_t j = 0; j < nk; j++) {
        if (tr->is_quantized) tr->to_f32(src + j * stride, dst + j * n, n);
        else simd->to_f32(t, src + j * stride, dst + j * n, n);
    }
}

/* Every line of a row of `bytes` bytes into L1 (T0), the last one too
 * where the row is not line-aligned: how the paged kernel asks for its
 * scattered rows and the AVX-512 table for the rows ahead. */
static inline void attn_prefetch_row(const char *row, int64_t bytes) {
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(row + o, 0, 3);
    __builtin_prefetch(row + bytes - 1, 0, 3);
}

/* Rows of t that ops' scores_rows and accum_rows read as they are stored:
 * float dtypes, and q8_0 where the table has q8_0_rows; other block types
 * are converted first (attn_rows_f32). */
static inline bool attn_reads_rows(const cpu_attn_ops *ops, candle_dtype t) {
    return !cpu_dtype(t)->is_quantized || (t == CANDLE_DTYPE_Q8_0 && ops->q8_0_rows);
}

extern const cpu_attn_ops cpu_attn_scalar;
#if defined(__x86_64__)
extern const cpu_attn_ops cpu_attn_avx2;
extern const cpu_attn_ops cpu_attn_avx512;
#elif defined(__aarch64__)
extern const cpu_attn_ops cpu_attn_neon; /* arm/attention_neon.c */
#endif

/* The table of the flash attention kernel for the cpu_simd table in use:
 * scalar for "scalar", AVX-512 for "avx512" (AVX-512 F/BW/VL; capped by
 * the avx2 isa setting), else AVX2; on aarch64 NEON for "neon". */
const cpu_attn_ops *cpu_attn_ops_get(void);

#endif
