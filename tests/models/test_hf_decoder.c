/* Decoder LLMs from Hugging Face directories against transformers and
 * against the GGUF llama.cpp's converter made from the same weights: tiny
 * random models of each family (tests/data/hf, made by
 * scripts/gen_hf_decoder_goldens.py). Logits of 16 tokens at every position
 * must match transformers' within 1e-5 NMSE, and the GGUF's too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

#define N_TOK 16
#define MAX_NMSE 1e-5

typedef struct golden {
    int32_t tokens[N_TOK];
    int64_t n_vocab;
    float *logits; /* [N_TOK, n_vocab] */
} golden;

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static bool read_golden(const char *dir, golden *g) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%s/golden.json", dir);
    char *text = slurp(path, &n);
    json_doc *d = NULL;
    bool ok = text && !json_parse(&d, text, n, path, NULL);
    const json_value *toks = json_get(json_root(d), "tokens");
    ok = ok && toks && toks->n == N_TOK && json_as_i64(json_get(json_root(d), "n_vocab"), &g->n_vocab);
    for (size_t i = 0; ok && i < N_TOK; i++) {
        int64_t t;
        ok = json_as_i64(json_at(toks, i), &t);
        g->tokens[i] = (int32_t)t;
    }
    json_free(d);
    free(text);
    snprintf(path, sizeof path, "%s/golden_logits.bin", dir);
    g->logits = ok ? (float *)slurp(path, &n) : NULL;
    ok = g->logits && n == (size_t)(N_TOK * g->n_vocab) * sizeof(float);
    CHECK_MSG(ok, "%s: unreadable golden", dir);
    return ok;
}

static double nmse(const float *got, const float *ref, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        e += d * d;
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

/* The logits of the golden tokens at every position, or NULL. */
static float *run(const char *path, const golden *g) {
    candle_model *m = NULL;
    if (candle_model_load(&m, path, NULL)) {
        CHECK_MSG(false, "%s: %s", path, candle_last_errmsg());
        return NULL;
    }
    candle_session *s = NULL;
    float *logits = malloc((size_t)(N_TOK * g->n_vocab) * sizeof *logits);
    CHECK(candle_model_get_config(m)->n_vocab == g->n_vocab);
    bool ok = logits && !candle_session_init(&s, m, NULL) &&
              !candle_session_eval(s, g->tokens, N_TOK, logits, true);
    CHECK_MSG(ok, "%s: %s", path, s ? candle_session_errmsg(s) : candle_last_errmsg());
    candle_session_free(s);
    candle_model_free(m);
    if (!ok) free(logits);
    return ok ? logits : NULL;
}

/* candle quantize DIR OUT.gguf f32: the GGUF Candle writes from the
 * directory (llama's q/k rows permuted as llama.cpp's converter does) gives
 * the directory's logits. */
static void check_quantized(const char *name, const char *dir, const golden *g, const float *hf) {
    char out[512];
    snprintf(out, sizeof out, "%s/candle-hf-%s-%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             name, (int)getpid());
    candle_status s = candle_quantize_file(dir, out, CANDLE_FTYPE_ALL_F32, NULL);
    CHECK_MSG(!s, "quantize %s: %s", dir, candle_last_errmsg());
    float *q = s ? NULL : run(out, g);
    if (q) {
        double e = nmse(q, hf, (size_t)(N_TOK * g->n_vocab));
        printf("%-10s candle quantize DIR f32: NMSE vs directory %.2e\n", name, e);
        CHECK_MSG(e < MAX_NMSE, "%s: quantized GGUF NMSE %.3g", name, e);
    }
    free(q);
    unlink(out);
}

static void check_family(const char *name) {
    char rel[128], dir[1024], gguf[1200];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", name);
    test_path(rel, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, name);
    golden g = {0};
    if (!read_golden(dir, &g)) return;
    size_t n = (size_t)(N_TOK * g.n_vocab);
    float *hf = run(dir, &g), *gg = run(gguf, &g);
    if (hf && gg) {
        double e_hf = nmse(hf, g.logits, n), e_gg = nmse(gg, g.logits, n), e_x = nmse(gg, hf, n);
        printf("%-10s NMSE vs transformers: directory %.2e, GGUF %.2e; GGUF vs directory %.2e\n",
               name, e_hf, e_gg, e_x);
        CHECK_MSG(e_hf < MAX_NMSE, "%s: directory NMSE %.3g", name, e_hf);
        CHECK_MSG(e_gg < MAX_NMSE, "%s: GGUF NMSE %.3g", name, e_gg);
        CHECK_MSG(e_x < MAX_NMSE, "%s: GGUF vs directory NMSE %.3g", name, e_x);
        check_quantized(name, dir, &g, hf);
    }
    free(hf);
    free(gg);
    free(g.logits);
}

/* Llama 3.1+ RoPE scaling is not implemented yet: both forms of the model
 * are refused by name rather than run unscaled. */
static void check_refused(const char *name) {
    char rel[128], dir[1024], gguf[1200];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", name);
    test_path(rel, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, name);
    candle_model *m = NULL;
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_ERR_UNSUPPORTED && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "RoPE scaling type 'llama3'");
    CHECK(candle_model_load(&m, gguf, NULL) == CANDLE_ERR_UNSUPPORTED && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "rope_freqs.weight");
}

int main(void) {
    static const char *const families[] = {"llama2", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) check_family(families[i]);
    static const char *const llama31[] = {"llama", "llama-bf16", "llama-f16"};
    for (size_t i = 0; i < sizeof llama31 / sizeof llama31[0]; i++) check_refused(llama31[i]);
    return test_done("test_hf_decoder");
}
