/* Internal: the dot kernels of the 32-element block types, included by
 * legacy_avx2.c (maddubs + madd) and legacy_avx512.c (VNNI dpbusd, through
 * avx2-impl.h's dot_u8_i8) with QUANT_KERNEL naming the variant. */
#ifndef CANDLE_QUANT_LEGACY_DOTS_IMPL_H
#define CANDLE_QUANT_LEGACY_DOTS_IMPL_H

#include "avx2-impl.h"

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

/* q5_0 values are code - 16: a nibble whose fifth bit is clear becomes
 * nibble - 16 by setting the byte's high four bits, so no subtraction. */
static inline __m256i dot_q5_0(const block_q5_0 *x, const block_q8_0 *y) {
    __m256i clear = _mm256_andnot_si256(bits_to_bytes(load_u32(x->qh)), _mm256_set1_epi8((char)0xF0));
    return dot_i8_i8(_mm256_or_si256(unpack_nibbles(x->qs), clear), load32(y->qs));
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

void QUANT_KERNEL(candle_vec_dot_q4_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q4_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(candle_vec_dot_q4_1_q8_1)(int64_t n, float *out, const void *vx, const void *vy) {
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

void QUANT_KERNEL(candle_vec_dot_q5_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q5_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(candle_vec_dot_q5_1_q8_1)(int64_t n, float *out, const void *vx, const void *vy) {
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

void QUANT_KERNEL(candle_vec_dot_q8_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q8_0
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(candle_vec_dot_iq4_nl_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_iq4_nl
#define MIN_TERM NO_MIN_TERM
    DOT_LOOP(n / QK4_NL);
#undef MIN_TERM
#undef BLOCK_DOT
    *out = sum;
}

#endif
