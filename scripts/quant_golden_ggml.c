/* Golden quantized blocks from ggml's reference quantizers, for the types the
 * gguf package cannot quantize (the K types, q8_1, iq4_nl, iq4_xs).
 *
 * Not part of the build: scripts/make_quant_golden_ggml.sh compiles it
 * against a ggml source checkout (ggml-org/ggml: src/ggml-quants.c) and
 * writes tests/data/quant/<type>.q in the same format as
 * make_quant_golden.py: float32 input, then the quantized blocks. The input
 * is deterministic (xorshift Gaussian plus a few special blocks). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml symbols the quantizers reference but these paths never call */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    (void)fmt;
    fprintf(stderr, "ggml_abort %s:%d\n", file, line);
    abort();
}
void ggml_log_internal(int level, const char *fmt, ...) { (void)level, (void)fmt; }
size_t ggml_row_size(int type, int64_t ne) { (void)type, (void)ne; abort(); }
const char *ggml_type_name(int type) { (void)type; return "?"; }
size_t ggml_type_size(int type) { (void)type; abort(); }

typedef void (*row_fn)(const float *, void *, int64_t);
void quantize_row_q8_1_ref(const float *, void *, int64_t);
void quantize_row_q2_K_ref(const float *, void *, int64_t);
void quantize_row_q3_K_ref(const float *, void *, int64_t);
void quantize_row_q4_K_ref(const float *, void *, int64_t);
void quantize_row_q5_K_ref(const float *, void *, int64_t);
void quantize_row_q6_K_ref(const float *, void *, int64_t);
void quantize_row_q8_K_ref(const float *, void *, int64_t);
size_t quantize_iq4_nl(const float *, void *, int64_t, int64_t, const float *);
size_t quantize_iq4_xs(const float *, void *, int64_t, int64_t, const float *);
static void iq4_nl(const float *x, void *y, int64_t n) { quantize_iq4_nl(x, y, 1, n, NULL); }
static void iq4_xs(const float *x, void *y, int64_t n) { quantize_iq4_xs(x, y, 1, n, NULL); }

static uint64_t state = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/quant";
    static const struct {
        const char *name;
        row_fn fn;
        int block, size;
    } types[] = {
        {"q8_1", quantize_row_q8_1_ref, 32, 36}, {"q2_k", quantize_row_q2_K_ref, 256, 84},
        {"q3_k", quantize_row_q3_K_ref, 256, 110}, {"q4_k", quantize_row_q4_K_ref, 256, 144},
        {"q5_k", quantize_row_q5_K_ref, 256, 176}, {"q6_k", quantize_row_q6_K_ref, 256, 210},
        {"q8_k", quantize_row_q8_K_ref, 256, 292}, {"iq4_nl", iq4_nl, 32, 18},
        {"iq4_xs", iq4_xs, 256, 136},
    };
    enum { N = 6 * 256 };
    static float x[N];
    static unsigned char q[N * 2];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (int i = 0; i < N; i++) x[i] = gauss();
        for (int i = 0; i < 256; i++) x[i] = 0;                               /* zero block */
        for (int i = 256; i < 512; i++) x[i] *= (float)(1 + (i / 16) % 5);     /* uneven sub-block scales */
        for (int i = 512; i < 768; i++) x[i] = x[i] * x[i] * x[i];             /* heavy tails */
        for (int i = 768; i < 1024; i++) x[i] = fabsf(x[i]) + 0.5f;            /* all positive: minimums */
        for (int i = 1024; i < 1280; i++) x[i] *= 1e-3f;
        size_t qbytes = (size_t)(N / types[t].block) * (size_t)types[t].size;
        memset(q, 0, sizeof q);
        types[t].fn(x, q, N);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.q", dir, types[t].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(x, 4, N, f) != N || fwrite(q, 1, qbytes, f) != qbytes || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
    }
    printf("wrote %s/{q8_1,q2_k,q3_k,q4_k,q5_k,q6_k,q8_k,iq4_nl,iq4_xs}.q\n", dir);
    return 0;
}
