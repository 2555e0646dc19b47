/* The arm64 NEON quantized dots (src/quant/arm/) against the scalar
 * reference, bit for bit: q4_0, q4_1, q5_0, q5_1, q8_0 (and q4_z128) single-row dots and the
 * multi-row product, q4_K, q5_K and q6_K single-row dots and multi-row product, plain NEON and (where the CPU has it) dotprod, any code
 * pattern (random bytes: q8 codes down to -128), scales from subnormal to
 * large, 1 to 33 blocks (the 4-block groups and their tails), unaligned
 * rows, weight rows wider apart than a row, M and N with tails; and the NEON
 * activation quantizers (q8_0, q8_1, q8_K from_f32) byte for byte. Under qemu
 * (make test-arm64) it runs as -cpu max and as a Cortex-A57 (no dotprod);
 * elsewhere it only checks that no NEON kernel was registered. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/quant/qgemm-impl.h"
#include "backend/cpu/quant/quant-kernels-impl.h"
#if defined(__aarch64__)
#include "backend/cpu/quant/arm/quant-arm-impl.h"
#endif
#include "test.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* finite f16 bits: normal (exponents 1-24: up to 2^9) and some subnormal */
static uint16_t rnd_f16(void) {
    uint16_t sign = (uint16_t)((rnd() & 1) << 15), mant = (uint16_t)(rnd() & 0x3ff);
    uint16_t ex = (uint16_t)(rnd() % 8 == 0 ? 0 : 1 + rnd() % 24);
    return (uint16_t)(sign | (ex << 10) | mant);
}

/* nb random blocks of size bs, the f16 fields (offsets of f16s) random
 * finite; extreme: every code byte 0x80 (q8: -128; q4: 0 and 8) */
static void fill_blocks(char *p, int64_t nb, size_t bs, const int *f16_at, int n_f16, int extreme) {
    for (int64_t b = 0; b < nb; b++) {
        char *blk = p + (size_t)b * bs;
        for (size_t i = 0; i < bs; i++) blk[i] = extreme ? (char)0x80 : (char)rnd();
        for (int j = 0; j < n_f16; j++) {
            uint16_t h = rnd_f16();
            memcpy(blk + f16_at[j], &h, 2);
        }
    }
}

typedef struct neon_case {
    candle_dtype t;
    size_t wsz, xsz;
    int w_f16[2], n_wf16, x_f16[4], n_xf16;
    candle_vec_dot_fn ref, neon, dotprod;
    int qk;   /* elements per block */
    int x_f32; /* q8_K: its float scale's offset (-1: none) */
    int rows; /* multi-row kernel: 1 at any address (legacy), 2 at the blocks' alignment (K) */
} neon_case;

/* a finite float scale (q8_K's d): up to about 2^8 in magnitude */
static void set_f32(char *blk, int at) {
    float v = ((float)(rnd() % 2000001) - 1000000.0f) * 0x1p-12f;
    memcpy(blk + at, &v, 4);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_case(const neon_case *c, int64_t nb, int extreme, int dp) {
    int64_t K = nb * c->qk;
    /* the 32-element types at an odd address (their NEON kernels read any
     * address; the scalar reference and the K kernels want the blocks'
     * natural alignment: the reference reads aligned copies) */
    size_t off = c->rows == 1 ? 1 : 0, wb = c->wsz * (size_t)nb, xb = c->xsz * (size_t)nb;
    char *wbuf = malloc(wb + 1), *xbuf = malloc(xb + 1), *wa = malloc(wb), *xa = malloc(xb);
    char *w = wbuf + off, *x = xbuf + off;
    fill_blocks(wa, nb, c->wsz, c->w_f16, c->n_wf16, extreme);
    fill_blocks(xa, nb, c->xsz, c->x_f16, c->n_xf16, extreme);
    if (c->x_f32 >= 0)
        for (int64_t b = 0; b < nb; b++) set_f32(xa + (size_t)b * c->xsz, c->x_f32);
    memcpy(w, wa, wb);
    memcpy(x, xa, xb);
    float want, got;
    c->ref(K, &want, wa, xa);
    c->neon(K, &got, w, x);
    CHECK_MSG(same_bits(got, want), "%s neon nb %lld%s: %.9g, scalar %.9g", candle_dtype_name(c->t), (long long)nb,
              extreme ? " extreme" : "", got, want);
    if (dp) {
        c->dotprod(K, &got, w, x);
        CHECK_MSG(same_bits(got, want), "%s dotprod nb %lld%s: %.9g, scalar %.9g", candle_dtype_name(c->t),
                  (long long)nb, extreme ? " extreme" : "", got, want);
    }
    free(wbuf), free(xbuf), free(wa), free(xa);
}

static void check_rows(const neon_case *c, int64_t nb, int64_t M, int64_t N, int dp) {
    int64_t K = nb * c->qk, ldc = N + 2;
    /* legacy: odd strides from odd addresses; K: wider strides, aligned */
    int odd = c->rows == 1;
    size_t row = c->wsz * (size_t)nb, ws = row + c->wsz + (odd ? 3 : 2), xs = c->xsz * (size_t)nb + (odd ? 5 : 4);
    char *wbase = malloc(ws * (size_t)N + 4), *xbase = malloc(xs * (size_t)M + 4);
    char *w = wbase + (odd ? 0 : 3), *x = xbase + (odd ? 0 : 3); /* rows at w + 1, x + 1: odd, or 4-aligned */
    /* aligned copies for the scalar reference */
    char *wa = malloc(row * (size_t)N), *xa = malloc(c->xsz * (size_t)nb * (size_t)M);
    for (int64_t n = 0; n < N; n++) {
        fill_blocks(wa + (size_t)n * row, nb, c->wsz, c->w_f16, c->n_wf16, 0);
        memcpy(w + 1 + (size_t)n * ws, wa + (size_t)n * row, row);
    }
    for (int64_t m = 0; m < M; m++) {
        fill_blocks(xa + (size_t)m * c->xsz * (size_t)nb, nb, c->xsz, c->x_f16, c->n_xf16, 0);
        if (c->x_f32 >= 0)
            for (int64_t bi = 0; bi < nb; bi++) set_f32(xa + ((size_t)m * (size_t)nb + (size_t)bi) * c->xsz, c->x_f32);
        memcpy(x + 1 + (size_t)m * xs, xa + (size_t)m * c->xsz * (size_t)nb, c->xsz * (size_t)nb);
    }
    float *out = malloc(sizeof(float) * (size_t)(M * ldc));
    for (int v = 0; v < 1 + dp; v++) {
        for (int64_t i = 0; i < M * ldc; i++) out[i] = -7.0f;
        int ok = (v ? cdl_qgemm_rows_dotprod : cdl_qgemm_rows_neon)(c->t, K, M, N, w + 1, ws, x + 1, xs, out,
                                                                          ldc);
        CHECK_MSG(ok, "%s: no multi-row kernel", candle_dtype_name(c->t));
        int bad = 0;
        for (int64_t m = 0; m < M && !bad; m++)
            for (int64_t n = 0; n < ldc && !bad; n++) {
                float want = -7.0f;
                if (n < N) c->ref(K, &want, wa + (size_t)n * row, xa + (size_t)m * c->xsz * (size_t)nb);
                if (!same_bits(out[m * ldc + n], want)) {
                    CHECK_MSG(0, "%s %s rows M %lld N %lld nb %lld: c[%lld][%lld] = %.9g, scalar %.9g",
                              candle_dtype_name(c->t), v ? "dotprod" : "neon", (long long)M, (long long)N,
                              (long long)nb, (long long)m, (long long)n, out[m * ldc + n], want);
                    bad = 1;
                }
            }
        CHECK(!bad);
    }
    free(wbase), free(xbase), free(wa), free(xa), free(out);
}

/* ---- the activation quantizers (arm/quantize_neon.c) ---- */

/* Block b of a row (elements qk * b ...) in one of several patterns: random
 * magnitudes, exact ties after scaling (q8_0/q8_1: amax 127 gives id 1;
 * q8_K: max -127 gives iscale 1, so k + 0.5 shows the rounding mode), a
 * subnormal or tiny amax (infinite id), +-inf, NaN, zeros, equal +-amax
 * (the first one gives q8_K its sign). */
static void fill_act(float *x, int qk, int pattern) {
    for (int j = 0; j < qk; j++) {
        float u = (float)(rnd() % 2000001) * 1e-6f - 1.0f; /* [-1, 1] */
        switch (pattern) {
        case 0: x[j] = u * (float)(1 + rnd() % 1000); break;
        case 1: x[j] = (float)((int)(rnd() % 253) - 126) + (rnd() % 2 ? 0.5f : 0.0f); break;
        case 2: x[j] = u * 1e-38f; break;                  /* amax / 127 subnormal */
        case 3: x[j] = u * 3e-41f; break;                  /* subnormal inputs, id infinite */
        case 4: x[j] = j % 5 == 1 ? (rnd() % 2 ? INFINITY : -INFINITY) : u; break;
        case 5: x[j] = j % 7 == 3 ? NAN : u * 10; break;
        case 6: x[j] = 0.0f; break;
        default: x[j] = j == 3 ? 9.0f : j == 1 ? -9.0f : u; break; /* -9 first */
        }
    }
    if (pattern == 1) {
        x[qk / 2] = 127.0f; /* amax 127: d 1 (q8_0), a positive max */
        x[qk / 3] = -127.0f; /* the first of magnitude 127: q8_K's iscale 1 */
    }
}

static void check_quantizers(void) {
    typedef void (*qfn)(const float *, void *, int64_t);
    static const struct {
        candle_dtype t;
        int qk;
        size_t bs;
        qfn ref, neon;
    } qs[] = {
        {CANDLE_DTYPE_Q8_0, 32, sizeof(block_q8_0), cdl_q8_0_from_f32, cdl_q8_0_from_f32_neon},
        {CANDLE_DTYPE_Q8_1, 32, sizeof(block_q8_1), cdl_q8_1_from_f32, cdl_q8_1_from_f32_neon},
        {CANDLE_DTYPE_Q8_K, 256, sizeof(block_q8_K), cdl_q8_k_from_f32, cdl_q8_k_from_f32_neon},
    };
    static const int64_t nbs[] = {1, 2, 3, 8, 9};
    for (size_t t = 0; t < sizeof qs / sizeof qs[0]; t++)
        for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++)
            for (int rep = 0; rep < 4; rep++) {
                int64_t nb = nbs[ni], n = nb * qs[t].qk;
                float *xb = malloc(sizeof(float) * (size_t)(n + 1)), *x = xb + (rep & 1); /* 16-byte aligned or not */
                char *a = malloc(qs[t].bs * (size_t)nb), *b = malloc(qs[t].bs * (size_t)nb);
                for (int64_t bi = 0; bi < nb; bi++) fill_act(x + bi * qs[t].qk, qs[t].qk, (int)((bi + ni + 3 * rep) % 8));
                memset(a, 0x5a, qs[t].bs * (size_t)nb);
                memset(b, 0x5a, qs[t].bs * (size_t)nb);
                qs[t].ref(x, a, n);
                qs[t].neon(x, b, n);
                int bad = -1;
                for (int64_t bi = 0; bi < nb && bad < 0; bi++)
                    if (memcmp(a + bi * qs[t].bs, b + bi * qs[t].bs, qs[t].bs)) bad = (int)bi;
                CHECK_MSG(bad < 0, "%s from_f32 nb %lld rep %d: block %d (pattern %d) differs from the scalar bytes",
                          candle_dtype_name(qs[t].t), (long long)nb, rep, bad, (int)((bad + ni + 3 * rep) % 8));
                free(xb), free(a), free(b);
            }
}

int main(void) {
    int dp = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    const char *sc = getenv("CANDLE_QUANT_SCALAR"), *nd = getenv("CANDLE_QUANT_NO_DOTPROD");
    int scalar = sc && *sc && *sc != '0', no_dp = nd && *nd && *nd != '0';
    /* the registration follows the CPU and the switches */
    CHECK(cdl_quant_uses_neon() == !scalar);
    CHECK(cdl_quant_uses_dotprod() == (!scalar && dp && !no_dp));
    CHECK(cpu_dtype(CANDLE_DTYPE_Q8_0)->vec_dot ==
          (scalar ? cdl_vec_dot_q8_0_q8_0
                  : cdl_quant_uses_dotprod() ? cdl_vec_dot_q8_0_q8_0_dotprod : cdl_vec_dot_q8_0_q8_0_neon));
    CHECK(cpu_dtype(CANDLE_DTYPE_Q8_0)->from_f32 == (scalar ? cdl_q8_0_from_f32 : cdl_q8_0_from_f32_neon));
    CHECK(cpu_dtype(CANDLE_DTYPE_Q8_K)->from_f32 == (scalar ? cdl_q8_k_from_f32 : cdl_q8_k_from_f32_neon));
    check_quantizers();
    static const neon_case cases[] = {
        {CANDLE_DTYPE_Q4_0, sizeof(block_q4_0), sizeof(block_q8_0), {0}, 1, {0}, 1, cdl_vec_dot_q4_0_q8_0,
         cdl_vec_dot_q4_0_q8_0_neon, cdl_vec_dot_q4_0_q8_0_dotprod, 32, -1, 1},
        {CANDLE_DTYPE_Q4_1, sizeof(block_q4_1), sizeof(block_q8_1), {0, 2}, 2, {0, 2}, 2, cdl_vec_dot_q4_1_q8_1,
         cdl_vec_dot_q4_1_q8_1_neon, cdl_vec_dot_q4_1_q8_1_dotprod, 32, -1, 1},
        {CANDLE_DTYPE_Q8_0, sizeof(block_q8_0), sizeof(block_q8_0), {0}, 1, {0}, 1, cdl_vec_dot_q8_0_q8_0,
         cdl_vec_dot_q8_0_q8_0_neon, cdl_vec_dot_q8_0_q8_0_dotprod, 32, -1, 1},
        {CANDLE_DTYPE_Q5_0, sizeof(block_q5_0), sizeof(block_q8_0), {0}, 1, {0}, 1, cdl_vec_dot_q5_0_q8_0,
         cdl_vec_dot_q5_0_q8_0_neon, cdl_vec_dot_q5_0_q8_0_dotprod, 32, -1, 1},
        {CANDLE_DTYPE_Q5_1, sizeof(block_q5_1), sizeof(block_q8_1), {0, 2}, 2, {0, 2}, 2, cdl_vec_dot_q5_1_q8_1,
         cdl_vec_dot_q5_1_q8_1_neon, cdl_vec_dot_q5_1_q8_1_dotprod, 32, -1, 1},
        /* K types: random bytes for the codes, scales, mins and q8_K's bsums */
        {CANDLE_DTYPE_Q4_K, sizeof(block_q4_K), sizeof(block_q8_K), {0, 2}, 2, {0}, 0, cdl_vec_dot_q4_k_q8_k,
         cdl_vec_dot_q4_k_q8_k_neon, cdl_vec_dot_q4_k_q8_k_dotprod, 256, 0, 2},
        {CANDLE_DTYPE_Q5_K, sizeof(block_q5_K), sizeof(block_q8_K), {0, 2}, 2, {0}, 0, cdl_vec_dot_q5_k_q8_k,
         cdl_vec_dot_q5_k_q8_k_neon, cdl_vec_dot_q5_k_q8_k_dotprod, 256, 0, 2},
        {CANDLE_DTYPE_Q6_K, sizeof(block_q6_K), sizeof(block_q8_K), {(int)offsetof(block_q6_K, d)}, 1, {0}, 0, cdl_vec_dot_q6_k_q8_k,
         cdl_vec_dot_q6_k_q8_k_neon, cdl_vec_dot_q6_k_q8_k_dotprod, 256, 0, 2},
        /* q4_z128 against its four q8_0 blocks (one x block of 136 bytes); single-row only */
        {CANDLE_DTYPE_Q4_Z128, sizeof(block_q4_z128), 4 * sizeof(block_q8_0), {0}, 1, {0, 34, 68, 102}, 4,
         cdl_vec_dot_q4_z128_q8_0, cdl_vec_dot_q4_z128_q8_0_neon, cdl_vec_dot_q4_z128_q8_0_dotprod, 128, -1, 0},
    };
    static const int64_t nbs[] = {1, 2, 3, 4, 5, 7, 8, 9, 18, 33};
    static const int64_t Ms[] = {1, 3, 4, 5, 9}, Ns[] = {1, 5, 16, 17, 33};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (size_t i = 0; i < sizeof nbs / sizeof nbs[0]; i++)
            for (int rep = 0; rep < 8; rep++) check_case(&cases[ci], nbs[i], 0, dp);
        check_case(&cases[ci], 5, 1, dp);
        for (size_t i = 0; cases[ci].rows && i < sizeof Ms / sizeof Ms[0]; i++)
            for (size_t j = 0; j < sizeof Ns / sizeof Ns[0]; j++) check_rows(&cases[ci], 1 + (int64_t)(i + j) % 6, Ms[i], Ns[j], dp);
    }
    printf("dotprod %s\n", dp ? "checked" : "absent (plain NEON only)");
    return test_done("test_quant_neon");
}
#else
int main(void) {
    CHECK(!cdl_quant_uses_neon() && !cdl_quant_uses_dotprod());
    printf("not aarch64: no NEON kernels\n");
    return test_done("test_quant_neon");
}
#endif
