/* Internal: small AVX2 helpers shared by the x86 kernel files of the CPU
 * backend (simd_avx2.c, attention_avx2.c). Include after immintrin.h in a
 * file compiled with -mavx2 -mfma -mf16c. */
#ifndef CANDLE_CPU_X86_AVX2_UTIL_H
#define CANDLE_CPU_X86_AVX2_UTIL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "candle/dtype.h"
#include "../../../core/elem-impl.h"

/* 2^y for y <= 0 (softmax scores minus their maximum, sigmoid's -|x|),
 * relative error below 2.5e-7. Adding 1.5 * 2^23 + 127 rounds y to the
 * nearest integer n and leaves n + 127 in the sum's low mantissa bits,
 * which shifted into the exponent field give 2^n; f = y - n in [-0.5, 0.5]
 * is exact, and a degree-5 minimax polynomial is within 7.5e-8 of 2^f.
 * y is first clamped to -127, where n + 127 = 0 makes 2^n and so the
 * result exactly 0: -inf (a masked score) gives 0, and results under
 * ~1.2e-38 flush to 0. NaN passes through (max returns its second operand
 * when one is NaN). */
#define EXP2_MAGIC 12583039.0f /* 1.5 * 2^23 + 127 */
/* the polynomial's coefficients, highest degree first (also those of the
 * 16-lane twin in attention_avx512.c, so both give the same bits) */
#define EXP2_P5 1.327646017e-3f
#define EXP2_P4 9.675552891e-3f
#define EXP2_P3 5.550713397e-2f
#define EXP2_P2 2.402211951e-1f
#define EXP2_P1 6.931469669e-1f
#define EXP2_P0 1.000000072f
static inline __m256 exp2_nonpos(__m256 y) {
    const __m256 magic = _mm256_set1_ps(EXP2_MAGIC);
    y = _mm256_max_ps(_mm256_set1_ps(-127.0f), y);
    __m256 t = _mm256_add_ps(y, magic);
    __m256 f = _mm256_sub_ps(y, _mm256_sub_ps(t, magic));
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EXP2_P5), f, _mm256_set1_ps(EXP2_P4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_P3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_P2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_P1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_P0));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define LOAD_F32(p) _mm256_loadu_ps((const float *)(p))
#define LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LOAD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))

/* Eight f32/f16/bf16 values at p as f32. */
static inline __m256 load8(candle_dtype t, const char *p) {
    if (t == CANDLE_DTYPE_F32) return LOAD_F32(p);
    return t == CANDLE_DTYPE_F16 ? LOAD_F16(p) : LOAD_BF16(p);
}

static inline void transpose8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Lane i of the result = op over the eight lanes of x[i]: a transpose and
 * reduction of eight rows' partial vectors in 3 x 4 steps (op max or add). */
#define REDUCE8(op, x, out)                                                                                  \
    do {                                                                                                     \
        __m256 a0_ = op(_mm256_unpacklo_ps(x[0], x[1]), _mm256_unpackhi_ps(x[0], x[1]));                     \
        __m256 a1_ = op(_mm256_unpacklo_ps(x[2], x[3]), _mm256_unpackhi_ps(x[2], x[3]));                     \
        __m256 a2_ = op(_mm256_unpacklo_ps(x[4], x[5]), _mm256_unpackhi_ps(x[4], x[5]));                     \
        __m256 a3_ = op(_mm256_unpacklo_ps(x[6], x[7]), _mm256_unpackhi_ps(x[6], x[7]));                     \
        __m256 b0_ = op(_mm256_shuffle_ps(a0_, a1_, 0x44), _mm256_shuffle_ps(a0_, a1_, 0xEE));               \
        __m256 b1_ = op(_mm256_shuffle_ps(a2_, a3_, 0x44), _mm256_shuffle_ps(a2_, a3_, 0xEE));               \
        out = op(_mm256_permute2f128_ps(b0_, b1_, 0x20), _mm256_permute2f128_ps(b0_, b1_, 0x31));            \
    } while (0)

/* The sums of four 8-lane vectors, [sum y0, sum y1, sum y2, sum y3]: the
 * decoding scores' reduction (attention_avx2.c and attention_avx512.c, the
 * same operations in both, so the same bits). */
static inline __m128 sum4x8(__m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(y0, y1), _mm256_hadd_ps(y2, y3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* n <= 4 floats of v to p. */
static inline void store4_n(float *p, __m128 v, int n) {
    if (n == 4) {
        _mm_storeu_ps(p, v);
        return;
    }
    float t[4];
    _mm_storeu_ps(t, v);
    memcpy(p, t, sizeof(float) * (size_t)n);
}

/* The next group's weight rows, prefetched a share at a time over a k loop
 * of nblk blocks (wt_prefetch_share before each block): rows rows of bytes,
 * stride apart, plus a line past each row's end. */
typedef struct {
    const char *p;
    int64_t stride, bytes, off, per;
    int rows;
} wt_prefetch;

static inline wt_prefetch wt_prefetch_plan(const char *p, int64_t stride, int rows, int64_t bytes,
                                           int64_t nblk) {
    int64_t lines = rows * ((bytes + 63) / 64 + 1);
    return (wt_prefetch){p, stride, bytes, 0, nblk > 0 ? (lines + nblk - 1) / nblk : 0, rows};
}

static inline void wt_prefetch_share(wt_prefetch *s) {
    for (int64_t i = 0; i < s->per && s->rows > 0; i++) {
        _mm_prefetch(s->p + s->off, _MM_HINT_T0);
        s->off += 64;
        if (s->off >= s->bytes + 64) s->off = 0, s->p += s->stride, s->rows--;
    }
}

#endif
