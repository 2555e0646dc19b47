/* AVX2 kernels of the 32-element block types: activation quantizers (q8_0,
 * q8_1; bit-identical to the scalar ones) and dot products. */
#include "avx2-common.h"

/* roundf (half away from zero): add the largest float below one half with
 * v's sign, then truncate. Checked against roundf for every float below 2^23
 * in magnitude (codes here are at most 127). */
static inline __m256 round_away(__m256 v) {
    __m256 half = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(0.49999997f));
    return _mm256_round_ps(_mm256_add_ps(v, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

/* 4 x 8 int32 (each in -128..127) -> 32 int8 in element order. */
static inline __m256i pack_i32x4(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element q8 block: returns the float scale and writes the codes;
 * with sum, also their sum (for q8_1). */
static inline float quantize_q8_32(const float *x, int8_t *qs, int *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float d = _mm_cvtss_f32(h) / 127;
    __m256 vid = _mm256_set1_ps(d != 0 ? 1.0f / d : 0.0f);
    __m256i q0 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v0, vid)));
    __m256i q1 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v1, vid)));
    __m256i q2 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v2, vid)));
    __m256i q3 = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v3, vid)));
    if (sum) *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    _mm256_storeu_si256((__m256i *)qs, pack_i32x4(q0, q1, q2, q3));
    return d;
}

void candle_q8_0_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0)
        b[i].d = _cvtss_sh(quantize_q8_32(src, b[i].qs, NULL), _MM_FROUND_TO_NEAREST_INT);
}

void candle_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n) {
    block_q8_1 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK8_1; i++, src += QK8_1) {
        float d = quantize_q8_32(src, b[i].qs, &sum);
        b[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        b[i].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* Per-block integer dots (8 int32 partial sums). */
static inline __m256i dot_q4_0(const block_q4_0 *x, const block_q8_0 *y) {
    return dot_i8_i8(_mm256_sub_epi8(unpack_nibbles(x->qs), _mm256_set1_epi8(8)), load32(y->qs));
}
static inline __m256i dot_q4_1(const block_q4_1 *x, const block_q8_1 *y) {
    return dot_u8_i8(unpack_nibbles(x->qs), load32(y->qs));
}

static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4); /* little-endian, as x86 */
    return v;
}

/* Five-bit codes 0..31 of a q5 block. */
static inline __m256i unpack_q5(const uint8_t *qs, const uint8_t *qh) {
    __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(qs), hi);
}

static inline __m256i dot_q5_0(const block_q5_0 *x, const block_q8_0 *y) {
    return dot_i8_i8(_mm256_sub_epi8(unpack_q5(x->qs, x->qh), _mm256_set1_epi8(16)), load32(y->qs));
}
static inline __m256i dot_q5_1(const block_q5_1 *x, const block_q8_1 *y) {
    return dot_u8_i8(unpack_q5(x->qs, x->qh), load32(y->qs));
}
static inline __m256i dot_q8_0(const block_q8_0 *x, const block_q8_0 *y) {
    return dot_i8_i8(load32(x->qs), load32(y->qs));
}
static inline __m256i dot_iq4_nl(const block_iq4_nl *x, const block_q8_0 *y) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)candle_iq4nl_values));
    return dot_i8_i8(_mm256_shuffle_epi8(table, unpack_nibbles(x->qs)), load32(y->qs));
}

#define BLOCK_SCALE(i) _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d))
#define BLOCK_SUM(i) _mm256_cvtepi32_ps(BLOCK_DOT(&x[i], &y[i]))

/* Two blocks per step into two accumulators, to overlap the fma latencies. */
#define DOT_LOOP(nb)                                                                    \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                     \
    int64_t i = 0;                                                                      \
    for (; i + 1 < (nb); i += 2) {                                                      \
        acc0 = _mm256_fmadd_ps(BLOCK_SCALE(i), BLOCK_SUM(i), acc0);                     \
        acc1 = _mm256_fmadd_ps(BLOCK_SCALE(i + 1), BLOCK_SUM(i + 1), acc1);             \
        MIN_TERM(i);                                                                    \
        MIN_TERM(i + 1);                                                                \
    }                                                                                   \
    if (i < (nb)) {                                                                     \
        acc0 = _mm256_fmadd_ps(BLOCK_SCALE(i), BLOCK_SUM(i), acc0);                     \
        MIN_TERM(i);                                                                    \
    }                                                                                   \
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1))

/* The minimum's term of the q*_1 types: m * s per block, in the same loop. */
#define NO_MIN_TERM(i) (void)0
#define Q1_MIN_TERM(i) sum_m += h2f(x[i].m) * h2f(y[i].s)

void candle_vec_dot_q4_0_q8_0_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q4_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void candle_vec_dot_q4_1_q8_1_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum_m = 0;
#define BLOCK_DOT dot_q4_1
#define MIN_TERM Q1_MIN_TERM
    DOT_LOOP(n / QK8_1);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum + sum_m;
}

void candle_vec_dot_q5_0_q8_0_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q5_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void candle_vec_dot_q5_1_q8_1_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum_m = 0;
#define BLOCK_DOT dot_q5_1
#define MIN_TERM Q1_MIN_TERM
    DOT_LOOP(n / QK8_1);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum + sum_m;
}

void candle_vec_dot_q8_0_q8_0_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q8_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void candle_vec_dot_iq4_nl_q8_0_avx2(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_iq4_nl
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK4_NL);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}
