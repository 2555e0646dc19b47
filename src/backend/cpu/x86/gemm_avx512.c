/* AVX-512 kernels of the avx512 table (the AVX2 table with these in place;
 * cpu_dispatch.c), on the packed panels of the AVX2 GEMM (A in MR = 6 row
 * panels, B in NR = 16 column panels):
 *
 * cpu_gemm_ukr_avx512: the 6 x 16 contract of gemm_ukr (one zmm per row,
 * even and odd k in two sets of six accumulators).
 *
 * cpu_gemm_ukr2_avx512: the wide tile (gemm_ukr2), 12 x 32 of C from two
 * consecutive A panels and two consecutive B panels: 24 zmm accumulators,
 * per k step two B loads and twelve broadcasts (as the FMAs' embedded
 * {1to16} memory operands) for 24 FMAs, where 6 x 16 needed seven loads
 * for six FMAs and left the FMA pipes waiting on loads. Tiles of at most 6
 * rows or 16 columns use 12 x 16, 6 x 32 or 6 x 16 variants that read no
 * second panel. Written for and measured on a Zen 5 (family 1Ah) EPYC,
 * whose 512-bit FMAs run at twice the AVX2 rate (2 x 16 lanes per cycle):
 * ~92% of the zmm FMA peak on one thread at 2048^3.
 *
 * Further down: the weight-row (wt) tile, bf16 weights through vdpbf16ps
 * (AVX512_BF16) in the wt path and the packed GEMM, and f16 / bf16
 * matrix-vector rows.
 */
#include <immintrin.h>
#include <string.h>

#include "../cpu-impl.h"
#include "avx2-util.h"
#include "x86-impl.h"

void cpu_gemm_ukr_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                         int nr, bool accumulate) {
    for (int i = 0; i < mr; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m512 e[CPU_GEMM_MR], o[CPU_GEMM_MR];
    for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = o[i] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 2 <= k; p += 2) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + CPU_GEMM_NR);
        for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, e[i]);
        for (int i = 0; i < CPU_GEMM_MR; i++)
            o[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[CPU_GEMM_MR + i]), b1, o[i]);
        a += 2 * CPU_GEMM_MR;
        b += 2 * CPU_GEMM_NR;
    }
    if (p < k) {
        __m512 b0 = _mm512_loadu_ps(b);
        for (int i = 0; i < CPU_GEMM_MR; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, e[i]);
    }
    __mmask16 mask = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    for (int i = 0; i < mr; i++) {
        __m512 v = _mm512_add_ps(e[i], o[i]);
        float *ci = c + i * ldc;
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, ci));
        _mm512_mask_storeu_ps(ci, mask, v);
    }
}

#define MR CPU_GEMM_MR
#define NR CPU_GEMM_NR

/* Shared by the f32 and bf16 tiles: zeroed accumulators and C's rows
 * prefetched; then the R x W tile's valid mr x nr part stored (added to C
 * when accumulating), columns past nr masked off. */
static inline __attribute__((always_inline)) void tile_begin(__m512 acc[12][2], const float *c, int64_t ldc, int mr,
                                                             const int R, const int W) {
    for (int i = 0; i < R; i++)
        for (int w = 0; w < W; w++) acc[i][w] = _mm512_setzero_ps();
    for (int i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        if (W == 2) _mm_prefetch((const char *)(c + i * ldc + NR), _MM_HINT_T0);
    }
}

static inline __attribute__((always_inline)) void tile_store(__m512 acc[12][2], float *c, int64_t ldc, int mr,
                                                             int nr, bool accumulate, const int R, const int W) {
    int n0 = nr < NR ? nr : NR, n1 = nr - n0;
    __mmask16 m[2] = {(__mmask16)(n0 >= 16 ? 0xFFFF : (1u << n0) - 1),
                      (__mmask16)(n1 >= 16 ? 0xFFFF : (1u << n1) - 1)};
    for (int i = 0; i < R && i < mr; i++)
        for (int w = 0; w < W; w++) {
            float *ci = c + i * ldc + w * NR;
            __m512 v = acc[i][w];
            if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m[w], ci));
            _mm512_mask_storeu_ps(ci, m[w], v);
        }
}

/* R (6 or 12) rows x W (1 or 2) panels; R and W are constants at every
 * call, so the loops unroll and the accumulators stay in registers. */
static inline __attribute__((always_inline)) void tile(int64_t k, const float *a, const float *b, float *c,
                                                       int64_t ldc, int mr, int nr, bool accumulate, const int R,
                                                       const int W) {
    const float *a1 = a + k * MR, *b1 = b + k * NR;
    __m512 acc[12][2];
    tile_begin(acc, c, ldc, mr, R, W);
#pragma GCC unroll 2
    for (int64_t p = 0; p < k; p++) {
        __m512 bv[2];
        bv[0] = _mm512_loadu_ps(b + p * NR);
        if (W == 2) bv[1] = _mm512_loadu_ps(b1 + p * NR);
        for (int i = 0; i < R; i++) {
            __m512 av = _mm512_set1_ps(i < MR ? a[p * MR + i] : a1[p * MR + i - MR]);
            for (int w = 0; w < W; w++) acc[i][w] = _mm512_fmadd_ps(av, bv[w], acc[i][w]);
        }
    }
    tile_store(acc, c, ldc, mr, nr, accumulate, R, W);
}

void cpu_gemm_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr,
                          int nr, bool accumulate) {
    if (mr > MR) {
        if (nr > NR) tile(k, a, b, c, ldc, mr, nr, accumulate, 12, 2);
        else tile(k, a, b, c, ldc, mr, nr, accumulate, 12, 1);
    } else {
        if (nr > NR) tile(k, a, b, c, ldc, mr, nr, accumulate, 6, 2);
        else tile(k, a, b, c, ldc, mr, nr, accumulate, 6, 1);
    }
}

/* The benchmark's FMA peak on zmm registers: twelve independent chains. */
double cpu_probe_fma_avx512(int64_t iters) {
    __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    __m512 ch[12];
    for (int j = 0; j < 12; j++) ch[j] = _mm512_set1_ps(1.0f + 0.01f * (float)j);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) ch[j] = _mm512_fmadd_ps(ch[j], m, a);
    }
    __m512 s = ch[0];
    for (int j = 1; j < 12; j++) s = _mm512_add_ps(s, ch[j]);
    float out = _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 16 * 2 + (out > 1e30f ? 1 : 0);
}

/* ---- weight-row GEMM tile (fast_matmul.c's wt path) ----
 * C[i, j] (+)= sum_p w[j * ldw + p] * at[(i / 16) * 16 * kc + p * 16 + i % 16]
 * for i < nm <= 64, j < nw <= 6: up to four consecutive 16-row activation
 * panels against six weight rows, each weight element broadcast (an
 * embedded {1to16} operand) against one zmm per panel: 24 accumulators,
 * 4 + 6 loads per 24 FMAs, where the AVX2 tile (16 x 6 on ymm) did 2 + 6
 * per 12. Rows past nw repeat the last one (valid memory); their sums are
 * dropped. */

/* Prefetches spread over a tile's k loop: rows rows of bytes from p,
 * stride apart, one line per step at the rate that covers them (plus a
 * line past each row's end) in steps steps. */
typedef struct pf_spread {
    const char *p;
    int64_t stride, bytes, lines, steps, acc, off;
    int rows;
} pf_spread;

static inline __attribute__((always_inline)) pf_spread pf_init(const char *p, int64_t stride, int rows,
                                                               int64_t bytes, int64_t steps) {
    pf_spread s = {p, stride, bytes, rows * ((bytes + 63) / 64 + 1), steps > 0 ? steps : 1, 0, 0, rows};
    return s;
}

static inline __attribute__((always_inline)) void pf_step(pf_spread *s) {
    if (s->rows <= 0) return;
    s->acc += s->lines;
    if (s->acc < s->steps) return;
    s->acc -= s->steps;
    _mm_prefetch(s->p + s->off, _MM_HINT_T0);
    s->off += 64;
    if (s->off >= s->bytes + 64) s->off = 0, s->p += s->stride, s->rows--;
}

/* The wt tiles' accumulators (lane i of acc[q][j]: C[16q + i, j]) stored
 * transposed, ct[j * ldt + 16q + i], whole vectors (added to ct when
 * accumulating). */
static inline __attribute__((always_inline)) void ct_store(__m512 acc[4][6], float *ct, int64_t ldt, int nw,
                                                           bool accumulate, const int P) {
    for (int j = 0; j < 6 && j < nw; j++)
        for (int q = 0; q < P; q++) {
            float *cj = ct + j * ldt + 16 * q;
            _mm512_storeu_ps(cj, accumulate ? _mm512_add_ps(acc[q][j], _mm512_loadu_ps(cj)) : acc[q][j]);
        }
}

static inline __attribute__((always_inline)) void wt_tile(int64_t kc, const float *w, int64_t ldw, int nw,
                                                          const float *at, int nm, float *c, int64_t ldc,
                                                          bool accumulate, const int P, const bool ct,
                                                          const char *pf, int64_t pf_stride, int pf_rows,
                                                          int64_t pf_bytes) {
    const float *wr[6];
    for (int j = 0; j < 6; j++) wr[j] = w + (nw > j ? j : nw - 1) * ldw;
    if (!ct)
        for (int i = 0; i < nm; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m512 acc[4][6];
    for (int q = 0; q < P; q++)
        for (int j = 0; j < 6; j++) acc[q][j] = _mm512_setzero_ps();
    pf_spread pfs = pf_init(pf, pf_stride, ct ? pf_rows : 0, pf_bytes, kc);
    for (int64_t p = 0; p < kc; p++) {
        if (ct) pf_step(&pfs);
        __m512 av[4];
        for (int q = 0; q < P; q++) av[q] = _mm512_loadu_ps(at + q * 16 * kc + p * 16);
        for (int j = 0; j < 6; j++) {
            __m512 bv = _mm512_set1_ps(wr[j][p]);
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_fmadd_ps(bv, av[q], acc[q][j]);
        }
    }
    if (ct) {
        ct_store(acc, c, ldc, nw, accumulate, P);
        return;
    }
    /* lanes are activation rows: out through a transposing buffer */
    for (int q = 0; q < P; q++) {
        float t[6][16];
        for (int j = 0; j < 6; j++) _mm512_storeu_ps(t[j], acc[q][j]);
        int rows = nm - 16 * q < 16 ? nm - 16 * q : 16;
        for (int i = 0; i < rows; i++) {
            float *ci = c + (16 * q + i) * ldc;
            for (int j = 0; j < nw; j++) ci[j] = accumulate ? ci[j] + t[j][i] : t[j][i];
        }
    }
}

void cpu_wt_ukr_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *c,
                       int64_t ldc, bool accumulate) {
    switch ((nm + 15) / 16) {
    case 1: wt_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 1, false, NULL, 0, 0, 0); break;
    case 2: wt_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 2, false, NULL, 0, 0, 0); break;
    case 3: wt_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 3, false, NULL, 0, 0, 0); break;
    default: wt_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 4, false, NULL, 0, 0, 0); break;
    }
}

/* The same tile writing C transposed, ct[j * ldt + i] for j < nw and every
 * i < 16 * ceil(nm / 16) (rows past nm come from the packing's zero rows):
 * whole-vector stores to a task's contiguous scratch, which
 * cpu_wt_ct_out_avx512 then writes to C a block of columns at a time. C
 * rows a power-of-two number of floats apart (N = 2048) put a 16-64 row
 * tile's rows in one or two L1 sets, and the 6-float pieces stored
 * through them row by row missed again and again: at K = 128, N 8192 vs
 * 8200, 158 vs 209 GFLOP/s; at K = 2048, 245 vs 254 (1 thread, M 64).
 * pf: pf_rows rows of pf_bytes, pf_stride apart (the next group's weight
 * rows), prefetched a line at a time over the k loop (pf_spread). */
void cpu_wt_ukr_t_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *at, int nm, float *ct,
                         int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                         int64_t pf_bytes) {
    switch ((nm + 15) / 16) {
    case 1: wt_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 1, true, pf, pf_stride, pf_rows, pf_bytes); break;
    case 2: wt_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 2, true, pf, pf_stride, pf_rows, pf_bytes); break;
    case 3: wt_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 3, true, pf, pf_stride, pf_rows, pf_bytes); break;
    default: wt_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 4, true, pf, pf_stride, pf_rows, pf_bytes); break;
    }
}

/* ---- the wt tile in k pairs, for 8-48 activation rows ----
 * With one or two 16-row panels the tile above has 6 or 12 accumulators
 * and 7 or 8 loads per 6 or 12 FMAs: too few chains to cover the FMA
 * latency at two FMAs a cycle, and one load per FMA (1 thread, Zen 5, in
 * L1: 16 rows 149 GFLOP/s, 32 rows 207, 64 rows 249). Here a zmm holds 8
 * activation rows x 2 consecutive k (lane 2i + s: row i, k = 2t + s), and
 * each weight row's pair of elements is broadcast as one 64-bit value, so
 * a 16-row tile is two such panels against six weight rows: 12
 * accumulators, 2 + 6 loads per 12 FMAs (206 GFLOP/s); 24 rows three
 * panels (240), 32 rows four (249); and M goes in steps of 8 rows, not 16.
 * Lanes 2i and 2i + 1 are added at the end: each output is its even-k sum
 * plus its odd-k sum. */

/* r[i] (8 doubles of row i) -> r[j] (element j of rows 0..7) */
static inline __attribute__((always_inline)) void transpose8_pd(__m512d r[8]) {
    __m512d t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);     /* elements 0, 2, 4, 6 of rows i, i + 1 */
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]); /* 1, 3, 5, 7 */
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm512_shuffle_f64x2(t[g], t[g + 2], _MM_SHUFFLE(2, 0, 2, 0));     /* elements 0, 4 */
        u[g + 1] = _mm512_shuffle_f64x2(t[g], t[g + 2], _MM_SHUFFLE(3, 1, 3, 1)); /* 2, 6 */
        u[g + 2] = _mm512_shuffle_f64x2(t[g + 1], t[g + 3], _MM_SHUFFLE(2, 0, 2, 0)); /* 1, 5 */
        u[g + 3] = _mm512_shuffle_f64x2(t[g + 1], t[g + 3], _MM_SHUFFLE(3, 1, 3, 1)); /* 3, 7 */
    }
    static const int el[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};
    for (int s = 0; s < 4; s++) {
        r[el[s][0]] = _mm512_shuffle_f64x2(u[s], u[4 + s], _MM_SHUFFLE(2, 0, 2, 0));
        r[el[s][1]] = _mm512_shuffle_f64x2(u[s], u[4 + s], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* 16 rows of a (rows of them real, zero past), kc deep, as two 8-row
 * panels of k pairs: dst[h * 8 * kcp + t * 16 + 2i + s] = a[(8h + i) * lda
 * + 2t + s], kcp = kc rounded up to even (the odd kc's last pair has a
 * zero high half). 16 k of 8 rows per 8 x 8 transpose of 64-bit pairs. */
void cpu_pack_ap8_avx512(const float *a, int64_t lda, int rows, int64_t kc, float *dst) {
    int64_t kcp = kc + (kc & 1);
    for (int h = 0; h < 2; h++) {
        int rh = rows - 8 * h < 0 ? 0 : rows - 8 * h > 8 ? 8 : rows - 8 * h;
        const float *ah = a + 8 * h * lda;
        float *d = dst + h * 8 * kcp;
        for (int64_t p = 0; p < kc; p += 16) {
            int64_t n = kc - p < 16 ? kc - p : 16;
            __mmask16 m = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
            __m512d r[8];
            for (int i = 0; i < 8; i++)
                r[i] = i < rh ? _mm512_castps_pd(_mm512_maskz_loadu_ps(m, ah + i * lda + p)) : _mm512_setzero_pd();
            transpose8_pd(r);
            for (int j = 0; j < (n + 1) / 2; j++) _mm512_storeu_pd((double *)(d + (p / 2 + j) * 16), r[j]);
        }
    }
}

#define WT_PB 8

/* The pair tiles' accumulators (lanes 2i, 2i + 1 of acc[q][j]: the two
 * halves of C[8q + i, j]) added and stored transposed, ct[j * ldt + 8q + i]
 * (added to ct when accumulating). */
static inline __attribute__((always_inline)) void pair_store(__m512 acc[4][6], float *ct, int64_t ldt, int nw,
                                                             bool accumulate, const int P) {
    /* two panels' 16 rows per vector */
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    for (int j = 0; j < 6 && j < nw; j++) {
        for (int q = 0; q + 1 < P; q += 2) {
            float *cj = ct + j * ldt + 8 * q;
            __m512 s = _mm512_add_ps(_mm512_permutex2var_ps(acc[q][j], ev, acc[q + 1][j]),
                                     _mm512_permutex2var_ps(acc[q][j], od, acc[q + 1][j]));
            _mm512_storeu_ps(cj, accumulate ? _mm512_add_ps(s, _mm512_loadu_ps(cj)) : s);
        }
        if (P % 2) {
            float *cj = ct + j * ldt + 8 * (P - 1);
            __m512 a = acc[P - 1][j];
            __m256 s = _mm512_castps512_ps256(
                _mm512_add_ps(_mm512_permutexvar_ps(ev, a), _mm512_permutexvar_ps(od, a)));
            _mm256_storeu_ps(cj, accumulate ? _mm256_add_ps(s, _mm256_loadu_ps(cj)) : s);
        }
    }
}

static inline __attribute__((always_inline)) void wt_pair_tile(int64_t kc, const float *w, int64_t ldw, int nw,
                                                               const float *ap, float *ct, int64_t ldt,
                                                               bool accumulate, const int P, const char *pf,
                                                               int64_t pf_stride, int pf_rows, int64_t pf_bytes) {
    int64_t kcp = kc + (kc & 1), pairs = kc / 2;
    const float *wr[6];
    for (int j = 0; j < 6; j++) wr[j] = w + (nw > j ? j : nw - 1) * ldw;
    __m512 acc[4][6];
    for (int q = 0; q < P; q++)
        for (int j = 0; j < 6; j++) acc[q][j] = _mm512_setzero_ps();
    /* blocks of WT_PB pairs with no branch inside, each after its share
     * of the prefetches (per-pair bookkeeping as in pf_step took GPRs
     * the pointers needed: 16 rows 101 -> 117 GFLOP/s with the loop merely
     * unrolled twice) */
    int64_t nblk = pairs / WT_PB;
    wt_prefetch pfs = wt_prefetch_plan(pf, pf_stride, pf_rows, pf_bytes, nblk);
    const float *a = ap;
    const float *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3], *w4 = wr[4], *w5 = wr[5];
    for (int64_t b = 0; b < nblk; b++) {
        wt_prefetch_share(&pfs);
#pragma GCC unroll 8
        for (int u = 0; u < WT_PB; u++) {
            __m512 av[4];
            for (int q = 0; q < P; q++) av[q] = _mm512_loadu_ps(a + q * 8 * kcp + u * 16);
            const float *wj[6] = {w0, w1, w2, w3, w4, w5};
            for (int j = 0; j < 6; j++) {
                double d;
                memcpy(&d, wj[j] + 2 * u, 8);
                __m512 bv = _mm512_castpd_ps(_mm512_set1_pd(d));
                for (int q = 0; q < P; q++) acc[q][j] = _mm512_fmadd_ps(bv, av[q], acc[q][j]);
            }
        }
        a += WT_PB * 16;
        w0 += 2 * WT_PB, w1 += 2 * WT_PB, w2 += 2 * WT_PB, w3 += 2 * WT_PB, w4 += 2 * WT_PB, w5 += 2 * WT_PB;
    }
    for (int64_t t = nblk * WT_PB; t < pairs; t++) {
        __m512 av[4];
        for (int q = 0; q < P; q++) av[q] = _mm512_loadu_ps(ap + q * 8 * kcp + t * 16);
        for (int j = 0; j < 6; j++) {
            double d;
            memcpy(&d, wr[j] + 2 * t, 8);
            __m512 bv = _mm512_castpd_ps(_mm512_set1_pd(d));
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_fmadd_ps(bv, av[q], acc[q][j]);
        }
    }
    if (kc & 1) { /* the last k alone, in the even lanes (w past kc is not read) */
        __m512 av[4];
        for (int q = 0; q < P; q++) av[q] = _mm512_loadu_ps(ap + q * 8 * kcp + pairs * 16);
        for (int j = 0; j < 6; j++) {
            __m512 bv = _mm512_maskz_mov_ps(0x5555, _mm512_set1_ps(wr[j][kc - 1]));
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_fmadd_ps(bv, av[q], acc[q][j]);
        }
    }
    pair_store(acc, ct, ldt, nw, accumulate, P);
}

/* ct[j * ldt + i] (+)= sum_k w[j * ldw + k] a(i, k) for i < 8 * np (np <=
 * 4 panels 8 * kcp floats apart from ap, as cpu_pack_ap8_avx512 wrote
 * them) and j < nw <= 6; the prefetches as in cpu_wt_ukr_t_avx512. */
void cpu_wt_ukr_p_avx512(int64_t kc, const float *w, int64_t ldw, int nw, const float *ap, int np, float *ct,
                         int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride, int pf_rows,
                         int64_t pf_bytes) {
    switch (np) {
    case 1: wt_pair_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 1, pf, pf_stride, pf_rows, pf_bytes); break;
    case 2: wt_pair_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 2, pf, pf_stride, pf_rows, pf_bytes); break;
    case 3: wt_pair_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 3, pf, pf_stride, pf_rows, pf_bytes); break;
    default: wt_pair_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 4, pf, pf_stride, pf_rows, pf_bytes); break;
    }
}

/* The same in k quads for a bf16 weight (vdpbf16ps): lane 2i + s holds
 * row i's bf16 pair 2u + s (k = 4u + 2s, 4u + 2s + 1), and each weight
 * row's four elements 4u .. 4u + 3 are broadcast as one 64-bit value, so a
 * 16-row tile has 12 accumulators where the 16-row pair tile above
 * (wt_bf16_tile) has six. */

/* 16 rows of f32 a (rows real), kc deep, rounded to bf16 (nearest even)
 * and paired, (kc + 1) / 2 = kp pairs a row (an odd kc's last pair with a
 * zero high half) into tmp (16 * kp words), then laid out as two 8-row
 * panels of pair pairs by cpu_pack_ap8_avx512: dst[h * 8 * kpp + u * 16 +
 * 2i + s] = pair 2u + s of row 8h + i, kpp = kp rounded up to even. */
void cpu_pack_ap8_bf16_avx512(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp) {
    int64_t kp = (kc + 1) / 2;
    uint32_t *t = (uint32_t *)tmp;
    for (int i = 0; i < rows; i++)
        for (int64_t p = 0; p < kc; p += 32) {
            int64_t n = kc - p < 32 ? kc - p : 32, nl = n < 16 ? n : 16, nh = n - nl;
            __m512 lo = _mm512_maskz_loadu_ps((__mmask16)(nl >= 16 ? 0xFFFF : (1u << nl) - 1), a + i * lda + p);
            __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(nh >= 16 ? 0xFFFF : (1u << nh) - 1), a + i * lda + p + 16);
            int64_t np = (n + 1) / 2;
            _mm512_mask_storeu_epi32(t + i * kp + p / 2, (__mmask16)(np >= 16 ? 0xFFFF : (1u << np) - 1),
                                     (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    cpu_pack_ap8_avx512(tmp, kp, rows, kp, (float *)dst);
}

static inline __attribute__((always_inline)) void wt_bfq_tile(int64_t kc, const uint16_t *w, int64_t ldw, int nw,
                                                              const uint32_t *ap, float *ct, int64_t ldt,
                                                              bool accumulate, const int P, const char *pf,
                                                              int64_t pf_stride, int pf_rows, int64_t pf_bytes) {
    int64_t kp = (kc + 1) / 2, kpp = kp + (kp & 1), quads = kc / 4;
    const uint16_t *wr[6];
    for (int j = 0; j < 6; j++) wr[j] = w + (nw > j ? j : nw - 1) * ldw;
    __m512 acc[4][6];
    for (int q = 0; q < P; q++)
        for (int j = 0; j < 6; j++) acc[q][j] = _mm512_setzero_ps();
    int64_t nblk = quads / WT_PB;
    wt_prefetch pfs = wt_prefetch_plan(pf, pf_stride, pf_rows, pf_bytes, nblk);
    const uint32_t *a = ap;
    const uint16_t *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3], *w4 = wr[4], *w5 = wr[5];
    for (int64_t b = 0; b < nblk; b++) {
        wt_prefetch_share(&pfs);
#pragma GCC unroll 8
        for (int u = 0; u < WT_PB; u++) {
            __m512bh av[4];
            for (int q = 0; q < P; q++) av[q] = (__m512bh)_mm512_loadu_si512(a + q * 8 * kpp + u * 16);
            const uint16_t *wj[6] = {w0, w1, w2, w3, w4, w5};
            for (int j = 0; j < 6; j++) {
                long long x;
                memcpy(&x, wj[j] + 4 * u, 8);
                __m512bh bv = (__m512bh)_mm512_set1_epi64(x);
                for (int q = 0; q < P; q++) acc[q][j] = _mm512_dpbf16_ps(acc[q][j], av[q], bv);
            }
        }
        a += WT_PB * 16;
        w0 += 4 * WT_PB, w1 += 4 * WT_PB, w2 += 4 * WT_PB, w3 += 4 * WT_PB, w4 += 4 * WT_PB, w5 += 4 * WT_PB;
    }
    for (int64_t u = nblk * WT_PB; u <= quads; u++) {
        int64_t n = kc - 4 * u < 4 ? kc - 4 * u : 4; /* the last quad: what is left of k (A is zero past it) */
        if (n <= 0) break;
        __m512bh av[4];
        for (int q = 0; q < P; q++) av[q] = (__m512bh)_mm512_loadu_si512(ap + q * 8 * kpp + u * 16);
        for (int j = 0; j < 6; j++) {
            long long x = 0;
            memcpy(&x, wr[j] + 4 * u, (size_t)n * 2);
            __m512bh bv = (__m512bh)_mm512_set1_epi64(x);
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_dpbf16_ps(acc[q][j], av[q], bv);
        }
    }
    pair_store(acc, ct, ldt, nw, accumulate, P);
}

/* ct[j * ldt + i] (+)= sum_k w[j * ldw + k] bf16(a(i, k)) for i < 8 * np
 * (np <= 4 panels 8 * kpp words apart from ap, as cpu_pack_ap8_bf16_avx512
 * wrote them) and j < nw <= 6, bf16 weight rows read in place; the
 * prefetches as in cpu_wt_ukr_t_avx512. */
void cpu_wt_bf16_ukr_p_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *ap, int np,
                              float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                              int pf_rows, int64_t pf_bytes) {
    switch (np) {
    case 1: wt_bfq_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 1, pf, pf_stride, pf_rows, pf_bytes); break;
    case 2: wt_bfq_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 2, pf, pf_stride, pf_rows, pf_bytes); break;
    case 3: wt_bfq_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 3, pf, pf_stride, pf_rows, pf_bytes); break;
    default: wt_bfq_tile(kc, w, ldw, nw, ap, ct, ldt, accumulate, 4, pf, pf_stride, pf_rows, pf_bytes); break;
    }
}

/* c[i * ldc + j] = ct[j * ldt + i] for i < rows, j < cols: 16 x 16 blocks
 * transposed in registers (ct's columns read 16 floats at a time, masked
 * past rows; missing j read as nothing), each C row a 16-float store,
 * masked past cols. */
void cpu_wt_ct_out_avx512(const float *ct, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                          const float *bias) {
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
        int nj = cols - j0 < 16 ? (int)(cols - j0) : 16;
        __mmask16 jm = (__mmask16)(nj >= 16 ? 0xFFFF : (1u << nj) - 1);
        __m512 bv = bias ? _mm512_maskz_loadu_ps(jm, bias + j0) : _mm512_setzero_ps();
        for (int64_t i0 = 0; i0 < rows; i0 += 16) {
            int ni = rows - i0 < 16 ? (int)(rows - i0) : 16;
            __mmask16 im = (__mmask16)(ni >= 16 ? 0xFFFF : (1u << ni) - 1);
            __m512 r[16], t[16];
            for (int j = 0; j < 16; j++)
                r[j] = j < nj ? _mm512_maskz_loadu_ps(im, ct + (j0 + j) * ldt + i0) : _mm512_setzero_ps();
            /* 16 x 16 transpose: pairs, quads, 128-bit lanes, 256-bit halves */
            for (int j = 0; j < 16; j += 2) {
                t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
                t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
            }
            for (int j = 0; j < 16; j += 4) {
                __m512d a = _mm512_castps_pd(t[j]), b = _mm512_castps_pd(t[j + 2]);
                __m512d e = _mm512_castps_pd(t[j + 1]), f = _mm512_castps_pd(t[j + 3]);
                r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
                r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
                r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(e, f));
                r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(e, f));
            }
            /* r[4g + s] 128-bit lane L: row 4L + s, columns 4g .. 4g + 3 */
            for (int s = 0; s < 4; s++) {
                __m512 a = _mm512_shuffle_f32x4(r[s], r[4 + s], _MM_SHUFFLE(2, 0, 2, 0));
                __m512 b = _mm512_shuffle_f32x4(r[s], r[4 + s], _MM_SHUFFLE(3, 1, 3, 1));
                __m512 e = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], _MM_SHUFFLE(2, 0, 2, 0));
                __m512 f = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], _MM_SHUFFLE(3, 1, 3, 1));
                /* a: rows s, s + 8 (columns 0-7); b: rows s + 4, s + 12; e, f: columns 8-15 */
                t[s] = _mm512_shuffle_f32x4(a, e, _MM_SHUFFLE(2, 0, 2, 0));
                t[s + 8] = _mm512_shuffle_f32x4(a, e, _MM_SHUFFLE(3, 1, 3, 1));
                t[s + 4] = _mm512_shuffle_f32x4(b, f, _MM_SHUFFLE(2, 0, 2, 0));
                t[s + 12] = _mm512_shuffle_f32x4(b, f, _MM_SHUFFLE(3, 1, 3, 1));
            }
            for (int i = 0; i < ni; i++)
                _mm512_mask_storeu_ps(c + (i0 + i) * ldc + j0, jm, bias ? _mm512_add_ps(t[i], bv) : t[i]);
        }
    }
}

/* ---- bf16 weights through vdpbf16ps (AVX512_BF16) ----
 * The wt tile on a bf16 weight read in place: each 32-bit pair of weight
 * elements (k = 2t, 2t + 1) is broadcast against a zmm of 16 activation
 * rows x the same two k, which the packing rounded to bf16 once per
 * product (cpu_pack_at16_bf16_avx512). One vdpbf16ps does 32 multiply-adds
 * where an FMA does 16, and the weight needs no conversion; the price is
 * the activations' rounding to bf16 (8 significant bits), so results
 * differ from the exact f32 path by ~2^-9 of the terms. */

#define PACK_CHUNK 256

/* dst[t * 16 + i] = bf16(a[i, 2t]) | bf16(a[i, 2t + 1]) << 16 for t <
 * (kc + 1) / 2 (a zero past kc and past rows); tmp: 16 * PACK_CHUNK floats,
 * 32-byte aligned. Rows are transposed in f32 first (the AVX2 packing),
 * then converted two k at a time, rounding to nearest even. */
void cpu_pack_at16_bf16_avx512(const float *a, int64_t lda, int rows, int64_t kc, uint32_t *dst, float *tmp) {
    for (int64_t p0 = 0; p0 < kc; p0 += PACK_CHUNK) {
        int64_t n = kc - p0 < PACK_CHUNK ? kc - p0 : PACK_CHUNK;
        cpu_pack_at16_avx2(a + p0, lda, rows, n, tmp);
        if (n % 2) memset(tmp + n * 16, 0, 16 * sizeof(float));
        uint32_t *d = dst + p0 / 2 * 16;
        for (int64_t p = 0; p < n; p += 2) {
            __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(tmp + p * 16)));
            __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(tmp + (p + 1) * 16)));
            _mm512_storeu_si512(d + p / 2 * 16, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

static inline __attribute__((always_inline)) void wt_bf16_tile(int64_t kc, const uint16_t *w, int64_t ldw, int nw,
                                                               const uint32_t *at, int nm, float *c, int64_t ldc,
                                                               bool accumulate, const int P, const bool ct,
                                                               const char *pf, int64_t pf_stride, int pf_rows,
                                                               int64_t pf_bytes) {
    const uint16_t *wr[6];
    for (int j = 0; j < 6; j++) wr[j] = w + (nw > j ? j : nw - 1) * ldw;
    if (!ct)
        for (int i = 0; i < nm; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m512 acc[4][6];
    for (int q = 0; q < P; q++)
        for (int j = 0; j < 6; j++) acc[q][j] = _mm512_setzero_ps();
    int64_t pairs = kc / 2;
    pf_spread pfs = pf_init(pf, pf_stride, ct ? pf_rows : 0, pf_bytes, pairs);
    for (int64_t t = 0; t < pairs; t++) {
        if (ct) pf_step(&pfs);
        __m512bh av[4];
        for (int q = 0; q < P; q++) av[q] = (__m512bh)_mm512_loadu_si512(at + q * 16 * kc + t * 16);
        for (int j = 0; j < 6; j++) {
            uint32_t pr;
            memcpy(&pr, wr[j] + 2 * t, 4);
            __m512bh bv = (__m512bh)_mm512_set1_epi32((int)pr);
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_dpbf16_ps(acc[q][j], av[q], bv);
        }
    }
    if (kc % 2) { /* the last k alone: its pair's other half is zero in the packing, not read in w */
        __m512bh av[4];
        for (int q = 0; q < P; q++) av[q] = (__m512bh)_mm512_loadu_si512(at + q * 16 * kc + pairs * 16);
        for (int j = 0; j < 6; j++) {
            __m512bh bv = (__m512bh)_mm512_set1_epi32((int)wr[j][kc - 1]);
            for (int q = 0; q < P; q++) acc[q][j] = _mm512_dpbf16_ps(acc[q][j], av[q], bv);
        }
    }
    if (ct) {
        ct_store(acc, c, ldc, nw, accumulate, P);
        return;
    }
    for (int q = 0; q < P; q++) {
        float tt[6][16];
        for (int j = 0; j < 6; j++) _mm512_storeu_ps(tt[j], acc[q][j]);
        int rows = nm - 16 * q < 16 ? nm - 16 * q : 16;
        for (int i = 0; i < rows; i++) {
            float *ci = c + (16 * q + i) * ldc;
            for (int j = 0; j < nw; j++) ci[j] = accumulate ? ci[j] + tt[j][i] : tt[j][i];
        }
    }
}

/* C[i, j] (+)= sum_k bf16(a[i, k]) w[j, k] for i < nm <= 64 (panels of
 * at, 16 * kc uint32 apart, as cpu_pack_at16_bf16_avx512 wrote them), j <
 * nw <= 6 (bf16 rows ldw elements apart, read in place). */

/* The same writing C transposed (see cpu_wt_ukr_t_avx512). */
void cpu_wt_bf16_ukr_t_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                              float *ct, int64_t ldt, bool accumulate, const char *pf, int64_t pf_stride,
                              int pf_rows, int64_t pf_bytes) {
    switch ((nm + 15) / 16) {
    case 1: wt_bf16_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 1, true, pf, pf_stride, pf_rows, pf_bytes); break;
    case 2: wt_bf16_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 2, true, pf, pf_stride, pf_rows, pf_bytes); break;
    case 3: wt_bf16_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 3, true, pf, pf_stride, pf_rows, pf_bytes); break;
    default: wt_bf16_tile(kc, w, ldw, nw, at, nm, ct, ldt, accumulate, 4, true, pf, pf_stride, pf_rows, pf_bytes); break;
    }
}

void cpu_wt_bf16_ukr_avx512(int64_t kc, const uint16_t *w, int64_t ldw, int nw, const uint32_t *at, int nm,
                            float *c, int64_t ldc, bool accumulate) {
    switch ((nm + 15) / 16) {
    case 1: wt_bf16_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 1, false, NULL, 0, 0, 0); break;
    case 2: wt_bf16_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 2, false, NULL, 0, 0, 0); break;
    case 3: wt_bf16_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 3, false, NULL, 0, 0, 0); break;
    default: wt_bf16_tile(kc, w, ldw, nw, at, nm, c, ldc, accumulate, 4, false, NULL, 0, 0, 0); break;
    }
}

/* ---- bf16 B in the packed GEMM (vdpbf16ps) ----
 * Same panels and offsets as the f32 GEMM, in 32-bit words: A panels hold
 * [t][6] pairs (bf16(a[i, 2t]) | bf16(a[i, 2t + 1]) << 16), B panels
 * [t][16] pairs of the weight's own bf16 values, t < (kc + 1) / 2 (an odd
 * kc's last pair has a zero high half on both sides). The 12 x 32 tile
 * does 24 vdpbf16ps per pair of k. */

static inline uint32_t bf16_pair(float lo, float hi) {
    return (uint32_t)candle_f32_to_bf16(lo) | (uint32_t)candle_f32_to_bf16(hi) << 16;
}

static inline __attribute__((always_inline)) void bf_tile(int64_t kc, const uint32_t *a, const uint32_t *b, float *c,
                                                          int64_t ldc, int mr, int nr, bool accumulate, const int R,
                                                          const int W) {
    const uint32_t *a1 = a + kc * MR, *b1 = b + kc * NR;
    int64_t k2 = (kc + 1) / 2;
    __m512 acc[12][2];
    tile_begin(acc, c, ldc, mr, R, W);
#pragma GCC unroll 2
    for (int64_t t = 0; t < k2; t++) {
        __m512bh bv[2];
        bv[0] = (__m512bh)_mm512_loadu_si512(b + t * NR);
        if (W == 2) bv[1] = (__m512bh)_mm512_loadu_si512(b1 + t * NR);
        for (int i = 0; i < R; i++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)(i < MR ? a[t * MR + i] : a1[t * MR + i - MR]));
            for (int w = 0; w < W; w++) acc[i][w] = _mm512_dpbf16_ps(acc[i][w], av, bv[w]);
        }
    }
    tile_store(acc, c, ldc, mr, nr, accumulate, R, W);
}

void cpu_gemm_bf16_ukr2_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                               bool accumulate) {
    const uint32_t *ua = (const uint32_t *)a, *ub = (const uint32_t *)b;
    if (mr > MR) {
        if (nr > NR) bf_tile(k, ua, ub, c, ldc, mr, nr, accumulate, 12, 2);
        else bf_tile(k, ua, ub, c, ldc, mr, nr, accumulate, 12, 1);
    } else {
        if (nr > NR) bf_tile(k, ua, ub, c, ldc, mr, nr, accumulate, 6, 2);
        else bf_tile(k, ua, ub, c, ldc, mr, nr, accumulate, 6, 1);
    }
}

/* The panel's words g = t * 6 + i in three zmm of 16: word g is pair t of
 * row i; rows 2j, 2j + 1 are the halves of r[j] (lane (i % 2) * 8 + t), so
 * rows 0-3 come by one two-source permute of r0, r1 (lo: r1's lanes from
 * 16) and rows 4-5 (the hi mask's lanes) by a masked permute of r2. */
static const int A6_LO[3][16] = {
        {0, 8, 16, 24, 0, 0, 1, 9, 17, 25, 0, 0, 2, 10, 18, 26},
        {0, 0, 3, 11, 19, 27, 0, 0, 4, 12, 20, 28, 0, 0, 5, 13},
        {21, 29, 0, 0, 6, 14, 22, 30, 0, 0, 7, 15, 23, 31, 0, 0}};
static const int A6_HI[3][16] = {
        {0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 1, 9, 0, 0, 0, 0},
        {2, 10, 0, 0, 0, 0, 3, 11, 0, 0, 0, 0, 4, 12, 0, 0},
        {0, 0, 5, 13, 0, 0, 0, 0, 6, 14, 0, 0, 0, 0, 7, 15}};
static const __mmask16 A6_HI_MASK[3] = {0xc30, 0x30c3, 0xc30c};

/* One A panel of `rows` (<= 6, zero rows past them) from a(i, p) at
 * a + i * sam + p * sak (dtype at), kc deep, as bf16 pairs. Contiguous f32
 * rows: 16 k of each row converted at once (round to nearest even), the six
 * rows' 8 pairs transposed into the panel's order (word t * 6 + i) by
 * permutes, three stores (a scatter per row is microcoded on AMD and took
 * most of the packing). */
void cpu_pack_a6_bf16_avx512(candle_dtype at, const char *a, int64_t sam, int64_t sak, int rows, int64_t kc,
                             float *dst) {
    uint32_t *d = (uint32_t *)dst;
    int64_t k2 = (kc + 1) / 2, t0 = 0;
    if (at == CANDLE_DTYPE_F32 && sak == 4) {
        for (; 2 * t0 + 16 <= kc; t0 += 8) {
            __m256i v[MR];
            for (int i = 0; i < MR; i++)
                v[i] = i < rows ? (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps((const float *)(a + i * sam) + 2 * t0))
                                : _mm256_setzero_si256();
            __m512i r0 = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
            __m512i r1 = _mm512_inserti64x4(_mm512_castsi256_si512(v[2]), v[3], 1);
            __m512i r2 = _mm512_inserti64x4(_mm512_castsi256_si512(v[4]), v[5], 1);
            for (int z = 0; z < 3; z++) {
                __m512i o = _mm512_permutex2var_epi32(r0, _mm512_loadu_si512(A6_LO[z]), r1);
                o = _mm512_mask_permutexvar_epi32(o, A6_HI_MASK[z], _mm512_loadu_si512(A6_HI[z]), r2);
                _mm512_storeu_si512(d + t0 * MR + 16 * z, o);
            }
        }
    }
    for (int64_t t = t0; t < k2; t++)
        for (int i = 0; i < MR; i++) {
            float lo = 0, hi = 0;
            if (i < rows) {
                lo = (float)cdl_load_f64(at, a + i * sam + 2 * t * sak);
                hi = 2 * t + 1 < kc ? (float)cdl_load_f64(at, a + i * sam + (2 * t + 1) * sak) : 0.0f;
            }
            d[t * MR + i] = bf16_pair(lo, hi);
        }
}

/* One B panel of bf16 b(p, j) at src + p * sk + j * sn (j < nr <= 16, zero
 * past nr), kc deep, as pairs: a weight's rows (sk = 2) by 8 x 8
 * transposes of their 32-bit words, plain rows (sn = 2) by interleaving
 * two rows, anything else element by element. */
void cpu_pack_b16_bf16_avx512(const char *src, int64_t sk, int64_t sn, int64_t kc, int nr, float *dst) {
    uint32_t *d = (uint32_t *)dst;
    int64_t k2 = (kc + 1) / 2, t0 = 0;
    if (sk == 2 && sn % 4 == 0 && ((uintptr_t)src & 3) == 0) { /* whole words (the AVX2 packer reads floats) */
        t0 = kc / 2;
        cpu_pack_at16_avx2((const float *)src, sn / 4, nr, t0, dst);
    } else if (sn == 2) {
        __mmask16 m = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
        for (; 2 * t0 + 2 <= kc; t0++) {
            const char *r0 = src + 2 * t0 * sk;
            __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0));
            __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + sk));
            _mm512_storeu_si512(d + t0 * NR, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
    for (int64_t t = t0; t < k2; t++)
        for (int j = 0; j < NR; j++) {
            uint32_t lo = 0, hi = 0;
            if (j < nr) {
                lo = *(const uint16_t *)(src + 2 * t * sk + j * sn);
                if (2 * t + 1 < kc) hi = *(const uint16_t *)(src + (2 * t + 1) * sk + j * sn);
            }
            d[t * NR + j] = lo | hi << 16;
        }
}

/* One B panel of f32 rows b(p, j) = src[p * sk + j] (j < nr <= 16, zero
 * past nr), kc deep, as bf16 pairs rounded to nearest even: two rows
 * converted and interleaved per pair; an odd kc's last pair has a zero
 * high half. */
void cpu_pack_b16_f32_bf16_avx512(const float *src, int64_t sk, int64_t kc, int nr, uint32_t *dst) {
    __mmask16 m = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    for (int64_t t = 0; 2 * t < kc; t++) {
        __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + 2 * t * sk)));
        __m512i hi = _mm512_setzero_si512();
        if (2 * t + 1 < kc)
            hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + (2 * t + 1) * sk)));
        _mm512_storeu_si512(dst + t * NR, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

void cpu_f32_to_bf16_avx512(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

/* Each block: d (f16) times its 32 codes in f32, as q8_0's own dequantization
 * computes them, then both halves rounded in one vcvtne2ps2bf16. */
void cpu_q8_0_to_bf16_avx512(const void *blocks, uint16_t *dst, int64_t n) {
    const uint8_t *b = blocks;
    for (int64_t i = 0; i < n; i += 32, b += 34) {
        uint16_t h;
        memcpy(&h, b, 2);
        __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
        __m512 f0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)))));
        __m512 f1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)))));
        _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(f1, f0));
    }
}

/* ---- matrix-vector rows of f16 / bf16 (dot_rows) ----
 * One row at a time, a single sequential stream, for every row length,
 * prefetched DOT_H_PF bytes ahead (candle_stream_prefetch: non-temporal
 * on AMD, read once per token), 16 elements
 * converted per instruction (vcvtph2ps zmm, or a 16-bit shift for bf16) and
 * masked loads for the tail; f32 rows stay on the AVX2 kernels. The AVX2
 * kernels' four rows per pass with the next four rows prefetched
 * (simd_avx2.c, rows past 2 KiB) streamed slower from memory on Zen 5:
 * tinyllama-shape decode products (q, k, v, o, gate, up, down of 8 layers,
 * 700 MB of f16, 2 threads, a barrier after each product, medians of 7-9
 * alternating passes) 54.3 GB/s for four rows against 58.9 for one row
 * without prefetch (56.3 with one 2 KiB ahead) in a quiet window; four rows
 * each prefetched within the row 14-18: the hardware prefetchers follow one
 * stream per thread, not four rows 4 KiB apart. With the prefetches 8 KiB
 * ahead and non-temporal (they were 1 KiB ahead into L1, and only for rows
 * of at most 2 KiB) decoding went, candle bench -p 0 -t 2 alternating:
 * SmolLM2-135M F16 225-233 -> 270-276 t/s, gemma-3-270m F16 111-118 ->
 * 135-140, tinyllama-shape F16 (4 KiB rows, no prefetch before) 31-33 ->
 * 35-38. */
#define DOT_H_PF 8192

static inline __m512 ld16h(bool f16, const char *p) {
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 ld16h_tail(bool f16, const char *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void dot_rows1_h(bool f16, int64_t k, const char *w,
                                                              size_t ws, int64_t n_rows, const float *x,
                                                              float *out, int64_t os) {
    int64_t tail = k % 16;
    __mmask16 tm = (__mmask16)((1u << tail) - 1);
    for (int64_t r = 0; r < n_rows; r++) {
        const char *w0 = w + r * (int64_t)ws;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 64 <= k; i += 64) {
            candle_stream_prefetch(w0 + i * 2 + DOT_H_PF);
            candle_stream_prefetch(w0 + i * 2 + DOT_H_PF + 64);
            a0 = _mm512_fmadd_ps(ld16h(f16, w0 + i * 2), _mm512_loadu_ps(x + i), a0);
            a1 = _mm512_fmadd_ps(ld16h(f16, w0 + i * 2 + 32), _mm512_loadu_ps(x + i + 16), a1);
            a2 = _mm512_fmadd_ps(ld16h(f16, w0 + i * 2 + 64), _mm512_loadu_ps(x + i + 32), a2);
            a3 = _mm512_fmadd_ps(ld16h(f16, w0 + i * 2 + 96), _mm512_loadu_ps(x + i + 48), a3);
        }
        for (; i + 16 <= k; i += 16) a0 = _mm512_fmadd_ps(ld16h(f16, w0 + i * 2), _mm512_loadu_ps(x + i), a0);
        if (tail) a1 = _mm512_fmadd_ps(ld16h_tail(f16, w0 + i * 2, tm), _mm512_maskz_loadu_ps(tm, x + i), a1);
        out[r * os] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
}

void cpu_dot_rows_avx512(candle_dtype wt, int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                         const float *x, float *out, int64_t out_stride) {
    if (wt != CANDLE_DTYPE_F16 && wt != CANDLE_DTYPE_BF16) {
        cpu_simd_avx2.dot_rows(wt, k, w, w_stride, n_rows, x, out, out_stride);
        return;
    }
    if (wt == CANDLE_DTYPE_F16) dot_rows1_h(true, k, w, w_stride, n_rows, x, out, out_stride);
    else dot_rows1_h(false, k, w, w_stride, n_rows, x, out, out_stride);
}

/* ---- small-M dot-product tiles (gemm_dot) on zmm ----
 * The AVX2 4 x 3 tile of dot products (a rows x weight rows, the weight
 * read as it is) on 16 k per step: 12 accumulators, 4 + 3 loads per 12
 * FMAs, masked loads for the tail. Rows past mr / nr repeat the last one
 * (valid memory); their sums are dropped. */

static inline __m512 ld16w(candle_dtype wt, const char *p, __mmask16 m) {
    if (wt == CANDLE_DTYPE_F32) return _mm512_maskz_loadu_ps(m, p);
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return wt == CANDLE_DTYPE_F16 ? _mm512_cvtph_ps(h)
                                  : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 ld16w_full(candle_dtype wt, const char *p) {
    if (wt == CANDLE_DTYPE_F32) return _mm512_loadu_ps(p);
    return ld16h(wt == CANDLE_DTYPE_F16, p);
}

static inline __attribute__((always_inline)) void gemm_dot_t(candle_dtype wt, int64_t k, const float *a,
                                                             int64_t lda, const char *w, int64_t ldw, float *c,
                                                             int64_t ldc, int mr, int nr, bool accumulate) {
    int64_t esz = wt == CANDLE_DTYPE_F32 ? 4 : 2;
    const float *ar[4];
    const char *wr[3];
    for (int i = 0; i < 4; i++) ar[i] = a + (mr > i ? i : mr - 1) * lda;
    for (int j = 0; j < 3; j++) wr[j] = w + (nr > j ? j : nr - 1) * ldw;
    __m512 s[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) s[i][j] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        __m512 b[3];
        for (int j = 0; j < 3; j++) b[j] = ld16w_full(wt, wr[j] + p * esz);
        for (int i = 0; i < 4; i++) {
            __m512 x = _mm512_loadu_ps(ar[i] + p);
            for (int j = 0; j < 3; j++) s[i][j] = _mm512_fmadd_ps(x, b[j], s[i][j]);
        }
    }
    if (p < k) {
        __mmask16 m = (__mmask16)((1u << (k - p)) - 1);
        __m512 b[3];
        for (int j = 0; j < 3; j++) b[j] = ld16w(wt, wr[j] + p * esz, m);
        for (int i = 0; i < 4; i++) {
            __m512 x = _mm512_maskz_loadu_ps(m, ar[i] + p);
            for (int j = 0; j < 3; j++) s[i][j] = _mm512_fmadd_ps(x, b[j], s[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float v = _mm512_reduce_add_ps(s[i][j]);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + v : v;
        }
}

void cpu_gemm_dot_avx512(int64_t k, const float *a, int64_t lda, const char *w, int64_t ldw, candle_dtype wt,
                         float *c, int64_t ldc, int mr, int nr, bool accumulate) {
    if (wt == CANDLE_DTYPE_F32) gemm_dot_t(CANDLE_DTYPE_F32, k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
    else if (wt == CANDLE_DTYPE_F16) gemm_dot_t(CANDLE_DTYPE_F16, k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
    else gemm_dot_t(CANDLE_DTYPE_BF16, k, a, lda, w, ldw, c, ldc, mr, nr, accumulate);
}

/* ---- f16 / bf16 weight rows to f32 for the wt tile (fast_matmul.c's
 * wt_rows) ----
 * 16 elements per conversion (vcvtph2ps zmm, or a 16-bit shift for bf16)
 * where the AVX2 table's to_f32 does 8; a masked tail. Same values. */

static inline __attribute__((always_inline)) void half_rows_t(bool f16, const char *s, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(dst + i, ld16h(f16, s + i * 2));
        _mm512_storeu_ps(dst + i + 16, ld16h(f16, s + i * 2 + 32));
    }
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, ld16h_tail(f16, s + i * 2, m));
    }
}

void cpu_half_to_f32_avx512(bool f16, const void *src, float *dst, int64_t n) {
    if (f16) half_rows_t(true, src, dst, n);
    else half_rows_t(false, src, dst, n);
}
