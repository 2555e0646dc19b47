/* Internal: the matrix-vector rows of q4_0, q4_1, q5_0, q5_1, q8_0 and q4_z128
 * (see gemv_avx2.c for the prepared activation and the float steps, which
 * are a contract), included by gemv_avx2.c and gemv_avx512.c
 * (CANDLE_QUANT_VNNI: vpdpbusd integer sums, the same int32 block sums, so
 * results equal the AVX2 rows bit for bit) with QUANT_KERNEL naming the
 * variant. */
#ifndef CANDLE_QUANT_GEMV_ROWS_IMPL_H
#define CANDLE_QUANT_GEMV_ROWS_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "../gemv-impl.h"
#include "avx2-impl.h"

#define GROUP 8
/* Software prefetch distance in bytes of a row stream. */
#ifndef GEMV_PF
#define GEMV_PF 2048
#endif
/* Their kind: candle_stream_prefetch (non-temporal on AMD, T0 elsewhere). */

typedef struct xv_parts {
    int8_t *qs;
    float *d, *s;
} xv_parts;

static xv_parts parts(const void *xv, int64_t nb) {
    int8_t *qs = (int8_t *)xv;
    float *d = (float *)(qs + nb * 32);
    return (xv_parts){qs, d, d + nb};
}

/* The types whose prepared activation pairs the halves of blocks i and
 * i + 4 (q4_z128: sub-block i of two blocks of 128). */
static inline bool nibble_type(candle_dtype t) {
    return t == CANDLE_DTYPE_Q4_0 || t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_0 || t == CANDLE_DTYPE_Q5_1 ||
           t == CANDLE_DTYPE_Q4_Z128;
}

/* Byte offset of the q8_0 codes of block i (< GROUP) in a group of the
 * prepared activation: blocks i and i + 4 side by side at (i % 4) * 64. */
static inline int64_t q8_0_y(int64_t i) { return (i % 4) * 64 + (i / 4) * 32; }

static inline bool k_type(candle_dtype t) {
    return t == CANDLE_DTYPE_Q2_K || t == CANDLE_DTYPE_Q3_K || t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q5_K ||
           t == CANDLE_DTYPE_Q6_K;
}

/* Weight block fields, as byte offsets in a block of `bs` bytes. A group's
 * 32-element code blocks 0..3 are `sub` bytes apart from its start, blocks
 * 4..7 from `pair` bytes on (bs and 4 * bs for the 32-element types;
 * q4_z128: two blocks of four). */
typedef struct wfmt {
    size_t bs, qs, d, m, qh; /* m: the *_1 minimum; qh: the q5 fifth bits */
    bool q5, has_m;
    size_t sub, pair;
} wfmt;

/* Byte offset of code block j (< GROUP) in a group of format f. */
static inline size_t code_block(wfmt f, int j) { return (j < 4 ? 0 : f.pair) + (size_t)(j % 4) * f.sub + f.qs; }

/* Eight f16 fields `stride` bytes apart -> eight floats: the halves are
 * inserted straight from memory (h2f_x8 assembles them in integer
 * registers: more instructions, which bound these kernels in cache). */
static inline __m256 f16x8_ps(const uint8_t *p, size_t stride) {
    uint16_t h[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) memcpy(&h[i], p + i * stride, 2);
    __m128i v = _mm_cvtsi32_si128(h[0]);
    v = _mm_insert_epi16(v, h[1], 1);
    v = _mm_insert_epi16(v, h[2], 2);
    v = _mm_insert_epi16(v, h[3], 3);
    v = _mm_insert_epi16(v, h[4], 4);
    v = _mm_insert_epi16(v, h[5], 5);
    v = _mm_insert_epi16(v, h[6], 6);
    v = _mm_insert_epi16(v, h[7], 7);
    return _mm256_cvtph_ps(v);
}

#ifdef CANDLE_QUANT_VNNI
/* f16x8_ps for a group of 8 blocks from p (the group's first byte,
 * bs * 8 >= 128 bytes, bs <= 36): the field at byte off (bs and off even)
 * of each block by word permutes of the group's bytes: words below 64 from
 * two 64-byte loads by one vpermt2w, the rest by another from masked loads
 * of only the words needed (nothing past the field of block 7 is read).
 * Three to five ops for the eight loads and inserts of f16x8_ps. */
static inline __attribute__((always_inline)) __m256 f16x8_group(const uint8_t *p, size_t bs, size_t off) {
    const int hw = (int)(bs / 2), ho = (int)(off / 2), last = 7 * hw + ho;
    __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   (short)(7 * hw + ho), (short)(6 * hw + ho), (short)(5 * hw + ho),
                                   (short)(4 * hw + ho), (short)(3 * hw + ho), (short)(2 * hw + ho), (short)(hw + ho),
                                   (short)ho);
    __m512i r = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
    if (last >= 64) {
        __mmask32 high = 0; /* lanes whose word is past the first 64 */
        for (int i = 0; i < 8; i++)
            if (i * hw + ho >= 64) high |= 1u << i;
        const int n = last - 63; /* words needed from p + 128 (at most 64) */
        __m512i c = _mm512_maskz_loadu_epi16((__mmask32)(n >= 32 ? ~0u : (1u << n) - 1), p + 128);
        if (n <= 32) return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_mask_permutexvar_epi16(r, high, idx, c)));
        __m512i d = _mm512_maskz_loadu_epi16((__mmask32)(n >= 64 ? ~0u : (1u << (n - 32)) - 1), p + 192);
        /* word idx & 63 = idx - 64 (idx & 31 above) */
        r = _mm512_mask_blend_epi16(high, r, _mm512_permutex2var_epi16(c, idx, d));
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(r));
}
#endif

/* Shuffle controls spreading qh bytes over the codes of pair j: in both
 * lanes (block j low, j + 4 high) the dword of the lane's block j; lo: its
 * bytes 0, 1 (elements 0..15), hi: bytes 2, 3 (elements 16..31). */
#define B8(b) (char)(b), (char)(b), (char)(b), (char)(b), (char)(b), (char)(b), (char)(b), (char)(b)
#define PAIR(j, k) B8(4 * (j) + (k)), B8(4 * (j) + (k) + 1), B8(4 * (j) + (k)), B8(4 * (j) + (k) + 1)
static const char qh_ctrl[4][2][32] __attribute__((aligned(32))) = {
    {{PAIR(0, 0)}, {PAIR(0, 2)}}, {{PAIR(1, 0)}, {PAIR(1, 2)}}, {{PAIR(2, 0)}, {PAIR(2, 2)}}, {{PAIR(3, 0)}, {PAIR(3, 2)}},
};
#undef PAIR
#undef B8

/* The qh dwords of 8 q5 blocks `bs` bytes apart: blocks 0..3 in the low
 * lane, 4..7 in the high one (the pairs' layout). */
static inline __m256i qh_x8(const uint8_t *p, size_t bs) {
    uint32_t v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) memcpy(&v[i], p + i * bs, 4);
    return _mm256_setr_epi32((int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5], (int)v[6], (int)v[7]);
}

/* The codes (0..15) with 0x10 added where the fifth bit is set, over the
 * 32 codes that ctrl picks. */
static inline __m256i add_fifth(__m256i codes, __m256i qh, const char *ctrl) {
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(qh, _mm256_load_si256((const __m256i *)ctrl));
#ifdef CANDLE_QUANT_VNNI
    return _mm256_mask_add_epi8(codes, _mm256_test_epi8_mask(v, sel), codes, _mm256_set1_epi8(0x10));
#else
    v = _mm256_and_si256(v, sel);
    return _mm256_or_si256(codes, _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10)));
#endif
}

/* Codes of 8 nibble blocks times the paired activation: lane i = block i.
 * The pair products are reduced in 16 bits while they fit: a pair's int16
 * lanes are below 2 * 2 * 15 * 127 = 7620 (q4) or 2 * 2 * 31 * 127 = 15748
 * (q5), so four (q4) or two (q5) of them may be added before the madd. */
static inline __attribute__((always_inline)) __m256i nibble_sums8(const uint8_t *w, wfmt f, const int8_t *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
#ifdef CANDLE_QUANT_VNNI
    (void)qh_x8;
#else
    __m256i qh = f.q5 ? qh_x8(w + f.qh, f.bs) : _mm256_setzero_si256();
#endif
    __m256i p[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(w + code_block(f, j)));
        __m128i b = _mm_loadu_si128((const __m128i *)(w + code_block(f, j + 4)));
        __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#ifdef CANDLE_QUANT_VNNI
        if (f.q5) {
            /* the fifth bits as byte masks: bit i of qh is element i, and
             * lo holds elements 0..15 of blocks j, j + 4, hi 16..31 */
            uint16_t a0, a1, b0, b1; /* the qh halves, loaded apart */
            memcpy(&a0, w + j * f.bs + f.qh, 2);
            memcpy(&a1, w + j * f.bs + f.qh + 2, 2);
            memcpy(&b0, w + (j + 4) * f.bs + f.qh, 2);
            memcpy(&b1, w + (j + 4) * f.bs + f.qh + 2, 2);
            const __m256i b4 = _mm256_set1_epi8(0x10);
            lo = _mm256_mask_add_epi8(lo, (__mmask32)(a0 | (uint32_t)b0 << 16), lo, b4);
            hi = _mm256_mask_add_epi8(hi, (__mmask32)(a1 | (uint32_t)b1 << 16), hi, b4);
        }
        /* int32 lanes: block j low, j + 4 high */
        p[j] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, load32(y + 64 * j)), hi,
                                   load32(y + 64 * j + 32));
    }
    (void)ones;
    return reduce_x4(p[0], p[1], p[2], p[3]);
#else
        if (f.q5) {
            lo = add_fifth(lo, qh, qh_ctrl[j][0]);
            hi = add_fifth(hi, qh, qh_ctrl[j][1]);
        }
        p[j] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load32(y + 64 * j)),
                                _mm256_maddubs_epi16(hi, load32(y + 64 * j + 32)));
    }
    /* dwords of blocks [0 1 0 1] (each int16 two pair lanes), [2 3 2 3] */
    __m256i ab = _mm256_add_epi16(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    __m256i cd = _mm256_add_epi16(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    if (f.q5) {
        ab = _mm256_madd_epi16(ab, ones);
        cd = _mm256_madd_epi16(cd, ones);
        return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
    }
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd)), ones);
#endif
}

#ifdef CANDLE_QUANT_VNNI
/* nibble_sums8 for the four-bit types (no fifth bits) on zmm: pair j's 64
 * activation bytes (codes 0..15 of blocks j, j + 4, then 16..31 of both)
 * meet the codes of blocks j, j + 4, j, j + 4 in the four 128-bit lanes,
 * low nibbles in lanes 0, 1 and high nibbles left in place (16 x code) in
 * lanes 2, 3: one and and one vpdpbusd per pair instead of two shifts, two
 * ands and two 256-bit vpdpbusd. The high lanes' sums, multiples of 16, are
 * shifted down after the reduction, so the int32 block sums are the same
 * exact integers. */
static inline __attribute__((always_inline)) __m256i nibble_sums8_q4(const uint8_t *w, wfmt f, const int8_t *y) {
    /* lanes 0, 1: the low nibbles; lanes 2, 3: the high ones, in place */
    const __m512i keep = _mm512_inserti64x4(_mm512_set1_epi8(0x0F), _mm256_set1_epi8((char)0xF0), 1);
    __m512i r[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(w + code_block(f, j))));
        v = _mm512_mask_broadcast_i32x4(v, 0xF0F0, _mm_loadu_si128((const __m128i *)(w + code_block(f, j + 4))));
        r[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v, keep), _mm512_loadu_si512(y + 64 * j));
    }
    /* within each 128-bit lane, element j = r[j]'s lane sum: lane 0 low
     * halves of blocks 0..3, lane 1 of blocks 4..7, lanes 2, 3 the high */
    __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(r[0], r[1]), _mm512_unpackhi_epi32(r[0], r[1]));
    __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(r[2], r[3]), _mm512_unpackhi_epi32(r[2], r[3]));
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    return _mm256_add_epi32(_mm512_castsi512_si256(u), _mm256_srai_epi32(_mm512_extracti64x4_epi64(u, 1), 4));
}
#endif

/* Block b (after the last group) of one nibble row: the 8 int32 lanes of
 * its codes times the plain-order activation. */
static inline __attribute__((always_inline)) __m256 nibble_block(const uint8_t *wb, wfmt f, __m256i yb) {
    __m256i c = unpack_nibbles(wb + f.qs);
    if (f.q5) {
        uint32_t qh;
        memcpy(&qh, wb + f.qh, 4);
#ifdef CANDLE_QUANT_VNNI
        c = _mm256_mask_add_epi8(c, (__mmask32)qh, c, _mm256_set1_epi8(0x10));
#else
        c = _mm256_or_si256(c, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
#endif
    }
    return _mm256_cvtepi32_ps(dot_u8_i8(c, yb));
}

/* One nibble row: sum over blocks of dx * (dy * isum + s) (q*_0, s holding
 * the offset term) or dx * dy * isum + m * s (q*_1), in the float steps of
 * the file comment. */
static inline __attribute__((always_inline)) float nibble_row(const uint8_t *w, wfmt f, xv_parts p, int64_t nb) {
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    int64_t ng = nb / GROUP;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = w + g * GROUP * f.bs;
        for (size_t o = 0; o < GROUP * f.bs; o += 64) candle_stream_prefetch(wg + GEMV_PF + o);
#ifdef CANDLE_QUANT_VNNI
        __m256 sums = _mm256_cvtepi32_ps(f.q5 ? nibble_sums8(wg, f, p.qs + g * 256) : nibble_sums8_q4(wg, f, p.qs + g * 256)),
               dx = f16x8_group(wg, f.bs, f.d);
#else
        __m256 sums = _mm256_cvtepi32_ps(nibble_sums8(wg, f, p.qs + g * 256)), dx = f16x8_ps(wg + f.d, f.bs);
#endif
        __m256 dy = _mm256_loadu_ps(p.d + g * GROUP), s = _mm256_loadu_ps(p.s + g * GROUP);
        if (f.has_m) {
            acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), sums, acc);
#ifdef CANDLE_QUANT_VNNI
            acc_m = _mm256_fmadd_ps(f16x8_group(wg, f.bs, f.m), s, acc_m);
#else
            acc_m = _mm256_fmadd_ps(f16x8_ps(wg + f.m, f.bs), s, acc_m);
#endif
        } else {
            acc = _mm256_fmadd_ps(dx, _mm256_fmadd_ps(dy, sums, s), acc);
        }
    }
    float extra = 0;
    for (int64_t b = ng * GROUP; b < nb; b++) {
        const uint8_t *wb = w + b * f.bs;
        __m256 v = nibble_block(wb, f, load32(p.qs + b * 32));
        uint16_t dxh, mh;
        memcpy(&dxh, wb + f.d, 2);
        float dx = _cvtsh_ss(dxh);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * p.d[b]), v, acc);
        if (f.has_m) {
            memcpy(&mh, wb + f.m, 2);
            extra += _cvtsh_ss(mh) * p.s[b];
        } else {
            extra += dx * p.s[b];
        }
    }
    return hsum_ps(_mm256_add_ps(acc, acc_m)) + extra;
}

/* One q4_z128 row, nb = K / 32 code blocks (a multiple of 4): per group
 * of two weight blocks nibble_sums8's int32 sums (lanes 0..3 the first
 * block's code blocks, 4..7 the second's), acc = fma(dx * dy, sums, acc)
 * and acc_m = fma(-dx * z, s, acc_m) with s = dy * sum(codes); a last odd
 * block one code block at a time, its zero-point terms summed in extra. */
static const wfmt fz = {.bs = sizeof(block_q4_z128), .qs = offsetof(block_q4_z128, qs), .d = offsetof(block_q4_z128, d),
                        .sub = 16, .pair = sizeof(block_q4_z128)};
_Static_assert(offsetof(block_q4_z128, d) == 0 && offsetof(block_q4_z128, z) == 2, "q4_z128 fields");
static inline __attribute__((always_inline)) float z128_row(const uint8_t *w, xv_parts p, int64_t nb) {
    const size_t bs = fz.bs;
    /* from the two blocks' first dwords (d, then z): d of each 4 times (f16),
     * z of each 4 times (bytes) */
    const __m128i dsel = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 4, 5, 4, 5, 4, 5, 4, 5);
    const __m128i zsel = _mm_setr_epi8(2, 2, 2, 2, 6, 6, 6, 6, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
    int64_t ng = nb / GROUP;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = w + g * 2 * bs;
        for (size_t o = 0; o < 2 * bs; o += 64) candle_stream_prefetch(wg + GEMV_PF + o);
#ifdef CANDLE_QUANT_VNNI
        __m256 sums = _mm256_cvtepi32_ps(nibble_sums8_q4(wg, fz, p.qs + g * 256));
#else
        __m256 sums = _mm256_cvtepi32_ps(nibble_sums8(wg, fz, p.qs + g * 256));
#endif
        uint32_t fa, fb;
        memcpy(&fa, wg, 4);
        memcpy(&fb, wg + bs, 4);
        __m128i f = _mm_insert_epi32(_mm_cvtsi32_si128((int)fa), (int)fb, 1);
        __m256 dx = _mm256_cvtph_ps(_mm_shuffle_epi8(f, dsel));
        __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(f, zsel)));
        __m256 dy = _mm256_loadu_ps(p.d + g * GROUP), s = _mm256_loadu_ps(p.s + g * GROUP);
        acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), sums, acc);
        acc_m = _mm256_fnmadd_ps(_mm256_mul_ps(dx, z), s, acc_m);
    }
    float extra = 0;
    if (ng * GROUP < nb) {
        const uint8_t *wb = w + ng * 2 * bs;
        uint16_t dh;
        memcpy(&dh, wb, 2);
        float dx = _cvtsh_ss(dh), mz = dx * (float)wb[2];
        for (int64_t b = ng * GROUP; b < nb; b++) {
            __m256i c = unpack_nibbles(wb + fz.qs + (size_t)(b % 4) * fz.sub);
            __m256 v = _mm256_cvtepi32_ps(dot_u8_i8(c, load32(p.qs + b * 32)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * p.d[b]), v, acc);
            extra -= mz * p.s[b];
        }
    }
    return hsum_ps(_mm256_add_ps(acc, acc_m)) + extra;
}

/* One q8_0 row (fields by byte offset: a row need not be aligned). */
static float q8_0_row(const uint8_t *x, xv_parts p, int64_t nb) {
    const size_t bs = sizeof(block_q8_0), o_qs = offsetof(block_q8_0, qs), o_d = offsetof(block_q8_0, d);
    __m256 acc = _mm256_setzero_ps();
    int64_t ng = nb / GROUP;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *xg = x + g * GROUP * bs;
        for (int l = 0; l < 5; l++) candle_stream_prefetch(xg + GEMV_PF + 64 * l);
        const int8_t *y = p.qs + g * 256;
#ifdef CANDLE_QUANT_VNNI
        /* blocks j and j + 4 in one zmm (int32 lanes 0..7 and 8..15),
         * against the 64 activation bytes at j * 64 (q8_0_y). The weight
         * codes biased to unsigned (w + 128) for vpdpbusd; the prepared s
         * holds -128 * sum(block codes) (exact in a float). */
        const __m512i bias = _mm512_set1_epi8((char)0x80);
        __m512i r[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(load32(xg + j * bs + o_qs)),
                                           load32(xg + (j + 4) * bs + o_qs), 1);
            r[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(w, bias),
                                       _mm512_loadu_si512(y + 64 * j));
        }
        /* 128-bit lanes of u: 0, 1 partial sums of blocks 0..3, 2, 3 of
         * blocks 4..7; lanes 0 + 1 and 2 + 3 then give lane i = block i */
        __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(r[0], r[1]), _mm512_unpackhi_epi32(r[0], r[1]));
        __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(r[2], r[3]), _mm512_unpackhi_epi32(r[2], r[3]));
        __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
        u = _mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(3, 1, 2, 0));
        __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
        s = _mm256_add_epi32(s, _mm256_cvtps_epi32(_mm256_loadu_ps(p.s + g * GROUP)));
        __m256 d = _mm256_mul_ps(f16x8_group(xg, bs, o_d), _mm256_loadu_ps(p.d + g * GROUP));
#else
        __m256i r[GROUP];
        for (int j = 0; j < GROUP; j++) r[j] = dot_i8_i8(load32(xg + j * bs + o_qs), load32(y + q8_0_y(j)));
        /* a: blocks 0..3 (low lanes' partial sums low, high lanes' high), b: 4..7 */
        __m256i a = reduce_x4(r[0], r[1], r[2], r[3]), b = reduce_x4(r[4], r[5], r[6], r[7]);
        __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
        __m256 d = _mm256_mul_ps(h2f_x8(xg + o_d, bs), _mm256_loadu_ps(p.d + g * GROUP));
#endif
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    for (int64_t b = ng * GROUP; b < nb; b++) {
        uint16_t dh;
        memcpy(&dh, x + b * bs + o_d, 2);
        __m256 v = _mm256_cvtepi32_ps(dot_i8_i8(load32(x + b * bs + o_qs), load32(p.qs + b * 32)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(dh) * p.d[b]), v, acc);
    }
    return hsum_ps(acc);
}

#ifndef CANDLE_QUANT_VNNI
/* The few-row products (cdl_qgemm_rows_few below): R <= FEW_ROWS prepared
 * activation rows share each weight group's decoding (loads, nibble
 * split, fifth bits, scale conversions); per row the integer sums and
 * float steps are nibble_row's and q8_0_row's, so each output has the
 * matrix-vector bits. */
#define FEW_ROWS 4
#define FOR_ROWS for (int r = 0; r < R; r++)

/* nibble_sums8 for R activation rows: out[r] for y[r] (the group's
 * paired codes of row r). */
static inline __attribute__((always_inline)) void nibble_sums8_few(int R, const uint8_t *w, wfmt f,
                                                                   const int8_t *const *y, __m256i *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256i qh = f.q5 ? qh_x8(w + f.qh, f.bs) : _mm256_setzero_si256();
    __m256i prev[FEW_ROWS], ab[FEW_ROWS];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(w + code_block(f, j)));
        __m128i b = _mm_loadu_si128((const __m128i *)(w + code_block(f, j + 4)));
        __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (f.q5) {
            lo = add_fifth(lo, qh, qh_ctrl[j][0]);
            hi = add_fifth(hi, qh, qh_ctrl[j][1]);
        }
        FOR_ROWS {
            __m256i pj = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load32(y[r] + 64 * j)),
                                          _mm256_maddubs_epi16(hi, load32(y[r] + 64 * j + 32)));
            if (j % 2 == 0) {
                prev[r] = pj;
                continue;
            }
            /* dwords of blocks [0 1 0 1] (j = 1) or [2 3 2 3] (j = 3) */
            __m256i t = _mm256_add_epi16(_mm256_unpacklo_epi32(prev[r], pj), _mm256_unpackhi_epi32(prev[r], pj));
            if (j == 1) {
                ab[r] = t;
                continue;
            }
            __m256i x = ab[r], cd = t;
            if (f.q5) {
                x = _mm256_madd_epi16(x, ones);
                cd = _mm256_madd_epi16(cd, ones);
                out[r] = _mm256_add_epi32(_mm256_unpacklo_epi64(x, cd), _mm256_unpackhi_epi64(x, cd));
            } else {
                out[r] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_unpacklo_epi64(x, cd), _mm256_unpackhi_epi64(x, cd)),
                                           ones);
            }
        }
    }
}

/* nibble_row for R rows: out[r * ldo]. */
static inline __attribute__((always_inline)) void nibble_few(int R, const uint8_t *w, wfmt f, const xv_parts *p,
                                                             int64_t nb, float *out, int64_t ldo) {
    __m256 acc[FEW_ROWS], acc_m[FEW_ROWS];
    float extra[FEW_ROWS];
    FOR_ROWS acc[r] = acc_m[r] = _mm256_setzero_ps(), extra[r] = 0;
    int64_t ng = nb / GROUP;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *wg = w + g * GROUP * f.bs;
        for (size_t o = 0; o < GROUP * f.bs; o += 64) candle_stream_prefetch(wg + GEMV_PF + o);
        const int8_t *y[FEW_ROWS];
        FOR_ROWS y[r] = p[r].qs + g * 256;
        __m256i sums[FEW_ROWS];
        nibble_sums8_few(R, wg, f, y, sums);
        __m256 dx = f16x8_ps(wg + f.d, f.bs), mv = f.has_m ? f16x8_ps(wg + f.m, f.bs) : dx;
        FOR_ROWS {
            __m256 dy = _mm256_loadu_ps(p[r].d + g * GROUP), s = _mm256_loadu_ps(p[r].s + g * GROUP);
            if (f.has_m) {
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), _mm256_cvtepi32_ps(sums[r]), acc[r]);
                acc_m[r] = _mm256_fmadd_ps(mv, s, acc_m[r]);
            } else {
                acc[r] = _mm256_fmadd_ps(dx, _mm256_fmadd_ps(dy, _mm256_cvtepi32_ps(sums[r]), s), acc[r]);
            }
        }
    }
    for (int64_t b = ng * GROUP; b < nb; b++) {
        const uint8_t *wb = w + b * f.bs;
        __m256i c = unpack_nibbles(wb + f.qs);
        if (f.q5) {
            uint32_t qh;
            memcpy(&qh, wb + f.qh, 4);
            c = _mm256_or_si256(c, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
        }
        uint16_t dxh, mh = 0;
        memcpy(&dxh, wb + f.d, 2);
        if (f.has_m) memcpy(&mh, wb + f.m, 2);
        float dx = _cvtsh_ss(dxh);
        FOR_ROWS {
            __m256 v = _mm256_cvtepi32_ps(dot_u8_i8(c, load32(p[r].qs + b * 32)));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dx * p[r].d[b]), v, acc[r]);
            extra[r] += f.has_m ? _cvtsh_ss(mh) * p[r].s[b] : dx * p[r].s[b];
        }
    }
    FOR_ROWS out[r * ldo] = hsum_ps(_mm256_add_ps(acc[r], acc_m[r])) + extra[r];
}

/* q8_0_row for R rows: out[r * ldo]. */
static inline __attribute__((always_inline)) void q8_0_few(int R, const uint8_t *x, const xv_parts *p, int64_t nb,
                                                           float *out, int64_t ldo) {
    const size_t bs = sizeof(block_q8_0), o_qs = offsetof(block_q8_0, qs), o_d = offsetof(block_q8_0, d);
    __m256 acc[FEW_ROWS];
    FOR_ROWS acc[r] = _mm256_setzero_ps();
    int64_t ng = nb / GROUP;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *xg = x + g * GROUP * bs;
        for (int l = 0; l < 5; l++) candle_stream_prefetch(xg + GEMV_PF + 64 * l);
        __m256i h[2][FEW_ROWS]; /* [half][row]: blocks 4 * half .. + 3 */
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            __m256i wv[4], aw[4];
            for (int j = 0; j < 4; j++) {
                wv[j] = load32(xg + (4 * half + j) * bs + o_qs);
                aw[j] = _mm256_sign_epi8(wv[j], wv[j]);
            }
            FOR_ROWS {
                const int8_t *y = p[r].qs + g * 256;
                __m256i d4[4];
                for (int j = 0; j < 4; j++)
                    d4[j] = dot_u8_i8(aw[j], _mm256_sign_epi8(load32(y + q8_0_y(4 * half + j)), wv[j]));
                h[half][r] = reduce_x4(d4[0], d4[1], d4[2], d4[3]);
            }
        }
        __m256 dw = h2f_x8(xg + o_d, bs);
        FOR_ROWS {
            __m256i a = h[0][r], b = h[1][r];
            __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
            __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(p[r].d + g * GROUP));
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r]);
        }
    }
    for (int64_t b = ng * GROUP; b < nb; b++) {
        uint16_t dh;
        memcpy(&dh, x + b * bs + o_d, 2);
        __m256i wv = load32(x + b * bs + o_qs);
        FOR_ROWS {
            __m256 v = _mm256_cvtepi32_ps(dot_i8_i8(wv, load32(p[r].qs + b * 32)));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(dh) * p[r].d[b]), v, acc[r]);
        }
    }
    FOR_ROWS out[r * ldo] = hsum_ps(acc[r]);
}
#undef FOR_ROWS
#endif

#define BLOCKS(T) .bs = sizeof(T), .sub = sizeof(T), .pair = 4 * sizeof(T)
static const wfmt f40 = {BLOCKS(block_q4_0), .qs = offsetof(block_q4_0, qs), .d = offsetof(block_q4_0, d)};
static const wfmt f41 = {BLOCKS(block_q4_1), .qs = offsetof(block_q4_1, qs), .d = offsetof(block_q4_1, d),
                         .m = offsetof(block_q4_1, m), .has_m = true};
static const wfmt f50 = {BLOCKS(block_q5_0), .qs = offsetof(block_q5_0, qs), .d = offsetof(block_q5_0, d),
                         .qh = offsetof(block_q5_0, qh), .q5 = true};
static const wfmt f51 = {BLOCKS(block_q5_1), .qs = offsetof(block_q5_1, qs), .d = offsetof(block_q5_1, d),
                         .m = offsetof(block_q5_1, m), .qh = offsetof(block_q5_1, qh), .q5 = true, .has_m = true};
#undef BLOCKS

void QUANT_KERNEL(cdl_gemv_rows)(candle_dtype t, int64_t K, int64_t n, const void *w, size_t ws, const void *xv,
                           float *out) {
    if (k_type(t)) {
        QUANT_KERNEL(cdl_gemv_rows_k)(t, K, n, w, ws, xv, out);
        return;
    }
    int64_t nb = K / 32;
    xv_parts p = parts(xv, nb);
    const uint8_t *row = w;
    switch (t) {
    case CANDLE_DTYPE_Q4_0:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = nibble_row(row, f40, p, nb);
        break;
    case CANDLE_DTYPE_Q4_1:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = nibble_row(row, f41, p, nb);
        break;
    case CANDLE_DTYPE_Q5_0:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = nibble_row(row, f50, p, nb);
        break;
    case CANDLE_DTYPE_Q5_1:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = nibble_row(row, f51, p, nb);
        break;
    case CANDLE_DTYPE_Q8_0:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = q8_0_row(row, p, nb);
        break;
    case CANDLE_DTYPE_Q4_Z128:
        for (int64_t r = 0; r < n; r++, row += ws) out[r] = z128_row(row, p, nb);
        break;
    default: break;
    }
}

#ifndef CANDLE_QUANT_VNNI
/* One weight row of type t times R = 1..FEW_ROWS prepared rows, R a
 * constant in each case so the row loops unroll. */
#define FEW(R)                                                                                                 \
    do {                                                                                                       \
        switch (t) {                                                                                           \
        case CANDLE_DTYPE_Q4_0: nibble_few(R, row, f40, p, nb, out, ldc); break;                               \
        case CANDLE_DTYPE_Q4_1: nibble_few(R, row, f41, p, nb, out, ldc); break;                               \
        case CANDLE_DTYPE_Q5_0: nibble_few(R, row, f50, p, nb, out, ldc); break;                               \
        case CANDLE_DTYPE_Q5_1: nibble_few(R, row, f51, p, nb, out, ldc); break;                               \
        default: q8_0_few(R, row, p, nb, out, ldc); break;                                                     \
        }                                                                                                      \
    } while (0)

void QUANT_KERNEL(cdl_qgemm_rows_few)(candle_dtype t, int64_t K, int64_t M, int64_t N, const void *w, size_t ws,
                                      const void *xv, size_t xb, float *c, int64_t ldc) {
    const int64_t nb = K / 32;
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * ws;
        for (int64_t m = 0; m < M; m += FEW_ROWS) {
            xv_parts p[FEW_ROWS];
            int R = (int)(M - m < FEW_ROWS ? M - m : FEW_ROWS);
            for (int r = 0; r < R; r++) p[r] = parts((const char *)xv + (size_t)(m + r) * xb, nb);
            float *out = c + m * ldc + n;
            switch (R) {
            case 1: FEW(1); break;
            case 2: FEW(2); break;
            case 3: FEW(3); break;
            default: FEW(4); break;
            }
        }
    }
}
#undef FEW
#endif

#endif
