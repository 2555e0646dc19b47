/* The avx512 table's unary ops: GELU (erf) on zmm, the lanes doing the AVX2
 * table's arithmetic (simd_avx2.c's gelu_erf8: the same operations in the
 * same order), so results equal the AVX2 table's bit for bit; the other ops
 * go to the AVX2 table. zmm: twice the lanes per operation, and 32
 * registers hold the fit's constants beside the temporaries. */
#include <immintrin.h>
#include <math.h>

#include "../cpu-impl.h"
#include "x86-impl.h"

static inline __m512 exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.7228394f), lo = _mm512_set1_ps(-103.972084f);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i ni = _mm512_cvtps_epi32(n), n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    __m512i bias = _mm512_set1_epi32(127);
    __m512 e1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    __m512 e2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    __m512 res = _mm512_mul_ps(_mm512_mul_ps(p, e1), e2);
    res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
    res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), _mm512_setzero_ps());
    return _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

static inline __m512 erfc16_pos(__m512 a) {
    static const float c[] = {CDL_ERFC_C};
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.5f), a, one));
    __m512 p = _mm512_set1_ps(c[0]);
    for (int i = 1; i < 10; i++) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
    return _mm512_mul_ps(t, exp16(_mm512_fnmadd_ps(a, a, p)));
}

static inline __m512 gelu_erf16(__m512 x) {
    static const float P[] = {CDL_GELU_P}, Q[] = {CDL_GELU_Q};
    __m512 zu = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    __m512 z = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), zu));
    __m512 t = _mm512_mul_ps(z, z), p = _mm512_set1_ps(P[5]), q = _mm512_set1_ps(Q[5]);
    for (int i = 4; i >= 0; i--) {
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(P[i]));
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(Q[i]));
    }
    __m512 e = _mm512_div_ps(_mm512_mul_ps(z, p), q);
    __m512 v = _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    __mmask16 tail = _mm512_cmp_ps_mask(zu, _mm512_set1_ps(-3.0f), _CMP_LT_OQ);
    if (tail) v = _mm512_mask_mov_ps(v, tail, erfc16_pos(_mm512_xor_ps(zu, _mm512_set1_ps(-0.0f))));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), v);
}

void cpu_unary_avx512(candle_op op, const float *x, float *y, int64_t n, const double *p) {
    if (op != CANDLE_OP_GELU_ERF) {
        cpu_simd_avx2.unary(op, x, y, n, p);
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu_erf16(_mm512_loadu_ps(x + i)));
    if (i < n) { /* the tail through the same code, zeros past the end */
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, gelu_erf16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
