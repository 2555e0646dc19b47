/* Internal: the dot kernels of the 32-element block types, included by
 * legacy_avx2.c (maddubs + madd) and legacy_avx512.c (VNNI dpbusd, through
 * avx2-impl.h's dot_u8_i8) with QUANT_KERNEL naming the variant. */
#ifndef CANDLE_QUANT_LEGACY_DOTS_IMPL_H
#define CANDLE_QUANT_LEGACY_DOTS_IMPL_H

#include "avx2-impl.h"

/* Per-block integer dots (8 int32 partial sums). */
/* unpack_nibbles with one ALU op fewer: the broadcast is a load, and one
 * variable shift moves the high lane's nibbles down. */
static inline __m256i unpack_nibbles_bc(const uint8_t *qs) {
    __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    b = _mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

#ifdef CANDLE_QUANT_VNNI
static inline __m256i dot_q4_0(const block_q4_0 *x, const block_q8_0 *y) {
    return dot_i8_i8(_mm256_sub_epi8(unpack_nibbles_bc(x->qs), _mm256_set1_epi8(8)), load32(y->qs));
}
#else
/* (c - 8) . y as c . y - 8 . y in 16-bit pair sums (each below 2^12 in
 * magnitude): two maddubs and a subtraction instead of the subtraction
 * and two signs of dot_i8_i8. */
static inline __m256i dot_q4_0(const block_q4_0 *x, const block_q8_0 *y) {
    __m256i q = load32(y->qs);
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles_bc(x->qs), q),
                                 _mm256_maddubs_epi16(_mm256_set1_epi8(8), q));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
#endif
static inline __m256i dot_q4_1(const block_q4_1 *x, const block_q8_1 *y) {
    return dot_u8_i8(unpack_nibbles_bc(x->qs), load32(y->qs));
}

static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4); /* little-endian, as x86 */
    return v;
}

/* Five-bit codes 0..31 of a q5 block. */
static inline __m256i unpack_q5(const uint8_t *qs, const uint8_t *qh) {
    __m256i hi = _mm256_and_si256(bits_to_bytes(load_u32(qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles_bc(qs), hi);
}

/* q5_0 values are code - 16: a nibble whose fifth bit is clear becomes
 * nibble - 16 by setting the byte's high four bits, so no subtraction. */
static inline __m256i dot_q5_0(const block_q5_0 *x, const block_q8_0 *y) {
    __m256i clear = _mm256_andnot_si256(bits_to_bytes(load_u32(x->qh)), _mm256_set1_epi8((char)0xF0));
    return dot_i8_i8(_mm256_or_si256(unpack_nibbles_bc(x->qs), clear), load32(y->qs));
}
static inline __m256i dot_q5_1(const block_q5_1 *x, const block_q8_1 *y) {
    return dot_u8_i8(unpack_q5(x->qs, x->qh), load32(y->qs));
}
static inline __m256i dot_q8_0(const block_q8_0 *x, const block_q8_0 *y) {
    return dot_i8_i8(load32(x->qs), load32(y->qs));
}
static inline __m256i dot_iq4_nl(const block_iq4_nl *x, const block_q8_0 *y) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cdl_iq4nl_values));
    return dot_i8_i8(_mm256_shuffle_epi8(table, unpack_nibbles_bc(x->qs)), load32(y->qs));
}

static inline float hsum_m128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Four f16 fields -> four floats. The halves are gathered with scalar
 * loads, shifts and ors (integer ports, idle in these loops) so that one
 * vcvtph2ps converts them all, instead of one conversion per block. */
static inline __m128 h2f_x4(uint16_t a, uint16_t b, uint16_t c, uint16_t e) {
    uint64_t v = (uint64_t)a | (uint64_t)b << 16 | (uint64_t)c << 32 | (uint64_t)e << 48;
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

#define SCALES_X4(i) \
    _mm_mul_ps(h2f_x4(x[i].d, x[i + 1].d, x[i + 2].d, x[i + 3].d), h2f_x4(y[i].d, y[i + 1].d, y[i + 2].d, y[i + 3].d))
#define SUMS_X4(i) \
    _mm256_cvtepi32_ps(reduce_x4(BLOCK_DOT(&x[i], &y[i]), BLOCK_DOT(&x[i + 1], &y[i + 1]), \
                                 BLOCK_DOT(&x[i + 2], &y[i + 2]), BLOCK_DOT(&x[i + 3], &y[i + 3])))

/* Four blocks a step: one convert and one fma for the four, with their
 * scale products as one vector (the same in both halves). The tail blocks
 * go one at a time. */
#define DOT_LOOP(nb)                                                                    \
    __m256 acc = _mm256_setzero_ps();                                                   \
    __m128 acc_m = _mm_setzero_ps();                                                    \
    int64_t i = 0;                                                                      \
    for (; i + 3 < (nb); i += 4) {                                                      \
        __m128 s4 = SCALES_X4(i);                                                       \
        acc = _mm256_fmadd_ps(_mm256_set_m128(s4, s4), SUMS_X4(i), acc);                \
        MIN_TERM_X4(i);                                                                 \
    }                                                                                   \
    float sum = hsum_ps(acc) + hsum_m128(acc_m);                                        \
    for (; i < (nb); i++) {                                                             \
        sum += h2f(x[i].d) * h2f(y[i].d) * (float)hsum_i32(BLOCK_DOT(&x[i], &y[i]));    \
        MIN_TERM(i);                                                                    \
    }

/* The minimum's term of the q*_1 types: m * s per block. */
#define NO_MIN_TERM(i) (void)0
#define NO_MIN_TERM_X4(i) (void)0
#define Q1_MIN_TERM(i) sum += h2f(x[i].m) * h2f(y[i].s)
#define Q1_MIN_TERM_X4(i) \
    acc_m = _mm_fmadd_ps(h2f_x4(x[i].m, x[i + 1].m, x[i + 2].m, x[i + 3].m), h2f_x4(y[i].s, y[i + 1].s, y[i + 2].s, y[i + 3].s), acc_m)

void QUANT_KERNEL(cdl_vec_dot_q4_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q4_0
#define MIN_TERM NO_MIN_TERM
#define MIN_TERM_X4 NO_MIN_TERM_X4
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(cdl_vec_dot_q4_1_q8_1)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
#define BLOCK_DOT dot_q4_1
#define MIN_TERM Q1_MIN_TERM
#define MIN_TERM_X4 Q1_MIN_TERM_X4
    DOT_LOOP(n / QK8_1);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(cdl_vec_dot_q5_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q5_0
#define MIN_TERM NO_MIN_TERM
#define MIN_TERM_X4 NO_MIN_TERM_X4
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(cdl_vec_dot_q5_1_q8_1)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
#define BLOCK_DOT dot_q5_1
#define MIN_TERM Q1_MIN_TERM
#define MIN_TERM_X4 Q1_MIN_TERM_X4
    DOT_LOOP(n / QK8_1);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(cdl_vec_dot_q8_0_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_q8_0
#define MIN_TERM NO_MIN_TERM
#define MIN_TERM_X4 NO_MIN_TERM_X4
    DOT_LOOP(n / QK8_0);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

void QUANT_KERNEL(cdl_vec_dot_iq4_nl_q8_0)(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
#define BLOCK_DOT dot_iq4_nl
#define MIN_TERM NO_MIN_TERM
#define MIN_TERM_X4 NO_MIN_TERM_X4
    DOT_LOOP(n / QK4_NL);
#undef MIN_TERM
#undef MIN_TERM_X4
#undef BLOCK_DOT
    *out = sum;
}

#endif
