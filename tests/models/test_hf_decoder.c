/* Decoder LLMs from Hugging Face directories against transformers and
 * against the GGUF llama.cpp's converter made from the same weights: tiny
 * random models of each family and RoPE scaling (tests/data/hf, made by
 * scripts/gen_hf_decoder_goldens.py and scripts/gen_hf_rope_goldens.py).
 * Logits of each golden's tokens (16, or 6 for Phi-3's short regime) at
 * every position must match transformers' within 1e-5 NMSE, and the
 * GGUF's too. Sessions hold exactly the golden's tokens: Phi-3's long-rope
 * factors switch on the context (model_rope_factors), transformers' on the
 * forward's length, and the two agree there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"
#include "core/json-impl.h"
#include "test.h"

#define MAX_TOK 64
#define MAX_NMSE 1e-5

typedef struct golden {
    int32_t tokens[MAX_TOK];
    int64_t n_tok, n_vocab;
    float *logits; /* [n_tok, n_vocab] */
} golden;


/* tests/data/hf/<name> */
static void hf_dir(const char *name, char *dir, size_t n) {
    char rel[128];
    snprintf(rel, sizeof rel, "tests/data/hf/%s", name);
    test_path(rel, dir, n);
}

/* <dir>/<stem>.json and <stem>_logits.bin */
static bool read_golden(const char *dir, const char *stem, golden *g) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%s/%s.json", dir, stem);
    char *text = test_read_file(path, &n);
    json_doc *d = NULL;
    bool ok = text && !json_parse(&d, text, n, path, NULL);
    const json_value *toks = json_get(json_root(d), "tokens");
    ok = ok && toks && toks->n > 0 && toks->n <= MAX_TOK &&
         json_as_i64(json_get(json_root(d), "n_vocab"), &g->n_vocab);
    g->n_tok = ok ? (int64_t)toks->n : 0;
    for (size_t i = 0; ok && i < (size_t)g->n_tok; i++) {
        int64_t t;
        ok = json_as_i64(json_at(toks, i), &t);
        g->tokens[i] = (int32_t)t;
    }
    json_free(d);
    free(text);
    snprintf(path, sizeof path, "%s/%s_logits.bin", dir, stem);
    g->logits = ok ? (float *)test_read_file(path, &n) : NULL;
    ok = g->logits && n == (size_t)(g->n_tok * g->n_vocab) * sizeof(float);
    CHECK_MSG(ok, "%s: unreadable golden", dir);
    return ok;
}

/* The logits of the golden tokens at every position, or NULL. */
static float *run(const char *path, const golden *g) {
    candle_model *m = NULL;
    if (candle_model_load(&m, path, NULL)) {
        CHECK_MSG(false, "%s: %s", path, candle_last_errmsg());
        return NULL;
    }
    candle_session *s = NULL;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = g->n_tok;
    float *logits = malloc((size_t)(g->n_tok * g->n_vocab) * sizeof *logits);
    CHECK(candle_model_get_config(m)->n_vocab == g->n_vocab);
    bool ok = logits && !candle_session_init(&s, m, &sp) &&
              !candle_session_eval(s, g->tokens, g->n_tok, logits, true);
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
        double e = test_nmse_f32(q, hf, (size_t)(g->n_tok * g->n_vocab));
        printf("%-10s candle quantize DIR f32: NMSE vs directory %.2e\n", name, e);
        CHECK_MSG(e < MAX_NMSE, "%s: quantized GGUF NMSE %.3g", name, e);
    }
    free(q);
    unlink(out);
}

/* Without llama.cpp's GGUF (a scaling llama.cpp lacks): the directory and
 * Candle's own GGUF of it. */
static void check_dir_golden(const char *name, const char *stem) {
    char dir[1024];
    hf_dir(name, dir, sizeof dir);
    golden g = {0};
    if (!read_golden(dir, stem, &g)) return;
    float *hf = run(dir, &g);
    if (hf) {
        double e = test_nmse_f32(hf, g.logits, (size_t)(g.n_tok * g.n_vocab));
        printf("%-14s %2lld tokens (%s): NMSE vs transformers: directory %.2e\n", name, (long long)g.n_tok, stem, e);
        CHECK_MSG(e < MAX_NMSE, "%s %s: directory NMSE %.3g", name, stem, e);
        check_quantized(name, dir, &g, hf);
    }
    free(hf);
    free(g.logits);
}

/* Dynamic NTK grows the base with the length a step reaches, and the cached
 * keys keep the base they were rotated with (as transformers' cache does):
 *   - golden: one 16-token forward, every key at the base of 16: the last
 *     row's logits of one 16-token step;
 *   - golden-steps: the tokens one forward each: one-token steps, and also
 *     one step asking for every row's logits, whose rows are one-row steps
 *     (what speculative verification needs to give plain decoding's bits). */
/* In one batch, each sequence at the base of its own length: 16 tokens
 * (grown) beside 6 (trained base); then a 10-token sequence asking for its
 * last 4 rows' logits: every row as the one-token step there. */
static void check_dynamic_batch(const char *name, const candle_model *m, const golden *one, const golden *steps) {
    int64_t T = one->n_tok, V = one->n_vocab;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = T + 1;
    candle_batch *b = NULL;
    candle_session *a = NULL, *c = NULL;
    float *la = malloc((size_t)V * sizeof *la), *lc = malloc((size_t)(4 * V) * sizeof *lc);
    bool ok = la && lc && !candle_batch_init(&b, m, 0) && !candle_session_init(&a, m, &sp) &&
              !candle_session_init(&c, m, &sp);
    candle_batch_seq q[2] = {{.sess = a, .tokens = one->tokens, .n = T, .logits = la},
                             {.sess = c, .tokens = one->tokens, .n = 6, .logits = lc}};
    ok = ok && !candle_batch_eval(b, q, 2);
    double e_a = ok ? test_nmse_f32(la, one->logits + (T - 1) * V, (size_t)V) : 1; /* one forward of 16 */
    double e_c = ok ? test_nmse_f32(lc, steps->logits + 5 * V, (size_t)V) : 1;     /* 6: trained base */
    if (ok) candle_session_reset(c);
    q[1] = (candle_batch_seq){.sess = c, .tokens = steps->tokens, .n = 10, .logits = lc, .n_logits = 4};
    ok = ok && !candle_batch_eval(b, &q[1], 1);
    double e_v = ok ? test_nmse_f32(lc, steps->logits + 6 * V, (size_t)(4 * V)) : 1; /* rows 6..9 as steps */
    CHECK_MSG(ok, "%s: batch: %s", name, b ? candle_batch_errmsg(b) : candle_last_errmsg());
    printf("%-14s dynamic NTK in a batch: NMSE vs transformers: 16 tokens %.2e beside 6 tokens %.2e; 4 verify "
           "rows %.2e\n", name, e_a, e_c, e_v);
    CHECK_MSG(e_a < MAX_NMSE && e_c < MAX_NMSE && e_v < MAX_NMSE, "%s: batch NMSE %.3g / %.3g / %.3g", name, e_a,
              e_c, e_v);
    candle_session_free(a);
    candle_session_free(c);
    candle_batch_free(b);
    free(la);
    free(lc);
}

static void check_dynamic(const char *name) {
    char dir[1024];
    hf_dir(name, dir, sizeof dir);
    golden one = {0}, steps = {0};
    candle_model *m = NULL;
    candle_session *s = NULL;
    if (!read_golden(dir, "golden", &one) || !read_golden(dir, "golden-steps", &steps)) {
        free(one.logits);
        return;
    }
    int64_t T = steps.n_tok, V = steps.n_vocab;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = T;
    float *lg = malloc((size_t)(T * V) * sizeof *lg), *all = malloc((size_t)(T * V) * sizeof *all);
    bool ok = lg && all && one.n_tok == T && !memcmp(one.tokens, steps.tokens, (size_t)T * sizeof *one.tokens) &&
              !candle_model_load(&m, dir, NULL) && !candle_session_init(&s, m, &sp) &&
              !candle_session_eval(s, one.tokens, T, lg, false);
    double e_one = ok ? test_nmse_f32(lg, one.logits + (T - 1) * V, (size_t)V) : 1;
    if (ok) candle_session_reset(s);
    for (int64_t t = 0; ok && t < T; t++) ok = !candle_session_eval(s, &steps.tokens[t], 1, lg + t * V, false);
    if (ok) candle_session_reset(s);
    ok = ok && !candle_session_eval(s, steps.tokens, T, all, true);
    CHECK_MSG(ok, "%s: %s", name, s ? candle_session_errmsg(s) : candle_last_errmsg());
    if (ok) {
        double e_steps = test_nmse_f32(lg, steps.logits, (size_t)(T * V)),
               e_all = test_nmse_f32(all, steps.logits, (size_t)(T * V));
        printf("%-14s dynamic NTK: NMSE vs transformers: one %lld-token forward (last row) %.2e, one-token "
               "steps %.2e, every row's logits of one step %.2e\n", name, (long long)T, e_one, e_steps, e_all);
        CHECK_MSG(e_one < MAX_NMSE && e_steps < MAX_NMSE && e_all < MAX_NMSE, "%s: NMSE %.3g / %.3g / %.3g", name,
                  e_one, e_steps, e_all);
    }
    if (ok) check_dynamic_batch(name, m, &one, &steps);
    candle_session_free(s);
    candle_model_free(m);
    free(lg);
    free(all);
    free(one.logits);
    free(steps.logits);
}

static void check_golden(const char *name, const char *stem) {
    char dir[1024], gguf[1200];
    hf_dir(name, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, name);
    golden g = {0};
    if (!read_golden(dir, stem, &g)) return;
    size_t n = (size_t)(g.n_tok * g.n_vocab);
    float *hf = run(dir, &g), *gg = run(gguf, &g);
    if (hf && gg) {
        double e_hf = test_nmse_f32(hf, g.logits, n), e_gg = test_nmse_f32(gg, g.logits, n), e_x = test_nmse_f32(gg, hf, n);
        printf("%-14s %2lld tokens: NMSE vs transformers: directory %.2e, GGUF %.2e; GGUF vs "
               "directory %.2e\n", name, (long long)g.n_tok, e_hf, e_gg, e_x);
        CHECK_MSG(e_hf < MAX_NMSE, "%s: directory NMSE %.3g", name, e_hf);
        CHECK_MSG(e_gg < MAX_NMSE, "%s: GGUF NMSE %.3g", name, e_gg);
        CHECK_MSG(e_x < MAX_NMSE, "%s: GGUF vs directory NMSE %.3g", name, e_x);
        check_quantized(name, dir, &g, hf);
    }
    free(hf);
    free(gg);
    free(g.logits);
}

static void check_family(const char *name) { check_golden(name, "golden"); }

/* Context shift re-rotates the cached keys with the model's scaling: 12
 * tokens, 4 of them (after the first 2) discarded, then one more token,
 * gives the logits of the 8 kept tokens and that one evaluated afresh. Only
 * for one-layer models: deeper layers' keys of the kept tokens saw the
 * discarded ones, so there a shift is an approximation by design. */
static void check_shift(const char *name) {
    char dir[1024];
    hf_dir(name, dir, sizeof dir);
    golden g = {0};
    candle_model *m = NULL;
    if (!read_golden(dir, "golden", &g) || candle_model_load(&m, dir, NULL)) {
        CHECK_MSG(false, "%s: %s", dir, candle_last_errmsg());
        free(g.logits);
        return;
    }
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 16;
    candle_session *a = NULL, *b = NULL;
    float *la = malloc((size_t)g.n_vocab * sizeof *la), *lb = malloc((size_t)g.n_vocab * sizeof *lb);
    int32_t kept[9];
    memcpy(kept, g.tokens, 2 * sizeof *kept);
    memcpy(kept + 2, g.tokens + 6, 6 * sizeof *kept);
    kept[8] = g.tokens[12];
    bool ok = la && lb && !candle_session_init(&a, m, &sp) && !candle_session_init(&b, m, &sp) &&
              !candle_session_eval(a, g.tokens, 12, NULL, false) && !candle_session_shift(a, 2, 4) &&
              !candle_session_eval(a, g.tokens + 12, 1, la, false) &&
              !candle_session_eval(b, kept, 9, lb, false);
    CHECK_MSG(ok, "%s: shift: %s", name, a ? candle_session_errmsg(a) : candle_last_errmsg());
    if (ok) {
        double e = test_nmse_f32(la, lb, (size_t)g.n_vocab);
        printf("%-14s shift: NMSE vs the kept tokens afresh %.2e\n", name, e);
        CHECK_MSG(e < 1e-9, "%s: shift NMSE %.3g", name, e);
    }
    candle_session_free(a);
    candle_session_free(b);
    candle_model_free(m);
    free(la);
    free(lb);
    free(g.logits);
}

int main(void) {
    /* llama, llama-bf16, llama-f16: Llama 3.1 scaling (rope_freqs.weight in
     * the GGUF, rope_type llama3 in config.json); qwen2-yarn; phi3-longrope
     * in both regimes (golden-6: 6 tokens, below the original context 8) */
    static const char *const families[] = {"llama2", "qwen2", "qwen3", "gemma2", "gemma3", "phi3",
                                           "llama", "llama-bf16", "llama-f16", "qwen2-yarn",
                                           "phi3-longrope"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) check_family(families[i]);
    check_golden("phi3-longrope", "golden-6");
    /* dynamic NTK: 6 tokens (the trained base), then past the context of 8 */
    check_dir_golden("llama-dynamic", "golden-6");
    check_dynamic("llama-dynamic");
    static const char *const shifted[] = {"qwen2-yarn", "phi3-longrope"}; /* one layer each */
    for (size_t i = 0; i < sizeof shifted / sizeof shifted[0]; i++) check_shift(shifted[i]);
    return test_done("test_hf_decoder");
}
