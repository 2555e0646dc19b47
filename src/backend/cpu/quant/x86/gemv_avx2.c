/* AVX2 matrix-vector kernels for q4_0, q4_1, q5_0, q5_1, q8_0 and q4_z128 weights
 * (the K types q2_K to q6_K are in kquants_avx2.c, on a q8_K row)
 * (see gemv-impl.h).
 *
 * Prepared activation, nb = K / 32 blocks: the codes (nb * 32 bytes), then
 * the block scales (nb floats), then the offset terms (nb floats: q4_0
 * -8 * d * sum(codes), q5_0 -16 * d * sum(codes), q4_1 and q5_1 the q8_1
 * s, q4_z128 d * sum(codes) (times the block's -dx * z), q8_0
 * -128 * sum(codes): the AVX-512 VNNI rows of gemv_avx512.c use
 * q8_0's codes biased by 128, unsigned). The weight codes are used unsigned
 * (0..15, 0..31), the q*_0 offset coming back through that term. The rows
 * are in gemv-rows-impl.h, shared with gemv_avx512.c (same int32 block
 * sums: the VNNI rows equal these bit for bit). For the nibble types every full
 * group of 8 blocks is laid out as four 64-byte pairs: pair j holds codes
 * 0..15 of blocks j and j + 4, then codes 16..31 of the same two blocks, so
 * one 256-bit register of weight nibbles (block j low lane, j + 4 high)
 * meets its activation codes in two loads, with no shuffles. For q8_0 the
 * 64 bytes at j * 64 of a group hold the codes of block j, then those of
 * block j + 4 (one 512-bit load for the VNNI rows' pair of blocks). Blocks
 * after the last full group keep the plain order.
 *
 * Per group of 8 blocks the int32 sums are reduced to one vector (lane i =
 * block i), so the scales cost one f16 conversion and two fma per 8 blocks.
 * In cache these kernels are bound by instruction count, hence the 16-bit
 * partial sums, the f16 scales inserted from memory and the q5 bits spread
 * from one register per group. Rows are read one after another: four rows
 * side by side (activation loads and horizontal sums shared) were as fast in
 * cache but slower from memory on long rows (K 2048: four streams a row
 * apart, which the hardware prefetcher follows worse than one).
 *
 * The float steps of a row are fixed (the packed multi-row kernels of
 * qgemm_avx2.c reproduce them bit for bit, so a row's result does not
 * depend on its batch): per group, q*_0 acc = fma(dx, fma(dy, sums, s),
 * acc), q*_1 acc = fma(dx * dy, sums, acc) and acc_m = fma(m, s, acc_m),
 * q8_0 acc = fma(dx * dy, sums, acc); the blocks after the last group one
 * at a time (acc = fma(dx * dy, block sums, acc), the offset terms summed in
 * scalar into extra); the result hsum_ps(acc + acc_m) + extra (q8_0:
 * hsum_ps(acc)). Only the integer sums, which are exact, are free to be
 * formed in any order. */
#include <stdbool.h>
#include <stddef.h>

#include "../gemv-impl.h"
#include "avx2-impl.h"

#define QUANT_KERNEL(name) name##_avx2
#include "gemv-rows-impl.h"

size_t cdl_gemv_x_bytes_avx2(candle_dtype t, int64_t K) {
    /* the K types take their vec_dot activation, a q8_K row */
    if (k_type(t)) { /* q4_K and q5_K: then the bsums summed in pairs (8 int16 a block) */
        size_t nb = (size_t)(K / QK_K), pairs = t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q5_K ? nb * 16 : 0;
        return K % QK_K ? 0 : (nb * sizeof(block_q8_K) + pairs + 63) & ~(size_t)63;
    }
    if (!(nibble_type(t) || t == CANDLE_DTYPE_Q8_0) || K % (t == CANDLE_DTYPE_Q4_Z128 ? 128 : 32)) return 0;
    return ((size_t)(K / 32) * (32 + 2 * sizeof(float)) + 63) & ~(size_t)63;
}

/* Where block b's codes 0..15 go (codes 16..31 follow 32 bytes later in a
 * pair, 16 bytes later otherwise). In a group of GROUP blocks the codes of
 * blocks i and i + 4 share the 64 bytes at (i % 4) * 64: nibble types as
 * pairs of halves (paired), q8_0 whole blocks after another (q8_0_y), so
 * that one 64-byte load feeds the zmm of blocks i, i + 4 (VNNI rows); the
 * blocks after the last group are in plain order. */
static int8_t *block_codes(int8_t *qs, int64_t nb, int64_t b, candle_dtype t, int64_t *hi_off) {
    *hi_off = 16;
    if (b >= nb / GROUP * GROUP || !(nibble_type(t) || t == CANDLE_DTYPE_Q8_0)) return qs + b * 32;
    int64_t g = b / GROUP, i = b % GROUP;
    if (t == CANDLE_DTYPE_Q8_0) return qs + g * 256 + q8_0_y(i);
    *hi_off = 32;
    return qs + g * 256 + (i % 4) * 64 + (i / 4) * 16;
}

void cdl_gemv_prep_avx2(candle_dtype t, int64_t K, const float *x, void *xv) {
    if (k_type(t)) {
        cdl_q8_k_from_f32_avx2(x, xv, K);
        if (t == CANDLE_DTYPE_Q4_K || t == CANDLE_DTYPE_Q5_K) {
            const block_q8_K *y = xv;
            int16_t *pairs = (int16_t *)(void *)(y + K / QK_K);
            for (int64_t i = 0; i < K / QK_K; i++)
                _mm_storeu_si128((__m128i *)(pairs + 8 * i),
                                 _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[i].bsums),
                                                _mm_loadu_si128((const __m128i *)(y[i].bsums + 8))));
        }
        return;
    }
    int64_t nb = K / 32, hi_off;
    xv_parts p = parts(xv, nb);
    int8_t codes[32];
    for (int64_t b = 0; b < nb; b++, x += 32) {
        int sum;
        float d = quantize_q8_32(x, codes, &sum);
        /* the scale as the q8 block stores it (f16) */
        float dh = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        int8_t *dst = block_codes(p.qs, nb, b, t, &hi_off);
        memcpy(dst, codes, 16);
        memcpy(dst + hi_off, codes + 16, 16);
        p.d[b] = dh;
        if (t == CANDLE_DTYPE_Q4_0) p.s[b] = -8.0f * dh * (float)sum;
        else if (t == CANDLE_DTYPE_Q5_0) p.s[b] = -16.0f * dh * (float)sum;
        else if (t == CANDLE_DTYPE_Q8_0) p.s[b] = -128.0f * (float)sum; /* the VNNI rows' bias term */
        else if (t == CANDLE_DTYPE_Q4_Z128) p.s[b] = dh * (float)sum;
        else p.s[b] = _cvtsh_ss(_cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT)); /* q8_1's s */
    }
}

/* cdl_gemv_prep_avx2's result from the row's vec_dot quantization (q8_0
 * for q4_0, q5_0, q8_0 and q4_z128; q8_1 for q4_1 and q5_1) instead of its floats:
 * the quantizers round the same, so the codes and f16 scales are the same,
 * and the offset terms are formed from them as there (q8_1 brings its s). */
void cdl_gemv_prep_q8_avx2(candle_dtype t, int64_t K, const void *q8, void *xv) {
    int64_t nb = K / 32, hi_off;
    xv_parts p = parts(xv, nb);
    const bool q81 = t == CANDLE_DTYPE_Q4_1 || t == CANDLE_DTYPE_Q5_1;
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *codes;
        float dh;
        if (q81) {
            const block_q8_1 *y = (const block_q8_1 *)q8 + b;
            codes = y->qs;
            dh = h2f(y->d);
            p.s[b] = h2f(y->s);
        } else {
            const block_q8_0 *y = (const block_q8_0 *)q8 + b;
            int sum = 0;
            codes = y->qs;
            dh = h2f(y->d);
            for (int i = 0; i < 32; i++) sum += codes[i];
            if (t == CANDLE_DTYPE_Q4_0) p.s[b] = -8.0f * dh * (float)sum;
            else if (t == CANDLE_DTYPE_Q5_0) p.s[b] = -16.0f * dh * (float)sum;
            else if (t == CANDLE_DTYPE_Q4_Z128) p.s[b] = dh * (float)sum;
            else p.s[b] = -128.0f * (float)sum;
        }
        int8_t *dst = block_codes(p.qs, nb, b, t, &hi_off);
        memcpy(dst, codes, 16);
        memcpy(dst + hi_off, codes + 16, 16);
        p.d[b] = dh;
    }
}
